/* The tracer thread of opts.python_pause (pause.h): seizes the target's
 * threads, catches the SIGTRAP each sample raises, reads while the thread
 * holds still, and lets everything else through. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/search.h"
#include "io/clock.h"
#include "io/file.h" /* sp_proc_tasks */
#include "record/attach.h"
#include "record/pause.h"
#include "record/proc_scan.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6 /* si_code of a perf event's sigtrap (Linux 5.13) */
#endif
/* sig_data of our events: a SIGTRAP of the target's own perf events
 * passes through to it. */
#define SIG_DATA           0x7370617573650001ull
#define TRACE_OPTS         ((unsigned long)(PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC))
#define FORK_OPTS          ((unsigned long)(PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK))
#define TICK_NS            10000000ull   /* The waker's period: see housekeep(). */
#define RELEASE_NS         2000000000ull /* Longest wait for the threads to stop at the end. */
#define SP_PAUSE_MAX_PROCS 4096          /* Processes seized at attach. */
#define SP_PAUSE_MAX_TIDS  (1u << 22)    /* Threads traced (pid_max's ceiling). */
#define SEIZE_ROUNDS       100
#define HOUSEKEEP_TIDS     64 /* Threads looked after at every tick. */

/* Thread ids, sorted: membership is a binary search, as the tracer asks
 * for every thread it meets and a target may have thousands. */
typedef struct tid_set {
	pid_t *v;
	uint32_t n, cap;
} tid_set;

struct sp_pause {
	stackpulse_recorder *rec;
	pid_t pid;
	int pre_exec;
	pthread_t thread;
	pthread_mutex_t mu; /* The start handshake, and tids for other threads. */
	pthread_cond_t cv;
	int started, start_rc;
	char err[256];
	int wake[2];         /* The waker's pipe: wake[1] closes at the end. */
	pid_t waker;         /* Set before the start handshake; reaped by sp_pause_stop. */
	tid_set tids;        /* Threads traced; changed under mu. */
	tid_set listen;      /* Of those, held in a group stop (PTRACE_LISTEN). */
	unsigned long opts;  /* ptrace options: TRACE_OPTS, and forks when
	                     * child processes are followed. */
	int armed;           /* The events stop their threads. */
	atomic_int stopping; /* Set by sp_pause_stop before it wakes the tracer. */
	uint64_t ticks;
};

/* Where @p tid is or would go in @p s. */
static uint32_t set_pos(const tid_set *s, pid_t tid)
{
	size_t at;
	SP_PARTITION_POINT(at, s->n, i, s->v[i] < tid);
	return (uint32_t)at;
}

static int in_set(const tid_set *s, pid_t tid)
{
	uint32_t at = set_pos(s, tid);
	return at < s->n && s->v[at] == tid;
}

static int traced(const sp_pause *pz, pid_t tid)
{
	return in_set(&pz->tids, tid);
}

static int set_add(tid_set *s, pid_t tid)
{
	uint32_t at = set_pos(s, tid);
	if (at < s->n && s->v[at] == tid)
		return 0;
	int rc = SP_GROW(s->v, s->cap, s->n + 1, SP_PAUSE_MAX_TIDS, "traced threads");
	if (rc)
		return rc;
	memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof(*s->v));
	s->v[at] = tid;
	s->n++;
	return 0;
}

/* Removes @p tid; what followed it moves down one place, so a loop over
 * the set that drops its current entry looks at the same index next. */
static void set_drop(tid_set *s, pid_t tid)
{
	uint32_t at = set_pos(s, tid);
	if (at < s->n && s->v[at] == tid) {
		memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof(*s->v));
		s->n--;
	}
}

static int add_tid(sp_pause *pz, pid_t tid)
{
	pthread_mutex_lock(&pz->mu);
	int rc = set_add(&pz->tids, tid);
	pthread_mutex_unlock(&pz->mu);
	return rc;
}

static void drop_tid(sp_pause *pz, pid_t tid)
{
	pthread_mutex_lock(&pz->mu);
	set_drop(&pz->tids, tid);
	pthread_mutex_unlock(&pz->mu);
	set_drop(&pz->listen, tid);
}

