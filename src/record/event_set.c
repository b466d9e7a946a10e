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
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "record/proc_scan.h"
#include "record/recorder.h"

/* Ring bytes per CPU: the caller's ring_kb; as root (CAP_IPC_LOCK lifts
 * perf_event_mlock_kb) the load-scaled budget of sp_ring_budget_bytes;
 * else our share of perf_event_mlock_kb (which the kernel grants per CPU)
 * minus the control page. sp_ring_map halves it while the kernel refuses. */
static size_t ring_bytes(const stackpulse_recorder *rec)
{
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
		return (size_t)sp_ring_budget_bytes(rec->opts.frequency, rec_bytes, rec->ncpu, ram);
	}
	long kb = sp_perf_sysctl("perf_event_mlock_kb", 516);
	size_t bytes = kb > 0 ? (size_t)kb * 1024 : 516 * 1024;
	return bytes > page ? bytes - page : page;
}

int sp_recorder_open_rings(stackpulse_recorder *rec)
{
	size_t bytes = ring_bytes(rec);
	int opened = 0;
	for (int c = 0; c < rec->ncpu; c++) {
		int fd = sp_perf_open_ring_owner(c, (uint32_t)(bytes / 4));
		if (fd == -ENODEV || fd == -EINVAL)
			continue; /* Offline or absent CPU. */
		if (fd < 0)
			return fd;
		int rc = sp_ring_map(&rec->rings[c], fd, c, bytes);
		if (rc) {
			sp_ring_unmap(&rec->rings[c]);
			return rc;
		}
		rec->ring_bytes += rec->rings[c].size;
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)c };
		if (epoll_ctl(rec->epfd, EPOLL_CTL_ADD, rec->rings[c].fd, &ev) != 0)
			return sp_error(-errno, "epoll_ctl failed");
		opened++;
	}
	return opened ? 0 : sp_error(-ENODEV, "no CPU accepted a perf ring");
}

static int push_fd(stackpulse_recorder *rec, int fd, pid_t tid)
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
	rec->ids[pos] = (sp_event_id){ id, tid, rec->copy_resizes + (rec->reopen_size ? 1u : 0u) };
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

/* Opens the sampling events of thread @p tid on every CPU with a ring and
 * redirects them into it. A thread that exited meanwhile is skipped. */
static int open_thread(stackpulse_recorder *rec, pid_t tid, int *probe_fd)
{
	int any = 0;
	for (int c = 0; c < rec->ncpu; c++) {
		if (rec->rings[c].fd < 0)
			continue;
		int fd;
		if (*probe_fd < 0 && rec->nfds == 0) {
			sp_perf_config cfg = { (int)rec->opts.perf_event, (int)rec->opts.kernel,
				               rec->opts.frequency,       rec->opts.stack_size,
				               sp_unwind_regs_mask(),     rec->spawned };
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
		int rc = push_fd(rec, fd, tid);
		if (rc)
			return rc;
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, rec->rings[c].fd) != 0)
			return sp_error(-errno, "PERF_EVENT_IOC_SET_OUTPUT on cpu %d failed", c);
		any = 1;
	}
	/* During a re-open the thread's new events are not enabled yet: its
	 * samples still come from the old ones (reopen_step sets direct). */
	return any && !rec->reopen_size ? add_direct(rec, tid) : 0;
}

/* Opens events on every thread of the target; with @p rescan, repeats
 * until a pass finds no new thread (live attach). */
int sp_recorder_open_all_threads(stackpulse_recorder *rec, int rescan)
{
	int probe = -1;
	for (int round = 0; round < 100; round++) {
		pid_t *tids;
		size_t n;
		int rc = sp_proc_tasks(rec->target, &tids, &n);
		if (rc)
			return rc == -ESRCH ? sp_error(-ESRCH, "pid %d exited during attach",
			                               (int)rec->target)
			                    : rc;
		int added = 0;
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (has_direct(rec, tids[i]))
				continue;
			rc = open_thread(rec, tids[i], &probe);
			added = 1;
		}
		sp_free(tids);
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
 * opts.children), their children not yet known from a FORK record
 * (/proc/PID/task/TID/children). */
