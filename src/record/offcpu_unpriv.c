/* Off-CPU stacks without the context-switch event (the unprivileged
 * method, STACKPULSE_OFFCPU_UNPRIVILEGED). The intervals come from
 * PERF_RECORD_SWITCH records as in offcpu.c; the stack is read from the
 * blocked thread itself, which still holds the user state it left the CPU
 * with: /proc/PID/task/TID/syscall gives its user stack pointer and
 * program counter, process_vm_readv copies its stack from there, and the
 * online unwinder walks the copy as it walks a sample (kernel frames are
 * not available; Python frames are read and merged as for samples). The
 * target is never stopped.
 *
 * A read belongs to an interval only when it provably happened inside it:
 * the thread's switch count (schedstat) is the same before and after the
 * read, and the interval's switch-out and switch-in records, once drained,
 * enclose the read's time window. Otherwise the interval gets no stack
 * (counted in offcpu_no_stack), as do preempted intervals (a runnable
 * thread has no saved state to read) and intervals that end before the
 * recorder gets to them. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/clock.h"
#include "record/proc_scan.h"
#include "record/recorder.h"
#include "record/target_mem.h"

/* Reads tried per interval: a thread caught while being woken ("running")
 * is tried again at the next drain, if its interval is still open. */
#define READ_TRIES 2
#define PAGE       4096u

/* Copies up to @p cap bytes of the stack of @p pid from @p sp upwards
 * into @p buf, page by page up to the first unreadable one (the end of
 * the stack mapping). Returns the bytes copied. */
static size_t copy_stack(pid_t pid, uint64_t sp, uint8_t *buf, size_t cap)
{
	sp_py_iov iov[SP_PY_MAX_LIVE];
	uint32_t n = 0;
	size_t at = 0;
	while (at < cap && n < SP_PY_MAX_LIVE) {
		uint64_t a = sp + at;
		size_t len = PAGE - (size_t)(a & (PAGE - 1));
		if (len > cap - at)
			len = cap - at;
		iov[n++] = (sp_py_iov){ a, buf + at, (uint32_t)len, 0 };
		at += len;
	}
	sp_target_mem m;
	sp_target_mem_init(&m, pid);
	int rc = sp_target_mem_read(&m, iov, n, 1);
	sp_target_mem_close(&m);
	size_t got = 0;
	for (uint32_t i = 0; rc == 0 && i < n && iov[i].ok; i++)
		got += iov[i].len;
	return got;
}

/* One read of the stack of thread @p i (rec->pt.threads) of @p proc. */
static int read_thread(stackpulse_recorder *rec, sp_process *proc, size_t i)
{
	pid_t pid = proc->pid, tid = rec->pt.threads[i].tid;
	uint64_t before, after;
	sp_proc_syscall sc;
	/* A runnable thread ("running", the common case in a switch storm)
	 * costs one read; else the state is read again inside the switch
	 * count bracket. The whole read lies in [t0, t1], which the
	 * interval must enclose. */
	uint64_t t0 = sp_mono_ns();
	if (sp_proc_thread_syscall(pid, tid, &sc) != 0 ||
	    sp_proc_thread_switches(pid, tid, &before) != 0 ||
	    sp_proc_thread_syscall(pid, tid, &sc) != 0 || sc.sp == 0)
		return 0; /* Runnable, gone, or not ours: no stack. */
	size_t len = copy_stack(pid, sc.sp, rec->offcpu_copy, rec->opts.stack_size);
	/* A sample as perf would give it, with only sp and pc known. */
	sp_sample_fields sf;
	memset(&sf, 0, sizeof(sf));
	sf.pid = pid;
	sf.tid = tid;
	sf.sp = sc.sp;
	sf.stack = len ? rec->offcpu_copy : NULL;
	sf.dyn = len;
	sp_unwind_regs_sp_pc(&sf.regs, sc.sp, sc.pc);
	uint32_t stack_id = 0;
	int rc = sp_recorder_sample_stack(rec, &sf, proc, &stack_id);
	if (rc && !sp_recorder_fatal(rec, rc)) {
		/* That stack alone is lost (a table limit): no stack. */
		rec->failed++;
		sp_error_clear();
		return 0;
	}
	if (rc)
		return rc;
	/* The Python frames were read live too: check after them. */
	if (sp_proc_thread_switches(pid, tid, &after) != 0 || after != before)
		return 0;
	sp_thread *th = &rec->pt.threads[i];
	th->off_rd_stack = stack_id;
	th->off_rd_t0 = t0;
	th->off_rd_t1 = sp_mono_ns();
	return 0;
}

