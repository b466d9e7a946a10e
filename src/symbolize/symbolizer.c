/* The public symbolizer: raw frames of a spool → names, files, lines and
 * inline chains. Native frames are answered, in order, by the in-memory
 * result cache, a table embedded in the spool, the on-disk symbol cache,
 * and finally libdw (dbgmod.c), whose answers are written back to the
 * cache when the symbolizer is freed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/opts.h"
#include "common/hash.h"
#include "format/spool_reader.h"
#include "symbolize/cacheio.h"
#include "symbolize/dbgmod.h"
#include "symbolize/strpool.h"
#include "symbolize/symbolize.h"
#include "symcache/symcache.h"

#define MAX_STACK_WALK (1u << 20)
/* Binaries kept open (each holds descriptors and libdw state). */
#define MAX_OPEN_BINARIES 128

struct stackpulse_frame {
	const char *name;
	const char *file;
	const char *module;
	uint64_t offset;
	uint32_t line;
	uint32_t raw_id;
	uint32_t inline_depth;
	int kind;
};

typedef struct symmod {
	int inited;
	const struct stackpulse_module *info;
	const char *base; /* Basename of the path, for "base+0xOFF". */
	int has_emb;      /* A valid table is embedded in the spool. */
	int emb_tried;    /* The embedded table (complete) was looked at. */
	sp_symcache emb;
	int has_disk; /* A valid table came from the cache dir. */
	sp_symcache disk;
	uint8_t *disk_bytes;
	sp_symcache_builder *fresh; /* libdw answers to write back. */
	int dbg_tried;
	int dbg_rc; /* Why the binary is unusable, or 0. */
	sp_dbgmod *dbg;
	uint64_t last_use; /* Tick of the last libdw lookup. */
} symmod;

/* One cached resolution: frames [first, first + count) of sym->rf. */
typedef struct rslot {
	uint64_t off;
	uint32_t module;
	uint32_t used_leaf; /* 0: empty slot; else 1 + is_leaf. */
	uint32_t first, count;
} rslot;

struct stackpulse_symbolizer {
	const stackpulse_spool *spool;
	uint32_t flags;
	char *cache_dir; /* NULL: no on-disk cache. */
	sp_dbg_config cfg;
	sp_symbolize_counters counters;
	sp_strpool pool;
	symmod *mods;
	uint32_t nmods;
	rslot *slots;
	size_t cap, used;
	sp_symcache_frame *rf;
	size_t nrf, rf_cap;
	uint32_t nopen; /* Modules with an open sp_dbgmod. */
	uint64_t tick;
};

static int oom(void)
{
	return sp_error(-ENOMEM, "symbolizer: out of memory");
}

void stackpulse_symbolizer_opts_init(stackpulse_symbolizer_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_SYMBOLIZER_OPTS;
}

