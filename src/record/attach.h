/* Stopping and resuming a running target (ptrace SEIZE + INTERRUPT on
 * every thread) and starting a new one held before exec. The ptrace stop
 * has one property SIGSTOP lacks: if the recorder dies, the kernel detaches
 * and the target runs on. */
#ifndef SP_RECORD_ATTACH_H
#define SP_RECORD_ATTACH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sp_stopped_thread {
	pid_t tid;
	int sig; /* Signal to re-deliver at detach (0: none). */
} sp_stopped_thread;

typedef struct sp_stopped {
	pid_t pid;
	sp_stopped_thread *t; /* Threads held in a ptrace stop, sorted by tid. */
	size_t n, cap;
	int own_child; /* The target is the caller's child: never reap it. */
} sp_stopped;

/* Checks that @p pid exists and is not a zombie (precise -ESRCH). */
int sp_attach_check_pid(pid_t pid);

/* Blocks every blockable signal so the stop window cannot be cut short by
 * a handler; *old receives the previous mask. */
void sp_attach_block_signals(sigset_t *old);
void sp_attach_restore_signals(const sigset_t *old);

/* Stops every thread of @p pid, rescanning until no thread appears. Each
 * pass interrupts all new threads at once and waits for them together
 * (one 5 s deadline per pass). With @p max_procs above 1, then the threads
 * of its descendants too, up to @p max_procs processes in all; one that
 * cannot be stopped is left running. On failure no thread is left
 * stopped. Returns 0, -ESRCH (exited), -EPERM (with the reason) or another
 * negative code. */
int sp_attach_stop(pid_t pid, uint32_t max_procs, sp_stopped *s);

/* PTRACE_SEIZE of thread @p tid of @p pid with ptrace @p options: 0
 * seized, 1 the thread is gone (skip it), < 0 error (the target exited, or
 * a refusal with its reason). */
int sp_attach_seize(pid_t pid, pid_t tid, unsigned long options);

/* PTRACE_DETACH of a stopped tracee, delivering @p sig (0: none). */
long sp_attach_detach(pid_t tid, int sig);
/* Detaches from every stopped thread, re-delivering pending signals.
 * Safe to call twice and after failures. */
void sp_attach_resume(sp_stopped *s);

/* Forks a child that waits on a pipe before exec'ing @p argv. Returns 0
 * with *pid and *go set. The child restores @p child_mask before exec. */
int sp_spawn_prepare(char *const argv[], const sigset_t *child_mask, pid_t *pid, int *go,
                     int *status_fd);
/* Releases the child; returns 0 once exec succeeded or -errno of the
 * failed exec (the child is then reaped). Closes both fds. */
int sp_spawn_release(pid_t pid, int go, int status_fd, const char *what);
/* Aborts a prepared child: it exits without exec'ing and is reaped. */
void sp_spawn_abort(pid_t pid, int go, int status_fd);

#endif
