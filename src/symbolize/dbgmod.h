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
	sp_symbolize_counters *counters;
} sp_dbg_config;

/* Parses colon-separated roots (NULL: STACKPULSE_DEBUG_DIRS, else
 * /usr/lib/debug); relative entries are ignored. */
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
void sp_dbgmod_free(sp_dbgmod *m);

/* Resolves file offset @p off: writes frames leaf first (strings interned
 * in @p pool) and returns their count (1..max); the last frame's name is
 * NULL when nothing is known about @p off. Negative only on ENOMEM. */
int sp_dbgmod_resolve(sp_dbgmod *m, uint64_t off, sp_strpool *pool, int raw_names,
                      sp_symcache_frame *frames, uint32_t max);

#endif
