/* Holding the target's threads still at their samples (opts.python_pause),
 * so that a CPython stack is read as it was when sampled.
 *
 * A tracer thread seizes every thread of the target (ptrace; threads born
 * later are traced from birth) and the sampling events get perf's sigtrap:
 * a sample then stops its thread with a SIGTRAP (si_code TRAP_PERF) that
 * the tracer catches. While the thread holds still, the tracer reads the
 * Python stacks of the samples in the rings (sp_recorder_python_early),
 * then resumes it without the signal. Other signals pass through; a group
 * stop stays a stop. sigtrap needs remove_on_exec: an exec of the target
 * takes its events away, so the tracer re-opens them at the exec stop.
 * Child processes, when followed, are traced from birth too
 * (PTRACE_O_TRACEFORK, VFORK) and inherit the events; when not followed,
 * the events are inherited by threads only (inherit_thread): a forked
 * child would die of a trap nobody catches. */
#ifndef SP_RECORD_PAUSE_H
#define SP_RECORD_PAUSE_H

#include <sys/types.h>

#include "record/recorder.h"

typedef struct sp_pause sp_pause;

/* Starts pausing @p pid: seizes its threads (with @p pre_exec, the one
 * thread of a spawned child not yet exec'd: the events come at its exec
 * stop), then, unless @p pre_exec, re-opens the sampling events with
 * sigtrap. Returns 0, or a negative code with nothing left traced: -EPERM
 * (ptrace refused, with the reason), -EINVAL/-EOPNOTSUPP (the kernel has
 * no sigtrap events), -ESRCH. Called without rec->mu. */
int sp_pause_start(stackpulse_recorder *rec, pid_t pid, int pre_exec);

/* 1 when the tracer holds thread @p tid: only such a thread may get
 * events that stop it (any thread may call it). */
int sp_pause_traces(stackpulse_recorder *rec, pid_t tid);

/* Stops pausing: the caller has disabled the sampling events; the tracer
 * lets every signal they raised go by unseen, detaches from every thread
 * and ends. Called without rec->mu; no-op when not paused. */
void sp_pause_stop(stackpulse_recorder *rec);

#endif
