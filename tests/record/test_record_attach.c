/* Attaching to running targets: both modes, targets that exit during the
 * recording or during the attach itself, and the rule that the target is
 * never left stopped (recorder failure, signals, recorder killed). */
#include <errno.h>
#include <poll.h>
#include <sys/time.h>

#include "../python/py_versions.h"
#include "rec_util.h"
#include "rec_stats.h"

void sp_alloc_fail_after(long n); /* src/common/alloc.h */

static pid_t start(const char *bin, const char *arg)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl(bin, bin, arg, (char *)NULL);
		_exit(127);
	}
	REQUIRE(pid > 0);
	return pid;
}

/* Waits up to @p secs for @p pid to exit; 1 when it did. */
/* State letter of thread @p tid of @p pid ('?' when unreadable). */
static char thread_state(pid_t pid, pid_t tid)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	char *s = sp_test_read_file(path, NULL);
	char st = '?';
	char *rp = s ? strrchr(s, ')') : NULL;
	if (rp && rp[1] == ' ')
		st = rp[2];
	free(s);
	return st;
}

static int reap(pid_t pid, double secs)
{
	double end = rec_now() + secs;
	while (rec_now() < end) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return 1;
		usleep(10000);
	}
	return 0;
}

static void check_ladder_spool(const char *path, int min_samples)
{
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &sp));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int total = 0, full = 0;
	const char *seq[] = { "leaf", "middle", "entry", "main" };
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		total++;
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		full += rec_has_seq(names, d, seq, 4);
	}
	stackpulse_sample_iter_free(it);
	printf("%s: %d samples, %d full ladders\n", path, total, full);
	CHECK(total >= min_samples);
	CHECK(full * 100 > total * 90);
	stackpulse_spool_close(sp);
}

static void attach_ladder(enum stackpulse_attach_mode mode, const char *tag)
{
	const char *bin = rec_target("ladder", NULL);
	pid_t pid = start(bin, "1.5");
	usleep(200000); /* Let it map everything before we come. */
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), tag);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, mode, &o, &rec));
	CHECK(!rec_any_stopped(pid));
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, pid), 1);
	/* The aggregate descriptor turns readable as samples arrive. */
	struct pollfd pfd = { stackpulse_recorder_fd(rec), POLLIN, 0 };
	CHECK(pfd.fd >= 0);
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	/* The target exits in the middle of the recording. */
	CHECK_OK(rec_run(rec, 20));
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, pid), 0);
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, 0), 0);
	/* Data left after the exit is still reported, then wait says EXITED. */
	int w = STACKPULSE_WAIT_READY;
	for (int i = 0; i < 1000 && w == STACKPULSE_WAIT_READY; i++) {
		w = stackpulse_recorder_wait(rec, 1000);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	CHECK_EQ(w, STACKPULSE_WAIT_EXITED);
	REQUIRE_OK(rec_finish(rec));
	CHECK(reap(pid, 5));
	check_ladder_spool(spool, 50);
}

SP_TEST(attach_stop_enable_resume)
{
	attach_ladder(STACKPULSE_ATTACH_STOP_ENABLE_RESUME, "attach_stop");
}

SP_TEST(attach_live)
{
	attach_ladder(STACKPULSE_ATTACH_LIVE, "attach_live");
}

SP_TEST(attach_live_threads_are_all_followed)
{
	const char *bin = rec_target("threads", "-pthread");
	pid_t pid = start(bin, "1.5");
	usleep(200000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/live_threads.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, &o, &rec));
	CHECK_OK(rec_run(rec, 20));
	REQUIRE_OK(rec_finish(rec));
	CHECK(reap(pid, 5));
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	int named = 0;
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(sp); i++)
		named += strncmp(stackpulse_spool_thread(sp, i)->name, "t-", 2) == 0;
	CHECK_EQ(named, 4);
	stackpulse_spool_close(sp);
}

/* Every allocation of the attach made to fail in turn: each failure must
 * return an error and leave the target running. */
