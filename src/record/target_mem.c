/* Target memory reads (see target_mem.h). */
#include "record/target_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "record/proc_scan.h"

void sp_target_mem_init(sp_target_mem *m, pid_t pid)
{
	m->pid = pid;
	m->mem_pid = pid;
	m->via_tid = 0;
	m->mem_fd = -1;
	m->use_mem_fd = 0;
	m->read_calls = 0;
}

void sp_target_mem_close(sp_target_mem *m)
{
	if (m->mem_fd >= 0)
		close(m->mem_fd);
	m->mem_fd = -1;
}

static int read_memfd(sp_target_mem *m, sp_py_iov *iov, uint32_t n, int prefix)
{
	if (m->mem_fd < 0) {
		/* The kernel's own file of the process, not a path in its root:
		 * nothing the target controls (no FIFO, no planted link). */
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/mem", (int)m->pid, (int)m->mem_pid);
		m->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (m->mem_fd < 0)
			return -errno;
	}
	for (uint32_t i = 0; i < n; i++) {
		m->read_calls++;
		ssize_t r = pread(m->mem_fd, iov[i].buf, iov[i].len, (off_t)iov[i].addr);
		iov[i].ok = r == (ssize_t)iov[i].len;
		if (!iov[i].ok && prefix) {
			for (uint32_t k = i + 1; k < n; k++)
				iov[k].ok = 0;
			break;
		}
	}
	return 0;
}

/* Points the reader at a live thread other than the leader, when the
 * leader left with pthread_exit before any thread was named to read
 * through (its own memory is gone; its threads share the process's). */
static int live_thread(sp_target_mem *m)
{
	pid_t *tids;
	size_t n;
	if (sp_proc_tasks(m->pid, &tids, &n) != 0)
		return -ESRCH;
	int rc = -ESRCH;
	for (size_t i = 0; i < n && rc != 0; i++)
		if (tids[i] != m->pid) {
			m->mem_pid = tids[i];
			rc = 0;
		}
	sp_free(tids);
	return rc;
}

int sp_target_mem_read(sp_target_mem *m, sp_py_iov *iov, uint32_t n, int prefix)
{
	if (m->use_mem_fd)
		return read_memfd(m, iov, n, prefix);
	struct iovec local[SP_PY_MAX_LIVE], remote[SP_PY_MAX_LIVE];
	if (n > SP_PY_MAX_LIVE)
		return STACKPULSE_ELIMIT;
	uint32_t first = 0;
	while (first < n) {
		uint32_t cnt = n - first;
		for (uint32_t i = 0; i < cnt; i++) {
			local[i].iov_base = iov[first + i].buf;
			local[i].iov_len = iov[first + i].len;
			remote[i].iov_base = (void *)(uintptr_t)iov[first + i].addr;
			remote[i].iov_len = iov[first + i].len;
		}
		m->read_calls++;
		ssize_t r = process_vm_readv(m->mem_pid, local, cnt, remote, cnt, 0);
		if (r < 0) {
			int e = errno;
			if (e == ESRCH && m->via_tid > 0 && m->via_tid != m->mem_pid) {
				/* The thread whose memory we read has ended: go on
				 * through one that shares it. */
				m->mem_pid = m->via_tid;
				continue;
			}
			if (e == ESRCH && m->via_tid <= 0 && m->mem_pid == m->pid &&
			    live_thread(m) == 0)
				continue; /* a leader gone before us: through a thread */
			if (e == ESRCH)
				return -ESRCH;
			if (e == EPERM || e == ENOSYS) {
				m->use_mem_fd = 1;
				return read_memfd(m, iov + first, n - first, prefix);
			}
			r = 0; /* EFAULT: the first element is unreadable. */
		}
		size_t done = (size_t)r;
		uint32_t i = 0;
		for (; i < cnt && done >= iov[first + i].len; i++) {
			iov[first + i].ok = 1;
			done -= iov[first + i].len;
		}
		if (i < cnt)
			iov[first + i].ok = 0; /* Skip the element that failed. */
		first += i + 1;
		if (i < cnt && prefix) {
			for (uint32_t k = first; k < n; k++)
				iov[k].ok = 0;
			break;
		}
	}
	return 0;
}
