/* Symbol tables for self-contained spools: the recorder calls this at
 * finish so a spool symbolizes without the binaries or debug files. */
#include <errno.h>

#include "common/alloc.h"
#include "common/error.h"
#include "format/spool_writer.h"
#include "symbolize/dbgmod.h"
#include "symbolize/symbolize.h"
#include "symcache/symcache.h"

static int embed_one(sp_writer *w, const sp_symtab_request *r, const sp_dbg_config *cfg,
                     int *skipped)
{
	sp_dbgmod *m = NULL;
	int rc = sp_dbgmod_open(r->path, r->build_id, r->build_id_len, cfg, &m);
	if (rc) {
		*skipped = 1;
		return rc == -ENOMEM ? rc : 0;
	}
	sp_strpool pool;
	sp_strpool_init(&pool);
	sp_symcache_builder *b = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	rc = sp_symcache_builder_new(r->build_id, r->build_id_len, &b);
	for (size_t i = 0; !rc && i < r->offset_count; i++) {
		uint64_t off = r->offsets[i];
		/* As a leaf (exact) and as a return address (offset - 1). */
		for (int k = 0; k < 2 && !rc; k++) {
			if (k == 1 && off == 0)
				break;
			uint64_t look = off - (uint64_t)k;
			sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
			int n = sp_dbgmod_resolve(m, look, &pool, 0, fr, SP_SYMCACHE_MAX_FRAMES);
			if (n < 0)
				rc = n;
			else
				rc = sp_symcache_builder_add(b, look, 1, fr, (uint32_t)n);
		}
	}
	if (!rc)
		rc = sp_symcache_builder_finish(b, &data, &len);
	if (!rc)
		rc = sp_writer_symtab(w, r->module, data, len);
	sp_free(data);
	sp_symcache_builder_free(b);
	sp_strpool_free(&pool);
	sp_dbgmod_free(m);
	return rc;
}

int sp_symbolize_build_symtab(sp_writer *w, const sp_symtab_request *reqs, size_t n,
                              const char *debug_dirs, uint32_t *embedded, uint32_t *skipped,
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
	for (size_t i = 0; i < n; i++) {
		int skip = 0;
		if (reqs[i].offset_count && !reqs[i].offsets) {
			skip = 1;
		} else {
			rc = embed_one(w, &reqs[i], &cfg, &skip);
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
