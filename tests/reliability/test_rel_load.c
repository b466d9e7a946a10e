/* Load: a 64-thread target, a target that starts and reaps 500 short-lived
 * children, and 4000 Hz on two busy threads. Short runs by default; SP_SOAK=1
 * runs the long versions (64 threads for 30 s, 4000 Hz for 60 s, and an
 * attach to the 64-thread target). Prints "load NAME: ..." result lines
 * for docs/reliability.md. */
#include <sys/resource.h>

#include "rel_util.h"

typedef struct load_result {
	uint64_t samples, lost, stat_samples;
	uint32_t processes, threads, chunks;
	double seconds, cpu_s; /* Wall time; target CPU time (wait4). */
	int truncated, iter_rc;
} load_result;

static void record_spawn(const char *name, char **argv, uint32_t hz, load_result *r)
{
	if (rel_under_valgrind())
		sp_test_skip("load test: rates mean nothing under valgrind");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), name);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = hz;
	o.kernel = STACKPULSE_FEATURE_OFF;
	o.self_contained = 0;
	stackpulse_recorder *rec;
	pid_t pid;
	double t0 = rel_now();
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rel_run(rec, 120));
	struct stackpulse_recorder_stats st = { .sz = sizeof(st) };
	CHECK_OK(stackpulse_recorder_stats(rec, &st));
	CHECK_OK(stackpulse_recorder_finish(rec));
	r->seconds = rel_now() - t0;
	int ws;
	struct rusage ru;
	REQUIRE(wait4(pid, &ws, 0, &ru) == pid);
	r->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	r->samples = m->samples;
	r->lost = m->lost;
	r->chunks = m->chunks;
	r->truncated = m->truncated;
	r->processes = stackpulse_spool_process_count(sp);
	r->threads = stackpulse_spool_thread_count(sp);
	r->stat_samples = st.samples;
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	uint64_t n = 0;
	while ((r->iter_rc = stackpulse_sample_iter_next(it, &s)) == 1)
		n++;
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	CHECK_EQ(r->iter_rc, 0);
	CHECK_EQ(n, r->samples);
	CHECK_EQ(r->truncated, 0);
	CHECK(r->samples >= r->stat_samples); /* finish drains the rest. */
	printf("load %s: %llu samples, %llu lost, %u processes, %u threads, %u chunks, %.1f s, "
	       "target CPU %.2f s (%.0f samples expected at %u Hz)\n",
	       name, (unsigned long long)r->samples, (unsigned long long)r->lost, r->processes,
	       r->threads, r->chunks, r->seconds, r->cpu_s, r->cpu_s * hz, hz);
	/* cpu-clock samples follow the CPU the target got (the VM is shared):
	 * at least half of them must arrive or be counted as lost, less the
	 * partial period every thread takes with it when it exits. */
	CHECK((double)(r->samples + r->lost) >= r->cpu_s * hz * 0.5 - (double)r->threads);
	unlink(spool);
}

SP_TEST(sixty_four_threads)
{
	const char *bin = rel_target("spin");
	char *argv[] = { (char *)bin, "64", rel_soak() ? "30" : "3", NULL };
	load_result r;
	record_spawn("threads64", argv, 99, &r);
	CHECK(r.threads >= 64);
	CHECK(r.samples > 20);
}

SP_TEST(five_hundred_short_lived_children)
{
	const char *bin = rel_target("children");
	char *argv[] = { (char *)bin, "500", "1000000", NULL };
	load_result r;
	record_spawn("children500", argv, 999, &r);
	/* The parent plus every child is followed. */
	CHECK(r.processes >= 501);
	CHECK(r.samples > 20);
}

SP_TEST(four_thousand_hz_on_two_threads)
{
	const char *bin = rel_target("spin");
	const char *secs = rel_soak() ? "60" : "5";
	char *argv[] = { (char *)bin, "2", (char *)secs, NULL };
	load_result r;
	record_spawn("hz4000", argv, 4000, &r);
	double want = r.cpu_s * 4000;
	printf("load hz4000: %.0f%% of the %.0f samples the target's CPU time allows, %.2f%% "
	       "lost\n",
	       100.0 * (double)r.samples / want, want,
	       100.0 * (double)r.lost / (double)(r.samples + r.lost + 1));
	CHECK(r.samples > 1000);
}

/* Long version only: attach (stop, enable, resume) to 64 busy threads. */
SP_TEST(attach_to_sixty_four_busy_threads)
{
	if (!rel_soak())
		sp_test_skip("SP_SOAK=1 only (takes up to a minute)");
	const char *bin = rel_target("spin");
	pid_t pid = fork();
	if (pid == 0) {
		execl(bin, bin, "64", "60", (char *)NULL);
		_exit(127);
	}
	rel_sleep_ms(300);
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/attach64.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.kernel = STACKPULSE_FEATURE_OFF;
	o.self_contained = 0;
	stackpulse_recorder *rec;
	double t0 = rel_now();
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, &o,
	                                      &rec));
	double attach_s = rel_now() - t0;
	CHECK(!rel_any_thread_stopped(pid));
	CHECK_EQ(rel_run(rec, 5), -ETIMEDOUT);
	struct stackpulse_recorder_stats st = { .sz = sizeof(st) };
	stackpulse_recorder_stats(rec, &st);
	t0 = rel_now();
	CHECK_OK(stackpulse_recorder_finish(rec));
	double finish_s = rel_now() - t0;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("load attach64: attach %.2f s, 5 s recording: %llu samples, %llu lost, %u threads, "
	       "finish %.2f s\n",
	       attach_s, (unsigned long long)st.samples, (unsigned long long)st.lost, st.threads,
	       finish_s);
	CHECK(st.threads >= 64);
}