int sp_pause_traces(stackpulse_recorder *rec, pid_t tid)
{
	sp_pause *pz = rec->pause;
	if (!pz)
		return 0;
	pthread_mutex_lock(&pz->mu);
	int t = traced(pz, tid);
	pthread_mutex_unlock(&pz->mu);
	return t;
}

static void resume(pid_t tid, int sig)
{
	/* ptrace takes the signal number in its pointer argument. */
	void *data = (void *)(uintptr_t)sig; /* NOLINT(performance-no-int-to-ptr) */
	ptrace(PTRACE_CONT, tid, NULL, data);
}

/* 1 when @p si is the SIGTRAP of one of our events. glibc's siginfo_t
 * does not name the perf fields: the data follows the fault address. */
static int our_trap(const siginfo_t *si)
{
	if (si->si_signo != SIGTRAP || si->si_code != TRAP_PERF)
		return 0;
	unsigned long data;
	memcpy(&data, (const char *)&si->si_addr + sizeof(void *), sizeof(data));
	return data == SIG_DATA;
}

/* 1 when the signal-delivery stop of @p tid is for one of our traps. */
static int stopped_by_trap(pid_t tid, int sig)
{
	siginfo_t si;
	return sig == SIGTRAP && ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 && our_trap(&si);
}

/* 1 when one of our traps waits in the queues of stopped @p tid: it would
 * kill the thread once nobody traces it. */
static int trap_pending(pid_t tid)
{
	/* struct ptrace_peeksiginfo_args, which not every libc declares. */
	struct {
		uint64_t off;
		uint32_t flags; /* 1: PTRACE_PEEKSIGINFO_SHARED */
		int32_t nr;
	} a;
	siginfo_t si[16];
	for (uint32_t shared = 0; shared < 2; shared++) {
		a.off = 0;
		a.flags = shared;
		a.nr = 16;
		long n = ptrace(PTRACE_PEEKSIGINFO, tid, &a, si);
		for (long i = 0; i < n; i++)
			if (our_trap(&si[i]))
				return 1;
	}
	return 0;
}

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static void stopping_bits(stackpulse_recorder *rec, int on)
{
	struct perf_event_attr *a = &rec->setup.attr;
	if (on) {
		a->sigtrap = 1;
		a->remove_on_exec = 1;
		/* Without child processes followed, a forked child must not
		 * inherit events whose trap nobody would catch. */
		a->inherit_thread = rec->opts.children ? 0 : 1;
		a->sig_data = SIG_DATA;
	} else {
		a->sigtrap = 0;
		a->remove_on_exec = 0;
		a->inherit_thread = 0;
		a->sig_data = 0;
	}
}

/* Back to plain events everywhere (under rec->mu): what gives up pausing
 * without a trap left to kill a thread once it is released. */
static void disarm(sp_pause *pz)
{
	stopping_bits(pz->rec, 0);
	pz->armed = 0;
	if (sp_recorder_reopen_now(pz->rec) != 0)
		sp_error_clear();
}

/* Gives every thread events that stop it; under rec->mu. On refusal the
 * plain events are put back (an exec took the old ones away). */
static int arm(sp_pause *pz)
{
	stackpulse_recorder *rec = pz->rec;
	stopping_bits(rec, 1);
	int rc = sp_recorder_reopen_now(rec);
	if (rc == 0) {
		pz->armed = 1;
		return 0;
	}
	char why[200];
	snprintf(why, sizeof(why), "%s", stackpulse_last_error());
	disarm(pz);
	return sp_error(rc == -EINVAL ? -EOPNOTSUPP : rc,
	                "events that stop the sampled thread were refused: %s", why);
}

/* Starts the waker: a copy of this process, child of this thread, that
 * stops itself every TICK_NS (the tracer then looks after its threads,
 * see housekeep) and, once wake[1] closes, stops until it is killed. Its
 * stops are what wake the tracer's blocking wait, which nothing else could
 * without a signal handler. The stop that ends the tracer must be one it
 * sees: sp_pause_stop's SIGCONT can take back a stop before the tracer
 * waits for it (a continued stop is no longer reported), so the waker
 * stops again rather than exit, which would go unseen. It has no exit
 * signal (it never shows to a plain wait()) and dies with this thread. */
