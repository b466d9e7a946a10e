/* The recorder under load: stack copies sized to what the threads need
 * (shrunk, then grown back by a deep call), rings that grow when the
 * recorder falls behind, the ring budget falling back when the kernel
 * refuses it, and the loss accounted per thread. */
#include <errno.h>
#include <sys/resource.h>

#include "format/spool_format.h"
#include "format/spool_reader.h"
#include "rec_driver.h"
#include "record/perf_events.h"
#include "record/ring.h"
#include "rec_stats.h"

/* 999 Hz, user frames only: the options of the stack-depth tests. */
static stackpulse_recorder_opts user_999(void)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.kernel = STACKPULSE_FEATURE_OFF;
	return o;
}

/* Records @p argv to the end, polling the stats every 100 ms; the smallest
 * stack copy seen is returned in @p min_copy. */
static void record_polled(char *const argv[], const char *spool, stackpulse_recorder_opts *o,
                          struct rec_stats *st, uint32_t *min_copy)
{
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, o, &rec, &pid));
	*min_copy = UINT32_MAX;
	double end = rec_now() + 60;
	while (stackpulse_recorder_process_is_active(rec, 0) && rec_now() < end) {
		int rc = stackpulse_recorder_wait(rec, 100);
		CHECK(rc >= 0 || rc == -EINTR);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
		CHECK_OK(rec_stats_get(rec, st));
		if (st->stack_copy < *min_copy)
			*min_copy = st->stack_copy;
	}
	CHECK_OK(rec_stats_get(rec, st));
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
}

/* Shallow first: the copy shrinks far below stack_size. Then a 160-deep
 * call (about 20 KiB of stack): the first cut walks grow the copy again
 * and the deep stacks unwind completely, down to main. */
SP_TEST(copy_size_grows_back_after_a_deep_call)
{
	const char *bin = rec_target("shallowdeep", NULL);
	char *argv[] = { (char *)bin, "8000", "12000", NULL };
	stackpulse_recorder_opts o = user_999();
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/shallowdeep.spool", sp_test_tmpdir());
	struct rec_stats st = { 0 };
	uint32_t min_copy;
	record_polled(argv, spool, &o, &st, &min_copy);
	printf("copy: smallest %u, final %u, %u re-opens, %llu samples, %llu truncated\n", min_copy,
	       st.stack_copy, st.copy_resizes, (unsigned long long)st.samples,
	       (unsigned long long)st.truncated_stacks);
	CHECK(min_copy <= 4096);
	CHECK(st.stack_copy >= 16384); /* Grown back: the deep stack needs ~20 KiB. */
	CHECK(st.copy_resizes >= 2);

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	uint64_t v = 0;
	REQUIRE_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_COPY_RESIZES, &v));
	CHECK_EQ(v, st.copy_resizes);
	REQUIRE_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_STACK_COPY, &v));
	CHECK_EQ(v, st.stack_copy);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int shallow = 0, shallow_full = 0, deep = 0, deep_full = 0, late = 0, late_full = 0;
	/* Completeness of each deep sample in time order, to judge the later
	 * half (after the regrowth) on its own. */
	static unsigned char full_at[1 << 16];
	const char *sseq[] = { "shallow_spin", "main" };
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		if (d == 0)
			continue;
		if (strcmp(names[0], "shallow_spin") == 0) {
			shallow++;
			shallow_full += rec_has_seq(names, d, sseq, 2);
		} else if (strcmp(names[0], "deep_leaf") == 0 ||
		           strcmp(names[0], "deep_descend") == 0) {
			int descends = 0;
			for (uint32_t i = 0; i < d; i++)
				descends += strcmp(names[i], "deep_descend") == 0;
			const char *dseq[] = { "deep_descend", "main" };
			/* Reaches main through the recursion; at the leaf, through
			 * all of it (a sample in deep_descend may be mid-way). */
			int full = rec_has_seq(names, d, dseq, 2) &&
			           (descends >= 150 || strcmp(names[0], "deep_descend") == 0);
			if (deep < (int)sizeof(full_at))
				full_at[deep] = (unsigned char)full;
			deep++;
			deep_full += full;
		}
	}
	for (int i = deep / 2; i < deep && i < (int)sizeof(full_at); i++) {
		late++;
		late_full += full_at[i];
	}
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	printf("shallow %d (%d complete), deep %d (%d complete), later half %d (%d)\n", shallow,
	       shallow_full, deep, deep_full, late, late_full);
	CHECK(shallow > 300);
	CHECK(shallow_full * 100 >= shallow * 98);
	CHECK(deep > 450);
	CHECK(deep_full * 100 >= deep * 85); /* Only the walks before the regrowth are cut. */
	CHECK(late_full * 100 >= late * 99);
}

