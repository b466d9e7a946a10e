/* Spool encoder (pure): interns records and emits compressed, checksummed
 * chunks through a caller-supplied sink. It performs no syscalls; the
 * recorder passes a sink that writes to the spool file.
 *
 * Ids: every add function returns a dense index (processes, threads,
 * modules, frames, stacks, Python code objects each count from 0, except
 * stacks, whose id 0 is the empty stack). Modules, frames and stack nodes
 * are interned: adding the same value twice returns the same id. */
#ifndef SP_FORMAT_SPOOL_WRITER_H
#define SP_FORMAT_SPOOL_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stackpulse.h"

/* Receives encoded bytes in file order. Returns 0 or a negative code (for
 * example -ENOSPC), which the writer returns to its caller unchanged. */
typedef int (*sp_sink_fn)(void *ctx, const void *data, size_t len);

typedef struct sp_writer sp_writer;

typedef struct sp_writer_opts {
	int zstd_level;       /* 1..19; 0 means 3. */
	uint32_t chunk_bytes; /* Uncompressed bytes that close a chunk; 0: 1 MiB. */
} sp_writer_opts;

/* Recording metadata; strings are copied. */
typedef struct sp_meta {
	uint64_t start_time_ns;     /* Wall clock at start, ns since epoch. */
	uint64_t start_mono_ns;     /* Perf clock (CLOCK_MONOTONIC) at start. */
	uint32_t frequency;         /* Requested Hz. */
	uint32_t stack_size;        /* Stack copy bytes. */
	const char *event;          /* "cpu-clock", "cycles". */
	const char *machine;        /* uname -m. */
	const char *kernel_release; /* uname -r. */
	const char *hostname;       /* uname -n. */
	int kernel_frames;          /* 1 when kernel callchains are recorded. */
	const char *kernel_note;    /* Why not, or "" / NULL. */
} sp_meta;

/* Creates a writer and emits the file header through @p sink. */
int sp_writer_new(const sp_writer_opts *opts, sp_sink_fn sink, void *sink_ctx, sp_writer **out);
/* Frees the writer without writing anything more. NULL is ignored. */
void sp_writer_free(sp_writer *w);

int sp_writer_meta(sp_writer *w, const sp_meta *meta);
/* How off-CPU intervals are recorded (enum stackpulse_offcpu_method), for
 * the META records written from now on (also those of
 * sp_writer_next_file); 0, none, writes no trailing field, as older
 * writers. */
void sp_writer_set_offcpu_method(sp_writer *w, int method);

/* A new process (pid reuse gives a new index). @p parent is a process index
 * or UINT32_MAX. */
int sp_writer_process(sp_writer *w, pid_t pid, uint32_t parent, uint64_t time_ns, const char *name,
                      const char *cmdline, uint32_t *index);
/* A process executed a new image: new name and command line (EXEC event). */
int sp_writer_process_exec(sp_writer *w, uint32_t process, uint64_t time_ns, const char *name,
                           const char *cmdline);
/* A new thread of @p process. */
int sp_writer_thread(sp_writer *w, uint32_t process, pid_t tid, uint64_t time_ns, const char *name,
                     uint32_t *index);
/* A thread renamed itself (COMM event). */
int sp_writer_thread_name(sp_writer *w, uint32_t thread, uint64_t time_ns, const char *name);
/* The thread's name in its language runtime @p runtime (SP_RUNTIME_*) is
 * @p name from @p time_ns on (RTNAME record). */
int sp_writer_thread_runtime_name(sp_writer *w, uint32_t thread, uint64_t time_ns, uint32_t runtime,
                                  const char *name);
/* A process or thread exited (thread UINT32_MAX for the whole process). */
int sp_writer_exit(sp_writer *w, uint32_t process, uint32_t thread, uint64_t time_ns);
/* @p child was forked from @p parent (both process indexes). */
int sp_writer_fork(sp_writer *w, uint32_t parent, uint32_t child, uint64_t time_ns);
/* The kernel lost @p count samples (thread may be UINT32_MAX). */
int sp_writer_lost(sp_writer *w, uint32_t thread, uint64_t count, uint64_t time_ns);

/* Interns a mapped file by (path, build-id); build_id_len <= 64. */
int sp_writer_module(sp_writer *w, const char *path, const uint8_t *build_id, uint32_t build_id_len,
                     uint32_t *index);
/* Records that @p process maps @p module at [start, end) from file offset
 * @p pgoff. */
