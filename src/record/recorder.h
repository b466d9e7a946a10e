/* Internal state of a recording, shared by recorder.c (public API),
 * loop.c (event loop), event_set.c (rings and perf events), sample.c
 * (perf records -> spool) and the files that serve them. */
#ifndef SP_RECORD_RECORDER_H
#define SP_RECORD_RECORDER_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "format/spool_writer.h"
#include "io/file.h"
#include "record/perf_events.h"
#include "record/proc_scan.h"
#include "record/process_table.h"
#include "record/python.h"
#include "record/ring.h"
#include "stackpulse.h"
#include "unwind/unwind.h"

#define SP_MAX_USER_FRAMES   1024       /* Deeper user stacks are cut (marker). */
#define SP_MAX_KERNEL_FRAMES 512        /* Above perf_event_max_stack's limit. */
#define SP_MAX_KADDRS        (1u << 20) /* Distinct kernel addresses remembered. */
#define SP_MAX_PY_FRAMES     256        /* Python frames read per sample. */

#define SP_EARLY_PY 64 /* Python stacks read ahead of the ordered drain. */
/* Processes of a target's tree (itself and its descendants) listed at
 * attach and at a re-open of the events. */
#define SP_TREE_MAX 4096u

/* Before a CPython is found, the wait polls every millisecond for this
 * long after the start of a target that looks like one (py_wakeups) and
 * after an exec of an image named like one (python*, *.py): the rings wake
 * the recorder only at their watermark, so its first samples would wait up
 * to WAIT_SLICE_MS. Other targets are not polled (it costs them CPU). */
#define SP_PY_WATCH_NS 250000000ull

/* A Python stack read as soon as its sample showed up in a ring. */
typedef struct sp_early_py {
	pid_t tid; /* 0: a free slot. */
	uint64_t time;
	uint64_t py_serial; /* Of the reader that read it (sp_process.py_serial). */
	int rc;
	int truncated;
	uint32_t n;
	struct sp_py_frame *frames; /* SP_MAX_PY_FRAMES. */
} sp_early_py;

/* The fields of a PERF_RECORD_SAMPLE (pointers into the record). */
typedef struct sp_sample_fields {
	uint64_t id, time, nr, dyn, sp;
	pid_t pid, tid;
	uint32_t cpu;
	const uint8_t *chain; /* nr kernel callchain entries. */
	const uint8_t *stack; /* dyn bytes of user stack copy, or NULL. */
	uint64_t ssize;       /* Copy size the event asked for (sample_stack_user). */
	sp_regs regs;
} sp_sample_fields;

/* Samples the kernel could not write for one thread's events (read with
 * PERF_FORMAT_LOST; inherited threads count toward the thread whose events
 * they inherited). */
typedef struct sp_thread_loss {
	pid_t tid;
	uint32_t thread; /* Spool thread index; SP_NONE until known. */
	uint64_t lost;
	uint64_t live;    /* Counted by its current events, not yet in lost
	                   * (sp_recorder_read_live_loss; rotation only). */
	uint64_t written; /* Of lost + live: in the STATS of earlier windows. */
} sp_thread_loss;

/* ring_state bits: the ring was found half full or losing records since
 * the last re-open; its spare is the larger ring a re-open under way moves
 * the CPU's events into. */
#define SP_RING_BEHIND  1u
#define SP_RING_GROWING 2u

/* Stack copies sized to need (sample.c learns, event_set.c re-opens). */
#define SP_COPY_MIN        1024u /* Smallest stack copy asked for. */
#define SP_COPY_LEARN      64u   /* Complete unwinds seen before shrinking. */
#define SP_COPY_MAX_RESIZE 64u   /* Re-opens per recording. */

/* Event id (PERF_EVENT_IOC_ID) -> thread it was opened on. */
typedef struct sp_event_id {
	uint64_t id;
	pid_t tid;
	uint32_t gen; /* reopens when the events take over (stack copy sizing, ring growth). */
	int kind;     /* SP_EVENT_SAMPLING or SP_EVENT_SWITCH. */
} sp_event_id;

enum {
	SP_EVENT_SAMPLING = 0, /* cycles / cpu-clock. */
	SP_EVENT_SWITCH = 1,   /* Context switches (off-CPU). */
};

/* In a switch storm, the context-switch samples (the stacks of off-CPU
 * intervals) per second that the kernel aims at per thread and CPU
 * (attr.freq), and what makes a storm: switch-outs per second of all the
 * followed threads together, counted over windows (docs/recording.md). */
