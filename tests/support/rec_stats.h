/* Test shorthands over the recorder's counters: every
 * stackpulse_recorder_stat key of a recording in one struct (the fields
 * named after the keys), and finish + free in one call. */
#ifndef SP_TEST_REC_STATS_H
#define SP_TEST_REC_STATS_H

#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "stackpulse.h"

struct rec_stats {
	uint64_t samples, lost, truncated_stacks, bytes_written, chunks;
	uint32_t processes, threads, modules, unique_stacks;
	int kernel_frames, python_frames;
	enum stackpulse_perf_event perf_event;
	uint64_t python_samples;
	int realtime; /* 1 on, -1 refused, 0 not tried */
	uint64_t mappings_dropped, dropped_samples, malformed_records, ring_bytes;
	uint32_t stack_copy, copy_resizes;
	int lost_per_thread;
	uint32_t lost_threads;
	enum stackpulse_offcpu_method off_cpu_method;
	uint64_t offcpu_intervals, offcpu_no_stack, offcpu_dropped, offcpu_merged;
	uint64_t failed_records;
	uint32_t processes_unfollowed;
	pid_t unfollowed_pid;
	int unfollowed_error; /* a negative code, as the library returns it */
};

struct rec_python_stats {
	uint64_t python_reads, python_read_failed, python_truncated, python_torn;
	uint64_t python_read_ns, python_read_calls, python_delay_ns, python_delay_max_ns;
	uint64_t python_early_reads;
	uint32_t python_unreadable;
	uint64_t python_pauses, python_pause_ns;
	int python_paused;
};

/* Counter @p key, or 0 when it cannot be read; *rc keeps the first error. */
static inline uint64_t rec_stat(const stackpulse_recorder *rec, stackpulse_stat key, int *rc)
{
	uint64_t v = 0;
	int r = stackpulse_recorder_stat(rec, key, &v);
	if (r && !*rc)
		*rc = r;
	return r ? 0 : v;
}

/* Fills @p s from stackpulse_recorder_stat. Returns 0 or its first error. */
static inline int rec_stats_get(const stackpulse_recorder *rec, struct rec_stats *s)
{
	int rc = 0;
	memset(s, 0, sizeof(*s));
	s->samples = rec_stat(rec, STACKPULSE_STAT_SAMPLES, &rc);
	s->lost = rec_stat(rec, STACKPULSE_STAT_LOST, &rc);
	s->truncated_stacks = rec_stat(rec, STACKPULSE_STAT_TRUNCATED_STACKS, &rc);
	s->bytes_written = rec_stat(rec, STACKPULSE_STAT_BYTES_WRITTEN, &rc);
	s->chunks = rec_stat(rec, STACKPULSE_STAT_CHUNKS, &rc);
	s->processes = (uint32_t)rec_stat(rec, STACKPULSE_STAT_PROCESSES, &rc);
	s->threads = (uint32_t)rec_stat(rec, STACKPULSE_STAT_THREADS, &rc);
	s->modules = (uint32_t)rec_stat(rec, STACKPULSE_STAT_MODULES, &rc);
	s->unique_stacks = (uint32_t)rec_stat(rec, STACKPULSE_STAT_UNIQUE_STACKS, &rc);
	s->kernel_frames = (int)rec_stat(rec, STACKPULSE_STAT_KERNEL_FRAMES, &rc);
	s->python_frames = (int)rec_stat(rec, STACKPULSE_STAT_PYTHON_FRAMES, &rc);
	s->perf_event = (enum stackpulse_perf_event)rec_stat(rec, STACKPULSE_STAT_PERF_EVENT, &rc);
	s->python_samples = rec_stat(rec, STACKPULSE_STAT_PYTHON_SAMPLES, &rc);
	uint64_t rt = rec_stat(rec, STACKPULSE_STAT_REALTIME, &rc);
	s->realtime = rt == STACKPULSE_REALTIME_ON ? 1 : rt == STACKPULSE_REALTIME_REFUSED ? -1 : 0;
	s->mappings_dropped = rec_stat(rec, STACKPULSE_STAT_MAPPINGS_DROPPED, &rc);
	s->dropped_samples = rec_stat(rec, STACKPULSE_STAT_DROPPED_SAMPLES, &rc);
	s->malformed_records = rec_stat(rec, STACKPULSE_STAT_MALFORMED_RECORDS, &rc);
	s->ring_bytes = rec_stat(rec, STACKPULSE_STAT_RING_BYTES, &rc);
	s->stack_copy = (uint32_t)rec_stat(rec, STACKPULSE_STAT_STACK_COPY, &rc);
	s->copy_resizes = (uint32_t)rec_stat(rec, STACKPULSE_STAT_COPY_RESIZES, &rc);
	s->lost_per_thread = (int)rec_stat(rec, STACKPULSE_STAT_LOST_PER_THREAD, &rc);
	s->lost_threads = (uint32_t)rec_stat(rec, STACKPULSE_STAT_LOST_THREADS, &rc);
	s->off_cpu_method =
	        (enum stackpulse_offcpu_method)rec_stat(rec, STACKPULSE_STAT_OFFCPU_METHOD, &rc);
	s->offcpu_intervals = rec_stat(rec, STACKPULSE_STAT_OFFCPU_INTERVALS, &rc);
	s->offcpu_no_stack = rec_stat(rec, STACKPULSE_STAT_OFFCPU_NO_STACK, &rc);
	s->offcpu_dropped = rec_stat(rec, STACKPULSE_STAT_OFFCPU_DROPPED, &rc);
	s->offcpu_merged = rec_stat(rec, STACKPULSE_STAT_OFFCPU_MERGED, &rc);
	s->failed_records = rec_stat(rec, STACKPULSE_STAT_FAILED_RECORDS, &rc);
	s->processes_unfollowed =
	        (uint32_t)rec_stat(rec, STACKPULSE_STAT_PROCESSES_UNFOLLOWED, &rc);
	s->unfollowed_pid = (pid_t)rec_stat(rec, STACKPULSE_STAT_UNFOLLOWED_PID, &rc);
	s->unfollowed_error = -(int)rec_stat(rec, STACKPULSE_STAT_UNFOLLOWED_ERROR, &rc);
	return rc;
}

