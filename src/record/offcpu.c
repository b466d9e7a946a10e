/* Off-CPU intervals from context switches: a thread's switch-out (the
 * PERF_RECORD_SWITCH "out" record, with the stack of the context-switch
 * sample just before it) and its next switch-in make one interval. Records
 * reach here in time order (the drain merges the per-CPU rings), so a
 * switch-out on one CPU and the switch-in on another pair up. A record the
 * kernel dropped breaks a pair: the interval it would have closed is
 * counted as dropped, never guessed.
 *
 * In a switch storm stacks are sampled (SP_OFFCPU_STACK_HZ per thread and
 * CPU), the switch records are not: a short interval without a stack
 * sample of its own is not written as a row but merged, count and time,
 * into the thread's next row in the same state, whose stack the kernel
 * sampled as one of those switch-outs (it stands for its period). Left over at the end, they go
 * into a row with the empty stack. A long one (SP_OFFCPU_MERGE_NS) is a
 * row of its own with the empty stack: a long wait is never put under
 * another wait's stack, and a thread has few of them. */
#include <string.h>

#include "common/error.h"
#include "record/proc_scan.h"
#include "record/recorder.h"

/* A context-switch sample and its switch-out record come from the same
 * pass through the scheduler, microseconds apart; an older sample belongs
 * to a switch-out that was lost. */
#define CS_PAIR_NS 1000000ull

/* Intervals without a stack this long or longer are not merged: at most
 * 1000 rows a second per thread. */
#define SP_OFFCPU_MERGE_NS 1000000ull

void sp_offcpu_storm_count(stackpulse_recorder *rec, uint64_t time, uint64_t n)
{
	/* The unprivileged method samples no stacks at switches. */
	if (rec->offcpu != STACKPULSE_OFFCPU_SWITCH_EVENT || rec->offcpu_storm)
		return;
	if (time - rec->offcpu_win_start >= SP_OFFCPU_STORM_NS) {
		rec->offcpu_win_start = time;
		rec->offcpu_win_outs = 0;
	}
	rec->offcpu_win_outs += n;
	/* A storm: the next re-open samples the stacks (event_set.c). */
	if (rec->offcpu_win_outs >
	    (uint64_t)SP_OFFCPU_STORM_RATE * SP_OFFCPU_STORM_NS / 1000000000ull)
		rec->offcpu_storm = 1;
}

void sp_offcpu_sample(sp_thread *th, uint64_t time, uint32_t stack)
{
	th->off_cs_time = time;
	th->off_cs_stack = stack;
	th->off_has_cs = 1;
}

/* Writes a row of @p th with the intervals pending in state @p state merged
 * into it. offcpu_merged counted them when they were put aside. */
static int write_row(stackpulse_recorder *rec, sp_thread *th, uint64_t start, uint64_t dur,
                     uint32_t stack, int state)
{
	struct sp_off_pending *pd = &th->off_pending[state];
	int rc = sp_writer_offcpu_merged(rec->w, start, dur, th->index, stack, state, pd->count,
	                                 pd->ns);
	if (rc)
		return rc;
	memset(pd, 0, sizeof(*pd));
	rec->offcpu_intervals++;
	rec->offcpu_no_stack += stack == 0;
	return 0;
}

static int write_interval(stackpulse_recorder *rec, sp_thread *th, uint64_t end)
{
	uint64_t dur = end > th->off_start ? end - th->off_start : 0;
	int state = th->off_preempt ? STACKPULSE_OFFCPU_PREEMPTED : STACKPULSE_OFFCPU_BLOCKED;
	if (th->off_stack)
		return write_row(rec, th, th->off_start, dur, th->off_stack, state);
	/* The unprivileged method reads stacks of long blocks only: a short
	 * interval's stack is unknown, not sampled among its neighbours'. */
	if (dur >= SP_OFFCPU_MERGE_NS || rec->offcpu == STACKPULSE_OFFCPU_UNPRIVILEGED) {
		/* A row of its own; the pending ones wait for a stack. */
		int rc = sp_writer_offcpu(rec->w, th->off_start, dur, th->index, 0, state);
		if (rc)
			return rc;
		rec->offcpu_intervals++;
		rec->offcpu_no_stack++;
		return 0;
	}
	struct sp_off_pending *pd = &th->off_pending[state];
	pd->count++;
	pd->ns += dur;
	pd->last_start = th->off_start;
	pd->last_ns = dur;
	rec->offcpu_merged++;
	return 0;
}

/* Writes the intervals of @p th still waiting for a row: the latest as a
 * row with the empty stack, the others merged into it. */
static int flush_pending(stackpulse_recorder *rec, sp_thread *th)
{
	for (int state = 0; state < 2; state++) {
		struct sp_off_pending *pd = &th->off_pending[state];
		if (!pd->count)
			continue;
		uint64_t start = pd->last_start, dur = pd->last_ns;
		pd->count--;
		pd->ns -= dur;
		rec->offcpu_merged--;
		int rc = write_row(rec, th, start, dur, 0, state);
		if (rc)
			return rc;
	}
	return 0;
}

int sp_offcpu_switch(stackpulse_recorder *rec, sp_thread *th, uint64_t time, int out, int preempt)
{
	if (out) {
		sp_offcpu_storm_count(rec, time, 1);
		/* Two outs in a row: the switch-in between them was lost. */
		if (th->off_state == SP_OFF_OFF_CPU)
			rec->offcpu_dropped++;
		th->off_state = SP_OFF_OFF_CPU;
		th->off_start = time;
		th->off_preempt = preempt ? 1 : 0;
		th->off_stack = 0;
		if (th->off_has_cs && th->off_cs_time <= time &&
		    time - th->off_cs_time < CS_PAIR_NS)
			th->off_stack = th->off_cs_stack;
		th->off_has_cs = 0;
		sp_offcpu_unpriv_out(rec, th, time, preempt);
		return 0;
	}
	int was = th->off_state;
	th->off_state = SP_OFF_ON_CPU;
	sp_offcpu_unpriv_in(th, time, was == SP_OFF_OFF_CPU);
	if (was == SP_OFF_OFF_CPU)
		return write_interval(rec, th, time);
	/* In after in: the switch-out between them was lost. The first
	 * switch-in of a thread (recording started while it was off CPU, or
	 * it is new) closes nothing. */
	if (was == SP_OFF_ON_CPU)
		rec->offcpu_dropped++;
	return 0;
}

int sp_offcpu_finish(stackpulse_recorder *rec, uint64_t now)
{
	if (!rec->offcpu)
		return 0;
	for (size_t i = 0; i < rec->pt.nthreads; i++) {
		sp_thread *th = &rec->pt.threads[i];
		/* A thread that exited switched out for good: no interval. Its
		 * EXIT record may have been lost: ask /proc too. */
		int rc = 0;
		char st = 0;
		const sp_process *p = rec->pt.procs[th->process];
		if (!th->exited && !p->exited && !p->unfollowed &&
		    th->off_state == SP_OFF_OFF_CPU && now >= th->off_start &&
		    sp_proc_state(th->tid, &st, NULL) == 0 && st != 'Z' && st != 'X') {
			th->off_state = SP_OFF_ON_CPU;
			sp_offcpu_unpriv_close(th, now);
			rc = write_interval(rec, th, now);
		}
		if (rc == 0)
			rc = flush_pending(rec, th);
		if (rc)
			return rc;
	}
	return 0;
}