#define SP_OFFCPU_STACK_HZ   1000u
#define SP_OFFCPU_STORM_RATE 10000u
#define SP_OFFCPU_STORM_NS   10000000ull

/* Context switches per second and CPU the rings are sized for when
 * off-CPU intervals are recorded (as root; docs/recording.md). */
#define SP_OFFCPU_RING_RATE 2000u

/* Unprivileged off-CPU method: the wait polls the rings this often (ms),
 * or this often once they stayed empty for SP_OFFCPU_BUSY_NS, and a
 * thread's stack is read once it has been off CPU this long (ns). */
#define SP_OFFCPU_POLL_MS       1
#define SP_OFFCPU_IDLE_POLL_MS  5
#define SP_OFFCPU_BUSY_NS       100000000ull
#define SP_OFFCPU_READ_AFTER_NS 1000000ull

/* Off-CPU state of a thread (sp_thread.off_state). */
enum {
	SP_OFF_UNKNOWN = 0, /* No switch seen yet. */
	SP_OFF_ON_CPU = 1,  /* Last seen switching in. */
	SP_OFF_OFF_CPU = 2, /* Last seen switching out. */
};

/* One past the last stackpulse_stat key the recorder knows. */
#define SP_RECORDER_STAT_COUNT ((int)STACKPULSE_STAT_PYTHON_PAUSED + 1)

struct stackpulse_recorder {
	stackpulse_recorder_opts opts;
	char *cache_dir; /* Owned copy of opts.cache_dir. */
	pid_t target;    /* The attached or spawned process. */
	int spawned;
	int pidfd;         /* Of the target; -1 when unavailable. */
	int target_gone;   /* pidfd reported exit. */
	sp_file_sink sink; /* Spool file. */
	sp_writer *w;
	sp_unwinder *u;
	sp_ptable pt;
	sp_perf_setup setup;

	int ncpu;
	int epfd;
	/* 2 x ncpu: [c] is CPU c's ring (fd -1 when the CPU is absent);
	 * [ncpu + c] its spare: the larger ring a re-open moves CPU c's
	 * events into, then the ring they left until it is drained (fd -1
	 * when unused). */
	sp_ring *rings;
	uint64_t ring_cap;         /* Most bytes a CPU's ring may grow to; 0: no growth. */
	unsigned char *ring_state; /* Per CPU: SP_RING_BEHIND, SP_RING_GROWING. */
	int *fds;                  /* Sampling events (threads x CPUs). */
	size_t nfds, capfds;
	sp_event_id *ids; /* Sorted by id after setup; grows on rescans. */
	size_t nids, capids;
	pid_t *direct; /* Threads with events of their own, sorted. */
	size_t ndirect, capdirect;

	pid_t *fdtids; /* Thread of each fds[] entry. */

	uint32_t copy_size;    /* sample_stack_user of the current events. */
	uint32_t copy_need;    /* Most stack bytes a complete unwind read since then. */
	uint32_t copy_seen;    /* Complete unwinds since the last re-open. */
	uint32_t copy_want;    /* Size to re-open with; 0: keep. */
	uint32_t copy_resizes; /* Re-opens that changed the copy size. */
	uint32_t reopens;      /* Re-opens done (copy size or ring growth). */
	int copy_stop;         /* Sizing gave up (a re-open was refused). */
	uint32_t reopen_size;  /* Copy size of a re-open under way; 0: none. */
	int kptr_zeroed;
	size_t reopen_old;     /* fds[0..reopen_old) are the old events then. */
	uint64_t copy_cut;     /* Unwinds cut by the end of a shrunk copy. */
	uint64_t ring_bytes;   /* Data bytes of all rings. */
	sp_thread_loss *tloss; /* Per directly opened thread. */
	size_t ntloss, captloss;

	uint64_t *kaddrs; /* Open-addressing set of kernel pcs; 0 = empty. */
	size_t kcap, kused;

	/* Off-CPU intervals (offcpu.c): enum stackpulse_offcpu_method used,
	 * 0 when off or refused; counters for stats and the spool. */
	int offcpu;
	int offcpu_probed;  /* The first switch event was tried. */
	uint32_t offcpu_hz; /* Stack samples per second in a storm (attr.sample_freq). */
	/* Switch events sample every switch-out until the followed threads
	 * switch out more than SP_OFFCPU_STORM_RATE times a second (storm,
	 * counted per SP_OFFCPU_STORM_NS window); a re-open then samples at
	 * offcpu_hz (offcpu_freq; reopen_freq for the re-open under way). */
	int offcpu_storm, offcpu_freq, reopen_freq;
	uint64_t offcpu_win_start, offcpu_win_outs;
	uint8_t *offcpu_copy; /* Unprivileged method: stack copy scratch (opts.stack_size). */
	uint64_t offcpu_busy_until_ns; /* Poll every SP_OFFCPU_POLL_MS until then. */
	uint64_t offcpu_intervals, offcpu_no_stack, offcpu_dropped, offcpu_merged;