int stackpulse_symbolizer_new(const stackpulse_spool *spool, const stackpulse_symbolizer_opts *opts,
                              stackpulse_symbolizer **out)
{
	SP_API_ENTRY();
	if (!spool || !out)
		return sp_error(-EINVAL, "symbolizer: NULL argument");
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	int orc = sp_opts_copy(&o, sizeof(o), opts, "symbolizer");
	if (orc)
		return orc;
	stackpulse_symbolizer *s = sp_calloc(1, sizeof(*s));
	if (!s)
		return oom();
	s->spool = spool;
	s->flags = o.flags;
	sp_strpool_init(&s->pool);
	int offline = (o.flags & STACKPULSE_SYM_OFFLINE) != 0;
	int rc = sp_dbg_config_init(&s->cfg, o.debug_dirs, !offline, &s->counters);
	if (rc)
		goto fail;
	/* Cached names are demangled, so RAW_NAMES bypasses the disk cache
	 * (embedded tables are still used: they are all an offline run has). */
	if (!offline && !(o.flags & (STACKPULSE_SYM_NO_CACHE | STACKPULSE_SYM_RAW_NAMES)))
		s->cache_dir = sp_cacheio_dir(o.cache_dir);
	s->cfg.cache_dir = s->cache_dir;
	s->nmods = stackpulse_spool_module_count(spool);
	if (s->nmods) {
		s->mods = sp_calloc(s->nmods, sizeof(symmod));
		if (!s->mods) {
			rc = oom();
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	stackpulse_symbolizer_free(s);
	return rc;
}

/* Writes the module's new answers, merged with what the cache held (see
 * remember_fresh). */
static void write_back(stackpulse_symbolizer *s, symmod *m)
{
	if (!m->fresh || !s->cache_dir || sp_symcache_builder_count(m->fresh) == 0)
		return;
	uint8_t *data;
	size_t len;
	if (sp_symcache_builder_finish(m->fresh, &data, &len) != 0)
		return;
	if (sp_cacheio_write(s->cache_dir, m->info->build_id, m->info->build_id_len, data, len) ==
	    0)
		s->counters.cache_writes++;
	sp_free(data);
}

void stackpulse_symbolizer_free(stackpulse_symbolizer *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->mods && i < s->nmods; i++) {
		symmod *m = &s->mods[i];
		if (m->inited) /* The table may have moved (a tailed spool). */
			m->info = stackpulse_spool_module(s->spool, i);
		write_back(s, m);
		sp_symcache_builder_free(m->fresh);
		sp_dbgmod_free(m->dbg);
		sp_free(m->disk_bytes);
	}
	sp_free(s->mods);
	sp_free(s->slots);
	sp_free(s->rf);
	sp_strpool_free(&s->pool);
	sp_dbg_config_free(&s->cfg);
	sp_free(s->cache_dir);
	sp_free(s);
}

int stackpulse_symbolizer_stats(const stackpulse_symbolizer *sym,
                                struct stackpulse_symbolizer_stats *stats)
{
	SP_API_ENTRY();
	if (!sym || !stats || stats->sz < sizeof(size_t)) {
		sp_error(-EINVAL, "NULL argument or stats->sz too small");
		return -EINVAL;
	}
	const sp_symbolize_counters *c = &sym->counters;
	struct stackpulse_symbolizer_stats s = {
		.binaries_opened = c->binaries_opened,
		.build_id_mismatch = c->build_id_mismatch,
		.debug_files = c->debug_files,
		.debuginfod_queries = c->debuginfod_queries,
		.dwarf_loads = c->dwarf_loads,
		.dwarf_lookups = c->dwarf_lookups,
		.cache_hits = c->cache_hits,
		.embedded_hits = c->embedded_hits,
		.result_hits = c->result_hits,
		.cache_writes = c->cache_writes,
	};
	s.sz = stats->sz < sizeof(s) ? stats->sz : sizeof(s);
	memcpy(stats, &s, s.sz);
	return 0;
}

static int same_bid(const sp_symcache *t, const struct stackpulse_module *info)
{
	return t->build_id_len == info->build_id_len &&
	       (info->build_id_len == 0 ||
	        memcmp(t->build_id, info->build_id, info->build_id_len) == 0);
}

/* A tailed spool grows between calls: modules appear, its module table
 * moves, and an embedded table may complete after the module was first
 * used. Then the cached answers are dropped so they are made again. */
static int mods_refresh(stackpulse_symbolizer *s, uint32_t index)
{
	uint32_t n = stackpulse_spool_module_count(s->spool);
	if (index >= n)
		return 0;
	if (index >= s->nmods) {
		symmod *nm = sp_realloc_array(s->mods, n, sizeof(symmod));
		if (!nm)
			return 0;
		memset(nm + s->nmods, 0, (size_t)(n - s->nmods) * sizeof(symmod));
		s->mods = nm;
		s->nmods = n;
	}
	symmod *m = &s->mods[index];
	if (!m->inited)
		return 1;
	m->info = stackpulse_spool_module(s->spool, index);
	const uint8_t *t;
	size_t len;
	if (!m->emb_tried && m->info->has_symbols) {
		m->emb_tried = 1;
		if (sp_spool_module_symtab(s->spool, index, &t, &len) == 0 &&
		    sp_symcache_validate(t, len, &m->emb) == 0 && same_bid(&m->emb, m->info)) {
			m->has_emb = 1;
			if (s->cap)
				memset(s->slots, 0, s->cap * sizeof(*s->slots));
			s->used = 0;
			s->nrf = 0;
		}
	}
	return 1;
}

static symmod *module_get(stackpulse_symbolizer *s, uint32_t index)
{
	if (!mods_refresh(s, index))
		return NULL;
	symmod *m = &s->mods[index];
	if (m->inited)
		return m;
	m->info = stackpulse_spool_module(s->spool, index);
	if (!m->info)
		return NULL;
	m->inited = 1;
	const char *path = m->info->path ? m->info->path : "";
	const char *slash = strrchr(path, '/');
	m->base = slash && slash[1] ? slash + 1 : path;
	const uint8_t *t;
	size_t len;
	m->emb_tried = m->info->has_symbols;
	if (sp_spool_module_symtab(s->spool, index, &t, &len) == 0 &&
	    sp_symcache_validate(t, len, &m->emb) == 0 && same_bid(&m->emb, m->info))
		m->has_emb = 1;
	if (s->cache_dir && m->info->build_id_len &&
	    sp_cacheio_read(s->cache_dir, m->info->build_id, m->info->build_id_len, &m->disk_bytes,
	                    &m->disk) == 0)
		m->has_disk = 1;
	return m;
}

static rslot *slot_find(stackpulse_symbolizer *s, uint32_t module, uint64_t off, int leaf)
{
	if (!s->cap)
		return NULL;
	size_t mask = s->cap - 1;
	size_t i =
	        (size_t)sp_hash_combine(sp_hash64(off), ((uint64_t)module << 1) | (unsigned)leaf) &
	        mask;
	while (s->slots[i].used_leaf) {
		rslot *r = &s->slots[i];
		if (r->off == off && r->module == module && r->used_leaf == 1u + (unsigned)leaf)
			return r;
		i = (i + 1) & mask;
	}
	return &s->slots[i];
}

static int slots_grow(stackpulse_symbolizer *s)
{
	size_t ncap = s->cap ? s->cap * 2 : 1024;
	rslot *ns = sp_calloc(ncap, sizeof(rslot));
	if (!ns)
		return oom();
	rslot *old = s->slots;
	size_t ocap = s->cap;
	s->slots = ns;
	s->cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].used_leaf)
			continue;
		rslot *d = slot_find(s, old[i].module, old[i].off, (int)old[i].used_leaf - 1);
		*d = old[i];
	}
	sp_free(old);
	return 0;
}

