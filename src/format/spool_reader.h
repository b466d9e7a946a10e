/* Spool decoder (pure) behind the public stackpulse_spool_* API. Bytes come
 * from an sp_source, so file access stays in the OS layer (src/io). */
#ifndef SP_FORMAT_SPOOL_READER_H
#define SP_FORMAT_SPOOL_READER_H

#include <stddef.h>
#include <stdint.h>

#include "stackpulse.h"

typedef struct sp_source {
	/* Reads exactly @p len bytes at @p off: 0 or a negative code. */
	int (*read_at)(void *ctx, uint64_t off, void *buf, size_t len);
	/* Releases ctx; may be NULL. */
	void (*close)(void *ctx);
	void *ctx;
	uint64_t size; /* Total bytes available. */
} sp_source;

/* Opens and validates a spool from @p src. Takes ownership of @p src (its
 * close runs on failure too). */
int sp_spool_open_source(const sp_source *src, stackpulse_spool **out);

/* The embedded symbol-cache table of @p module, if any: 0 or
 * STACKPULSE_ENOTFOUND. The bytes are owned by the spool. */
int sp_spool_module_symtab(const stackpulse_spool *spool, uint32_t module,
                           const uint8_t **table, size_t *len);

/* Looks up a perf-map name for JIT address @p addr in @p process. */
int sp_spool_jitsym_lookup(const stackpulse_spool *spool, uint32_t process, uint64_t addr,
                           const char **name, uint64_t *start);

#endif
