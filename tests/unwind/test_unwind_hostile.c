/* The unwinder against hostile inputs: random registers and stack bytes,
 * stacks seeded with real code addresses, odd mappings and sizes. Nothing
 * may crash (run under ASan), and every emitted address after the first
 * must lie in a mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stackpulse.h"
#include "perf_sampler.c"
#include "unwind/unwind.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static int in_maps(const ps_procmap *maps, int n, uint64_t pc)
{
	for (int i = 0; i < n; i++)
		if (pc >= maps[i].start && pc < maps[i].end)
			return 1;
	return 0;
}

/* A value that is, with some probability, something an unwinder might
 * follow: a code address, a stack address, zero, or noise. */
static uint64_t tempting(const ps_procmap *maps, int n, uint64_t stack_start, size_t len)
{
	switch (rnd() % 5) {
	case 0: {
		const ps_procmap *m = &maps[rnd() % (uint64_t)n];
		return m->start + rnd() % (m->end - m->start);
	}
	case 1: return stack_start + rnd() % (len + 64) - 32;
	case 2: return 0;
	case 3: return rnd() & ~7ULL;
	default: return rnd();
	}
}

SP_TEST(random_registers_and_stacks_never_crash)
{
	ps_procmap *maps = NULL;
	int n = ps_read_maps(getpid(), &maps);
	REQUIRE(n > 0);
	sp_unwinder *u = NULL;
	sp_unwind_space *s = NULL;
	REQUIRE_OK(sp_unwinder_new(&u));
	REQUIRE_OK(sp_unwind_space_new(u, getpid(), &s));
	REQUIRE_OK(ps_feed_maps(s, maps, n));
	enum {
		STACK = 4096
	};
	uint8_t *stack = malloc(STACK);
	REQUIRE(stack);
	uint64_t pcs[64];
	size_t deep = 0;
	for (int iter = 0; iter < 30000; iter++) {
		uint64_t stack_start = 0x7ffd00000000ULL + (rnd() % 4096) * 8;
		size_t len = (size_t)(rnd() % (STACK + 1));
		if (iter % 3 == 0)
			len &= ~(size_t)7;
		for (size_t i = 0; i + 8 <= STACK; i += 8) {
			uint64_t v = tempting(maps, n, stack_start, len);
			memcpy(stack + i, &v, 8);
		}
		sp_regs regs;
		memset(&regs, 0, sizeof(regs));
		regs.abi = iter % 50 == 0 ? rnd() % 4 : 2;
		regs.count = iter % 40 == 0 ? (uint32_t)(rnd() % 50) : SP_UNWIND_MAX_REGS;
		for (int i = 0; i < SP_UNWIND_MAX_REGS; i++)
			regs.value[i] = tempting(maps, n, stack_start, len);
		sp_unwind_result r;
		uint32_t max = (uint32_t)(rnd() % 65);
		/* Heap copy of exactly len bytes so ASan sees any overread. */
		uint8_t *exact = malloc(len ? len : 1);
		REQUIRE(exact);
		memcpy(exact, stack, len);
		CHECK_OK(sp_unwind(s, &regs, len ? exact : NULL, len, stack_start, pcs, max, &r));
		free(exact);
		CHECK(r.count <= max);
		for (uint32_t k = 1; k < r.count; k++)
			CHECK(in_maps(maps, n, pcs[k]));
		deep += r.count > 2;
	}
	printf("    %zu of 30000 random inputs gave more than two frames\n", deep);
	/* Random mappings, including bogus files, over the same space. */
	for (int i = 0; i < 200; i++) {
		uint64_t a = rnd() & 0x7fffffffffffULL, b = a + (rnd() % 0x100000);
		const char *paths[] = { "/dev/zero",    "/proc/self/maps", "[vdso]", "//anon", "",
			                "/nonexistent", "/etc/passwd",     "/tmp",   "[heap]" };
		int rc = sp_unwind_space_map(s, a, b, rnd() % 0x10000, paths[rnd() % 9], NULL, 0);
		CHECK(b > a ? rc == 0 : rc != 0);
	}
	sp_unwind_space *child = NULL;
	REQUIRE_OK(sp_unwind_space_fork(s, 1, &child));
	sp_unwind_space_free(child);
	free(stack);
	free(maps);
	sp_unwind_space_free(s);
	sp_unwinder_free(u);
}

/* Mappings overlapping in every way keep the list sorted and disjoint:
 * lookups return the newest mapping. */
