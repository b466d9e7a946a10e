/* Pausing CPython targets at their samples (opts.python_pause, record
 * --python-pause), on every CPython here: child processes and execs are
 * followed with whole chains, and so are threads that start and end; a
 * wait on the target from the recorder's process does not leave it
 * stopped; recordings finish promptly and let the target go; a group stop
 * stays a stop; a target that cannot be traced is recorded unpaused under
 * AUTO and refused under REQUIRED. Every target must end with its own exit
 * status: a trap that reached it would kill it. test_python_shapes checks
 * the paused shapes, test_python_lifecycle a paused attach to threads. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "py_versions.h"
#include "stackpulse.h"
#include "rec_stats.h"

/* A fork that runs Python, a subprocess that execs Python, and the parent;
 * argv[1]: a file to write "ok" to when every child ended as it should. */
static const char family_script[] =
        "import os, subprocess, sys, time\n"
        "def spin(s):\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < s:\n"
        "        sum(i * i for i in range(1000))\n"
        "def forked():\n"
        "    spin(0.3)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    forked()\n"
        "    os._exit(3)\n"
        "sub = 'import time\\ndef sub():\\n    t = time.process_time()\\n'\n"
        "sub += '    while time.process_time() - t < 0.3: pass\\nsub()\\n'\n"
        "r = subprocess.run([sys.executable, '-c', sub])\n"
        "spin(0.2)\n"
        "_, st = os.waitpid(pid, 0)\n"
        "if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 3 and r.returncode == 0:\n"
        "    open(sys.argv[1], 'w').write('ok')\n";

static const char busy_script[] = "import sys, time\n"
                                  "def busy(s):\n"
                                  "    t = time.process_time()\n"
                                  "    while time.process_time() - t < s:\n"
                                  "        sum(i * i for i in range(1000))\n"
                                  "busy(float(sys.argv[1]))\n";

/* 100 threads that wait, and 8 rounds of 16 threads that work and end:
 * threads join and leave the traced set all through the recording.
 * argv[1]: a file to write "ok" to when every thread ended. */
static const char churn_script[] =
        "import sys, threading\n"
        "stop = threading.Event()\n"
        "idle = [threading.Thread(target=stop.wait) for _ in range(100)]\n"
        "for t in idle: t.start()\n"
        "def work():\n"
        "    for _ in range(20): sum(i * i for i in range(4000))\n"
        "for r in range(8):\n"
        "    ws = [threading.Thread(target=work) for _ in range(16)]\n"
        "    for w in ws: w.start()\n"
        "    for w in ws: w.join()\n"
        "stop.set()\n"
        "for t in idle: t.join()\n"
        "open(sys.argv[1], 'w').write('ok')\n";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits and drains for @p secs. */
static void record_for(stackpulse_recorder *rec, double secs)
{
	for (double end = now_s() + secs; now_s() < end;) {
		stackpulse_recorder_wait(rec, 20);
		stackpulse_recorder_consume_available(rec);
	}
}

/* Samples of report --folded lines that contain @p name, and of those
 * whose chain is whole (no cut marker, and @p root in it). */
static void count(char *text, const char *name, const char *root, long long *n, long long *whole)
{
	*n = *whole = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');
		if (!sp || !strstr(line, name))
			continue;
		long long c = atoll(sp + 1);
		*n += c;
		if (!strstr(line, "[truncated]") && strstr(line, root))
			*whole += c;
	}
}

/* Records @p py running @p script (which writes "ok" to the file named by
 * its first argument when all went as it should) paused at 499 Hz; returns
 * report --folded's text, and fails the test when the mark is missing. */
static char *record_paused(const char *py, const char *script, const char *tag)
{
	char cmd[1200], ok[600];
	snprintf(ok, sizeof(ok), "%s/%s.ok", sp_test_tmpdir(), tag);
	unlink(ok);
	snprintf(cmd, sizeof(cmd), "%s %s %s", py, script, ok);
	char *text = py_record_folded_with(tag, 499, "--python-pause=on", cmd, "");
	char *mark = sp_test_read_file(ok, NULL);
	if (!mark || strcmp(mark, "ok") != 0)
		sp_test_fail(__FILE__, __LINE__, "%s: the paused target did not end as it should",
		             py);
	free(mark);
	return text;
}

/* Fails the test unless @p name has @p min samples, 98% of them whole. */
static void check_whole(char *text, const char *py, const char *name, const char *root,
                        long long min)
{
	char *copy = strdup(text);
	REQUIRE(copy != NULL);
	long long n, whole;
	count(copy, name, root, &n, &whole);
	free(copy);
	fprintf(stderr, "    %s paused: %s...): %lld samples, %lld whole\n", py, name, n, whole);
	CHECK(n >= min);
	if (whole * 100 < n * 98)
		sp_test_fail(__FILE__, __LINE__, "%s: %s...): %lld of %lld whole", py, name, whole,
		             n);
}