SP_TEST(never_stopped_when_attach_fails_halfway)
{
	const char *bin = rec_target("threads", "-pthread");
	pid_t pid = start(bin, "30");
	usleep(100000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/fail.spool", sp_test_tmpdir());
	int failures = 0, ok = 0;
	for (long n = 0; n < 400 && !ok; n += n < 40 ? 1 : 9) {
		stackpulse_recorder *rec = NULL;
		sp_alloc_fail_after(n);
		int rc = stackpulse_recorder_attach(
		        pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL, &rec);
		sp_alloc_fail_after(-1);
		if (rc == 0) {
			ok = 1;
			CHECK_OK(rec_finish(rec));
		} else {
			failures++;
			CHECK(rec == NULL);
		}
		if (rec_any_stopped(pid)) {
			sp_test_fail(__FILE__, __LINE__, "target left stopped after failure at %ld",
			             n);
			break;
		}
	}
	printf("%d injected failures, then success: %d\n", failures, ok);
	CHECK(failures > 5);
	CHECK(ok);
	kill(pid, SIGKILL);
	CHECK(reap(pid, 5));
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* The recorder's process is showered with signals while attaching. */
SP_TEST(never_stopped_when_the_caller_gets_signals)
{
	const char *bin = rec_target("threads", "-pthread");
	pid_t pid = start(bin, "30");
	usleep(100000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/signals.spool", sp_test_tmpdir());
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int ok = 0;
	for (int i = 0; i < 5; i++) {
		stackpulse_recorder *rec;
		int rc = stackpulse_recorder_attach(
		        pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL, &rec);
		if (rc == 0) {
			ok++;
			int w = stackpulse_recorder_wait(rec, 50);
			CHECK(w == STACKPULSE_WAIT_READY || w == STACKPULSE_WAIT_TIMEOUT ||
			      w == STACKPULSE_WAIT_EXITED || w == -EINTR);
			CHECK_OK(stackpulse_recorder_consume_available(rec));
			CHECK_OK(rec_finish(rec));
		}
		CHECK(!rec_any_stopped(pid));
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	/* Ignored, not default: one may still be pending (valgrind delivers
	 * late), and its default action would end the test binary. */
	signal(SIGALRM, SIG_IGN);
	printf("%d attaches under %d signals\n", ok, (int)alarms);
	CHECK_EQ(ok, 5);
	CHECK(alarms > 0);
	kill(pid, SIGKILL);
	CHECK(reap(pid, 5));
}

/* The recorder process is SIGKILLed at random points of repeated
 * attaches: the kernel's ptrace cleanup must let the target run. */
SP_TEST(never_stopped_when_the_recorder_is_killed)
{
	const char *bin = rec_target("threads", "-pthread");
	pid_t pid = start(bin, "30");
	usleep(100000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/killed.spool", sp_test_tmpdir());
	for (int round = 0; round < 6; round++) {
		pid_t rp = fork();
		if (rp == 0) {
			for (;;) {
				stackpulse_recorder *rec;
				if (stackpulse_recorder_attach(pid, spool,
				                               STACKPULSE_ATTACH_STOP_ENABLE_RESUME,
				                               NULL, &rec) == 0)
					rec_finish(rec);
			}
		}
		usleep((useconds_t)(30000 + 23000 * round));
		kill(rp, SIGKILL);
		waitpid(rp, NULL, 0);
		usleep(20000);
		CHECK(!rec_any_stopped(pid));
	}
	kill(pid, SIGKILL);
	CHECK(reap(pid, 5));
}

/* A target that creates and joins threads without pause: every stop
 * pass finds threads that exited (reaped while traced) and threads not yet
 * stopped, and the passes must still converge (no STACKPULSE_ELIMIT, no
 * -ETIMEDOUT) with nothing left stopped or traced. */
SP_TEST(attach_while_threads_come_and_go)
{
	const char *churn = rec_target("churn", "-pthread");
	pid_t pid = start(churn, "60");
	usleep(100000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/churn.spool", sp_test_tmpdir());
	int ok = 0;
	for (int i = 0; i < 6; i++) {
		stackpulse_recorder *rec;
		int rc = stackpulse_recorder_attach(
		        pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL, &rec);
		if (rc != 0) {
			sp_test_fail(__FILE__, __LINE__, "attach %d: %d %s", i, rc,
			             stackpulse_last_error());
			break;
		}
		CHECK(!rec_any_stopped(pid));
		double end = rec_now() + 0.2;
		while (rec_now() < end) {
			CHECK(stackpulse_recorder_wait(rec, 50) >= 0);
			CHECK_OK(stackpulse_recorder_consume_available(rec));
		}
		CHECK_OK(rec_finish(rec));
		ok++;
		char path[64], status[4096];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		FILE *f = fopen(path, "r");
		REQUIRE(f != NULL);
		size_t n = fread(status, 1, sizeof(status) - 1, f);
		fclose(f);
		status[n] = '\0';
		CHECK(strstr(status, "TracerPid:\t0\n") != NULL);
	}
	CHECK_EQ(ok, 6);
	CHECK(!rec_any_stopped(pid));
	kill(pid, SIGKILL);
	CHECK(reap(pid, 5));
}

/* Targets that exit while we attach: a churning target that ends on its
 * own, and a target SIGKILLed at staggered moments of the attach. Attach
 * either fails with -ESRCH or works; the target always ends and nothing
 * hangs. */
SP_TEST(target_exits_during_attach)
{
	const char *churn = rec_target("churn", "-pthread");
	const char *threads = rec_target("threads", "-pthread");
	int ok = 0, gone = 0;
	for (int i = 0; i < 24; i++) {
		int killed = i >= 8;
		char secs[32];
		snprintf(secs, sizeof(secs), "%.3f", killed ? 30.0 : 0.005 * i);
		pid_t pid = start(killed ? threads : churn, secs);
		usleep(killed ? 50000 : (useconds_t)(1000 * i));
		pid_t killer = -1;
		if (killed) {
			killer = fork();
			if (killer == 0) {
				usleep((useconds_t)(250 * (i - 8)));
				kill(pid, SIGKILL);
				_exit(0);
			}
		}
		char spool[512];
		snprintf(spool, sizeof(spool), "%s/exit%d.spool", sp_test_tmpdir(), i);
		stackpulse_recorder *rec;
		enum stackpulse_attach_mode mode =
		        i % 3 == 2 ? STACKPULSE_ATTACH_LIVE : STACKPULSE_ATTACH_STOP_ENABLE_RESUME;
		int rc = stackpulse_recorder_attach(pid, spool, mode, NULL, &rec);
		if (rc == 0) {
			ok++;
			CHECK_OK(rec_run(rec, 40));
			CHECK_OK(rec_finish(rec));
		} else {
			gone++;
			if (rc != -ESRCH)
				sp_test_fail(__FILE__, __LINE__, "round %d: %d %s", i, rc,
				             stackpulse_last_error());
		}
		if (killer > 0)
			waitpid(killer, NULL, 0);
		if (!reap(pid, 5)) {
			char cmd[256];
			snprintf(cmd, sizeof(cmd),
			         "grep -h -E 'State|Tracer' /proc/%d/task/*/status", (int)pid);
			if (system(cmd)) {
			}
			sp_test_fail(__FILE__, __LINE__, "round %d (rc %d): target %d did not end",
			             i, rc, (int)pid);
			kill(pid, SIGKILL);
			reap(pid, 5);
		}
	}
	printf("attached %d, target gone %d\n", ok, gone);
	CHECK(ok > 0);
}

/* Binaries are read as the target sees them: an executable deleted while
 * it runs, and one that exists only in the target's private mount
 * namespace, still get their build-id and correctly placed frames. */
static void attach_hidden(const char *tag, pid_t pid, const char *bin)
{
	usleep(300000);
	char exe[512];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	char link[512];
	ssize_t n = readlink(exe, link, sizeof(link) - 1);
	REQUIRE(n > 0);
	link[n] = '\0';
	printf("%s: target runs %s; visible here: %s\n", tag, link,
	       access(link, F_OK) == 0 ? "yes" : "no");
	CHECK(access(link, F_OK) != 0);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), tag);
	stackpulse_recorder *rec;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, &o,
	                                      &rec));
	CHECK_OK(rec_run(rec, 20));
	REQUIRE_OK(rec_finish(rec));
	CHECK(reap(pid, 5));
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	uint32_t mod = UINT32_MAX;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(sp); i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(sp, i);
		if (strstr(m->path, "ladder_hidden")) {
			mod = i;
			CHECK_EQ(m->build_id_len, 20);
		}
	}
	REQUIRE(mod != UINT32_MAX);
	/* Frames of the hidden module resolve against the original file. */
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int total = 0, full = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		uint32_t ids[64];
		uint32_t d = stackpulse_spool_stack_frames(sp, s->stack, ids, 64);
		const char *names[64];
		uint32_t k = 0;
		for (uint32_t i = 0; i < d && i < 64; i++) {
			const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, ids[i]);
			if (f->kind == STACKPULSE_FRAME_NATIVE && f->module == mod) {
				const char *nm = rec_elf_name(bin, f->offset - (i ? 1 : 0));
				names[k++] = nm ? nm : "?";
			}
		}
		const char *seq[] = { "leaf", "middle", "entry", "main" };
		total++;
		full += rec_has_seq(names, k, seq, 4);
	}
	stackpulse_sample_iter_free(it);
	printf("%s: %d samples, %d full ladders\n", tag, total, full);
	CHECK(total > 30);
	CHECK(full * 100 > total * 90);
	stackpulse_spool_close(sp);
}

