/**
 * @file stackpulse.h
 * @brief stackpulse: a Linux sampling profiler library.
 *
 * The flow is: start or attach (::stackpulse_recorder_spawn,
 * ::stackpulse_recorder_attach) → record (::stackpulse_recorder_wait,
 * ::stackpulse_recorder_consume_available) → read back
 * (::stackpulse_spool_open) → symbolize (::stackpulse_symbolizer_new) →
 * report (::stackpulse_profile_build and the exporters).
 *
 * @par Conventions
 * - Functions returning `int` return 0 on success or a negative code:
 *   either `-errno` (for example `-ENOENT`) or one of the library codes of
 *   ::stackpulse_error. ::stackpulse_strerror names any code and
 *   ::stackpulse_last_error gives the detail of the calling thread's last
 *   failure.
 * - Every function clears the calling thread's last error when it is
 *   entered, except ::stackpulse_last_error, ::stackpulse_last_error_code,
 *   ::stackpulse_strerror, ::stackpulse_version and the `*_free` and
 *   `*_close` functions (they run in error paths and leave it alone). So
 *   after any other call, ::stackpulse_last_error describes that call's
 *   failure, or is "" when it succeeded.
 * - Option structs start with `size_t sz`. Initialise them with their
 *   `*_opts_init()` function (C and C++) or, in C, their `*_OPTS` macro (a
 *   compound literal); the library reads only the fields that `sz` covers,
 *   so programs built against an older header keep working. A `sz` larger
 *   than the library's struct (a newer header) is accepted only if every
 *   byte past the fields it knows is zero; otherwise the call fails with
 *   -EINVAL and a message naming the offset of the first non-zero byte,
 *   since a setting the library does not know must not be dropped silently.
 * - Enumerations are passed and stored as their `enum` types (4 bytes, like
 *   `int`, on every supported ABI).
 * - Objects are not thread-safe unless stated: one thread at a time per
 *   object. Different objects may be used from different threads. Read-only
 *   accessors of a ::stackpulse_spool may be called concurrently.
 * - Pointers returned by accessors are owned by the object they came from
 *   and stay valid until that object is freed, unless stated otherwise.
 * - Every public struct and enum has a typedef of its own name, so C++
 *   and C use it without the `struct` or `enum` keyword, except the few
 *   whose accessor function shares their name (::stackpulse_spool_meta,
 *   ::stackpulse_spool_event, ::stackpulse_symbolizer_stats, the
 *   `stackpulse_profile_*` records and ::stackpulse_frame_kind): those are
 *   written `struct stackpulse_...` (or `enum`).
 * - Yes/no values are `bool` (`<stdbool.h>`); settings with more than two
 *   states are named enums (::stackpulse_feature).
 * - The library never prints, never exits and never aborts on bad input.
 */
#ifndef STACKPULSE_H
#define STACKPULSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define STACKPULSE_API __attribute__((visibility("default")))
#else
#define STACKPULSE_API
#endif

/** @name Version */
/**@{*/
#define STACKPULSE_VERSION_MAJOR 0
#define STACKPULSE_VERSION_MINOR 3
#define STACKPULSE_VERSION_PATCH 0
/** The library version as "MAJOR.MINOR.PATCH". Never NULL. */
STACKPULSE_API const char *stackpulse_version(void);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Errors */
/**@{*/

/**
 * Library error codes. They are negative and never collide with `-errno`
 * (errno values are below 4096).
 */
typedef enum stackpulse_error {
	STACKPULSE_OK = 0,
	STACKPULSE_EFORMAT = -10001,      /**< Malformed input bytes. */
	STACKPULSE_ETRUNCATED = -10002,   /**< Input ends before a complete unit. */
	STACKPULSE_EVERSION = -10003,     /**< Unsupported format version. */
	STACKPULSE_ECHECKSUM = -10004,    /**< A checksum did not match. */
	STACKPULSE_EUNSUPPORTED = -10005, /**< Feature unsupported here. */
	STACKPULSE_ELIMIT = -10006,       /**< A size or count limit was exceeded. */
	STACKPULSE_EBUILDID = -10007,     /**< A file's build-id does not match. */
	STACKPULSE_ESTATE = -10008,       /**< Call not valid in the object's state. */
	STACKPULSE_ECOMPRESS = -10009,    /**< Compression or decompression failed. */
	STACKPULSE_ENOTFOUND = -10010,    /**< Looked-up item does not exist. */
	STACKPULSE_EINTERNAL = -10011,    /**< A library invariant failed (a bug). */
} stackpulse_error;

/**
 * Returns a static message for @p code: a library code, `-errno`, or 0.
 * Never NULL; unknown codes give "unknown error".
 */
STACKPULSE_API const char *stackpulse_strerror(int code);

/**
 * Returns the detail of the calling thread's most recent failure, for
 * example "chunk 3 at offset 4096: checksum mismatch". The text is
 * thread-local and stays valid until the thread's next library call, which
 * clears it on entry (see the conventions above for the exceptions).
 * Never NULL; "" when no failure was recorded.
 */
STACKPULSE_API const char *stackpulse_last_error(void);

/** Returns the code of the calling thread's most recent failure, or 0. */
STACKPULSE_API int stackpulse_last_error_code(void);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Common enumerations */
/**@{*/

/** Tri-state switches for optional features. */
typedef enum stackpulse_feature {
	STACKPULSE_FEATURE_AUTO = 0,     /**< Use when available, else skip. */
	STACKPULSE_FEATURE_OFF = 1,      /**< Never use. */
	STACKPULSE_FEATURE_REQUIRED = 2, /**< Fail when unavailable. */
} stackpulse_feature;

/** The perf event that drives sampling (not to be confused with the
 * lifecycle events of a spool, ::stackpulse_spool_event_kind). */
typedef enum stackpulse_perf_event {
	STACKPULSE_PERF_EVENT_AUTO = 0,      /**< `cycles`, else `cpu-clock`. */
	STACKPULSE_PERF_EVENT_CYCLES = 1,    /**< Hardware cycles only. */
	STACKPULSE_PERF_EVENT_CPU_CLOCK = 2, /**< Software cpu-clock only. */
} stackpulse_perf_event;

/** What a frame stands for. */
enum stackpulse_frame_kind {
	STACKPULSE_FRAME_UNKNOWN = 0,   /**< Address with no known module. */
	STACKPULSE_FRAME_NATIVE = 1,    /**< Machine code in a mapped file. */
	STACKPULSE_FRAME_INLINE = 2,    /**< Inlined call inside a native frame. */
	STACKPULSE_FRAME_KERNEL = 3,    /**< Kernel code. */
	STACKPULSE_FRAME_PYTHON = 4,    /**< A CPython function. */
	STACKPULSE_FRAME_TRUNCATED = 5, /**< Marker: the stack was cut here. */
	STACKPULSE_FRAME_JIT = 6,       /**< Anonymous code named by a perf map. */
};

/** How off-CPU intervals were recorded (docs/recording.md#off-cpu-time). */
typedef enum stackpulse_offcpu_method {
	STACKPULSE_OFFCPU_NONE = 0, /**< No off-CPU intervals were recorded. */
	/** The context-switch software event sampled at period 1 (stacks at
	 *  switch-out) and PERF_RECORD_SWITCH (switch-in times): root,
	 *  CAP_PERFMON or perf_event_paranoid <= 1. */
	STACKPULSE_OFFCPU_SWITCH_EVENT = 1,
	/** PERF_RECORD_SWITCH intervals with stacks read from the blocked
	 *  thread's saved user state (/proc/PID/task/TID/syscall and
	 *  process_vm_readv, the thread never stopped): user and Python
	 *  frames only; taken when the context-switch event is refused
	 *  (perf_event_paranoid 2). */
	STACKPULSE_OFFCPU_UNPRIVILEGED = 2,
} stackpulse_offcpu_method;

/** Why a thread was off CPU. */
typedef enum stackpulse_offcpu_state {
	STACKPULSE_OFFCPU_BLOCKED = 0,   /**< It slept or waited (not runnable). */
	STACKPULSE_OFFCPU_PREEMPTED = 1, /**< It was runnable, waiting for a CPU. */
} stackpulse_offcpu_state;
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Recorder
 * A recorder samples one target (and, by default, its children) into a
 * spool file. It records in the caller's thread: it has no background
 * thread, and nothing happens between calls. Two calls use other threads
 * or processes briefly: ::stackpulse_recorder_attach in
 * ::STACKPULSE_ATTACH_STOP_ENABLE_RESUME mode stops the target from a
 * short-lived thread of its own, joined before it returns (a ptrace tracee
 * is released when its tracer thread ends, so a thread that never reached
 * its stop is never left stopped); ::stackpulse_recorder_spawn forks the
 * child that execs the command.
 * Not thread-safe: use one recorder from one thread at a time.
 */
/**@{*/

/** An active recording. Finish with ::stackpulse_recorder_finish, free
 * with ::stackpulse_recorder_free. */
typedef struct stackpulse_recorder stackpulse_recorder;

/** How ::stackpulse_recorder_attach joins a running process. */
typedef enum stackpulse_attach_mode {
	/** Stop every thread, open events, snapshot /proc, enable, resume.
	 * Nothing created during attach is missed. */
	STACKPULSE_ATTACH_STOP_ENABLE_RESUME = 0,
	/** Attach without stopping; rescan for threads created meanwhile. */
	STACKPULSE_ATTACH_LIVE = 1,
} stackpulse_attach_mode;

/** A rotation window that was just closed (see
 * ::stackpulse_recorder_opts `rotate_ns`). */
typedef struct stackpulse_window {
	size_t sz;              /**< sizeof(struct stackpulse_window). */
	const char *path;       /**< The complete window file, `PATH.0001`,
	                         *   `PATH.0002`, ...; valid during the call. */
	uint32_t index;         /**< 1 for the first window. */
	bool last;              /**< True for the window closed by
	                         *   ::stackpulse_recorder_finish. */
	uint64_t start_ns;      /**< Start of the window on the perf clock
	                         *   (CLOCK_MONOTONIC): its samples have
	                         *   `start_ns <= time < end_ns`. */
	uint64_t end_ns;        /**< End of the window (exclusive); the last
	                         *   window ends at finish. */
	uint64_t samples;       /**< Samples in the window file. */
	uint64_t lost;          /**< Samples the kernel reported lost during
	                         *   the window. */
	uint64_t bytes;         /**< Size of the window file. */
	uint64_t total_samples; /**< Samples of the whole recording so far, all
	                         *   windows. */
} stackpulse_window;

/** Called by the recorder as each rotation window file is complete. It
 * runs inside ::stackpulse_recorder_consume_available or
 * ::stackpulse_recorder_finish, on the caller's thread, while the rings
 * fill: hand slow work (a push) to another thread. */
typedef void (*stackpulse_window_fn)(void *ctx, const struct stackpulse_window *window);

/** Recorder options. Initialise with ::stackpulse_recorder_opts_init or
 * ::STACKPULSE_RECORDER_OPTS. */
