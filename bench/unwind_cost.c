/* Micro benchmark of the online unwinder: real perf samples of the test
 * target (-O2, no frame pointers) are unwound repeatedly; prints the cost
 * per unwind and per frame, cold (first pass, empty caches) and warm.
 *
 * usage: unwind_cost [SOURCE_ROOT [PASSES]]   (needs gcc and perf access)
 * env: SP_UNWIND_TARGET_DIR, a directory with sptarget and libsptarget.so
 * built ahead, instead of gcc (the aarch64 guest: zig build bench-arm64-vm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_sampler.c"
#include "unwind/unwind.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int run(const char *dir, const char *mode, const char *arg, int passes)
{
	char exe[600];
	snprintf(exe, sizeof(exe), "%s/sptarget", dir);
	char *args[] = { exe, (char *)mode, (char *)arg, NULL };
	pid_t pid = ps_start_target(exe, args);
	if (pid <= 0)
		return fprintf(stderr, "cannot start %s\n", exe), 1;
	ps_procmap *maps = NULL;
	int n = ps_read_maps(pid, &maps);
	sp_unwinder *u = NULL;
	sp_unwind_space *s = NULL;
	int rc = n > 0 ? sp_unwinder_new(&u) : -1;
	if (rc == 0)
		rc = sp_unwind_space_new(u, pid, &s);
	double t0 = now_us();
	if (rc == 0)
		rc = ps_feed_maps(s, maps, n);
	double t_maps = now_us() - t0;
	ps_samples ss;
	memset(&ss, 0, sizeof(ss));
	int prc = rc == 0 ? ps_sample_process(pid, 1000, 16384, 1000, &ss) : 0;
	ps_stop_target(pid);
	if (rc || prc || ss.n == 0)
		return fprintf(stderr, "setup failed (rc %d, perf %d)\n", rc, prc), 1;
	uint64_t pcs[128];
	sp_unwind_result r;
	uint64_t frames = 0, truncated = 0;
	t0 = now_us();
	for (size_t i = 0; i < ss.n; i++) {
		const ps_sample *x = &ss.v[i];
		sp_unwind(s, &x->regs, x->stack, x->stack_len, x->sp, pcs, 128, &r);
		frames += r.count;
		truncated += (uint64_t)r.truncated;
	}
	double cold = now_us() - t0;
	t0 = now_us();
	for (int p = 0; p < passes; p++) {
		for (size_t i = 0; i < ss.n; i++) {
			const ps_sample *x = &ss.v[i];
			sp_unwind(s, &x->regs, x->stack, x->stack_len, x->sp, pcs, 128, &r);
		}
	}
	double warm = now_us() - t0;
	double unwinds = (double)ss.n * passes;
	printf("%-8s %2s  samples %5zu  frames/sample %5.1f  truncated %5.1f%%  "
	       "map+open %7.0f us  cold %6.2f us/unwind  warm %6.2f us/unwind  %5.3f us/frame\n",
	       mode, arg, ss.n, (double)frames / (double)ss.n,
	       100.0 * (double)truncated / (double)ss.n, t_maps, cold / (double)ss.n,
	       warm / unwinds, warm / unwinds / ((double)frames / (double)ss.n));
	ps_samples_free(&ss);
	free(maps);
	sp_unwind_space_free(s);
	sp_unwinder_free(u);
	return 0;
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : ".";
	int passes = argc > 2 ? atoi(argv[2]) : 50;
	if (passes <= 0)
		passes = 1;
	/* SP_UNWIND_TARGET_DIR: sptarget and libsptarget.so built ahead (the
	 * aarch64 guest has no compiler). */
	const char *prebuilt = getenv("SP_UNWIND_TARGET_DIR");
	char dir[] = "/tmp/sp-unwind-bench-XXXXXX";
	if (prebuilt && *prebuilt) {
		if (strlen(prebuilt) >= sizeof(dir))
			return fprintf(stderr, "SP_UNWIND_TARGET_DIR is too long\n"), 1;
		snprintf(dir, sizeof(dir), "%s", prebuilt);
	} else if (!mkdtemp(dir) || ps_build_target(root, dir) != 0) {
		return fprintf(stderr, "cannot build the target (gcc)\n"), 1;
	}
	int rc = run(dir, "ladder", "", passes);
	rc |= run(dir, "recurse", "12", passes);
	rc |= run(dir, "recurse", "60", passes);
	rc |= run(dir, "shlib", "", passes);
	rc |= run(dir, "signal", "", passes);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (!(prebuilt && *prebuilt) && system(cmd) != 0)
		rc = 1;
	return rc;
}
