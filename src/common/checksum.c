#include "checksum.h"

/* Slice-by-8 tables, built on first use (no global constructor): eight
 * bytes per step, several times faster than a byte at a time on the
 * multi-megabyte tables the symbol cache validates. */
static uint32_t crc_table[8][256];
static int crc_table_ready;

static void build_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
			                  crc_table[0][crc_table[t - 1][i] & 0xff];
	__atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t load_le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint32_t sp_crc32c_portable(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
		build_table(); /* Racing builders write identical values. */
	crc = ~crc;
	for (; n >= 8; n -= 8, b += 8) {
		uint32_t lo = crc ^ load_le32(b), hi = load_le32(b + 4);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
	}
	for (; n > 0; n--, b++)
		crc = crc_table[0][(crc ^ *b) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
#include <string.h>

/* SSE4.2's crc32 instruction computes exactly this CRC, eight bytes per
 * instruction: about four times the table's speed on the symbol cache's
 * multi-megabyte tables. */
static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *b, size_t n)
{
	/* Inline assembly: compilers disagree on the target-feature names
	 * that unlock the builtins (sse4.2, crc32), the assembler does not. */
	uint64_t c = ~crc;
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t v;
		memcpy(&v, b, 8);
		__asm__("crc32q %1, %0" : "+r"(c) : "rm"(v));
	}
	uint32_t c32 = (uint32_t)c;
	for (; n > 0; n--, b++)
		__asm__("crc32b %1, %0" : "+r"(c32) : "rm"(*b));
	return ~c32;
}

/* CPUID leaf 1, ECX bit 20. Asked directly: <cpuid.h> is a system header,
 * which the pure layers do not include. */
static int have_sse42(void)
{
	static int known; /* 0: not asked yet, 1: no, 2: yes */
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (v == 0) {
		unsigned a = 1, b, c = 0, d;
		__asm__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
		v = (c >> 20) & 1u ? 2 : 1;
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v == 2;
}

uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n)
{
	if (n >= 64 && have_sse42())
		return crc32c_sse42(crc, p, n);
	return sp_crc32c_portable(crc, p, n);
}
#else
uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n)
{
	return sp_crc32c_portable(crc, p, n);
}
#endif
