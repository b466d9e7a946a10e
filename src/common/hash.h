/* Non-cryptographic hashing for interning tables. */
#ifndef SP_COMMON_HASH_H
#define SP_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Mixes a 64-bit value into a well-spread hash. */
static inline uint64_t sp_hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t sp_hash_combine(uint64_t h, uint64_t v)
{
	return sp_hash64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* FNV-1a over bytes, finished with sp_hash64. */
static inline uint64_t sp_hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return sp_hash64(h);
}

#endif
