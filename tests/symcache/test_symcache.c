/* The symbol cache table: build, serialise, validate and look up, with
 * hostile inputs (every byte flipped, truncations, forged cycles and
 * overlaps with a correct checksum), and the corpus seed generator. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../support/harness.h"
#include "common/alloc.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "stackpulse.h"
#include "symcache/symcache.h"

static const uint8_t bid[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
	                         7,    8,    9,    10,   11, 12, 13, 14, 15, 16 };

/* A table with: a plain function, a two-level inline chain, an unresolved
 * entry and a chain sharing its parent. */
static void build_sample(uint8_t **data, size_t *len)
{
	sp_symcache_builder *b;
	REQUIRE_OK(sp_symcache_builder_new(bid, sizeof(bid), &b));
	sp_symcache_frame plain[] = { { "main", "/src/main.c", 10 } };
	sp_symcache_frame chain[] = { { "inner", "/src/a.h", 3 },
		                      { "middle", "/src/a.h", 7 },
		                      { "outer(int)", "/src/a.c", 20 } };
	sp_symcache_frame chain2[] = { { "inner2", "/src/b.h", 30 },
		                       { "middle", "/src/a.h", 7 },
		                       { "outer(int)", "/src/a.c", 20 } };
	sp_symcache_frame unresolved[] = { { NULL, NULL, 0 } };
	REQUIRE_OK(sp_symcache_builder_add(b, 0x1000, 16, plain, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 0x2000, 4, chain, 3));
	REQUIRE_OK(sp_symcache_builder_add(b, 0x3000, 1, unresolved, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 0x2010, 2, chain2, 3));
	REQUIRE_OK(sp_symcache_builder_finish(b, data, len));
	sp_symcache_builder_free(b);
}

SP_TEST(symcache_round_trip)
{
	uint8_t *data;
	size_t len;
	build_sample(&data, &len);
	sp_symcache t;
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	CHECK_EQ(t.range_count, 4);
	CHECK_EQ(t.build_id_len, 20);
	CHECK(memcmp(t.build_id, bid, 20) == 0);
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
	uint64_t start;
	uint32_t rlen;
	CHECK_EQ(sp_symcache_lookup(&t, 0x1005, fr, SP_SYMCACHE_MAX_FRAMES, &start, &rlen), 1);
	CHECK_STR(fr[0].name, "main");
	CHECK_STR(fr[0].file, "/src/main.c");
	CHECK_EQ(fr[0].line, 10);
	CHECK_EQ(start, 0x1000);
	CHECK_EQ(rlen, 16);
	CHECK_EQ(sp_symcache_lookup(&t, 0x1010, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL), 0);
	CHECK_EQ(sp_symcache_lookup(&t, 0xfff, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL), 0);
	REQUIRE_EQ(sp_symcache_lookup(&t, 0x2003, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL), 3);
	CHECK_STR(fr[0].name, "inner");
	CHECK_STR(fr[0].file, "/src/a.h");
	CHECK_EQ(fr[0].line, 3);
	CHECK_STR(fr[1].name, "middle");
	CHECK_EQ(fr[1].line, 7);
	CHECK_STR(fr[2].name, "outer(int)");
	CHECK_STR(fr[2].file, "/src/a.c");
	CHECK_EQ(fr[2].line, 20);
	REQUIRE_EQ(sp_symcache_lookup(&t, 0x2011, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL), 3);
	CHECK_STR(fr[0].name, "inner2");
	CHECK_STR(fr[1].name, "middle");
	/* The shared parent chain is stored once: 3 inline records, not 4. */
	CHECK_EQ(t.inline_count, 3);
	REQUIRE_EQ(sp_symcache_lookup(&t, 0x3000, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL), 1);
	CHECK(fr[0].name == NULL);
	/* A small buffer keeps the physical frame last. */
	REQUIRE_EQ(sp_symcache_lookup(&t, 0x2000, fr, 2, NULL, NULL), 2);
	CHECK_STR(fr[0].name, "inner");
	CHECK_STR(fr[1].name, "outer(int)");
	sp_free(data);
}