SP_TEST(paused_children_and_execs_are_followed_whole)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "family.py", family_script, path, sizeof(path));
	const char *names[] = { "forked (", "sub (", "spin (" };
	for (int i = 0; i < vs.n; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "family%d", i);
		char *text = record_paused(vs.path[i], path, tag);
		/* 0.2-0.3 s of CPU each at 499 Hz: about 100-150 samples (spin:
		 * the child's and the parent's); children that did not end as
		 * they should leave no mark. */
		for (int k = 0; k < 3; k++)
			check_whole(text, vs.path[i], names[k], ";<module> (", slow ? 5 : 60);
		free(text);
	}
}

/* Threads that start and end while the target is paused at its samples:
 * each is traced from its birth and let go at its end, the target ends as
 * it should, and the workers' chains are whole (rooted in the thread's
 * bootstrap). */
SP_TEST(paused_threads_come_and_go)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "churn.py", churn_script, path, sizeof(path));
	for (int i = 0; i < vs.n; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "churn%d", i);
		char *text = record_paused(vs.path[i], path, tag);
		check_whole(text, vs.path[i], ";work (", "_bootstrap (", slow ? 5 : 60);
		free(text);
	}
}

/* Spawns @p py on busy_script for @p secs of CPU with python_pause @p mode
 * into @p spool; returns the recorder and the pid. */
static int spawn_busy(const char *py, const char *script, const char *secs, const char *spool,
                      enum stackpulse_feature mode, stackpulse_recorder **rec, pid_t *pid)
{
	char *argv[] = { (char *)py, (char *)script, (char *)secs, NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.python = STACKPULSE_FEATURE_REQUIRED;
	o.python_pause = mode;
	return stackpulse_recorder_spawn(argv, spool, &o, rec, pid);
}

/* A waitpid() on the target from the recorder's process may take one of
 * its trace stops: the tracer finds the thread stopped at its next tick
 * and lets it go, so the target still runs to its end. */
SP_TEST(a_wait_on_the_target_does_not_hold_it)
{
	py_versions vs;
	char path[512], spool[600];
	int slow = py_script_setup(&vs, "busy.py", busy_script, path, sizeof(path));
	for (int i = 0; i < vs.n; i++) {
		snprintf(spool, sizeof(spool), "%s/waited%d.spool", sp_test_tmpdir(), i);
		stackpulse_recorder *rec;
		pid_t pid;
		REQUIRE_OK(spawn_busy(vs.path[i], path, "0.5", spool, STACKPULSE_FEATURE_REQUIRED,
		                      &rec, &pid));
		double start = now_s(), end = start + (slow ? 120 : 20);
		int status = 0, reaped = 0, stolen = 0;
		while (!reaped && now_s() < end) {
			stackpulse_recorder_wait(rec, 5);
			CHECK_OK(stackpulse_recorder_consume_available(rec));
			int st;
			pid_t w = waitpid(pid, &st, WNOHANG | WUNTRACED);
			if (w == pid && WIFSTOPPED(st))
				stolen++;
			else if (w == pid) {
				reaped = 1;
				status = st;
			}
		}
		struct rec_python_stats ps = { 0 };
		CHECK_OK(rec_python_stats_get(rec, &ps));
		CHECK_OK(rec_finish(rec));
		if (!reaped) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		fprintf(stderr,
		        "    %s: %s in %.2f s, %d trace stops taken by our waitpid, %llu pauses\n",
		        vs.path[i], reaped ? "ended" : "held", now_s() - start, stolen,
		        (unsigned long long)ps.python_pauses);
		CHECK(reaped);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK_EQ(ps.python_paused, 1);
		CHECK(ps.python_pauses >= (slow ? 5u : 100u));
	}
}

/* Starts @p py on busy_script at @p script for @p secs of CPU, not under
 * a recorder; returns its pid once it had 0.2 s to start. */
static pid_t start_busy(const char *py, const char *script, const char *secs)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl(py, py, script, secs, (char *)NULL);
		_exit(127);
	}
	usleep(200000);
	return pid;
}

/* SIGSTOP stops a paused target as it stops any process, and SIGCONT
 * resumes it: the tracer keeps a group stop a stop. */
