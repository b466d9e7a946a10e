/* The recorder's event loop: waiting on the rings (with the polling a
 * CPython target or the unprivileged off-CPU method needs), the target's
 * liveness, and the time-ordered drain of the per-CPU rings into the
 * writer. The API around it (options, attach/spawn, stats, finish) is
 * recorder.c's; the rings and events are event_set.c's. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <time.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/clock.h"
#include "record/proc_scan.h"
#include "record/python.h"
#include "record/recorder.h"

#define WAIT_SLICE_MS 100 /* Liveness re-check period inside wait(). */
/* Polling period once a CPython target is found: its stacks are read after
 * the sample, when the recorder sees it, so look soon after samples arrive
 * instead of at the wakeup watermark (ring/4): every millisecond, and every
 * 200 us while samples keep coming when the events do not wake the reader
 * at each sample (python_wakeups). */
#define PY_WAIT_SLICE_MS 1
#define PY_WAIT_SLICE_US 200
#define PY_BUSY_NS       20000000ull /* "while samples keep coming" */

#define ORDER_SLACK_NS 2000000ull    /* Records commit within microseconds. */
#define FLUSH_NS       1000000000ull /* Longest time a completed sample stays unwritten. */

/* 2 when some ring holds a record old enough to be consumed now, 1 when
 * the rings only hold records younger than the ordering slack, 0 when
 * they are empty. */
/* The ordering slack, or 0 once a ring is half full: the merge order of
 * records written within the slack on different CPUs matters less than
 * losing samples (a child seen before its FORK is adopted later). */
static uint64_t order_slack(const stackpulse_recorder *rec)
{
	for (int c = 0; c < 2 * rec->ncpu; c++)
		if (rec->rings[c].meta && sp_ring_used(&rec->rings[c]) * 2 >= rec->rings[c].size)
			return 0;
	return ORDER_SLACK_NS;
}

static int rings_state(stackpulse_recorder *rec)
{
	uint64_t cut = sp_clock_ns(CLOCK_MONOTONIC) - order_slack(rec);
	int st = 0;
	for (int c = 0; c < 2 * rec->ncpu; c++) {
		struct perf_event_header h;
		const uint8_t *p;
		size_t l;
		if (sp_ring_peek(&rec->rings[c], &h, &p, &l) != 1)
			continue;
		if (sp_recorder_record_time(&h, p, l) <= cut)
			return 2;
		st = 1;
	}
	return st;
}

/* 1 when @p pid is alive. A zombie leader whose other threads still run
 * (it called pthread_exit) is alive: only the thread has ended. */
static int sp_recorder_pid_alive(pid_t pid)
{
	char st;
	if (sp_proc_state(pid, &st, NULL) != 0 || st == 'X')
		return 0;
	if (st != 'Z')
		return 1;
	pid_t *tids;
	size_t n;
	if (sp_proc_tasks(pid, &tids, &n) != 0)
		return 0;
	sp_free(tids);
	return n > 1;
}

/* 1 while the target lives; remembers its end. */
static int sp_recorder_target_alive(stackpulse_recorder *rec)
{
	if (rec->target_gone)
		return 0;
	if (rec->pidfd >= 0) {
		/* The pidfd turns readable at exit, even before reaping. */
		struct pollfd pf = { .fd = rec->pidfd, .events = POLLIN, .revents = 0 };
		if (poll(&pf, 1, 0) <= 0 || !(pf.revents & (POLLIN | POLLHUP)))
			return 1;
	} else if (sp_recorder_pid_alive(rec->target)) {
		return 1;
	}
	rec->target_gone = 1;
	if (rec->pidfd >= 0)
		epoll_ctl(rec->epfd, EPOLL_CTL_DEL, rec->pidfd, NULL);
	return 0;
}