	uint64_t lost;
	uint64_t truncated;
	uint64_t dropped;       /* Samples not written: of a process not
	                         * followed, duplicates, and failed ones. */
	uint64_t corrupt;       /* Malformed records skipped. */
	uint64_t failed;        /* Records not applied after an error of their
	                         * own (sp_recorder_record; a table limit). */
	uint32_t unfollowed;    /* Processes no longer followed after an error
	                         * of their own (sp_recorder_unfollow). */
	pid_t unfollowed_pid;   /* The first of them, */
	int unfollowed_error;   /* and its error. */
	sp_pid_list refused;    /* Processes of the tree whose events were
	                         * refused at attach (scan_tree gives them up). */
	uint64_t last_flush_ns; /* CLOCK_MONOTONIC of the last chunk flush. */

	uint64_t python_samples;      /* Samples that carry Python frames. */
	int python_found;             /* A CPython target was found. */
	int py_wakeups;               /* Sampling events wake the reader at every
	                                   * sample (a CPython target is expected). */
	uint32_t python_unreadable;   /* CPython processes the reader refused. */
	char python_note[320];        /* Why the first of them was refused. */
	int realtime;                 /* SCHED_FIFO in wait/consume: 1 yes, -1 refused. */
	int error;                    /* First fatal error of a drain (sticky:
	                               * sp_recorder_fatal), */
	char error_note[256];         /* and its detail. */
	sp_python_stats python_stats; /* Python reading costs, summed over processes. */
	struct sp_py_frame *pyframes; /* Scratch: Python frames. */
	sp_early_py *early;           /* SP_EARLY_PY slots once Python is found. */
	uint64_t py_serials;          /* Last sp_process.py_serial handed out. */
	uint64_t python_early;        /* Python reads taken from early slots. */
	uint64_t py_busy_until_ns;    /* Poll fast until then (CLOCK_MONOTONIC). */
	uint64_t py_watch_until_ns;   /* See SP_PY_WATCH_NS. */
	/* opts.python_pause (pause.c): the tracer thread holding the target's
	 * threads at their samples, NULL when not paused. While it runs, mu
	 * guards the recorder: the tracer reads the Python stacks of its
	 * stopped threads from the rings and the process table, as the
	 * caller's thread drains them (sp_recorder_lock). */
	struct sp_pause *pause;
	struct sp_exec_note *execs; /* Execs whose records the exec removed. */
	uint32_t nexecs, capexecs;
	pthread_mutex_t mu;
	uint64_t pauses;                  /* Samples a thread was held for (pause.c). */
	uint64_t pause_ns;                /* Time they were held. */
	int paused;                       /* Pausing started (stats). */
	char pause_note[320];             /* Why AUTO pausing was refused. */
	struct sp_py_merge_item *pymerge; /* Scratch: merged stack. */
	uint64_t *pcs;                    /* Scratch: unwound pcs. */
	uint32_t *frames;                 /* Scratch: frame ids of one stack. */
	char kernel_note[320];

	/* Self-contained spools: (module, offset) of every distinct native
	 * frame, for the symbol tables embedded at finish. */
	struct sp_native_frame *native;
	size_t nnative, capnative;
	uint32_t frames_seen; /* Frame ids below this were already handed out. */
	uint32_t embed_fds;   /* Descriptors held in embed_files. */
	/* Per module: its file, opened while a process mapping it lived
	 * (embed_symbols.c). */
	struct sp_embed_file *embed_files;
	size_t nembed_files;

	/* Rotation (opts.rotate_ns, rotate.c): the current window and the
	 * counters when it began (its STATS are the differences). */
	char *base_path;             /* PATH of the PATH.NNNN windows. */
	uint32_t win_index;          /* From 1. */
	uint64_t win_start, win_end; /* Perf clock; win_end exclusive. */
	uint64_t win_samples0, win_lost0, win_truncated0, win_python0, win_failed0;