SP_TEST(symcache_later_entries_win_and_adjacent_merge)
{
	sp_symcache_builder *b;
	REQUIRE_OK(sp_symcache_builder_new(NULL, 0, &b));
	sp_symcache_frame f1[] = { { "old", NULL, 1 } }, f2[] = { { "new", NULL, 2 } };
	REQUIRE_OK(sp_symcache_builder_add(b, 100, 1, f1, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 100, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 101, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 100, 8, f1, 1)); /* Overlaps: later wins at 100. */
	uint8_t *data;
	size_t len;
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	sp_symcache t;
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	sp_symcache_frame fr[4];
	uint32_t rlen;
	REQUIRE_EQ(sp_symcache_lookup(&t, 100, fr, 4, NULL, &rlen), 1);
	CHECK_STR(fr[0].name, "old");
	CHECK_EQ(rlen, 8);
	CHECK_EQ(t.range_count, 1);
	sp_free(data);

	/* Adjacent equal answers share one range. */
	REQUIRE_OK(sp_symcache_builder_new(NULL, 0, &b));
	REQUIRE_OK(sp_symcache_builder_add(b, 200, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 199, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 201, 1, f1, 1));
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	CHECK_EQ(t.range_count, 2);
	sp_free(data);

	/* Unless the starts are answers (two kernel functions of one name):
	 * each keeps its own range and start. */
	REQUIRE_OK(sp_symcache_builder_new(NULL, 0, &b));
	sp_symcache_builder_keep_starts(b);
	REQUIRE_OK(sp_symcache_builder_add(b, 200, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 199, 1, f2, 1));
	REQUIRE_OK(sp_symcache_builder_add(b, 201, 1, f1, 1));
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	CHECK_EQ(t.range_count, 3);
	uint64_t start;
	REQUIRE_EQ(sp_symcache_lookup(&t, 200, fr, 4, &start, &rlen), 1);
	CHECK_STR(fr[0].name, "new");
	CHECK_EQ(start, 200);
	CHECK_EQ(rlen, 1);
	sp_free(data);
}

SP_TEST(symcache_rejects_every_corruption)
{
	uint8_t *data;
	size_t len;
	build_sample(&data, &len);
	uint8_t *copy = malloc(len);
	REQUIRE(copy);
	sp_symcache t;
	/* Every single-bit flip is caught (the checksum at least). */
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			memcpy(copy, data, len);
			copy[i] ^= (uint8_t)(1u << bit);
			int rc = sp_symcache_validate(copy, len, &t);
			if (rc == 0)
				sp_test_fail(__FILE__, __LINE__, "flip of byte %zu bit %d accepted",
				             i, bit);
		}
	}
	/* Every truncation is caught. */
	for (size_t n = 0; n < len; n++)
		CHECK(sp_symcache_validate(data, n, &t) != 0);
	CHECK_EQ(sp_symcache_validate(NULL, 0, &t), STACKPULSE_ETRUNCATED);
	free(copy);
	sp_free(data);
}

/* Rewrites a field and fixes the checksum, so only the structural checks
 * stand between the forged table and the lookup code. */
static int forge(const uint8_t *data, size_t len, size_t at, uint32_t v)
{
	uint8_t *c = malloc(len);
	memcpy(c, data, len);
	sp_put_le32(c + at, v);
	sp_put_le32(c + len - 4, sp_crc32c(0, c, len - 4));
	sp_symcache t;
	int rc = sp_symcache_validate(c, len, &t);
	free(c);
	return rc;
}

