/* CPython support for the recorder: find the interpreter in a target
 * process and read a thread's Python stack at sample time, with the pure
 * decoders of src/python over process_vm_readv; then merge it into the
 * native stack (python/merge.h).
 *
 * Use, per target process:
 *   - after exec, and for a forked child (its own sp_python: code ids are
 *     per sp_python): sp_python_probe(pid, &py), or sp_python_probe_file()
 *     on an MMAP2 event of a file that sp_python_candidate() accepts, since
 *     libpython is mapped after exec. STACKPULSE_ENOTFOUND: not CPython;
 *     remember it and probe again only on a new candidate mapping, so
 *     non-Python targets cost nothing more.
 *   - per sample of thread tid (after unwinding the native stack):
 *       sp_python_set_sample_time(py, sample time) (optional)
 *       sp_python_read_stack(py, tid, stack copy, sp, frames, ...)
 *         (STACKPULSE_ENOTFOUND: a thread without Python state: keep the
 *         native stack as it is)
 *       eval = sp_python_eval_ranges(py, &neval)
 *       sp_py_merge(&(sp_py_merge_in){pcs, npcs, native_truncated, eval,
 *                   neval, frames, nframes, py_truncated}, items, ...)
 *     then, leaf first, each item becomes a spool frame:
 *       NATIVE    -> the native frame of pcs[index], as without Python
 *       PYTHON    -> code = sp_python_code(py, frames[index].code); when
 *                    code->user == UINT32_MAX, sp_writer_pycode(w,
 *                    code->qualname, code->filename, code->first_line,
 *                    &code->user); then the raw frame {PYTHON, module
 *                    UINT32_MAX, offset = frames[index].offset, pycode =
 *                    code->user, line = frames[index].line}
 *       TRUNCATED -> a STACKPULSE_FRAME_TRUNCATED marker
 *   - sp_python_set_totals(py, &stats) to have the reads' costs summed;
 *     at finish, sp_python_free(py).
 *
 * Not thread-safe: one sp_python is used by one thread at a time. */
#ifndef SP_RECORD_PYTHON_H
#define SP_RECORD_PYTHON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/memory.h"
#include "python/merge.h"

typedef struct sp_python sp_python;

/* 1 when a mapped file's path could hold CPython (a python* executable or
 * a libpython3.*.so); a cheap filter before sp_python_probe_file. */
int sp_python_candidate(const char *path);

/* Looks for CPython in the executable mappings of @p pid (/proc/PID/maps),
 * trying each candidate file. Returns 0, STACKPULSE_ENOTFOUND (not a
 * CPython process: costs one read of the maps file),
 * STACKPULSE_EUNSUPPORTED (a CPython we cannot read, e.g. 3.9 or a
 * free-threaded build; the detail says which) or -errno. */
int sp_python_probe(pid_t pid, sp_python **out);

/* Like sp_python_probe for one executable mapping [start, end) of @p path
 * at file offset @p pgoff (@p end and @p inode 0: unknown), as a line of
 * /proc/PID/maps or an MMAP2 event gives it; sp_python_probe tries each
 * candidate mapping with it. The file is opened as the target sees it
 * (/proc/PID/map_files, else /proc/PID/root/PATH), @p inode checked when
 * nonzero. */
int sp_python_probe_file(pid_t pid, const char *path, uint64_t start, uint64_t end, uint64_t pgoff,
                         uint64_t inode, sp_python **out);

void sp_python_free(sp_python *py);

/* PY_VERSION_HEX of the target (e.g. 0x030b07f0 for 3.11.7). */
uint32_t sp_python_version(const sp_python *py);

/* Address ranges of _PyEval_EvalFrameDefault (and its .cold part) in the
 * target, for sp_py_merge. Owned by @p py. */
const sp_py_range *sp_python_eval_ranges(const sp_python *py, uint32_t *n);

/* Reads the Python stack of thread @p tid now, leaf first. @p stack is the
 * sample's copy of the user stack (@p stack_len bytes from target address
 * @p stack_start), or NULL: reads that fall inside it are served from it,
 * so C-stack frame state is seen as it was at sample time. Returns 0 with
 * *n frames (possibly 0 and *truncated set), STACKPULSE_ENOTFOUND when
 * @p tid has no Python thread state (yet), -ESRCH when the process is gone,
 * or -ENOMEM. */
