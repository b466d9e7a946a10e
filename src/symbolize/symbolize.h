/* Internal symbolizer interface for other layers (the recorder embeds
 * symbol tables at finish; the profile layer resolves frames with their
 * stack position). */
#ifndef SP_SYMBOLIZE_SYMBOLIZE_H
#define SP_SYMBOLIZE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "stackpulse.h"

typedef struct sp_writer sp_writer;

/* Work counters of one symbolizer (or of one sp_symbolize_build_symtab_cached
 * call); stackpulse_symbolizer_stats copies them out. */
typedef struct sp_symbolize_counters {
	uint64_t binaries_opened;    /* Binaries opened, build-id verified, handed to libdw. */
	uint64_t build_id_mismatch;  /* Binaries rejected for a different build-id. */
	uint64_t debug_files;        /* Separate debug files opened. */
	uint64_t debuginfod_queries; /* debuginfod lookups made. */
	uint64_t dwarf_loads;        /* Modules whose DWARF libdw loaded. */
	uint64_t dwarf_lookups;      /* Offsets resolved through libdw. */
	uint64_t cache_hits;         /* Offsets answered by the on-disk symbol cache. */
	uint64_t embedded_hits;      /* Offsets answered by a table embedded in the spool. */
	uint64_t result_hits;        /* Offsets answered by the in-memory result cache. */
	uint64_t cache_writes;       /* Symbol cache files written. */
} sp_symbolize_counters;

/* Resolves raw frame @p frame_id as at position @p is_leaf of a stack:
 * leaf NATIVE frames are looked up at their offset, others at offset - 1
 * (return addresses). @p process (or UINT32_MAX) selects the perf map for
 * JIT frames. Calls @p fn like stackpulse_symbolizer_resolve_frame. */
int sp_symbolizer_resolve_frame_at(stackpulse_symbolizer *sym, uint32_t frame_id, int is_leaf,
                                   uint32_t process, stackpulse_frame_fn fn, void *ctx);

/* One module whose symbols the recorder wants embedded. */
typedef struct sp_symtab_request {
	uint32_t module;         /* Writer module index. */
	const char *path;        /* File to read now (may be /proc/PID/root/...). */
	const uint8_t *build_id; /* Recorded build-id (verified against the file). */
	uint32_t build_id_len;
	const uint64_t *offsets; /* Raw NATIVE frame offsets seen for it. */
	size_t offset_count;
	int have_fd; /* 1: read @p fd (borrowed, not closed) instead of @p path. */
	int fd;      /* A descriptor grabbed while the process lived. */
	/* 1: the file came from another mount namespace (a container): never
	 * open @p path in ours, and keep its answers out of the shared cache. */
	int foreign;
} sp_symtab_request;

/* For each request, resolves every offset both as a leaf (offset) and as a
 * return address (offset - 1) through the same debug-file search as the
 * symbolizer (debug roots from @p debug_dirs, else STACKPULSE_DEBUG_DIRS,
 * else /usr/lib/debug; debuginfod when built in and DEBUGINFOD_URLS is set),
 * builds a symcache table and embeds it with sp_writer_symtab. Modules
 * that cannot be opened or whose build-id differs are skipped (counted in
 * *skipped when not NULL); only writer errors and ENOMEM fail the call.
 * @p counters may be NULL.
 *
 * Reads and refills the on-disk symbol cache in @p cache_dir (NULL: no
 * cache): offsets the cache names cost no DWARF work, and the binary is
 * opened only when some offset is missing from it (or unnamed there). New
 * answers are merged into the cache file. */
int sp_symbolize_build_symtab_cached(sp_writer *w, const sp_symtab_request *reqs, size_t n,
                                     const char *debug_dirs, const char *cache_dir,
                                     uint32_t *embedded, uint32_t *skipped,
                                     sp_symbolize_counters *counters);

#endif
