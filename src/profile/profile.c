/* stackpulse_profile_build: turns a spool into deduplicated tables.
 *
 * Each raw frame is resolved once per role (sampled IP or return address;
 * through the symbolizer, or from the spool's own tables when there is
 * none) into a short list of profile frames, and each distinct (root, spool
 * stack, process) is translated into a prefix-tree node once. Memory therefore grows with unique frames and
 * stacks; per sample only a stackpulse_profile_sample is kept, or with
 * merge_ns one per (thread, stack, kind, time window), keyed in rec_tab. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/opts.h"
#include "common/grow.h"
#include "common/hash.h"
#include "format/spool_reader.h"
#include "profile/profile_internal.h"
#include "symbolize/symbolize.h"

/* Grows a dynamic array so it holds at least @p need elements. */
static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return sp_grow(arr, cap, need, elem, SP_HTAB_MAX_IDS, "profile table entries");
}

const char *sp_basename(const char *path)
{
	if (!path)
		return "";
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

int sp_profile_intern_n(struct stackpulse_profile *p, const char *s, size_t len, uint32_t *out)
{
	if (!s) {
		s = "";
		len = 0;
	}
	uint64_t h = sp_hash_bytes(s, len);
	int rc = sp_htab_reserve(&p->string_tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&p->string_tab, h, &pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&p->string_tab, &pr)) != SP_NONE) {
		const char *c = p->strings[cand];
		if (strncmp(c, s, len) == 0 && c[len] == '\0') {
			*out = cand;
			return 0;
		}
	}
	rc = grow((void **)&p->strings, &p->cap_strings, p->nstrings + 1, sizeof(char *));
	if (rc)
		return rc;
	char *copy = sp_strndup(s, len);
	if (!copy)
		return sp_error(-ENOMEM, "profile string of %zu bytes", len);
	p->strings[p->nstrings] = copy;
	sp_htab_insert(&p->string_tab, &pr, p->nstrings);
	*out = p->nstrings++;
	return 0;
}

int sp_profile_intern(struct stackpulse_profile *p, const char *s, uint32_t *out)
{
	return sp_profile_intern_n(p, s, s ? strlen(s) : 0, out);
}

static int intern_func(struct stackpulse_profile *p, uint32_t name, uint32_t file, uint32_t module,
                       enum stackpulse_frame_kind kind, uint32_t *out)
{
	uint64_t h = sp_hash_combine(sp_hash_combine(sp_hash64(name), file),
	                             sp_hash_combine(module, (uint64_t)(uint32_t)kind));
	int rc = sp_htab_reserve(&p->func_tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&p->func_tab, h, &pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&p->func_tab, &pr)) != SP_NONE) {
		const struct stackpulse_profile_func *f = &p->funcs[cand];
		if (f->name == name && f->file == file && f->module == module && f->kind == kind) {
			*out = cand;
			return 0;
		}
	}
	rc = grow((void **)&p->funcs, &p->cap_funcs, p->nfuncs + 1, sizeof(*p->funcs));
	if (rc)
		return rc;
	p->funcs[p->nfuncs] = (struct stackpulse_profile_func){ name, file, module, kind };
	sp_htab_insert(&p->func_tab, &pr, p->nfuncs);
	*out = p->nfuncs++;
	return 0;
}

static int intern_frame(struct stackpulse_profile *p, uint32_t func, uint32_t line,
                        uint64_t address, uint32_t depth, uint32_t *out)
{
	uint64_t h = sp_hash_combine(sp_hash_combine(sp_hash64(func), line),
	                             sp_hash_combine(address, depth));
	int rc = sp_htab_reserve(&p->frame_tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&p->frame_tab, h, &pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&p->frame_tab, &pr)) != SP_NONE) {
		const struct stackpulse_profile_frame *f = &p->frames[cand];
		if (f->func == func && f->line == line && f->address == address &&
		    f->inline_depth == depth) {
			*out = cand;
			return 0;
		}
	}
	rc = grow((void **)&p->frames, &p->cap_frames, p->nframes + 1, sizeof(*p->frames));
	if (rc)
		return rc;
	p->frames[p->nframes] = (struct stackpulse_profile_frame){ func, line, address, depth };
	sp_htab_insert(&p->frame_tab, &pr, p->nframes);
	*out = p->nframes++;
	return 0;
}

static int intern_stack(struct stackpulse_profile *p, uint32_t parent, uint32_t frame,
                        uint32_t *out)
{
	uint64_t h = sp_hash_combine(sp_hash64(parent), frame);
	int rc = sp_htab_reserve(&p->stack_tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&p->stack_tab, h, &pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&p->stack_tab, &pr)) != SP_NONE) {
		const struct stackpulse_profile_stack *s = &p->stacks[cand];
		if (cand != 0 && s->parent == parent && s->frame == frame) {
			*out = cand;
			return 0;
		}
	}
	rc = grow((void **)&p->stacks, &p->cap_stacks, p->nstacks + 1, sizeof(*p->stacks));
	if (rc)
		return rc;
	p->stacks[p->nstacks] = (struct stackpulse_profile_stack){ parent, frame };
	sp_htab_insert(&p->stack_tab, &pr, p->nstacks);
	*out = p->nstacks++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Build state. */

typedef struct builder {
	struct stackpulse_profile *p;
	const stackpulse_spool *spool;
	stackpulse_symbolizer *sym;
	stackpulse_profile_opts opts;

	/* (raw frame id, is leaf) -> [start, start+count) in pool, root first. */
	uint32_t *exp_start, *exp_count;
	uint32_t nraw;
	uint32_t *pool;
	uint32_t npool, cap_pool;

	/* (root node | role, spool stack, process) -> profile node. */
	uint32_t *c_root, *c_stack, *c_proc, *c_node;
	uint32_t ncache, cap_cache;
	sp_htab cache_tab;

	/* Scratch: spool stacks walked toward the root. */
	uint32_t *walk_stack, *walk_frame;
	uint32_t cap_walk;

	/* Per spool thread: its root node, SP_NONE until needed. */
	uint32_t *thread_root;

	int cb_err; /* Error met inside a symbolizer callback. */

	uint64_t kept;   /* Samples and intervals kept (before merging). */
	sp_htab rec_tab; /* With merge_ns: the sample records. */
} builder;

