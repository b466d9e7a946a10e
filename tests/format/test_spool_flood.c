/* Hash flooding: a spool of kernel frames crafted to collide under the old
 * unseeded frame hash opens with short probe runs, because the tables hash
 * with the per-process seed. Probe counts, not time, are checked here; the
 * timing comparison is bench/flood.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/htab.h"
#include "hostile.h"
#include "format/spool_internal.h"
#include "spool_fixture.h"

#define N    2048
#define BITS 13 /* N ids sit in a table of 2^13 slots at load 1/2. */

/* The longest probe run a seeded table of N random keys may show: linear
 * probing at load 1/2 gives runs of a few tens; 128 is passed with
 * odds below 1e-7. */
#define MAX_RUN 128

static int never_eq(const void *ctx, uint32_t id, const void *key)
{
	(void)ctx;
	(void)id;
	(void)key;
	return 0;
}

SP_TEST(crafted_keys_collide_under_the_old_hash)
{
	/* The generator is right: under the old hash every key has one home
	 * slot, and the table's counter sees the run grow to N - 1. */
	uint64_t *addrs = malloc(N * sizeof(uint64_t));
	REQUIRE(addrs);
	flood_kernel_addrs(addrs, N, BITS, 1);
	sp_htab t;
	sp_htab_init(&t);
	for (uint32_t i = 0; i < N; i++) {
		REQUIRE_OK(sp_htab_reserve(&t));
		uint32_t h = flood_old_kernel_slot_hash(addrs[i]);
		/* Feed the old 32-bit hash as both halves' xor (fold keeps it). */
		CHECK_EQ(sp_htab_find(&t, h, never_eq, NULL, NULL), SP_HTAB_NONE);
		sp_htab_add(&t, h, i);
	}
	CHECK(t.cap <= 1u << BITS);
	CHECK(t.max_probe >= N - 1);
	sp_htab_free(&t);
	free(addrs);
}

SP_TEST(crafted_kernel_frames_keep_probe_runs_short)
{
	uint64_t *addrs = malloc(N * sizeof(uint64_t));
	REQUIRE(addrs);
	flood_kernel_addrs(addrs, N, BITS, 1);
	memsink m;
	memset(&m, 0, sizeof(m));
	REQUIRE_OK(hostile_flood_spool(memsink_write, &m, addrs, N));
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	REQUIRE_EQ(s->nframes, (uint32_t)N);
	CHECK_EQ(s->frame_ix.count, (uint32_t)N);
	CHECK(s->frame_ix.max_probe <= MAX_RUN);
	/* Every lookup averages a probe or two, not N / 2. */
	CHECK(s->frame_ix.probes <= 8ull * N);
	CHECK(s->stack_ix.max_probe <= MAX_RUN);
	printf("    crafted: frame table max run %u, %llu probes for %u frames\n",
	       s->frame_ix.max_probe, (unsigned long long)s->frame_ix.probes, N);
	stackpulse_spool_close(s);
	memsink_free(&m);
	free(addrs);
}

SP_TEST(seed_is_fixed_for_the_process)
{
	/* Tables rehash from stored hashes: the seed must never change. */
	uint64_t a = sp_hash_seed(), b = sp_hash_seed();
	CHECK(a != 0);
	CHECK_EQ(a, b);
	CHECK_EQ(sp_hash_bytes("abc", 3), sp_hash_bytes("abc", 3));
	CHECK(sp_hash_bytes("abc", 3) != sp_hash_bytes("abd", 3));
	CHECK(sp_hash64(1) != sp_hash64(2));
}