/* As root the rings start at half the budget and grow to it when the
 * recorder falls behind. A deep stack keeps the copies at 32 KiB and a
 * slow consumer lets the rings fill: they grow (a re-open moves the events
 * into larger rings), the replaced rings are drained, and every deep
 * sample is still whole. */
SP_TEST(rings_grow_when_the_recorder_falls_behind)
{
	if (geteuid() != 0)
		sp_test_skip("needs root: unprivileged rings are at the perf_event_mlock_kb limit");
	const char *bin = rec_target("shallowdeep", NULL);
	char *argv[] = { (char *)bin, "0", "30000", NULL };
	stackpulse_recorder_opts o = user_999();
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/ringgrow.spool", sp_test_tmpdir());
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	struct rec_stats st = { 0 };
	REQUIRE_OK(rec_stats_get(rec, &st));
	uint64_t start = st.ring_bytes;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	long pages = sysconf(_SC_PHYS_PAGES);
	uint64_t ram = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t rec_bytes = o.stack_size + 2048;
	uint64_t first =
	        sp_ring_budget_bytes(o.frequency, rec_bytes, SP_RING_START_MS, (int)ncpu, ram);
	uint64_t cap =
	        sp_ring_budget_bytes(o.frequency, rec_bytes, SP_RING_HOLD_MS, (int)ncpu, ram);
	REQUIRE(first < cap); /* 8 and 16 MiB per CPU at 999 Hz. */
	CHECK(start > 0 && start % first == 0 && start <= first * (uint64_t)ncpu);
	double end = rec_now() + 60;
	long long hz = sysconf(_SC_CLK_TCK);
	while (stackpulse_recorder_process_is_active(rec, 0) && rec_now() < end) {
		/* Until the target ran 0.6 s of CPU since the last drain (a
		 * loaded machine gives it less per wall second; at most 20 s):
		 * 600 samples of 34 KiB, of which more than half a start ring
		 * (240 samples) on one of two CPUs. */
		long long c0 = sp_test_cpu_ticks(pid, 0), c = c0;
		for (int i = 0; i < 2000 && c >= 0 && c - c0 < hz * 6 / 10; i++) {
			usleep(10000);
			c = sp_test_cpu_ticks(pid, 0);
		}
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	CHECK_OK(rec_stats_get(rec, &st));
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	printf("rings %llu -> %llu bytes (budget %llu per CPU), copy %u, %llu samples, %llu lost\n",
	       (unsigned long long)start, (unsigned long long)st.ring_bytes,
	       (unsigned long long)cap, st.stack_copy, (unsigned long long)st.samples,
	       (unsigned long long)st.lost);
	CHECK(st.ring_bytes > start);
	CHECK(st.ring_bytes <= cap * (uint64_t)ncpu);
	CHECK(st.stack_copy >= 16384); /* The deep stack needs ~20 KiB. */
	CHECK_EQ(st.malformed_records, 0);

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	uint64_t v = 0;
	REQUIRE_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_RING_BYTES, &v));
	CHECK_EQ(v, st.ring_bytes);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	uint64_t deep = 0, deep_full = 0, prev = 0, unordered = 0;
	const char *dseq[] = { "deep_descend", "main" };
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		unordered += s->time_ns < prev;
		prev = s->time_ns;
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		if (d == 0 ||
		    (strcmp(names[0], "deep_leaf") != 0 && strcmp(names[0], "deep_descend") != 0))
			continue;
		deep++;
		deep_full += rec_has_seq(names, d, dseq, 2) ? 1u : 0u;
	}
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	printf("deep %llu (%llu complete), %llu out of time order\n", (unsigned long long)deep,
	       (unsigned long long)deep_full, (unsigned long long)unordered);
	CHECK(deep > 300);
	CHECK(deep_full * 100 >= deep * 99);
	CHECK_EQ(unordered, 0); /* The old ring drains before the new one's records. */
}

/* As nobody (perf_event_mlock_kb 516, ulimit -l 8192) a 64 MiB ring is
 * refused; the recorder halves it until the kernel accepts and records. */
