/* CRC-32C known vectors (RFC 3720 appendix B.4) and chaining. */
#include "harness.h"

#include "common/checksum.h"

SP_TEST(crc32c_check_value)
{
	CHECK(sp_crc32c(0, "123456789", 9) == 0xE3069283u);
}

SP_TEST(crc32c_empty_input_is_identity)
{
	CHECK(sp_crc32c(0, NULL, 0) == 0);
	CHECK(sp_crc32c(0xE3069283u, "", 0) == 0xE3069283u);
}

SP_TEST(crc32c_rfc3720_vectors)
{
	uint8_t b[32];
	memset(b, 0, sizeof(b));
	CHECK(sp_crc32c(0, b, sizeof(b)) == 0x8A9136AAu);
	memset(b, 0xff, sizeof(b));
	CHECK(sp_crc32c(0, b, sizeof(b)) == 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	CHECK(sp_crc32c(0, b, sizeof(b)) == 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	CHECK(sp_crc32c(0, b, sizeof(b)) == 0x113FDB5Cu);
}

SP_TEST(crc32c_chains_across_splits)
{
	uint8_t b[257];
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 31 + 7);
	uint32_t whole = sp_crc32c(0, b, sizeof(b));
	for (size_t cut = 0; cut <= sizeof(b); cut++) {
		uint32_t part = sp_crc32c(sp_crc32c(0, b, cut), b + cut, sizeof(b) - cut);
		CHECK(part == whole);
	}
}

SP_TEST(crc32c_detects_every_single_bit_flip)
{
	uint8_t b[64];
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)i;
	uint32_t good = sp_crc32c(0, b, sizeof(b));
	for (size_t bit = 0; bit < sizeof(b) * 8; bit++) {
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		CHECK(sp_crc32c(0, b, sizeof(b)) != good);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}

/* The table-driven code against the bit-at-a-time definition, for every
 * length and start alignment around the eight-byte steps. */
static uint32_t crc_bitwise(const uint8_t *b, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= b[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

SP_TEST(crc32c_matches_the_bitwise_definition)
{
	uint8_t b[80];
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 167 + 13);
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; off + n <= sizeof(b); n++)
			CHECK_EQ(sp_crc32c(0, b + off, n), crc_bitwise(b + off, n));
}

/* The instruction path (x86_64 SSE4.2, taken from 64 bytes on) and the
 * portable tables agree at every length, alignment and starting value. */
SP_TEST(crc32c_instruction_and_tables_agree)
{
	static uint8_t b[1 << 16];
	uint32_t x = 12345;
	for (size_t i = 0; i < sizeof(b); i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n < 300; n++)
			CHECK_EQ(sp_crc32c(0, b + off, n), sp_crc32c_portable(0, b + off, n));
	CHECK_EQ(sp_crc32c(0x12345678u, b, sizeof(b)),
	         sp_crc32c_portable(0x12345678u, b, sizeof(b)));
	CHECK_EQ(sp_crc32c(0, b + 3, sizeof(b) - 3), crc_bitwise(b + 3, sizeof(b) - 3));
	/* Chained over uneven splits, each part on either side of 64 bytes. */
	uint32_t c = 0;
	size_t pos = 0, step = 1;
	while (pos < sizeof(b)) {
		size_t n = step < sizeof(b) - pos ? step : sizeof(b) - pos;
		c = sp_crc32c(c, b + pos, n);
		pos += n;
		step = step * 3 % 1000 + 1;
	}
	CHECK_EQ(c, sp_crc32c_portable(0, b, sizeof(b)));
}
