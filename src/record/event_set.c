/* The perf events of a recording: one ring per CPU (mapped, in the epoll
 * set), the sampling events of every followed thread redirected into them,
 * the id -> thread registry of those events, the threads with events of
 * their own, the samples each thread's events lost, and re-opening every
 * event with another stack copy size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/clock.h"
#include "record/pause.h"
#include "record/proc_scan.h"
#include "record/recorder.h"

/* Ring bytes per CPU to start with: the caller's ring_kb; as root
 * (CAP_IPC_LOCK lifts perf_event_mlock_kb) SP_RING_START_MS of samples,
 * growing up to the SP_RING_HOLD_MS budget (rec->ring_cap) when a CPU's
 * ring falls behind; else our share of perf_event_mlock_kb (which the
 * kernel grants per CPU) minus the control page. sp_ring_map halves it
 * while the kernel refuses. */
static size_t ring_bytes(stackpulse_recorder *rec)
{
	rec->ring_cap = 0;
	if (rec->opts.ring_kb)
		return (size_t)rec->opts.ring_kb * 1024;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (geteuid() == 0) {
		long pages = sysconf(_SC_PHYS_PAGES);
		uint64_t ram = pages > 0 ? (uint64_t)pages * page : 0;
		/* A sample: the full stack copy plus registers, callchain and
		 * headers. Once the copies shrink (sample.c) the same ring holds
		 * many times more. */
		uint64_t rec_bytes = (uint64_t)rec->opts.stack_size + 2048;
		/* Mapping a ring costs the kernel its pages (about 0.3 ms of CPU
		 * per MiB here, as much as the drain spends on 30 samples per
		 * MiB): start small and grow only the rings that fall behind.
		 * Off-CPU events come at the target's switch rate, not at the
		 * sampling frequency: budget for a busy one. */
		uint32_t rate = rec->opts.frequency;
		if (rec->opts.off_cpu != STACKPULSE_FEATURE_OFF && rate < SP_OFFCPU_RING_RATE)
			rate = SP_OFFCPU_RING_RATE;
		rec->ring_cap =
		        sp_ring_budget_bytes(rate, rec_bytes, SP_RING_HOLD_MS, rec->ncpu, ram);
		return (size_t)sp_ring_budget_bytes(rate, rec_bytes, SP_RING_START_MS, rec->ncpu,
		                                    ram);
	}
	long kb = sp_perf_sysctl("perf_event_mlock_kb", 516);
	size_t bytes = kb > 0 ? (size_t)kb * 1024 : 516 * 1024;
	return bytes > page ? bytes - page : page;
}

/* Maps a ring of @p bytes for @p cpu into @p r and adds it to the epoll
 * set; the owner's errors come back unchanged (-ENODEV: no such CPU). */
static int map_ring(stackpulse_recorder *rec, sp_ring *r, int cpu, size_t bytes)
{
	int fd = sp_perf_open_ring_owner(cpu, (uint32_t)(bytes / 4));
	if (fd < 0)
		return fd;
	int rc = sp_ring_map(r, fd, cpu, bytes);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)cpu };
	if (rc == 0 && epoll_ctl(rec->epfd, EPOLL_CTL_ADD, r->fd, &ev) != 0)
		rc = sp_error(-errno, "epoll_ctl failed");
	if (rc)
		sp_ring_unmap(r);
	return rc;
}

int sp_recorder_open_rings(stackpulse_recorder *rec)
{
	size_t bytes = ring_bytes(rec);
	int opened = 0;
	for (int c = 0; c < rec->ncpu; c++) {
		int rc = map_ring(rec, &rec->rings[c], c, bytes);
		if (rc == -ENODEV || rc == -EINVAL)
			continue; /* Offline or absent CPU. */
		if (rc)
			return rc;
		rec->ring_bytes += rec->rings[c].size;
		opened++;
	}
	return opened ? 0 : sp_error(-ENODEV, "no CPU accepted a perf ring");
}

/* ---- rings that grow ---- */

/* 1 once the stack copy size has settled: no shrink is coming that would
 * make room in the rings by itself. */
static int copy_settled(const stackpulse_recorder *rec)
{
	return rec->copy_seen >= SP_COPY_LEARN || rec->python_found || rec->copy_stop ||
	       rec->copy_resizes >= SP_COPY_MAX_RESIZE;
}

