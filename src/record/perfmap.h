/* perf map files (/tmp/perf-PID.map): names of JIT-compiled code, one
 * "START SIZE name" line per entry, written by JIT runtimes (node, the JVM
 * with perf-map-agent, CPython 3.12+ with -X perf). The recorder copies a
 * target's map into the spool at finish (perfmap_names.c). */
#ifndef SP_RECORD_PERFMAP_H
#define SP_RECORD_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Receives one perf-map entry; return nonzero to stop. */
typedef int (*sp_perfmap_fn)(void *ctx, uint64_t start, uint64_t size, const char *name);

#define SP_PERFMAP_MAX_LINE 4096u /* Longer lines are skipped. */

/* Parses complete lines "START SIZE name" (hex START and SIZE, with or
 * without 0x) of @p data. Malformed lines are skipped. Returns the number
 * of bytes consumed (complete lines only, so a growing file can be read
 * again from there) or the callback's nonzero value when negative. Pure. */
long sp_perfmap_parse(const char *data, size_t len, sp_perfmap_fn fn, void *ctx);

/* Reads the perf map of @p pid from byte *@p offset (0 at first), calling
 * @p fn for each new complete entry, and advances *@p offset. The map is
 * looked up as the target sees it (/proc/PID/root/tmp/perf-NSPID.map),
 * then in /tmp. Returns 0, STACKPULSE_ENOTFOUND when there is no map, or
 * -errno. */
int sp_perfmap_read(pid_t pid, uint64_t *offset, sp_perfmap_fn fn, void *ctx);

#endif