SP_TEST(attach_to_a_deleted_executable)
{
	const char *bin = rec_target("ladder", NULL);
	char copy[600], cmd[1400];
	snprintf(copy, sizeof(copy), "%s/ladder_hidden", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", bin, copy);
	REQUIRE(system(cmd) == 0);
	pid_t pid = start(copy, "1.5");
	usleep(100000);
	REQUIRE(unlink(copy) == 0);
	attach_hidden("deleted", pid, bin);
}

SP_TEST(attach_into_a_private_mount_namespace)
{
	if (geteuid() != 0 || system("command -v unshare >/dev/null") != 0)
		sp_test_skip("needs root and unshare");
	const char *bin = rec_target("ladder", NULL);
	char dir[600], cmd[2000];
	snprintf(dir, sizeof(dir), "%s/nsdir", sp_test_tmpdir());
	mkdir(dir, 0755);
	snprintf(cmd, sizeof(cmd),
	         "mount -t tmpfs none '%s' && cp '%s' '%s/ladder_hidden' && "
	         "exec '%s/ladder_hidden' 1.5",
	         dir, bin, dir, dir);
	pid_t pid = fork();
	if (pid == 0) {
		execlp("unshare", "unshare", "-m", "--propagation", "private", "sh", "-c", cmd,
		       (char *)NULL);
		_exit(127);
	}
	attach_hidden("namespace", pid, bin);
}

/* A thread in uninterruptible sleep (a vfork parent waiting for its child)
 * cannot reach a ptrace stop: the attach gives up with -ETIMEDOUT, and no
 * thread stays traced or stops later, when the sleeper wakes, although the
 * caller's thread lives on. */
SP_TEST(attach_to_uninterruptible_thread_times_out_and_releases_it)
{
	const char *bin = rec_target("dsleep", "-pthread");
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl(bin, bin, "9", (char *)NULL);
		_exit(127);
	}
	char st = '?';
	for (int i = 0; i < 100 && st != 'D'; i++) {
		usleep(20000);
		st = thread_state(pid, pid);
	}
	if (st != 'D') {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		sp_test_skip_env("the vfork parent is not in state D here");
	}
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/dsleep.spool", sp_test_tmpdir());
	stackpulse_recorder *rec = NULL;
	double t0 = rec_now();
	int rc = stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL,
	                                    &rec);
	double took = rec_now() - t0;
	printf("attach: rc=%d after %.1f s: %s\n", rc, took, stackpulse_last_error());
	CHECK_EQ(rc, -ETIMEDOUT);
	CHECK(rec == NULL);
	CHECK(strstr(stackpulse_last_error(), "did not stop") != NULL);
	CHECK(took >= 4.5);
	/* Nothing traces the target any more, while we still live. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *status = sp_test_read_file(path, NULL);
	REQUIRE(status != NULL);
	CHECK(strstr(status, "TracerPid:\t0\n") != NULL);
	free(status);
	/* The sleeper wakes (9 s) and the target runs to its end: a thread
	 * left with a pending interrupt would stop there instead. */
	int wst = 0;
	pid_t w = 0;
	for (int i = 0; i < 150 && w == 0; i++) {
		usleep(100000);
		w = waitpid(pid, &wst, WNOHANG);
		if (w == 0 && i % 10 == 9)
			CHECK(thread_state(pid, pid) != 't');
	}
	if (w == 0) {
		printf("target state after 15 s: %c\n", thread_state(pid, pid));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	CHECK_EQ(w, pid);
	CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
}