void sp_recorder_rings_check(stackpulse_recorder *rec)
{
	if (!rec->ring_cap || rec->reopen_size || !copy_settled(rec))
		return;
	for (int c = 0; c < rec->ncpu; c++) {
		const sp_ring *r = &rec->rings[c];
		if (r->meta && sp_ring_used(r) * 2 >= r->size)
			rec->ring_state[c] |= SP_RING_BEHIND;
	}
}

/* At the start of a re-open: maps the larger spare ring of every CPU that
 * fell behind (the re-opened events write into it); @p shrink: the copies
 * shrink in this re-open, which makes room by itself. Returns the number
 * of rings that grow. A refused ring stops the growth for good. */
static size_t rings_grow_begin(stackpulse_recorder *rec, int shrink)
{
	size_t n = 0;
	for (int c = 0; c < rec->ncpu; c++) {
		if (!(rec->ring_state[c] & SP_RING_BEHIND))
			continue;
		rec->ring_state[c] = 0;
		sp_ring *r = &rec->rings[c], *spare = &rec->rings[rec->ncpu + c];
		if (shrink || !rec->ring_cap || !r->meta || spare->fd >= 0 ||
		    r->size >= rec->ring_cap)
			continue;
		uint64_t want = r->size * SP_RING_GROWTH;
		if (want > rec->ring_cap)
			want = rec->ring_cap;
		if (map_ring(rec, spare, c, (size_t)want) != 0 || spare->size <= r->size) {
			sp_ring_unmap(spare);
			rec->ring_cap = 0; /* Refused (memory): keep the rings we have. */
			continue;
		}
		rec->ring_state[c] = SP_RING_GROWING;
		n++;
	}
	return n;
}

/* The ring the events of a re-open under way write into on @p cpu. */
static int ring_out(const stackpulse_recorder *rec, int cpu)
{
	return rec->reopen_size && (rec->ring_state[cpu] & SP_RING_GROWING)
	               ? rec->rings[rec->ncpu + cpu].fd
	               : rec->rings[cpu].fd;
}

/* After a re-open: the grown rings take their CPU's place; the replaced
 * ones stay as spares until drained. */
static void rings_grow_end(stackpulse_recorder *rec)
{
	for (int c = 0; c < rec->ncpu; c++) {
		sp_ring *r = &rec->rings[c], *spare = &rec->rings[rec->ncpu + c];
		if (!(rec->ring_state[c] & SP_RING_GROWING))
			continue;
		rec->ring_state[c] = 0;
		rec->ring_bytes += spare->size - r->size;
		sp_ring t = *r;
		*r = *spare;
		*spare = t;
	}
}

void sp_recorder_rings_retire(stackpulse_recorder *rec)
{
	if (rec->reopen_size)
		return; /* Spares are the rings being moved into. */
	for (int c = 0; c < rec->ncpu; c++) {
		sp_ring *spare = &rec->rings[rec->ncpu + c];
		if (spare->fd < 0 || sp_ring_used(spare) != 0)
			continue;
		rec->corrupt += spare->corrupt;
		sp_ring_unmap(spare); /* Its events are closed: nothing comes any more. */
	}
}