/* Stores @p n frames in the result cache and returns the slot. */
static int remember(stackpulse_symbolizer *s, uint32_t module, uint64_t off, int leaf,
                    const sp_symcache_frame *fr, uint32_t n, rslot **out)
{
	if ((s->used + 1) * 2 > s->cap) {
		int rc = slots_grow(s);
		if (rc)
			return rc;
	}
	if (s->nrf + n > s->rf_cap) {
		size_t ncap = s->rf_cap ? s->rf_cap * 2 : 1024;
		while (ncap < s->nrf + n)
			ncap *= 2;
		sp_symcache_frame *nf = sp_realloc_array(s->rf, ncap, sizeof(*nf));
		if (!nf)
			return oom();
		s->rf = nf;
		s->rf_cap = ncap;
	}
	rslot *r = slot_find(s, module, off, leaf);
	r->off = off;
	r->module = module;
	r->used_leaf = 1u + (unsigned)leaf;
	r->first = (uint32_t)s->nrf;
	r->count = n;
	memcpy(s->rf + s->nrf, fr, n * sizeof(*fr));
	s->nrf += n;
	s->used++;
	*out = r;
	return 0;
}

/* Opens the module's binary. A path the kernel marked " (deleted)" is
 * retried without the mark: the build-id check rejects any other file. */
static int open_module(stackpulse_symbolizer *s, symmod *m)
{
	const char *path = m->info->path ? m->info->path : "";
	int rc = sp_dbgmod_open(path, m->info->build_id, m->info->build_id_len, &s->cfg, &m->dbg);
	static const char mark[] = " (deleted)";
	size_t n = strlen(path), k = sizeof(mark) - 1;
	if (rc == -ENOENT && n > k && strcmp(path + n - k, mark) == 0 && m->info->build_id_len) {
		char *trimmed = sp_strndup(path, n - k);
		if (!trimmed)
			return oom();
		rc = sp_dbgmod_open(trimmed, m->info->build_id, m->info->build_id_len, &s->cfg,
		                    &m->dbg);
		sp_free(trimmed);
	}
	return rc;
}