/* 1 while the target or a followed child lives. */
static int sp_recorder_any_alive(stackpulse_recorder *rec)
{
	if (sp_recorder_target_alive(rec))
		return 1;
	if (!rec->opts.children)
		return 0;
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		sp_process *p = rec->pt.procs[i];
		if (!p->exited && !p->unfollowed && p->pid != rec->target &&
		    sp_recorder_pid_alive(p->pid))
			return 1;
	}
	return 0;
}

/* One look at the rings, under rec->mu: 1 with *result when the wait is
 * over, else 0 with the ms to sleep in *slice_out (see wait_rings). */
static int wait_check(stackpulse_recorder *rec, uint64_t start, int timeout_ms, int *result,
                      int *slice_out)
{
	if (sp_recorder_python_early(rec) > 0)
		rec->py_busy_until_ns = sp_clock_ns(CLOCK_MONOTONIC) + PY_BUSY_NS;
	int st = rings_state(rec);
	if (st == 2) {
		*result = STACKPULSE_WAIT_READY;
		return 1;
	}
	/* A window to close, even with nothing sampled. */
	if (sp_recorder_rotate_due(rec, sp_clock_ns(CLOCK_MONOTONIC) - order_slack(rec))) {
		*result = STACKPULSE_WAIT_READY;
		return 1;
	}
	if (st == 0 && !sp_recorder_any_alive(rec)) {
		*result = STACKPULSE_WAIT_EXITED;
		return 1;
	}
	/* Young records become consumable within the slack. */
	int slice = rec->python_found ? PY_WAIT_SLICE_MS : st == 1 ? 3 : WAIT_SLICE_MS;
	if (slice > PY_WAIT_SLICE_MS && rec->opts.python != STACKPULSE_FEATURE_OFF &&
	    sp_clock_ns(CLOCK_MONOTONIC) < rec->py_watch_until_ns)
		slice = PY_WAIT_SLICE_MS;
	/* Unprivileged off-CPU stacks are read while the thread still
	 * waits: see its switch-out soon (switch records do not wake
	 * us). A target whose rings stayed empty for a while is
	 * blocked: a new switch-out needs a switch-in first. */
	if (rec->offcpu == STACKPULSE_OFFCPU_UNPRIVILEGED) {
		uint64_t now = sp_clock_ns(CLOCK_MONOTONIC);
		if (st)
			rec->offcpu_busy_until_ns = now + SP_OFFCPU_BUSY_NS;
		int want = now < rec->offcpu_busy_until_ns ? SP_OFFCPU_POLL_MS
		                                           : SP_OFFCPU_IDLE_POLL_MS;
		if (slice > want)
			slice = want;
	}
	if (timeout_ms >= 0) {
		uint64_t spent = (sp_clock_ns(CLOCK_MONOTONIC) - start) / 1000000u;
		if (spent >= (uint64_t)timeout_ms) {
			*result = STACKPULSE_WAIT_TIMEOUT;
			return 1;
		}
		if ((uint64_t)timeout_ms - spent < (uint64_t)slice)
			slice = (int)((uint64_t)timeout_ms - spent);
	}
	*slice_out = slice;
	return 0;
}

static int wait_rings(stackpulse_recorder *rec, int timeout_ms)
{
	uint64_t start = sp_clock_ns(CLOCK_MONOTONIC);
	for (;;) {
		int slice = 0, result = 0;
		sp_recorder_lock(rec);
		int done = wait_check(rec, start, timeout_ms, &result, &slice);
		int fast = rec->python_found && !rec->py_wakeups && slice > 0 &&
		           sp_clock_ns(CLOCK_MONOTONIC) < rec->py_busy_until_ns;
		sp_recorder_unlock(rec);
		if (done)
			return result;
		struct epoll_event ev[8];
		int n;
		if (fast) {
			/* A busy CPython target: its next sample is due soon, and
			 * every 100 us of delay costs whole chains (its frames
			 * move on under a late read). Events that wake the reader
			 * at every sample need no such polling. */
			struct timespec ts = { 0, PY_WAIT_SLICE_US * 1000 };
			n = epoll_pwait2(rec->epfd, ev, 8, &ts, NULL);
			if (n < 0 && errno == ENOSYS) /* Linux < 5.11 */
				n = epoll_wait(rec->epfd, ev, 8, slice);
		} else {
			n = epoll_wait(rec->epfd, ev, 8, slice);
		}
		if (n < 0) {
			if (errno == EINTR)
				return -EINTR;
			return sp_error(-errno, "epoll_wait failed");
		}
	}
}

