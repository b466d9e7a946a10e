/* Hostile spools, shared by tests/format/test_spool_flood.c,
 * tests/profile/test_hostile.c and bench/flood.c:
 * - hash-flood keys: kernel-frame addresses that land in one probe run
 *   under the unseeded form of the spool reader's frame hash (the murmur3
 *   finalizer, sp_mix64, combined field by field, folded to 32 bits);
 * - amplification: stacks recursing through long kernel-symbol names. */
#ifndef SP_TEST_FORMAT_HOSTILE_H
#define SP_TEST_FORMAT_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "format/spool_writer.h"
#include "stackpulse.h"

static inline uint64_t flood_old_combine(uint64_t h, uint64_t v)
{
	return sp_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* The old slot hash of a kernel frame at @p addr (sp_frame_hash, folded). */
static inline uint32_t flood_old_kernel_slot_hash(uint64_t addr)
{
	uint64_t h = sp_mix64((uint64_t)(uint32_t)STACKPULSE_FRAME_KERNEL);
	h = flood_old_combine(h, UINT32_MAX); /* module */
	h = flood_old_combine(h, addr);
	h = flood_old_combine(h, UINT32_MAX); /* pycode */
	h = flood_old_combine(h, 0);          /* line */
	return (uint32_t)(h ^ (h >> 32));
}

/* Fills @p out with @p n distinct kernel addresses whose old hashes, in
 * their low @p bits bits, fall below @p window: every table of up to 2^bits
 * slots puts them in one run of home slots (window 1: one slot). Costs
 * about n x 2^bits / window hash evaluations. */
static inline void flood_kernel_addrs(uint64_t *out, size_t n, unsigned bits, uint32_t window)
{
	uint32_t mask = (uint32_t)((1ull << bits) - 1);
	uint64_t a = 0xffffffff81000000ull;
	for (size_t i = 0; i < n; a++)
		if ((flood_old_kernel_slot_hash(a) & mask) < window)
			out[i++] = a;
}

/* @p n distinct kernel addresses with no structure. */
static inline void flood_random_addrs(uint64_t *out, size_t n)
{
	uint64_t x = 0x243f6a8885a308d3ull;
	for (size_t i = 0; i < n; i++) {
		x = sp_mix64(x + 0x9e3779b97f4a7c15ull);
		out[i] = 0xffffffff81000000ull + ((x >> 16) << 4) + i; /* distinct */
	}
}

/* Returns the first error of @p call from the enclosing function. */
#define HOSTILE_OK(call)                                                                           \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* A writer with one process and thread; the caller finishes and frees it. */
static inline int hostile_begin(stackpulse_write_fn sink, void *ctx, sp_writer **w, uint32_t *thr)
{
	sp_writer_opts wo = { 0, 4096 };
	HOSTILE_OK(sp_writer_new(&wo, sink, ctx, w));
	sp_meta meta = { 1, 1, 100, 8192, "cpu-clock", "x86_64", "6.1.0", "h", 1, "" };
	uint32_t proc;
	HOSTILE_OK(sp_writer_meta(*w, &meta));
	HOSTILE_OK(sp_writer_process(*w, 7, UINT32_MAX, 1, "amp", "amp", &proc));
	return sp_writer_thread(*w, proc, 7, 1, "amp", thr);
}

static inline int hostile_end(sp_writer *w, int rc)
{
	if (!rc)
		rc = sp_writer_finish(w);
	sp_writer_free(w);
	return rc;
}

static inline int hostile_flood_body(sp_writer *w, uint32_t thr, const uint64_t *addrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct stackpulse_raw_frame rf;
		memset(&rf, 0, sizeof(rf));
		rf.kind = STACKPULSE_FRAME_KERNEL;
		rf.module = UINT32_MAX;
		rf.pycode = UINT32_MAX;
		rf.offset = addrs[i];
		uint32_t f, s;
		HOSTILE_OK(sp_writer_frame(w, &rf, &f));
		HOSTILE_OK(sp_writer_stack_frames(w, &f, 1, &s));
		HOSTILE_OK(sp_writer_sample(w, 10 + i, thr, s, 1, 1));
	}
	return 0;
}

/* A spool of @p n kernel frames at @p addrs, one stack and sample each. */
static inline int hostile_flood_spool(stackpulse_write_fn sink, void *ctx, const uint64_t *addrs,
                                      size_t n)
{
	sp_writer *w = NULL;
	uint32_t thr;
	int rc = hostile_begin(sink, ctx, &w, &thr);
	if (!rc)
		rc = hostile_flood_body(w, thr, addrs, n);
	return w ? hostile_end(w, rc) : rc;
}

#define HOSTILE_NAME_LEN 60000

static inline int hostile_amp_body(sp_writer *w, uint32_t thr, uint32_t depth, uint32_t leaves,
                                   char *name, uint32_t *frames)
{
	for (uint32_t i = 0; i <= leaves; i++) {
		memset(name, 'a' + (int)(i % 26), HOSTILE_NAME_LEN);
		snprintf(name + HOSTILE_NAME_LEN - 12, 13, "%012u", i);
		HOSTILE_OK(sp_writer_ksym(w, 0xffffffff81000000ull + 0x1000ull * i, name, NULL));
	}
	struct stackpulse_raw_frame rf;
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_KERNEL;
	rf.module = UINT32_MAX;
	rf.pycode = UINT32_MAX;
	rf.offset = 0xffffffff81000010ull;
	uint32_t rec;
	HOSTILE_OK(sp_writer_frame(w, &rf, &rec));
	for (uint32_t d = 1; d <= depth; d++)
		frames[d] = rec;
	for (uint32_t i = 1; i <= leaves; i++) {
		rf.offset = 0xffffffff81000010ull + 0x1000ull * i;
		uint32_t s;
		HOSTILE_OK(sp_writer_frame(w, &rf, &frames[0]));
		HOSTILE_OK(sp_writer_stack_frames(w, frames, depth + 1, &s));
		HOSTILE_OK(sp_writer_sample(w, 10 + i, thr, s, 1, 1));
	}
	return 0;
}

/* A spool of one thread "amp": @p leaves lines, each a chain of @p depth
 * frames of one kernel function named by HOSTILE_NAME_LEN bytes, ending in
 * a leaf with a long name of its own. Its folded text is about
 * leaves x (depth + 1) x HOSTILE_NAME_LEN bytes. */
static inline int hostile_amp_spool(stackpulse_write_fn sink, void *ctx, uint32_t depth,
                                    uint32_t leaves)
{
	char *name = malloc(HOSTILE_NAME_LEN + 1);
	uint32_t *frames = malloc((depth + 1) * sizeof(uint32_t));
	sp_writer *w = NULL;
	uint32_t thr;
	int rc = !name || !frames ? -12 /* -ENOMEM */ : hostile_begin(sink, ctx, &w, &thr);
	if (!rc)
		rc = hostile_amp_body(w, thr, depth, leaves, name, frames);
	if (w)
		rc = hostile_end(w, rc);
	free(name);
	free(frames);
	return rc;
}

#endif