SP_TEST(ring_budget_falls_back_when_refused)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	if (system("command -v setpriv >/dev/null") != 0)
		sp_test_skip("setpriv missing");
	const char *bin = rec_target("ladder", NULL);
	char out[1024];
	int st = rec_drive_spawn("SP_REC_RING_KB=65536", rec_public_dir(), "ringfallback.spool",
	                         bin, "1", 1, out, sizeof(out));
	printf("nobody, ring_kb 65536: %s", out);
	REQUIRE_EQ(st, 0);
	const char *rb = strstr(out, "ring_bytes=");
	REQUIRE(rb != NULL);
	unsigned long long bytes = strtoull(rb + 11, NULL, 10);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long mlock_kb = sp_perf_sysctl("perf_event_mlock_kb", 516);
	struct rlimit rl;
	REQUIRE_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	printf("perf_event_mlock_kb %ld x %ld CPUs, RLIMIT_MEMLOCK %llu\n", mlock_kb, ncpu,
	       (unsigned long long)rl.rlim_cur);
	CHECK(bytes > 0);
	/* The kernel grants perf_event_mlock_kb per CPU and then charges
	 * RLIMIT_MEMLOCK: the rings got what fits, far below what was asked. */
	CHECK(bytes < (unsigned long long)ncpu * (64ull << 20));
	if (rl.rlim_cur != RLIM_INFINITY)
		CHECK(bytes <=
		      (unsigned long long)ncpu * (unsigned long long)mlock_kb * 1024 + rl.rlim_cur);
	const char *sm = strstr(out, "samples=");
	REQUIRE(sm != NULL);
	CHECK(strtoull(sm + 8, NULL, 10) >= 20);
	/* As root the same request is granted. */
	st = rec_drive_spawn("SP_REC_RING_KB=65536", rec_public_dir(), "ringroot.spool", bin, "0.3",
	                     0, out, sizeof(out));
	printf("root, ring_kb 65536: %s", out);
	REQUIRE_EQ(st, 0);
	rb = strstr(out, "ring_bytes=");
	REQUIRE(rb != NULL);
	CHECK(strtoull(rb + 11, NULL, 10) >= 64ull << 20);
}

/* Tiny rings, full 64 KiB copies and a high rate on four busy threads: the
 * kernel drops samples. Each thread's loss (PERF_FORMAT_LOST of its own
 * events) lands in the spool's per-thread STATS and adds up to the total
 * the LOST records report. */
SP_TEST(loss_is_accounted_per_thread)
{
	const char *bin = rec_target("threads", "-pthread");
	char *argv[] = { (char *)bin, "1.5", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 10000;
	o.stack_size = 65528;
	o.ring_kb = 128;
	o.kernel = STACKPULSE_FEATURE_OFF;
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/tloss.spool", sp_test_tmpdir());
	/* Attached live: each running thread gets events of its own. */
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execv(bin, argv);
		_exit(127);
	}
	usleep(150000);
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, &o, &rec));
	while (stackpulse_recorder_process_is_active(rec, 0)) {
		usleep(50000); /* A slow consumer. */
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	printf("lost %llu, kept %llu, per thread: %d, copy %u after %u re-opens\n",
	       (unsigned long long)st.lost, (unsigned long long)st.samples, st.lost_per_thread,
	       st.stack_copy, st.copy_resizes);
	CHECK_EQ(st.lost_per_thread, 1); /* Linux 6.0+ (6.18 here). */
	CHECK(st.lost > 0);

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	uint64_t sum = 0, total = stackpulse_spool_meta(sp)->lost;
	int with_loss = 0;
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(sp); i++) {
		const struct stackpulse_thread *t = stackpulse_spool_thread(sp, i);
		if (t->lost) {
			printf("  thread %d (%s): %llu lost\n", (int)t->tid, t->name,
			       (unsigned long long)t->lost);
			with_loss++;
			sum += t->lost;
		}
	}
	printf("per-thread sum %llu, LOST records %llu, %d threads\n", (unsigned long long)sum,
	       (unsigned long long)total, with_loss);
	/* Every lost record is one lost sample here (side-band records are
	 * rare); the LOST records miss at most what was lost after the last
	 * record a ring took. */
	CHECK(total > 0);
	CHECK(sum >= total);
	CHECK(sum <= total + total / 10 + 50);
	CHECK(with_loss >= 3); /* The workers had events of their own. */
	uint64_t v = 0;
	REQUIRE_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_LOST, &v));
	CHECK_EQ(v, st.lost);
	stackpulse_spool_close(sp);

	/* report warns on stderr (above 1% lost) and names a thread. */
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	char cmd[2048], line[1024] = "";
	snprintf(cmd, sizeof(cmd), "'%s/report' --folded '%s' 2>&1 >/dev/null", bindir, spool);
	FILE *p = popen(cmd, "r");
	REQUIRE(p != NULL);
	int warned = 0;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "warning:") && strstr(line, "samples were lost") &&
		    strstr(line, "most in tid")) {
			warned = 1;
			printf("report: %s", line);
		}
	CHECK_EQ(pclose(p), 0);
	CHECK(warned);
}