/* Closes the least recently used binary so descriptors stay bounded; it
 * is reopened if needed again. */
static void close_lru(stackpulse_symbolizer *s)
{
	symmod *victim = NULL;
	for (uint32_t i = 0; i < s->nmods; i++) {
		symmod *m = &s->mods[i];
		if (m->dbg && (!victim || m->last_use < victim->last_use))
			victim = m;
	}
	if (!victim)
		return;
	sp_dbgmod_free(victim->dbg);
	victim->dbg = NULL;
	victim->dbg_tried = 0;
	s->nopen--;
}

/* Adds a libdw answer for the cache file. The file's old entries go in
 * first, so the new answers win where both cover an offset. */
static int remember_fresh(symmod *m, uint64_t at, uint32_t span, const sp_symcache_frame *fr,
                          uint32_t n)
{
	if (!m->fresh) {
		if (sp_symcache_builder_new(m->info->build_id, m->info->build_id_len, &m->fresh) !=
		    0)
			return oom();
		int rc = m->has_disk ? sp_symcache_builder_merge(m->fresh, &m->disk) : 0;
		if (rc) {
			sp_symcache_builder_free(m->fresh);
			m->fresh = NULL;
			return rc;
		}
	}
	return sp_symcache_builder_add(m->fresh, at, span, fr, n);
}

/* Resolves a NATIVE frame into the result cache. */
static int resolve_native(stackpulse_symbolizer *s, uint32_t module, uint64_t off, int leaf,
                          rslot **out)
{
	if (!mods_refresh(s, module))
		return sp_error(STACKPULSE_ENOTFOUND, "symbolizer: module %u not in the spool",
		                module);
	rslot *r = slot_find(s, module, off, leaf);
	if (r && r->used_leaf) {
		s->counters.result_hits++;
		*out = r;
		return 0;
	}
	symmod *m = module_get(s, module);
	if (!m)
		return sp_error(STACKPULSE_ENOTFOUND, "symbolizer: module %u not in the spool",
		                module);
	/* Return addresses point after the call: look up the call itself. */
	uint64_t look = leaf || off == 0 ? off : off - 1;
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES], alt[SP_SYMCACHE_MAX_FRAMES];
	uint32_t n = 0, k;
	int offline = (s->flags & STACKPULSE_SYM_OFFLINE) != 0;
	if (m->has_emb &&
	    (n = sp_symcache_lookup(&m->emb, look, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL)) > 0)
		s->counters.embedded_hits++;
	/* An unnamed answer (a stripped binary, no debug file at the time) is
	 * not final: a debug root, debuglink or debuginfod may name it now. */
	if ((!n || !fr[n - 1].name) && m->has_disk &&
	    (k = sp_symcache_lookup(&m->disk, look, alt, SP_SYMCACHE_MAX_FRAMES, NULL, NULL)) > 0) {
		s->counters.cache_hits++;
		if (!n || alt[k - 1].name) {
			memcpy(fr, alt, k * sizeof(*fr));
			n = k;
		}
	}
	if ((!n || !fr[n - 1].name) && !offline) {
		if (!m->dbg_tried) {
			if (s->nopen >= MAX_OPEN_BINARIES)
				close_lru(s);
			m->dbg_tried = 1;
			m->dbg_rc = open_module(s, m);
			if (m->dbg_rc == -ENOMEM)
				return m->dbg_rc;
			if (m->dbg)
				s->nopen++;
		}
		if (m->dbg) {
			m->last_use = ++s->tick;
			uint64_t at;
			uint32_t span;
			int got = sp_dbgmod_resolve_range(
			        m->dbg, look, &s->pool, (s->flags & STACKPULSE_SYM_RAW_NAMES) != 0,
			        alt, SP_SYMCACHE_MAX_FRAMES, &at, &span);
			if (got < 0)
				return got;
			k = (uint32_t)got;
			/* Only files nobody else could have written feed the cache. */
			if (s->cache_dir && m->info->build_id_len && sp_dbgmod_trusted(m->dbg)) {
				int rc = remember_fresh(m, at, span, alt, k);
				if (rc == -ENOMEM)
					return rc;
			}
			if (!n || alt[k - 1].name) {
				memcpy(fr, alt, k * sizeof(*fr));
				n = k;
			}
		}
	}
	if (n == 0) {
		fr[0].name = NULL;
		fr[0].file = NULL;
		fr[0].line = 0;
		n = 1;
	}
	if (!fr[n - 1].name) {
		char buf[4200];
		snprintf(buf, sizeof(buf), "%s+0x%llx", m->base, (unsigned long long)off);
		fr[n - 1].name = sp_strpool_intern(&s->pool, buf);
		if (!fr[n - 1].name)
			return oom();
	}
	return remember(s, module, off, leaf, fr, n, out);
}

