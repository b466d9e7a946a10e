/* Keeps a symbol cache directory within its size bound. Only the files the
 * cache itself names are ever removed: <hex>.spsym tables, <hex>.debug
 * copies and their temporaries. */
#ifndef SP_SYMBOLIZE_CACHETRIM_H
#define SP_SYMBOLIZE_CACHETRIM_H

#include <stdint.h>

#define SP_CACHE_DEFAULT_MAX_MB 512u

/* The bound in bytes: STACKPULSE_SYMBOL_CACHE_MAX_MB when set (0: none),
 * else SP_CACHE_DEFAULT_MAX_MB. */
uint64_t sp_cache_max_bytes(void);

/* Trims the open cache directory @p dir_fd (kept open; its owner and
 * mode already checked by sp_cacheio_dir_open) after @p fresh (a file
 * name in it, never removed) was written. First go the cache files whose name starts with @p stale_prefix
 * (NULL: none; older generations of the same key, such as the kernel
 * tables of other boots) and temporaries older than an hour; then, while
 * the cache files add up to more than @p max bytes (0: no bound), the
 * least recently used ones, until they fit in 3/4 of it. Returns the
 * number of files removed; errors only end the trim early. */
int sp_cache_trim_at(int dir_fd, const char *fresh, const char *stale_prefix, uint64_t max);

/* Marks the file of @p fd as used now (its access time orders the trim). */
void sp_cache_touch(int fd);

#endif