int sp_offcpu_unpriv_read(stackpulse_recorder *rec)
{
	if (rec->offcpu != STACKPULSE_OFFCPU_UNPRIVILEGED)
		return 0;
	if (!rec->offcpu_copy) {
		rec->offcpu_copy = sp_malloc(rec->opts.stack_size);
		if (!rec->offcpu_copy)
			return -ENOMEM;
	}
	uint64_t now = sp_mono_ns();
	for (size_t i = 0; i < rec->pt.nthreads; i++) {
		const sp_thread *th = &rec->pt.threads[i];
		if (th->exited || th->off_state != SP_OFF_OFF_CPU || th->off_preempt ||
		    th->off_rd_tries >= READ_TRIES || now < th->off_start ||
		    now - th->off_start < SP_OFFCPU_READ_AFTER_NS ||
		    (th->off_rd_stack && th->off_rd_t0 >= th->off_start))
			continue;
		sp_process *proc = rec->pt.procs[th->process];
		if (proc->exited || proc->unfollowed || !proc->space)
			continue;
		rec->pt.threads[i].off_rd_tries++;
		int rc = read_thread(rec, proc, i);
		if (rc)
			return rc;
	}
	return 0;
}

void sp_offcpu_unpriv_sample(sp_thread *th, uint64_t time, uint32_t stack)
{
	th->off_run_time = time;
	th->off_run_cpu = 0;
	th->off_run_stack = stack;
}

void sp_offcpu_unpriv_out(const stackpulse_recorder *rec, sp_thread *th, uint64_t time, int preempt)
{
	th->off_rd_tries = 0;
	if (th->off_run_stack) {
		uint64_t from =
		        th->off_run_time > th->off_in_time ? th->off_run_time : th->off_in_time;
		th->off_run_cpu += time > from ? time - from : 0;
	}
	/* A runnable thread has no saved state to read. Preemption does not
	 * move it: it resumes where it stopped, so its stack is where the
	 * latest sample found it, if it has not blocked since and has run
	 * for at most two sampling periods of CPU time since (cpu-clock
	 * counts the thread's CPU time: a later sample would have come). */
	uint64_t recent = 2000000000ull / (rec->opts.frequency ? rec->opts.frequency : 1);
	if (preempt && !th->off_stack && th->off_run_stack && th->off_run_cpu <= recent)
		th->off_stack = th->off_run_stack;
	if (!preempt)
		th->off_run_stack = 0;
	/* A read made after this switch-out may belong to the interval it
	 * starts (the switch-in before it was not drained yet at the read). */
	if (th->off_rd_stack && th->off_rd_t0 < time)
		th->off_rd_stack = 0;
}

void sp_offcpu_unpriv_in(sp_thread *th, uint64_t time, int closes)
{
	th->off_in_time = time;
	if (closes)
		sp_offcpu_unpriv_close(th, time);
}

void sp_offcpu_unpriv_close(sp_thread *th, uint64_t end)
{
	if (!th->off_rd_stack)
		return;
	if (th->off_rd_t0 > end)
		return; /* Read after this interval: it may belong to the next one. */
	/* Inside the interval, or else read before it or while the thread ran. */
	if (th->off_rd_t0 >= th->off_start && th->off_rd_t1 <= end && !th->off_stack)
		th->off_stack = th->off_rd_stack;
	th->off_rd_stack = 0;
}

void sp_offcpu_unpriv_free(stackpulse_recorder *rec)
{
	sp_free(rec->offcpu_copy);
	rec->offcpu_copy = NULL;
}