SP_TEST(a_group_stop_stays_a_stop)
{
	py_versions vs;
	char path[512], spool[600];
	py_script_setup(&vs, "busy_stop.py", busy_script, path, sizeof(path));
	snprintf(spool, sizeof(spool), "%s/stopped.spool", sp_test_tmpdir());
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(spawn_busy(vs.path[0], path, "0.6", spool, STACKPULSE_FEATURE_REQUIRED, &rec,
	                      &pid));
	record_for(rec, 0.3);
	REQUIRE_EQ(kill(pid, SIGSTOP), 0);
	double t;
	char stat[64];
	snprintf(stat, sizeof(stat), "/proc/%d/stat", (int)pid);
	int stopped = 0;
	for (t = now_s(); now_s() < t + 5 && !stopped;) {
		stackpulse_recorder_wait(rec, 20);
		stackpulse_recorder_consume_available(rec);
		char *s = sp_test_read_file(stat, NULL);
		const char *rp = s ? strrchr(s, ')') : NULL;
		stopped = rp && (rp[2] == 'T' || rp[2] == 't');
		free(s);
	}
	CHECK(stopped);
	/* Held for a while: it stays stopped (its CPU time stands still) and
	 * is not sampled. The samples taken before the stop are drained first,
	 * until their count stops growing (slower under ASan, or on a loaded
	 * machine). */
	struct rec_stats a = { 0 }, b = { 0 };
	uint64_t last = UINT64_MAX;
	for (t = now_s(); now_s() < t + 5;) {
		record_for(rec, 0.1);
		CHECK_OK(rec_stats_get(rec, &a));
		if (a.samples == last)
			break;
		last = a.samples;
	}
	long long cpu0 = sp_test_cpu_ticks(pid, 0);
	record_for(rec, 0.3);
	long long cpu1 = sp_test_cpu_ticks(pid, 0);
	CHECK_OK(rec_stats_get(rec, &b));
	fprintf(stderr, "    held: %llu samples before, %llu after; CPU ticks %lld -> %lld\n",
	        (unsigned long long)a.samples, (unsigned long long)b.samples, cpu0, cpu1);
	CHECK(cpu0 >= 0 && cpu1 <= cpu0 + 1);
	CHECK(b.samples <= a.samples + 2);
	REQUIRE_EQ(kill(pid, SIGCONT), 0);
	for (t = now_s(); stackpulse_recorder_process_is_active(rec, 0) && now_s() < t + 30;)
		record_for(rec, 0.05);
	CHECK_OK(rec_finish(rec));
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Paused recordings started and finished in a row on one target: each
 * finish returns at once (its tracer sees the waker's last stop even when
 * the finish's SIGCONT takes one back first; that race once held a finish
 * until the target ended) and leaves the target running, untraced. */
SP_TEST(paused_recordings_finish_promptly_and_let_go)
{
	py_versions vs;
	char path[512], spool[600];
	int slow = py_script_setup(&vs, "busy_cycles.py", busy_script, path, sizeof(path));
	pid_t pid = start_busy(vs.path[0], path, "60");
	snprintf(spool, sizeof(spool), "%s/cycles.spool", sp_test_tmpdir());
	double worst = 0;
	int cycles = slow ? 5 : 40;
	for (int k = 0; k < cycles; k++) {
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.frequency = 499;
		o.python_pause = STACKPULSE_FEATURE_REQUIRED;
		stackpulse_recorder *rec = NULL;
		REQUIRE_OK(
		        stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, &o, &rec));
		record_for(rec, 0.02 + 0.005 * (k % 16));
		double t = now_s();
		CHECK_OK(rec_finish(rec));
		t = now_s() - t;
		worst = t > worst ? t : worst;
	}
	char status[64];
	snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
	char *text = sp_test_read_file(status, NULL);
	fprintf(stderr, "    %d paused recordings, slowest finish %.3f s\n", cycles, worst);
	CHECK(text && strstr(text, "\nTracerPid:\t0\n") && !strstr(text, "\nState:\tt"));
	free(text);
	/* A hang lasted until the target ended; seconds are plenty even for
	 * a sanitized recorder in the emulated guest. */
	CHECK(worst < (slow ? 20.0 : 5.0));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A target traced by someone else (here: this test) cannot be paused:
 * AUTO records it unpaused and says why; REQUIRED refuses to attach. */
SP_TEST(a_traced_target_is_recorded_unpaused_or_refused)
{
	py_versions vs;
	char path[512], spool[600];
	py_script_setup(&vs, "busy_traced.py", busy_script, path, sizeof(path));
	pid_t pid = start_busy(vs.path[0], path, "30");
	REQUIRE_EQ(ptrace(PTRACE_SEIZE, pid, NULL, NULL), 0);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.python_pause = STACKPULSE_FEATURE_REQUIRED;
	stackpulse_recorder *rec = NULL;
	snprintf(spool, sizeof(spool), "%s/traced.spool", sp_test_tmpdir());
	int rc = stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, &o, &rec);
	fprintf(stderr, "    REQUIRED: %d (%s)\n", rc, stackpulse_last_error());
	CHECK_EQ(rc, -EPERM);
	CHECK(rec == NULL);
	o.python_pause = STACKPULSE_FEATURE_AUTO;
	REQUIRE_OK(stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_LIVE, &o, &rec));
	record_for(rec, 0.3);
	struct rec_python_stats ps = { 0 };
	CHECK_OK(rec_python_stats_get(rec, &ps));
	const char *note = stackpulse_recorder_python_note(rec);
	fprintf(stderr, "    AUTO: paused %d, %llu reads; note: %s\n", ps.python_paused,
	        (unsigned long long)ps.python_reads, note);
	CHECK_EQ(ps.python_paused, 0);
	CHECK(ps.python_reads > 20);
	CHECK(strstr(note, "not paused") != NULL);
	CHECK_OK(rec_finish(rec));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