static int followed_pids(stackpulse_recorder *rec, int children, pid_t **out, size_t *n)
{
	size_t cap = rec->pt.nprocs + 16, cnt = 0;
	*out = NULL;
	*n = 0;
	pid_t *v = sp_calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		const sp_process *p = rec->pt.procs[i];
		if (!p->exited && (rec->opts.children || p->pid == rec->target))
			v[cnt++] = p->pid;
	}
	for (size_t i = 0; children && rec->opts.children && i < cnt && cnt < 4096; i++) {
		pid_t *tids;
		size_t nt;
		if (sp_proc_tasks(v[i], &tids, &nt) != 0)
			continue;
		for (size_t k = 0; k < nt; k++) {
			char path[96], buf[1024];
			snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)v[i],
			         (int)tids[k]);
			if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
				continue;
			for (char *q = buf, *end; *q; q = end) {
				long c = strtol(q, &end, 10);
				if (end == q)
					break;
				int known = 0;
				for (size_t j = 0; j < cnt && !known; j++)
					known = v[j] == (pid_t)c;
				if (known || c <= 0)
					continue;
				if (cnt == cap) {
					pid_t *nv = sp_realloc_array(v, cap * 2, sizeof(*nv));
					if (!nv)
						break;
					v = nv;
					cap *= 2;
				}
				v[cnt++] = (pid_t)c;
			}
		}
		sp_free(tids);
	}
	*out = v;
	*n = cnt;
	return 0;
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

/* Opens new-size events on up to @p max threads of the followed processes
 * that have none yet (@p max 0: no limit), enabling them when @p enable.
 * Sets *opened to the number of threads given events. */
static int reopen_batch(stackpulse_recorder *rec, size_t max, int enable, size_t *opened)
{
	pid_t *pids;
	size_t np;
	*opened = 0;
	/* Unknown children only in the final listings (enable): once per
	 * re-open rather than once per step. */
	int rc = followed_pids(rec, enable, &pids, &np), probe = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < np && rc == 0 && (!max || *opened < max); i++) {
		pid_t *tids;
		size_t nt;
		if (sp_proc_tasks(pids[i], &tids, &nt) != 0)
			continue;
		for (size_t k = 0; k < nt && rc == 0 && (!max || *opened < max); k++) {
			if (reopen_has(rec, tids[k]))
				continue;
			size_t before = rec->nfds;
			rc = open_thread(rec, tids[k], &probe);
			for (size_t j = before; j < rec->nfds && rc == 0 && enable; j++)
				if (ioctl(rec->fds[j], PERF_EVENT_IOC_ENABLE, 0) != 0)
					rc = sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
			*opened += rec->nfds > before;
		}
		sp_free(tids);
	}
	sp_free(pids);
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
}

/* One step of re-opening every sampling event with another stack copy
 * size, run from the drain so that each step is short (a recorder that
 * competes with many busy threads loses its CPU for long after a long
 * burst, and the rings fill meanwhile). Steps: new events, disabled, on
 * REOPEN_BATCH threads of the followed processes per call (listed from
 * /proc); once every listed thread has them, the old events are disabled
 * (with their inherited copies), the new ones enabled, threads born
 * meanwhile get events, and the old events are read (lost counts) and
 * closed. Between the disable and the enable (a few hundred ioctls)
 * nothing is sampled. */
#define REOPEN_BATCH 16

int sp_recorder_reopen_step(stackpulse_recorder *rec)
{
	if (!rec->reopen_size) {
		if (!rec->copy_want || rec->copy_want == rec->copy_size ||
		    rec->copy_resizes >= SP_COPY_MAX_RESIZE || rec->copy_stop)
			return 0;
		rec->reopen_size = rec->copy_want;
		rec->reopen_old = rec->nfds;
		rec->setup.attr.sample_stack_user = rec->reopen_size;
		rec->setup.attr.enable_on_exec = 0;
		rec->setup.attr.disabled = 1;
	}
	size_t old = rec->reopen_old, opened = 0;
	int rc = reopen_batch(rec, REOPEN_BATCH, 0, &opened);
	if (rc == 0 && opened == REOPEN_BATCH)
		return 0; /* More threads at the next call. */
	if (rc || rec->nfds == old) {
		reopen_abort(rec);
		return rc;
	}
	for (size_t i = 0; i < old; i++)
		ioctl(rec->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	for (size_t i = old; i < rec->nfds && rc == 0; i++)
		if (ioctl(rec->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0)
			rc = sp_error(-errno, "PERF_EVENT_IOC_ENABLE failed");
	/* Threads born from threads that had only the old events. */
	for (int round = 0; round < 100 && rc == 0; round++) {
		if ((rc = reopen_batch(rec, 0, 1, &opened)) != 0 || opened == 0)
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
	rec->copy_size = rec->reopen_size;
	rec->reopen_size = 0;
	rec->copy_resizes++;
	rec->copy_want = 0;
	rec->copy_need = rec->copy_seen = 0;
	return lrc;
}
