/* Attach and spawn mechanics. Every path that stops a thread has a path
 * that resumes it: sp_attach_stop undoes its own work on failure and the
 * recorder calls sp_attach_resume on every exit from the stop window. */
#include "io/clock.h"
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
#include "common/search.h"
#include "record/perf_events.h"
#include "record/proc_scan.h"

#define STOP_TIMEOUT_MS    5000 /* Per pass; a thread in D state may take a while. */
#define RELEASE_TIMEOUT_MS 2000 /* For interrupted threads to reach a stop at detach. */
#define MAX_RESCANS        1000
#define POLL_MIN_US        50 /* Back-off while polling for stops. */
#define POLL_MAX_US        2000

/* 1 when @p pid lists a thread besides its leader: a zombie leader then
 * only means that main() left with pthread_exit. */
static int has_other_threads(pid_t pid)
{
	pid_t *tids;
	size_t n;
	if (sp_proc_tasks(pid, &tids, &n) != 0)
		return 0;
	int other = 0;
	for (size_t i = 0; i < n && !other; i++)
		other = tids[i] != pid;
	sp_free(tids);
	return other;
}

int sp_attach_check_pid(pid_t pid)
{
	if (pid <= 0)
		return sp_error(-ESRCH, "pid %d is not a process id", (int)pid);
	char st;
	if (sp_proc_state(pid, &st, NULL) != 0)
		return sp_error(-ESRCH, "no process with pid %d", (int)pid);
	if (st == 'X' || (st == 'Z' && !has_other_threads(pid)))
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
	return (long)(sp_mono_ns() / 1000000u);
}

/* Index of @p tid in the sorted stopped set, or -1. */
static long stopped_find(const sp_stopped *s, pid_t tid)
{
	size_t lo;
	SP_PARTITION_POINT(lo, s->n, mid, s->t[mid].tid < tid);
	return lo < s->n && s->t[lo].tid == tid ? (long)lo : -1;
}

/* Room for @p more entries, so that a thread once stopped can always be
 * recorded (an allocation failure then would leave it stopped). */
