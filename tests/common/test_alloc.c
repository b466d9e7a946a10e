/* Allocation wrappers and fault injection (src/common/alloc.h). */
#include "harness.h"

#include "common/alloc.h"

#include <pthread.h>

SP_TEST(allocations_succeed_and_count)
{
	sp_alloc_fail_after(-1);
	sp_alloc_reset_count();
	CHECK_EQ(sp_alloc_count(), 0);
	void *a = sp_malloc(16);
	void *z = sp_malloc(0); /* Zero-size requests still give a pointer. */
	int *c = sp_calloc(4, sizeof(int));
	void *c0 = sp_calloc(0, 8);
	void *c1 = sp_calloc(8, 0);
	REQUIRE(a && z && c && c0 && c1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(c[i], 0);
	CHECK_EQ(sp_alloc_count(), 5);
	sp_free(a);
	sp_free(z);
	sp_free(c);
	sp_free(c0);
	sp_free(c1);
	sp_free(NULL);
	CHECK_EQ(sp_alloc_count(), 5); /* Frees are not allocations. */
	sp_alloc_reset_count();
	CHECK_EQ(sp_alloc_count(), 0);
}

SP_TEST(realloc_array_grows_and_keeps_contents)
{
	uint32_t *p = sp_realloc_array(NULL, 4, sizeof(uint32_t));
	REQUIRE(p);
	for (uint32_t i = 0; i < 4; i++)
		p[i] = i * 7;
	uint32_t *q = sp_realloc_array(p, 1000, sizeof(uint32_t));
	REQUIRE(q);
	for (uint32_t i = 0; i < 4; i++)
		CHECK_EQ(q[i], i * 7);
	void *r = sp_realloc_array(q, 0, 4);
	REQUIRE(r);
	sp_free(r);
	void *s = sp_realloc_array(NULL, 5, 0);
	REQUIRE(s);
	sp_free(s);
}

SP_TEST(realloc_array_rejects_overflow_and_keeps_pointer)
{
	char *p = sp_malloc(8);
	REQUIRE(p);
	memcpy(p, "intact!", 8);
	sp_alloc_reset_count();
	CHECK(sp_realloc_array(p, SIZE_MAX / 2 + 1, 2) == NULL);
	CHECK(sp_realloc_array(p, SIZE_MAX, SIZE_MAX) == NULL);
	CHECK(sp_realloc_array(p, 2, SIZE_MAX / 2 + 1) == NULL);
	CHECK_EQ(sp_alloc_count(), 0); /* Rejected before reaching the allocator. */
	CHECK_STR(p, "intact!");
	sp_free(p);
}

SP_TEST(fail_after_zero_fails_everything)
{
	sp_alloc_fail_after(0);
	char *keep = NULL;
	CHECK(sp_malloc(1) == NULL);
	CHECK(sp_calloc(1, 1) == NULL);
	CHECK(sp_realloc_array(keep, 1, 1) == NULL);
	CHECK(sp_strdup("x") == NULL);
	CHECK(sp_strndup("xy", 1) == NULL);
	CHECK(sp_malloc(1) == NULL); /* Stays failed until disabled. */
	sp_alloc_fail_after(-1);
	void *ok = sp_malloc(1);
	CHECK(ok != NULL);
	sp_free(ok);
}

SP_TEST(fail_after_n_lets_n_succeed)
{
	for (long n = 1; n <= 4; n++) {
		sp_alloc_fail_after(n);
		void *got[6];
		int succeeded = 0;
		for (int i = 0; i < 6; i++) {
			got[i] = sp_malloc(8);
			if (got[i])
				succeeded++;
			else
				CHECK(i >= n); /* Failures only after the first n. */
		}
		sp_alloc_fail_after(-1);
		CHECK_EQ(succeeded, n);
		for (int i = 0; i < 6; i++)
			sp_free(got[i]);
	}
}

SP_TEST(realloc_failure_keeps_old_block)
{
	char *p = sp_malloc(4);
	REQUIRE(p);
	memcpy(p, "abc", 4);
	sp_alloc_fail_after(0);
	CHECK(sp_realloc_array(p, 1 << 20, 1) == NULL);
	sp_alloc_fail_after(-1);
	CHECK_STR(p, "abc");
	sp_free(p);
}

SP_TEST(strdup_and_strndup_copy)
{
	char *a = sp_strdup("stack");
	REQUIRE(a);
	CHECK_STR(a, "stack");
	sp_free(a);
	char *b = sp_strndup("pulse-and-more", 5);
	REQUIRE(b);
	CHECK_STR(b, "pulse");
	sp_free(b);
	char *e = sp_strndup(NULL, 0); /* Zero bytes need no source. */
	REQUIRE(e);
	CHECK_STR(e, "");
	sp_free(e);
	const char raw[3] = { 'a', '\0', 'b' };
	char *r = sp_strndup(raw, 3); /* Copies bytes, embedded NULs included. */
	REQUIRE(r);
	CHECK(memcmp(r, raw, 3) == 0 && r[3] == '\0');
	sp_free(r);
	CHECK(sp_strndup("x", SIZE_MAX) == NULL);
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* Injection on the main thread must not reach this one. */
	void *p = sp_malloc(8);
	uint64_t count = sp_alloc_count();
	sp_free(p);
	return (void *)(uintptr_t)(p != NULL && count == 1);
}

SP_TEST(fault_injection_is_per_thread)
{
	sp_alloc_fail_after(0);
	pthread_t t;
	void *ret = NULL;
	int rc = pthread_create(&t, NULL, other_thread, NULL);
	if (rc == 0)
		rc = pthread_join(t, &ret);
	sp_alloc_fail_after(-1);
	REQUIRE_EQ(rc, 0);
	CHECK(ret == (void *)1);
}
