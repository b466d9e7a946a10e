/* Every error path of attach and spawn gives a precise code and detail,
 * and leaves the target running. */
#include <errno.h>
#include <sys/stat.h>

#include "rec_driver.h"
#include "rec_stats.h"

static void expect_err(int rc, int code, const char *needle)
{
	if (rc != code)
		sp_test_fail(__FILE__, __LINE__, "rc %d (%s), expected %d", rc,
		             stackpulse_last_error(), code);
	if (needle && !strstr(stackpulse_last_error(), needle))
		sp_test_fail(__FILE__, __LINE__, "detail \"%s\" lacks \"%s\"",
		             stackpulse_last_error(), needle);
}

static const char *spool_path(const char *tag)
{
	static char p[512];
	snprintf(p, sizeof(p), "%s/%s.spool", sp_test_tmpdir(), tag);
	return p;
}

SP_TEST(nonexistent_pid)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0); /* Reaped: the pid is free now. */
	stackpulse_recorder *rec = (stackpulse_recorder *)1;
	expect_err(stackpulse_recorder_attach(pid, spool_path("nopid"), 0, NULL, &rec), -ESRCH,
	           "no process");
	CHECK(rec == NULL);
	expect_err(stackpulse_recorder_attach(0, spool_path("nopid"), 0, NULL, &rec), -ESRCH, NULL);
	expect_err(stackpulse_recorder_attach(-5, spool_path("nopid"), 1, NULL, &rec), -ESRCH,
	           NULL);
}

SP_TEST(zombie)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	/* Not reaped: wait for the zombie state. */
	siginfo_t si;
	waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
	stackpulse_recorder *rec;
	expect_err(stackpulse_recorder_attach(pid, spool_path("zombie"), 0, NULL, &rec), -ESRCH,
	           "zombie");
	expect_err(stackpulse_recorder_attach(pid, spool_path("zombie"), 1, NULL, &rec), -ESRCH,
	           "zombie");
	waitpid(pid, NULL, 0);
}

static pid_t sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	usleep(50000);
	return pid;
}

SP_TEST(bad_options)
{
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 0;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "frequency 0");
	o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 100000000;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "perf_event_max_sample_rate");
	o = STACKPULSE_RECORDER_OPTS;
	o.stack_size = 65536;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "stack_size 65536");
	o.stack_size = 1000 + 4;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "multiple of 8");
	o.stack_size = 0;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL, NULL);
	o = STACKPULSE_RECORDER_OPTS;
	o.perf_event = (enum stackpulse_perf_event)9;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "perf_event");
	o = STACKPULSE_RECORDER_OPTS;
	o.kernel = 7;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "kernel");
	o = STACKPULSE_RECORDER_OPTS;
	o.python_pause = (enum stackpulse_feature)5;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "python_pause option 5");
	o.python_pause = STACKPULSE_FEATURE_REQUIRED;
	o.python = STACKPULSE_FEATURE_OFF;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "python is OFF");
	o.python = STACKPULSE_FEATURE_AUTO;
	o.off_cpu = STACKPULSE_FEATURE_AUTO;
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec), -EINVAL,
	           "off-CPU interval");
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 42, NULL, &rec), -EINVAL,
	           "mode");
	expect_err(stackpulse_recorder_attach(pid, spool_path("opts"), 0, NULL, NULL), -EINVAL,
	           NULL);
	char *argv[] = { "/bin/true", NULL };
	o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 0;
	expect_err(stackpulse_recorder_spawn(argv, spool_path("opts"), &o, &rec, NULL), -EINVAL,
	           "frequency");
	/* The largest legal values work. */
	o = STACKPULSE_RECORDER_OPTS;
	o.stack_size = 65528;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool_path("opts"), 0, &o, &rec));
	CHECK_OK(rec_finish(rec));
	CHECK(!rec_any_stopped(pid));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