/* A process whose main() left with pthread_exit has a zombie leader and a
 * live worker: both attach modes record it (not "a zombie"), to its end. */
SP_TEST(attach_after_the_leader_exited)
{
	const char *bin = rec_target("leader_exit", "-pthread");
	for (int mode = 0; mode < 2; mode++) {
		int m = mode ? STACKPULSE_ATTACH_LIVE : STACKPULSE_ATTACH_STOP_ENABLE_RESUME;
		pid_t pid = start(bin, "1.5");
		char st = '?';
		for (int i = 0; i < 100 && st != 'Z'; i++) {
			usleep(10000);
			st = thread_state(pid, pid);
		}
		REQUIRE_EQ(st, 'Z');
		char spool[512];
		snprintf(spool, sizeof(spool), "%s/leader_gone%d.spool", sp_test_tmpdir(), mode);
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.frequency = 499;
		stackpulse_recorder *rec;
		int rc = stackpulse_recorder_attach(pid, spool, (enum stackpulse_attach_mode)m, &o,
		                                    &rec);
		printf("mode %d: rc=%d %s\n", m, rc, rc ? stackpulse_last_error() : "");
		REQUIRE_OK(rc);
		CHECK(!rec_any_stopped(pid));
		CHECK_EQ(stackpulse_recorder_process_is_active(rec, pid), 1);
		CHECK_OK(rec_run(rec, 20));
		REQUIRE_OK(rec_finish(rec));
		CHECK(reap(pid, 5));
		stackpulse_spool *sp;
		REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
		const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(sp);
		const char *seq[] = { "orphan_work" };
		int leafs = 0, total = 0;
		stackpulse_sample_iter *it;
		REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
		const struct stackpulse_sample *s;
		while (stackpulse_sample_iter_next(it, &s) == 1) {
			const char *names[256];
			uint32_t d = rec_stack_names(sp, s->stack, names, 256);
			total++;
			leafs += rec_has_seq(names, d, seq, 1);
		}
		stackpulse_sample_iter_free(it);
		printf("mode %d: %llu samples, %d in orphan_work\n", m,
		       (unsigned long long)meta->samples, leafs);
		CHECK(total > 100);
		CHECK(leafs * 100 > total * 90);
		stackpulse_spool_close(sp);
	}
}