static const char *kernel_module_name(stackpulse_symbolizer *s, const char *mod)
{
	if (!mod || !*mod)
		return "[kernel.kallsyms]";
	char buf[300];
	snprintf(buf, sizeof(buf), "[%s]", mod);
	const char *r = sp_strpool_intern(&s->pool, buf);
	return r ? r : "[kernel.kallsyms]";
}

int sp_symbolizer_resolve_frame_at(stackpulse_symbolizer *s, uint32_t frame_id, int is_leaf,
                                   uint32_t process, stackpulse_frame_fn fn, void *ctx)
{
	if (!s || !fn)
		return sp_error(-EINVAL, "symbolizer: NULL argument");
	const struct stackpulse_raw_frame *raw = stackpulse_spool_frame(s->spool, frame_id);
	if (!raw)
		return sp_error(STACKPULSE_ENOTFOUND, "symbolizer: no frame %u", frame_id);
	stackpulse_frame f;
	memset(&f, 0, sizeof(f));
	f.raw_id = frame_id;
	f.offset = raw->offset;
	f.kind = (int)raw->kind;
	f.name = "[unknown]";
	switch (raw->kind) {
	case STACKPULSE_FRAME_NATIVE: {
		const struct stackpulse_module *mi = stackpulse_spool_module(s->spool, raw->module);
		if (!mi)
			break;
		f.module = mi->path;
		rslot *r = NULL;
		int rc = resolve_native(s, raw->module, raw->offset, is_leaf, &r);
		if (rc)
			return rc;
		if (!r)
			return sp_error(STACKPULSE_EINTERNAL, "symbolizer: no cached result");
		uint32_t first = r->first, count = r->count;
		uint32_t from = (s->flags & STACKPULSE_SYM_NO_INLINE) ? count - 1 : 0;
		for (uint32_t i = from; i < count; i++) {
			/* Index again each time: the callback may resolve more frames,
			 * which can move s->rf. */
			const sp_symcache_frame *x = &s->rf[first + i];
			f.name = x->name;
			f.file = x->file;
			f.line = x->line;
			f.inline_depth = count - 1 - i;
			f.kind = i + 1 < count ? STACKPULSE_FRAME_INLINE : STACKPULSE_FRAME_NATIVE;
			int v = fn(&f, ctx);
			if (v)
				return v;
		}
		return 0;
	}
	case STACKPULSE_FRAME_KERNEL: {
		const char *name, *mod = NULL;
		uint64_t start;
		if (stackpulse_spool_ksym_lookup(s->spool, raw->offset, &name, &start, &mod) == 0 &&
		    name)
			f.name = name;
		f.module = kernel_module_name(s, mod);
		break;
	}
	case STACKPULSE_FRAME_PYTHON: {
		const struct stackpulse_pycode *pc = stackpulse_spool_pycode(s->spool, raw->pycode);
		if (pc) {
			f.name = pc->qualname && *pc->qualname ? pc->qualname : "[unknown]";
			f.file = pc->filename;
		}
		f.line = raw->line > 0 ? (uint32_t)raw->line : 0;
		break;
	}
	case STACKPULSE_FRAME_UNKNOWN:
	case STACKPULSE_FRAME_JIT: {
		const char *name;
		uint64_t start;
		if (process != UINT32_MAX) {
			if (sp_spool_jitsym_lookup(s->spool, process, raw->offset, &name, &start) ==
			            0 &&
			    name) {
				f.name = name;
				f.kind = STACKPULSE_FRAME_JIT;
			}
		} else {
			/* No sample, so no process: any process's map naming addr. */
			uint32_t n = sp_spool_jitsym_count(s->spool);
			for (uint32_t i = 0; i < n; i++) {
				const struct sp_jitsym *j = sp_spool_jitsym(s->spool, i);
				if (j && j->name && raw->offset >= j->start &&
				    raw->offset - j->start < j->size) {
					f.name = j->name;
					f.kind = STACKPULSE_FRAME_JIT;
					break;
				}
			}
		}
		break;
	}
	case STACKPULSE_FRAME_TRUNCATED: f.name = "[truncated]"; break;
	default: f.kind = STACKPULSE_FRAME_UNKNOWN; break;
	}
	return fn(&f, ctx);
}