/* Keeps or drops a frame of @p kind under the view and flags. */
static int keep_kind(const builder *b, int kind, uint32_t depth)
{
	if (depth > 0 && (b->opts.flags & STACKPULSE_PROFILE_MERGE_INLINE))
		return 0;
	if (kind == STACKPULSE_FRAME_KERNEL && (b->opts.flags & STACKPULSE_PROFILE_HIDE_KERNEL))
		return 0;
	switch (b->opts.view) {
	/* The markers of a cut Python chain stay: without them a sample whose
	 * Python frames were not read would vanish from the view. */
	case STACKPULSE_VIEW_PYTHON_ONLY:
		return kind == STACKPULSE_FRAME_PYTHON || kind == STACKPULSE_FRAME_TRUNCATED;
	case STACKPULSE_VIEW_NATIVE_ONLY: return kind != STACKPULSE_FRAME_PYTHON;
	default: return 1;
	}
}

static int pool_push(builder *b, uint32_t v)
{
	int rc = grow((void **)&b->pool, &b->cap_pool, b->npool + 1, sizeof(uint32_t));
	if (rc)
		return rc;
	b->pool[b->npool++] = v;
	return 0;
}

/* With STACKPULSE_PROFILE_GROUP_UNRESOLVED: when @p name is the
 * "BASENAME+0xOFFSET" of an address no symbol covers (as the symbolizer
 * and add_raw spell it), writes "BASENAME [unresolved]" to @p out and
 * returns 1: one function per stripped binary instead of one per address. */
static int unresolved_name(const char *name, const char *module, uint64_t offset, char *out,
                           size_t n)
{
	const char *base = module && *module ? sp_basename(module) : "[unknown]";
	char expect[160];
	const char *plus = strstr(name, "+0x");
	if (!plus)
		return 0;
	snprintf(expect, sizeof(expect), "+0x%" PRIx64, offset);
	size_t bl = (size_t)(plus - name);
	if (strcmp(plus, expect) != 0 || strncmp(name, base, bl) != 0 ||
	    (base[bl] != '\0' && bl != 60)) /* add_raw cuts the basename at 60 bytes. */
		return 0;
	snprintf(out, n, "%.200s [unresolved]", base);
	return 1;
}

/* Adds one resolved frame (leaf-first order) to the pool when kept. */
static int add_frame(builder *b, enum stackpulse_frame_kind kind, const char *name,
                     const char *file, const char *module, uint32_t line, uint64_t address,
                     uint32_t depth)
{
	if (kind == STACKPULSE_FRAME_INLINE)
		kind = STACKPULSE_FRAME_NATIVE; /* Inlining is a frame property, not a function's. */
	if (!keep_kind(b, (int)kind, depth))
		return 0;
	char grouped[232];
	if ((b->opts.flags & STACKPULSE_PROFILE_GROUP_UNRESOLVED) &&
	    kind == STACKPULSE_FRAME_NATIVE && depth == 0 && name && (!file || !*file) &&
	    unresolved_name(name, module, address, grouped, sizeof(grouped)))
		name = grouped;
	struct stackpulse_profile *p = b->p;
	uint32_t sn, sf, sm, fn, fr;
	int rc = sp_profile_intern(p, name && *name ? name : "[unknown]", &sn);
	if (!rc)
		rc = sp_profile_intern(p, file, &sf);
	if (!rc)
		rc = sp_profile_intern(p, module, &sm);
	if (!rc)
		rc = intern_func(p, sn, sf, sm, kind, &fn);
	if (!rc)
		rc = intern_frame(p, fn, line, address, depth, &fr);
	if (!rc)
		rc = pool_push(b, fr);
	return rc;
}

static int sym_cb(const stackpulse_frame *f, void *ctx)
{
	builder *b = ctx;
	int rc = add_frame(b, stackpulse_frame_kind(f), stackpulse_frame_func_name(f),
	                   stackpulse_frame_file(f), stackpulse_frame_module(f),
	                   stackpulse_frame_line(f), stackpulse_frame_offset(f),
	                   stackpulse_frame_inline_depth(f));
	if (rc) {
		b->cb_err = rc;
		return rc;
	}
	return 0;
}

