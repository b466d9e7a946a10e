/* Growable byte buffer (src/common/buf.h): growth, limits, and that a failed
 * append leaves the buffer exactly as it was. */
#include "harness.h"

#include "common/alloc.h"
#include "common/buf.h"
#include "common/cursor.h"

#include <errno.h>

SP_TEST(init_is_empty_and_free_resets)
{
	sp_buf b;
	memset(&b, 0x5a, sizeof(b));
	sp_buf_init(&b);
	CHECK(b.data == NULL);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(b.cap, 0);
	CHECK_EQ(b.limit, 0);
	sp_buf_free(&b); /* Freeing an empty buffer is fine. */
	REQUIRE_OK(sp_buf_append(&b, "abc", 3));
	CHECK(b.data != NULL);
	sp_buf_free(&b);
	CHECK(b.data == NULL);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(b.cap, 0);
}

SP_TEST(grows_by_doubling_from_256)
{
	sp_buf b;
	sp_buf_init(&b);
	REQUIRE_OK(sp_buf_u8(&b, 1));
	CHECK_EQ(b.cap, 256);
	uint8_t chunk[100];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (uint8_t)i;
	size_t total = 1;
	while (total < 5000) {
		REQUIRE_OK(sp_buf_append(&b, chunk, sizeof(chunk)));
		total += sizeof(chunk);
		CHECK_EQ(b.len, total);
		CHECK(b.cap >= b.len);
		CHECK(b.cap % 256 == 0);
	}
	CHECK_EQ(b.cap, 8192);
	CHECK_EQ(b.data[0], 1);
	for (size_t i = 1; i < total; i++)
		if (b.data[i] != (uint8_t)((i - 1) % 100)) {
			CHECK_EQ(b.data[i], (i - 1) % 100);
			break;
		}
	sp_buf_free(&b);
}

SP_TEST(reset_keeps_allocation)
{
	sp_buf b;
	sp_buf_init(&b);
	REQUIRE_OK(sp_buf_append(&b, "hello", 5));
	uint8_t *data = b.data;
	size_t cap = b.cap;
	sp_buf_reset(&b);
	CHECK_EQ(b.len, 0);
	CHECK(b.data == data);
	CHECK_EQ(b.cap, cap);
	REQUIRE_OK(sp_buf_append(&b, "x", 1));
	CHECK(b.data == data);
	sp_buf_free(&b);
}

SP_TEST(append_zero_bytes_with_null_pointer)
{
	sp_buf b;
	sp_buf_init(&b);
	CHECK_OK(sp_buf_append(&b, NULL, 0));
	CHECK_EQ(b.len, 0);
	CHECK_OK(sp_buf_reserve(&b, 0));
	sp_buf_free(&b);
}

SP_TEST(limit_is_enforced_exactly)
{
	sp_buf b;
	sp_buf_init(&b);
	b.limit = 10;
	CHECK_OK(sp_buf_append(&b, "0123456789", 10));
	CHECK_EQ(b.cap, 10); /* Growth is capped at the limit. */
	CHECK_EQ(sp_buf_u8(&b, 'x'), STACKPULSE_ELIMIT);
	CHECK_EQ(b.len, 10);
	CHECK(memcmp(b.data, "0123456789", 10) == 0);
	CHECK_STR(stackpulse_last_error(), "buffer would exceed 10 bytes");
	CHECK_EQ(sp_buf_reserve(&b, 0), 0);
	sp_buf_reset(&b);
	CHECK_EQ(sp_buf_reserve(&b, 11), STACKPULSE_ELIMIT);
	CHECK_OK(sp_buf_reserve(&b, 10));
	sp_buf_free(&b);
}

SP_TEST(growth_caps_at_limit_between_doublings)
{
	sp_buf b;
	sp_buf_init(&b);
	b.limit = 300;
	REQUIRE_OK(sp_buf_reserve(&b, 200));
	CHECK_EQ(b.cap, 256);
	b.len = 200;
	REQUIRE_OK(sp_buf_reserve(&b, 100));
	CHECK_EQ(b.cap, 300);
	CHECK_EQ(sp_buf_reserve(&b, 101), STACKPULSE_ELIMIT);
	sp_buf_free(&b);
}