/* wait tells a timeout (target alive, nothing to read) from the exit of
 * every followed process. */
SP_TEST(wait_tells_timeout_from_exit)
{
	pid_t pid = start("/bin/sleep", "30");
	usleep(100000);
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/wait_result.spool", sp_test_tmpdir());
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, NULL, &rec));
	/* A sleeping target gives no samples: once the attach records are
	 * drained, a wait times out. */
	int w = STACKPULSE_WAIT_READY;
	for (int i = 0; i < 50 && w != STACKPULSE_WAIT_TIMEOUT; i++) {
		w = stackpulse_recorder_wait(rec, 50);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	CHECK_EQ(w, STACKPULSE_WAIT_TIMEOUT);
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, pid), 1);
	kill(pid, SIGKILL);
	CHECK(reap(pid, 5));
	for (int i = 0; i < 100 && w != STACKPULSE_WAIT_EXITED; i++) {
		w = stackpulse_recorder_wait(rec, 100);
		CHECK(w >= 0 || w == -EINTR);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	CHECK_EQ(w, STACKPULSE_WAIT_EXITED);
	CHECK_STR(stackpulse_last_error(), "");
	REQUIRE_OK(rec_finish(rec));
}

/* ---- the target's existing process tree ---- */

/* Starts @p argv with $TREE_PIDS set to a file of this test, waits for
 * the @p n child pids it writes there (tree.c, the Python tree script)
 * and returns the parent's pid. */