/* Names a raw frame from the spool alone (no symbolizer, or it failed). */
static int add_raw(builder *b, const struct stackpulse_raw_frame *rf, uint32_t process)
{
	char name[96];
	switch (rf->kind) {
	case STACKPULSE_FRAME_PYTHON: {
		const struct stackpulse_pycode *pc = stackpulse_spool_pycode(b->spool, rf->pycode);
		uint32_t line = rf->line > 0 ? (uint32_t)rf->line : 0;
		return add_frame(b, rf->kind, pc ? pc->qualname : "[unknown]",
		                 pc ? pc->filename : NULL, NULL, line, rf->offset, 0);
	}
	case STACKPULSE_FRAME_KERNEL: {
		const char *ks = NULL, *kmod = NULL;
		uint64_t start = 0;
		if (stackpulse_spool_ksym_lookup(b->spool, rf->offset, &ks, &start, &kmod) != 0)
			ks = NULL;
		char modbuf[80];
		const char *mod = "[kernel.kallsyms]";
		if (ks && kmod && *kmod) {
			snprintf(modbuf, sizeof(modbuf), "[%s]", kmod);
			mod = modbuf;
		}
		return add_frame(b, rf->kind, ks ? ks : "[unknown]", NULL, mod, 0, rf->offset, 0);
	}
	case STACKPULSE_FRAME_NATIVE: {
		const struct stackpulse_module *m = stackpulse_spool_module(b->spool, rf->module);
		const char *path = m ? m->path : NULL;
		snprintf(name, sizeof(name), "%.60s+0x%" PRIx64,
		         path ? sp_basename(path) : "[unknown]", rf->offset);
		return add_frame(b, rf->kind, name, NULL, path, 0, rf->offset, 0);
	}
	case STACKPULSE_FRAME_TRUNCATED:
		return add_frame(b, rf->kind, "[truncated]", NULL, NULL, 0, 0, 0);
	case STACKPULSE_FRAME_JIT: {
		/* Perf-map names are stored in the spool, per process. */
		const char *jn = NULL;
		uint64_t start = 0;
		if (sp_spool_jitsym_lookup(b->spool, process, rf->offset, &jn, &start) != 0 || !jn)
			snprintf(name, sizeof(name), "[jit]+0x%" PRIx64, rf->offset);
		return add_frame(b, rf->kind, jn ? jn : name, NULL, NULL, 0, rf->offset, 0);
	}
	default:
		return add_frame(b, STACKPULSE_FRAME_UNKNOWN, "[unknown]", NULL, NULL, 0,
		                 rf->offset, 0);
	}
}

/* Resolves raw frame @p id at a stack position (leaf: the sampled IP, else
 * a return address) once per position; its frames land in the pool
 * root-first and *first / *count receive the range. JIT frames depend on
 * the process's perf map, so they are resolved per call instead. */
static int expand(builder *b, uint32_t id, int leaf, uint32_t process, uint32_t *first,
                  uint32_t *count)
{
	if (id >= b->nraw)
		return sp_error(STACKPULSE_EFORMAT, "stack refers to frame %u of %u", id, b->nraw);
	size_t slot = 2 * (size_t)id + (leaf ? 1 : 0);
	if (b->exp_start[slot] != SP_NONE) {
		*first = b->exp_start[slot];
		*count = b->exp_count[slot];
		return 0;
	}
	const struct stackpulse_raw_frame *rf = stackpulse_spool_frame(b->spool, id);
	if (!rf)
		return sp_error(STACKPULSE_EFORMAT, "frame %u missing", id);
	uint32_t start = b->npool;
	int rc = 0;
	if (b->sym && rf->kind != STACKPULSE_FRAME_TRUNCATED) {
		b->cb_err = 0;
		rc = sp_symbolizer_resolve_frame_at(b->sym, id, leaf, process, sym_cb, b);
		if (b->cb_err)
			return b->cb_err;
		if (rc) {
			/* The symbolizer could not name it: fall back, drop partial output. */
			b->npool = start;
			if (rc == -ENOMEM)
				return rc;
			rc = add_raw(b, rf, process);
		}
	} else {
		rc = add_raw(b, rf, process);
	}
	if (rc)
		return rc;
	/* The symbolizer and add_raw give innermost first; store root-first. */
	for (uint32_t i = start, j = b->npool; i + 1 < j; i++, j--) {
		uint32_t t = b->pool[i];
		b->pool[i] = b->pool[j - 1];
		b->pool[j - 1] = t;
	}
	*first = start;
	*count = b->npool - start;
	if (rf->kind != STACKPULSE_FRAME_JIT) {
		b->exp_start[slot] = start;
		b->exp_count[slot] = b->npool - start;
	}
	return 0;
}

/* Cache keys: (root | role, spool stack, process). Role SP_AS_SAMPLE marks a
 * whole sample stack (its first user frame resolved as the leaf); without it
 * the stack is a prefix of a longer one (every frame a return address). */
#define SP_AS_SAMPLE (1u << 31)

static int cache_lookup(builder *b, uint32_t root, uint32_t stack, uint32_t process, uint32_t *node,
                        sp_htab_probe *pr)
{
	int rc = sp_htab_reserve(&b->cache_tab);
	if (rc)
		return rc;
	uint64_t h = sp_hash_combine(sp_hash_combine(sp_hash64(root), stack), process);
	sp_htab_probe_start(&b->cache_tab, h, pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&b->cache_tab, pr)) != SP_NONE) {
		if (b->c_root[cand] == root && b->c_stack[cand] == stack &&
		    b->c_proc[cand] == process) {
			*node = b->c_node[cand];
			return 1;
		}
	}
	return 0;
}

static int cache_insert(builder *b, uint32_t root, uint32_t stack, uint32_t process, uint32_t node)
{
	sp_htab_probe pr;
	uint32_t dummy;
	int rc = cache_lookup(b, root, stack, process, &dummy, &pr);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	uint32_t need = b->ncache + 1, cap = b->cap_cache;
	rc = grow((void **)&b->c_root, &cap, need, sizeof(uint32_t));
	if (!rc) {
		cap = b->cap_cache;
		rc = grow((void **)&b->c_stack, &cap, need, sizeof(uint32_t));
	}
	if (!rc) {
		cap = b->cap_cache;
		rc = grow((void **)&b->c_proc, &cap, need, sizeof(uint32_t));
	}
	if (!rc) {
		cap = b->cap_cache;
		rc = grow((void **)&b->c_node, &cap, need, sizeof(uint32_t));
	}
	if (rc)
		return rc;
	b->cap_cache = cap;
	b->c_root[b->ncache] = root;
	b->c_stack[b->ncache] = stack;
	b->c_proc[b->ncache] = process;
	b->c_node[b->ncache] = node;
	sp_htab_insert(&b->cache_tab, &pr, b->ncache++);
	return 0;
}

