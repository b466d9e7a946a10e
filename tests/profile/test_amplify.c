/* Report amplification: a small spool whose stacks recurse through long
 * names. Folded output is written straight to the sink, with allocations
 * sized by the profile, not by lines x depth x name length; past the
 * documented cap (docs/exporters.md) the export is refused with
 * STACKPULSE_ELIMIT before the first byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "format/spool_writer.h"
#include "harness.h"
#include "profile/export_internal.h"
#include "stackpulse.h"

#define NAME_LEN 60000

static int buf_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append(ctx, data, len);
}

/* A spool of one thread: @p leaves lines, each a chain of @p depth frames
 * of one long-named kernel function ending in a leaf of its own long name. */
static stackpulse_spool *amp_spool(sp_buf *mem, uint32_t depth, uint32_t leaves)
{
	sp_buf_init(mem);
	sp_writer *w = NULL;
	sp_writer_opts wo = { 0, 4096 };
	REQUIRE_OK(sp_writer_new(&wo, buf_sink, mem, &w));
	sp_meta meta = { 1, 1, 100, 8192, "cpu-clock", "x86_64", "6.1.0", "h", 1, "" };
	REQUIRE_OK(sp_writer_meta(w, &meta));
	uint32_t proc, thr;
	REQUIRE_OK(sp_writer_process(w, 7, UINT32_MAX, 1, "amp", "amp", &proc));
	REQUIRE_OK(sp_writer_thread(w, proc, 7, 1, "amp", &thr));
	char *name = malloc(NAME_LEN + 1);
	REQUIRE(name);
	uint32_t *frames = malloc((depth + 1) * sizeof(uint32_t));
	REQUIRE(frames);
	for (uint32_t i = 0; i <= leaves; i++) {
		memset(name, 'a' + (int)(i % 26), NAME_LEN);
		snprintf(name + NAME_LEN - 12, 13, "%012u", i);
		REQUIRE_OK(sp_writer_ksym(w, 0xffffffff81000000ull + 0x1000ull * i, name, NULL));
	}
	struct stackpulse_raw_frame rf;
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_KERNEL;
	rf.module = UINT32_MAX;
	rf.pycode = UINT32_MAX;
	rf.offset = 0xffffffff81000010ull;
	uint32_t rec;
	REQUIRE_OK(sp_writer_frame(w, &rf, &rec));
	for (uint32_t d = 1; d <= depth; d++)
		frames[d] = rec;
	for (uint32_t i = 1; i <= leaves; i++) {
		rf.offset = 0xffffffff81000010ull + 0x1000ull * i;
		uint32_t leaf, s;
		REQUIRE_OK(sp_writer_frame(w, &rf, &leaf));
		frames[0] = leaf;
		REQUIRE_OK(sp_writer_stack_frames(w, frames, depth + 1, &s));
		REQUIRE_OK(sp_writer_sample(w, 10 + i, thr, s, 1, 1));
	}
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	free(frames);
	free(name);
	stackpulse_spool *spool = NULL;
	REQUIRE_OK(stackpulse_spool_open_memory(mem->data, mem->len, &spool));
	return spool;
}

typedef struct counter {
	uint64_t bytes;
	uint64_t calls;
	size_t largest;
} counter;

static int count_sink(void *ctx, const void *data, size_t len)
{
	counter *c = ctx;
	(void)data;
	c->bytes += len;
	c->calls++;
	if (len > c->largest)
		c->largest = len;
	return 0;
}

static stackpulse_profile *amp_profile(stackpulse_spool *spool)
{
	stackpulse_profile *p = NULL;
	REQUIRE_OK(stackpulse_profile_build(spool, NULL, NULL, &p));
	return p;
}

SP_TEST(amplified_folded_streams_with_bounded_memory)
{
	const uint32_t depth = 200, leaves = 4;
	sp_buf mem;
	stackpulse_spool *spool = amp_spool(&mem, depth, leaves);
	stackpulse_profile *p = amp_profile(spool);
	/* Each line: "amp", then depth + 1 frames of ';' NAME "_[k]", " 1\n". */
	uint64_t want = leaves * (3ull + (depth + 1ull) * (1 + NAME_LEN + 4) + 3);
	counter c = { 0, 0, 0 };
	sp_alloc_reset_count();
	REQUIRE_OK(stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, NULL, count_sink, &c));
	uint64_t used = sp_alloc_bytes();
	printf("    spool %zu bytes -> folded %llu bytes in %llu writes, %llu bytes allocated\n",
	       mem.len, (unsigned long long)c.bytes, (unsigned long long)c.calls,
	       (unsigned long long)used);
	CHECK_EQ(c.bytes, want);
	CHECK(c.largest <= SP_OUT_BLOCK);
	CHECK(c.calls >= want / SP_OUT_BLOCK);
	/* The output is 48 MB; the exporter holds the 64 KiB block plus tables
	 * sized by the profile's few hundred stack nodes. */
	CHECK(used < 1u << 20);
	for (int fmt = STACKPULSE_EXPORT_PPROF; fmt <= STACKPULSE_EXPORT_SVG; fmt++) {
		counter o = { 0, 0, 0 };
		sp_alloc_reset_count();
		CHECK_OK(stackpulse_export(p, fmt, NULL, count_sink, &o));
		used = sp_alloc_bytes();
		printf("    format %d: %llu bytes out, %llu bytes allocated\n", fmt,
		       (unsigned long long)o.bytes, (unsigned long long)used);
		CHECK(o.bytes > 0);
		CHECK(used < 2u << 20);
	}
	stackpulse_profile_free(p);
	stackpulse_spool_close(spool);
	sp_buf_free(&mem);
}

SP_TEST(amplified_folded_past_the_cap_is_refused_before_writing)
{
	/* 80 lines x 1024 frames x 60 KB: about 4.9 GB of folded text from a
	 * spool of a few kilobytes. */
	const uint32_t depth = 1023, leaves = 80;
	sp_buf mem;
	stackpulse_spool *spool = amp_spool(&mem, depth, leaves);
	stackpulse_profile *p = amp_profile(spool);
	counter c = { 0, 0, 0 };
	sp_alloc_reset_count();
	CHECK_EQ(stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, NULL, count_sink, &c),
	         STACKPULSE_ELIMIT);
	CHECK(strstr(stackpulse_last_error(), "cap") != NULL);
	CHECK_EQ(c.calls, 0u);
	CHECK(sp_alloc_bytes() < 4u << 20);
	printf("    spool %zu bytes: %s\n", mem.len, stackpulse_last_error());
	/* The same through a path leaves no file behind. */
	char path[512];
	snprintf(path, sizeof(path), "%s/amp.folded", sp_test_tmpdir());
	CHECK_EQ(stackpulse_export_to_path(p, STACKPULSE_EXPORT_FOLDED, NULL, path),
	         STACKPULSE_ELIMIT);
	FILE *f = fopen(path, "rb");
	CHECK(f == NULL);
	if (f)
		fclose(f);
	stackpulse_profile_free(p);
	stackpulse_spool_close(spool);
	sp_buf_free(&mem);
}