typedef struct stackpulse_recorder_opts {
	size_t sz;           /**< sizeof(struct stackpulse_recorder_opts). */
	uint32_t frequency;  /**< Samples per second per thread; default 99. */
	uint32_t stack_size; /**< User stack bytes copied per sample; default
	                     *   32768, at most 65528, multiple of 8. */
	/** Kernel frames. */
	enum stackpulse_feature kernel;
	bool children; /**< Follow forks and execs (default true). */
	/** CPython frames. */
	enum stackpulse_feature python;
	/** The event that drives sampling. */
	enum stackpulse_perf_event perf_event;
	uint32_t ring_kb;      /**< Ring size per CPU in KiB; 0 sizes it from
	                       *   perf_event_mlock_kb. */
	int zstd_level;        /**< zstd level for chunks; default 3. */
	bool self_contained;   /**< Embed symbol tables at finish so the
	                       *   spool symbolizes anywhere (default on). */
	uint32_t chunk_bytes;  /**< Uncompressed bytes per chunk before it is
	                       *   written; default 1 MiB. Smaller chunks lose
	                       *   less on a crash. */
	const char *cache_dir; /**< Symbol cache directory used at finish
	                        *   (embedded tables, kernel symbols); copied.
	                        *   NULL: `$STACKPULSE_SYMBOL_CACHE_DIR`, else
	                        *   `$XDG_CACHE_HOME/stackpulse`, else
	                        *   `~/.cache/stackpulse`; "": no cache, the same
	                        *   as in ::stackpulse_symbolizer_opts. A set
	                        *   `STACKPULSE_NO_SYMBOL_CACHE` (other than "0")
	                        *   turns the cache off whatever this says. */
	/** Run the calling thread at SCHED_FIFO priority 1 (with
	 * SCHED_RESET_ON_FORK) inside ::stackpulse_recorder_wait and
	 * ::stackpulse_recorder_consume_available, restoring its policy on
	 * return. AUTO (default): once a CPython target is found, when allowed,
	 * so that its stacks are read right after their samples even on the
	 * target's CPU or a loaded machine. OFF: never. REQUIRED: always, and
	 * wait fails with -EPERM when it is refused. */
	enum stackpulse_feature realtime;
	/** Rotation. 0 (default): one spool at the given path. Otherwise the
	 * recording is cut every @c rotate_ns nanoseconds of sample time (at
	 * least 100 ms) into windows, each a complete spool of its own,
	 * `PATH.0001`, `PATH.0002`, ... (four digits, more past 9999); nothing
	 * is written at `PATH` itself. Every sample goes to exactly one window,
	 * the one its time falls in. A window file holds the definitions
	 * (processes, threads, modules, mappings, frames, stacks) of the whole
	 * recording so far, the kernel symbols and embedded symbol tables its
	 * samples need, and its own counters and lost samples, so it opens and
	 * symbolizes alone. It is written under a temporary name and renamed
	 * onto its name once complete. A stretch in which the caller did not
	 * consume for longer than a window gets no empty files. */
	uint64_t rotate_ns;
	/** With @c rotate_ns: called as each window file is complete, or NULL. */
	stackpulse_window_fn on_window;
	void *window_ctx; /**< Passed to @c on_window. */
	/** Off-CPU intervals (docs/recording.md#off-cpu-time): each time a
	 * followed thread leaves the CPU, how long it stays off, whether it
	 * blocked or was preempted, and its stack when it left. OFF (default):
	 * none. AUTO and REQUIRED: the context-switch event when the kernel
	 * allows it (root, CAP_PERFMON or perf_event_paranoid <= 1), else the
	 * unprivileged method (STACKPULSE_OFFCPU_UNPRIVILEGED); when both are
	 * refused AUTO records none and REQUIRED fails. */
	enum stackpulse_feature off_cpu;
	/** Hold each sampled thread of a CPython target still until its
	 * Python stack is read, as py-spy pauses its target
	 * (docs/python.md#pausing): the chain is then the one of the sample,
	 * never one the thread moved on to. The recorder traces the target's
	 * threads and child processes (ptrace) and its sampling events stop
	 * the sampled thread (perf sigtrap); each sample holds the thread for
	 * tens of microseconds (docs/benchmarks.md). While it is on, no
	 * debugger can attach to the target, and a waitpid() on the target
	 * from the recorder's process may take its trace stops: reap a
	 * spawned target once ::stackpulse_recorder_wait returned
	 * ::STACKPULSE_WAIT_EXITED. AUTO (default): when a CPython target is
	 * expected (python REQUIRED, a python* program, libpython mapped at
	 * attach), off_cpu is OFF (each pause would show as an off-CPU
	 * interval) and ptrace and the events are allowed; otherwise the stacks
	 * are read while the thread runs on, tens of microseconds after the
	 * sample, and ::stackpulse_recorder_python_note says why when it was
	 * refused. OFF: never. REQUIRED: always, and attach and spawn fail
	 * when refused (-EINVAL with off_cpu on). */
	enum stackpulse_feature python_pause;
} stackpulse_recorder_opts;

/** Default recorder options. */
#define STACKPULSE_RECORDER_OPTS                                                                   \
	((stackpulse_recorder_opts){                                                               \
	        .sz = sizeof(stackpulse_recorder_opts),                                            \
	        .frequency = 99,                                                                   \
	        .stack_size = 32768,                                                               \
	        .kernel = STACKPULSE_FEATURE_AUTO,                                                 \
	        .children = true,                                                                  \
	        .python = STACKPULSE_FEATURE_AUTO,                                                 \
	        .perf_event = STACKPULSE_PERF_EVENT_AUTO,                                          \
	        .ring_kb = 0,                                                                      \
	        .zstd_level = 3,                                                                   \
	        .self_contained = true,                                                            \
	        .chunk_bytes = 1u << 20,                                                           \
	        .cache_dir = NULL,                                                                 \
	        .realtime = STACKPULSE_FEATURE_AUTO,                                               \
	        .rotate_ns = 0,                                                                    \
	        .on_window = NULL,                                                                 \
	        .window_ctx = NULL,                                                                \
	        .off_cpu = STACKPULSE_FEATURE_OFF,                                                 \
	        .python_pause = STACKPULSE_FEATURE_AUTO,                                           \
	})

/**
 * The counters of a recording, one model for the recorder and the spool:
 * ::stackpulse_recorder_stat reads every key of a recorder (also after
 * ::stackpulse_recorder_finish, until ::stackpulse_recorder_free), and
 * ::stackpulse_spool_stat the keys a spool carries (1 to 15, written when
 * the recording ends: the values the recorder gave then). The numbers are
 * the spool's on-disk keys and never change; a new counter gets the next
 * number. Yes/no counters are 0 or 1; a counter that names an enum holds
 * its value.
 */
