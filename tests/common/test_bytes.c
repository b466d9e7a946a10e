/* Little-endian fields, zigzag and LEB128 varints (src/common/bytes.h). */
#include "harness.h"

#include "common/bytes.h"
#include "common/hash.h"

SP_TEST(le_fields_read_known_bytes)
{
	const uint8_t b[8] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88 };
	CHECK_EQ(sp_le16(b), 0x0201);
	CHECK_EQ(sp_le32(b), 0x04030201);
	CHECK(sp_le64(b) == 0x8807060504030201ULL);
	const uint8_t hi[2] = { 0xff, 0xfe };
	CHECK_EQ(sp_le16(hi), 0xfeff);
}

SP_TEST(le_fields_write_then_read)
{
	uint8_t b[8];
	memset(b, 0xaa, sizeof(b));
	sp_put_le16(b, 0xbeef);
	CHECK_EQ(b[0], 0xef);
	CHECK_EQ(b[1], 0xbe);
	CHECK_EQ(b[2], 0xaa); /* Nothing past the field is touched. */
	sp_put_le32(b, 0xdeadbeefu);
	CHECK_EQ(b[0], 0xef);
	CHECK_EQ(b[3], 0xde);
	CHECK_EQ(b[4], 0xaa);
	CHECK(sp_le32(b) == 0xdeadbeefu);
	sp_put_le64(b, 0x0123456789abcdefULL);
	CHECK_EQ(b[0], 0xef);
	CHECK_EQ(b[7], 0x01);
	CHECK(sp_le64(b) == 0x0123456789abcdefULL);
	sp_put_le64(b, UINT64_MAX);
	CHECK(sp_le64(b) == UINT64_MAX);
}

SP_TEST(zigzag_maps_small_signed_to_small_unsigned)
{
	CHECK(sp_zigzag(0) == 0);
	CHECK(sp_zigzag(-1) == 1);
	CHECK(sp_zigzag(1) == 2);
	CHECK(sp_zigzag(-2) == 3);
	CHECK(sp_zigzag(2147483647) == 4294967294ULL);
	CHECK(sp_zigzag(-2147483648LL) == 4294967295ULL);
	CHECK(sp_zigzag(INT64_MAX) == UINT64_MAX - 1);
	CHECK(sp_zigzag(INT64_MIN) == UINT64_MAX);
	const int64_t vals[] = {
		0, 1, -1, 63, -64, 64, -65, 1000000, -1000000, INT64_MAX, INT64_MIN
	};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		CHECK(sp_unzigzag(sp_zigzag(vals[i])) == vals[i]);
	for (uint64_t u = 0; u < 1000; u++)
		CHECK(sp_zigzag(sp_unzigzag(u)) == u);
}

static void check_encoding(uint64_t v, const uint8_t *want, size_t want_len)
{
	uint8_t out[SP_VARINT_MAX + 2];
	memset(out, 0xee, sizeof(out));
	size_t n = sp_varint_put(out, v);
	CHECK_EQ(n, want_len);
	CHECK(memcmp(out, want, want_len) == 0);
	CHECK_EQ(out[n], 0xee); /* No write past the encoding. */
	uint64_t back = 12345;
	CHECK_EQ(sp_varint_get(out, n, &back), (int)n);
	CHECK(back == v);
}

SP_TEST(varint_known_encodings)
{
	check_encoding(0, (const uint8_t[]){ 0x00 }, 1);
	check_encoding(1, (const uint8_t[]){ 0x01 }, 1);
	check_encoding(127, (const uint8_t[]){ 0x7f }, 1);
	check_encoding(128, (const uint8_t[]){ 0x80, 0x01 }, 2);
	check_encoding(300, (const uint8_t[]){ 0xac, 0x02 }, 2);
	check_encoding(16383, (const uint8_t[]){ 0xff, 0x7f }, 2);
	check_encoding(16384, (const uint8_t[]){ 0x80, 0x80, 0x01 }, 3);
	check_encoding(UINT32_MAX, (const uint8_t[]){ 0xff, 0xff, 0xff, 0xff, 0x0f }, 5);
	check_encoding(
	        1ULL << 63,
	        (const uint8_t[]){ 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 },
	        10);
	check_encoding(
	        UINT64_MAX,
	        (const uint8_t[]){ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 },
	        10);
}