static int push_fd(stackpulse_recorder *rec, int fd, pid_t tid, int kind)
{
	if (rec->nfds == rec->capfds) {
		size_t nc = rec->capfds ? rec->capfds * 2 : 32;
		int *nf = sp_realloc_array(rec->fds, nc, sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		rec->fds = nf;
		pid_t *nt = sp_realloc_array(rec->fdtids, nc, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		rec->fdtids = nt;
		rec->capfds = nc;
	}
	rec->fdtids[rec->nfds] = tid;
	rec->fds[rec->nfds++] = fd;
	uint64_t id = 0;
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0)
		return sp_error(-errno, "PERF_EVENT_IOC_ID failed");
	if (rec->nids == rec->capids) {
		size_t nc = rec->capids ? rec->capids * 2 : 32;
		sp_event_id *ni = sp_realloc_array(rec->ids, nc, sizeof(*ni));
		if (!ni)
			return -ENOMEM;
		rec->ids = ni;
		rec->capids = nc;
	}
	size_t pos = rec->nids;
	while (pos > 0 && rec->ids[pos - 1].id > id)
		pos--; /* Keep sorted for lookups. */
	memmove(&rec->ids[pos + 1], &rec->ids[pos], (rec->nids - pos) * sizeof(*rec->ids));
	rec->ids[pos] = (sp_event_id){ id, tid, rec->reopens + (rec->reopen_size ? 1u : 0u), kind };
	rec->nids++;
	return 0;
}

static int add_direct(stackpulse_recorder *rec, pid_t tid)
{
	if (rec->ndirect == rec->capdirect) {
		size_t nc = rec->capdirect ? rec->capdirect * 2 : 16;
		pid_t *nd = sp_realloc_array(rec->direct, nc, sizeof(*nd));
		if (!nd)
			return -ENOMEM;
		rec->direct = nd;
		rec->capdirect = nc;
	}
	size_t pos = rec->ndirect;
	while (pos > 0 && rec->direct[pos - 1] > tid)
		pos--;
	memmove(&rec->direct[pos + 1], &rec->direct[pos], (rec->ndirect - pos) * sizeof(pid_t));
	rec->direct[pos] = tid;
	rec->ndirect++;
	return 0;
}

static int has_direct(const stackpulse_recorder *rec, pid_t tid)
{
	for (size_t i = 0; i < rec->ndirect; i++)
		if (rec->direct[i] == tid)
			return 1;
	return 0;
}

/* Opens the off-CPU event of thread @p tid on @p cpu with @p method
 * (enum stackpulse_offcpu_method). */
static int switch_event_open(stackpulse_recorder *rec, pid_t tid, int cpu, int method)
{
	struct perf_event_attr a;
	int freq = rec->reopen_size ? rec->reopen_freq : rec->offcpu_freq;
	if (method == STACKPULSE_OFFCPU_UNPRIVILEGED)
		sp_perf_switch_user_attr(&rec->setup.attr, &a);
	else
		sp_perf_switch_attr(&rec->setup.attr, freq ? rec->offcpu_hz : 0, &a);
	return sp_perf_event_open(&a, tid, cpu, -1);
}

/* Opens the off-CPU event of thread @p tid on @p cpu (opts.off_cpu) into
 * the CPU's ring. The first open decides the method: the context-switch
 * event, else (refused: perf_event_paranoid 2) the switch records alone
 * (the unprivileged method, offcpu_unpriv.c); both refused with AUTO,
 * off-CPU recording is off (rec->offcpu 0); with REQUIRED, the recording
 * fails. */
static int open_switch(stackpulse_recorder *rec, pid_t tid, int cpu)
{
	if (rec->opts.off_cpu == STACKPULSE_FEATURE_OFF || (rec->offcpu_probed && !rec->offcpu))
		return 0;
	if (!rec->offcpu_probed) {
		/* The kernel refuses a frequency above this sysctl. */
		long max = sp_perf_sysctl("perf_event_max_sample_rate", SP_OFFCPU_STACK_HZ);
		rec->offcpu_hz = max > 0 && max < (long)SP_OFFCPU_STACK_HZ ? (uint32_t)max
		                                                           : SP_OFFCPU_STACK_HZ;
	}
	int method = rec->offcpu_probed ? rec->offcpu : STACKPULSE_OFFCPU_SWITCH_EVENT;
	int fd = switch_event_open(rec, tid, cpu, method);
	if (!rec->offcpu_probed && (fd == -EACCES || fd == -EPERM)) {
		method = STACKPULSE_OFFCPU_UNPRIVILEGED;
		fd = switch_event_open(rec, tid, cpu, method);
	}
	if (fd == -ESRCH)
		return 0;
	if (fd < 0) {
		if (!rec->offcpu_probed && rec->opts.off_cpu == STACKPULSE_FEATURE_AUTO) {
			rec->offcpu_probed = 1;
			return 0;
		}
		char hint[320];
		sp_perf_permission_hint(hint, sizeof(hint));
		return sp_error(fd,
		                "off-CPU recording needs context-switch records, refused for "
		                "thread %d on cpu %d; %s",
		                (int)tid, cpu, hint);
	}
	rec->offcpu_probed = 1;
	rec->offcpu = method;
	int rc = push_fd(rec, fd, tid, SP_EVENT_SWITCH);
	if (rc)
		return rc;
	/* The ring the sampling event beside it writes into: during a re-open
	 * that grows the ring, the new one (the old one is unmapped once
	 * drained, and what went there after would be lost uncounted). */
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_out(rec, cpu)) != 0)
		return sp_error(-errno, "PERF_EVENT_IOC_SET_OUTPUT on cpu %d failed", cpu);
	return 0;
}