int sp_python_read_stack(sp_python *py, pid_t tid, const uint8_t *stack, size_t stack_len,
                         uint64_t stack_start, sp_py_frame *out, uint32_t max, uint32_t *n,
                         int *truncated);

/* The interned code object @p id of a frame returned by
 * sp_python_read_stack, or NULL. Its strings stay valid until
 * sp_python_free; the pointer itself only until the next read. */
sp_py_code *sp_python_code(sp_python *py, uint32_t id);

/* Thread names. CPython (before 3.14) does not name its threads for the
 * OS: their names are threading.Thread names, read from the process's
 * threading module (python/names.h). sp_python_thread_names reads them
 * when a thread state appeared since the last read (SP_PYTHON_NAMES_NEW_NS
 * after the last read, and while one of the threads has no name yet three
 * more times, 4, 16 and 64 times as long after: a Thread object enters
 * threading._active only once its thread runs Python), else every
 * SP_PYTHON_NAMES_NS (renames), or now with @p force; then it calls @p fn
 * for each thread whose name is new or changed since @p fn took it. @p fn
 * returns 0 when it took the name, 1 when not now (offered again when a
 * later call names that thread @p tid, the one being sampled), or a
 * negative error, which ends the call and is returned. Costs a comparison
 * when not due. */
#define SP_PYTHON_NAMES_NS     1000000000ull
#define SP_PYTHON_NAMES_NEW_NS 5000000ull
typedef int (*sp_python_name_fn)(void *ctx, pid_t tid, const char *name);
int sp_python_thread_names(sp_python *py, uint64_t now_ns, pid_t tid, int force,
                           sp_python_name_fn fn, void *ctx);

/* Reading costs, summed by sp_python_set_totals. */
typedef struct sp_python_stats {
	uint64_t stacks;        /* sp_python_read_stack calls. */
	uint64_t failed;        /* Calls that returned no stack (no thread
	                          * state for the tid, process gone, ...). */
	uint64_t frames;        /* Frames returned. */
	uint64_t truncated;     /* Stacks returned truncated. */
	uint64_t torn;          /* Walks refused because the stack changed while
	                          * it was read (each is retried once). */
	uint64_t misplaced;     /* Of those, walks with a frame not where its
	                          * caller's size puts it in the data stack. */
	uint64_t anchored;      /* 3.10 walks anchored on the stack copy. */
	uint64_t anchor_misses; /* Anchored walks cut at a frame missing from
	                          * the copy (freed since the sample). */
	uint64_t read_calls;    /* process_vm_readv (or pread) calls. */
	uint64_t rescans;       /* Thread-list rescans. */
	uint64_t ns;            /* Time spent in sp_python_read_stack. */
	uint64_t delayed;       /* Reads whose sample time was known. */
	uint64_t delay_ns;      /* Sum of (read time - sample time) of those. */
	uint64_t delay_max_ns;  /* Largest such delay. */
	/* Code cache (SP_PY_CODE_BUDGET): bytes held now and the most held
	 * at once (in totals: over all readers sharing them, see
	 * sp_python_set_totals), entries evicted, code objects refused. */
	uint64_t code_bytes;
	uint64_t code_bytes_peak;
	uint64_t codes_evicted;
	uint64_t codes_refused;
	uint64_t name_reads; /* Reads of the thread names. */
	uint64_t names_ns;   /* Time spent in them. */
} sp_python_stats;

/* The CLOCK_MONOTONIC time (ns) of the sample the next
 * sp_python_read_stack belongs to (0: unknown), for the delay statistics. */
void sp_python_set_sample_time(sp_python *py, uint64_t ns);

/* Makes every later read of @p py also add its costs to @p totals, so a
 * recorder can sum them over processes that come and go.
 * The code caches of readers given the same @p totals share one byte
 * budget (SP_PY_CODE_BUDGET_TOTAL) counted in totals->code_bytes.
 * @p totals must outlive @p py; NULL stops it. */
void sp_python_set_totals(sp_python *py, sp_python_stats *totals);

#endif
