/* A long recording through the API in this process: RSS (the live heap
 * under ASan) stays flat once
 * warmed up and no descriptor leaks (/proc/self/fd before the recorder and
 * after finish). 20 s by default, 10 minutes with SP_SOAK=1. */
#include "rel_util.h"
#include "rec_stats.h"

SP_TEST(long_recording_rss_flat_and_no_fd_leak)
{
	/* Under valgrind: memory and descriptors are checked; RSS and the
	 * sample rate are valgrind's, not ours. */
	int vg = rel_under_valgrind();
	const char *bin = rel_target("spin");
	double secs = rel_soak() ? 600 : 20;
	char secs_arg[32];
	snprintf(secs_arg, sizeof(secs_arg), "%.0f", secs + 60);
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/soak.spool", sp_test_tmpdir());
	int fds_before = rel_fd_count();
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.chunk_bytes = 64 * 1024;
	char *argv[] = { (char *)bin, "2", secs_arg, NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	double t0 = rel_now(), next = t0 + 1;
	long rss_warm = -1, rss_max = 0, rss_last = 0;
	/* Counted once warm: the stack copy is sized to need after the first
	 * complete unwinds, and its re-open may trade inherited per-CPU events
	 * for events per thread. */
	int fds_during = -1;
	while (rel_now() - t0 < secs) {
		int rc = stackpulse_recorder_wait(rec, 100);
		CHECK(rc >= 0 || rc == -EINTR);
		REQUIRE_OK(stackpulse_recorder_consume_available(rec));
		if (rel_now() >= next) {
			next += 1;
			long rss = rel_mem_kb();
			/* The first quarter warms the caches (unwind tables, interned
			 * frames); after that the stack set is fixed. */
			if (rel_now() - t0 >= secs / 4 && rss_warm < 0) {
				rss_warm = rss;
				fds_during = rel_fd_count();
			}
			if (rss > rss_max)
				rss_max = rss;
			rss_last = rss;
		}
	}
	struct rec_stats st = { 0 };
	rec_stats_get(rec, &st);
	int fds_open = rel_fd_count();
	CHECK_EQ(fds_open, fds_during); /* No growth while recording. */
	CHECK_OK(rec_finish(rec));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	int fds_after = rel_fd_count();
	printf("soak %.0f s: %llu samples, %llu lost, %llu chunks; %s %ld KiB warm, %ld KiB last, "
	       "%ld KiB max; fds %d before, %d during, %d after finish\n",
	       secs, (unsigned long long)st.samples, (unsigned long long)st.lost,
	       (unsigned long long)st.chunks, SP_TEST_ASAN ? "live heap" : "RSS", rss_warm,
	       rss_last, rss_max, fds_before, fds_during, fds_after);
	CHECK_EQ(fds_after, fds_before);
	CHECK(st.samples + (vg ? st.lost : 0) > (uint64_t)(secs * 100));
	/* Flat: at most 4 MiB (or 10%) of growth after warm-up. */
	long slack = rss_warm / 10 > 4096 ? rss_warm / 10 : 4096;
	if (!vg)
		CHECK(rss_warm > 0 && rss_last - rss_warm <= slack);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	CHECK(stackpulse_spool_meta(sp)->samples >= st.samples); /* finish drains the rest. */
	CHECK_EQ(stackpulse_spool_meta(sp)->truncated, 0);
	stackpulse_spool_close(sp);
	unlink(spool);
}