typedef enum stackpulse_stat {
	/* Carried by the spool (its STATS records) and counted by the recorder. */
	STACKPULSE_STAT_TRUNCATED_STACKS = 1, /**< Stacks cut (stack copy ran out,
	                                       *   bad CFI, more than 1024 frames
	                                       *   with the kernel and Python
	                                       *   ones): their leaf side is kept
	                                       *   and ends with a
	                                       *   ::STACKPULSE_FRAME_TRUNCATED
	                                       *   frame. */
	STACKPULSE_STAT_PYTHON_SAMPLES = 2,   /**< Samples that carry Python
	                                       *   frames. */
	STACKPULSE_STAT_UNWIND_ERRORS = 3,    /**< Unwinds that stopped on an error
	                                       *   (spools only: the recorder
	                                       *   answers -ENOENT). */
	STACKPULSE_STAT_PERF_EVENT = 4,       /**< The ::stackpulse_perf_event
	                                       *   used. */
	STACKPULSE_STAT_PYTHON_FRAMES = 5,    /**< 1 when a CPython target was
	                                       *   found. */
	STACKPULSE_STAT_LOST = 6,             /**< Samples the kernel reported
	                                       *   lost. */
	STACKPULSE_STAT_RING_BYTES = 7,       /**< Data bytes of the perf rings in
	                                       *   use (locked memory; as root
	                                       *   they grow while the recorder
	                                       *   falls behind). */
	STACKPULSE_STAT_STACK_COPY = 8,       /**< User stack bytes the events copy
	                                       *   now (learned, at most
	                                       *   opts.stack_size). */
	STACKPULSE_STAT_COPY_RESIZES = 9,     /**< Times the events were re-opened
	                                       *   with another copy size. */
	/* Off-CPU intervals (opts.off_cpu; docs/recording.md#off-cpu-time);
	 * a spool carries them only when intervals were recorded. */
	STACKPULSE_STAT_OFFCPU_INTERVALS = 10, /**< Off-CPU intervals written
	                                        *   (rows, each with its own
	                                        *   start and duration). */
	STACKPULSE_STAT_OFFCPU_NO_STACK = 11,  /**< Of them: written with the
	                                        *   empty stack: no stack sample
	                                        *   of their own (1 ms or longer
	                                        *   in a switch storm, or left
	                                        *   over at the end);
	                                        *   unprivileged method: the
	                                        *   interval ended before its
	                                        *   stack was read, the read
	                                        *   failed its checks, or a
	                                        *   preempted thread had no
	                                        *   recent sample. */
	STACKPULSE_STAT_OFFCPU_DROPPED = 12,   /**< Switch-ins not written: no
	                                        *   switch-out was seen for them
	                                        *   (lost in a switch storm, or
	                                        *   before recording began). */
	STACKPULSE_STAT_OFFCPU_MERGED = 13,    /**< Intervals not written as
	                                        *   rows: without a stack sample
	                                        *   of their own, their count and
	                                        *   time went into the thread's
	                                        *   next row in the same state
	                                        *   (`merged`, `merged_ns` of
	                                        *   ::stackpulse_offcpu).
	                                        *   Intervals seen:
	                                        *   `OFFCPU_INTERVALS +
	                                        *   OFFCPU_MERGED`. */
	/* Errors of one record or one process, which the recording survives
	 * (docs/recording.md#errors). */
	STACKPULSE_STAT_FAILED_RECORDS = 14,       /**< Ring records left out after
	                                            *   an error of their own (a
	                                            *   table of the spool full);
	                                            *   samples among them are in
	                                            *   DROPPED_SAMPLES too. */
	STACKPULSE_STAT_PROCESSES_UNFOLLOWED = 15, /**< Processes no longer
	                                            *   followed after an error of
	                                            *   their own (their /proc
	                                            *   snapshot failed, or a fork
	                                            *   or exec of theirs could
	                                            *   not be applied): their
	                                            *   later samples are
	                                            *   dropped. */
	/* Counted by the recorder only. */
	STACKPULSE_STAT_SAMPLES = 16,           /**< Samples written. */
	STACKPULSE_STAT_BYTES_WRITTEN = 17,     /**< Spool bytes written so far. */
	STACKPULSE_STAT_CHUNKS = 18,            /**< Chunks written so far. */
	STACKPULSE_STAT_PROCESSES = 19,         /**< Processes seen. */
	STACKPULSE_STAT_THREADS = 20,           /**< Threads seen. */
	STACKPULSE_STAT_MODULES = 21,           /**< Distinct mapped files. */
	STACKPULSE_STAT_UNIQUE_STACKS = 22,     /**< Distinct stacks interned. */
	STACKPULSE_STAT_KERNEL_FRAMES = 23,     /**< 1 when kernel frames are
	                                         *   recorded. */
	STACKPULSE_STAT_REALTIME = 24,          /**< A ::stackpulse_realtime_state:
	                                         *   whether waits and consumes
	                                         *   ran at SCHED_FIFO
	                                         *   (opts.realtime). */
	STACKPULSE_STAT_MAPPINGS_DROPPED = 25,  /**< Executable mappings not kept
	                                         *   because their process had
	                                         *   too many (16384, see
	                                         *   docs/recording.md); samples
	                                         *   in them have unknown
	                                         *   frames. */
	STACKPULSE_STAT_DROPPED_SAMPLES = 26,   /**< Samples not written: of a
	                                         *   process not followed (or no
	                                         *   longer followed), a
	                                         *   duplicate of one already
	                                         *   seen on another event, or
	                                         *   one that failed on its own
	                                         *   (FAILED_RECORDS). */
	STACKPULSE_STAT_MALFORMED_RECORDS = 27, /**< Kernel ring records skipped
	                                         *   as malformed (a kernel or
	                                         *   ring bug). */
	STACKPULSE_STAT_LOST_PER_THREAD = 28,   /**< 1 when the kernel reports lost
	                                         *   samples per event (Linux
	                                         *   6.0+): the spool then carries
	                                         *   each thread's loss. */
	STACKPULSE_STAT_LOST_THREADS = 29,      /**< Threads with samples lost so
	                                         *   far (counted when their
	                                         *   events are re-opened and at
	                                         *   finish). */
	STACKPULSE_STAT_OFFCPU_METHOD = 30,     /**< The ::stackpulse_offcpu_method
	                                         *   (::STACKPULSE_OFFCPU_NONE
	                                         *   when none are recorded). */
	STACKPULSE_STAT_UNFOLLOWED_PID = 31,    /**< The first process of
	                                         *   PROCESSES_UNFOLLOWED (0:
	                                         *   none). */
	STACKPULSE_STAT_UNFOLLOWED_ERROR = 32,  /**< Its error code, negated (a
	                                         *   positive errno or the
	                                         *   negation of a
	                                         *   ::stackpulse_error): pass
	                                         *   `-(int)value` to
	                                         *   ::stackpulse_strerror. */
	/* Reading Python stacks (CPython targets only; 0 otherwise). */
	STACKPULSE_STAT_PYTHON_READS = 33,        /**< Python stack reads (samples
	                                           *   of threads of a CPython
	                                           *   process). */
	STACKPULSE_STAT_PYTHON_READ_FAILED = 34,  /**< Reads that found no Python
	                                           *   thread state (thread not
	                                           *   yet or no longer in
	                                           *   Python). */
	STACKPULSE_STAT_PYTHON_TRUNCATED = 35,    /**< Python stacks cut (a frame
	                                           *   freed or changed under the
	                                           *   reader, depth cap). */
	STACKPULSE_STAT_PYTHON_TORN = 36,         /**< Walks that saw the stack
	                                           *   change while reading it
	                                           *   (each is retried once). */
	STACKPULSE_STAT_PYTHON_READ_NS = 37,      /**< Time spent reading Python
	                                           *   stacks; divide by
	                                           *   PYTHON_READS for the cost
	                                           *   per sample. */
	STACKPULSE_STAT_PYTHON_READ_CALLS = 38,   /**< process_vm_readv calls made
	                                           *   for them. */
	STACKPULSE_STAT_PYTHON_DELAY_NS = 39,     /**< Sum over reads of (read time
	                                           *   - sample time). */
	STACKPULSE_STAT_PYTHON_DELAY_MAX_NS = 40, /**< Largest such delay. */
	STACKPULSE_STAT_PYTHON_EARLY_READS = 41,  /**< Of PYTHON_READS: made as soon
	                                           *   as the sample reached the
	                                           *   ring, ahead of the
	                                           *   time-ordered drain. */
	STACKPULSE_STAT_PYTHON_UNREADABLE = 42,   /**< Processes running a CPython
	                                           *   the reader cannot read (for
	                                           *   example an unsupported
	                                           *   version): recorded without
	                                           *   Python frames; see
	                                           *   ::stackpulse_recorder_python_note. */
	STACKPULSE_STAT_PYTHON_PAUSES = 43,       /**< Samples at which a thread
	                                           *   was held still for its read
	                                           *   (opts.python_pause). */
	STACKPULSE_STAT_PYTHON_PAUSE_NS = 44,     /**< Time the threads were held,
	                                           *   summed over those
	                                           *   samples. */
	STACKPULSE_STAT_PYTHON_PAUSED = 45,       /**< 1 when the target is paused
	                                           *   at its samples
	                                           *   (opts.python_pause on and
	                                           *   allowed). */
} stackpulse_stat;

/** The value of ::STACKPULSE_STAT_REALTIME. */
typedef enum stackpulse_realtime_state {
	STACKPULSE_REALTIME_NOT_TRIED = 0, /**< Never asked for (yet). */
	STACKPULSE_REALTIME_ON = 1,        /**< Waits and consumes ran at SCHED_FIFO. */
	STACKPULSE_REALTIME_REFUSED = 2,   /**< Asked for and refused. */
} stackpulse_realtime_state;

/** Sets @p opts to the defaults (the values of ::STACKPULSE_RECORDER_OPTS),
 * `sz` included. For C++, where the macro is not valid. */
STACKPULSE_API void stackpulse_recorder_opts_init(stackpulse_recorder_opts *opts);

/**
 * Attaches to the running process @p pid and starts recording into @p path.
 *
 * @param pid   Target process id.
 * @param path  Spool file to create, mode 0600. It is written under a
 *              temporary name beside @p path and renamed onto @p path only
 *              once recording has started: on failure an existing file
 *              stays untouched and none is created. A symlink at @p path
 *              is replaced, not followed (docs/recording.md). With
 *              `opts.rotate_ns`, the base name of the window files
 *              `PATH.0001`, ..., each renamed onto its name once complete.
 * @param mode  How to join the process.
 * @param opts  Options, or NULL for the defaults.
 * @param out   Receives the recorder.
 * @return 0, or -ESRCH (no such process or a zombie), -EPERM/-EACCES (not
 *         allowed; ::stackpulse_last_error says which setting would allow
 *         it), -EINVAL (bad options), or an I/O error for @p path.
 *
 * The target is never left stopped, whatever the outcome.
 */
STACKPULSE_API int stackpulse_recorder_attach(pid_t pid, const char *path,
                                              enum stackpulse_attach_mode mode,
                                              const stackpulse_recorder_opts *opts,
                                              stackpulse_recorder **out);

/**
 * Starts `argv[0]` (searched in PATH) with @p argv and records it from its
 * first instruction (enable-on-exec).
 *
 * @param argv    NULL-terminated argument vector.
 * @param path    Spool file to create, as for ::stackpulse_recorder_attach;
 *                renamed onto @p path once the command was executed.
 * @param opts    Options, or NULL for the defaults.
 * @param out     Receives the recorder.
 * @param pid_out Receives the child's pid, or NULL. The caller may
 *                waitpid() it after ::stackpulse_recorder_finish; until then
 *                the recorder reaps nothing.
 */
STACKPULSE_API int stackpulse_recorder_spawn(char *const argv[], const char *path,
                                             const stackpulse_recorder_opts *opts,
                                             stackpulse_recorder **out, pid_t *pid_out);

/** What ::stackpulse_recorder_wait saw (its non-negative returns). */
typedef enum stackpulse_wait_result {
	STACKPULSE_WAIT_TIMEOUT = 0, /**< @p timeout_ms passed with nothing to do. */
	STACKPULSE_WAIT_READY = 1,   /**< Ring data is ready: call
	                              *   ::stackpulse_recorder_consume_available. */
	STACKPULSE_WAIT_EXITED = 2,  /**< Every followed process has exited: drain
	                              *   with ::stackpulse_recorder_consume_available,
	                              *   then ::stackpulse_recorder_finish. */
} stackpulse_wait_result;

/**
 * Blocks until ring data is ready, @p timeout_ms passes (-1: no limit), or
 * every followed process has exited. Returns a ::stackpulse_wait_result
 * (::STACKPULSE_WAIT_READY, ::STACKPULSE_WAIT_TIMEOUT or
 * ::STACKPULSE_WAIT_EXITED; data ready wins over exit, so a loop that
 * consumes after READY and stops at EXITED reads everything), or a negative
 * code. -EINTR is returned when a signal interrupts the wait, so callers
 * can react to SIGINT. With `opts.rotate_ns`, a window whose end has
 * passed also counts as ready data.
 */
STACKPULSE_API int stackpulse_recorder_wait(stackpulse_recorder *rec, int timeout_ms);

/**
 * Drains every ring without blocking: unwinds the samples and appends them
 * to the spool. Completed chunks reach the file. With `opts.rotate_ns`, it
 * also closes each window whose end has passed (calling `opts.on_window`)
 * and starts the next. Returns 0 or an error (for example -ENOSPC); after
 * an error the spool still holds every chunk completed before it.
 */
STACKPULSE_API int stackpulse_recorder_consume_available(stackpulse_recorder *rec);

/**
 * True while @p pid is alive and followed by @p rec (the target or a
 * followed child), false once it has exited or was never followed, or
 * once @p rec is finished. Pass 0 for "any followed process".
 */
STACKPULSE_API bool stackpulse_recorder_process_is_active(stackpulse_recorder *rec, pid_t pid);

/**
 * A descriptor that polls readable when ::stackpulse_recorder_wait would not
 * block, for use in the caller's own event loop. Owned by the recorder;
 * closed by ::stackpulse_recorder_finish (which then makes this return
 * ::STACKPULSE_ESTATE).
 */
STACKPULSE_API int stackpulse_recorder_fd(const stackpulse_recorder *rec);

/**
 * Reads counter @p key of the recording into @p value. Counters stay
 * readable after ::stackpulse_recorder_finish (they then include what
 * finish added: the last samples, the off-CPU intervals of threads still
 * off CPU, the whole file's bytes) until ::stackpulse_recorder_free.
 * @return 0; -EINVAL for a NULL argument or a key that is no counter (0 or
 *         negative); -ENOENT for a key this library does not count (a
 *         newer header's key, or ::STACKPULSE_STAT_UNWIND_ERRORS).
 */
STACKPULSE_API int stackpulse_recorder_stat(const stackpulse_recorder *rec, stackpulse_stat key,
                                            uint64_t *value);

/**
 * Why the first CPython target that could not be read was refused (for
 * example "pid 42: CPython 3.9 is not supported (stackpulse reads CPython
 * 3.10 to 3.14)"); else, when opts.python_pause was AUTO and pausing was
 * refused, why; else "". The string lives until
 * ::stackpulse_recorder_finish.
 */