/* Remembers (spool stack, frame) while walking toward the root. */
static int walk_push(builder *b, uint32_t n, uint32_t stack, uint32_t frame)
{
	uint32_t cap = b->cap_walk;
	int rc = grow((void **)&b->walk_stack, &cap, n + 1, sizeof(uint32_t));
	if (!rc) {
		cap = b->cap_walk;
		rc = grow((void **)&b->walk_frame, &cap, n + 1, sizeof(uint32_t));
	}
	if (rc)
		return rc;
	b->cap_walk = cap;
	b->walk_stack[n] = stack;
	b->walk_frame[n] = frame;
	return 0;
}

/* Appends the frames of raw frame @p fid to @p node. */
static int extend(builder *b, uint32_t *node, uint32_t fid, int leaf, uint32_t process)
{
	uint32_t first = 0, count = 0;
	int rc = expand(b, fid, leaf, process, &first, &count);
	for (uint32_t i = 0; i < count && !rc; i++)
		rc = intern_stack(b->p, *node, b->pool[first + i], node);
	return rc;
}

/* 1 when spool node @p stack, of raw frame @p frame, is dropped from the
 * Python-only view although its kind is kept: the root-most frame of a
 * stack is the unwinder's own marker when it is TRUNCATED (native frames
 * missing at the root), which says nothing of the Python chain. */
static int python_view_drops(const builder *b, uint32_t stack, uint32_t frame)
{
	if (b->opts.view != STACKPULSE_VIEW_PYTHON_ONLY ||
	    stackpulse_spool_stack_depth(b->spool, stack) != 1)
		return 0;
	const struct stackpulse_raw_frame *rf = stackpulse_spool_frame(b->spool, frame);
	return rf && rf->kind == STACKPULSE_FRAME_TRUNCATED;
}

/* Translates spool stack @p stack, used as a prefix (every frame a return
 * address), under @p root into a profile node. */
static int translate_prefix(builder *b, uint32_t root, uint32_t stack, uint32_t process,
                            uint32_t *out)
{
	uint32_t n = 0, node = root, cur = stack;
	uint32_t limit = stackpulse_spool_stack_count(b->spool);
	sp_htab_probe pr;
	while (cur != 0) {
		int hit = cache_lookup(b, root, cur, process, &node, &pr);
		if (hit < 0)
			return hit;
		if (hit)
			break;
		uint32_t frame, parent;
		if (stackpulse_spool_stack_node(b->spool, cur, &frame, &parent) != 0)
			return sp_error(STACKPULSE_EFORMAT, "unknown stack id %u", cur);
		if (n >= limit)
			return sp_error(STACKPULSE_EFORMAT, "stack %u loops", stack);
		int rc = walk_push(b, n++, cur, frame);
		if (rc)
			return rc;
		cur = parent;
		node = root;
	}
	while (n > 0) {
		n--;
		int rc = python_view_drops(b, b->walk_stack[n], b->walk_frame[n])
		                 ? 0
		                 : extend(b, &node, b->walk_frame[n], 0, process);
		if (!rc)
			rc = cache_insert(b, root, b->walk_stack[n], process, node);
		if (rc)
			return rc;
	}
	*out = node;
	return 0;
}

/* Translates a sample's stack. Kernel frames sit at the leaf end; the first
 * user frame below them is the sampled IP, looked up at its exact address,
 * everything further up as a return address. */
static int translate(builder *b, uint32_t root, uint32_t stack, uint32_t process, uint32_t *out)
{
	sp_htab_probe pr;
	uint32_t node = root;
	if (stack == 0) {
		*out = root;
		return 0;
	}
	int hit = cache_lookup(b, root | SP_AS_SAMPLE, stack, process, &node, &pr);
	if (hit) {
		*out = node;
		return hit < 0 ? hit : 0;
	}
	/* The leaf part: kernel frames, then the first user frame. */
	uint32_t kframes[64], nk = 0, user_frame = SP_NONE, user_node = 0, cur = stack;
	while (cur != 0) {
		uint32_t frame, parent;
		if (stackpulse_spool_stack_node(b->spool, cur, &frame, &parent) != 0)
			return sp_error(STACKPULSE_EFORMAT, "unknown stack id %u", cur);
		const struct stackpulse_raw_frame *rf = stackpulse_spool_frame(b->spool, frame);
		user_node = cur;
		cur = parent;
		if (!rf || rf->kind != STACKPULSE_FRAME_KERNEL || nk == 64) {
			user_frame = frame; /* (Very deep kernel parts end here too.) */
			break;
		}
		kframes[nk++] = frame;
	}
	int rc = translate_prefix(b, root, cur, process, &node);
	if (!rc && user_frame != SP_NONE && !python_view_drops(b, user_node, user_frame))
		rc = extend(b, &node, user_frame, 1, process);
	while (!rc && nk > 0)
		rc = extend(b, &node, kframes[--nk], 0, process);
	if (!rc)
		rc = cache_insert(b, root | SP_AS_SAMPLE, stack, process, node);
	if (!rc)
		*out = node;
	return rc;
}

/* A synthetic root frame naming a process or thread. */
static int synthetic_root(builder *b, uint32_t parent, const char *name, pid_t id, uint32_t *out)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%.200s [%ld]", name && *name ? name : "?", (long)id);
	struct stackpulse_profile *p = b->p;
	uint32_t sn, fn, fr;
	int rc = sp_profile_intern(p, buf, &sn);
	if (!rc)
		rc = intern_func(p, sn, 0, 0, STACKPULSE_FRAME_UNKNOWN, &fn);
	if (!rc)
		rc = intern_frame(p, fn, 0, 0, 0, &fr);
	if (!rc)
		rc = intern_stack(p, parent, fr, out);
	return rc;
}