SP_TEST(cycles_is_refused_without_a_pmu_but_auto_falls_back)
{
	if (access("/sys/bus/event_source/devices/cpu", F_OK) == 0)
		sp_test_skip_env("this machine has a CPU PMU");
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.perf_event = STACKPULSE_PERF_EVENT_CYCLES;
	int rc = stackpulse_recorder_attach(pid, spool_path("cycles"), 0, &o, &rec);
	CHECK(rc < 0);
	CHECK(strstr(stackpulse_last_error(), "cycles") != NULL);
	CHECK(!rec_any_stopped(pid));
	o.perf_event = STACKPULSE_PERF_EVENT_AUTO;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool_path("cycles"), 0, &o, &rec));
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	CHECK_EQ(st.perf_event, STACKPULSE_PERF_EVENT_CPU_CLOCK);
	CHECK_OK(rec_finish(rec));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

SP_TEST(unwritable_spool_path)
{
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	expect_err(stackpulse_recorder_attach(pid, "/nonexistent-dir/x.spool", 0, NULL, &rec),
	           -ENOENT, "/nonexistent-dir/x.spool");
	int rc = stackpulse_recorder_attach(pid, sp_test_tmpdir(), 0, NULL, &rec);
	CHECK(rc == -EISDIR || rc == -EINVAL || rc == -EEXIST);
	expect_err(stackpulse_recorder_attach(pid, "", 0, NULL, &rec), -EINVAL, NULL);
	char *argv[] = { "/bin/true", NULL };
	pid_t child = 0;
	expect_err(stackpulse_recorder_spawn(argv, "/nonexistent-dir/y.spool", NULL, &rec, &child),
	           -ENOENT, NULL);
	CHECK(!rec_any_stopped(pid));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

SP_TEST(spawn_of_a_missing_program)
{
	char *argv[] = { "/nonexistent/program", "x", NULL };
	stackpulse_recorder *rec;
	pid_t child = 0;
	expect_err(stackpulse_recorder_spawn(argv, spool_path("missing"), NULL, &rec, &child),
	           -ENOENT, "/nonexistent/program");
	char *empty[] = { NULL };
	expect_err(stackpulse_recorder_spawn(empty, spool_path("missing"), NULL, &rec, &child),
	           -EINVAL, NULL);
	/* No child is left behind. */
	CHECK(waitpid(-1, NULL, WNOHANG) <= 0);
}

SP_TEST(untraceable_pid_as_nobody)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	char env[1024], out[1024];
	snprintf(env, sizeof(env), "SP_REC_DRIVER=attach_pid SP_REC_PID=1 SP_REC_SPOOL=%s/x.spool",
	         rec_public_dir());
	int st = rec_drive(env, 1, out, sizeof(out));
	printf("nobody -> pid 1: %s", out);
	CHECK(st == 1);
	CHECK(strstr(out, "rc=-1 ") != NULL || strstr(out, "rc=-13 ") != NULL);
	/* The refusal is ptrace's: the uids and the missing capability, not perf
	 * advice. */
	CHECK(strstr(out, "perf_event_paranoid") == NULL);
	CHECK(strstr(out, "pid 1 belongs to uid 0 and we run as uid 65534 without "
	                  "CAP_SYS_PTRACE") != NULL);
}

/* Root has CAP_SYS_PTRACE: when pid 1 is still refused, the message names
 * what refused it (Yama, seccomp, a namespace or a security module) and
 * gives no uid or perf advice that cannot apply. */
SP_TEST(untraceable_pid_as_root_says_what_refused)
{
	if (geteuid() != 0)
		sp_test_skip("needs root");
	stackpulse_recorder *rec = NULL;
	int rc = stackpulse_recorder_attach(1, spool_path("pid1"),
	                                    STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL, &rec);
	if (rc == 0) {
		rec_finish(rec);
		sp_test_skip("pid 1 is traceable by root here");
	}
	const char *msg = stackpulse_last_error();
	printf("root -> pid 1: %d %s\n", rc, msg);
	CHECK(rc == -EPERM || rc == -EACCES);
	CHECK(strstr(msg, "perf_event_paranoid") == NULL);
	CHECK(strstr(msg, "run as that user or as root") == NULL);
	CHECK(strstr(msg, "security module") || strstr(msg, "yama") || strstr(msg, "seccomp") ||
	      strstr(msg, "user namespace") || strstr(msg, "already traced"));
}

