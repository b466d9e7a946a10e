/* Followed processes and threads: pid/tid to spool indexes, each process's
 * executable mappings (for pc -> module + file offset) and unwind space,
 * and the fork / exec / exit / pid-reuse life cycle. */
#ifndef SP_RECORD_PROCESS_TABLE_H
#define SP_RECORD_PROCESS_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/spool_writer.h"
#include "stackpulse.h"
#include "unwind/unwind.h"

#define SP_NONE UINT32_MAX

/* Executable mappings kept per process. Perf reports no munmap, so a
 * target that maps code at ever new addresses would grow its table (and
 * the recorder's time per new mapping, a sorted insert) without end:
 * mappings beyond this are dropped and counted (sp_process.maps_dropped),
 * and recording goes on with the ones kept. */
#define SP_PTABLE_MAX_MAPS (1u << 14)
/* Distinct mapped files (path, inode) remembered over all processes;
 * mappings of further files are dropped and counted the same way. */
#define SP_PTABLE_MAX_FILES (1u << 20)

typedef struct sp_mapping {
	uint64_t start, end, pgoff;
	uint32_t module; /* Spool module index, or SP_NONE for anonymous code. */
} sp_mapping;

typedef struct sp_process {
	pid_t pid;
	uint32_t index; /* Spool process index. */
	int exited;
	sp_unwind_space *space; /* Owned. */
	sp_mapping *maps;       /* Sorted by start, non-overlapping. */
	size_t nmaps, cap;
	uint32_t live_threads; /* Threads seen and not yet exited. */
	int leader_exited;     /* The pid == tid thread exited (pthread_exit). */
	struct sp_python *py;  /* CPython reader, or NULL. Owned. */
	int py_probed;         /* 1 once probed for the current image. */
	int py_unreadable;     /* A probe found a CPython it cannot read (counted once). */
	uint64_t py_probe_ns;  /* CLOCK_MONOTONIC time of that probe (it saw the
	                        * image of that time: an exec record older than
	                        * it, drained later, keeps its result). */
	uint64_t py_serial;    /* Tells readers apart across execs (recorder.h). */
	uint64_t first_ns;     /* First seen: its FORK, a scan or its first record. */
	int unscanned;         /* First seen in its own records, /proc unreadable. */
	int execed;            /* An exec was seen. */
	uint64_t maps_dropped; /* Mappings not kept (SP_PTABLE_MAX_MAPS). */
	int unfollowed;        /* No longer followed after an error of its own
	                        * (recorder.h: sp_recorder_unfollow). */
} sp_process;

typedef struct sp_thread {
	pid_t tid;
	uint32_t process; /* Slot in the process array (not the spool index). */
	uint32_t index;   /* Spool thread index. */
	int exited;
	/* Off-CPU tracking (offcpu.c): the switch-out under way and the stack
	 * of the latest context-switch sample. */
	uint8_t off_state;    /* SP_OFF_UNKNOWN, SP_OFF_ON_CPU or SP_OFF_OFF_CPU. */
	uint8_t off_preempt;  /* The switch-out left it runnable. */
	uint8_t off_has_cs;   /* off_cs_* hold a sample not yet paired. */
	uint64_t off_start;   /* Switch-out time. */
	uint32_t off_stack;   /* Its stack (0: none). */
	uint64_t off_cs_time; /* Latest context-switch sample. */
	uint32_t off_cs_stack;
	/* Unprivileged method (offcpu_unpriv.c): the stack read from the
	 * blocked thread and the CLOCK_MONOTONIC window of that read, and the
	 * reads tried for the current interval; the latest switch-in, and the
	 * latest on-CPU sample with the CPU time run since (preempted
	 * intervals). */
	uint8_t off_rd_tries;
	uint32_t off_rd_stack; /* 0: none pending. */
	uint64_t off_rd_t0, off_rd_t1;
	uint64_t off_in_time;
	uint64_t off_run_time;
	uint64_t off_run_cpu;
	uint32_t off_run_stack; /* 0: none since the thread last blocked. */
	/* Intervals without a stack sample, per state (blocked, preempted),
	 * waiting for the next row of that state to go into (offcpu.c). */
	struct sp_off_pending {
		uint64_t count, ns;
		uint64_t last_start, last_ns; /* The latest of them. */
	} off_pending[2];
} sp_thread;