static pid_t start_tree(char *const argv[], pid_t *kids, int n)
{
	char pidfile[600];
	snprintf(pidfile, sizeof(pidfile), "%s/tree.pids", sp_test_tmpdir());
	unlink(pidfile);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("TREE_PIDS", pidfile, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	REQUIRE(pid > 0);
	int got = 0;
	for (int i = 0; i < 1000 && got < n; i++) {
		usleep(10000);
		FILE *f = fopen(pidfile, "r");
		if (!f)
			continue;
		got = 0;
		int v;
		while (got < n && fscanf(f, "%d", &v) == 1)
			kids[got++] = (pid_t)v;
		fclose(f);
	}
	if (got < n) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	REQUIRE_EQ(got, n);
	usleep(200000); /* Let the children reach their loops. */
	return pid;
}

/* Name of frame @p id at place @p i (leaf first) of a stack: the ELF
 * symbol of a native frame, the qualname of a Python frame, else "". */
static const char *frame_name(const stackpulse_spool *sp, uint32_t id, uint32_t i)
{
	const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, id);
	if (f && f->kind == STACKPULSE_FRAME_PYTHON) {
		const struct stackpulse_pycode *c = stackpulse_spool_pycode(sp, f->pycode);
		return c ? c->qualname : "";
	}
	if (!f || f->kind != STACKPULSE_FRAME_NATIVE)
		return "";
	const struct stackpulse_module *m = stackpulse_spool_module(sp, f->module);
	const char *n = m ? rec_elf_name(m->path, f->offset - (i > 0 && f->offset ? 1 : 0)) : NULL;
	return n ? n : "";
}

static int stack_has(const stackpulse_spool *sp, uint32_t stack, const char *fn)
{
	uint32_t ids[256];
	uint32_t d = stackpulse_spool_stack_frames(sp, stack, ids, 256);
	for (uint32_t i = 0; i < d && i < 256; i++)
		if (strcmp(frame_name(sp, ids[i], i), fn) == 0)
			return 1;
	return 0;
}

/* Records @p parent for about a second in @p mode with @p o into @p spool. */
static void record_tree(pid_t parent, enum stackpulse_attach_mode mode,
                        const stackpulse_recorder_opts *o, const char *spool)
{
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(parent, spool, mode, o, &rec));
	double end = rec_now() + 1.0;
	while (rec_now() < end) {
		int w = stackpulse_recorder_wait(rec, 100);
		CHECK(w >= 0 || w == -EINTR);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	REQUIRE_OK(rec_finish(rec));
}

/* Every child of @p kinds (tree.c letters: 's' naps, 'b' spins) is in the
 * spool: listed, a spinner with samples (most of them in @p busy_fn), a
 * napper, with off-CPU intervals (@p off), with blocked intervals adding
 * up to a good part of the second, some of them under @p nap_fn. */
