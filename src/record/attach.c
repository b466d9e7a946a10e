/* Attach and spawn mechanics. Every path that stops a thread has a path
 * that resumes it: sp_attach_stop undoes its own work on failure and the
 * recorder calls sp_attach_resume on every exit from the stop window. */
#include "record/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "record/perf_events.h"
#include "record/proc_scan.h"

#define STOP_TIMEOUT_MS 5000 /* A thread in D state may take a while. */
#define MAX_RESCANS     1000

int sp_attach_check_pid(pid_t pid)
{
	if (pid <= 0)
		return sp_error(-ESRCH, "pid %d is not a process id", (int)pid);
	char st;
	if (sp_proc_state(pid, &st, NULL) != 0)
		return sp_error(-ESRCH, "no process with pid %d", (int)pid);
	if (st == 'Z' || st == 'X')
		return sp_error(-ESRCH, "pid %d is a zombie (exited, not yet reaped by its parent)",
		                (int)pid);
	return 0;
}

void sp_attach_block_signals(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, old);
}

void sp_attach_restore_signals(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int stopped_has(const sp_stopped *s, pid_t tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->tids[i] == tid)
			return 1;
	return 0;
}

static int stopped_add(sp_stopped *s, pid_t tid, int sig)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;
		pid_t *nt = sp_realloc_array(s->tids, nc, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		s->tids = nt;
		int *ns = sp_realloc_array(s->sigs, nc, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		s->sigs = ns;
		s->cap = nc;
	}
	s->tids[s->n] = tid;
	s->sigs[s->n] = sig;
	s->n++;
	return 0;
}

/* Polls tracee @p tid: 0 nothing new, 1 exited (reaped unless
 * @p keep_exit: the caller's own child must stay for the caller to reap),
 * 2 stopped with *status set, < 0 error. */
static int poll_tracee(pid_t tid, int keep_exit, int *status)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)tid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL) != 0)
		return errno == ECHILD ? 1 : (errno == EINTR ? 0 : -errno);
	if (si.si_pid == 0)
		return 0;
	if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
		if (!keep_exit)
			waitpid(tid, status, __WALL | WNOHANG);
		return 1;
	}
	pid_t r = waitpid(tid, status, __WALL | WNOHANG);
	if (r == tid && WIFSTOPPED(*status))
		return 2;
	if (r == tid)
		return 1;
	return 0;
}

/* Detaches from @p tid; if it is no longer in a stop it was SIGKILLed and
 * is dying: reap its traced zombie so its process can be reaped. */
static void release(pid_t tid, int sig, int keep_exit)
{
	/* ptrace takes the signal number in its pointer argument. */
	void *data = (void *)(uintptr_t)sig; /* NOLINT(performance-no-int-to-ptr) */
	if (ptrace(PTRACE_DETACH, tid, NULL, data) == 0)
		return;
	long deadline = now_ms() + 2000;
	for (;;) {
		int status;
		int r = poll_tracee(tid, keep_exit, &status);
		if (r == 1 || r < 0)
			return;
		if (r == 2 && ptrace(PTRACE_DETACH, tid, NULL, NULL) == 0)
			return;
		if (now_ms() > deadline)
			return;
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

/* 1 when thread @p tid of @p pid is gone or exiting. */
static int thread_gone(pid_t pid, pid_t tid)
{
	char path[96], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) < 0)
		return 1;
	char *rp = strrchr(buf, ')');
	return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

static int permission_error(pid_t pid, int code, const char *what)
{
	char hint[320], buf[128];
	uid_t uid = (uid_t)-1;
	char st;
	sp_proc_state(pid, &st, &uid);
	long tracer = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char status[4096];
	if (sp_proc_read_small(path, status, sizeof(status)) > 0) {
		char *t = strstr(status, "TracerPid:");
		if (t)
			tracer = strtol(t + 10, NULL, 10);
	}
	if (tracer > 0)
		return sp_error(code, "%s pid %d refused: it is already traced by pid %ld", what,
		                (int)pid, tracer);
	sp_perf_permission_hint(hint, sizeof(hint));
	snprintf(buf, sizeof(buf), "pid %d belongs to uid %d and we run as uid %d", (int)pid,
	         (int)uid, (int)geteuid());
	return sp_error(code, "%s pid %d refused: %s; %s", what, (int)pid, buf, hint);
}

/* Waits (bounded) for @p tid to reach a ptrace stop. Returns 0 stopped
 * (*sig = signal to re-deliver), 1 when the thread is gone, or < 0. */
static int wait_stop(pid_t tid, int keep_exit, int *sig)
{
	long deadline = now_ms() + STOP_TIMEOUT_MS;
	*sig = 0;
	for (;;) {
		int status = 0;
		int r = poll_tracee(tid, keep_exit, &status);
		if (r < 0)
			return r;
		if (r == 1)
			return 1;
		if (r == 2) {
			if ((status >> 16) != PTRACE_EVENT_STOP)
				*sig = WSTOPSIG(status); /* Signal-delivery stop: keep it. */
			return 0;
		}
		if (now_ms() > deadline)
			return sp_error(-ETIMEDOUT, "thread %d did not stop within %d ms", (int)tid,
			                STOP_TIMEOUT_MS);
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
}

/* 1 when @p pid is the caller's own child: its exit status is the
 * caller's to collect, never ours. */
static int is_child_of_us(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) < 0)
		return 0;
	char *rp = strrchr(buf, ')');
	if (!rp || strlen(rp) < 5)
		return 0;
	return strtol(rp + 4, NULL, 10) == (long)getpid();
}

