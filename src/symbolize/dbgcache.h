/* Decompressed copies of debug files in the symbol cache directory.
 * Distributions ship debug files with compressed DWARF sections, and libdw
 * inflates all of them each time it opens one (about 40 ms for libc's),
 * however few addresses are looked up. A plain copy, kept next to the
 * symbol tables as <dir>/<hex build-id>.debug, opens in a few ms. */
#ifndef SP_SYMBOLIZE_DBGCACHE_H
#define SP_SYMBOLIZE_DBGCACHE_H

#include <stdint.h>

#include "symbolize/dbgmod.h"

/* Largest decompressed copy written. */
#define SP_DBGCACHE_MAX_FILE (512ull << 20)

/* Opens the copy for @p bid in cfg->cache_dir when there is one with that
 * build-id: returns the fd and sets *path (malloc'd, for libdwfl), or -1. */
int sp_dbgcache_find(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len, char **path);

/* Writes a decompressed copy of debug file @p fd (which carries @p bid)
 * into cfg->cache_dir when it has compressed sections. Best effort: never
 * fails the caller, leaves @p fd's contents and position alone. */
void sp_dbgcache_store(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len, int fd);

#endif