/* Opens the sampling events of thread @p tid on every CPU with a ring and
 * redirects them into it. A thread that exited meanwhile is skipped. */
static int open_thread(stackpulse_recorder *rec, pid_t tid, int *probe_fd)
{
	int any = 0;
	/* An event that stops its thread only on a thread the pause tracer
	 * holds: the trap would kill any other. */
	if (rec->setup.attr.sigtrap && !sp_pause_traces(rec, tid))
		return 0;
	for (int c = 0; c < rec->ncpu; c++) {
		if (rec->rings[c].fd < 0)
			continue;
		int fd;
		if (*probe_fd < 0 && rec->nfds == 0) {
			sp_perf_config cfg = { (int)rec->opts.perf_event,
				               (int)rec->opts.kernel,
				               rec->opts.frequency,
				               rec->opts.stack_size,
				               sp_unwind_regs_mask(),
				               rec->spawned,
				               rec->py_wakeups };
			fd = sp_perf_probe(&cfg, tid, c, &rec->setup);
			if (fd == -ESRCH)
				return 0; /* gone (or a zombie leader): the next one probes */
		} else {
			fd = sp_perf_event_open(&rec->setup.attr, tid, c, -1);
			if (fd == -ESRCH)
				return 0;
			if (fd < 0)
				return sp_error(fd,
				                "perf_event_open for thread %d on cpu %d failed",
				                (int)tid, c);
		}
		if (fd < 0)
			return fd;
		*probe_fd = fd;
		int rc = push_fd(rec, fd, tid, SP_EVENT_SAMPLING);
		if (rc)
			return rc;
		/* Only new events: redirecting one that has a ring waits for an
		 * RCU grace period (about 15 ms here) per event. */
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_out(rec, c)) != 0)
			return sp_error(-errno, "PERF_EVENT_IOC_SET_OUTPUT on cpu %d failed", c);
		if ((rc = open_switch(rec, tid, c)) != 0)
			return rc;
		any = 1;
	}
	/* During a re-open the thread's new events are not enabled yet: its
	 * samples still come from the old ones (reopen_step sets direct). */
	return any && !rec->reopen_size ? add_direct(rec, tid) : 0;
}

/* 1 when error @p rc of opening events on a thread of @p pid belongs to
 * that process alone: perf refused it (not dumpable, another user's), and
 * it is not the target. */
static int refused(const stackpulse_recorder *rec, pid_t pid, int rc)
{
	return (rc == -EACCES || rc == -EPERM) && pid != rec->target;
}

/* Opens events on the threads of @p pid that have none; *added when
 * there were some. A process other than the target that is gone (or
 * whose threads cannot be listed) is left out. */
static int open_process(stackpulse_recorder *rec, pid_t pid, int *probe, int *added)
{
	pid_t *tids;
	size_t n;
	int rc = sp_proc_tasks(pid, &tids, &n);
	if (rc && pid != rec->target) {
		sp_error_clear();
		return rc == -ENOMEM ? rc : 0;
	}
	if (rc)
		return rc == -ESRCH ? sp_error(-ESRCH, "pid %d exited during attach", (int)pid)
		                    : rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (has_direct(rec, tids[i]))
			continue;
		rc = open_thread(rec, tids[i], probe);
		*added = 1;
	}
	sp_free(tids);
	if (refused(rec, pid, rc)) {
		/* That process alone: given up once it is in the table. */
		rc = sp_pid_list_add(&rec->refused, pid, SP_TREE_MAX);
		sp_error_clear();
		return rc == -ENOMEM ? rc : 0;
	}
	return rc;
}

/* Opens events on every thread of the target and, with children
 * followed, of every process descended from it, as a spawned target's
 * children inherit them; with @p rescan, repeats until a pass finds no
 * new thread (live attach). */