int sp_attach_stop(pid_t pid, sp_stopped *s)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->own_child = is_child_of_us(pid);
	int rc = 0;
	for (int round = 0; round < MAX_RESCANS; round++) {
		pid_t *tids;
		size_t n;
		rc = sp_proc_tasks(pid, &tids, &n);
		if (rc == -ESRCH)
			rc = sp_error(-ESRCH, "pid %d exited during attach", (int)pid);
		if (rc)
			break;
		int added = 0;
		for (size_t i = 0; i < n && rc == 0; i++) {
			pid_t tid = tids[i];
			if (stopped_has(s, tid))
				continue;
			if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
				int e = errno;
				if (e == ESRCH)
					continue; /* Thread exited meanwhile. */
				/* An exiting task also refuses with EPERM. */
				int gone = 0;
				for (int k = 0; k < 20 && !(gone = thread_gone(pid, tid)); k++) {
					struct timespec ts = { 0, 500000 };
					nanosleep(&ts, NULL);
				}
				if (gone && tid != pid)
					continue;
				if (gone) {
					rc = sp_error(-ESRCH, "pid %d exited during attach",
					              (int)pid);
					break;
				}
				rc = permission_error(pid, -e, "ptrace of");
				break;
			}
			if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 && errno != ESRCH) {
				rc = sp_error(-errno, "PTRACE_INTERRUPT of thread %d failed",
				              (int)tid);
				release(tid, 0, s->own_child && tid == pid);
				break;
			}
			int sig;
			int w = wait_stop(tid, s->own_child && tid == pid, &sig);
			if (w == 1)
				continue; /* Gone; reaped from our side. */
			if (w < 0) {
				rc = w;
				release(tid, 0, s->own_child && tid == pid);
				break;
			}
			rc = stopped_add(s, tid, sig);
			if (rc) {
				release(tid, sig, s->own_child && tid == pid);
				break;
			}
			added = 1;
		}
		sp_free(tids);
		if (rc)
			break;
		if (!added) {
			if (!stopped_has(s, pid)) {
				rc = sp_error(-ESRCH, "pid %d exited during attach", (int)pid);
				break;
			}
			return 0; /* Every thread listed is stopped: none can clone. */
		}
	}
	if (rc == 0)
		rc = sp_error(STACKPULSE_ELIMIT, "pid %d kept creating threads during attach",
		              (int)pid);
	sp_attach_resume(s);
	return rc;
}

void sp_attach_resume(sp_stopped *s)
{
	for (size_t i = 0; i < s->n; i++)
		release(s->tids[i], s->sigs[i], s->own_child && s->tids[i] == s->pid);
	sp_free(s->tids);
	sp_free(s->sigs);
	s->tids = NULL;
	s->sigs = NULL;
	s->n = s->cap = 0;
}

int sp_spawn_prepare(char *const argv[], const sigset_t *child_mask, pid_t *pid, int *go,
                     int *status_fd)
{
	int gp[2], sp[2];
	if (!argv || !argv[0] || !argv[0][0])
		return sp_error(-EINVAL, "spawn: empty argv");
	if (pipe2(gp, O_CLOEXEC) != 0)
		return sp_error(-errno, "spawn: pipe failed");
	if (pipe2(sp, O_CLOEXEC) != 0) {
		int e = errno;
		close(gp[0]);
		close(gp[1]);
		return sp_error(-e, "spawn: pipe failed");
	}
	pid_t child = fork();
	if (child < 0) {
		int e = errno;
		close(gp[0]);
		close(gp[1]);
		close(sp[0]);
		close(sp[1]);
		return sp_error(-e, "spawn: fork failed");
	}
	if (child == 0) {
		/* Only async-signal-safe calls until exec. */
		close(gp[1]);
		close(sp[0]);
		char c;
		ssize_t r;
		do {
			r = read(gp[0], &c, 1);
		} while (r < 0 && errno == EINTR);
		if (r != 1)
			_exit(127); /* The recorder gave up. */
		sigprocmask(SIG_SETMASK, child_mask, NULL);
		execvp(argv[0], argv);
		int e = errno;
		ssize_t wr = write(sp[1], &e, sizeof(e));
		(void)wr;
		_exit(127);
	}
	close(gp[0]);
	close(sp[1]);
	*pid = child;
	*go = gp[1];
	*status_fd = sp[0];
	return 0;
}

int sp_spawn_release(pid_t pid, int go, int status_fd, const char *what)
{
	char c = 1;
	ssize_t r;
	do {
		r = write(go, &c, 1);
	} while (r < 0 && errno == EINTR);
	close(go);
	int e = 0;
	do {
		r = read(status_fd, &e, sizeof(e));
	} while (r < 0 && errno == EINTR);
	close(status_fd);
	if (r == 0)
		return 0; /* The pipe closed on exec. */
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)sizeof(e) || e <= 0)
		e = EIO;
	return sp_error(-e, "cannot execute %s", what);
}

void sp_spawn_abort(pid_t pid, int go, int status_fd)
{
	close(go); /* The child reads EOF and exits. */
	close(status_fd);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}