STACKPULSE_API const char *stackpulse_recorder_python_note(const stackpulse_recorder *rec);

/**
 * Drains the rings, writes the remaining records, the kernel symbols, the
 * embedded symbol tables (when self_contained) and the footer, and closes
 * the file (with `opts.rotate_ns`: completes the last window and calls
 * `opts.on_window` for it). Detaches from the target, which keeps running,
 * and releases the events and rings. Returns 0 or the first error met.
 * After an error of a drain (other than a failed write of the spool) the
 * rest is still drained and sealed, so what was recorded reads back whole.
 * Afterwards only ::stackpulse_recorder_stat,
 * ::stackpulse_recorder_python_note and ::stackpulse_recorder_free may be
 * called (other calls fail with ::STACKPULSE_ESTATE); a second finish
 * returns ::STACKPULSE_ESTATE.
 */
STACKPULSE_API int stackpulse_recorder_finish(stackpulse_recorder *rec);

/**
 * Frees @p rec (NULL is ignored). A recorder not yet finished is finished
 * first (its result is lost: call ::stackpulse_recorder_finish to see it).
 */
STACKPULSE_API void stackpulse_recorder_free(stackpulse_recorder *rec);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Spool reader
 * A spool is opened once and validated completely: every chunk, checksum
 * and id is checked before the open succeeds. A cut file opens with
 * ::stackpulse_spool_meta's `truncated` set; a file with a damaged chunk
 * opens with `damaged` and `truncated` set, keeping every chunk before the
 * damage (::STACKPULSE_SPOOL_STRICT refuses it instead). The tables (processes,
 * threads, modules, frames, stacks) are kept in memory; samples are
 * streamed one chunk at a time by a ::stackpulse_sample_iter.
 * Accessors are read-only and may run concurrently.
 */
/**@{*/

/** An opened spool. Free with ::stackpulse_spool_close. */
typedef struct stackpulse_spool stackpulse_spool;

/** Recording metadata. */
struct stackpulse_spool_meta {
	uint32_t format_version;    /**< Spool format version. */
	uint64_t start_time_ns;     /**< Wall clock at start, ns since epoch. */
	uint64_t duration_ns;       /**< Last sample time minus first. */
	uint32_t frequency;         /**< Requested samples per second. */
	uint32_t stack_size;        /**< Stack copy size in bytes. */
	const char *event;          /**< "cpu-clock", "cycles", ... */
	const char *machine;        /**< uname machine, e.g. "x86_64". */
	const char *kernel_release; /**< uname release. */
	const char *hostname;       /**< uname nodename. */
	const char *kernel_note;    /**< Why kernel frames are missing, or "". */
	uint64_t samples;           /**< Samples in the file. */
	uint64_t lost;              /**< Samples reported lost. */
	uint32_t chunks;            /**< Complete chunks read. */
	uint32_t damaged_chunk;     /**< Index of the damaged chunk (equals `chunks`);
	                          *   `chunks` for a damaged footer. 0 when not damaged. */
	uint64_t damaged_offset;    /**< File offset of the damaged chunk header (or
	                          *   footer). 0 when not damaged. */
	int damaged_code;           /**< The error a strict open reports for the damage
	                          *   (for example ::STACKPULSE_ECHECKSUM); 0 when
	                          *   not damaged. */
	const char *damage;         /**< What was wrong, for example "chunk 3 at offset
	                          *   4096: checksum mismatch (...)"; "" when not damaged. */
	uint64_t start_clock_ns;    /**< The samples' clock (CLOCK_MONOTONIC) at the
	                             *   start: sample times are on this clock. */
	/** How off-CPU intervals were recorded; ::STACKPULSE_OFFCPU_NONE for
	 *  spools without them (and every spool of older writers). */
	enum stackpulse_offcpu_method off_cpu_method;
	uint64_t offcpu_intervals; /**< Off-CPU intervals in the file (rows). */
	uint64_t offcpu_merged;    /**< Intervals merged into those rows (the sum
	                            *   of their `merged`). */
	bool kernel_frames;        /**< True when kernel frames were recorded. */
	bool truncated;            /**< True when not all of the file was read: it
	                             *   was cut (no footer) or is `damaged`. */
	bool damaged;              /**< True when reading stopped at damaged bytes (a bad
	                          *   checksum, zstd frame or record): every chunk
	                          *   before them was kept, nothing after them, and
	                          *   `truncated` is 1 too. */
};

/** A process. Indexes are stable within one spool. */
typedef struct stackpulse_process {
	uint32_t index;      /**< Index in the spool's process table. */
	pid_t pid;           /**< Kernel pid (may repeat after reuse). */
	uint32_t parent;     /**< Index of the parent process, or UINT32_MAX. */
	const char *name;    /**< Latest name: from the last (by time) EXEC of
	                      *   the process or COMM of its leader thread. */
	const char *cmdline; /**< Arguments separated by spaces, from the last
	                      *   (by time) EXEC. */
	uint64_t start_ns;   /**< Time first seen. */
	uint64_t end_ns;     /**< Time of exit, or 0 when still running. */
	/* Names over time: the events in between carry the names they set
	 * (::stackpulse_spool_event `name`, `cmdline`). */
	const char *initial_name;    /**< Name when first seen. */
	const char *initial_cmdline; /**< Command line when first seen. */
} stackpulse_process;

/** A thread. */
typedef struct stackpulse_thread {
	uint32_t index;           /**< Index in the spool's thread table. */
	uint32_t process;         /**< Index of its process. */
	pid_t tid;                /**< Kernel thread id. */
	const char *name;         /**< Latest thread name: from its last (by time) COMM. */
	const char *initial_name; /**< Name when first seen. */
	uint64_t lost;            /**< Samples of this thread (and of the threads that
	                *   inherited its events) the kernel dropped, from the
	                *   per-thread STATS record; 0 when none or unknown. */
} stackpulse_thread;

/** A mapped file (binary or library). Shared by all processes mapping it. */
typedef struct stackpulse_module {
	uint32_t index;          /**< Index in the spool's module table. */
	const char *path;        /**< Path as the target saw it. */
	const uint8_t *build_id; /**< Build-id bytes, or NULL. */
	uint32_t build_id_len;   /**< Length of @c build_id (0..64). */
	bool has_symbols;        /**< True when a symbol table is embedded. */
} stackpulse_module;

/** A raw, unsymbolized frame as stored in the spool. */
typedef struct stackpulse_raw_frame {
	enum stackpulse_frame_kind kind; /**< Never INLINE. */
	uint32_t module;                 /**< Module index for NATIVE, else UINT32_MAX. */
	uint64_t offset;                 /**< File offset (NATIVE), address (KERNEL, UNKNOWN,
	                  *   JIT) or bytecode offset (PYTHON). */
	uint32_t pycode;                 /**< Python code index for PYTHON, else UINT32_MAX. */
	int32_t line;                    /**< Python line when known, else 0. */
} stackpulse_raw_frame;

/** A CPython code object as seen by the recorder. */
typedef struct stackpulse_pycode {
	uint32_t index;       /**< Index in the spool's code table. */
	const char *qualname; /**< co_qualname (co_name before 3.11). */
	const char *filename; /**< co_filename. */
	int32_t first_line;   /**< co_firstlineno. */
} stackpulse_pycode;

/** One sample. Valid until the next ::stackpulse_sample_iter_next. */
typedef struct stackpulse_sample {
	uint64_t time_ns; /**< Monotonic sample time (perf clock), ns. */
	uint32_t thread;  /**< Thread index. */
	uint32_t process; /**< Process index. */
	pid_t pid;        /**< Kernel pid. */
	pid_t tid;        /**< Kernel tid. */
	uint32_t stack;   /**< Stack id (leaf node); 0 is the empty stack. */
	uint32_t weight;  /**< Sample weight (usually 1). */
	uint32_t cpu;     /**< CPU the sample was taken on. */
} stackpulse_sample;

/** Lifecycle events recorded in the spool (not to be confused with the
 * perf event that drives sampling, ::stackpulse_perf_event). */
typedef enum stackpulse_spool_event_kind {
	STACKPULSE_SPOOL_EVENT_FORK = 1, /**< @c process forked @c other. */
	STACKPULSE_SPOOL_EVENT_EXEC = 2, /**< @c process executed a new image. */
	STACKPULSE_SPOOL_EVENT_EXIT = 3, /**< @c process (or @c thread) exited. */
	STACKPULSE_SPOOL_EVENT_LOST = 4, /**< @c count samples lost. */
	STACKPULSE_SPOOL_EVENT_COMM = 5, /**< @c thread was renamed. */
} stackpulse_spool_event_kind;

/** A lifecycle event. */
struct stackpulse_spool_event {
	enum stackpulse_spool_event_kind kind; /**< What happened. */
	uint64_t time_ns;                      /**< When it happened. */
	uint32_t process;                      /**< Process index, or UINT32_MAX. */
	uint32_t thread;                       /**< Thread index, or UINT32_MAX. */
	uint32_t other;                        /**< FORK: child process index; else UINT32_MAX. */
	uint64_t count;                        /**< LOST: number of samples. */
	/* What a rename set, so a process's names can be shown over time
	 * (start from its `initial_name`). */
	const char *name;    /**< EXEC: the process's new name; COMM: the thread's
	                      *   new name (also the process's when the thread is
	                      *   its leader); else "". */
	const char *cmdline; /**< EXEC: the new command line; else "". */
};

/** Iterator over the samples, one chunk in memory at a time. */
typedef struct stackpulse_sample_iter stackpulse_sample_iter;

/** Flags of ::stackpulse_spool_open_opts. */
typedef enum stackpulse_spool_open_flags {
	/** Fail on a damaged chunk or footer (with the damage's code and detail)
	 *  instead of opening the spool with `damaged` set. */
	STACKPULSE_SPOOL_STRICT = 1,
} stackpulse_spool_open_flags;

/** Spool open options. Initialise with ::stackpulse_spool_open_opts_init or
 * ::STACKPULSE_SPOOL_OPEN_OPTS. */
typedef struct stackpulse_spool_open_opts {
	size_t sz;       /**< sizeof(struct stackpulse_spool_open_opts). */
	uint32_t flags;  /**< ::stackpulse_spool_open_flags bits; 0: default. */
	const void *buf; /**< With a NULL path: the spool's bytes. They are not
	                  *   copied and must outlive the spool. */
	size_t len;      /**< Length of @c buf. */
} stackpulse_spool_open_opts;

/** Default spool open options: a file, damage tolerated. */
#define STACKPULSE_SPOOL_OPEN_OPTS                                                                 \
	((stackpulse_spool_open_opts){                                                             \
	        .sz = sizeof(stackpulse_spool_open_opts),                                          \
	        .flags = 0,                                                                        \
	        .buf = NULL,                                                                       \
	        .len = 0,                                                                          \
	})

/** Sets @p opts to the defaults (::STACKPULSE_SPOOL_OPEN_OPTS). */
STACKPULSE_API void stackpulse_spool_open_opts_init(stackpulse_spool_open_opts *opts);

