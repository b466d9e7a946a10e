/* The common containers: the intern table, the growable array and the
 * sorted-array search. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/hash.h"
#include "common/htab.h"
#include "common/search.h"
#include "harness.h"
#include "stackpulse.h"

static int u64_eq(const void *ctx, uint32_t id, const void *key)
{
	return ((const uint64_t *)ctx)[id] == *(const uint64_t *)key;
}

SP_TEST(htab_interns_and_counts_probes)
{
	enum {
		N = 10000
	};
	static uint64_t keys[N];
	sp_htab t;
	sp_htab_init(&t);
	for (uint32_t i = 0; i < N; i++) {
		keys[i] = (uint64_t)i * 4096; /* Structured keys: the seeded hash spreads them. */
		REQUIRE_OK(sp_htab_reserve(&t));
		CHECK_EQ(sp_htab_find(&t, sp_hash64(keys[i]), u64_eq, keys, &keys[i]),
		         SP_HTAB_NONE);
		sp_htab_add(&t, sp_hash64(keys[i]), i);
	}
	CHECK_EQ(t.count, (uint32_t)N);
	CHECK(t.cap >= 2u * N);
	for (uint32_t i = 0; i < N; i++)
		CHECK_EQ(sp_htab_find(&t, sp_hash64(keys[i]), u64_eq, keys, &keys[i]), i);
	uint64_t absent = 12345;
	CHECK_EQ(sp_htab_find(&t, sp_hash64(absent), u64_eq, keys, &absent), SP_HTAB_NONE);
	CHECK(t.max_probe < 128);
	CHECK(t.probes < 8ull * N);
	sp_htab_free(&t);
	CHECK_EQ(t.cap, 0u);
}

SP_TEST(htab_one_hash_is_one_run)
{
	/* Every key with the same hash: the counter sees the run grow. */
	static uint64_t keys[300];
	sp_htab t;
	sp_htab_init(&t);
	for (uint32_t i = 0; i < 300; i++) {
		keys[i] = i;
		REQUIRE_OK(sp_htab_reserve(&t));
		sp_htab_add(&t, 42, i);
	}
	CHECK(t.max_probe >= 299);
	CHECK_EQ(sp_htab_find(&t, 42, u64_eq, keys, &keys[299]), 299u);
	sp_htab_free(&t);
}

SP_TEST(htab_allocation_failure_keeps_the_table)
{
	sp_htab t;
	sp_htab_init(&t);
	REQUIRE_OK(sp_htab_reserve(&t));
	sp_htab_add(&t, 1, 0);
	sp_alloc_fail_after(0);
	int rc = 0;
	for (uint32_t i = 1; i < 1000 && !rc; i++)
		if (!(rc = sp_htab_reserve(&t)))
			sp_htab_add(&t, sp_hash64(i), i);
	sp_alloc_fail_after(-1);
	CHECK_EQ(rc, -ENOMEM);
	uint64_t k = 0;
	CHECK_EQ(sp_htab_find(&t, 1, u64_eq, &k, &k), 0u);
	sp_htab_free(&t);
}

SP_TEST(grow_doubles_up_to_the_cap)
{
	uint32_t *a = NULL, cap = 0;
	REQUIRE_OK(SP_GROW(a, cap, 1, 100, "things"));
	CHECK_EQ(cap, 16u);
	REQUIRE_OK(SP_GROW(a, cap, 17, 100, "things"));
	CHECK_EQ(cap, 32u);
	REQUIRE_OK(SP_GROW(a, cap, 65, 100, "things"));
	CHECK_EQ(cap, 100u); /* 128 would pass the cap. */
	a[99] = 7;
	CHECK_EQ(SP_GROW(a, cap, 101, 100, "things"), STACKPULSE_ELIMIT);
	CHECK(strstr(stackpulse_last_error(), "more than 100 things") != NULL);
	CHECK_EQ(cap, 100u);
	CHECK_EQ(a[99], 7u);
	sp_alloc_fail_after(0);
	uint32_t *b = NULL, bcap = 0;
	CHECK_EQ(SP_GROW(b, bcap, 1, 100, "things"), -ENOMEM);
	sp_alloc_fail_after(-1);
	CHECK(b == NULL && bcap == 0);
	CHECK_EQ(sp_grow_cap(0, 3, 8), 8u);
	sp_free(a);
}

SP_TEST(partition_point_finds_bounds)
{
	const uint64_t v[] = { 10, 20, 20, 20, 30, 40 };
	size_t n = sizeof(v) / sizeof(v[0]), r;
	SP_PARTITION_POINT(r, n, i, v[i] <= 20);
	CHECK_EQ(r, (size_t)4); /* One past the last 20. */
	SP_PARTITION_POINT(r, n, i, v[i] < 20);
	CHECK_EQ(r, (size_t)1); /* The first 20. */
	SP_PARTITION_POINT(r, n, i, v[i] <= 5);
	CHECK_EQ(r, (size_t)0);
	SP_PARTITION_POINT(r, n, i, v[i] <= 99);
	CHECK_EQ(r, n);
	SP_PARTITION_POINT(r, 0, i, v[i] <= 99);
	CHECK_EQ(r, (size_t)0);
	/* Every prefix length of a long array. */
	static uint32_t big[1000];
	for (uint32_t i = 0; i < 1000; i++)
		big[i] = i * 2;
	for (uint32_t k = 0; k <= 2000; k++) {
		SP_PARTITION_POINT(r, 1000, i, big[i] < k);
		CHECK_EQ(r, (size_t)((k + 1) / 2));
	}
}
