/* Whether the recorded processes still live: the target through its pidfd
 * (readable at exit, even before it is reaped), else through /proc. */
#include <sys/epoll.h>
#include <unistd.h>

#include "common/alloc.h"
#include "record/proc_scan.h"
#include "record/recorder.h"

/* 1 when @p pid is alive. A zombie leader whose other threads still run
 * (it called pthread_exit) is alive: only the thread has ended. */
int sp_recorder_pid_alive(pid_t pid)
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

int sp_recorder_target_alive(stackpulse_recorder *rec)
{
	if (rec->target_gone)
		return 0;
	if (rec->pidfd >= 0) {
		/* The pidfd turns readable at exit, even before reaping. */
		struct epoll_event ev;
		int ep = epoll_create1(EPOLL_CLOEXEC);
		int readable = 0;
		if (ep >= 0) {
			struct epoll_event in = { .events = EPOLLIN };
			if (epoll_ctl(ep, EPOLL_CTL_ADD, rec->pidfd, &in) == 0)
				readable = epoll_wait(ep, &ev, 1, 0) > 0;
			close(ep);
		}
		if (!readable)
			return 1;
	} else if (sp_recorder_pid_alive(rec->target)) {
		return 1;
	}
	rec->target_gone = 1;
	if (rec->pidfd >= 0)
		epoll_ctl(rec->epfd, EPOLL_CTL_DEL, rec->pidfd, NULL);
	return 0;
}

int sp_recorder_any_alive(stackpulse_recorder *rec)
{
	if (sp_recorder_target_alive(rec))
		return 1;
	if (!rec->opts.children)
		return 0;
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		sp_process *p = rec->pt.procs[i];
		if (!p->exited && p->pid != rec->target && sp_recorder_pid_alive(p->pid))
			return 1;
	}
	return 0;
}