/**
 * Opens and validates a spool: the regular file at @p path, or, when
 * @p path is NULL, the `opts->len` bytes at `opts->buf` (which are not
 * copied and must outlive the spool).
 *
 * @param path Spool file, or NULL to read `opts->buf`.
 * @param opts NULL for the defaults (a file, damage tolerated).
 * @param out  Receives the spool; NULL on failure.
 * @return 0, an errno code for I/O, -EINVAL (both or neither of a path and
 *         a buffer, unknown flags), or a format code (::STACKPULSE_EFORMAT,
 *         ::STACKPULSE_EVERSION, ::STACKPULSE_ECHECKSUM, ::STACKPULSE_ELIMIT)
 *         when the file header is bad.
 *
 * A file cut at a chunk boundary or inside a chunk opens with `truncated`
 * set, keeping every complete chunk. A file whose chunk (or footer) is
 * damaged opens with `damaged` and `truncated` set, keeping every chunk
 * before the damage; `damaged_chunk`, `damaged_offset`, `damaged_code` and
 * `damage` say where and what. ::STACKPULSE_SPOOL_STRICT refuses it instead,
 * with the damage's code and detail. Only regular files are opened.
 */
STACKPULSE_API int stackpulse_spool_open(const char *path, const stackpulse_spool_open_opts *opts,
                                         stackpulse_spool **out);

/** Closes @p spool. Iterators and symbolizers made from it must be freed
 * first. NULL is ignored. */
STACKPULSE_API void stackpulse_spool_close(stackpulse_spool *spool);

/** Returns the recording metadata. Never NULL. */
STACKPULSE_API const struct stackpulse_spool_meta *stackpulse_spool_meta(
        const stackpulse_spool *spool);

/**
 * Reads counter @p key of the recording into @p value. Returns 0, or
 * ::STACKPULSE_ENOTFOUND when the spool does not carry it (cut before its
 * end, or written by a recorder that did not count it).
 */
STACKPULSE_API int stackpulse_spool_stat(const stackpulse_spool *spool, stackpulse_stat key,
                                         uint64_t *value);

/** Number of processes. */
STACKPULSE_API uint32_t stackpulse_spool_process_count(const stackpulse_spool *spool);
/** Process @p index, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_process *stackpulse_spool_process(
        const stackpulse_spool *spool, uint32_t index);
/** Number of threads. */
STACKPULSE_API uint32_t stackpulse_spool_thread_count(const stackpulse_spool *spool);
/** Thread @p index, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_thread *stackpulse_spool_thread(
        const stackpulse_spool *spool, uint32_t index);
/**
 * The name thread @p index has in its language runtime, the latest by
 * time: for CPython, its threading.Thread name ("MainThread",
 * "Thread-1 (worker)", or what the program named it), which CPython
 * (before 3.14) does not give the OS thread. NULL when the recording has
 * none for it (not a Python thread, a thread the threading module does
 * not know, a spool of an older recorder) or @p index is out of range.
 * Valid while the spool is open.
 */
STACKPULSE_API const char *stackpulse_spool_thread_runtime_name(const stackpulse_spool *spool,
                                                                uint32_t index);
/**
 * The name to show for thread @p index: its runtime name
 * (::stackpulse_spool_thread_runtime_name) when it has one, else its OS
 * name (::stackpulse_thread `name`). Profiles and every exporter name
 * threads this way. NULL when @p index is out of range.
 */
STACKPULSE_API const char *stackpulse_spool_thread_display_name(const stackpulse_spool *spool,
                                                                uint32_t index);
/** Number of modules. */
STACKPULSE_API uint32_t stackpulse_spool_module_count(const stackpulse_spool *spool);
/** Module @p index, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_module *stackpulse_spool_module(
        const stackpulse_spool *spool, uint32_t index);
/** Number of Python code objects. */
STACKPULSE_API uint32_t stackpulse_spool_pycode_count(const stackpulse_spool *spool);
/** Python code object @p index, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_pycode *stackpulse_spool_pycode(
        const stackpulse_spool *spool, uint32_t index);
/** Number of lifecycle events. */
STACKPULSE_API uint32_t stackpulse_spool_event_count(const stackpulse_spool *spool);
/** Event @p index in time order, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_spool_event *stackpulse_spool_event(
        const stackpulse_spool *spool, uint32_t index);

/** Number of distinct raw frames. Frame ids are 0..count-1. */
STACKPULSE_API uint32_t stackpulse_spool_frame_count(const stackpulse_spool *spool);
/** Raw frame @p id, or NULL when out of range. */
STACKPULSE_API const struct stackpulse_raw_frame *stackpulse_spool_frame(
        const stackpulse_spool *spool, uint32_t id);

/** Number of stack ids, including the empty stack 0. */
STACKPULSE_API uint32_t stackpulse_spool_stack_count(const stackpulse_spool *spool);
/**
 * Reads stack node @p stack: its leaf frame id and its parent stack (the
 * same stack without the leaf; 0 ends the walk). Returns 0, or
 * ::STACKPULSE_ENOTFOUND for 0 or an unknown id.
 */
STACKPULSE_API int stackpulse_spool_stack_node(const stackpulse_spool *spool, uint32_t stack,
                                               uint32_t *frame, uint32_t *parent);
/** Depth (number of frames) of @p stack; 0 for the empty or an unknown stack. */
STACKPULSE_API uint32_t stackpulse_spool_stack_depth(const stackpulse_spool *spool, uint32_t stack);
/**
 * Copies up to @p max frame ids of @p stack into @p frames, leaf first, and
 * returns the full depth (which may exceed @p max).
 */
STACKPULSE_API uint32_t stackpulse_spool_stack_frames(const stackpulse_spool *spool, uint32_t stack,
                                                      uint32_t *frames, uint32_t max);

/** Number of kernel symbols stored in the spool. */
STACKPULSE_API uint32_t stackpulse_spool_ksym_count(const stackpulse_spool *spool);
/**
 * Finds the kernel symbol containing @p addr. On success sets @p name (and
 * @p start, @p module when not NULL; module is "" for the core kernel).
 * Returns 0 or ::STACKPULSE_ENOTFOUND.
 */
STACKPULSE_API int stackpulse_spool_ksym_lookup(const stackpulse_spool *spool, uint64_t addr,
                                                const char **name, uint64_t *start,
                                                const char **module);

/** Starts an iteration over all samples in file order. */
STACKPULSE_API int stackpulse_sample_iter_new(const stackpulse_spool *spool,
                                              stackpulse_sample_iter **out);
/**
 * Advances: returns 1 and sets @p sample, 0 at the end, or a negative code
 * (for example when the file changed on disk since it was opened).
 */
STACKPULSE_API int stackpulse_sample_iter_next(stackpulse_sample_iter *it,
                                               const struct stackpulse_sample **sample);
/** Frees @p it. NULL is ignored. */
STACKPULSE_API void stackpulse_sample_iter_free(stackpulse_sample_iter *it);

/** One off-CPU interval: a thread left the CPU at `start_ns` and ran again
 * `duration_ns` later. Valid until the next ::stackpulse_offcpu_iter_next. */
typedef struct stackpulse_offcpu {
	uint64_t start_ns;    /**< Switch-out time (perf clock), ns. */
	uint64_t duration_ns; /**< Time until the thread ran again, ns. */
	uint32_t thread;      /**< Thread index. */
	uint32_t process;     /**< Process index. */
	pid_t pid;            /**< Kernel pid. */
	pid_t tid;            /**< Kernel tid. */
	uint32_t stack;       /**< Stack when it left the CPU (leaf node); 0: unknown. */
	/** Blocked or preempted. */
	enum stackpulse_offcpu_state state;
	/** Earlier intervals of the thread in the same state, without a stack
	 *  sample of their own, that this row stands for too (0 for spools of
	 *  older writers): their stack is counted as this one's, statistically
	 *  (docs/recording.md#off-cpu-time). */
	uint64_t merged;
	uint64_t merged_ns; /**< Their time off CPU in all, ns. */
} stackpulse_offcpu;

/** Iterator over the off-CPU intervals, one chunk in memory at a time. */
typedef struct stackpulse_offcpu_iter stackpulse_offcpu_iter;

/** Starts an iteration over all off-CPU intervals in file order (none for
 * spools recorded without ::stackpulse_recorder_opts `off_cpu`). */
STACKPULSE_API int stackpulse_offcpu_iter_new(const stackpulse_spool *spool,
                                              stackpulse_offcpu_iter **out);
/**
 * Advances: returns 1 and sets @p interval, 0 at the end, or a negative
 * code (for example when the file changed on disk since it was opened).
 */
STACKPULSE_API int stackpulse_offcpu_iter_next(stackpulse_offcpu_iter *it,
                                               const struct stackpulse_offcpu **interval);
/** Frees @p it. NULL is ignored. */
STACKPULSE_API void stackpulse_offcpu_iter_free(stackpulse_offcpu_iter *it);

/** A spool being tailed while it is written (::stackpulse_spool_tail_open). */
typedef struct stackpulse_spool_tail stackpulse_spool_tail;

/** Where a tailed spool stands after ::stackpulse_spool_tail_poll. */
typedef enum stackpulse_tail_state {
	/** The writer is still at work: poll again later. */
	STACKPULSE_TAIL_GROWING = 0,
	/** The footer was read: every sample has been delivered. */
	STACKPULSE_TAIL_COMPLETE = 1,
	/** The writer is gone without a footer (killed, crashed) or the file is
	 *  damaged (`damaged` in ::stackpulse_spool_meta): every complete chunk
	 *  before the end or the damage has been delivered. */
	STACKPULSE_TAIL_TRUNCATED = 2,
} stackpulse_tail_state;

/** Called with each new sample; nonzero stops the poll and is returned
 * (the rest of that chunk's samples are not delivered). @p sample is valid
 * during the call only. */
typedef int (*stackpulse_sample_fn)(const struct stackpulse_sample *sample, void *ctx);

/** Tail options. Initialise with ::stackpulse_spool_tail_opts_init or
 * ::STACKPULSE_SPOOL_TAIL_OPTS. */
typedef struct stackpulse_spool_tail_opts {
	size_t sz;      /**< sizeof(struct stackpulse_spool_tail_opts). */
	uint32_t flags; /**< ::stackpulse_spool_open_flags bits: with
	                 *   ::STACKPULSE_SPOOL_STRICT a damaged chunk fails the
	                 *   poll instead of ending the tail as truncated. */
} stackpulse_spool_tail_opts;

/** Default tail options. */
#define STACKPULSE_SPOOL_TAIL_OPTS                                                                 \
	((stackpulse_spool_tail_opts){                                                             \
	        .sz = sizeof(stackpulse_spool_tail_opts),                                          \
	        .flags = 0,                                                                        \
	})

/** Sets @p opts to the defaults (::STACKPULSE_SPOOL_TAIL_OPTS). */
STACKPULSE_API void stackpulse_spool_tail_opts_init(stackpulse_spool_tail_opts *opts);