/* Fills @p s from stackpulse_recorder_stat. Returns 0 or its first error. */
static inline int rec_python_stats_get(const stackpulse_recorder *rec, struct rec_python_stats *s)
{
	int rc = 0;
	memset(s, 0, sizeof(*s));
	s->python_reads = rec_stat(rec, STACKPULSE_STAT_PYTHON_READS, &rc);
	s->python_read_failed = rec_stat(rec, STACKPULSE_STAT_PYTHON_READ_FAILED, &rc);
	s->python_truncated = rec_stat(rec, STACKPULSE_STAT_PYTHON_TRUNCATED, &rc);
	s->python_torn = rec_stat(rec, STACKPULSE_STAT_PYTHON_TORN, &rc);
	s->python_read_ns = rec_stat(rec, STACKPULSE_STAT_PYTHON_READ_NS, &rc);
	s->python_read_calls = rec_stat(rec, STACKPULSE_STAT_PYTHON_READ_CALLS, &rc);
	s->python_delay_ns = rec_stat(rec, STACKPULSE_STAT_PYTHON_DELAY_NS, &rc);
	s->python_delay_max_ns = rec_stat(rec, STACKPULSE_STAT_PYTHON_DELAY_MAX_NS, &rc);
	s->python_early_reads = rec_stat(rec, STACKPULSE_STAT_PYTHON_EARLY_READS, &rc);
	s->python_unreadable = (uint32_t)rec_stat(rec, STACKPULSE_STAT_PYTHON_UNREADABLE, &rc);
	s->python_pauses = rec_stat(rec, STACKPULSE_STAT_PYTHON_PAUSES, &rc);
	s->python_pause_ns = rec_stat(rec, STACKPULSE_STAT_PYTHON_PAUSE_NS, &rc);
	s->python_paused = (int)rec_stat(rec, STACKPULSE_STAT_PYTHON_PAUSED, &rc);
	return rc;
}

/* stackpulse_recorder_finish, then stackpulse_recorder_free: finish's result. */
static inline int rec_finish(stackpulse_recorder *rec)
{
	int rc = stackpulse_recorder_finish(rec);
	stackpulse_recorder_free(rec);
	return rc;
}

/* Finishes @p rec, reads its final counters into @p s (also when finish
 * failed) and frees it. Returns what finish returned. */
static inline int rec_finish_stats(stackpulse_recorder *rec, struct rec_stats *s)
{
	int rc = stackpulse_recorder_finish(rec);
	int src = rec_stats_get(rec, s);
	stackpulse_recorder_free(rec);
	return rc ? rc : src;
}

#endif
