#include "checksum.h"

/* Slice-by-one table, built on first use: small and fast enough for chunk
 * sizes, with no global constructor. */
static uint32_t crc_table[256];
static int crc_table_ready;

static void build_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
	__atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
		build_table(); /* Racing builders write identical values. */
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}