/**
 * Opens the spool file at @p path to read it while a recorder is still
 * writing it. Nothing is read yet: each ::stackpulse_spool_tail_poll reads
 * the chunks that have landed since the last one, with the checks of
 * ::stackpulse_spool_open. The file may be empty still.
 *
 * The writer is known alive by the flock(LOCK_EX) a recorder holds on its
 * spool until it closes it (the kernel releases it when the recorder dies).
 * A spool nobody holds is read to its end by the first poll.
 *
 * @return 0, -ENOENT (a recorder creates its spool under a temporary name
 *         and gives it @p path once recording has started), another errno
 *         code, or -EINVAL for unknown flags.
 */
STACKPULSE_API int stackpulse_spool_tail_open(const char *path,
                                              const stackpulse_spool_tail_opts *opts,
                                              stackpulse_spool_tail **out);

/**
 * Reads every chunk completed since the last poll, adds its records to the
 * tables and calls @p fn (may be NULL) with each of its samples, in file
 * order. A chunk not fully written yet is left for a later poll; a
 * complete chunk that fails its checksum while the writer is alive is read
 * again at the next poll before it counts as damage (a write in progress).
 * Never blocks: call it about as often as the view should change.
 *
 * @param state Receives ::STACKPULSE_TAIL_GROWING, or, once the footer was
 *        read or the writer is gone, COMPLETE or TRUNCATED; later polls
 *        read nothing and say the same.
 * @return 0, an errno code for I/O, or @p fn's nonzero return. The file
 *         header's format codes (::STACKPULSE_EFORMAT, ...) as in
 *         ::stackpulse_spool_open.
 *
 * Memory: the tables grow with new processes, threads, modules, frames and
 * stacks only; no sample and no chunk is kept, so a long recording of the
 * same code stays flat.
 */
STACKPULSE_API int stackpulse_spool_tail_poll(stackpulse_spool_tail *tail, stackpulse_sample_fn fn,
                                              void *ctx, enum stackpulse_tail_state *state);

/**
 * The spool read so far, owned by @p tail (do not close it): its tables
 * and metadata (`samples`, `chunks`,
 * `truncated` and the damage fields count what was delivered). Pass it to
 * ::stackpulse_symbolizer_new once: the symbolizer picks up the modules
 * and symbol tables that later polls add. Pointers it returns (process,
 * frame, ...) are valid until the next poll; names stay valid until the
 * tail is closed. It has no sample iterator (samples come by the poll).
 */
STACKPULSE_API const stackpulse_spool *stackpulse_spool_tail_spool(
        const stackpulse_spool_tail *tail);

/** Closes @p tail; symbolizers made from its spool must be freed first.
 * NULL is ignored. */
STACKPULSE_API void stackpulse_spool_tail_close(stackpulse_spool_tail *tail);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Symbolizer
 * Turns raw frames into names, files, lines and inline chains using
 * embedded symbol tables, the symbol cache, local debug files and (when
 * built in and `DEBUGINFOD_URLS` is set) debuginfod. Files whose build-id
 * differs from the recorded one are never used.
 * Not thread-safe; use one symbolizer per thread.
 */
/**@{*/

/** A symbolizer bound to one spool. Free with ::stackpulse_symbolizer_free. */
typedef struct stackpulse_symbolizer stackpulse_symbolizer;
/** One resolved frame, valid only during the callback that receives it
 * (the frame pointer itself; see ::stackpulse_frame_func_name for how long
 * its strings live). */
typedef struct stackpulse_frame stackpulse_frame;

/** Symbolizer flags. */
typedef enum stackpulse_symbolizer_flag {
	STACKPULSE_SYM_RAW_NAMES = 1u << 0, /**< Do not demangle. */
	STACKPULSE_SYM_OFFLINE = 1u << 1,   /**< Use only tables embedded in the
	                                     *   spool; open no files at all. */
	STACKPULSE_SYM_NO_INLINE = 1u << 2, /**< Do not expand inline frames. */
	STACKPULSE_SYM_NO_CACHE = 1u << 3,  /**< Neither read nor write the
	                                     *   on-disk symbol cache. */
} stackpulse_symbolizer_flag;

/** Symbolizer options. Initialise with ::stackpulse_symbolizer_opts_init
 * or ::STACKPULSE_SYMBOLIZER_OPTS. */
typedef struct stackpulse_symbolizer_opts {
	size_t sz;              /**< sizeof(struct stackpulse_symbolizer_opts). */
	uint32_t flags;         /**< ::stackpulse_symbolizer_flag bits. */
	const char *debug_dirs; /**< Colon-separated debug roots; NULL: the
	                         *   `STACKPULSE_DEBUG_DIRS` variable, else
	                         *   /usr/lib/debug. */
	const char *cache_dir;  /**< Symbol cache directory, as in
	                         *   ::stackpulse_recorder_opts: NULL:
	                         *   `STACKPULSE_SYMBOL_CACHE_DIR`, else
	                         *   `$XDG_CACHE_HOME/stackpulse`, else
	                         *   `~/.cache/stackpulse`; "": no cache (as
	                         *   ::STACKPULSE_SYM_NO_CACHE). A set
	                         *   `STACKPULSE_NO_SYMBOL_CACHE` (other than
	                         *   "0") turns the cache off whatever this says. */
} stackpulse_symbolizer_opts;

/** Default symbolizer options. */
#define STACKPULSE_SYMBOLIZER_OPTS                                                                 \
	((stackpulse_symbolizer_opts){                                                             \
	        .sz = sizeof(stackpulse_symbolizer_opts),                                          \
	        .flags = 0,                                                                        \
	        .debug_dirs = NULL,                                                                \
	        .cache_dir = NULL,                                                                 \
	})

/** Sets @p opts to the defaults (::STACKPULSE_SYMBOLIZER_OPTS). */
STACKPULSE_API void stackpulse_symbolizer_opts_init(stackpulse_symbolizer_opts *opts);

/**
 * Called once per frame, leaf first. Return 0 to continue, nonzero to stop
 * the walk (that value is then returned by the walking function).
 */
typedef int (*stackpulse_frame_fn)(const stackpulse_frame *frame, void *ctx);

/** Creates a symbolizer for @p spool (which must outlive it). */
STACKPULSE_API int stackpulse_symbolizer_new(const stackpulse_spool *spool,
                                             const stackpulse_symbolizer_opts *opts,
                                             stackpulse_symbolizer **out);
/** Frees @p sym and writes any new symbol-cache entries. NULL is ignored. */
STACKPULSE_API void stackpulse_symbolizer_free(stackpulse_symbolizer *sym);

/** Where a symbolizer's answers came from and what they cost so far.
 * Filled by ::stackpulse_symbolizer_stats. Counters only grow. */
struct stackpulse_symbolizer_stats {
	size_t sz;                   /**< Set by the caller to sizeof(*stats). */
	uint64_t binaries_opened;    /**< Binaries opened, build-id verified. */
	uint64_t build_id_mismatch;  /**< Binaries rejected for another build-id. */
	uint64_t debug_files;        /**< Separate debug files opened. */
	uint64_t debuginfod_queries; /**< debuginfod lookups made. */
	uint64_t dwarf_loads;        /**< Modules whose DWARF was loaded. */
	uint64_t dwarf_lookups;      /**< Addresses resolved through DWARF. */
	uint64_t cache_hits;         /**< Addresses answered by the on-disk symbol
	                              *   cache. */
	uint64_t embedded_hits;      /**< Addresses answered by a symbol table
	                              *   embedded in the spool. */
	uint64_t result_hits;        /**< Addresses answered from memory (asked
	                              *   before). */
	uint64_t cache_writes;       /**< Symbol-cache files written. */
};

/**
 * Copies @p sym's counters into @p stats (set `stats->sz` first): for
 * example, to see whether a slow report went to debuginfod or to DWARF.
 * Returns 0 or -EINVAL.
 */
STACKPULSE_API int stackpulse_symbolizer_stats(const stackpulse_symbolizer *sym,
                                               struct stackpulse_symbolizer_stats *stats);

/**
 * Walks the frames of @p sample's stack from leaf to root, expanding inline
 * frames (innermost first). Returns 0, the callback's nonzero value, or a
 * negative code. Unresolved frames are still reported, never dropped.
 */
STACKPULSE_API int stackpulse_symbolizer_for_each_frame(stackpulse_symbolizer *sym,
                                                        const struct stackpulse_sample *sample,
                                                        stackpulse_frame_fn fn, void *ctx);
/** Like ::stackpulse_symbolizer_for_each_frame, for a stack id. */
STACKPULSE_API int stackpulse_symbolizer_for_each_stack_frame(stackpulse_symbolizer *sym,
                                                              uint32_t stack,
                                                              stackpulse_frame_fn fn, void *ctx);
/** Resolves one raw frame id, calling @p fn for it and its inline parents. */
STACKPULSE_API int stackpulse_symbolizer_resolve_frame(stackpulse_symbolizer *sym,
                                                       uint32_t frame_id, stackpulse_frame_fn fn,
                                                       void *ctx);

/**
 * Function name; never NULL: "[unknown]" or "module+0xOFFSET" when
 * unresolved.
 *
 * Lifetime of the frame strings (this one, ::stackpulse_frame_file and
 * ::stackpulse_frame_module): they are owned by the symbolizer and stay
 * valid, unchanged, until ::stackpulse_symbolizer_free, so they may be kept
 * after the callback returns (the ::stackpulse_frame itself may not). Do not
 * free them. To keep names beyond the symbolizer, copy them or build a
 * profile (::stackpulse_profile_build), which owns copies.
 */
STACKPULSE_API const char *stackpulse_frame_func_name(const stackpulse_frame *frame);
/** Source file, or NULL when unknown. */
STACKPULSE_API const char *stackpulse_frame_file(const stackpulse_frame *frame);
/** Source line, or 0 when unknown. */
STACKPULSE_API uint32_t stackpulse_frame_line(const stackpulse_frame *frame);
/** Module path (binary, "[kernel.kallsyms]", or the kernel module), or NULL. */
STACKPULSE_API const char *stackpulse_frame_module(const stackpulse_frame *frame);
/** File offset in the module, kernel address, or Python bytecode offset. */
STACKPULSE_API uint64_t stackpulse_frame_offset(const stackpulse_frame *frame);
/** What the frame stands for. */
STACKPULSE_API enum stackpulse_frame_kind stackpulse_frame_kind(const stackpulse_frame *frame);
/** The raw frame id this frame came from. */
STACKPULSE_API uint32_t stackpulse_frame_raw_id(const stackpulse_frame *frame);
/** Inline depth: 0 for the physical frame, 1.. for frames inlined into it,
 * counted from the outermost. */
STACKPULSE_API uint32_t stackpulse_frame_inline_depth(const stackpulse_frame *frame);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Profile model
 * Deduplicated tables in the shape profiler UIs use. Memory grows with the
 * number of unique frames and stacks, plus one small record per sample
 * kept, or per merged group of samples (`merge_ns`). A profile does not reference the spool or symbolizer after
 * ::stackpulse_profile_build returns; it owns all its strings.
 */