static int start_waker(sp_pause *pz)
{
	if (pipe2(pz->wake, O_CLOEXEC) != 0) {
		pz->wake[0] = pz->wake[1] = -1;
		return sp_error(-errno, "pipe2 failed");
	}
	long parent = syscall(SYS_getpid);
	long c = syscall(SYS_clone, 0L, 0L, 0L, 0L, 0L);
	if (c < 0) {
		int e = errno;
		close(pz->wake[0]);
		close(pz->wake[1]);
		pz->wake[0] = pz->wake[1] = -1;
		return sp_error(-e, "cannot start the pause waker");
	}
	if (c == 0) {
		/* System calls only, as after fork in a threaded process; no
		 * descriptor of the recorder's process stays open in here. */
		int keep = pz->wake[0];
		syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
		if (syscall(SYS_getppid) != parent)
			syscall(SYS_exit_group, 0); /* the recorder is already gone */
		if (keep > 0)
			syscall(SYS_close_range, 0u, (unsigned)keep - 1u, 0u);
		syscall(SYS_close_range, (unsigned)keep + 1u, ~0u, 0u);
		long self = syscall(SYS_getpid);
		for (;;) {
			struct pollfd p = { keep, POLLIN, 0 };
			struct timespec ts = { 0, (long)TICK_NS };
			long r = syscall(SYS_ppoll, &p, 1L, &ts, NULL, 0L);
			if (r >= 0)
				syscall(SYS_kill, self, SIGSTOP);
			if (r > 0 || (r < 0 && errno != EINTR))
				break; /* the recorder is done, or gone */
		}
		for (;;)
			syscall(SYS_kill, self, SIGSTOP);
	}
	pz->waker = (pid_t)c;
	close(pz->wake[0]);
	pz->wake[0] = -1;
	return 0;
}

/* Seizes every thread of @p pid; 0, or an error (its exit included). */
static int seize_process(sp_pause *pz, pid_t pid)
{
	for (int round = 0; round < SEIZE_ROUNDS; round++) {
		pid_t *tids;
		size_t n;
		int rc = sp_proc_tasks(pid, &tids, &n), added = 0;
		if (rc)
			return rc == -ESRCH ? sp_error(-ESRCH, "pid %d exited", (int)pid) : rc;
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (traced(pz, tids[i]))
				continue;
			rc = sp_attach_seize(pid, tids[i], pz->opts);
			if (rc == 1) {
				rc = 0;
				continue;
			}
			if (rc == 0)
				rc = add_tid(pz, tids[i]);
			added = 1;
		}
		sp_free(tids);
		if (rc || !added)
			return rc;
	}
	return 0;
}

/* Processes to seize, in the order found, and the set of those queued. */
typedef struct proc_queue {
	pid_t *v;
	uint32_t n, cap;
	tid_set seen;
} proc_queue;

static int queue_proc(void *ctx, pid_t pid)
{
	proc_queue *q = ctx;
	if (in_set(&q->seen, pid))
		return 0;
	int rc = SP_GROW(q->v, q->cap, q->n + 1, SP_PAUSE_MAX_PROCS, "processes");
	if (rc == 0)
		rc = set_add(&q->seen, pid);
	if (rc == 0)
		q->v[q->n++] = pid;
	return rc;
}

/* Seizes the target, and with child processes followed its descendants
 * (a process forked later by a seized thread is traced from birth). */
static int seize_all(sp_pause *pz)
{
	if (pz->pre_exec) {
		int rc = sp_attach_seize(pz->pid, pz->pid, pz->opts);
		if (rc == 1)
			return sp_error(-ESRCH, "pid %d exited", (int)pz->pid);
		return rc ? rc : add_tid(pz, pz->pid);
	}
	proc_queue q = { 0 };
	int rc = queue_proc(&q, pz->pid);
	for (uint32_t i = 0; i < q.n && rc == 0; i++) {
		rc = seize_process(pz, q.v[i]);
		if (rc == -ESRCH && i > 0) {
			sp_error_clear(); /* a child that ended meanwhile */
			rc = 0;
			continue;
		}
		if (rc == 0 && pz->rec->opts.children && q.n < SP_PAUSE_MAX_PROCS) {
			int e = sp_proc_children(q.v[i], queue_proc, &q);
			rc = e == -ENOMEM ? e : 0;
		}
	}
	sp_free(q.v);
	sp_free(q.seen.v);
	return rc;
}

