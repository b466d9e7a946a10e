/* Off-CPU intervals from context switches: a thread's switch-out (the
 * PERF_RECORD_SWITCH "out" record, with the stack of the context-switch
 * sample just before it) and its next switch-in make one interval. Records
 * reach here in time order (the drain merges the per-CPU rings), so a
 * switch-out on one CPU and the switch-in on another pair up. A record the
 * kernel dropped breaks a pair: the interval it would have closed is
 * counted as dropped, never guessed. */
#include "common/error.h"
#include "record/recorder.h"

/* A context-switch sample and its switch-out record come from the same
 * pass through the scheduler, microseconds apart; an older sample belongs
 * to a switch-out that was lost. */
#define CS_PAIR_NS 1000000ull

void sp_offcpu_sample(sp_thread *th, uint64_t time, uint32_t stack)
{
	th->off_cs_time = time;
	th->off_cs_stack = stack;
	th->off_has_cs = 1;
}

static int write_interval(stackpulse_recorder *rec, const sp_thread *th, uint64_t end)
{
	uint64_t dur = end > th->off_start ? end - th->off_start : 0;
	int rc = sp_writer_offcpu(rec->w, th->off_start, dur, th->index, th->off_stack,
	                          th->off_preempt ? STACKPULSE_OFFCPU_PREEMPTED
	                                          : STACKPULSE_OFFCPU_BLOCKED);
	if (rc)
		return rc;
	rec->offcpu_intervals++;
	rec->offcpu_no_stack += th->off_stack == 0;
	return 0;
}

int sp_offcpu_switch(stackpulse_recorder *rec, sp_thread *th, uint64_t time, int out, int preempt)
{
	if (out) {
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
		/* A thread that exited switched out for good: no interval. */
		if (th->exited || rec->pt.procs[th->process]->exited ||
		    th->off_state != SP_OFF_OFF_CPU || now < th->off_start)
			continue;
		th->off_state = SP_OFF_ON_CPU;
		sp_offcpu_unpriv_close(th, now);
		int rc = write_interval(rec, th, now);
		if (rc)
			return rc;
	}
	return 0;
}
