/* Internal state of a recording, shared by recorder.c (public API, event
 * loop) and sample.c (perf records -> spool). */
#ifndef SP_RECORD_RECORDER_H
#define SP_RECORD_RECORDER_H

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
	sp_python_stats python_stats;     /* Python reading costs, summed over processes. */
	struct sp_py_frame *pyframes;     /* Scratch: Python frames. */
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