	/* Set by stackpulse_recorder_finish, which releases everything but the
	 * struct itself: the counters are then read from final_stats (by
	 * stackpulse_stat key) until stackpulse_recorder_free. */
	int finished;
	uint64_t final_stats[SP_RECORDER_STAT_COUNT];
};

/* The rings and perf events of a recording (event_set.c). */
/* Maps one ring per CPU that has one and adds it to the epoll set. */
int sp_recorder_open_rings(stackpulse_recorder *rec);
/* Opens events on every thread of the target; with @p rescan, repeats
 * until a pass finds no new thread (live attach). */
int sp_recorder_open_all_threads(stackpulse_recorder *rec, int rescan);
int sp_recorder_enable_all(stackpulse_recorder *rec);
/* Adds the lost-sample counters of fds[from..to) to their threads. */
int sp_recorder_read_loss(stackpulse_recorder *rec, size_t from, size_t to);
/* Sets each thread's live count from the counters of its current events
 * (read, not added: they keep counting). */
int sp_recorder_read_live_loss(stackpulse_recorder *rec);
/* One step of re-opening every event with the stack copy size sampling
 * asked for (rec->copy_want) or into larger rings for the CPUs that fell
 * behind (SP_RING_BEHIND); called from the drain. */
int sp_recorder_reopen_step(stackpulse_recorder *rec);
/* Re-opens every sampling event at once with rec->setup.attr as it is
 * now (opts.python_pause sets the stopping bits, an exec removed the
 * events); a re-open under way is given up first. On failure the old
 * events sample on. */
int sp_recorder_reopen_now(stackpulse_recorder *rec);

/* An exec whose COMM and MMAP records were lost with the events it
 * removed (opts.python_pause): its name and executable mappings, read at
 * the exec stop, stand in for them in the drain's time order. */
typedef struct sp_exec_note {
	pid_t pid, tid;
	uint64_t time;
	char comm[SP_PROC_NAME_MAX];
	struct sp_proc_map *maps; /* Paths owned. */
	size_t nmaps;
} sp_exec_note;

/* Notes the exec of @p pid by thread @p tid, stopped at its exec now. */
int sp_recorder_exec_seen(stackpulse_recorder *rec, pid_t pid, pid_t tid);
/* Applies the notes up to CLOCK_MONOTONIC @p upto as their records would
 * have been (the drain calls it in time order). */
int sp_recorder_exec_apply(stackpulse_recorder *rec, uint64_t upto);
void sp_recorder_exec_free(stackpulse_recorder *rec);

/* New events, enabled, on thread @p tid after its exec removed its own
 * (opts.python_pause: stopping events are removed on exec). */
int sp_recorder_open_exec(stackpulse_recorder *rec, pid_t tid);

/* Takes and releases rec->mu while a tracer thread shares the recorder. */
static inline void sp_recorder_lock(stackpulse_recorder *rec)
{
	if (rec->pause)
		pthread_mutex_lock(&rec->mu);
}

static inline void sp_recorder_unlock(stackpulse_recorder *rec)
{
	if (rec->pause)
		pthread_mutex_unlock(&rec->mu);
}
/* Notes the rings that are half full (called before a drain). */
void sp_recorder_rings_check(stackpulse_recorder *rec);
/* Unmaps the replaced rings once they are drained. */
void sp_recorder_rings_retire(stackpulse_recorder *rec);

/* Off-CPU intervals (offcpu.c). A context-switch sample of @p th at
 * @p time with stack @p stack: the stack its next switch-out carries. */
void sp_offcpu_sample(sp_thread *th, uint64_t time, uint32_t stack);
/* Counts @p n switch-outs (or records the kernel lost: a recorder that
 * falls behind sees too few to tell) at @p time toward a switch storm. */
void sp_offcpu_storm_count(stackpulse_recorder *rec, uint64_t time, uint64_t n);
/* PERF_RECORD_SWITCH of @p th: out (with @p preempt) or in; a switch-in
 * after a switch-out writes the interval. */
int sp_offcpu_switch(stackpulse_recorder *rec, sp_thread *th, uint64_t time, int out, int preempt);
/* Writes the intervals of live threads still off CPU at @p now. */
int sp_offcpu_finish(stackpulse_recorder *rec, uint64_t now);

/* The unprivileged method (offcpu_unpriv.c). After a drain: reads the
 * stack of every followed thread that is off CPU per the rings, blocked
 * (not preempted), for at least SP_OFFCPU_READ_AFTER_NS and without a
 * stack read for this interval yet. Returns 0 or a writer error. */