/* After an exec of the process of @p w (under rec->mu): the exec removed
 * its events. The first exec of a spawned target turns every event into a
 * stopping one; later ones give the process new events. */
static int on_exec(sp_pause *pz, pid_t w)
{
	unsigned long former = 0;
	if (ptrace(PTRACE_GETEVENTMSG, w, NULL, &former) == 0 && (pid_t)former != w)
		drop_tid(pz, (pid_t)former); /* a thread that exec'd takes the leader's id */
	if (!pz->armed)
		return arm(pz); /* The spawned target: its plain events saw the exec. */
	int rc = sp_recorder_exec_seen(pz->rec, w, w);
	if (rc == 0)
		rc = sp_recorder_open_exec(pz->rec, w);
	if (rc)
		disarm(pz);
	return rc;
}

/* One stop of a traced thread while recording. Returns 1 to give up
 * pausing (events could not be re-armed after an exec). */
static int on_stop(sp_pause *pz, pid_t w, int st, uint64_t t0)
{
	stackpulse_recorder *rec = pz->rec;
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		drop_tid(pz, w);
		return 0;
	}
	if (!WIFSTOPPED(st))
		return 0;
	int sig = WSTOPSIG(st), ev = (st >> 16) & 0xff;
	unsigned long msg = 0;
	switch (ev) {
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		/* Traced from birth; its first stop also adds it. */
		if (ptrace(PTRACE_GETEVENTMSG, w, NULL, &msg) == 0)
			add_tid(pz, (pid_t)msg);
		resume(w, 0);
		return 0;
	case PTRACE_EVENT_EXEC: {
		sp_recorder_lock(rec);
		int rc = on_exec(pz, w);
		sp_recorder_unlock(rec);
		resume(w, 0);
		return rc != 0;
	}
	case PTRACE_EVENT_STOP:
		add_tid(pz, w);
		if (is_stop_signal(sig)) {
			/* A group stop stays one; SIGCONT ends it with another
			 * PTRACE_EVENT_STOP. */
			set_add(&pz->listen, w);
			ptrace(PTRACE_LISTEN, w, NULL, NULL);
		} else {
			set_drop(&pz->listen, w);
			resume(w, 0);
		}
		return 0;
	case 0:
		if (stopped_by_trap(w, sig)) {
			sp_recorder_lock(rec);
			sp_recorder_python_early(rec);
			rec->pauses++;
			rec->pause_ns += sp_mono_ns() - t0;
			sp_recorder_unlock(rec);
			resume(w, 0);
		} else {
			resume(w, sig);
		}
		return 0;
	default: resume(w, 0); return 0;
	}
}

/* The next stop of a child of this thread (a tracee, or the waker) as a
 * waitpid() status: 0 when there is none and @p nohang, -1 on error. Exits
 * are not taken here (reap_exited). */
static pid_t next_stop(int nohang, int *st)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_ALL, 0, &si, WSTOPPED | __WALL | __WNOTHREAD | (nohang ? WNOHANG : 0)) != 0)
		return -1;
	if (si.si_pid <= 0)
		return 0;
	/* A stop's si_status is the tracee's exit_code: the signal, with a
	 * ptrace event in its second byte. */
	*st = (si.si_status << 8) | 0x7f;
	return si.si_pid;
}

/* 1 when @p tid leads its process (its tid is the process id). */
static int leads(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	const char *t = strstr(buf, "\nTgid:");
	return t && strtol(t + 6, NULL, 10) == (long)tid;
}

/* Collects the threads that ended. A tracer must: an ended thread stays
 * a zombie until then, and its process's exit waits for it. The one
 * exit left alone is a process leader whose parent is this process (a
 * spawned target): reaped here, this process's own wait for it would find
 * nothing. A thread no longer ours (reaped by that wait) is dropped. */