SP_TEST(spool_in_an_unwritable_directory_as_nobody)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	char env[1024], out[1024];
	snprintf(env, sizeof(env), "SP_REC_DRIVER=spawn SP_REC_SPOOL=%s/x.spool", sp_test_tmpdir());
	int st = rec_drive(env, 1, out, sizeof(out));
	printf("nobody writes into a root dir: %s", out);
	CHECK(st == 1);
	CHECK(strstr(out, "rc=-13 ") != NULL);
	CHECK(strstr(out, "cannot create the spool") != NULL);
}

SP_TEST(python_required_on_a_non_python_target)
{
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.python = STACKPULSE_FEATURE_REQUIRED;
	expect_err(stackpulse_recorder_attach(pid, spool_path("py"), 0, &o, &rec),
	           STACKPULSE_ENOTFOUND, "runs no CPython");
	CHECK(!rec_any_stopped(pid));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

SP_TEST(attach_to_ourselves)
{
	stackpulse_recorder *rec;
	expect_err(stackpulse_recorder_attach(getpid(), spool_path("self"),
	                                      STACKPULSE_ATTACH_STOP_ENABLE_RESUME, NULL, &rec),
	           -EINVAL, "ATTACH_LIVE");
	/* Live attach to ourselves works: we sample our own spinning. */
	REQUIRE_OK(stackpulse_recorder_attach(getpid(), spool_path("self"), STACKPULSE_ATTACH_LIVE,
	                                      NULL, &rec));
	volatile unsigned long x = 0;
	double end = rec_now() + 0.3;
	while (rec_now() < end)
		x = x * 3 + 1;
	CHECK_OK(stackpulse_recorder_consume_available(rec));
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	CHECK_EQ(stackpulse_recorder_process_is_active(rec, getpid()), 1);
	CHECK_OK(rec_finish(rec));
	CHECK(st.samples > 0);
}

/* A CPython the reader cannot read (pyenv's 3.9, when installed) is
 * recorded without Python frames in AUTO mode, and the stats say so. */
SP_TEST(unreadable_python_is_counted_in_the_stats)
{
	char py[600] = "";
	FILE *f = popen("ls -d \"$(pyenv root 2>/dev/null)\"/versions/3.9*/bin/python3.9 "
	                "2>/dev/null | head -n 1",
	                "r");
	if (f) {
		if (!fgets(py, sizeof(py), f))
			py[0] = '\0';
		pclose(f);
	}
	py[strcspn(py, "\n")] = '\0';
	if (!py[0] || access(py, X_OK) != 0)
		sp_test_skip("no CPython 3.9 here (pyenv install 3.9)");
	char *argv[] = { py, "-c",
		         "import time\nt = time.time()\nwhile time.time() - t < 0.4: pass", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	stackpulse_recorder *rec;
	pid_t child;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool_path("py39"), &o, &rec, &child));
	while (stackpulse_recorder_process_is_active(rec, 0)) {
		int r = stackpulse_recorder_wait(rec, 100);
		if ((r < 0 && r != -EINTR) || stackpulse_recorder_consume_available(rec) < 0)
			break;
	}
	struct rec_stats st = { 0 };
	memset(&st, 0, sizeof(st));
	CHECK_OK(rec_stats_get(rec, &st));
	struct rec_python_stats ps = { 0 };
	memset(&ps, 0, sizeof(ps));
	CHECK_OK(rec_python_stats_get(rec, &ps));
	const char *note = stackpulse_recorder_python_note(rec);
	printf("    samples %llu, python_frames %d, unreadable %u: %s\n",
	       (unsigned long long)st.samples, st.python_frames, ps.python_unreadable, note);
	CHECK(st.samples > 0);
	CHECK_EQ(st.python_frames, 0);
	CHECK_EQ(ps.python_unreadable, 1);
	CHECK(strstr(note, "CPython 3.9 is not supported "
	                   "(stackpulse reads CPython 3.10 to 3.14)") != NULL);
	CHECK_OK(rec_finish(rec));
	waitpid(child, NULL, 0);
}