int sp_recorder_open_all_threads(stackpulse_recorder *rec, int rescan)
{
	int probe = -1;
	for (int round = 0; round < 100; round++) {
		sp_pid_list tree = { 0 };
		int rc = sp_pid_list_add(&tree, rec->target, 1);
		if (rc == 0 && rec->opts.children)
			rc = sp_proc_descendants(&tree, SP_TREE_MAX);
		int added = 0;
		for (uint32_t i = 0; i < tree.n && rc == 0; i++)
			rc = open_process(rec, tree.v[i], &probe, &added);
		sp_free(tree.v);
		if (rc)
			return rc;
		if (rec->nfds == 0)
			return sp_error(-ESRCH, "pid %d exited during attach", (int)rec->target);
		if (!added || !rescan)
			return 0;
	}
	return 0;
}

int sp_recorder_enable_all(stackpulse_recorder *rec)
{
	for (size_t i = 0; i < rec->nfds; i++)
		if (ioctl(rec->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0)
			return sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
	return 0;
}

/* ---- stack copy sizing and per-thread loss ---- */

int sp_recorder_thread_lost(stackpulse_recorder *rec, pid_t tid, uint32_t thread, uint64_t lost)
{
	sp_thread_loss *e = NULL;
	for (size_t i = 0; i < rec->ntloss && !e; i++)
		if (rec->tloss[i].tid == tid)
			e = &rec->tloss[i];
	if (!e) {
		if (rec->ntloss == rec->captloss) {
			size_t nc = rec->captloss ? rec->captloss * 2 : 64;
			sp_thread_loss *nl = sp_realloc_array(rec->tloss, nc, sizeof(*nl));
			if (!nl)
				return -ENOMEM;
			rec->tloss = nl;
			rec->captloss = nc;
		}
		e = &rec->tloss[rec->ntloss++];
		*e = (sp_thread_loss){ tid, SP_NONE, 0, 0, 0 };
	}
	if (thread != SP_NONE)
		e->thread = thread;
	e->lost += lost;
	return 0;
}

/* Adds the lost-sample counters of fds[from..to) to their threads. */
int sp_recorder_read_loss(stackpulse_recorder *rec, size_t from, size_t to)
{
	if (!rec->setup.lost_format)
		return 0;
	for (size_t i = from; i < to; i++) {
		sp_perf_counts pc;
		if (sp_perf_read(rec->fds[i], 1, &pc) != 0 || pc.lost == 0)
			continue;
		sp_thread *th = sp_ptable_find_thread(&rec->pt, rec->fdtids[i]);
		int rc = sp_recorder_thread_lost(rec, rec->fdtids[i], th ? th->index : SP_NONE,
		                                 pc.lost);
		if (rc)
			return rc;
	}
	return 0;
}

int sp_recorder_read_live_loss(stackpulse_recorder *rec)
{
	if (!rec->setup.lost_format)
		return 0;
	for (size_t i = 0; i < rec->ntloss; i++)
		rec->tloss[i].live = 0;
	for (size_t i = 0; i < rec->nfds; i++) {
		sp_perf_counts pc;
		if (sp_perf_read(rec->fds[i], 1, &pc) != 0 || pc.lost == 0)
			continue;
		sp_thread *th = sp_ptable_find_thread(&rec->pt, rec->fdtids[i]);
		int rc = sp_recorder_thread_lost(rec, rec->fdtids[i], th ? th->index : SP_NONE, 0);
		if (rc)
			return rc;
		for (size_t j = 0; j < rec->ntloss; j++)
			if (rec->tloss[j].tid == rec->fdtids[i])
				rec->tloss[j].live += pc.lost;
	}
	return 0;
}

/* Pids of the followed live processes and, with @p children (and
 * opts.children), their descendants not yet known from a FORK record
 * (/proc/PID/task/TID/children), into @p l (sp_free l->v). */
static int followed_pids(stackpulse_recorder *rec, int children, sp_pid_list *l)
{
	memset(l, 0, sizeof(*l));
	int rc = 0;
	for (size_t i = 0; i < rec->pt.nprocs && rc == 0; i++) {
		const sp_process *p = rec->pt.procs[i];
		if (!p->exited && !p->unfollowed && (rec->opts.children || p->pid == rec->target))
			rc = sp_pid_list_add(l, p->pid, UINT32_MAX);
	}
	if (rc == 0 && children && rec->opts.children)
		rc = sp_proc_descendants(l, l->n + SP_TREE_MAX);
	return rc;
}

/* 1 when thread @p tid has events of the re-open under way. */
static int reopen_has(const stackpulse_recorder *rec, pid_t tid)
{
	for (size_t i = rec->reopen_old; i < rec->nfds; i++)
		if (rec->fdtids[i] == tid)
			return 1;
	return 0;
}

/* Makes the threads of fds[from..] the ones with events of their own. */
static int set_direct(stackpulse_recorder *rec, size_t from)
{
	rec->ndirect = 0;
	for (size_t i = from; i < rec->nfds; i++) {
		if (has_direct(rec, rec->fdtids[i]))
			continue;
		int rc = add_direct(rec, rec->fdtids[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* Opens new-size events on the threads of the followed processes that
 * have none yet, enabling them when @p enable, until CLOCK_MONOTONIC
 * passes @p deadline (0: no limit; at least one thread). Sets *opened to
 * the number of threads given events and *more when the deadline left
 * some for the next call. */
static int reopen_batch(stackpulse_recorder *rec, uint64_t deadline, int enable, size_t *opened,
                        int *more)
{
	sp_pid_list pids;
	*opened = 0;
	*more = 0;
	/* Unknown children only in the final listings (enable): once per
	 * re-open rather than once per step. */
	int rc = followed_pids(rec, enable, &pids), probe = 0;
	for (uint32_t i = 0; i < pids.n && rc == 0 && !*more; i++) {
		pid_t *tids;
		size_t nt;
		const sp_process *p = sp_ptable_find(&rec->pt, pids.v[i]);
		if ((p && p->unfollowed) || sp_proc_tasks(pids.v[i], &tids, &nt) != 0)
			continue;
		for (size_t k = 0; k < nt && rc == 0; k++) {
			if (reopen_has(rec, tids[k]))
				continue;
			if (deadline && *opened && sp_mono_ns() > deadline) {
				*more = 1;
				break;
			}
			size_t before = rec->nfds;
			rc = open_thread(rec, tids[k], &probe);
			if (refused(rec, pids.v[i], rc)) {
				/* That process alone is given up: the re-open goes on
				 * without it (its old events close at the end). */
				sp_process *gone = sp_ptable_find(&rec->pt, pids.v[i]);
				if (gone)
					sp_recorder_unfollow(rec, gone, rc);
				sp_error_clear();
				rc = 0;
				break;
			}
			for (size_t j = before; j < rec->nfds && rc == 0 && enable; j++)
				if (ioctl(rec->fds[j], PERF_EVENT_IOC_ENABLE, 0) != 0)
					rc = sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
			*opened += rec->nfds > before;
		}
		sp_free(tids);
	}
	sp_free(pids.v);
	return rc;
}

/* Gives up a re-open: closes the new events, the old ones sample on. */
static void reopen_abort(stackpulse_recorder *rec)
{
	size_t old = rec->reopen_old;
	for (size_t i = old; i < rec->nfds; i++)
		close(rec->fds[i]);
	rec->nfds = old;
	for (size_t i = 0; i < old; i++)
		ioctl(rec->fds[i], PERF_EVENT_IOC_ENABLE, 0);
	set_direct(rec, 0);
	rec->setup.attr.sample_stack_user = rec->copy_size;
	rec->reopen_size = 0;
	rec->copy_stop = 1;
	rec->ring_cap = 0;
	for (int c = 0; c < rec->ncpu; c++)
		rec->ring_state[c] = 0; /* Spares are drained, then unmapped. */
}

/* One step of re-opening every sampling event with another stack copy
 * size, or into a larger ring for the CPUs whose ring fell behind, run
 * from the drain so that each step is short (a recorder that competes
 * with many busy threads loses its CPU for long after a long burst, and
 * the rings fill meanwhile). Steps: new events, disabled, on the threads
 * of the followed processes (listed from /proc) for up to REOPEN_STEP_NS
 * per call; once every listed thread has them, the old events are disabled
 * (with their inherited copies), the new ones enabled, threads born
 * meanwhile get events, and the old events are read (lost counts) and
 * closed. Between the disable and the enable (a few hundred ioctls)
 * nothing is sampled. A grown ring replaces its CPU's ring at the end;
 * the old one is drained and unmapped (sp_recorder_rings_retire). */
#define REOPEN_STEP_NS 2000000ull

static int reopen_finish(stackpulse_recorder *rec, size_t old);

/* A re-open to copy @p size stack bytes, sampling the off-CPU stacks by
 * frequency when @p freq: new events from fds[nfds] on. */
static void reopen_begin(stackpulse_recorder *rec, uint32_t size, int freq)
{
	rec->reopen_freq = freq;
	rec->reopen_size = size;
	rec->reopen_old = rec->nfds;
	rec->setup.attr.sample_stack_user = size;
	rec->setup.attr.enable_on_exec = 0;
	rec->setup.attr.disabled = 1;
}

int sp_recorder_reopen_step(stackpulse_recorder *rec)
{
	if (!rec->reopen_size) {
		int resize = rec->copy_want && rec->copy_want != rec->copy_size &&
		             rec->copy_resizes < SP_COPY_MAX_RESIZE && !rec->copy_stop;
		/* A switch storm: its stacks sampled at offcpu_hz from now on. */
		int to_freq = rec->offcpu_storm && !rec->offcpu_freq && !rec->copy_stop;
		size_t grow = rings_grow_begin(rec, resize && rec->copy_want < rec->copy_size);
		if (!resize && !grow && !to_freq)
			return 0;
		reopen_begin(rec, resize ? rec->copy_want : rec->copy_size,
		             rec->offcpu_freq || to_freq);
	}
	size_t old = rec->reopen_old, opened = 0;
	int more = 0;
	int rc = reopen_batch(rec, sp_mono_ns() + REOPEN_STEP_NS, 0, &opened, &more);
	if (rc == 0 && more)
		return 0; /* More threads at the next call. */
	if (rc || rec->nfds == old) {
		reopen_abort(rec);
		return rc;
	}
	return reopen_finish(rec, old);
}

int sp_recorder_reopen_now(stackpulse_recorder *rec)
{
	if (rec->reopen_size)
		reopen_abort(rec);
	reopen_begin(rec, rec->copy_size, rec->offcpu_freq);
	size_t old = rec->reopen_old, opened = 0;
	int more = 0;
	int rc = reopen_batch(rec, 0, 0, &opened, &more);
	if (rc || rec->nfds == old) {
		reopen_abort(rec);
		return rc ? rc
		          : sp_error(-ESRCH, "no thread of pid %d to open events on",
		                     (int)rec->target);
	}
	return reopen_finish(rec, old);
}

int sp_recorder_open_exec(stackpulse_recorder *rec, pid_t tid)
{
	if (rec->reopen_size)
		reopen_abort(rec);
	size_t before = rec->nfds;
	int probe = 0;
	int rc = open_thread(rec, tid, &probe);
	for (size_t i = before; i < rec->nfds && rc == 0; i++)
		if (ioctl(rec->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0)
			rc = sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
	return rc;
}

/* The end of a re-open whose new events are fds[@p old..]: the old events
 * give way to them (see sp_recorder_reopen_step). */
static int reopen_finish(stackpulse_recorder *rec, size_t old)
{
	size_t opened = 0;
	int more = 0, rc = 0;
	for (size_t i = 0; i < old; i++)
		ioctl(rec->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	for (size_t i = old; i < rec->nfds && rc == 0; i++)
		if (ioctl(rec->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0)
			rc = sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
	/* Threads born from threads that had only the old events. */
	for (int round = 0; round < 100 && rc == 0; round++) {
		if ((rc = reopen_batch(rec, 0, 1, &opened, &more)) != 0 || opened == 0)
			break;
	}
	if (rc || (rc = set_direct(rec, old)) != 0) {
		reopen_abort(rec);
		return rc;
	}
	int lrc = sp_recorder_read_loss(rec, 0, old);
	for (size_t i = 0; i < old; i++)
		close(rec->fds[i]);
	memmove(rec->fds, rec->fds + old, (rec->nfds - old) * sizeof(*rec->fds));
	memmove(rec->fdtids, rec->fdtids + old, (rec->nfds - old) * sizeof(*rec->fdtids));
	rec->nfds -= old;
	rings_grow_end(rec);
	if (rec->reopen_size != rec->copy_size) {
		rec->copy_size = rec->reopen_size;
		rec->copy_resizes++;
		rec->copy_want = 0;
		rec->copy_need = rec->copy_seen = 0;
	}
	rec->offcpu_freq = rec->reopen_freq;
	rec->reopens++;
	rec->reopen_size = 0;
	return lrc;
}