/* The waiting thread's scheduling, saved while it runs at SCHED_FIFO. */
typedef struct sp_sched_saved {
	int policy;
	struct sched_param param;
} sp_sched_saved;

/* Raises the calling thread to SCHED_FIFO for one wait or consume, into @p saved
 * (see opts.realtime): a reader that shares a CPU with a CPython target
 * otherwise only runs when the target enters the kernel (lazy preemption)
 * and so reads its stacks at its system calls. 1 when raised. */
static int sp_recorder_realtime_begin(stackpulse_recorder *rec, sp_sched_saved *saved)
{
	int want = rec->opts.realtime == STACKPULSE_FEATURE_REQUIRED ||
	           (rec->opts.realtime == STACKPULSE_FEATURE_AUTO && rec->python_found);
	if (!want || rec->realtime < 0)
		return 0;
	saved->policy = sched_getscheduler(0);
	if (saved->policy < 0 || sched_getparam(0, &saved->param) != 0) {
		rec->realtime = -1;
		return 0;
	}
	if (saved->policy == SCHED_FIFO || saved->policy == SCHED_RR)
		return 0; /* the caller chose a real-time policy already */
	struct sched_param sp = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0) {
		rec->realtime = -1;
		return 0;
	}
	rec->realtime = 1;
	return 1;
}

static void sp_recorder_realtime_end(const sp_sched_saved *saved)
{
	sched_setscheduler(0, saved->policy, &saved->param);
}

int stackpulse_recorder_wait(stackpulse_recorder *rec, int timeout_ms)
{
	SP_API_ENTRY();
	if (!rec)
		return sp_error(-EINVAL, "recorder is NULL");
	if (rec->finished)
		return sp_error(STACKPULSE_ESTATE, "the recorder is finished");
	sp_sched_saved saved;
	int raised = sp_recorder_realtime_begin(rec, &saved);
	if (!raised && rec->opts.realtime == STACKPULSE_FEATURE_REQUIRED && rec->realtime < 0)
		return sp_error(-EPERM, "SCHED_FIFO was refused (needs CAP_SYS_NICE or "
		                        "RLIMIT_RTPRIO, and real-time runtime in the cgroup)");
	int rc = wait_rings(rec, timeout_ms);
	if (raised)
		sp_recorder_realtime_end(&saved);
	return rc;
}

/* Merges the per-CPU rings (and the spares a ring growth fills or leaves)
 * by timestamp so that a fork is handled before its child's first records
 * (which may sit in another CPU's ring). Records newer than @p cut stay in
 * the rings for the next call: an older record may still be being written
 * on another CPU. A ring that lost records is noted for growth. */
static int drain_merged(stackpulse_recorder *rec, uint64_t cut)
{
	int nr = 2 * rec->ncpu;
	for (;;) {
		int best = -1;
		uint64_t best_t = 0;
		struct perf_event_header bh;
		const uint8_t *bp = NULL;
		size_t bl = 0;
		for (int c = 0; c < nr; c++) {
			struct perf_event_header h;
			const uint8_t *p;
			size_t l;
			if (sp_ring_peek(&rec->rings[c], &h, &p, &l) != 1)
				continue;
			uint64_t t = sp_recorder_record_time(&h, p, l);
			if (t > cut)
				continue;
			if (best < 0 || t < best_t) {
				best = c;
				best_t = t;
			}
		}
		/* Execs noted by the pause tracer take their place in time. */
		int rc = rec->nexecs ? sp_recorder_exec_apply(rec, best < 0 ? cut : best_t) : 0;
		if (rc || best < 0)
			return rc;
		/* Peek again: other rings' peeks may not disturb it, but the copy
		 * buffer is per ring so the pointers stay valid. */
		if (sp_ring_peek(&rec->rings[best], &bh, &bp, &bl) != 1)
			continue;
		/* Every record goes to the window its time falls in. */
		rc = sp_recorder_rotate_due(rec, best_t) ? sp_recorder_rotate_to(rec, best_t) : 0;
		if (rc)
			return rc;
		if ((bh.type == PERF_RECORD_LOST || bh.type == PERF_RECORD_LOST_SAMPLES) &&
		    best < rec->ncpu && rec->ring_cap && !rec->reopen_size)
			rec->ring_state[best] |= SP_RING_BEHIND;
		rc = sp_recorder_record(rec, &bh, bp, bl);
		sp_ring_release(&rec->rings[best]);
		if (rc)
			return rc;
	}
}

