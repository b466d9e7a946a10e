/* Bounded readers of /proc for the recorder: process state, thread lists,
 * names, command lines and executable mappings. /proc text is treated as
 * untrusted (paths may hold any byte but NUL and newline). */
#ifndef SP_RECORD_PROC_SCAN_H
#define SP_RECORD_PROC_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/file.h" /* sp_proc_tasks */

#define SP_PROC_MAX_MAPS    65536u /* Executable mappings read per process. */
#define SP_PROC_NAME_MAX    64     /* comm fits 16; leave room. */
#define SP_PROC_CMDLINE_MAX 4096   /* Longer command lines are cut. */

/* Reads at most @p cap - 1 bytes of a small file into @p buf (NUL-ended).
 * Returns the length or a negative errno. */
long sp_proc_read_small(const char *path, char *buf, size_t cap);

/* The state letter of /proc/PID/stat ('R', 'S', 'Z', ...) and the uid of
 * the process. Returns 0 or -ESRCH. */
int sp_proc_state(pid_t pid, char *state, uid_t *uid);

/* The parent pid of @p pid (0 for init and kernel threads). Returns 0 or
 * -ESRCH. */
int sp_proc_ppid(pid_t pid, pid_t *ppid);

/* Calls @p fn(ctx, child) for each child process of every thread of @p pid
 * (/proc/PID/task/TID/children), until @p fn returns nonzero; returns
 * that, 0, or -ESRCH when @p pid has no thread list. */
typedef int (*sp_proc_child_fn)(void *ctx, pid_t child);
int sp_proc_children(pid_t pid, sp_proc_child_fn fn, void *ctx);

/* Pids in order (sp_proc_descendants); v is sp_free'd by the owner. */
typedef struct sp_pid_list {
	pid_t *v;
	uint32_t n, cap;
} sp_pid_list;

/* Appends @p pid to @p l: 0, -ENOMEM, or STACKPULSE_ELIMIT once it holds
 * @p max pids. */
int sp_pid_list_add(sp_pid_list *l, pid_t pid, uint32_t max);

/* Appends to @p l the descendants of the pids it holds, breadth first (a
 * parent before its children, from /proc/PID/task/TID/children), each pid
 * once, until @p l holds @p max pids. A process that ends meanwhile is
 * left out with its children, and so is the calling process: a recorder
 * attached to one of its own ancestors must not stop or sample itself.
 * Returns 0, or -ENOMEM (the list so far is kept). */
int sp_proc_descendants(sp_pid_list *l, uint32_t max);

/* The pid of @p pid in its own PID namespace (the last field of the
 * "NSpid:" line of /proc/PID/status; @p pid itself when the line is absent
 * or unreadable). Never fails. */
pid_t sp_proc_nspid(pid_t pid);

/* The last pid of the "NSpid:" line of @p status (the text of a
 * /proc/PID/status, NUL-ended); exposed for tests. Returns it, or 0 when
 * the line is missing or malformed. */
pid_t sp_proc_parse_nspid(const char *status);

/* The user state a thread left the CPU with, from
 * /proc/PID/task/TID/syscall: the system call it is blocked in (-1 when it
 * is blocked outside one, e.g. in a page fault), its user stack pointer and
 * program counter. */
typedef struct sp_proc_syscall {
	long nr;
	uint64_t sp, pc;
} sp_proc_syscall;

/* Reads the user state of thread @p tid of @p pid without stopping it.
 * Returns 0, -EAGAIN when the thread is runnable (on a CPU or preempted:
 * the kernel says "running"), -ESRCH or -EACCES (another user's), or
 * STACKPULSE_EFORMAT. */
int sp_proc_thread_syscall(pid_t pid, pid_t tid, sp_proc_syscall *out);

/* Parses the text of a /proc/.../syscall file (NUL-ended); exposed for
 * tests. Same returns as sp_proc_thread_syscall. */
int sp_proc_parse_syscall(const char *text, sp_proc_syscall *out);

/* How many times thread @p tid of @p pid has been switched in: the
 * timeslices of /proc/PID/task/TID/schedstat, else (no schedstat) the
 * voluntary plus involuntary context switches of its status. A thread
 * whose count did not change did not run in between. Returns 0, -ESRCH or
 * STACKPULSE_EFORMAT. */
int sp_proc_thread_switches(pid_t pid, pid_t tid, uint64_t *count);

/* comm of thread @p tid of @p pid (pid 0: /proc/TID/comm). Empty string
 * when unreadable; never fails. */
void sp_proc_comm(pid_t pid, pid_t tid, char *buf, size_t cap);

/* Arguments separated by spaces, cut at SP_PROC_CMDLINE_MAX. Caller frees.
 * Returns 0, -ENOMEM or -ESRCH. */
int sp_proc_cmdline(pid_t pid, char **out);

/* One line of /proc/PID/maps. path points into a buffer valid only during
 * the callback. */
typedef struct sp_proc_map {
	uint64_t start, end, pgoff;
	int exec;         /* 'x' permission. */
	uint64_t inode;   /* 0 for anonymous and special mappings. */
	const char *path; /* "" when anonymous. */
} sp_proc_map;
typedef int (*sp_proc_map_fn)(void *ctx, const sp_proc_map *m);

/* Calls @p fn for every executable mapping of @p pid; a nonzero return
 * stops the walk and is returned. */
int sp_proc_maps(pid_t pid, sp_proc_map_fn fn, void *ctx);

/* Parses one maps line (without the newline); exposed for tests. Returns 0
 * or STACKPULSE_EFORMAT. */
int sp_proc_parse_map_line(char *line, sp_proc_map *m);

#endif