static void check_tree(const char *spool, const pid_t *kids, const char *kinds, int off,
                       const char *busy_fn, const char *nap_fn, const char *tag)
{
	enum {
		K = 8
	};
	int n = (int)strlen(kinds), listed[K] = { 0 }, samples[K] = { 0 }, busy[K] = { 0 };
	int waits[K] = { 0 }, named[K] = { 0 };
	double blocked[K] = { 0 };
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	for (uint32_t i = 0; i < stackpulse_spool_process_count(sp); i++)
		for (int k = 0; k < n; k++)
			listed[k] |= stackpulse_spool_process(sp, i)->pid == kids[k];
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1)
		for (int k = 0; k < n; k++)
			if (s->pid == kids[k]) {
				samples[k]++;
				busy[k] += stack_has(sp, s->stack, busy_fn);
			}
	stackpulse_sample_iter_free(it);
	if (off) {
		stackpulse_offcpu_iter *oi;
		REQUIRE_OK(stackpulse_offcpu_iter_new(sp, &oi));
		const struct stackpulse_offcpu *iv;
		while (stackpulse_offcpu_iter_next(oi, &iv) == 1)
			for (int k = 0; k < n; k++)
				if (iv->pid == kids[k] && iv->state == STACKPULSE_OFFCPU_BLOCKED) {
					waits[k] += 1 + (int)iv->merged;
					blocked[k] +=
					        (double)(iv->duration_ns + iv->merged_ns) / 1e9;
					named[k] += iv->stack && stack_has(sp, iv->stack, nap_fn);
				}
		stackpulse_offcpu_iter_free(oi);
	}
	stackpulse_spool_close(sp);
	for (int k = 0; k < n; k++) {
		printf("    %s: child %d (%c): listed %d, %d samples (%d in %s), %d waits "
		       "(%d under %s) for %.2fs\n",
		       tag, (int)kids[k], kinds[k], listed[k], samples[k], busy[k], busy_fn,
		       waits[k], named[k], nap_fn, blocked[k]);
		CHECK(listed[k]);
		if (kinds[k] == 'b') {
			CHECK(samples[k] >= 10);
			CHECK(busy[k] * 2 >= samples[k]);
		}
		if (kinds[k] == 's' && off) {
			CHECK(waits[k] >= 5);
			CHECK(blocked[k] >= 0.3);
			CHECK(named[k] >= 1);
		}
	}
}

/* An attach follows the children the target already has, as a spawn
 * follows the ones it forks: in both attach modes, with and without
 * off-CPU intervals (which turn pausing off for a CPython target). */
SP_TEST(attach_follows_the_existing_tree)
{
	const char *bin = rec_target("tree", NULL);
	pid_t kids[3];
	char *argv[] = { (char *)bin, "60:ssb", NULL };
	pid_t parent = start_tree(argv, kids, 3);
	for (int mode = 0; mode < 2; mode++) {
		for (int off = 0; off < 2; off++) {
			char tag[64], spool[600];
			snprintf(tag, sizeof(tag), "%s%s", mode ? "live" : "stop",
			         off ? "+off-cpu" : "");
			snprintf(spool, sizeof(spool), "%s/tree-%d%d.spool", sp_test_tmpdir(), mode,
			         off);
			stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
			o.frequency = 499;
			o.off_cpu = off ? STACKPULSE_FEATURE_REQUIRED : STACKPULSE_FEATURE_OFF;
			record_tree(parent, (enum stackpulse_attach_mode)mode, &o, spool);
			check_tree(spool, kids, "ssb", off, "busy_work", "nap_work", tag);
			CHECK(!rec_any_stopped(parent));
			for (int k = 0; k < 3; k++)
				CHECK(!rec_any_stopped(kids[k]));
		}
	}
	kill(parent, SIGKILL); /* Its children die with it (PR_SET_PDEATHSIG). */
	waitpid(parent, NULL, 0);
}

static const char tree_py[] =
        "import multiprocessing as mp, os, time\n"
        "def nap():\n"
        "    while True:\n"
        "        time.sleep(0.02)\n"
        "def burn():\n"
        "    x = 0\n"
        "    while True:\n"
        "        x += 1\n"
        "if __name__ == '__main__':\n"
        "    mp.set_start_method('fork')\n"
        "    kids = [mp.Process(target=f, daemon=True) for f in (nap, nap, burn)]\n"
        "    for k in kids:\n"
        "        k.start()\n"
        "    path = os.environ['TREE_PIDS']\n"
        "    with open(path + '.tmp', 'w') as f:\n"
        "        f.write(''.join('%d\\n' % k.pid for k in kids))\n"
        "    os.rename(path + '.tmp', path)\n"
        "    time.sleep(120)\n";

/* The same for a CPython parent with two sleeping multiprocessing children
 * and a busy one, in every attach mode, with and without off-CPU
 * intervals, with pausing AUTO, on and off (on cannot go with off-CPU). */
