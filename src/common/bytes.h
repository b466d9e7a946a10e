/* Little-endian fields and LEB128 varints. Multi-byte fields of any format
 * are read and written only through these helpers. */
#ifndef SP_COMMON_BYTES_H
#define SP_COMMON_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline uint16_t sp_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t sp_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

static inline uint64_t sp_le64(const uint8_t *p)
{
	return (uint64_t)sp_le32(p) | ((uint64_t)sp_le32(p + 4) << 32);
}

static inline void sp_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void sp_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void sp_put_le64(uint8_t *p, uint64_t v)
{
	sp_put_le32(p, (uint32_t)v);
	sp_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Zigzag maps small signed values to small unsigned ones. */
static inline uint64_t sp_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t sp_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Longest LEB128 encoding of a uint64_t. */
#define SP_VARINT_MAX 10

/* Encodes @p v at @p out (room for SP_VARINT_MAX bytes); returns the length. */
static inline size_t sp_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

/* Decodes a varint from @p p with @p avail bytes. Returns the bytes used,
 * 0 when the input ends inside the varint, or -1 when it is over-long or
 * overflows 64 bits (non-canonical encodings are rejected too). */
static inline int sp_varint_get(const uint8_t *p, size_t avail, uint64_t *v)
{
	uint64_t result = 0;
	for (size_t i = 0; i < SP_VARINT_MAX; i++) {
		if (i >= avail)
			return 0;
		uint8_t b = p[i];
		if (i == SP_VARINT_MAX - 1 && b > 1)
			return -1;
		result |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			if (b == 0 && i > 0)
				return -1;
			*v = result;
			return (int)(i + 1);
		}
	}
	return -1;
}

#endif
