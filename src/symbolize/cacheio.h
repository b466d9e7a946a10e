/* The on-disk symbol cache: one validated symcache table per build-id in
 * <dir>/<hex build-id>.spsym, written to a temporary file and renamed. */
#ifndef SP_SYMBOLIZE_CACHEIO_H
#define SP_SYMBOLIZE_CACHEIO_H

#include <stddef.h>
#include <stdint.h>

#include "symcache/symcache.h"

#define SP_SYMCACHE_MAX_FILE (256u << 20)

/* The cache directory of opts.cache_dir @p opt, one rule for the recorder
 * and the symbolizer: none when STACKPULSE_NO_SYMBOL_CACHE is set (other
 * than "0") or @p opt is ""; else @p opt, else STACKPULSE_SYMBOL_CACHE_DIR,
 * else $XDG_CACHE_HOME/stackpulse, else $HOME/.cache/stackpulse (variables
 * read with secure_getenv: ignored in setuid and file-capability programs).
 * Returns an sp_malloc'd path, or NULL for no cache (also when none can be
 * formed or out of memory). */
char *sp_cacheio_dir(const char *opt);

/* Opens the cache directory @p dir (after creating it with mode 0700 when
 * @p create) if it is a real directory, not a symlink, owned by our
 * effective uid and not writable by group or others: the cache is only used
 * when nobody else can plant or swap files in it, and then only through
 * this descriptor. Returns the descriptor, STACKPULSE_ENOTFOUND (missing),
 * or -EPERM / -ENOTDIR / -errno with a message. */
int sp_cacheio_dir_open(const char *dir, int create);

/* Loads and validates the table of @p bid. Returns 0 with *data (sp_free
 * it) and *table, STACKPULSE_ENOTFOUND when absent, or another code for an
 * unreadable or invalid file (which callers treat as absent). */
int sp_cacheio_read(const char *dir, const uint8_t *bid, uint32_t bid_len, uint8_t **data,
                    sp_symcache *table);

/* Writes @p data as the table of @p bid, creating @p dir when missing. */
int sp_cacheio_write(const char *dir, const uint8_t *bid, uint32_t bid_len, const uint8_t *data,
                     size_t len);

/* As sp_cacheio_write, creating the file with permissions @p mode. Tables
 * whose build-id shares its first @p replaces bytes with @p bid are older
 * generations of the same key and are removed (0: none). Every write then
 * trims the directory to its size bound (cachetrim.h). */
int sp_cacheio_write_mode(const char *dir, const uint8_t *bid, uint32_t bid_len,
                          const uint8_t *data, size_t len, unsigned mode, uint32_t replaces);

#endif
