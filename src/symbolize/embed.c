/* Symbol tables for self-contained spools: the recorder calls this at
 * finish so a spool symbolizes without the binaries or debug files. The
 * on-disk symbol cache answers what it can, so recording the same
 * binaries again costs no DWARF work. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "format/spool_writer.h"
#include "symbolize/cacheio.h"
#include "symbolize/dbgmod.h"
#include "symbolize/symbolize.h"
#include "symcache/symcache.h"

typedef struct embed_mod {
	const sp_symtab_request *r;
	const sp_dbg_config *cfg;
	int tried;
	sp_dbgmod *dbg;
} embed_mod;

/* Opens the binary once, on the first offset the cache cannot name. */
static int open_binary(embed_mod *e)
{
	const sp_symtab_request *r = e->r;
	e->tried = 1;
	int rc;
	if (r->have_fd) {
		int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return sp_error(-errno, "%s: cannot duplicate the descriptor", r->path);
		rc = sp_dbgmod_open_fd(fd, r->path, r->build_id, r->build_id_len, e->cfg, &e->dbg);
	} else {
		rc = sp_dbgmod_open(r->path, r->build_id, r->build_id_len, e->cfg, &e->dbg);
	}
	return rc == -ENOMEM ? rc : 0;
}

/* New answers for the cache file: its old entries first, so that the
 * answers added after them win. */
static int add_fresh(sp_symcache_builder **fresh, const sp_symtab_request *r,
                     const sp_symcache *disk, uint64_t at, uint32_t span,
                     const sp_symcache_frame *fr, uint32_t n)
{
	if (!*fresh) {
		int rc = sp_symcache_builder_new(r->build_id, r->build_id_len, fresh);
		if (!rc && disk)
			rc = sp_symcache_builder_merge(*fresh, disk);
		if (rc)
			return rc;
	}
	return sp_symcache_builder_add(*fresh, at, span, fr, n);
}

static int embed_one(sp_writer *w, const sp_symtab_request *r, const sp_dbg_config *cfg,
                     const char *cache_dir, int *skipped)
{
	embed_mod e = { r, cfg, 0, NULL };
	sp_symcache disk;
	uint8_t *disk_bytes = NULL;
	int has_disk =
	        cache_dir && r->build_id_len &&
	        sp_cacheio_read(cache_dir, r->build_id, r->build_id_len, &disk_bytes, &disk) == 0;
	sp_strpool pool;
	sp_strpool_init(&pool);
	sp_symcache_builder *b = NULL, *fresh = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = sp_symcache_builder_new(r->build_id, r->build_id_len, &b);
	/* The last answer and the offsets it covers: offsets come sorted, and
	 * neighbours (a leaf and its return address, a hot loop) share it. */
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
	uint32_t n = 0, span = 0;
	uint64_t at = 0;
	for (size_t i = 0; !rc && i < r->offset_count; i++) {
		uint64_t off = r->offsets[i];
		/* As a leaf (exact) and as a return address (offset - 1). */
		for (int k = 0; k < 2 && !rc; k++) {
			if (k == 1 && off == 0)
				break;
			uint64_t look = off - (uint64_t)k;
			if (n && look >= at && look - at < span)
				continue; /* Already in the table. */
			n = has_disk ? sp_symcache_lookup(&disk, look, fr, SP_SYMCACHE_MAX_FRAMES,
			                                  &at, &span)
			             : 0;
			if (n && cfg->counters)
				cfg->counters->cache_hits++;
			/* Cached answers are final here, unnamed ones too: some offsets
			 * never get a name, and retrying them would reload DWARF at every
			 * finish. The symbolizer retries unnamed answers and rewrites the
			 * cache when a debug file turns up, so later recordings improve. */
			if (!n) {
				if (!e.tried && (rc = open_binary(&e)) != 0)
					break;
				if (!e.dbg)
					continue;
				int got =
				        sp_dbgmod_resolve_range(e.dbg, look, &pool, 0, fr,
				                                SP_SYMCACHE_MAX_FRAMES, &at, &span);
				if (got < 0) {
					rc = got;
					break;
				}
				n = (uint32_t)got;
				if (cache_dir && r->build_id_len) {
					rc = add_fresh(&fresh, r, has_disk ? &disk : NULL, at, span,
					               fr, n);
				}
			}
			if (n && !rc)
				rc = sp_symcache_builder_add(b, at, span, fr, n);
		}
	}
	if (!rc && sp_symcache_builder_count(b) == 0) {
		*skipped = 1; /* Neither the cache nor the binary knew anything. */
	} else {
		if (!rc)
			rc = sp_symcache_builder_finish(b, &data, &len);
		if (!rc)
			rc = sp_writer_symtab(w, r->module, data, len);
	}
	/* The cache is an optimisation: failing to write it is not an error. */
	if (!rc && fresh) {
		uint8_t *cdata = NULL;
		size_t clen = 0;
		if (sp_symcache_builder_finish(fresh, &cdata, &clen) == 0 &&
		    sp_cacheio_write(cache_dir, r->build_id, r->build_id_len, cdata, clen) == 0 &&
		    cfg->counters)
			cfg->counters->cache_writes++;
		sp_free(cdata);
	}
	sp_free(data);
	sp_symcache_builder_free(b);
	sp_symcache_builder_free(fresh);
	sp_strpool_free(&pool);
	sp_dbgmod_free(e.dbg);
	sp_free(disk_bytes);
	return rc;
}

int sp_symbolize_build_symtab_cached(sp_writer *w, const sp_symtab_request *reqs, size_t n,
                                     const char *debug_dirs, const char *cache_dir,
                                     uint32_t *embedded, uint32_t *skipped,
                                     sp_symbolize_counters *counters)
{
	sp_symbolize_counters local = { 0 };
	sp_dbg_config cfg;
	if (embedded)
		*embedded = 0;
	if (skipped)
		*skipped = 0;
	if (!w || (n && !reqs))
		return sp_error(-EINVAL, "build_symtab: NULL argument");
	int rc = sp_dbg_config_init(&cfg, debug_dirs, 1, counters ? counters : &local);
	if (rc)
		return rc;
	cfg.cache_dir = cache_dir;
	for (size_t i = 0; i < n; i++) {
		int skip = 0;
		if (reqs[i].offset_count && !reqs[i].offsets) {
			skip = 1;
		} else {
			rc = embed_one(w, &reqs[i], &cfg, cache_dir, &skip);
			if (rc)
				break;
		}
		if (skip && skipped)
			(*skipped)++;
		else if (!skip && embedded)
			(*embedded)++;
	}
	sp_dbg_config_free(&cfg);
	return rc;
}