SP_TEST(huge_requests_do_not_overflow)
{
	sp_buf b;
	sp_buf_init(&b);
	REQUIRE_OK(sp_buf_append(&b, "ab", 2));
	CHECK_EQ(sp_buf_reserve(&b, SIZE_MAX), STACKPULSE_ELIMIT);
	CHECK_EQ(sp_buf_reserve(&b, SIZE_MAX / 2), STACKPULSE_ELIMIT);
	CHECK_EQ(sp_buf_reserve(&b, SIZE_MAX / 2 - 1), STACKPULSE_ELIMIT);
	CHECK_EQ(sp_buf_blob(&b, "x", SIZE_MAX - 3), STACKPULSE_ELIMIT);
	CHECK_EQ(b.len, 2);
	sp_buf_free(&b);
}

SP_TEST(allocation_failure_leaves_buffer_unchanged)
{
	sp_buf b;
	sp_buf_init(&b);
	sp_alloc_fail_after(0);
	CHECK_EQ(sp_buf_u8(&b, 1), -ENOMEM);
	CHECK(b.data == NULL);
	CHECK_EQ(b.len, 0);
	CHECK_STR(stackpulse_last_error(), "cannot grow buffer to 256 bytes");
	sp_alloc_fail_after(-1);
	REQUIRE_OK(sp_buf_append(&b, "abc", 3));
	uint8_t *data = b.data;
	sp_alloc_fail_after(0);
	uint8_t big[300] = { 0 };
	CHECK_EQ(sp_buf_append(&b, big, sizeof(big)), -ENOMEM);
	CHECK(b.data == data);
	CHECK_EQ(b.len, 3);
	CHECK_EQ(b.cap, 256);
	CHECK(memcmp(b.data, "abc", 3) == 0);
	/* Appends that fit need no allocation and still work. */
	CHECK_OK(sp_buf_append(&b, "de", 2));
	sp_alloc_fail_after(-1);
	CHECK_EQ(b.len, 5);
	sp_buf_free(&b);
}

SP_TEST(every_writer_fails_cleanly_when_allocation_fails)
{
	for (int which = 0; which < 7; which++) {
		sp_buf b;
		sp_buf_init(&b);
		sp_alloc_fail_after(0);
		int rc = 0;
		switch (which) {
		case 0: rc = sp_buf_u8(&b, 1); break;
		case 1: rc = sp_buf_le32(&b, 1); break;
		case 2: rc = sp_buf_le64(&b, 1); break;
		case 3: rc = sp_buf_varint(&b, 1); break;
		case 4: rc = sp_buf_svarint(&b, -1); break;
		case 5: rc = sp_buf_blob(&b, "x", 1); break;
		default: rc = sp_buf_str(&b, "x"); break;
		}
		sp_alloc_fail_after(-1);
		CHECK_EQ(rc, -ENOMEM);
		CHECK_EQ(b.len, 0);
		sp_buf_free(&b);
	}
}

SP_TEST(blob_fails_atomically_at_limit)
{
	/* The length prefix must not be written when the bytes do not fit. */
	sp_buf b;
	sp_buf_init(&b);
	b.limit = 8;
	CHECK_EQ(sp_buf_blob(&b, "0123456789", 10), STACKPULSE_ELIMIT);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(sp_buf_str(&b, "0123456"),
	         STACKPULSE_ELIMIT); /* 1 + 7 fits, but reserve is for a worst-case prefix. */
	CHECK_EQ(b.len, 0);
	sp_buf_free(&b);
}

SP_TEST(writers_encode_what_the_cursor_reads)
{
	sp_buf b;
	sp_buf_init(&b);
	REQUIRE_OK(sp_buf_u8(&b, 0xfe));
	REQUIRE_OK(sp_buf_le32(&b, 0x01020304u));
	REQUIRE_OK(sp_buf_le64(&b, 0x0102030405060708ULL));
	REQUIRE_OK(sp_buf_varint(&b, 300));
	REQUIRE_OK(sp_buf_svarint(&b, -300));
	REQUIRE_OK(sp_buf_blob(&b, "\0\1", 2));
	REQUIRE_OK(sp_buf_str(&b, "name"));
	REQUIRE_OK(sp_buf_str(&b, NULL));
	const uint8_t want[] = { 0xfe, 0x04, 0x03, 0x02, 0x01, 0x08, 0x07, 0x06, 0x05,
		                 0x04, 0x03, 0x02, 0x01, 0xac, 0x02, 0xd7, 0x04, 0x02,
		                 0x00, 0x01, 0x04, 'n',  'a',  'm',  'e',  0x00 };
	REQUIRE_EQ(b.len, sizeof(want));
	CHECK(memcmp(b.data, want, sizeof(want)) == 0);
	sp_buf_free(&b);
}