SP_TEST(overlapping_mappings_replace_older_ones)
{
	sp_unwinder *u = NULL;
	sp_unwind_space *s = NULL;
	REQUIRE_OK(sp_unwinder_new(&u));
	REQUIRE_OK(sp_unwind_space_new(u, 0, &s));
	uint8_t stack[64];
	memset(stack, 0, sizeof(stack));
	for (int i = 0; i < 5000; i++) {
		uint64_t a = (rnd() % 64) * 0x1000, b = a + (1 + rnd() % 16) * 0x1000;
		CHECK_OK(sp_unwind_space_map(s, a, b, 0, "//anon", NULL, 0));
	}
	/* Whatever is mapped now: a frame-pointer chain inside the copy walks. */
	sp_unwind_space_clear(s);
	CHECK_OK(sp_unwind_space_map(s, 0x400000, 0x500000, 0, "//anon", NULL, 0));
	uint64_t fp1 = 0x7000 + 16, ra = 0x400123, zero = 0;
	memcpy(stack + 16, &zero, 8); /* [fp1] = 0: the outermost frame. */
	memcpy(stack + 24, &ra, 8);
	sp_regs regs;
	memset(&regs, 0, sizeof(regs));
	regs.abi = 2;
	regs.count = SP_UNWIND_MAX_REGS;
#if defined(__x86_64__)
	regs.value[6] = fp1;      /* BP */
	regs.value[7] = 0x7000;   /* SP */
	regs.value[8] = 0x400010; /* IP */
#else
	regs.value[29] = fp1;
	regs.value[31] = 0x7000;
	regs.value[32] = 0x400010;
#endif
	uint64_t pcs[8];
	sp_unwind_result r;
	CHECK_OK(sp_unwind(s, &regs, stack, sizeof(stack), 0x7000, pcs, 8, &r));
	CHECK_EQ(r.count, 2);
	CHECK_EQ(pcs[1], 0x400123);
	CHECK_EQ(r.truncated, 0);
	CHECK_EQ(r.used_fp, 1);
	/* A frame pointer pointing below sp or outside the copy stops the walk. */
#if defined(__x86_64__)
	regs.value[6] = 0x6ff0;
#else
	regs.value[29] = 0x6ff0;
#endif
	CHECK_OK(sp_unwind(s, &regs, stack, sizeof(stack), 0x7000, pcs, 8, &r));
	CHECK_EQ(r.count, 1);
	CHECK_EQ(r.truncated, 1);
	sp_unwind_space_free(s);
	sp_unwinder_free(u);
}

/* Real samples of the target, mutated: flipped bytes, words replaced by
 * tempting values, clobbered registers. */
SP_TEST(mutated_real_samples_never_crash)
{
	const char *dir = ps_target_dir(sp_test_source_root(), sp_test_tmpdir());
	if (!dir)
		sp_test_skip("cannot build the target with gcc");
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/sptarget", dir);
	char *args[] = { exe, "signal", NULL };
	pid_t pid = ps_start_target(exe, args);
	REQUIRE(pid > 0);
	ps_procmap *maps = NULL;
	int n = ps_read_maps(pid, &maps);
	sp_unwinder *u = NULL;
	sp_unwind_space *s = NULL;
	int rc = n > 0 ? sp_unwinder_new(&u) : -1;
	if (rc == 0)
		rc = sp_unwind_space_new(u, pid, &s);
	if (rc == 0)
		rc = ps_feed_maps(s, maps, n);
	ps_samples ss;
	memset(&ss, 0, sizeof(ss));
	int prc = rc == 0 ? ps_sample_process(pid, 1000, 8192, 200, &ss) : 0;
	ps_stop_target(pid);
	REQUIRE_OK(rc);
	if (prc != 0)
		sp_test_skip("perf_event_open refused");
	REQUIRE(ss.n > 20);
	uint64_t pcs[64];
	size_t deep = 0, runs = 0;
	for (size_t i = 0; i < ss.n; i++) {
		const ps_sample *orig = &ss.v[i];
		for (int m = 0; m < 40; m++) {
			size_t len = (size_t)orig->stack_len;
			uint8_t *st = malloc(len ? len : 1);
			REQUIRE(st);
			memcpy(st, orig->stack, len);
			sp_regs regs = orig->regs;
			int flips = 1 + (int)(rnd() % 8);
			for (int f = 0; f < flips && len; f++) {
				size_t at = (size_t)(rnd() % len);
				if (rnd() % 2 || at + 8 > len) {
					st[at] ^= (uint8_t)(1u << (rnd() % 8));
				} else {
					uint64_t v = tempting(maps, n, orig->sp, len);
					memcpy(st + (at & ~(size_t)7), &v, 8);
				}
			}
			if (rnd() % 4 == 0 && regs.count)
				regs.value[rnd() % regs.count] = tempting(maps, n, orig->sp, len);
			sp_unwind_result r;
			CHECK_OK(sp_unwind(s, &regs, len ? st : NULL, len, orig->sp, pcs, 64, &r));
			for (uint32_t k = 1; k < r.count; k++)
				CHECK(in_maps(maps, n, pcs[k]));
			deep += r.count > 4;
			runs++;
			free(st);
		}
	}
	printf("    %zu of %zu mutated samples still gave more than four frames\n", deep, runs);
	CHECK(deep > 0);
	ps_samples_free(&ss);
	free(maps);
	sp_unwind_space_free(s);
	sp_unwinder_free(u);
}