SP_TEST(attach_follows_the_existing_python_tree)
{
	py_versions v;
	char script[600];
	py_script_setup(&v, "tree.py", tree_py, script, sizeof(script));
	/* One interpreter: the 3.13 of the issue when there is one. */
	const char *py = v.path[0];
	for (int i = 0; i < v.n; i++)
		if (strstr(v.path[i], "3.13"))
			py = v.path[i];
	pid_t kids[3];
	char *argv[] = { (char *)py, script, NULL };
	pid_t parent = start_tree(argv, kids, 3);
	static const enum stackpulse_feature pauses[] = { STACKPULSE_FEATURE_AUTO,
		                                          STACKPULSE_FEATURE_REQUIRED,
		                                          STACKPULSE_FEATURE_OFF };
	static const char *const pause_names[] = { "auto", "on", "off" };
	for (int mode = 0; mode < 2; mode++) {
		for (int off = 0; off < 2; off++) {
			for (int p = 0; p < 3; p++) {
				if (off && pauses[p] == STACKPULSE_FEATURE_REQUIRED)
					continue; /* Refused: each pause would be an interval. */
				char tag[96], spool[600];
				snprintf(tag, sizeof(tag), "%s%s pause=%s", mode ? "live" : "stop",
				         off ? "+off-cpu" : "", pause_names[p]);
				snprintf(spool, sizeof(spool), "%s/pytree-%d%d%d.spool",
				         sp_test_tmpdir(), mode, off, p);
				stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
				o.frequency = 499;
				o.python = STACKPULSE_FEATURE_REQUIRED;
				o.python_pause = pauses[p];
				o.off_cpu =
				        off ? STACKPULSE_FEATURE_REQUIRED : STACKPULSE_FEATURE_OFF;
				record_tree(parent, (enum stackpulse_attach_mode)mode, &o, spool);
				check_tree(spool, kids, "ssb", off, "burn", "nap", tag);
				CHECK(!rec_any_stopped(parent));
				for (int k = 0; k < 3; k++)
					CHECK(!rec_any_stopped(kids[k]));
			}
		}
	}
	kill(parent, SIGKILL); /* Daemonic children end with it. */
	waitpid(parent, NULL, 0);
	for (int k = 0; k < 3; k++)
		kill(kids[k], SIGKILL);
}

/* A recorder attached to one of its own ancestors, children followed,
 * leaves itself out of the tree: it neither samples nor stops itself.
 * The recorder runs in a child of this process and attaches to it. */
SP_TEST(attach_to_an_ancestor_leaves_the_recorder_out)
{
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/ancestor.spool", sp_test_tmpdir());
	for (int mode = 0; mode < 2; mode++) {
		pid_t c = fork();
		REQUIRE(c >= 0);
		if (c == 0) {
			stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
			o.frequency = 999;
			stackpulse_recorder *rec;
			if (stackpulse_recorder_attach(getppid(), spool,
			                               (enum stackpulse_attach_mode)mode, &o, &rec))
				_exit(2);
			/* Busy in the recorder's own calls: samples of it, if any. */
			double end = rec_now() + 0.5;
			while (rec_now() < end)
				stackpulse_recorder_consume_available(rec);
			_exit(rec_finish(rec) ? 3 : 0);
		}
		int status;
		/* The target (this process) waits: it may be stopped meanwhile. */
		REQUIRE_EQ(waitpid(c, &status, 0), c);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		stackpulse_spool *sp;
		REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
		int self = 0;
		for (uint32_t i = 0; i < stackpulse_spool_process_count(sp); i++)
			self += stackpulse_spool_process(sp, i)->pid == c;
		uint64_t samples = 0;
		stackpulse_sample_iter *it;
		REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
		const struct stackpulse_sample *s;
		while (stackpulse_sample_iter_next(it, &s) == 1)
			samples += s->pid == c;
		stackpulse_sample_iter_free(it);
		stackpulse_spool_close(sp);
		printf("    %s: the recorder (pid %d) listed %d times, %llu samples of it\n",
		       mode ? "live" : "stop", (int)c, self, (unsigned long long)samples);
		CHECK_EQ(self, 0);
		CHECK_EQ(samples, 0);
	}
}