static void reap_exited(sp_pause *pz)
{
	pid_t self = getpid();
	for (uint32_t i = 0; i < pz->tids.n;) {
		pid_t tid = pz->tids.v[i];
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		int r = waitid(P_PID, (id_t)tid, &si,
		               WEXITED | __WALL | __WNOTHREAD | WNOHANG | WNOWAIT);
		if (r != 0 && errno == ECHILD) {
			drop_tid(pz, tid);
			continue;
		}
		/* A ptrace wait reports stops whatever the flags: only exits. */
		int ended = si.si_code == CLD_EXITED || si.si_code == CLD_KILLED ||
		            si.si_code == CLD_DUMPED;
		if (r != 0 || si.si_pid != tid || !ended) {
			i++;
			continue;
		}
		pid_t ppid = 0;
		if (!leads(tid) || sp_proc_ppid(tid, &ppid) != 0 || ppid != self)
			waitpid(tid, NULL, __WALL | __WNOTHREAD | WNOHANG);
		drop_tid(pz, tid);
	}
}

/* At each tick: a thread in a trace stop that the tracer was never told
 * of. Another thread of the recorder's process that waits for the target
 * (waitpid sees the tracer thread's tracees too) took its notification;
 * without this it would stay stopped until the end. The stop is handled
 * as it would have been, from its siginfo; a group stop (no siginfo) is
 * left alone, as it should be. */
static int housekeep(sp_pause *pz)
{
	/* Two system calls per thread: with many threads, every few ticks. */
	if (++pz->ticks % (1 + pz->tids.n / HOUSEKEEP_TIDS) != 0)
		return 0;
	reap_exited(pz);
	for (uint32_t i = 0; i < pz->tids.n; i++) {
		pid_t tid = pz->tids.v[i];
		siginfo_t si;
		if (in_set(&pz->listen, tid) || ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) != 0)
			continue;
		int ev = si.si_signo == SIGTRAP ? (si.si_code >> 8) & 0xff : 0;
		int st = 0x7f | (si.si_signo << 8) | (ev << 16);
		if (on_stop(pz, tid, st, sp_mono_ns()))
			return 1;
	}
	return 0;
}

/* Lets go of every thread: interrupts each, swallows our traps still on
 * their way (events are disabled by now, but a raised one is queued), and
 * detaches from the stop. A thread that does not stop within RELEASE_NS
 * is detached by the kernel as this thread ends. */
static void release_all(sp_pause *pz)
{
	for (uint32_t i = 0; i < pz->tids.n;) {
		if (ptrace(PTRACE_INTERRUPT, pz->tids.v[i], NULL, NULL) != 0 && errno == ESRCH)
			drop_tid(pz, pz->tids.v[i]); /* gone, or no longer ours */
		else
			i++;
	}
	uint64_t end = sp_mono_ns() + RELEASE_NS;
	while (pz->tids.n && sp_mono_ns() < end) {
		int st = 0;
		pid_t w = next_stop(1, &st);
		if (w < 0 && errno != EINTR)
			break;
		if (w <= 0) {
			reap_exited(pz);
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
			continue;
		}
		if (w == pz->waker)
			continue; /* SIGKILLed below */
		int sig = WSTOPSIG(st), ev = (st >> 16) & 0xff;
		unsigned long msg = 0;
		if ((ev == PTRACE_EVENT_CLONE || ev == PTRACE_EVENT_FORK ||
		     ev == PTRACE_EVENT_VFORK) &&
		    ptrace(PTRACE_GETEVENTMSG, w, NULL, &msg) == 0 && add_tid(pz, (pid_t)msg) == 0)
			ptrace(PTRACE_INTERRUPT, (pid_t)msg, NULL, NULL);
		int trap = ev == 0 && stopped_by_trap(w, sig);
		if (trap || (ev != 0 && ev != PTRACE_EVENT_STOP) || trap_pending(w)) {
			/* Swallowed (or the event passed); stop again after. */
			resume(w, trap || ev != 0 ? 0 : sig);
			ptrace(PTRACE_INTERRUPT, w, NULL, NULL);
			continue;
		}
		/* A group stop detached with no signal stays stopped. */
		sp_attach_detach(w, ev == 0 ? sig : 0);
		drop_tid(pz, w);
	}
}