SP_TEST(symcache_rejects_forged_structure)
{
	uint8_t *data;
	size_t len;
	build_sample(&data, &len);
	sp_symcache t;
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	size_t r0 = SP_SYMCACHE_HEADER_SIZE;
	size_t inl0 = r0 + (size_t)t.range_count * SP_SYMCACHE_RANGE_SIZE;
	CHECK_EQ(forge(data, len, 4, 2), STACKPULSE_EVERSION);
	CHECK_EQ(forge(data, len, 16, t.range_count + 1), STACKPULSE_EFORMAT);
	CHECK_EQ(forge(data, len, 16, 0xffffffffu), STACKPULSE_ELIMIT);
	/* Range 1 starting before range 0 ends: unsorted. */
	CHECK_EQ(forge(data, len, r0 + SP_SYMCACHE_RANGE_SIZE, 0x1001), STACKPULSE_EFORMAT);
	/* Zero length. */
	CHECK_EQ(forge(data, len, r0 + 8, 0), STACKPULSE_EFORMAT);
	/* Name past the string table. */
	CHECK_EQ(forge(data, len, r0 + 12, t.strings_size), STACKPULSE_EFORMAT);
	/* Inline index out of range. */
	CHECK_EQ(forge(data, len, r0 + 24, t.inline_count), STACKPULSE_EFORMAT);
	/* A parent pointing at itself (a cycle) or forward. */
	CHECK_EQ(forge(data, len, inl0 + 12, 0), STACKPULSE_EFORMAT);
	CHECK_EQ(forge(data, len, inl0 + SP_SYMCACHE_INLINE_SIZE + 12, 2), STACKPULSE_EFORMAT);
	/* Reserved bytes. */
	CHECK_EQ(forge(data, len, 28, 1), STACKPULSE_EFORMAT);
	CHECK_EQ(forge(data, len, r0 + 28, 1), STACKPULSE_EFORMAT);
	sp_free(data);
}

SP_TEST(symcache_depth_limit)
{
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES + 1];
	for (int i = 0; i < SP_SYMCACHE_MAX_FRAMES + 1; i++) {
		fr[i].name = "f";
		fr[i].file = "x.c";
		fr[i].line = (uint32_t)i;
	}
	sp_symcache_builder *b;
	REQUIRE_OK(sp_symcache_builder_new(NULL, 0, &b));
	CHECK(sp_symcache_builder_add(b, 0, 1, fr, SP_SYMCACHE_MAX_FRAMES + 1) == -EINVAL);
	REQUIRE_OK(sp_symcache_builder_add(b, 0, 1, fr, SP_SYMCACHE_MAX_FRAMES));
	uint8_t *data;
	size_t len;
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	sp_symcache t;
	REQUIRE_OK(sp_symcache_validate(data, len, &t));
	sp_symcache_frame out[SP_SYMCACHE_MAX_FRAMES];
	REQUIRE_EQ(sp_symcache_lookup(&t, 0, out, SP_SYMCACHE_MAX_FRAMES, NULL, NULL),
	           SP_SYMCACHE_MAX_FRAMES);
	CHECK_EQ(out[SP_SYMCACHE_MAX_FRAMES - 1].line, SP_SYMCACHE_MAX_FRAMES - 1);
	CHECK_EQ(out[0].line, 0);
	sp_free(data);

	/* A forged 65-record chain (parents all earlier) is refused. */
	size_t n = SP_SYMCACHE_MAX_INLINE_DEPTH + 1;
	size_t tlen = SP_SYMCACHE_HEADER_SIZE + SP_SYMCACHE_RANGE_SIZE +
	              n * SP_SYMCACHE_INLINE_SIZE + 2 + 4;
	uint8_t *p = calloc(1, tlen);
	p[0] = 'S';
	p[1] = 'P';
	p[2] = 'S';
	p[3] = 'C';
	sp_put_le16(p + 4, SP_SYMCACHE_VERSION);
	sp_put_le32(p + 8, (uint32_t)tlen);
	sp_put_le32(p + 16, 1);
	sp_put_le32(p + 20, (uint32_t)n);
	sp_put_le32(p + 24, 2);
	uint8_t *r = p + SP_SYMCACHE_HEADER_SIZE;
	sp_put_le32(r + 8, 1);
	sp_put_le32(r + 12, 0);
	sp_put_le32(r + 16, SP_SYMCACHE_NONE);
	sp_put_le32(r + 24, (uint32_t)n - 1);
	uint8_t *inl = r + SP_SYMCACHE_RANGE_SIZE;
	for (size_t i = 0; i < n; i++) {
		uint8_t *c = inl + i * SP_SYMCACHE_INLINE_SIZE;
		sp_put_le32(c + 4, SP_SYMCACHE_NONE);
		sp_put_le32(c + 12, i ? (uint32_t)i - 1 : SP_SYMCACHE_NONE);
	}
	p[tlen - 6] = 'f';
	sp_put_le32(p + tlen - 4, sp_crc32c(0, p, tlen - 4));
	CHECK_EQ(sp_symcache_validate(p, tlen, &t), STACKPULSE_ELIMIT);
	/* One record shorter is fine. */
	free(p);
}

