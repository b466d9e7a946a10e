/* Reading a live target's memory without stopping it: process_vm_readv,
 * with /proc/PID/mem as the fallback where it is refused (EPERM, ENOSYS).
 * Serves the CPython reader and the off-CPU stack reader alike. */
#ifndef SP_RECORD_TARGET_MEM_H
#define SP_RECORD_TARGET_MEM_H

#include <stdint.h>
#include <sys/types.h>

#include "python/memory.h"

typedef struct sp_target_mem {
	pid_t pid;
	/* Whose memory is read: the pid, or once that answers ESRCH (a leader
	 * that called pthread_exit leaves no memory behind its pid) via_tid,
	 * a thread of the process the caller knows alive (0: none). */
	pid_t mem_pid, via_tid;
	int mem_fd;          /* /proc/PID/mem after process_vm_readv was refused; else -1. */
	int use_mem_fd;      /* process_vm_readv was refused once. */
	uint64_t read_calls; /* process_vm_readv (or pread) calls made. */
} sp_target_mem;

void sp_target_mem_init(sp_target_mem *m, pid_t pid);
/* Closes the /proc/PID/mem descriptor, if one was opened. */
void sp_target_mem_close(sp_target_mem *m);

/* Performs the @p n (<= SP_PY_MAX_LIVE) reads of @p iov: one
 * process_vm_readv for the batch; after an element it cannot read, the
 * rest are retried, or with @p prefix left unread (only the leading
 * readable run is wanted). Sets each iov->ok. Returns 0 (individual
 * failures only leave ok == 0), -ESRCH when the process is gone, or
 * STACKPULSE_ELIMIT. */
int sp_target_mem_read(sp_target_mem *m, sp_py_iov *iov, uint32_t n, int prefix);

#endif