SP_TEST(varint_round_trips_at_every_length_boundary)
{
	for (unsigned k = 0; k < 64; k++) {
		uint64_t p = 1ULL << k;
		const uint64_t vals[] = { p - 1, p, p + 1 };
		for (size_t i = 0; i < 3; i++) {
			uint8_t out[SP_VARINT_MAX];
			size_t n = sp_varint_put(out, vals[i]);
			/* Length is ceil(bits / 7), at least 1. */
			unsigned bits = 0;
			for (uint64_t v = vals[i]; v; v >>= 1)
				bits++;
			CHECK_EQ(n, bits ? (bits + 6) / 7 : 1);
			uint64_t back;
			CHECK_EQ(sp_varint_get(out, n, &back), (int)n);
			CHECK(back == vals[i]);
		}
	}
}

SP_TEST(varint_truncated_input_needs_more_bytes)
{
	uint8_t out[SP_VARINT_MAX];
	size_t n = sp_varint_put(out, UINT64_MAX);
	uint64_t v = 7;
	for (size_t avail = 0; avail < n; avail++) {
		CHECK_EQ(sp_varint_get(out, avail, &v), 0);
		CHECK(v == 7); /* Untouched on failure. */
	}
	CHECK_EQ(sp_varint_get(out, 0, &v), 0);
}

SP_TEST(varint_rejects_overlong_and_non_canonical)
{
	uint64_t v = 7;
	/* A trailing zero group adds nothing: non-canonical. */
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0x80, 0x00 }, 2, &v), -1);
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0x81, 0x80, 0x00 }, 3, &v), -1);
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
	                                          0x80, 0x00 },
	                       10, &v),
	         -1);
	/* A single 0x00 is the canonical zero. */
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0x00 }, 1, &v), 1);
	CHECK(v == 0);
	v = 7;
	/* Tenth byte may only carry bit 63. */
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                          0xff, 0x02 },
	                       10, &v),
	         -1);
	CHECK_EQ(sp_varint_get((const uint8_t[]){ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                          0xff, 0x7f },
	                       10, &v),
	         -1);
	/* Eleven bytes: continuation set on the tenth. */
	uint8_t eleven[11];
	memset(eleven, 0x80, sizeof(eleven));
	eleven[10] = 0x01;
	CHECK_EQ(sp_varint_get(eleven, sizeof(eleven), &v), -1);
	eleven[9] = 0x81;
	CHECK_EQ(sp_varint_get(eleven, sizeof(eleven), &v), -1);
	CHECK(v == 7);
}

SP_TEST(varint_stops_at_first_terminator)
{
	const uint8_t b[] = { 0x05, 0xff, 0xff };
	uint64_t v = 0;
	CHECK_EQ(sp_varint_get(b, sizeof(b), &v), 1);
	CHECK(v == 5);
}

SP_TEST(hash_is_deterministic_and_spreads)
{
	CHECK(sp_hash64(0) == sp_hash64(0));
	CHECK(sp_hash64(1) != sp_hash64(2));
	/* Seeded: zero does not hash to zero, and the seed is fixed once drawn. */
	CHECK(sp_hash64(0) != 0);
	CHECK(sp_hash_seed() != 0 && sp_hash_seed() == sp_hash_seed());
	CHECK(sp_mix64(0) == 0); /* The unseeded finaliser fixes zero. */
	CHECK(sp_hash_combine(1, 2) != sp_hash_combine(2, 1));
	CHECK(sp_hash_bytes("abc", 3) == sp_hash_bytes("abc", 3));
	CHECK(sp_hash_bytes("abc", 3) != sp_hash_bytes("abd", 3));
	CHECK(sp_hash_bytes("", 0) != sp_hash_bytes("\0", 1));
	/* Consecutive keys land in different low bits (table buckets). */
	unsigned seen = 0;
	for (uint64_t k = 0; k < 64; k++)
		seen |= 1u << (sp_hash64(k + 1) & 31);
	CHECK(__builtin_popcount(seen) >= 20); /* ~27 expected from a good mix. */
}