static int root_for_thread(builder *b, uint32_t thread, uint32_t *out)
{
	uint32_t flags =
	        b->opts.flags & (STACKPULSE_PROFILE_BY_PROCESS | STACKPULSE_PROFILE_BY_THREAD);
	if (!flags) {
		*out = 0;
		return 0;
	}
	if (b->thread_root[thread] != SP_NONE) {
		*out = b->thread_root[thread];
		return 0;
	}
	struct stackpulse_profile *p = b->p;
	const struct stackpulse_profile_thread *t = &p->threads[thread];
	uint32_t node = 0;
	int rc = 0;
	if ((flags & STACKPULSE_PROFILE_BY_PROCESS) && t->process < p->nprocesses) {
		const struct stackpulse_profile_process *pr = &p->processes[t->process];
		rc = synthetic_root(b, node, sp_pstr(p, pr->name), pr->pid, &node);
	}
	if (!rc && (flags & STACKPULSE_PROFILE_BY_THREAD))
		rc = synthetic_root(b, node, sp_pstr(p, t->name), t->tid, &node);
	if (rc)
		return rc;
	b->thread_root[thread] = node;
	*out = node;
	return 0;
}

static int copy_tables(builder *b)
{
	struct stackpulse_profile *p = b->p;
	const stackpulse_spool *s = b->spool;
	uint32_t np = stackpulse_spool_process_count(s);
	uint32_t nt = stackpulse_spool_thread_count(s);
	uint32_t nm = stackpulse_spool_module_count(s);
	p->processes = sp_calloc(np ? np : 1, sizeof(*p->processes));
	p->threads = sp_calloc(nt ? nt : 1, sizeof(*p->threads));
	p->modules = sp_calloc(nm ? nm : 1, sizeof(*p->modules));
	b->thread_root = sp_malloc((nt ? nt : 1) * sizeof(uint32_t));
	if (!p->processes || !p->threads || !p->modules || !b->thread_root)
		return sp_error(-ENOMEM, "profile tables for %u threads", nt);
	memset(b->thread_root, 0xff, (nt ? nt : 1) * sizeof(uint32_t));
	int rc = 0;
	for (uint32_t i = 0; i < np && !rc; i++) {
		const struct stackpulse_process *sp = stackpulse_spool_process(s, i);
		if (!sp)
			return sp_error(STACKPULSE_EFORMAT, "process %u missing", i);
		struct stackpulse_profile_process *pp = &p->processes[i];
		pp->pid = sp->pid;
		pp->parent = sp->parent < np ? sp->parent : UINT32_MAX;
		rc = sp_profile_intern(p, sp->name, &pp->name);
		if (!rc)
			rc = sp_profile_intern(p, sp->cmdline, &pp->cmdline);
		p->nprocesses = i + 1;
	}
	for (uint32_t i = 0; i < nt && !rc; i++) {
		const struct stackpulse_thread *st = stackpulse_spool_thread(s, i);
		if (!st)
			return sp_error(STACKPULSE_EFORMAT, "thread %u missing", i);
		struct stackpulse_profile_thread *pt = &p->threads[i];
		pt->tid = st->tid;
		pt->process = st->process < np ? st->process : UINT32_MAX;
		rc = sp_profile_intern(p, stackpulse_spool_thread_display_name(s, i), &pt->name);
		p->nthreads = i + 1;
	}
	for (uint32_t i = 0; i < nm && !rc; i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(s, i);
		if (!m)
			return sp_error(STACKPULSE_EFORMAT, "module %u missing", i);
		char hex[129];
		size_t hl = 0;
		uint32_t len = m->build_id_len <= 64 ? m->build_id_len : 64;
		for (uint32_t k = 0; m->build_id && k < len; k++, hl += 2)
			snprintf(hex + hl, 3, "%02x", m->build_id[k]);
		hex[hl] = '\0';
		rc = sp_profile_intern(p, m->path, &p->modules[i].path);
		if (!rc)
			rc = sp_profile_intern_n(p, hex, hl, &p->modules[i].build_id);
		p->nmodules = i + 1;
	}
	return rc;
}

static void builder_free(builder *b)
{
	sp_free(b->exp_start);
	sp_free(b->exp_count);
	sp_free(b->pool);
	sp_free(b->c_root);
	sp_free(b->c_stack);
	sp_free(b->c_proc);
	sp_free(b->c_node);
	sp_htab_free(&b->cache_tab);
	sp_free(b->walk_stack);
	sp_free(b->walk_frame);
	sp_free(b->thread_root);
	sp_htab_free(&b->rec_tab);
}

static int keep(const builder *b, pid_t pid, pid_t tid, uint64_t time_ns)
{
	const stackpulse_profile_opts *o = &b->opts;
	if (o->pid && pid != o->pid)
		return 0;
	if (o->tid && tid != o->tid)
		return 0;
	if (o->start_ns && time_ns < o->start_ns)
		return 0;
	if (o->end_ns && time_ns >= o->end_ns)
		return 0;
	return 1;
}

/* A new sample record at the end of the samples array. */
static int push_record(struct stackpulse_profile *p, const struct stackpulse_profile_sample *r)
{
	if (p->nsamples == p->cap_samples) {
		uint64_t ncap = p->cap_samples ? p->cap_samples * 2 : 1024;
		if (ncap > ((uint64_t)1 << 40))
			return sp_error(STACKPULSE_ELIMIT, "too many samples");
		void *n = sp_realloc_array(p->samples, (size_t)ncap, sizeof(*p->samples));
		if (!n)
			return sp_error(-ENOMEM, "%" PRIu64 " samples", ncap);
		p->samples = n;
		p->cap_samples = ncap;
	}
	p->samples[p->nsamples++] = *r;
	return 0;
}

/* The merge window of time @p t (merge_ns != 0). */
static uint64_t merge_bucket(const builder *b, uint64_t t)
{
	return b->opts.merge_ns == STACKPULSE_MERGE_ALL ? 0 : t / b->opts.merge_ns;
}

/* With merge_ns: adds @p r to the record of its thread, stack, kind and
 * window (one with room left in its 32-bit weight), or starts one. Records
 * are keyed in rec_tab by their index. */