int sp_offcpu_unpriv_read(stackpulse_recorder *rec);
/* An on-CPU sample of @p th at @p time with stack @p stack. */
void sp_offcpu_unpriv_sample(sp_thread *th, uint64_t time, uint32_t stack);
/* A switch-out of @p th at @p time (@p preempt: still runnable): a
 * preempted interval takes the stack of the latest on-CPU sample of the
 * run it ends; a stack read that may belong to the interval is kept. */
void sp_offcpu_unpriv_out(const stackpulse_recorder *rec, sp_thread *th, uint64_t time,
                          int preempt);
/* A switch-in of @p th at @p time; @p closes: it ends an interval
 * (sp_offcpu_unpriv_close). */
void sp_offcpu_unpriv_in(sp_thread *th, uint64_t time, int closes);
/* The interval of @p th ends at @p end: its stack is the one read while it
 * was off CPU, if the read lies inside [off_start, end]; else none. */
void sp_offcpu_unpriv_close(sp_thread *th, uint64_t end);
void sp_offcpu_unpriv_free(stackpulse_recorder *rec);

/* 1 when error @p rc of the drain ends the recording: the spool's own
 * writes failed (the writer refuses everything after that: ENOSPC, EIO, a
 * window file that cannot be created), compression failed, or memory ran
 * out. Any other error belongs to one sample or one process, which is
 * dropped, cut or no longer followed, and counted (docs/recording.md#errors). */
static inline int sp_recorder_fatal(const stackpulse_recorder *rec, int rc)
{
	return rc == -ENOMEM || rc == STACKPULSE_ECOMPRESS || sp_writer_failed(rec->w);
}

/* Handles one ring record. An error of that record alone drops it
 * (counted in rec->failed, samples in rec->dropped too); returns 0 or a
 * fatal error (sp_recorder_fatal). */
int sp_recorder_record(stackpulse_recorder *rec, const struct perf_event_header *hdr,
                       const uint8_t *p, size_t len);

/* The live process of @p pid, scanned from /proc when first seen: a fork
 * whose record was lost or is still to come (it may sit in another CPU's
 * ring), a process created during a live attach, or one of the target's
 * tree at attach. Its parent is linked when followed; a FORK that comes
 * later adopts it (sp_ptable_fork). A process whose /proc is gone or
 * refused is followed without its mappings (unscanned); one whose
 * snapshot failed otherwise comes back given up (sp_recorder_unfollow,
 * (*out)->unfollowed). Returns 0 or an error of the process table. */
int sp_recorder_process(stackpulse_recorder *rec, pid_t pid, uint64_t time, sp_process **out);

/* Stops following @p p after its error @p rc (its /proc snapshot failed,
 * its events were refused, a fork or exec of it could not be applied):
 * its later records are dropped (samples counted in rec->dropped), it is
 * counted in rec->unfollowed and the first one is named in the stats. */
static inline void sp_recorder_unfollow(stackpulse_recorder *rec, sp_process *p, int rc)
{
	if (p->unfollowed)
		return;
	p->unfollowed = 1;
	if (rec->unfollowed++ == 0) {
		rec->unfollowed_pid = p->pid;
		rec->unfollowed_error = rc;
	}
	sp_error_clear();
}

/* Adds @p lost samples to thread @p tid (spool index @p thread or SP_NONE). */
int sp_recorder_thread_lost(stackpulse_recorder *rec, pid_t tid, uint32_t thread, uint64_t lost);

/* Parses a sample record; 0, or STACKPULSE_EFORMAT when it is malformed
 * (no message: the caller counts and skips it). */
int sp_recorder_parse_sample(const stackpulse_recorder *rec, const uint8_t *p, size_t len,
                             sp_sample_fields *s);

/* Interns the stack of sample @p sf of @p proc: kernel frames, then the
 * user frames of the online unwinder (merged with Python frames). A sample
 * built by the recorder (no kernel part, sf->ssize 0: no copy sizing,
 * sf->time 0: no early Python read) serves the unprivileged off-CPU
 * stacks. */
int sp_recorder_sample_stack(stackpulse_recorder *rec, const sp_sample_fields *sf, sp_process *proc,
                             uint32_t *stack_id);

/* Reads the Python stacks of the samples that arrived in the rings since
 * the last call, before the time-ordered drain reaches them: the target
 * moves on while they wait (python_early.c). */
uint32_t sp_recorder_python_early(stackpulse_recorder *rec); /* stacks read */
/* The early read of the sample (@p tid, @p time) of @p proc into
 * rec->pyframes: 1 with *n, *truncated and *rc set, 0 when there is none.
 * Drops reads of samples older than @p time (never to be asked for). */