int sp_writer_mapping(sp_writer *w, uint32_t process, uint32_t module, uint64_t start, uint64_t end,
                      uint64_t pgoff, uint64_t time_ns);

/* A CPython code object; strings copied. */
int sp_writer_pycode(sp_writer *w, const char *qualname, const char *filename, int32_t first_line,
                     uint32_t *index);

/* Interns a raw frame (kind NATIVE, KERNEL, PYTHON, UNKNOWN, TRUNCATED, JIT). */
int sp_writer_frame(sp_writer *w, const struct stackpulse_raw_frame *frame, uint32_t *id);
/* Interns the stack node (parent stack, leaf frame); parent 0 is the root. */
int sp_writer_stack(sp_writer *w, uint32_t parent, uint32_t frame, uint32_t *id);
/* Interns a whole stack given leaf first; n == 0 gives stack 0. */
int sp_writer_stack_frames(sp_writer *w, const uint32_t *frames_leaf_first, size_t n, uint32_t *id);

/* One sample of @p thread with leaf @p stack. Times may go slightly
 * backwards (several CPUs); they are stored as signed deltas. */
int sp_writer_sample(sp_writer *w, uint64_t time_ns, uint32_t thread, uint32_t stack,
                     uint32_t weight, uint32_t cpu);

/* One off-CPU interval of @p thread: it left the CPU at @p start_ns with
 * stack @p stack (0: unknown) and ran again @p duration_ns later; @p state
 * is an enum stackpulse_offcpu_state. */
int sp_writer_offcpu(sp_writer *w, uint64_t start_ns, uint64_t duration_ns, uint32_t thread,
                     uint32_t stack, int state);
/* The same row standing also for @p merged earlier intervals of the thread
 * in the same state, without a stack of their own, @p merged_ns long in
 * all (docs/spool-format.md, OFFCPU). */
int sp_writer_offcpu_merged(sp_writer *w, uint64_t start_ns, uint64_t duration_ns, uint32_t thread,
                            uint32_t stack, int state, uint64_t merged, uint64_t merged_ns);

/* A kernel symbol (for kernel frames); @p module NULL or "" for vmlinux. */
int sp_writer_ksym(sp_writer *w, uint64_t addr, const char *name, const char *module);
/* Anonymous executable code named by a perf map (/tmp/perf-PID.map). */
int sp_writer_jitsym(sp_writer *w, uint32_t process, uint64_t start, uint64_t size,
                     const char *name);
/* Embeds a symbol-cache table (see src/symcache) for @p module. */
int sp_writer_symtab(sp_writer *w, uint32_t module, const uint8_t *table, size_t len);

/* Records a counter (SP_STAT_* of format/spool_format.h); a later value for
 * the same key replaces an earlier one. */
int sp_writer_stat(sp_writer *w, uint32_t key, uint64_t value);
/* The same for one thread (spool index @p thread), in the optional third
 * field of STATS. */
int sp_writer_thread_stat(sp_writer *w, uint32_t key, uint64_t value, uint32_t thread);

/* Closes the current chunk, if any, and hands it to the sink. */
int sp_writer_flush(sp_writer *w);
/* 1 once the sink refused a write (the file lacks what later records
 * would need): the writer then refuses everything. */
int sp_writer_failed(const sp_writer *w);
/* Flushes and writes the footer. The writer accepts nothing afterwards. */
int sp_writer_finish(sp_writer *w);

/* From now on, keeps a copy of every definition record (processes,
 * threads, modules, mappings, code objects, frames, stacks) for
 * sp_writer_next_file. Call it before the first record. */
int sp_writer_keep_defs(sp_writer *w);
/* Starts another file after sp_writer_finish, through the same sink (the
 * caller points it at the new file first): header, @p meta, then every
 * definition so far (kept since sp_writer_keep_defs), with the same
 * ids, so that the new file stands alone and later records keep referring
 * to what they did. Its footer counts its own samples and bytes; symbol
 * tables may be embedded again. */
int sp_writer_next_file(sp_writer *w, const sp_meta *meta);

/* Counters for stats (the whole recording, all files). */
typedef struct sp_writer_counts {
	uint64_t bytes;   /* Bytes handed to the sink. */
	uint64_t chunks;  /* Chunks written. */
	uint64_t samples; /* Samples added. */
	uint64_t lost;    /* Lost samples recorded. */
	uint64_t offcpu;  /* Off-CPU intervals added. */
	uint32_t processes, threads, modules, frames, stacks, pycodes;
} sp_writer_counts;
void sp_writer_get_counts(const sp_writer *w, sp_writer_counts *out);

#endif
