/* Bounds-checked reader (src/common/cursor.h): every getter at its exact
 * size, one byte short, and with the error detail it leaves. */
#include "harness.h"

#include "common/buf.h"
#include "common/bytes.h"
#include "common/cursor.h"
#include "common/error.h"

#include <stdlib.h>

static void check_detail_has(const char *needle)
{
	const char *detail = stackpulse_last_error();
	if (!strstr(detail, needle))
		sp_test_fail(__FILE__, __LINE__, "detail \"%s\" lacks \"%s\"", detail, needle);
}

SP_TEST(make_and_left)
{
	const uint8_t b[3] = { 1, 2, 3 };
	sp_cursor c = sp_cursor_make(b, sizeof(b));
	CHECK(c.p == b);
	CHECK_EQ(c.len, 3);
	CHECK_EQ(c.pos, 0);
	CHECK_EQ(sp_cursor_left(&c), 3);
	sp_cursor empty = sp_cursor_make(NULL, 0);
	CHECK_EQ(sp_cursor_left(&empty), 0);
}

SP_TEST(u8_reads_then_truncates)
{
	const uint8_t b[2] = { 0xab, 0xcd };
	sp_cursor c = sp_cursor_make(b, sizeof(b));
	uint8_t v = 0;
	CHECK_OK(sp_cursor_u8(&c, &v, "first"));
	CHECK_EQ(v, 0xab);
	CHECK_OK(sp_cursor_u8(&c, &v, "second"));
	CHECK_EQ(v, 0xcd);
	v = 9;
	CHECK_EQ(sp_cursor_u8(&c, &v, "third"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(v, 9);
	CHECK_EQ(c.pos, 2);
	CHECK_EQ(stackpulse_last_error_code(), STACKPULSE_ETRUNCATED);
	CHECK_STR(stackpulse_last_error(), "third: need 1 bytes at offset 2, 0 left");
}

SP_TEST(le32_exact_and_short)
{
	const uint8_t b[5] = { 0x78, 0x56, 0x34, 0x12, 0xff };
	uint32_t v = 0;
	sp_cursor c = sp_cursor_make(b, 4);
	CHECK_OK(sp_cursor_le32(&c, &v, "magic"));
	CHECK(v == 0x12345678u);
	CHECK_EQ(sp_cursor_left(&c), 0);
	for (size_t len = 0; len < 4; len++) {
		c = sp_cursor_make(b, len);
		v = 1;
		CHECK_EQ(sp_cursor_le32(&c, &v, "magic"), STACKPULSE_ETRUNCATED);
		CHECK_EQ(c.pos, 0);
		CHECK_EQ(v, 1);
		check_detail_has("magic: need 4 bytes at offset 0");
	}
}

SP_TEST(le64_exact_and_short)
{
	uint8_t b[9];
	for (int i = 0; i < 9; i++)
		b[i] = (uint8_t)(i + 1);
	uint64_t v = 0;
	sp_cursor c = sp_cursor_make(b, 9);
	CHECK_OK(sp_cursor_le64(&c, &v, "time"));
	CHECK(v == 0x0807060504030201ULL);
	CHECK_EQ(c.pos, 8);
	CHECK_EQ(sp_cursor_le64(&c, &v, "time"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(c.pos, 8);
	check_detail_has("time: need 8 bytes at offset 8, 1 left");
}

SP_TEST(varint_reads_and_reports)
{
	const uint8_t b[] = { 0xac, 0x02, 0x80 };
	sp_cursor c = sp_cursor_make(b, sizeof(b));
	uint64_t v = 0;
	CHECK_OK(sp_cursor_varint(&c, &v, "count"));
	CHECK(v == 300);
	CHECK_EQ(c.pos, 2);
	v = 5;
	CHECK_EQ(sp_cursor_varint(&c, &v, "count"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(v, 0); /* Failed reads leave 0, not stale data. */
	CHECK_EQ(c.pos, 2);
	check_detail_has("count: need 2 bytes at offset 2, 1 left");

	const uint8_t bad[] = { 0x80, 0x00 };
	c = sp_cursor_make(bad, sizeof(bad));
	CHECK_EQ(sp_cursor_varint(&c, &v, "size"), STACKPULSE_EFORMAT);
	CHECK_EQ(c.pos, 0);
	CHECK_STR(stackpulse_last_error(), "size: bad varint at offset 0");

	c = sp_cursor_make(NULL, 0);
	CHECK_EQ(sp_cursor_varint(&c, &v, "empty"), STACKPULSE_ETRUNCATED);
}

SP_TEST(varint_max_enforces_limit)
{
	const uint8_t b[] = { 0x0a, 0x0b };
	sp_cursor c = sp_cursor_make(b, sizeof(b));
	uint64_t v = 0;
	CHECK_OK(sp_cursor_varint_max(&c, 10, &v, "n"));
	CHECK(v == 10);
	CHECK_EQ(sp_cursor_varint_max(&c, 10, &v, "n"), STACKPULSE_ELIMIT);
	CHECK_STR(stackpulse_last_error(), "n: 11 exceeds 10 at offset 1");
	CHECK_EQ(c.pos, 1); /* Failed reads do not move the cursor. */
	CHECK_OK(sp_cursor_varint_max(&c, 11, &v, "n"));
	CHECK_EQ(c.pos, 2);
	CHECK_EQ(sp_cursor_varint_max(&c, 10, &v, "n"), STACKPULSE_ETRUNCATED);
}

SP_TEST(varint32_rejects_wide_values)
{
	uint8_t b[SP_VARINT_MAX * 2];
	size_t n = sp_varint_put(b, UINT32_MAX);
	n += sp_varint_put(b + n, (uint64_t)UINT32_MAX + 1);
	sp_cursor c = sp_cursor_make(b, n);
	uint32_t v = 0;
	CHECK_OK(sp_cursor_varint32(&c, &v, "id"));
	CHECK(v == UINT32_MAX);
	v = 3;
	CHECK_EQ(sp_cursor_varint32(&c, &v, "id"), STACKPULSE_ELIMIT);
	CHECK_EQ(v, 3);
	check_detail_has("4294967296 exceeds 4294967295");
	size_t at = c.pos;
	uint64_t wide = 0;
	CHECK_OK(sp_cursor_varint(&c, &wide, "id")); /* Still there to read. */
	CHECK(wide == (uint64_t)UINT32_MAX + 1);
	CHECK(c.pos > at);
	CHECK_EQ(sp_cursor_varint32(&c, &v, "id"), STACKPULSE_ETRUNCATED);
}

SP_TEST(svarint_decodes_zigzag)
{
	sp_buf out;
	sp_buf_init(&out);
	const int64_t vals[] = { 0, -1, 1, -64, 64, INT64_MIN, INT64_MAX };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		REQUIRE_OK(sp_buf_svarint(&out, vals[i]));
	sp_cursor c = sp_cursor_make(out.data, out.len);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int64_t v = 0;
		CHECK_OK(sp_cursor_svarint(&c, &v, "delta"));
		CHECK(v == vals[i]);
	}
	int64_t v = 4;
	CHECK_EQ(sp_cursor_svarint(&c, &v, "delta"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(v, 4);
	const uint8_t bad[] = { 0xff, 0x00 };
	c = sp_cursor_make(bad, sizeof(bad));
	CHECK_EQ(sp_cursor_svarint(&c, &v, "delta"), STACKPULSE_EFORMAT);
	sp_buf_free(&out);
}

SP_TEST(bytes_borrows_in_place)
{
	const uint8_t b[4] = { 1, 2, 3, 4 };
	sp_cursor c = sp_cursor_make(b, sizeof(b));
	const uint8_t *p = NULL;
	CHECK_OK(sp_cursor_bytes(&c, 0, &p, "none"));
	CHECK(p == b);
	CHECK_OK(sp_cursor_bytes(&c, 3, &p, "three"));
	CHECK(p == b);
	CHECK_EQ(c.pos, 3);
	p = NULL;
	CHECK_EQ(sp_cursor_bytes(&c, 2, &p, "two"), STACKPULSE_ETRUNCATED);
	CHECK(p == NULL);
	CHECK_EQ(c.pos, 3);
	/* A length near SIZE_MAX must not wrap the bounds check. */
	CHECK_EQ(sp_cursor_bytes(&c, SIZE_MAX, &p, "huge"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(sp_cursor_bytes(&c, SIZE_MAX - 2, &p, "huge"), STACKPULSE_ETRUNCATED);
	CHECK_OK(sp_cursor_bytes(&c, 1, &p, "last"));
	CHECK(p == b + 3);
}

SP_TEST(blob_checks_length_then_bytes)
{
	sp_buf out;
	sp_buf_init(&out);
	REQUIRE_OK(sp_buf_blob(&out, "hello", 5));
	REQUIRE_OK(sp_buf_blob(&out, "", 0));
	REQUIRE_OK(sp_buf_str(&out, "toolong"));
	sp_cursor c = sp_cursor_make(out.data, out.len);
	const uint8_t *p = NULL;
	size_t len = 99;
	CHECK_OK(sp_cursor_blob(&c, 5, &p, &len, "name"));
	CHECK_EQ(len, 5);
	CHECK(memcmp(p, "hello", 5) == 0);
	CHECK_OK(sp_cursor_blob(&c, 5, &p, &len, "name"));
	CHECK_EQ(len, 0);
	size_t at = c.pos;
	len = 99;
	CHECK_EQ(sp_cursor_blob(&c, 5, &p, &len, "name"), STACKPULSE_ELIMIT);
	CHECK_EQ(len, 99);
	check_detail_has("name: 7 exceeds 5");
	/* A length that promises more than is left. */
	CHECK_EQ(c.pos, at);
	c = sp_cursor_make(out.data + at, 4);
	CHECK_EQ(sp_cursor_blob(&c, 100, &p, &len, "name"), STACKPULSE_ETRUNCATED);
	CHECK_EQ(c.pos, 0);
	check_detail_has("name: need 7 bytes at offset 1, 3 left");
	/* A malformed length. */
	const uint8_t bad[] = { 0x80, 0x00, 'x' };
	c = sp_cursor_make(bad, sizeof(bad));
	CHECK_EQ(sp_cursor_blob(&c, 100, &p, &len, "name"), STACKPULSE_EFORMAT);
	sp_buf_free(&out);
}

SP_TEST(every_getter_on_every_prefix_of_a_record)
{
	/* A record of every field kind, read from each truncated prefix:
	 * each read either succeeds within bounds or fails cleanly. */
	sp_buf out;
	sp_buf_init(&out);
	REQUIRE_OK(sp_buf_u8(&out, 7));
	REQUIRE_OK(sp_buf_le32(&out, 0xcafebabeu));
	REQUIRE_OK(sp_buf_le64(&out, 0x1122334455667788ULL));
	REQUIRE_OK(sp_buf_varint(&out, 1ULL << 40));
	REQUIRE_OK(sp_buf_svarint(&out, -123456));
	REQUIRE_OK(sp_buf_str(&out, "frame"));
	for (size_t len = 0; len <= out.len; len++) {
		/* Copy to an exact-size heap block so ASan sees any overread. */
		uint8_t *copy = malloc(len ? len : 1);
		REQUIRE(copy);
		memcpy(copy, out.data, len);
		sp_cursor c = sp_cursor_make(copy, len);
		uint8_t u8;
		uint32_t u32;
		uint64_t u64, var;
		int64_t s64;
		const uint8_t *p;
		size_t n;
		int rc = sp_cursor_u8(&c, &u8, "u8");
		if (!rc)
			rc = sp_cursor_le32(&c, &u32, "le32");
		if (!rc)
			rc = sp_cursor_le64(&c, &u64, "le64");
		if (!rc)
			rc = sp_cursor_varint(&c, &var, "varint");
		if (!rc)
			rc = sp_cursor_svarint(&c, &s64, "svarint");
		if (!rc)
			rc = sp_cursor_blob(&c, 64, &p, &n, "blob");
		if (len == out.len) {
			CHECK_OK(rc);
			CHECK_EQ(u8, 7);
			CHECK(u32 == 0xcafebabeu);
			CHECK(u64 == 0x1122334455667788ULL);
			CHECK(var == 1ULL << 40);
			CHECK_EQ(s64, -123456);
			CHECK_EQ(n, 5);
			CHECK(memcmp(p, "frame", 5) == 0);
		} else {
			CHECK_EQ(rc, STACKPULSE_ETRUNCATED);
		}
		CHECK(c.pos <= len);
		free(copy);
	}
	sp_buf_free(&out);
}