static int stopped_reserve(sp_stopped *s, size_t more)
{
	if (s->cap - s->n >= more)
		return 0;
	size_t nc = s->cap ? s->cap : 16;
	while (nc - s->n < more)
		nc *= 2;
	sp_stopped_thread *nt = sp_realloc_array(s->t, nc, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	s->t = nt;
	s->cap = nc;
	return 0;
}

/* Thread ids tried and found gone, sorted after each pass. */
typedef struct tidset {
	pid_t *v;
	size_t n, cap;
} tidset;

static int tidset_reserve(tidset *g, size_t more)
{
	if (g->cap - g->n >= more)
		return 0;
	size_t nc = g->cap ? g->cap : 16;
	while (nc - g->n < more)
		nc *= 2;
	pid_t *nv = sp_realloc_array(g->v, nc, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	g->v = nv;
	g->cap = nc;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static int tidset_has(const tidset *g, pid_t tid)
{
	return g->n && bsearch(&tid, g->v, g->n, sizeof(*g->v), cmp_pid) != NULL;
}

static int cmp_stopped(const void *a, const void *b)
{
	pid_t x = ((const sp_stopped_thread *)a)->tid, y = ((const sp_stopped_thread *)b)->tid;
	return (x > y) - (x < y);
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };
	nanosleep(&ts, NULL);
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

/* The signal to re-deliver at detach for ptrace stop @p status: a
 * signal-delivery stop holds one, an interrupt or group stop
 * (PTRACE_EVENT_STOP) none. */
static int stop_signal(int status)
{
	return (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
}

long sp_attach_detach(pid_t tid, int sig)
{
	/* ptrace takes the signal number in its pointer argument. */
	void *data = (void *)(uintptr_t)sig; /* NOLINT(performance-no-int-to-ptr) */
	return ptrace(PTRACE_DETACH, tid, NULL, data);
}

/* Detaches from every thread of @p v (reordered). A thread not in a stop
 * cannot be detached: it was interrupted and is about to stop, or it was
 * SIGKILLed and is dying. Those are polled together until they stop (then
 * detached) or are gone (their traced zombie reaped, unless it is
 * @p keep_pid, so its process can be reaped). */
static void release_all(sp_stopped_thread *v, size_t n, pid_t keep_pid)
{
	size_t left = 0;
	for (size_t i = 0; i < n; i++)
		if (sp_attach_detach(v[i].tid, v[i].sig) != 0)
			v[left++] = v[i];
	long deadline = now_ms() + RELEASE_TIMEOUT_MS;
	unsigned us = POLL_MIN_US;
	while (left > 0) {
		size_t w = 0;
		for (size_t i = 0; i < left; i++) {
			int status = 0;
			int r = poll_tracee(v[i].tid, v[i].tid == keep_pid, &status);
			if (r == 1 || r < 0)
				continue;
			if (r == 2) {
				int sig = v[i].sig ? v[i].sig : stop_signal(status);
				if (sp_attach_detach(v[i].tid, sig) == 0)
					continue;
			}
			v[w++] = v[i];
		}
		left = w;
		if (left == 0 || now_ms() > deadline)
			return;
		sleep_us(us);
		us = us * 2 > POLL_MAX_US ? POLL_MAX_US : us * 2;
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

/* The number after @p key in the small /proc file @p path, or @p dflt. */
static long proc_field(const char *path, const char *key, int base, long dflt)
{
	char buf[4096];
	if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
		return dflt;
	const char *t = strstr(buf, key);
	if (!t)
		return dflt;
	char *end;
	long v = strtol(t + strlen(key), &end, base);
	return end == t + strlen(key) ? dflt : v;
}

/* Why the kernel refused to let us trace @p pid, most specific first: an
 * existing tracer, Yama, a seccomp filter, uids without CAP_SYS_PTRACE, a
 * user namespace, a non-dumpable target, and else a security module. Only
 * what was checked is said. */
static int permission_error(pid_t pid, int code, const char *what)
{
	char path[64], mine[64] = "", theirs[64] = "", ctx[128] = "";
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	long tracer = proc_field(path, "TracerPid:", 10, 0);
	if (tracer > 0)
		return sp_error(code, "%s pid %d refused: it is already traced by pid %ld", what,
		                (int)pid, tracer);
	uid_t uid = (uid_t)-1;
	char st;
	sp_proc_state(pid, &st, &uid);
	long yama = -1;
	char buf[64];
	if (sp_proc_read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) > 0)
		yama = strtol(buf, NULL, 10);
	/* CAP_SYS_PTRACE is bit 19 of the effective set. */
	long capeff = proc_field("/proc/self/status", "CapEff:", 16, 0);
	int cap = (capeff >> 19) & 1;
	long seccomp = proc_field("/proc/self/status", "Seccomp:", 10, 0);
	int same_uid = uid == geteuid();
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	ssize_t nt = readlink(path, theirs, sizeof(theirs) - 1);
	ssize_t nm = readlink("/proc/self/ns/user", mine, sizeof(mine) - 1);
	theirs[nt > 0 ? nt : 0] = '\0';
	mine[nm > 0 ? nm : 0] = '\0';
	if (sp_proc_read_small("/proc/self/attr/current", ctx, sizeof(ctx)) > 0)
		ctx[strcspn(ctx, "\n")] = '\0';
	char who[96];
	snprintf(who, sizeof(who), "pid %d belongs to uid %d and we run as uid %d", (int)pid,
	         (int)uid, (int)geteuid());
	const char *cap_s = cap ? "with CAP_SYS_PTRACE" : "without CAP_SYS_PTRACE";
	if (yama == 3)
		return sp_error(code,
		                "%s pid %d refused: kernel.yama.ptrace_scope is 3, which forbids "
		                "ptrace for everyone until reboot",
		                what, (int)pid);
	if (yama == 2 && !cap)
		return sp_error(code,
		                "%s pid %d refused: kernel.yama.ptrace_scope is 2: only a process "
		                "with CAP_SYS_PTRACE may attach (run as root)",
		                what, (int)pid);
	if (yama == 1 && !cap)
		return sp_error(code,
		                "%s pid %d refused: kernel.yama.ptrace_scope is 1: only a parent "
		                "may attach to its descendants without CAP_SYS_PTRACE (start the "
		                "program under record, run as root, or set "
		                "kernel.yama.ptrace_scope=0)",
		                what, (int)pid);
	if (seccomp == 2)
		return sp_error(code,
		                "%s pid %d refused: a seccomp filter is on this process (Seccomp: "
		                "2 in /proc/self/status) and may deny ptrace; in a container, "
		                "allow it (docker: --cap-add SYS_PTRACE, or a seccomp profile "
		                "that permits ptrace)",
		                what, (int)pid);
	if (!same_uid && !cap)
		return sp_error(code, "%s pid %d refused: %s %s: run as that user or as root", what,
		                (int)pid, who, cap_s);
	if (*mine && *theirs && strcmp(mine, theirs) != 0)
		return sp_error(code,
		                "%s pid %d refused: it runs in another user namespace (%s, ours "
		                "%s), where our capabilities do not count; record from that "
		                "namespace",
		                what, (int)pid, theirs, mine);
	if (!cap && same_uid)
		return sp_error(code,
		                "%s pid %d refused: %s, but it is not dumpable (a setuid program "
		                "or prctl(PR_SET_DUMPABLE, 0)), which needs CAP_SYS_PTRACE",
		                what, (int)pid, who);
	return sp_error(code,
	                "%s pid %d refused although %s %s: a security module refused it (a "
	                "Landlock sandbox lets a process trace only processes inside it; "
	                "AppArmor, SELinux and BPF LSM policies can deny ptrace)%s%s%s",
	                what, (int)pid, who, cap_s, *ctx ? "; our LSM context is " : "", ctx,
	                *theirs ? "" : "; even its /proc/PID/ns links are closed to us");
}

int sp_attach_seize(pid_t pid, pid_t tid, unsigned long options)
{
	/* ptrace takes the options in its pointer argument. */
	void *data = (void *)(uintptr_t)options; /* NOLINT(performance-no-int-to-ptr) */
	if (ptrace(PTRACE_SEIZE, tid, NULL, data) == 0)
		return 0;
	int e = errno;
	if (e == ESRCH)
		return 1; /* Thread exited meanwhile. */
	/* An exiting task also refuses with EPERM. */
	int gone = 0;
	for (int k = 0; k < 20 && !(gone = thread_gone(pid, tid)); k++)
		sleep_us(500);
	if (gone && (tid != pid || has_other_threads(pid)))
		return 1; /* a thread, or a leader that left with pthread_exit */
	if (gone)
		return sp_error(-ESRCH, "pid %d exited during attach", (int)pid);
	return permission_error(pid, -e, "ptrace of");
}

/* Reaps stopped threads of @p s that died meanwhile (SIGKILL ends a ptrace
 * stop). Until its other threads are reaped, a dying group leader is never
 * reported to us, so a pending leader would wait out the deadline. */
static void reap_stopped(sp_stopped *s)
{
	pid_t keep = s->own_child ? s->pid : 0;
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		int status = 0;
		if (poll_tracee(s->t[i].tid, s->t[i].tid == keep, &status) != 1)
			s->t[w++] = s->t[i]; /* Order kept: still sorted. */
	}
	s->n = w;
}

/* Waits for every seized thread of @p b to stop (moved into @p s, whose
 * room is reserved) or go away, all against one deadline. On error the
 * threads still pending are left in @p b for the caller to release.
 * Threads that went away are added to @p gone (room reserved). */
static int wait_batch(sp_stopped *s, sp_stopped_thread *b, size_t *nb, tidset *gone)
{
	long deadline = now_ms() + STOP_TIMEOUT_MS;
	unsigned us = POLL_MIN_US;
	pid_t keep = s->own_child ? s->pid : 0;
	for (;;) {
		size_t w = 0;
		int err = 0, progress = 0;
		for (size_t i = 0; i < *nb; i++) {
			int status = 0;
			int r = err ? 0 : poll_tracee(b[i].tid, b[i].tid == keep, &status);
			if (r == 1) {
				gone->v[gone->n++] = b[i].tid; /* Reaped from our side. */
				progress = 1;
				continue;
			}
			if (r == 2) {
				s->t[s->n].tid = b[i].tid;
				s->t[s->n].sig = stop_signal(status);
				s->n++;
				progress = 1;
				continue;
			}
			if (r < 0)
				err = r;
			b[w++] = b[i];
		}
		*nb = w;
		if (err)
			return sp_error(err, "waiting for the threads of pid %d to stop failed",
			                (int)s->pid);
		if (w == 0)
			return 0;
		if (now_ms() > deadline)
			return sp_error(-ETIMEDOUT,
			                "thread %d (of %zu pending) did not stop within %d ms",
			                (int)b[0].tid, w, STOP_TIMEOUT_MS);
		if (progress)
			us = POLL_MIN_US;
		else
			reap_stopped(s);
		sleep_us(us);
		us = us * 2 > POLL_MAX_US ? POLL_MAX_US : us * 2;
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

/* Each pass seizes and interrupts every thread not yet stopped, then waits
 * for all of them together: a busy thread on a loaded machine needs a
 * scheduler slot to reach its stop, and waiting for each in turn added
 * those up (seconds for 64 busy threads on 2 CPUs). Passes repeat until
 * one lists no thread it has not met: once every listed thread is stopped,
 * none can create another. A thread that exited before it stopped counts
 * as new too: it may have created one first. */
static int stop_process(pid_t pid, sp_stopped *s)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->own_child = is_child_of_us(pid);
	sp_stopped_thread *batch = NULL; /* Seized, not yet seen stopped. */
	size_t nb = 0;
	tidset gone = { NULL, 0, 0 };
	int rc = 0;
	for (int round = 0; round < MAX_RESCANS; round++) {
		pid_t *tids;
		size_t n;
		rc = sp_proc_tasks(pid, &tids, &n);
		if (rc == -ESRCH)
			rc = sp_error(-ESRCH, "pid %d exited during attach", (int)pid);
		if (rc)
			break;
		sp_free(batch);
		nb = 0;
		batch = sp_calloc(n, sizeof(*batch));
		if (!batch || (rc = stopped_reserve(s, n)) != 0 ||
		    (rc = tidset_reserve(&gone, n)) != 0) {
			rc = rc ? rc : -ENOMEM;
			sp_free(tids);
			break;
		}
		size_t fresh = 0;
		for (size_t i = 0; i < n && rc == 0; i++) {
			pid_t tid = tids[i];
			if (stopped_find(s, tid) >= 0 || tidset_has(&gone, tid))
				continue;
			fresh++;
			rc = sp_attach_seize(pid, tid, 0);
			if (rc == 1) {
				gone.v[gone.n++] = tid;
				rc = 0;
				continue;
			}
			if (rc)
				break;
			batch[nb].tid = tid;
			batch[nb].sig = 0;
			nb++; /* Released below on any error. */
			if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 && errno != ESRCH)
				rc = sp_error(-errno, "PTRACE_INTERRUPT of thread %d failed",
				              (int)tid);
		}
		sp_free(tids);
		if (rc == 0)
			rc = wait_batch(s, batch, &nb, &gone);
		if (s->n)
			qsort(s->t, s->n, sizeof(*s->t), cmp_stopped);
		if (gone.n)
			qsort(gone.v, gone.n, sizeof(*gone.v), cmp_pid);
		if (rc)
			break;
		if (fresh == 0) {
			if (s->n == 0) {
				rc = sp_error(-ESRCH, "pid %d exited during attach", (int)pid);
				break;
			}
			sp_free(batch);
			sp_free(gone.v);
			return 0;
		}
	}
	if (rc == 0)
		rc = sp_error(STACKPULSE_ELIMIT, "pid %d kept creating threads during attach",
		              (int)pid);
	if (batch)
		release_all(batch, nb, s->own_child ? pid : 0);
	sp_free(batch);
	sp_free(gone.v);
	sp_attach_resume(s);
	return rc;
}

/* Moves the threads of @p sub (another process, stopped) into @p s; on
 * failure (memory) @p sub is resumed. */
static int stopped_merge(sp_stopped *s, sp_stopped *sub)
{
	int rc = stopped_reserve(s, sub->n);
	if (rc) {
		sp_attach_resume(sub);
		return rc;
	}
	if (sub->n)
		memcpy(s->t + s->n, sub->t, sub->n * sizeof(*sub->t));
	s->n += sub->n;
	qsort(s->t, s->n, sizeof(*s->t), cmp_stopped);
	sp_free(sub->t);
	sub->t = NULL;
	sub->n = sub->cap = 0;
	return 0;
}

static int pid_listed(const sp_pid_list *l, pid_t pid)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (l->v[i] == pid)
			return 1;
	return 0;
}

/* The target first; then, in passes, every process descended from it
 * that is not stopped yet, until a pass finds none: a stopped process
 * forks no more, so the last listing is the whole tree. A descendant
 * that cannot be stopped (gone, traced by another, refused, stuck) is
 * left running: its events are opened while it runs. */
int sp_attach_stop(pid_t pid, uint32_t max_procs, sp_stopped *s)
{
	int rc = stop_process(pid, s);
	if (rc || max_procs <= 1)
		return rc;
	sp_pid_list met = { 0 }; /* Processes stopped or tried. */
	rc = sp_pid_list_add(&met, pid, max_procs);
	for (int pass = 0; pass < MAX_RESCANS && rc == 0; pass++) {
		sp_pid_list tree = { 0 };
		rc = sp_pid_list_add(&tree, pid, max_procs);
		if (rc == 0)
			rc = sp_proc_descendants(&tree, max_procs);
		int fresh = 0;
		for (uint32_t i = 1; i < tree.n && rc == 0; i++) {
			if (pid_listed(&met, tree.v[i]))
				continue;
			fresh = 1;
			if ((rc = sp_pid_list_add(&met, tree.v[i], max_procs)) != 0)
				break;
			sp_stopped sub;
			if (stop_process(tree.v[i], &sub) != 0) {
				sp_error_clear();
				continue;
			}
			rc = stopped_merge(s, &sub);
		}
		sp_free(tree.v);
		if (!fresh)
			break;
	}
	sp_free(met.v);
	if (rc == STACKPULSE_ELIMIT) {
		sp_error_clear(); /* More than max_procs: the rest runs on. */
		rc = 0;
	}
	if (rc)
		sp_attach_resume(s);
	return rc;
}

void sp_attach_resume(sp_stopped *s)
{
	if (s->t)
		release_all(s->t, s->n, s->own_child ? s->pid : 0);
	sp_free(s->t);
	s->t = NULL;
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