static int merge_record(builder *b, const struct stackpulse_profile_sample *r)
{
	struct stackpulse_profile *p = b->p;
	uint64_t bucket = merge_bucket(b, r->time_ns);
	uint64_t h = sp_hash_combine(sp_hash_combine(sp_hash64(r->thread), r->stack),
	                             sp_hash_combine(bucket, r->off_cpu));
	int rc = sp_htab_reserve(&b->rec_tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&b->rec_tab, h, &pr);
	uint32_t cand;
	while ((cand = sp_htab_probe_next(&b->rec_tab, &pr)) != SP_NONE) {
		struct stackpulse_profile_sample *c = &p->samples[cand];
		if (c->thread != r->thread || c->stack != r->stack || c->off_cpu != r->off_cpu ||
		    merge_bucket(b, c->time_ns) != bucket || c->weight > UINT32_MAX - r->weight)
			continue;
		c->weight += r->weight;
		c->value = c->value > UINT64_MAX - r->value ? UINT64_MAX : c->value + r->value;
		if (r->time_ns < c->time_ns)
			c->time_ns = r->time_ns;
		return 0;
	}
	if (p->nsamples >= SP_HTAB_MAX_IDS)
		return sp_error(STACKPULSE_ELIMIT, "profile: more than %u merged sample records",
		                SP_HTAB_MAX_IDS);
	rc = push_record(p, r);
	if (!rc)
		sp_htab_insert(&b->rec_tab, &pr, (uint32_t)(p->nsamples - 1));
	return rc;
}

/* The record of a kept sample (or off-CPU interval) of @p thread with
 * spool stack @p stack; @p value is what it counts for. 0, 1 when the
 * view drops it, or an error. */
static int sample_record(builder *b, uint64_t time_ns, uint32_t thread, uint32_t process,
                         uint32_t stack, uint32_t weight, int off_cpu, uint64_t value,
                         struct stackpulse_profile_sample *r)
{
	struct stackpulse_profile *p = b->p;
	if (thread >= p->nthreads)
		return sp_error(STACKPULSE_EFORMAT, "sample of unknown thread %u", thread);
	uint32_t root = 0, node = 0;
	int rc = root_for_thread(b, thread, &root);
	if (!rc)
		rc = translate(b, root, stack, process, &node);
	if (rc)
		return rc;
	if (b->opts.max_stacks && p->nstacks > b->opts.max_stacks)
		return sp_error(STACKPULSE_ELIMIT, "profile: more than %u stack nodes (max_stacks)",
		                b->opts.max_stacks);
	/* A Python-only view has nothing to show for purely native samples. */
	if (node == root && b->opts.view == STACKPULSE_VIEW_PYTHON_ONLY)
		return 1;
	*r = (struct stackpulse_profile_sample){
		time_ns, thread, node, weight, off_cpu ? 1u : 0u, value,
	};
	return 0;
}

/* The record of on-CPU sample @p s: 0, 1 when not kept, or an error. */
static int on_cpu_record(builder *b, const struct stackpulse_sample *s,
                         struct stackpulse_profile_sample *r)
{
	if (!keep(b, s->pid, s->tid, s->time_ns))
		return 1;
	uint32_t w = s->weight ? s->weight : 1;
	uint64_t value = b->p->time == STACKPULSE_TIME_SAMPLES
	                         ? w
	                         : (uint64_t)w * sp_profile_period_ns(b->p);
	return sample_record(b, s->time_ns, s->thread, s->process, s->stack, w, 0, value, r);
}

/* The record of off-CPU interval @p iv, counting for its duration plus
 * that of the intervals merged into it: they had no stack sample of their
 * own and the kernel sampled this one among them, so its stack stands for
 * them (the weight says for how many). 0, 1 when not kept, or an error. */
static int off_cpu_record(builder *b, const struct stackpulse_offcpu *iv,
                          struct stackpulse_profile_sample *r)
{
	uint64_t ns = iv->duration_ns + iv->merged_ns;
	if (ns < iv->duration_ns)
		ns = UINT64_MAX; /* A hostile file: saturate. */
	if (!keep(b, iv->pid, iv->tid, iv->start_ns) || ns == 0)
		return 1;
	uint32_t w = iv->merged < UINT32_MAX - 1 ? (uint32_t)iv->merged + 1 : UINT32_MAX;
	return sample_record(b, iv->start_ns, iv->thread, iv->process, iv->stack, w, 1, ns, r);
}

/* Adds record @p r (sample_record returned 0) to the profile. */
static int add_record(builder *b, const struct stackpulse_profile_sample *r)
{
	struct stackpulse_profile *p = b->p;
	if (b->opts.max_samples && b->kept >= b->opts.max_samples)
		return sp_error(STACKPULSE_ELIMIT,
		                "profile: more than %" PRIu64
		                " samples and intervals (max_samples)",
		                b->opts.max_samples);
	b->kept++;
	p->kept[r->off_cpu ? 1 : 0]++;
	int rc = b->opts.merge_ns ? merge_record(b, r) : push_record(p, r);
	if (rc)
		return rc;
	if (b->kept == 1 || r->time_ns < p->first_ns)
		p->first_ns = r->time_ns;
	if (r->time_ns > p->last_ns)
		p->last_ns = r->time_ns;
	return 0;
}

static int run_samples(builder *b)
{
	if (b->p->time == STACKPULSE_TIME_OFF)
		return 0;
	stackpulse_sample_iter *it = NULL;
	int rc = stackpulse_sample_iter_new(b->spool, &it);
	if (rc)
		return rc;
	const struct stackpulse_sample *s;
	struct stackpulse_profile_sample r;
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		int k = on_cpu_record(b, s, &r);
		if (k < 0 || (k == 0 && (k = add_record(b, &r)) < 0)) {
			rc = k;
			break;
		}
	}
	stackpulse_sample_iter_free(it);
	return rc < 0 ? rc : 0;
}

