/* The unwinder against libunwind as its oracle: real perf samples of a
 * target built with gcc -O2 and no frame pointers are unwound by
 * sp_unwind and by libunwind's remote API over the same register and stack
 * copy; the return-address chains must agree. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "harness.h"
#include "perf_sampler.c"
#include "libunwind_oracle.c"

#define MAX_FRAMES 128

static const char *target_dir(void)
{
	const char *dir = ps_target_dir(sp_test_source_root(), sp_test_tmpdir());
	if (!dir)
		sp_test_skip("cannot build the target with gcc");
	return dir;
}

/* What both unwinders made of one capture. */
typedef struct tally {
	size_t samples;
	size_t both_complete; /* sp_unwind not truncated, libunwind reached the end. */
	size_t agree;         /* ... and the chains are equal. */
	size_t ours_longer;   /* libunwind stopped early, ours went on (prefix equal). */
	size_t frames;        /* Frames of the agreeing chains. */
} tally;

/* Samples the target in @p mode (with @p arg) and unwinds every sample both
 * ways. */
static tally run_mode(const char *mode, const char *arg)
{
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/sptarget", target_dir());
	char *args[] = { exe, (char *)mode, (char *)arg, NULL };
	pid_t pid = ps_start_target(exe, args);
	REQUIRE(pid > 0);
	ps_procmap *maps = NULL;
	int nmaps = ps_read_maps(pid, &maps);
	sp_unwinder *u = NULL;
	sp_unwind_space *space = NULL;
	lo_oracle *o = NULL;
	int rc = nmaps > 0 ? 0 : -1;
	if (rc == 0)
		rc = sp_unwinder_new(&u);
	if (rc == 0)
		rc = sp_unwind_space_new(u, pid, &space);
	if (rc == 0)
		rc = ps_feed_maps(space, maps, nmaps);
	if (rc == 0)
		rc = lo_new(maps, nmaps, &o);
	ps_samples samples;
	memset(&samples, 0, sizeof(samples));
	int prc = rc == 0 ? ps_sample_process(pid, 1000, 16384, 300, &samples) : 0;
	ps_stop_target(pid);
	REQUIRE_OK(rc);
	if (prc == -EACCES || prc == -EPERM || prc == -ENOENT || prc == -ENOSYS)
		sp_test_skip("perf_event_open refused");
	REQUIRE_EQ(prc, 0);
	REQUIRE(samples.n > 50);

	tally t = { 0 };
	uint64_t ours[MAX_FRAMES], theirs[MAX_FRAMES];
	for (size_t i = 0; i < samples.n; i++) {
		const ps_sample *s = &samples.v[i];
		sp_unwind_result r;
		CHECK_OK(sp_unwind(space, &s->regs, s->stack, s->stack_len, s->sp, ours, MAX_FRAMES,
		                   &r));
		int complete = 0;
		uint32_t n = lo_unwind(o, &s->regs, s->stack, s->stack_len, s->sp, theirs,
		                       MAX_FRAMES, &complete);
		uint32_t common = lo_common_prefix(ours, r.count, theirs, n);
		t.samples++;
		if (!r.truncated && complete) {
			t.both_complete++;
			if (common == r.count && common == n) {
				t.agree++;
				t.frames += n;
			} else if (t.both_complete - t.agree <= 3) {
				printf("    differ at frame %u of %u (ours) / %u (libunwind): "
				       "%#llx vs %#llx\n",
				       common, r.count, n,
				       (unsigned long long)(common < r.count ? ours[common] : 0),
				       (unsigned long long)(common < n ? theirs[common] : 0));
			}
		} else if (!r.truncated && common == n && r.count > n) {
			t.ours_longer++;
		}
	}
	printf("    %s %s: %zu samples, %zu complete both ways, %zu equal chains (%zu frames), "
	       "%zu longer than libunwind's\n",
	       mode, arg, t.samples, t.both_complete, t.agree, t.frames, t.ours_longer);
	lo_free(o);
	ps_samples_free(&samples);
	free(maps);
	sp_unwind_space_free(space);
	sp_unwinder_free(u);
	return t;
}

/* Most samples complete both ways, and every one that does agrees. */
static void check_agreement(const tally *t, size_t min_frames)
{
	CHECK(t->both_complete * 100 >= t->samples * 90);
	CHECK_EQ(t->agree, t->both_complete);
	CHECK(t->frames >= t->agree * min_frames);
}

SP_TEST(ladder_chains_match_libunwind)
{
	tally t = run_mode("ladder", "");
	check_agreement(&t, 4); /* leaf, middle, entry, main at least. */
}

SP_TEST(deep_recursion_chains_match_libunwind)
{
	tally t = run_mode("recurse", "40");
	check_agreement(&t, 40);
}

SP_TEST(shared_library_chains_match_libunwind)
{
	tally t = run_mode("shlib", "");
	check_agreement(&t, 4);
}

SP_TEST(signal_frame_chains_match_libunwind)
{
	tally t = run_mode("signal", "");
	check_agreement(&t, 4);
}

SP_TEST(vdso_chains_match_libunwind)
{
	/* The oracle reads the vDSO's CFI from our own vDSO (same kernel);
	 * valgrind maps none for the process it runs. */
	if (getauxval(AT_SYSINFO_EHDR) == 0)
		sp_test_skip_env("no vDSO in this process (valgrind gives its client none)");
	tally t = run_mode("vdso", "");
	check_agreement(&t, 4);
}
