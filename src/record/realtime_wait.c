/* SCHED_FIFO for the thread that waits on a recorder (opts.realtime). */
#include <sched.h>

#include "record/recorder.h"

/* Raises the calling thread to SCHED_FIFO for one wait, into @p saved
 * (see opts.realtime): a reader that shares a CPU with a CPython target
 * otherwise only runs when the target enters the kernel (lazy preemption)
 * and so reads its stacks at its system calls. 1 when raised. */
int sp_recorder_realtime_begin(stackpulse_recorder *rec, sp_sched_saved *saved)
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

void sp_recorder_realtime_end(const sp_sched_saved *saved)
{
	sched_setscheduler(0, saved->policy, &saved->param);
}