/* The off-CPU intervals (time views OFF and WALL). */
static int run_offcpu(builder *b)
{
	if (b->p->time != STACKPULSE_TIME_OFF && b->p->time != STACKPULSE_TIME_WALL)
		return 0;
	stackpulse_offcpu_iter *it = NULL;
	int rc = stackpulse_offcpu_iter_new(b->spool, &it);
	if (rc)
		return rc;
	const struct stackpulse_offcpu *iv;
	struct stackpulse_profile_sample r;
	while ((rc = stackpulse_offcpu_iter_next(it, &iv)) == 1) {
		int k = off_cpu_record(b, iv, &r);
		if (k < 0 || (k == 0 && (k = add_record(b, &r)) < 0)) {
			rc = k;
			break;
		}
	}
	stackpulse_offcpu_iter_free(it);
	return rc < 0 ? rc : 0;
}

void stackpulse_profile_opts_init(stackpulse_profile_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_PROFILE_OPTS;
}

/* Builds the profile of @p spool into *b (zeroed by the caller), which
 * keeps what translating a sample needs until builder_free; on failure
 * frees it and the profile. */
static int build(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                 const stackpulse_profile_opts *opts, builder *b)
{
	if (!spool)
		return sp_error(-EINVAL, "profile_build: spool is NULL");
	b->opts = STACKPULSE_PROFILE_OPTS;
	int orc = sp_opts_copy(&b->opts, sizeof(b->opts), opts, "profile_build");
	if (orc)
		return orc;
	if ((int)b->opts.view < STACKPULSE_VIEW_MIXED ||
	    (int)b->opts.view > STACKPULSE_VIEW_NATIVE_ONLY)
		return sp_error(-EINVAL, "profile_build: unknown view %d", (int)b->opts.view);
	if (b->opts.flags & ~0x1fu)
		return sp_error(-EINVAL, "profile_build: unknown flags 0x%x", b->opts.flags);
	if (b->opts.end_ns && b->opts.end_ns <= b->opts.start_ns)
		return sp_error(-EINVAL, "profile_build: empty time range");
	if ((int)b->opts.time < STACKPULSE_TIME_SAMPLES || (int)b->opts.time > STACKPULSE_TIME_WALL)
		return sp_error(-EINVAL, "profile_build: unknown time %d", (int)b->opts.time);

	struct stackpulse_profile *p = sp_calloc(1, sizeof(*p));
	if (!p)
		return sp_error(-ENOMEM, "profile");
	b->p = p;
	b->spool = spool;
	b->sym = sym;
	p->flags = b->opts.flags;
	p->view = (int)b->opts.view;
	p->time = b->opts.time;
	uint32_t zero;
	int rc = sp_profile_intern(p, "", &zero);
	if (!rc)
		rc = grow((void **)&p->stacks, &p->cap_stacks, 1, sizeof(*p->stacks));
	if (rc)
		goto fail;
	p->stacks[0] = (struct stackpulse_profile_stack){ 0, SP_NONE };
	p->nstacks = 1;

	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(spool);
	p->start_wall_ns = meta->start_time_ns;
	p->start_mono_ns = meta->start_clock_ns;
	p->frequency = meta->frequency;
	rc = sp_profile_intern(p, meta->event, &p->event);
	if (!rc)
		rc = sp_profile_intern(p, meta->machine, &p->machine);
	if (!rc)
		rc = sp_profile_intern(p, meta->hostname, &p->hostname);
	if (!rc)
		rc = copy_tables(b);
	if (rc)
		goto fail;

	b->nraw = stackpulse_spool_frame_count(spool);
	/* Two entries per raw frame: as a return address and as the leaf. */
	size_t nexp = 2 * (size_t)(b->nraw ? b->nraw : 1);
	b->exp_start = sp_malloc(nexp * sizeof(uint32_t));
	b->exp_count = sp_calloc(nexp, sizeof(uint32_t));
	if (!b->exp_start || !b->exp_count) {
		rc = sp_error(-ENOMEM, "profile frame map of %u", b->nraw);
		goto fail;
	}
	memset(b->exp_start, 0xff, nexp * sizeof(uint32_t));
	rc = run_samples(b);
	if (!rc)
		rc = run_offcpu(b);
	if (rc)
		goto fail;
	return 0;
fail:
	builder_free(b);
	stackpulse_profile_free(p);
	b->p = NULL;
	return rc;
}

int stackpulse_profile_build(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                             const stackpulse_profile_opts *opts, stackpulse_profile **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "profile_build: out is NULL");
	*out = NULL;
	builder b;
	memset(&b, 0, sizeof(b));
	int rc = build(spool, sym, opts, &b);
	if (rc)
		return rc;
	*out = b.p;
	builder_free(&b);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Sample streams (profile_internal.h). */

struct sp_sample_stream {
	builder b;
	uint32_t thread;
	stackpulse_sample_iter *on;
	stackpulse_offcpu_iter *off;
	struct stackpulse_profile_sample r_on, r_off;
	int has_on, has_off; /* r_on / r_off hold the next record. */
};

int sp_profile_build_stream(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                            const stackpulse_profile_opts *opts, stackpulse_profile **out,
                            sp_sample_stream **stream)
{
	*out = NULL;
	*stream = NULL;
	sp_sample_stream *st = sp_calloc(1, sizeof(*st));
	if (!st)
		return sp_error(-ENOMEM, "sample stream");
	stackpulse_profile_opts o = STACKPULSE_PROFILE_OPTS;
	int rc = sp_opts_copy(&o, sizeof(o), opts, "profile_build");
	if (rc) {
		sp_free(st);
		return rc;
	}
	o.merge_ns = STACKPULSE_MERGE_ALL;
	rc = build(spool, sym, &o, &st->b);
	if (rc) {
		sp_free(st);
		return rc;
	}
	*out = st->b.p;
	*stream = st;
	return 0;
}