static void publish(sp_pause *pz, int rc)
{
	pthread_mutex_lock(&pz->mu);
	pz->start_rc = rc;
	if (rc)
		snprintf(pz->err, sizeof(pz->err), "%s", stackpulse_last_error());
	pz->started = 1;
	pthread_cond_signal(&pz->cv);
	pthread_mutex_unlock(&pz->mu);
}

static void *run(void *arg)
{
	sp_pause *pz = arg;
	stackpulse_recorder *rec = pz->rec;
	int rc = start_waker(pz);
	if (rc == 0)
		rc = seize_all(pz);
	if (rc == 0 && !pz->pre_exec) {
		sp_recorder_lock(rec);
		rc = arm(pz);
		sp_recorder_unlock(rec);
	}
	publish(pz, rc);
	while (rc == 0) {
		int st = 0;
		pid_t w = next_stop(0, &st);
		uint64_t t0 = sp_mono_ns();
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		if (w == pz->waker) {
			if (atomic_load(&pz->stopping))
				break; /* sp_pause_stop */
			int give_up = housekeep(pz);
			kill(w, SIGCONT);
			if (give_up)
				break;
			continue;
		}
		if (on_stop(pz, w, st, t0))
			break;
	}
	release_all(pz);
	if (pz->waker > 0)
		kill(pz->waker, SIGKILL); /* reaped by sp_pause_stop */
	return NULL;
}

static void pause_free(sp_pause *pz)
{
	if (pz->wake[1] >= 0)
		close(pz->wake[1]);
	pthread_mutex_destroy(&pz->mu);
	pthread_cond_destroy(&pz->cv);
	sp_free(pz->tids.v);
	sp_free(pz->listen.v);
	sp_free(pz);
}

int sp_pause_start(stackpulse_recorder *rec, pid_t pid, int pre_exec)
{
	sp_pause *pz = sp_calloc(1, sizeof(*pz));
	if (!pz)
		return -ENOMEM;
	pz->rec = rec;
	pz->pid = pid;
	pz->pre_exec = pre_exec;
	pz->opts = TRACE_OPTS | (rec->opts.children ? FORK_OPTS : 0);
	pz->wake[0] = pz->wake[1] = -1;
	pthread_mutex_init(&pz->mu, NULL);
	pthread_cond_init(&pz->cv, NULL);
	if (pre_exec) {
		/* Refused here rather than at the exec, where it could no longer
		 * fail the spawn. */
		struct perf_event_attr saved = rec->setup.attr;
		stopping_bits(rec, 1);
		struct perf_event_attr a = rec->setup.attr;
		rec->setup.attr = saved;
		a.disabled = 1;
		a.enable_on_exec = 0;
		int fd = sp_perf_event_open(&a, pid, -1, -1);
		if (fd < 0) {
			pause_free(pz);
			return sp_error(fd == -EINVAL ? -EOPNOTSUPP : fd,
			                "events that stop the sampled thread were refused "
			                "(perf sigtrap needs Linux 5.13)");
		}
		close(fd);
	}
	/* The tracer takes no signal of the caller's process. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rec->pause = pz;
	int e = pthread_create(&pz->thread, NULL, run, pz);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		rec->pause = NULL;
		pause_free(pz);
		return sp_error(-e, "cannot start the pause thread");
	}
	pthread_mutex_lock(&pz->mu);
	while (!pz->started)
		pthread_cond_wait(&pz->cv, &pz->mu);
	pthread_mutex_unlock(&pz->mu);
	if (pz->start_rc) {
		int rc = pz->start_rc;
		char err[sizeof(pz->err)];
		snprintf(err, sizeof(err), "%s", pz->err);
		sp_pause_stop(rec);
		return sp_error(rc, "%s", err);
	}
	return 0;
}

void sp_pause_stop(stackpulse_recorder *rec)
{
	sp_pause *pz = rec->pause;
	if (!pz)
		return;
	atomic_store(&pz->stopping, 1);
	if (pz->wake[1] >= 0) {
		close(pz->wake[1]);
		pz->wake[1] = -1;
	}
	/* Stopped by someone else, the waker would never see the end. */
	if (pz->waker > 0)
		kill(pz->waker, SIGCONT);
	pthread_join(pz->thread, NULL);
	if (pz->waker > 0)
		waitpid(pz->waker, NULL, __WALL);
	rec->pause = NULL;
	pause_free(pz);
}