/* One counter model: stackpulse_recorder_stat by key, readable after
 * finish until free; unknown keys are refused; a finished recorder refuses
 * every call but stat, the note and free. */
SP_TEST(stats_by_key_outlive_finish_until_free)
{
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool_path("statkeys"), 0, &o, &rec));
	uint64_t v = 7;
	expect_err(stackpulse_recorder_stat(rec, (stackpulse_stat)0, &v), -EINVAL, "not a counter");
	expect_err(stackpulse_recorder_stat(rec, (stackpulse_stat)-3, &v), -EINVAL, NULL);
	expect_err(stackpulse_recorder_stat(rec, (stackpulse_stat)10000, &v), -ENOENT,
	           "not counted by this library");
	expect_err(stackpulse_recorder_stat(rec, STACKPULSE_STAT_UNWIND_ERRORS, &v), -ENOENT,
	           "spools only");
	expect_err(stackpulse_recorder_stat(rec, STACKPULSE_STAT_SAMPLES, NULL), -EINVAL, NULL);
	expect_err(stackpulse_recorder_stat(NULL, STACKPULSE_STAT_SAMPLES, &v), -EINVAL, NULL);
	CHECK_EQ(v, 7); /* untouched by the refusals */
	/* Every key the header names reads on a live recorder. */
	for (int k = 1; k <= STACKPULSE_STAT_PYTHON_PAUSED; k++)
		if (k != STACKPULSE_STAT_UNWIND_ERRORS)
			CHECK_OK(stackpulse_recorder_stat(rec, (stackpulse_stat)k, &v));
	CHECK_OK(stackpulse_recorder_stat(rec, STACKPULSE_STAT_PROCESSES, &v));
	CHECK_EQ(v, 1);
	uint64_t before = 0;
	CHECK_OK(stackpulse_recorder_stat(rec, STACKPULSE_STAT_BYTES_WRITTEN, &before));

	CHECK_OK(stackpulse_recorder_finish(rec));
	/* After finish: the final counters (finish wrote the footer). */
	uint64_t after = 0;
	CHECK_OK(stackpulse_recorder_stat(rec, STACKPULSE_STAT_BYTES_WRITTEN, &after));
	CHECK(after > before);
	struct stat sb;
	REQUIRE(stat(spool_path("statkeys"), &sb) == 0);
	CHECK_EQ(after, (uint64_t)sb.st_size);
	CHECK_OK(stackpulse_recorder_stat(rec, STACKPULSE_STAT_PROCESSES, &v));
	CHECK_EQ(v, 1);
	expect_err(stackpulse_recorder_stat(rec, (stackpulse_stat)10000, &v), -ENOENT, NULL);
	CHECK(stackpulse_recorder_python_note(rec)[0] == '\0');
	expect_err(stackpulse_recorder_wait(rec, 0), STACKPULSE_ESTATE, "finished");
	expect_err(stackpulse_recorder_consume_available(rec), STACKPULSE_ESTATE, "finished");
	expect_err(stackpulse_recorder_fd(rec), STACKPULSE_ESTATE, "finished");
	expect_err(stackpulse_recorder_finish(rec), STACKPULSE_ESTATE, "finished already");
	CHECK(!stackpulse_recorder_process_is_active(rec, 0));
	stackpulse_recorder_free(rec);
	stackpulse_recorder_free(NULL);
	CHECK(!rec_any_stopped(pid));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Free without finish finishes first: the spool is complete. */
SP_TEST(free_without_finish_seals_the_spool)
{
	pid_t pid = sleeper();
	stackpulse_recorder *rec;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool_path("freeonly"), 0, NULL, &rec));
	stackpulse_recorder_free(rec);
	stackpulse_spool *s = NULL;
	stackpulse_spool_open_opts so = STACKPULSE_SPOOL_OPEN_OPTS;
	so.flags = STACKPULSE_SPOOL_STRICT;
	CHECK_OK(stackpulse_spool_open(spool_path("freeonly"), &so, &s));
	CHECK(!stackpulse_spool_meta(s)->truncated);
	stackpulse_spool_close(s);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