static void stream_close(sp_sample_stream *st)
{
	stackpulse_sample_iter_free(st->on);
	stackpulse_offcpu_iter_free(st->off);
	st->on = NULL;
	st->off = NULL;
	st->has_on = st->has_off = 0;
}

int sp_sample_stream_start(sp_sample_stream *st, uint32_t thread)
{
	stream_close(st);
	st->thread = thread;
	enum stackpulse_time t = st->b.p->time;
	int rc = 0;
	if (t != STACKPULSE_TIME_OFF)
		rc = stackpulse_sample_iter_new(st->b.spool, &st->on);
	if (!rc && (t == STACKPULSE_TIME_OFF || t == STACKPULSE_TIME_WALL))
		rc = stackpulse_offcpu_iter_new(st->b.spool, &st->off);
	return rc;
}

/* Reads the next kept on-CPU record of the thread into r_on. */
static int fill_on(sp_sample_stream *st)
{
	const struct stackpulse_sample *s;
	int rc = 0;
	while (st->on && (rc = stackpulse_sample_iter_next(st->on, &s)) == 1) {
		if (s->thread != st->thread)
			continue;
		int k = on_cpu_record(&st->b, s, &st->r_on);
		if (k < 0)
			return k;
		if (k == 0) {
			st->has_on = 1;
			return 0;
		}
	}
	if (st->on && rc < 0)
		return rc;
	stackpulse_sample_iter_free(st->on);
	st->on = NULL;
	return 0;
}

static int fill_off(sp_sample_stream *st)
{
	const struct stackpulse_offcpu *iv;
	int rc = 0;
	while (st->off && (rc = stackpulse_offcpu_iter_next(st->off, &iv)) == 1) {
		if (iv->thread != st->thread)
			continue;
		int k = off_cpu_record(&st->b, iv, &st->r_off);
		if (k < 0)
			return k;
		if (k == 0) {
			st->has_off = 1;
			return 0;
		}
	}
	if (st->off && rc < 0)
		return rc;
	stackpulse_offcpu_iter_free(st->off);
	st->off = NULL;
	return 0;
}

int sp_sample_stream_next(sp_sample_stream *st, struct stackpulse_profile_sample *out)
{
	int rc = st->has_on ? 0 : fill_on(st);
	if (!rc && !st->has_off)
		rc = fill_off(st);
	if (rc)
		return rc;
	if (!st->has_on && !st->has_off)
		return 0;
	if (st->has_on && (!st->has_off || st->r_on.time_ns <= st->r_off.time_ns)) {
		*out = st->r_on;
		st->has_on = 0;
	} else {
		*out = st->r_off;
		st->has_off = 0;
	}
	return 1;
}

void sp_sample_stream_free(sp_sample_stream *st)
{
	if (!st)
		return;
	stream_close(st);
	builder_free(&st->b);
	sp_free(st);
}

void stackpulse_profile_free(stackpulse_profile *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nstrings; i++)
		sp_free(p->strings[i]);
	sp_free(p->strings);
	sp_htab_free(&p->string_tab);
	sp_free(p->funcs);
	sp_htab_free(&p->func_tab);
	sp_free(p->frames);
	sp_htab_free(&p->frame_tab);
	sp_free(p->stacks);
	sp_htab_free(&p->stack_tab);
	sp_free(p->samples);
	sp_free(p->threads);
	sp_free(p->processes);
	sp_free(p->modules);
	sp_profile_counts_free(p);
	sp_free(p);
}

/* Accessors: NULL profiles and out-of-range indexes give 0 / NULL. */
uint32_t stackpulse_profile_string_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nstrings : 0;
}

const char *stackpulse_profile_string(const stackpulse_profile *p, uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nstrings ? p->strings[i] : NULL;
}

uint32_t stackpulse_profile_function_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nfuncs : 0;
}

const struct stackpulse_profile_func *stackpulse_profile_func(const stackpulse_profile *p,
                                                              uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nfuncs ? &p->funcs[i] : NULL;
}

uint32_t stackpulse_profile_frame_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nframes : 0;
}

const struct stackpulse_profile_frame *stackpulse_profile_frame(const stackpulse_profile *p,
                                                                uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nframes ? &p->frames[i] : NULL;
}

uint32_t stackpulse_profile_stack_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nstacks : 0;
}

const struct stackpulse_profile_stack *stackpulse_profile_stack(const stackpulse_profile *p,
                                                                uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nstacks ? &p->stacks[i] : NULL;
}

uint64_t stackpulse_profile_sample_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nsamples : 0;
}

uint64_t stackpulse_profile_kept_count(const stackpulse_profile *p, int off_cpu)
{
	SP_API_ENTRY();
	return p ? p->kept[off_cpu ? 1 : 0] : 0;
}

enum stackpulse_time stackpulse_profile_time(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->time : STACKPULSE_TIME_SAMPLES;
}

const struct stackpulse_profile_sample *stackpulse_profile_sample(const stackpulse_profile *p,
                                                                  uint64_t i)
{
	SP_API_ENTRY();
	return p && i < p->nsamples ? &p->samples[i] : NULL;
}

uint32_t stackpulse_profile_thread_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nthreads : 0;
}

const struct stackpulse_profile_thread *stackpulse_profile_thread(const stackpulse_profile *p,
                                                                  uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nthreads ? &p->threads[i] : NULL;
}

uint32_t stackpulse_profile_process_count(const stackpulse_profile *p)
{
	SP_API_ENTRY();
	return p ? p->nprocesses : 0;
}

const struct stackpulse_profile_process *stackpulse_profile_process(const stackpulse_profile *p,
                                                                    uint32_t i)
{
	SP_API_ENTRY();
	return p && i < p->nprocesses ? &p->processes[i] : NULL;
}