int sp_recorder_consume(stackpulse_recorder *rec, int all)
{
	if (rec->error)
		return rec->error;
	uint64_t now = sp_clock_ns(CLOCK_MONOTONIC);
	uint64_t cut = all ? UINT64_MAX : now - order_slack(rec);
	sp_recorder_python_early(rec);
	if (!all)
		sp_recorder_rings_check(rec);
	int rc = drain_merged(rec, cut);
	if (rc == 0 && !all)
		rc = sp_offcpu_unpriv_read(rec);
	/* Everything up to cut is in: a window that ended by then is complete. */
	if (rc == 0 && !all && sp_recorder_rotate_due(rec, cut))
		rc = sp_recorder_rotate_to(rec, cut);
	if (rc == 0 && !all && sp_recorder_reopen_step(rec) == -ENOMEM)
		rc = -ENOMEM; /* Other refusals only stop the sizing. */
	sp_recorder_rings_retire(rec);
	/* Bound what a crash can lose on a quiet target: close the chunk
	 * at least once per FLUSH_NS even when it is not full. */
	if (rc == 0 && now - rec->last_flush_ns > FLUSH_NS) {
		rc = sp_writer_flush(rec->w);
		rec->last_flush_ns = now;
	}
	if (rc) {
		rec->error = rc;
		snprintf(rec->error_note, sizeof(rec->error_note), "%s", stackpulse_last_error());
	}
	return rc;
}

int stackpulse_recorder_consume_available(stackpulse_recorder *rec)
{
	SP_API_ENTRY();
	if (!rec)
		return sp_error(-EINVAL, "recorder is NULL");
	if (rec->finished)
		return sp_error(STACKPULSE_ESTATE, "the recorder is finished");
	/* At the wait's priority too: preempted here, the reader misses the
	 * samples that arrive meanwhile, and reads them milliseconds late. */
	sp_sched_saved saved;
	int raised = sp_recorder_realtime_begin(rec, &saved);
	sp_recorder_lock(rec);
	int rc = sp_recorder_consume(rec, 0);
	sp_recorder_unlock(rec);
	if (raised)
		sp_recorder_realtime_end(&saved);
	return rc;
}

bool stackpulse_recorder_process_is_active(stackpulse_recorder *rec, pid_t pid)
{
	SP_API_ENTRY();
	if (!rec || rec->finished)
		return false;
	sp_recorder_lock(rec);
	bool alive;
	if (pid == 0) {
		alive = sp_recorder_any_alive(rec);
	} else if (pid == rec->target) {
		alive = sp_recorder_target_alive(rec);
	} else if (!rec->opts.children) {
		alive = 0;
	} else {
		sp_process *p = sp_ptable_find(&rec->pt, pid);
		alive = p && !p->exited && sp_recorder_pid_alive(pid);
	}
	sp_recorder_unlock(rec);
	return alive;
}

int stackpulse_recorder_fd(const stackpulse_recorder *rec)
{
	SP_API_ENTRY();
	if (rec && rec->finished)
		return sp_error(STACKPULSE_ESTATE, "the recorder is finished");
	return rec ? rec->epfd : -1;
}