SP_TEST(symcache_alloc_failures)
{
	/* Every allocation failure is reported, never crashes or leaks. */
	for (long k = 0; k < 64; k++) {
		sp_alloc_fail_after(k);
		sp_symcache_builder *b = NULL;
		int rc = sp_symcache_builder_new(bid, 20, &b);
		sp_symcache_frame chain[] = { { "inner", "a.h", 3 }, { "outer", "a.c", 20 } };
		for (uint64_t i = 0; !rc && i < 50; i++)
			rc = sp_symcache_builder_add(b, i * 4, 2, chain, 2);
		uint8_t *data = NULL;
		size_t len = 0;
		if (!rc)
			rc = sp_symcache_builder_finish(b, &data, &len);
		sp_alloc_fail_after(-1);
		CHECK(rc == 0 || rc == -ENOMEM);
		if (!rc) {
			sp_symcache t;
			CHECK_OK(sp_symcache_validate(data, len, &t));
		}
		sp_free(data);
		sp_symcache_builder_free(b);
	}
}

static void write_seed(const char *dir, const char *name, const uint8_t *p, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/corpus/%s/%s", sp_test_source_root(), dir, name);
	FILE *f = fopen(path, "wb");
	REQUIRE(f);
	REQUIRE(fwrite(p, 1, n, f) == n);
	fclose(f);
}

/* Writes the fuzz seeds when SP_GEN_CORPUS=1; otherwise checks that the
 * committed decode seeds still validate (the format did not drift). */
SP_TEST(symcache_corpus_seeds)
{
	uint8_t *data;
	size_t len;
	build_sample(&data, &len);
	const char *gen_env = getenv("SP_GEN_CORPUS");
	int gen = gen_env && strcmp(gen_env, "1") == 0;
	if (gen) {
		write_seed("symcache_decode", "sample.spsym", data, len);
		sp_symcache_builder *b;
		uint8_t *empty;
		size_t elen;
		REQUIRE_OK(sp_symcache_builder_new(NULL, 0, &b));
		REQUIRE_OK(sp_symcache_builder_finish(b, &empty, &elen));
		sp_symcache_builder_free(b);
		write_seed("symcache_decode", "empty.spsym", empty, elen);
		sp_free(empty);
		/* Round-trip seeds: triples of (gap, len, frames) then frame bytes. */
		static const uint8_t rt1[] = { 7, 1,  2, 0, 3, 0, 1, 3, 5, 2,
			                       3, 10, 4, 0, 1, 2, 3, 4, 5 };
		static const uint8_t rt2[] = { 0, 0, 0, 200, 201, 0, 255, 3, 0, 1, 9, 9, 9 };
		static const uint8_t rt3[] = { 1, 2, 252, 1,  2,  3,  4,  5, 6,
			                       7, 8, 9,   10, 11, 12, 13, 14 };
		write_seed("symcache_roundtrip", "two_entries", rt1, sizeof(rt1));
		write_seed("symcache_roundtrip", "top_of_range", rt2, sizeof(rt2));
		write_seed("symcache_roundtrip", "deep_chain", rt3, sizeof(rt3));
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/corpus/symcache_decode/sample.spsym",
	         sp_test_source_root());
	FILE *f = fopen(path, "rb");
	if (!f) {
		sp_free(data);
		sp_test_skip(
		        "corpus/symcache_decode/sample.spsym not found (run from the repo root)");
	}
	uint8_t buf[4096];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	CHECK_EQ(n, len);
	CHECK(n == len && memcmp(buf, data, len) == 0);
	sp_free(data);
}
