/* The target is SIGKILLed during attach, during recording and during
 * finish. The recorder returns cleanly (0, or -ESRCH for an attach that
 * lost the race), never hangs, and the spool reads back complete. */
#include <pthread.h>

#include "rel_util.h"
#include "rec_stats.h"

typedef struct killer {
	pid_t pid;
	uint32_t delay_us;
} killer;

static void *killer_main(void *arg)
{
	killer *k = arg;
	usleep(k->delay_us);
	kill(k->pid, SIGKILL);
	return NULL;
}

static pid_t start_target(const char *bin, const char *threads, const char *secs)
{
	pid_t p = fork();
	if (p == 0) {
		execl(bin, bin, threads, secs, (char *)NULL);
		_exit(127);
	}
	return p;
}

/* Opens @p path: complete (footer present) and every sample iterates. */
static void check_complete(const char *path, uint64_t *samples)
{
	struct stackpulse_spool_meta meta;
	int irc;
	REQUIRE_OK(rel_read_back(path, &meta, samples, &irc));
	CHECK_EQ(meta.truncated, 0);
	CHECK_EQ(irc, 0);
	CHECK_EQ(*samples, meta.samples);
}

SP_TEST(target_killed_during_attach)
{
	const char *bin = rel_target("spin");
	rel_seed("attach");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/attach.spool", sp_test_tmpdir());
	int ok = 0, esrch = 0, trials = rel_soak() ? 60 : rel_under_valgrind() ? 3 : 8;
	for (int t = 0; t < trials; t++) {
		pid_t pid = start_target(bin, "8", "20");
		REQUIRE(pid > 0);
		rel_sleep_ms(80); /* Let the threads start. */
		/* Attach takes 10-100 ms here: most kills land inside it. */
		killer k = { pid, t % 4 == 3 ? rel_rand(300000) : rel_rand(30000) };
		pthread_t th;
		REQUIRE(pthread_create(&th, NULL, killer_main, &k) == 0);
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.kernel = STACKPULSE_FEATURE_OFF;
		o.self_contained = 0;
		stackpulse_recorder *rec = NULL;
		double t0 = rel_now();
		int rc = stackpulse_recorder_attach(pid, spool,
		                                    STACKPULSE_ATTACH_STOP_ENABLE_RESUME, &o, &rec);
		double took = rel_now() - t0;
		pthread_join(th, NULL);
		CHECK(took < 10);
		if (getenv("SP_REL_VERBOSE"))
			printf("attach trial %d: kill after %u us: rc %d in %.3f s\n", t,
			       k.delay_us, rc, took);
		if (rc == 0) {
			ok++;
			CHECK_OK(rel_run(rec, 10));
			CHECK_OK(rec_finish(rec));
			uint64_t n;
			check_complete(spool, &n);
		} else {
			if (rc != -ESRCH)
				printf("attach trial %d: %d %s\n", t, rc, stackpulse_last_error());
			CHECK_EQ(rc, -ESRCH);
			CHECK(rec == NULL);
			CHECK(stackpulse_last_error()[0] != '\0');
			esrch++;
		}
		int st;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
	printf("target killed during attach: %d trials, %d attached, %d -ESRCH\n", trials, ok,
	       esrch);
}

SP_TEST(target_killed_during_recording)
{
	const char *bin = rel_target("spin");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/rec.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.kernel = STACKPULSE_FEATURE_OFF;
	char *argv[] = { (char *)bin, "2", "30", NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_EQ(rel_run(rec, 0.7), -ETIMEDOUT); /* Still running. */
	kill(pid, SIGKILL);
	double t0 = rel_now();
	CHECK_OK(rel_run(rec, 10));
	CHECK(rel_now() - t0 < 5);
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, pid), 0);
	CHECK_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	uint64_t n;
	check_complete(spool, &n);
	CHECK(n > 50);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_process *pr = stackpulse_spool_process(sp, 0);
	REQUIRE(pr != NULL);
	CHECK(pr->end_ns != 0); /* The exit was recorded. */
	stackpulse_spool_close(sp);
	printf("target killed during recording: %llu samples\n", (unsigned long long)n);
}

SP_TEST(target_killed_during_finish)
{
	const char *bin = rel_target("spin");
	rel_seed("finish");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/fin.spool", sp_test_tmpdir());
	int trials = rel_soak() ? 30 : rel_under_valgrind() ? 2 : 4;
	for (int t = 0; t < trials; t++) {
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.frequency = 999;
		char *argv[] = { (char *)bin, "64", "30", NULL };
		stackpulse_recorder *rec;
		pid_t pid;
		REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
		CHECK_EQ(rel_run(rec, 0.5), -ETIMEDOUT);
		killer k = { pid, rel_rand(20000) };
		pthread_t th;
		REQUIRE(pthread_create(&th, NULL, killer_main, &k) == 0);
		double t0 = rel_now();
		CHECK_OK(rec_finish(rec));
		double took = rel_now() - t0;
		pthread_join(th, NULL);
		CHECK(took < 15);
		int st;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		CHECK(WIFSIGNALED(st));
		uint64_t n;
		check_complete(spool, &n);
		CHECK(n > 0);
		if (getenv("SP_REL_VERBOSE"))
			printf("finish trial %d: kill after %u us, finish took %.2f s, %llu "
			       "samples\n",
			       t, k.delay_us, took, (unsigned long long)n);
	}
}
