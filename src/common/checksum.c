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

uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n)
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
