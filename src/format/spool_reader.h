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
 * close runs on failure too). A damaged chunk or footer opens the spool as
 * damaged, keeping the chunks before it, unless @p flags has
 * STACKPULSE_SPOOL_STRICT. */
int sp_spool_open_source_ex(const sp_source *src, unsigned flags, stackpulse_spool **out);
/* Opens the @p len bytes at @p buf (not copied: they must outlive the
 * spool) with ::stackpulse_spool_open_flags @p flags: the buffer case of
 * stackpulse_spool_open, here in the pure layer for pure tests and fuzzers. */
int sp_spool_open_memory(const void *buf, size_t len, unsigned flags, stackpulse_spool **out);

/* A spool to tail over @p src, whose size grows: nothing is read yet.
 * Takes ownership of @p src (its close runs on failure too). */
int sp_spool_tail_new(const sp_source *src, unsigned flags, stackpulse_spool **out);
/* Reads the chunks that are complete in the first @p size bytes (the file
 * size now) and calls @p fn (may be NULL) with each of their samples.
 * @p final: the writer is gone, so @p size is the last size and a chunk
 * that fails its checks now is damaged (else it is read again next time:
 * it may be a write in progress). Sets *state. 0 or a negative code (I/O,
 * memory, @p fn's nonzero return; damage only with STACKPULSE_SPOOL_STRICT). */
int sp_spool_tail_step(stackpulse_spool *s, uint64_t size, int final, stackpulse_sample_fn fn,
                       void *ctx, enum stackpulse_tail_state *state);

/* The embedded symbol-cache table of @p module, if any: 0 or
 * STACKPULSE_ENOTFOUND. The bytes are owned by the spool. */
int sp_spool_module_symtab(const stackpulse_spool *spool, uint32_t module, const uint8_t **table,
                           size_t *len);

/* Looks up a perf-map name for JIT address @p addr in @p process. */
int sp_spool_jitsym_lookup(const stackpulse_spool *spool, uint32_t process, uint64_t addr,
                           const char **name, uint64_t *start);

/* A file mapping seen by the recorder. */
struct sp_mapping {
	uint32_t process; /* Process index. */
	uint32_t module;  /* Module index. */
	uint64_t start;   /* First address. */
	uint64_t end;     /* Address past the end (> start). */
	uint64_t pgoff;   /* File offset mapped at start. */
	uint64_t time_ns; /* When it was mapped. */
};

/* A thread's name in its language runtime (RTNAME record). */
struct sp_rtname {
	uint32_t thread;  /* Thread index. */
	uint32_t runtime; /* SP_RUNTIME_* (another value: kept as it is). */
	uint64_t time_ns; /* From when the thread has it. */
	const char *name;
};

/* A perf-map symbol of anonymous executable memory. */
struct sp_jitsym {
	uint32_t process; /* Process index. */
	uint64_t start;   /* First address. */
	uint64_t size;    /* Bytes (> 0). */
	const char *name;
};

/* Tables the public API does not show, in file order (jitsyms sorted by
 * process then start, ksyms by address, stats by key). */
uint32_t sp_spool_mapping_count(const stackpulse_spool *spool);
const struct sp_mapping *sp_spool_mapping(const stackpulse_spool *spool, uint32_t index);
/* STATS value for @p key (SP_STAT_*): 0 or STACKPULSE_ENOTFOUND. */
int sp_spool_stat(const stackpulse_spool *spool, uint32_t key, uint64_t *value);
uint32_t sp_spool_jitsym_count(const stackpulse_spool *spool);
/* RTNAME records in time order (ties: file order). */
uint32_t sp_spool_rtname_count(const stackpulse_spool *spool);
const struct sp_rtname *sp_spool_rtname(const stackpulse_spool *spool, uint32_t index);
const struct sp_jitsym *sp_spool_jitsym(const stackpulse_spool *spool, uint32_t index);

#endif
