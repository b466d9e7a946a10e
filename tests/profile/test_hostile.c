/* Hostile spools through the profile and the exporters.
 * - Report amplification: a small spool whose stacks recurse through long
 *   names. Folded output is written straight to the sink, with allocations
 *   sized by the profile, not by lines x depth x name length; past the
 *   documented cap (docs/exporters.md) the export is refused with
 *   STACKPULSE_ELIMIT before the first byte.
 * - Hash flooding: kernel frames crafted against the unseeded spool hash
 *   keep the profile's tables' probe runs short as well. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "../format/hostile.h"
#include "format/spool_reader.h"
#include "harness.h"
#include "profile/export_internal.h"
#include "profile/profile_internal.h"
#include "stackpulse.h"

static int buf_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append(ctx, data, len);
}

static stackpulse_spool *amp_spool(sp_buf *mem, uint32_t depth, uint32_t leaves)
{
	sp_buf_init(mem);
	REQUIRE_OK(hostile_amp_spool(buf_sink, mem, depth, leaves));
	stackpulse_spool *spool = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem->data, mem->len, 0, &spool));
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
	uint64_t want = leaves * (3ull + (depth + 1ull) * (1 + HOSTILE_NAME_LEN + 4) + 3);
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
		CHECK_OK(stackpulse_export(p, (enum stackpulse_export_format)fmt, NULL, count_sink,
		                           &o));
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

SP_TEST(flood_spool_keeps_profile_probe_runs_short)
{
	enum {
		N = 2048
	};
	uint64_t *addrs = malloc(N * sizeof(uint64_t));
	REQUIRE(addrs);
	flood_kernel_addrs(addrs, N, 13, 1);
	sp_buf mem;
	sp_buf_init(&mem);
	REQUIRE_OK(hostile_flood_spool(buf_sink, &mem, addrs, N));
	stackpulse_spool *spool = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem.data, mem.len, 0, &spool));
	stackpulse_profile *p = amp_profile(spool);
	const sp_htab *tabs[] = { &p->frame_tab, &p->stack_tab, &p->func_tab, &p->string_tab };
	CHECK(p->frame_tab.count >= N);
	for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++) {
		printf("    profile table %zu: %u entries, longest run %u\n", i, tabs[i]->count,
		       tabs[i]->max_probe);
		CHECK(tabs[i]->max_probe <= 128); /* As in format_test_spool_flood. */
	}
	stackpulse_profile_free(p);
	stackpulse_spool_close(spool);
	sp_buf_free(&mem);
	free(addrs);
}