/**@{*/

/** A built profile. Free with ::stackpulse_profile_free. */
typedef struct stackpulse_profile stackpulse_profile;

/** Which frames a profile keeps. */
typedef enum stackpulse_view {
	STACKPULSE_VIEW_MIXED = 0,       /**< Native and Python frames. */
	STACKPULSE_VIEW_PYTHON_ONLY = 1, /**< Only Python frames. */
	STACKPULSE_VIEW_NATIVE_ONLY = 2, /**< Raw native frames, no Python merge. */
} stackpulse_view;

/** Profile flags. */
typedef enum stackpulse_profile_flag {
	STACKPULSE_PROFILE_MERGE_INLINE = 1u << 0, /**< Drop inline frames. */
	STACKPULSE_PROFILE_HIDE_KERNEL = 1u << 1,  /**< Drop kernel frames. */
	STACKPULSE_PROFILE_BY_PROCESS = 1u << 2,   /**< Root stacks at their process. */
	STACKPULSE_PROFILE_BY_THREAD = 1u << 3,    /**< Root stacks at their thread. */
	/** Native code that no symbol covers (a stripped binary) becomes one
	 *  function per binary, "BASENAME [unresolved]", instead of one
	 *  "BASENAME+0xOFFSET" per address; frames keep their addresses. */
	STACKPULSE_PROFILE_GROUP_UNRESOLVED = 1u << 4,
} stackpulse_profile_flag;

/** What a profile's sample values measure (::stackpulse_profile_opts `time`). */
typedef enum stackpulse_time {
	/** Sample counts (weights) of the on-CPU samples; off-CPU intervals
	 *  are left out. The default. */
	STACKPULSE_TIME_SAMPLES = 0,
	/** On-CPU time: each sample stands for `weight` × 10^9 / frequency
	 *  nanoseconds. */
	STACKPULSE_TIME_CPU = 1,
	/** Off-CPU time: each off-CPU interval stands for its duration. */
	STACKPULSE_TIME_OFF = 2,
	/** Wall-clock time: on-CPU plus off-CPU time. */
	STACKPULSE_TIME_WALL = 3,
} stackpulse_time;

/** Profile options. Initialise with ::stackpulse_profile_opts_init or
 * ::STACKPULSE_PROFILE_OPTS. */
typedef struct stackpulse_profile_opts {
	size_t sz;                 /**< sizeof(struct stackpulse_profile_opts). */
	uint32_t flags;            /**< ::stackpulse_profile_flag bits. */
	enum stackpulse_view view; /**< Which frames to keep. */
	uint64_t start_ns;         /**< Keep samples at or after this time (0: all). */
	uint64_t end_ns;           /**< Keep samples before this time (0: all). */
	pid_t pid;                 /**< Keep only this pid (0: all). */
	pid_t tid;                 /**< Keep only this tid (0: all). */
	/** What sample values measure: counts (default) or nanoseconds of
	 * CPU, off-CPU or wall-clock time (docs/exporters.md#time). Added
	 * after 0.2.0. */
	enum stackpulse_time time;
	/** Merges the samples (and off-CPU intervals) of one thread, leaf stack
	 * and kind whose times fall in one window of this many nanoseconds
	 * (equal `time_ns / merge_ns`) into one record: its `weight` and
	 * `value` are sums, its `time_ns` the earliest (a record whose weight
	 * would pass UINT32_MAX starts another). 0 (the default):
	 * one record per sample. ::STACKPULSE_MERGE_ALL: one record per thread,
	 * stack and kind, so that memory grows with distinct stacks and
	 * threads, not with samples; every aggregate exporter (folded, SVG,
	 * pprof, OTLP) and ::stackpulse_profile_func_counts give the same
	 * output for either. Added after 0.2.0. */
	uint64_t merge_ns;
	/** Caps for untrusted spools (0: none). Past them the build fails with
	 * ::STACKPULSE_ELIMIT: more than `max_samples` kept samples and
	 * intervals, or more than `max_stacks` stack nodes
	 * (::stackpulse_profile_stack_count). Added after 0.2.0. */
	uint64_t max_samples;
	uint32_t max_stacks; /**< See `max_samples`. */
} stackpulse_profile_opts;

/** ::stackpulse_profile_opts `merge_ns`: merge across all times. */
#define STACKPULSE_MERGE_ALL UINT64_MAX

/** Default profile options. */
#define STACKPULSE_PROFILE_OPTS                                                                    \
	((stackpulse_profile_opts){                                                                \
	        .sz = sizeof(stackpulse_profile_opts),                                             \
	        .flags = 0,                                                                        \
	        .view = STACKPULSE_VIEW_MIXED,                                                     \
	        .start_ns = 0,                                                                     \
	        .end_ns = 0,                                                                       \
	        .pid = 0,                                                                          \
	        .tid = 0,                                                                          \
	        .time = STACKPULSE_TIME_SAMPLES,                                                   \
	        .merge_ns = 0,                                                                     \
	        .max_samples = 0,                                                                  \
	        .max_stacks = 0,                                                                   \
	})

/** Sets @p opts to the defaults (::STACKPULSE_PROFILE_OPTS). */
STACKPULSE_API void stackpulse_profile_opts_init(stackpulse_profile_opts *opts);

/** A function: a name in a file and module. */
struct stackpulse_profile_func {
	uint32_t name;                   /**< String index. */
	uint32_t file;                   /**< String index (0: unknown). */
	uint32_t module;                 /**< String index (0: unknown). */
	enum stackpulse_frame_kind kind; /**< What the function's frames are. */
};

/** A frame: a function at a line and address. */
struct stackpulse_profile_frame {
	uint32_t func;         /**< Function index. */
	uint32_t line;         /**< Source line, 0 when unknown. */
	uint64_t address;      /**< Module offset or kernel address. */
	uint32_t inline_depth; /**< 0: physical frame. */
};

/** A node of the stack prefix tree. Node 0 is the root (no frame). */
struct stackpulse_profile_stack {
	uint32_t parent; /**< Parent node (toward the root). */
	uint32_t frame;  /**< Frame index of this node. */
};

/** A kept sample: an on-CPU sample, or (in the OFF and WALL time views)
 * an off-CPU interval. */
struct stackpulse_profile_sample {
	uint64_t time_ns; /**< Sample time; an interval's switch-out time. */
	uint32_t thread;  /**< Thread index. */
	uint32_t stack;   /**< Leaf stack node. */
	uint32_t weight;  /**< Weight (for an off-CPU interval: 1 plus the
	                   *   intervals merged into it). */
	uint32_t off_cpu; /**< 1 for an off-CPU interval, 0 for an on-CPU sample. */
	/** What it counts for in the profile: `weight` (::STACKPULSE_TIME_SAMPLES)
	 *  or nanoseconds (the other ::stackpulse_time views). Function counts
	 *  and exporters sum this. */
	uint64_t value;
};

/** A thread. */
struct stackpulse_profile_thread {
	pid_t tid;        /**< Kernel tid. */
	uint32_t name;    /**< String index. */
	uint32_t process; /**< Process index. */
};

/** A process. */
struct stackpulse_profile_process {
	pid_t pid;        /**< Kernel pid. */
	uint32_t name;    /**< String index. */
	uint32_t cmdline; /**< String index. */
	uint32_t parent;  /**< Parent process index, or UINT32_MAX. */
};

/**
 * Builds a profile from @p spool, resolving frames through @p sym (which
 * may be NULL: frames then read as module+offset, kernel and Python frames
 * still get their names from the spool).
 *
 * @param spool The spool to read; it must outlive the call only.
 * @param sym  Symbolizer of @p spool, or NULL.
 * @param opts NULL for the defaults. Times compare with
 *             `stackpulse_sample.time_ns`.
 * @param out  Receives the profile; NULL on failure.
 * @return 0, -EINVAL (bad options), -ENOMEM, ::STACKPULSE_EFORMAT (the
 *         spool's ids are inconsistent) or an error of the sample iterator.
 *
 * Ownership: the profile owns every table and string; @p spool and @p sym
 * may be freed as soon as this returns. Accessor pointers stay valid until
 * ::stackpulse_profile_free. A built profile is read-only, so accessors and
 * exporters may run on it from several threads at once. @p sym is used (and
 * its caches filled) during the call only. See docs/exporters.md.
 */
STACKPULSE_API int stackpulse_profile_build(const stackpulse_spool *spool,
                                            stackpulse_symbolizer *sym,
                                            const stackpulse_profile_opts *opts,
                                            stackpulse_profile **out);
/** Frees @p profile. NULL is ignored. */
STACKPULSE_API void stackpulse_profile_free(stackpulse_profile *profile);

/** Number of strings; string 0 is "". */
STACKPULSE_API uint32_t stackpulse_profile_string_count(const stackpulse_profile *p);
/** String @p i, or NULL when out of range. */
STACKPULSE_API const char *stackpulse_profile_string(const stackpulse_profile *p, uint32_t i);
/** Number of functions. */
STACKPULSE_API uint32_t stackpulse_profile_function_count(const stackpulse_profile *p);
/** Function @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_func *stackpulse_profile_func(
        const stackpulse_profile *p, uint32_t i);
/** Number of frames. */
STACKPULSE_API uint32_t stackpulse_profile_frame_count(const stackpulse_profile *p);
/** Frame @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_frame *stackpulse_profile_frame(
        const stackpulse_profile *p, uint32_t i);
/** Number of stack nodes, including the root 0. */
STACKPULSE_API uint32_t stackpulse_profile_stack_count(const stackpulse_profile *p);
/** Stack node @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_stack *stackpulse_profile_stack(
        const stackpulse_profile *p, uint32_t i);
/** Number of sample records kept (a merged record counts once). */
STACKPULSE_API uint64_t stackpulse_profile_sample_count(const stackpulse_profile *p);
/** Number of on-CPU samples (@p off_cpu 0) or off-CPU intervals (1) kept,
 * merged or not. Added after 0.2.0. */
STACKPULSE_API uint64_t stackpulse_profile_kept_count(const stackpulse_profile *p, int off_cpu);
/** What the sample values of @p p measure (its opts `time`). */
STACKPULSE_API enum stackpulse_time stackpulse_profile_time(const stackpulse_profile *p);
/** Sample @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_sample *stackpulse_profile_sample(
        const stackpulse_profile *p, uint64_t i);
/** Number of threads. */
STACKPULSE_API uint32_t stackpulse_profile_thread_count(const stackpulse_profile *p);
/** Thread @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_thread *stackpulse_profile_thread(
        const stackpulse_profile *p, uint32_t i);
/** Number of processes. */
STACKPULSE_API uint32_t stackpulse_profile_process_count(const stackpulse_profile *p);
/** Process @p i, or NULL. */
STACKPULSE_API const struct stackpulse_profile_process *stackpulse_profile_process(
        const stackpulse_profile *p, uint32_t i);