int sp_recorder_python_take(stackpulse_recorder *rec, const sp_process *proc, pid_t tid,
                            uint64_t time, uint32_t *n, int *truncated, int *rc);
void sp_recorder_python_early_free(stackpulse_recorder *rec);

/* The CPython reader of @p proc, probing once per image; NULL when it runs
 * none or opts.python is off (python_frames.c). */
sp_python *sp_recorder_python_for(stackpulse_recorder *rec, sp_process *proc);
/* The spool frame of Python frame @p f into *id (its code object interned
 * once); *skip set for frames that get none (synthetic or unknown code). */
int sp_recorder_python_frame(stackpulse_recorder *rec, sp_python *py, const struct sp_py_frame *f,
                             uint32_t *id, int *skip);
/* The threading names of @p proc's threads into the spool (RTNAME
 * records at @p time) when its reader has them due, or now with @p force
 * (python_frames.c): called as its samples (of thread @p tid) are
 * drained. 0 or a writer error. */
int sp_recorder_python_names(stackpulse_recorder *rec, sp_process *proc, pid_t tid, uint64_t time,
                             int force);
/* The same for every live process, at the end of a recording (names the
 * last reads did not find yet). */
int sp_recorder_python_names_final(stackpulse_recorder *rec);

/* The perf timestamp of a record (0 when it has none). */
uint64_t sp_recorder_record_time(const struct perf_event_header *hdr, const uint8_t *p, size_t len);

/* Interns a frame through the writer and remembers new native frames for
 * self-contained spools. Every frame of the recording goes through here. */
int sp_recorder_frame(stackpulse_recorder *rec, const struct stackpulse_raw_frame *f, uint32_t *id);

/* Embeds symbol tables for every module a native frame hit (when
 * self_contained is set). Unreadable modules are skipped, not errors. */
int sp_recorder_embed_symbols(stackpulse_recorder *rec);
/* The symbol cache directory of the recorder (sp_free it), or NULL when
 * opts.cache_dir is "", STACKPULSE_NO_SYMBOL_CACHE turns the cache off or
 * none can be formed. */
char *sp_recorder_cache_dir(const stackpulse_recorder *rec);

/* Closes the module files held for embedding. */
void sp_recorder_embed_release(stackpulse_recorder *rec);

/* Copies the perf maps of every process seen into the spool (JIT names). */
int sp_recorder_write_perfmaps(stackpulse_recorder *rec);

/* Writes the recording metadata: a spool's first record, or with
 * @p next_file the start of the next window file (sp_writer_next_file).
 * @p wall_ns and @p mono_ns are the start on both clocks. */
int sp_recorder_write_meta(stackpulse_recorder *rec, uint64_t wall_ns, uint64_t mono_ns,
                           int next_file);
/* Ends the spool file: counters, kernel symbols, embedded symbol tables,
 * JIT names, footer, fsync. */
int sp_recorder_seal(stackpulse_recorder *rec);

/* The event loop (loop.c). Drains the rings into the writer: the records
 * older than the ordering slack, or with @p all everything they hold
 * (finish); then the ring checks, re-opens and the periodic flush. Keeps
 * the first error in rec->error. */
int sp_recorder_consume(stackpulse_recorder *rec, int all);

/* Rotation (rotate.c). The window file for the first window, in
 * rec->base_path and the path to create (sp_free it). */
int sp_recorder_rotate_init(stackpulse_recorder *rec, const char *path, char **first);
/* The first window begins at @p mono_ns (the META's start). */
void sp_recorder_rotate_start(stackpulse_recorder *rec, uint64_t mono_ns);
/* 1 when a record of time @p t belongs to a later window. */
int sp_recorder_rotate_due(const stackpulse_recorder *rec, uint64_t t);
/* Closes the current window and starts the one holding time @p t. */
int sp_recorder_rotate_to(stackpulse_recorder *rec, uint64_t t);
/* Seals, renames and reports the current window (finish: @p last). */
int sp_recorder_window_close(stackpulse_recorder *rec, uint64_t end_ns, int last);

/* Remembers kernel pc @p a for the symbols written at finish
 * (kernel_symbols.c); past SP_MAX_KADDRS new pcs are not remembered. */
int sp_recorder_kaddr_add(stackpulse_recorder *rec, uint64_t a);
/* Writes the kernel symbols of every kernel address seen. */
int sp_recorder_write_ksyms(stackpulse_recorder *rec);

#endif