int stackpulse_symbolizer_resolve_frame(stackpulse_symbolizer *s, uint32_t frame_id,
                                        stackpulse_frame_fn fn, void *ctx)
{
	SP_API_ENTRY();
	/* Without a stack position, resolve as a leaf (exact offset): never a
	 * neighbouring function's name for an entry-point address. */
	return sp_symbolizer_resolve_frame_at(s, frame_id, 1, UINT32_MAX, fn, ctx);
}

static int walk(stackpulse_symbolizer *s, uint32_t stack, uint32_t process, stackpulse_frame_fn fn,
                void *ctx)
{
	if (!s || !fn)
		return sp_error(-EINVAL, "symbolizer: NULL argument");
	int seen_user = 0;
	for (uint32_t steps = 0; stack != 0; steps++) {
		uint32_t frame, parent;
		if (steps >= MAX_STACK_WALK)
			return sp_error(STACKPULSE_ELIMIT, "symbolizer: stack deeper than %u",
			                MAX_STACK_WALK);
		int rc = stackpulse_spool_stack_node(s->spool, stack, &frame, &parent);
		if (rc)
			return rc;
		const struct stackpulse_raw_frame *raw = stackpulse_spool_frame(s->spool, frame);
		/* The first user frame below any kernel frames is the sampled IP. */
		int leaf = 0;
		if (raw && raw->kind != STACKPULSE_FRAME_KERNEL) {
			leaf = !seen_user;
			seen_user = 1;
		}
		rc = sp_symbolizer_resolve_frame_at(s, frame, leaf, process, fn, ctx);
		if (rc)
			return rc;
		stack = parent;
	}
	return 0;
}

int stackpulse_symbolizer_for_each_frame(stackpulse_symbolizer *s,
                                         const struct stackpulse_sample *sample,
                                         stackpulse_frame_fn fn, void *ctx)
{
	SP_API_ENTRY();
	if (!sample)
		return sp_error(-EINVAL, "symbolizer: NULL sample");
	return walk(s, sample->stack, sample->process, fn, ctx);
}

int stackpulse_symbolizer_for_each_stack_frame(stackpulse_symbolizer *s, uint32_t stack,
                                               stackpulse_frame_fn fn, void *ctx)
{
	SP_API_ENTRY();
	return walk(s, stack, UINT32_MAX, fn, ctx);
}

const char *stackpulse_frame_func_name(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f && f->name ? f->name : "[unknown]";
}

const char *stackpulse_frame_file(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->file : NULL;
}

uint32_t stackpulse_frame_line(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->line : 0;
}

const char *stackpulse_frame_module(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->module : NULL;
}

uint64_t stackpulse_frame_offset(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->offset : 0;
}

enum stackpulse_frame_kind stackpulse_frame_kind(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? (enum stackpulse_frame_kind)f->kind : STACKPULSE_FRAME_UNKNOWN;
}

uint32_t stackpulse_frame_raw_id(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->raw_id : UINT32_MAX;
}

uint32_t stackpulse_frame_inline_depth(const stackpulse_frame *f)
{
	SP_API_ENTRY();
	return f ? f->inline_depth : 0;
}