/* Integer-keyed open-addressing map: key (pid/tid) -> slot. */
typedef struct sp_imap {
	int32_t *keys; /* 0 means empty (pids are > 0). */
	uint32_t *vals;
	size_t cap, used;
} sp_imap;

typedef struct sp_module_cache sp_module_cache;

typedef struct sp_ptable {
	sp_writer *w;
	sp_unwinder *u;
	sp_process **procs; /* Every process ever seen, in spool order. */
	size_t nprocs, cap_procs;
	sp_thread *threads;
	size_t nthreads, cap_threads;
	sp_imap by_pid;           /* Live pid -> procs slot. */
	sp_imap by_tid;           /* Live tid -> threads slot. */
	sp_module_cache *modules; /* In creation order. */
	size_t nmodcache, capmodcache;
	uint32_t *modorder; /* modules indexes sorted by (hash, inode, path). */
	uint32_t *modfirst; /* Spool module -> 1 + first modules index, 0: none. */
	size_t capmodfirst;
	uint64_t maps_dropped; /* Mappings not kept, over all processes. */
} sp_ptable;

void sp_ptable_init(sp_ptable *t, sp_writer *w, sp_unwinder *u);

/* Path and build-id recorded for spool module @p module: 0 or
 * STACKPULSE_ENOTFOUND. */
int sp_ptable_module_info(const sp_ptable *t, uint32_t module, const char **path,
                          const uint8_t **build_id, uint32_t *build_id_len);
void sp_ptable_free(sp_ptable *t);

/* The live process with @p pid, or NULL. */
sp_process *sp_ptable_find(sp_ptable *t, pid_t pid);
sp_thread *sp_ptable_find_thread(sp_ptable *t, pid_t tid);
uint32_t sp_ptable_slot(const sp_ptable *t, const sp_process *p);

/* Adds a process found in /proc (attach, or a pid first seen in a
 * sample): name, command line, threads and executable mappings with their
 * build-ids. @p parent is a process slot or SP_NONE. */
int sp_ptable_scan(sp_ptable *t, pid_t pid, uint32_t parent, uint64_t time_ns, sp_process **out);
/* Adds an empty process (spawn: mappings arrive as MMAP2 after exec). */
int sp_ptable_add(sp_ptable *t, pid_t pid, uint32_t parent, uint64_t time_ns, const char *name,
                  const char *cmdline, sp_process **out);
/* PERF_RECORD_FORK of a new process: copies the parent's mappings and
 * unwind space. A live pid first seen at or after the fork's time is that
 * child, met in its own records first: it is linked to the parent (and
 * inherits its mappings when it was not scanned and did not exec). An
 * older live pid (reuse, its EXIT lost) is ended and a new process starts. */
int sp_ptable_fork(sp_ptable *t, pid_t ppid, pid_t pid, pid_t tid, uint64_t time_ns);
/* An exec (COMM with the exec flag): mappings dropped, new name/cmdline. */
int sp_ptable_exec(sp_ptable *t, pid_t pid, pid_t tid, const char *comm, uint64_t time_ns);
/* PERF_RECORD_EXIT of a thread; pid == tid ends the process. */
int sp_ptable_exit(sp_ptable *t, pid_t pid, pid_t tid, uint64_t time_ns);
/* The thread @p tid of @p p, created on first sight with @p name (NULL:
 * read from /proc). */
int sp_ptable_thread(sp_ptable *t, sp_process *p, pid_t tid, uint64_t time_ns, const char *name,
                     sp_thread **out);
/* A COMM without exec: thread renamed. */
int sp_ptable_rename(sp_ptable *t, sp_process *p, pid_t tid, const char *name, uint64_t time_ns);
/* An executable mapping (MMAP2 or /proc). build_id may be NULL: it is then
 * read from the file as the target sees it. Beyond SP_PTABLE_MAX_MAPS
 * mappings in @p p (or SP_PTABLE_MAX_FILES files in all) the mapping is
 * dropped and counted, pcs in its range become unknown frames, and 0 is
 * returned: one process cannot end the recording of the others. */
int sp_ptable_mmap(sp_ptable *t, sp_process *p, uint64_t start, uint64_t len, uint64_t pgoff,
                   const char *path, const uint8_t *build_id, uint32_t build_id_len, uint64_t inode,
                   uint64_t time_ns);

/* The raw frame for user address @p pc of @p p. */
void sp_ptable_frame(const sp_process *p, uint64_t pc, struct stackpulse_raw_frame *f);

#endif
