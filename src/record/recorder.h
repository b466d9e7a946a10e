/* Internal state of a recording, shared by recorder.c (public API, event
 * loop) and sample.c (perf records -> spool). */
#ifndef SP_RECORD_RECORDER_H
#define SP_RECORD_RECORDER_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/spool_writer.h"
#include "io/file.h"
#include "record/perf_events.h"
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
	sp_regs regs;
} sp_sample_fields;

/* Event id (PERF_EVENT_IOC_ID) -> thread it was opened on. */
typedef struct sp_event_id {
	uint64_t id;
	pid_t tid;
} sp_event_id;

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
	sp_ring *rings; /* One per CPU; fd -1 when the CPU is absent. */
	int epfd;
	int *fds; /* Sampling events (threads x CPUs). */
	size_t nfds, capfds;
	sp_event_id *ids; /* Sorted by id after setup; grows on rescans. */
	size_t nids, capids;
	pid_t *direct; /* Threads with events of their own, sorted. */
	size_t ndirect, capdirect;

	uint64_t *kaddrs; /* Open-addressing set of kernel pcs; 0 = empty. */
	size_t kcap, kused;
	int kptr_zeroed;

	uint64_t lost;
	uint64_t truncated;
	uint64_t dropped;       /* Samples of unfollowed or duplicate events. */
	uint64_t corrupt;       /* Malformed records skipped. */
	int error;              /* First error of a drain (sticky). */
	uint64_t last_flush_ns; /* CLOCK_MONOTONIC of the last chunk flush. */

	uint64_t python_samples;          /* Samples that carry Python frames. */
	int python_found;                 /* A CPython target was found. */
	uint32_t python_unreadable;       /* CPython processes the reader refused. */
	char python_note[320];            /* Why the first of them was refused. */
	int realtime;                     /* SCHED_FIFO while waiting: 1 yes, -1 refused. */
	sp_python_stats python_stats;     /* Python reading costs, summed over processes. */
	struct sp_py_frame *pyframes;     /* Scratch: Python frames. */
	sp_early_py *early;               /* SP_EARLY_PY slots once Python is found. */
	uint64_t py_serials;              /* Last sp_process.py_serial handed out. */
	uint64_t python_early;            /* Python reads taken from early slots. */
	struct sp_py_merge_item *pymerge; /* Scratch: merged stack. */
	uint64_t *pcs;                    /* Scratch: unwound pcs. */
	uint32_t *frames;                 /* Scratch: frame ids of one stack. */
	char kernel_note[320];

	/* Self-contained spools: (module, offset) of every distinct native
	 * frame, for the symbol tables embedded at finish. */
	struct sp_native_frame *native;
	size_t nnative, capnative;
	uint32_t frames_seen; /* Frame ids below this were already handed out. */
	/* Per module: its file, opened while a process mapping it lived
	 * (embed_symbols.c). */
	struct sp_embed_file *embed_files;
	size_t nembed_files;
	uint32_t embed_fds; /* Descriptors held in embed_files. */
};

/* Handles one ring record; returns 0 or a writer error. */
int sp_recorder_record(stackpulse_recorder *rec, const struct perf_event_header *hdr,
                       const uint8_t *p, size_t len);

/* Parses a sample record; 0, or STACKPULSE_EFORMAT when it is malformed
 * (no message: the caller counts and skips it). */
int sp_recorder_parse_sample(const stackpulse_recorder *rec, const uint8_t *p, size_t len,
                             sp_sample_fields *s);

/* Reads the Python stacks of the samples that arrived in the rings since
 * the last call, before the time-ordered drain reaches them: the target
 * moves on while they wait (python_early.c). */
void sp_recorder_python_early(stackpulse_recorder *rec);
/* The early read of the sample (@p tid, @p time) of @p proc into
 * rec->pyframes: 1 with *n, *truncated and *rc set, 0 when there is none.
 * Drops reads of samples older than @p time (never to be asked for). */
int sp_recorder_python_take(stackpulse_recorder *rec, const sp_process *proc, pid_t tid,
                            uint64_t time, uint32_t *n, int *truncated, int *rc);
void sp_recorder_python_early_free(stackpulse_recorder *rec);

/* 1 when @p pid lives (a zombie leader with live threads does). */
int sp_recorder_pid_alive(pid_t pid);
/* 1 while the target lives; remembers its end. */
int sp_recorder_target_alive(stackpulse_recorder *rec);
/* 1 while the target or a followed child lives. */
int sp_recorder_any_alive(stackpulse_recorder *rec);

/* The waiting thread's scheduling, saved while it runs at SCHED_FIFO. */
typedef struct sp_sched_saved {
	int policy;
	struct sched_param param;
} sp_sched_saved;
/* Raises the calling thread to SCHED_FIFO 1 for one wait when opts.realtime
 * asks for it (sets rec->realtime); 1 when raised, then call
 * sp_recorder_realtime_end with @p saved. */
int sp_recorder_realtime_begin(stackpulse_recorder *rec, sp_sched_saved *saved);
void sp_recorder_realtime_end(const sp_sched_saved *saved);

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

/* Writes the kernel symbols of every kernel address seen. */
int sp_recorder_write_ksyms(stackpulse_recorder *rec);

#endif