/** Sample weights of one function (::stackpulse_profile_func_counts). */
typedef struct stackpulse_profile_func_count {
	uint32_t func;      /**< Function index. */
	uint64_t self;      /**< Weight of samples whose leaf frame is in this
	                     *   function (leaf, or "self", time). */
	uint64_t inclusive; /**< Weight of samples with this function anywhere
	                     *   on the stack, each sample counted once even
	                     *   when the function recurses. */
} stackpulse_profile_func_count;

/**
 * Per-function self and inclusive weights over every kept sample, so that
 * a "top functions" table needs no table of its own.
 *
 * @param p    The profile.
 * @param out  Receives an array of ::stackpulse_profile_func_count, one per
 *             function that has a non-zero inclusive weight, sorted by
 *             `self` descending, then `inclusive` descending, then function
 *             index. Owned by @p p: valid until ::stackpulse_profile_free.
 *             NULL when @p count is 0.
 * @param count Receives the number of entries.
 * @return 0, -EINVAL or -ENOMEM. The array is computed on the first call
 *         and kept; calls may run from several threads at once.
 *
 * The leaf frame is the sample's leaf stack node after the profile's view
 * and flags were applied (an inline frame counts for the inlined function
 * unless ::STACKPULSE_PROFILE_MERGE_INLINE). The weights sum to the
 * sample weights: the sum of `self` over all entries is the total weight of
 * the samples with a non-empty stack.
 */
STACKPULSE_API int stackpulse_profile_func_counts(const stackpulse_profile *p,
                                                  const struct stackpulse_profile_func_count **out,
                                                  uint32_t *count);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Exporters
 * Each exporter streams its output through a ::stackpulse_write_fn so the
 * caller chooses the destination; ::stackpulse_export_to_path writes a file.
 */
/**@{*/

/** Receives output bytes. Return 0, or a negative code to abort. */
typedef int (*stackpulse_write_fn)(void *ctx, const void *data, size_t len);

/** Output formats. */
typedef enum stackpulse_export_format {
	STACKPULSE_EXPORT_FOLDED = 1,  /**< flamegraph.pl folded stacks. */
	STACKPULSE_EXPORT_PPROF = 2,   /**< gzip'd profile.proto. */
	STACKPULSE_EXPORT_FIREFOX = 3, /**< Firefox Profiler (Gecko) JSON. */
	STACKPULSE_EXPORT_SVG = 4,     /**< Interactive SVG flame graph. */
	STACKPULSE_EXPORT_OTLP = 5,    /**< OTLP profiles (v1development)
	                                *   ExportProfilesServiceRequest, protobuf. */
	/** Sysprof capture (`.syscap`, libsysprof-capture format 1, as
	 *  Sysprof 3.46 opens it). Added after 0.2.0. */
	STACKPULSE_EXPORT_SYSCAP = 6,
} stackpulse_export_format;

/** Exporter flags. */
typedef enum stackpulse_export_flag {
	STACKPULSE_EXPORT_PID = 1u << 0,          /**< Folded: "name-PID" roots. */
	STACKPULSE_EXPORT_TID = 1u << 1,          /**< Folded: "/TID" on roots. */
	STACKPULSE_EXPORT_LINES = 1u << 2,        /**< Add ":line" to frames. */
	STACKPULSE_EXPORT_THREAD_NAMES = 1u << 3, /**< Root at thread names. */
} stackpulse_export_flag;

/** Exporter options. Initialise with ::stackpulse_export_opts_init or
 * ::STACKPULSE_EXPORT_OPTS. */
typedef struct stackpulse_export_opts {
	size_t sz;                 /**< sizeof(struct stackpulse_export_opts). */
	uint32_t flags;            /**< ::stackpulse_export_flag bits. */
	const char *title;         /**< SVG title; NULL: "Flame Graph". */
	const char *app;           /**< OTLP `service.name` resource attribute;
	                    *   NULL: "stackpulse". */
	const char *const *labels; /**< OTLP: `key=value` strings added as
	                            *   resource attributes (a key is at most
	                            *   255 bytes); -EINVAL when one has no `=`. */
	size_t nlabels;            /**< Number of @c labels. */
	/** Cap for untrusted input: the export fails with ::STACKPULSE_ELIMIT
	 *  rather than write more than this many bytes (0: only the format's
	 *  own cap, docs/exporters.md; a larger value is lowered to it). Folded
	 *  output is measured before its first byte. Added after 0.2.0. */
	uint64_t max_bytes;
} stackpulse_export_opts;

/** Default exporter options. */
#define STACKPULSE_EXPORT_OPTS                                                                     \
	((stackpulse_export_opts){                                                                 \
	        .sz = sizeof(stackpulse_export_opts),                                              \
	        .flags = 0,                                                                        \
	        .title = NULL,                                                                     \
	        .app = NULL,                                                                       \
	        .labels = NULL,                                                                    \
	        .nlabels = 0,                                                                      \
	        .max_bytes = 0,                                                                    \
	})

/** Sets @p opts to the defaults (::STACKPULSE_EXPORT_OPTS). */
STACKPULSE_API void stackpulse_export_opts_init(stackpulse_export_opts *opts);

/** Writes @p p in @p format through @p fn. */
STACKPULSE_API int stackpulse_export(const stackpulse_profile *p,
                                     enum stackpulse_export_format format,
                                     const stackpulse_export_opts *opts, stackpulse_write_fn fn,
                                     void *ctx);
/** Writes @p p in @p format to the file @p path: written beside it and
 * renamed onto it when complete (a failure leaves an existing file as it
 * was; a symlink or hard link at @p path is replaced, not written
 * through). */
STACKPULSE_API int stackpulse_export_to_path(const stackpulse_profile *p,
                                             enum stackpulse_export_format format,
                                             const stackpulse_export_opts *opts, const char *path);

/**
 * Builds the profile of @p spool (as ::stackpulse_profile_build with
 * @p popts) and writes it in @p format through @p fn, in memory that grows
 * with the distinct stacks and threads, not with the samples: the
 * aggregate formats (folded, SVG, pprof, OTLP) merge the samples
 * (`merge_ns` ::STACKPULSE_MERGE_ALL unless @p popts sets a window), and
 * Firefox builds the merged profile, then reads the samples again from the
 * spool, one pass per thread, writing each as it comes (a spool of at most
 * 256K samples and intervals is written from an unmerged profile, in one
 * more pass). Sysprof holds one
 * record per sample (unless @p popts merges). The output is the bytes
 * ::stackpulse_export gives for the unmerged profile, except that Firefox
 * samples of a thread come in spool order (on-CPU samples and off-CPU
 * intervals interleaved by time), not sorted.
 *
 * @return 0, or an error of ::stackpulse_profile_build or
 *         ::stackpulse_export (::STACKPULSE_ELIMIT past a cap of
 *         @p popts or @p opts). @p spool and @p sym are used during the
 *         call only. Added after 0.2.0.
 */
STACKPULSE_API int stackpulse_export_spool(const stackpulse_spool *spool,
                                           stackpulse_symbolizer *sym,
                                           const stackpulse_profile_opts *popts,
                                           enum stackpulse_export_format format,
                                           const stackpulse_export_opts *opts,
                                           stackpulse_write_fn fn, void *ctx);
/** ::stackpulse_export_spool to the file @p path, written as
 * ::stackpulse_export_to_path writes. Added after 0.2.0. */
STACKPULSE_API int stackpulse_export_spool_to_path(const stackpulse_spool *spool,
                                                   stackpulse_symbolizer *sym,
                                                   const stackpulse_profile_opts *popts,
                                                   enum stackpulse_export_format format,
                                                   const stackpulse_export_opts *opts,
                                                   const char *path);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Pushing profiles to a continuous-profiling backend
 * HTTP through libcurl, loaded at the first push (unless built with `-Dcurl=false`:
 * then ::stackpulse_push fails with ::STACKPULSE_EUNSUPPORTED). See
 * docs/continuous.md.
 */
/**@{*/

/** Backend protocols. */
typedef enum stackpulse_push_protocol {
	/** Grafana Pyroscope: the gzip'd pprof is POSTed as the raw body
	 *  (`application/octet-stream`) to
	 *  `URL/ingest?name=APP.cpu{LABELS}&from=S&until=S&format=pprof`. */
	STACKPULSE_PUSH_PYROSCOPE = 1,
	/** OTLP/HTTP: an ExportProfilesServiceRequest (protobuf, profiles
	 *  v1development) is POSTed to `URL/v1development/profiles`. */
	STACKPULSE_PUSH_OTLP = 2,
} stackpulse_push_protocol;

/** Push options. Initialise with ::stackpulse_push_opts_init or
 * ::STACKPULSE_PUSH_OPTS. */
typedef struct stackpulse_push_opts {
	size_t sz;                              /**< sizeof(struct stackpulse_push_opts). */
	enum stackpulse_push_protocol protocol; /**< Where to send. */
	const char *url;                        /**< Base URL (`http://` or `https://`), without the
	                            *   path the protocol adds. */
	const char *app;                        /**< Application name; NULL: "stackpulse". */
	const char *const *labels;              /**< `key=value` strings. */
	size_t nlabels;                         /**< Number of @c labels. */
	uint32_t timeout_ms;                    /**< Per attempt, connection included;
	                            *   0: 10000. */
	uint32_t retries;                       /**< Further attempts after an HTTP 5xx or 429
	                            *   answer. */
	uint32_t backoff_ms;                    /**< Wait before the first retry, doubled for
	                            *   each next one; 0: 500. */
} stackpulse_push_opts;

/** Default push options: 3 retries. */
#define STACKPULSE_PUSH_OPTS                                                                       \
	((stackpulse_push_opts){                                                                   \
	        .sz = sizeof(stackpulse_push_opts),                                                \
	        .protocol = STACKPULSE_PUSH_PYROSCOPE,                                             \
	        .url = NULL,                                                                       \
	        .app = NULL,                                                                       \
	        .labels = NULL,                                                                    \
	        .nlabels = 0,                                                                      \
	        .timeout_ms = 0,                                                                   \
	        .retries = 3,                                                                      \
	        .backoff_ms = 0,                                                                   \
	})

/** Sets @p opts to the defaults (the values of ::STACKPULSE_PUSH_OPTS). */
STACKPULSE_API void stackpulse_push_opts_init(stackpulse_push_opts *opts);

/**
 * Sends @p p to a profiling backend in one HTTP POST (retried as
 * @p opts says). Blocks for at most about
 * (retries + 1) × timeout_ms plus the backoff waits.
 *
 * @return 0 once the backend answered 2xx; -EINVAL (bad options or labels),
 *         -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH (no connection),
 *         -EPROTO (the backend answered 4xx, or 5xx after every retry;
 *         ::stackpulse_last_error names the status and the start of the
 *         answer), ::STACKPULSE_EUNSUPPORTED (no libcurl), or
 *         an exporter's error.
 */
STACKPULSE_API int stackpulse_push(const stackpulse_profile *p, const stackpulse_push_opts *opts);
/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* STACKPULSE_H */
