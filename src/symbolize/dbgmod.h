/* One binary resolved through libdw: opened safely, build-id verified
 * before libdw sees it, debug file found through our own search (build-id
 * trees, .gnu_debuglink with CRC, opt-in debuginfod), a sorted symbol
 * array, and DWARF names, lines and inline chains. */
#ifndef SP_SYMBOLIZE_DBGMOD_H
#define SP_SYMBOLIZE_DBGMOD_H

#include <stddef.h>
#include <stdint.h>

#include "symbolize/strpool.h"
#include "symbolize/symbolize.h"
#include "symcache/symcache.h"

/* Where and how to look for debug files. */
typedef struct sp_dbg_config {
	char **roots; /* Absolute debug roots. */
	size_t nroots;
	int debuginfod;               /* 1: query debuginfod (built in, URLs set). */
	const char *debuginfod_cache; /* Cache dir for the client, or NULL. */
	const char *cache_dir;        /* Symbol cache dir for decompressed debug files, or NULL. */
	sp_symbolize_counters *counters;
} sp_dbg_config;

/* Parses colon-separated roots (NULL: STACKPULSE_DEBUG_DIRS, else
 * /usr/lib/debug); relative entries are ignored.
 *
 * Environment rule (debuginfod builds): the client reads its cache
 * directory only from DEBUGINFOD_CACHE_PATH. The first configuration in the
 * process that enables debuginfod (DEBUGINFOD_URLS set, @p allow_network)
 * sets DEBUGINFOD_CACHE_PATH to STACKPULSE_DEBUGINFOD_CACHE_DIR when that is
 * set and differs, once, under a lock, before any client exists; it is
 * never restored and never written again. Nothing else writes the
 * environment: query time limits use the client's progress callback. */
int sp_dbg_config_init(sp_dbg_config *cfg, const char *debug_dirs, int allow_network,
                       sp_symbolize_counters *counters);
void sp_dbg_config_free(sp_dbg_config *cfg);

/* Finds a separate debug file for the binary; see dbgfind.c for the order.
 * Returns an fd (>= 0) and sets *path (malloc'd, for libdwfl), or -1. */
int sp_dbg_find_debuginfo(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len,
                          const char *binary, const char *debuglink, uint32_t crc, char **path);

/* Finds the dwz supplementary file (.gnu_debugaltlink) named by the DWARF
 * file @p dwarf_file: by its own build-id under the debug roots, then by
 * the recorded path (relative to @p dwarf_file's folder). Returns an fd
 * (build-id verified) and sets *path, or -1. */
int sp_dbg_find_altlink(const sp_dbg_config *cfg, const char *dwarf_file, char **path);

typedef struct sp_dbgmod sp_dbgmod;

/* Opens @p path and verifies it carries @p bid (when bid_len > 0).
 * Returns 0, STACKPULSE_EBUILDID, STACKPULSE_EUNSUPPORTED (not a regular
 * file), STACKPULSE_EFORMAT (not ELF), -ENOENT, ... with a detail. */
int sp_dbgmod_open(const char *path, const uint8_t *bid, uint32_t bid_len, const sp_dbg_config *cfg,
                   sp_dbgmod **out);
/* The same for a descriptor the caller already holds (a file grabbed
 * through /proc/PID/map_files, possibly deleted since). Takes @p fd in
 * every case; @p path names the file in messages and is where libdwfl looks
 * for .gnu_debuglink files. */
int sp_dbgmod_open_fd(int fd, const char *path, const uint8_t *bid, uint32_t bid_len,
                      const sp_dbg_config *cfg, sp_dbgmod **out);
void sp_dbgmod_free(sp_dbgmod *m);

/* Resolves file offset @p off: writes frames leaf first (strings interned
 * in @p pool) and returns their count (1..max); the last frame's name is
 * NULL when nothing is known about @p off. Negative only on ENOMEM. */
int sp_dbgmod_resolve(sp_dbgmod *m, uint64_t off, sp_strpool *pool, int raw_names,
                      sp_symcache_frame *frames, uint32_t max);

/* The same, and sets [*start, *start + *len) to the file offsets around
 * @p off that get the very same answer (the line row inside the innermost
 * scope; the symbol when the binary has no DWARF), so one answer serves a
 * whole range in symbol caches. At least [off, off + 1). */
int sp_dbgmod_resolve_range(sp_dbgmod *m, uint64_t off, sp_strpool *pool, int raw_names,
                            sp_symcache_frame *frames, uint32_t max, uint64_t *start,
                            uint32_t *len);

#endif
