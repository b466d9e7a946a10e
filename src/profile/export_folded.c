/* Folded stacks (flamegraph.pl / stackcollapse-perf conventions):
 *   procname[-PID][/TID];root_frame;...;leaf_frame COUNT
 * Kernel frames end in "_[k]"; Python frames read "qualname (file)" or,
 * with STACKPULSE_EXPORT_LINES, "qualname (file:line)". Names never hold ';'
 * or line breaks. Lines are sorted frame by frame and merged, so the output
 * is the same for the same profile.
 *
 * Nothing here builds a line: names are ranked once, stack nodes that print
 * the same are merged into a canonical tree, and each line is written
 * straight to the output from its leaf. The output size is known before the
 * first byte, so a small profile that would print gigabytes (deep recursion
 * through long names) is refused with STACKPULSE_ELIMIT. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/hash.h"
#include "profile/export_internal.h"

static void add(sp_name *nm, const char *s, size_t n)
{
	nm->s[nm->k] = s;
	nm->n[nm->k++] = n;
}

static void add_str(sp_name *nm, const char *s)
{
	add(nm, s, strlen(s));
}

void sp_name_frame(const struct stackpulse_profile *p, uint32_t frame, uint32_t flags, sp_name *nm)
{
	nm->k = 0;
	if (frame >= p->nframes || p->frames[frame].func >= p->nfuncs) {
		add_str(nm, "[unknown]");
		return;
	}
	const struct stackpulse_profile_frame *fr = &p->frames[frame];
	const struct stackpulse_profile_func *fn = &p->funcs[fr->func];
	int lines = (flags & STACKPULSE_EXPORT_LINES) && fr->line;
	add_str(nm, sp_pstr(p, fn->name));
	if (fn->kind == STACKPULSE_FRAME_KERNEL) {
		add_str(nm, "_[k]");
		return;
	}
	if (fn->kind == STACKPULSE_FRAME_PYTHON) {
		const char *file = sp_pstr(p, fn->file);
		if (!*file && !lines)
			return;
		add_str(nm, " (");
		add_str(nm, *file ? file : "?");
		snprintf(nm->num, sizeof(nm->num), lines ? ":%" PRIu32 ")" : ")", fr->line);
		add_str(nm, nm->num);
		return;
	}
	if (lines) {
		snprintf(nm->num, sizeof(nm->num), ":%" PRIu32, fr->line);
		add_str(nm, nm->num);
	}
}

void sp_name_label(const struct stackpulse_profile *p, uint32_t t, uint32_t flags, sp_name *nm)
{
	const struct stackpulse_profile_thread *th = t < p->nthreads ? &p->threads[t] : NULL;
	const struct stackpulse_profile_process *pr =
	        th && th->process < p->nprocesses ? &p->processes[th->process] : NULL;
	const char *name = (flags & STACKPULSE_EXPORT_THREAD_NAMES)
	                           ? (th ? sp_pstr(p, th->name) : "")
	                           : (pr ? sp_pstr(p, pr->name) : "");
	nm->k = 0;
	add_str(nm, *name ? name : "[unknown]");
	size_t n = 0;
	nm->num[0] = '\0';
	if (flags & STACKPULSE_EXPORT_PID)
		n += (size_t)snprintf(nm->num, sizeof(nm->num), "-%ld", pr ? (long)pr->pid : -1L);
	if (flags & STACKPULSE_EXPORT_TID)
		snprintf(nm->num + n, sizeof(nm->num) - n, "/%ld", th ? (long)th->tid : -1L);
	if (nm->num[0])
		add_str(nm, nm->num);
}

size_t sp_name_len(const sp_name *nm)
{
	size_t n = 0;
	for (int i = 0; i < nm->k; i++)
		n += nm->n[i];
	return n;
}

unsigned char sp_name_at(const sp_name *nm, size_t i)
{
	for (int k = 0; k < nm->k; k++) {
		if (i < nm->n[k])
			return sp_name_clean((unsigned char)nm->s[k][i]);
		i -= nm->n[k];
	}
	return 0;
}

int sp_name_cmp(const sp_name *a, const sp_name *b)
{
	int ia = 0, ib = 0;
	size_t oa = 0, ob = 0;
	for (;;) {
		while (ia < a->k && oa == a->n[ia]) {
			ia++;
			oa = 0;
		}
		while (ib < b->k && ob == b->n[ib]) {
			ib++;
			ob = 0;
		}
		int ea = ia == a->k, eb = ib == b->k;
		if (ea || eb)
			return ea && eb ? 0 : ea ? -1 : 1;
		unsigned char ca = sp_name_clean((unsigned char)a->s[ia][oa++]);
		unsigned char cb = sp_name_clean((unsigned char)b->s[ib][ob++]);
		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
}

int sp_out_name(sp_out *o, const sp_name *nm)
{
	for (int k = 0; k < nm->k; k++) {
		const char *s = nm->s[k];
		size_t n = nm->n[k], start = 0;
		/* Write clean runs in place; replace the odd byte. */
		for (size_t i = 0; i <= n; i++) {
			if (i < n && sp_name_clean((unsigned char)s[i]) == (unsigned char)s[i])
				continue;
			if (i > start)
				sp_out_write(o, s + start, i - start);
			if (i < n) {
				char c = (char)sp_name_clean((unsigned char)s[i]);
				sp_out_write(o, &c, 1);
			}
			start = i + 1;
		}
	}
	return o->err;
}

/* Samples are grouped by whatever makes their root label differ. */
static uint32_t group_of(const struct stackpulse_profile *p, uint32_t t, uint32_t flags)
{
	if (flags & (STACKPULSE_EXPORT_TID | STACKPULSE_EXPORT_THREAD_NAMES))
		return t;
	const struct stackpulse_profile_thread *th = t < p->nthreads ? &p->threads[t] : NULL;
	if (!th || th->process >= p->nprocesses)
		return SP_NONE;
	if (flags & STACKPULSE_EXPORT_PID)
		return th->process;
	return p->processes[th->process].name; /* Same comm, same root. */
}

void sp_agg_free(sp_agg *a)
{
	sp_free(a->group);
	sp_free(a->node);
	sp_free(a->thread);
	sp_free(a->count);
	sp_htab_free(&a->tab);
}

int sp_agg_add(sp_agg *a, uint32_t group, uint32_t node, uint32_t thread, uint64_t w)
{
	int rc = sp_htab_reserve(&a->tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&a->tab, sp_hash_combine(sp_hash64(group), node), &pr);
	uint32_t c;
	while ((c = sp_htab_probe_next(&a->tab, &pr)) != SP_NONE) {
		if (a->group[c] == group && a->node[c] == node) {
			a->count[c] += w;
			return 0;
		}
	}
	if (a->n == a->cap) {
		/* Four columns, one capacity: each grows from the old one. */
		uint32_t need = a->n + 1, c1 = a->cap, c2 = a->cap, c3 = a->cap, c4 = a->cap;
		rc = SP_GROW(a->group, c1, need, SP_HTAB_MAX_IDS, "stacks to aggregate");
		if (!rc)
			rc = SP_GROW(a->node, c2, need, SP_HTAB_MAX_IDS, "stacks to aggregate");
		if (!rc)
			rc = SP_GROW(a->thread, c3, need, SP_HTAB_MAX_IDS, "stacks to aggregate");
		if (!rc)
			rc = SP_GROW(a->count, c4, need, SP_HTAB_MAX_IDS, "stacks to aggregate");
		if (rc)
			return rc;
		a->cap = c1;
	}
	a->group[a->n] = group;
	a->node[a->n] = node;
	a->thread[a->n] = thread;
	a->count[a->n] = w;
	sp_htab_insert(&a->tab, &pr, a->n++);
	return 0;
}

/* Sorting by name: each item carries what its comparison needs. */
typedef struct name_ctx {
	const struct stackpulse_profile *p;
	uint32_t flags;
	int label; /* Items are threads (root labels), else frames. */
} name_ctx;

typedef struct name_item {
	const name_ctx *c;
	uint32_t idx;  /* Frame or thread index. */
	uint32_t slot; /* Where its rank goes. */
} name_item;

static void item_name(const name_item *it, sp_name *nm)
{
	if (it->c->label)
		sp_name_label(it->c->p, it->idx, it->c->flags, nm);
	else
		sp_name_frame(it->c->p, it->idx, it->c->flags, nm);
}

static int item_cmp(const void *x, const void *y)
{
	sp_name a, b;
	item_name(x, &a);
	item_name(y, &b);
	return sp_name_cmp(&a, &b);
}

/* Ranks @p n items by name into rank[slot]: equal names, equal ranks. */
static void rank_items(name_item *it, uint32_t n, uint32_t *rank)
{
	qsort(it, n, sizeof(*it), item_cmp);
	uint32_t r = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i > 0 && item_cmp(&it[i - 1], &it[i]) != 0)
			r++;
		rank[it[i].slot] = r;
	}
}

typedef struct canon_key {
	uint32_t parent, rank, id;
} canon_key;

static int canon_cmp(const void *x, const void *y)
{
	const canon_key *a = x, *b = y;
	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

typedef struct line_key {
	uint32_t label, pre, thread, leaf;
	uint64_t count;
} line_key;

static int line_cmp(const void *x, const void *y)
{
	const line_key *a = x, *b = y;
	if (a->label != b->label)
		return a->label < b->label ? -1 : 1;
	return a->pre < b->pre ? -1 : a->pre > b->pre;
}

static unsigned digits(uint64_t v)
{
	unsigned d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

void sp_folded_free(sp_folded *f)
{
	sp_free(f->cparent);
	sp_free(f->cframe);
	sp_free(f->lines);
	memset(f, 0, sizeof(*f));
}

uint32_t sp_folded_path(const sp_folded *f, size_t i, uint32_t *path)
{
	uint32_t depth = 0;
	for (uint32_t c = f->lines[i].leaf; c != 0 && depth < f->max_depth; c = f->cparent[c])
		path[depth++] = c;
	for (uint32_t a = 0, b = depth; a + 1 < b; a++, b--) {
		uint32_t t = path[a];
		path[a] = path[b - 1];
		path[b - 1] = t;
	}
	return depth;
}

char sp_folded_kind(const struct stackpulse_profile *p, const sp_folded *f, uint32_t c)
{
	uint32_t fr = f->cframe[c];
	if (fr >= p->nframes || p->frames[fr].func >= p->nfuncs)
		return SP_KIND_BYTE(0);
	int kind = (int)p->funcs[p->frames[fr].func].kind;
	if (kind == STACKPULSE_FRAME_NATIVE && p->frames[fr].inline_depth > 0)
		kind = STACKPULSE_FRAME_INLINE; /* Coloured apart in the SVG. */
	return SP_KIND_BYTE(kind);
}

/* Scratch of sp_folded_build, all sized by the profile. */
typedef struct fold_tmp {
	sp_agg a;
	sp_htab ctab;
	name_item *items;
	uint32_t *frank, *crank, *canon, *size, *pre, *lrank, *cdepth;
	uint64_t *clen;
	canon_key *ck;
	line_key *lk;
} fold_tmp;

static void fold_tmp_free(fold_tmp *t)
{
	sp_agg_free(&t->a);
	sp_htab_free(&t->ctab);
	sp_free(t->items);
	sp_free(t->frank);
	sp_free(t->crank);
	sp_free(t->canon);
	sp_free(t->size);
	sp_free(t->pre);
	sp_free(t->lrank);
	sp_free(t->cdepth);
	sp_free(t->clen);
	sp_free(t->ck);
	sp_free(t->lk);
}

/* Canonical tree: one node per distinct printed path. Parents come before
 * children in the profile, so one pass in index order does. */
static int build_canon(const struct stackpulse_profile *p, fold_tmp *t, sp_folded *out)
{
	out->ncanon = 1;
	out->cframe[0] = SP_NONE;
	for (uint32_t s = 1; s < p->nstacks; s++) {
		uint32_t par = p->stacks[s].parent, fr = p->stacks[s].frame;
		uint32_t cp = par < s ? t->canon[par] : 0;
		uint32_t r = t->frank[fr < p->nframes ? fr : p->nframes];
		int rc = sp_htab_reserve(&t->ctab);
		if (rc)
			return rc;
		sp_htab_probe pr;
		sp_htab_probe_start(&t->ctab, sp_hash_combine(sp_hash64(cp), r), &pr);
		uint32_t c;
		while ((c = sp_htab_probe_next(&t->ctab, &pr)) != SP_NONE)
			if (out->cparent[c] == cp && t->crank[c] == r)
				break;
		if (c == SP_NONE) {
			c = out->ncanon++;
			out->cparent[c] = cp;
			out->cframe[c] = fr;
			t->crank[c] = r;
			sp_htab_insert(&t->ctab, &pr, c);
		}
		t->canon[s] = c;
	}
	return 0;
}

/* Preorder with children by name rank: a path's preorder index orders it
 * frame by frame, a prefix first. */
static void build_preorder(fold_tmp *t, const sp_folded *out)
{
	uint32_t nc = out->ncanon;
	for (uint32_t c = 0; c < nc; c++)
		t->size[c] = 1;
	for (uint32_t c = nc - 1; c > 0; c--)
		t->size[out->cparent[c]] += t->size[c];
	for (uint32_t c = 1; c < nc; c++)
		t->ck[c - 1] = (canon_key){ out->cparent[c], t->crank[c], c };
	qsort(t->ck, nc - 1, sizeof(*t->ck), canon_cmp);
	t->pre[0] = 0;
	for (uint32_t i = 0; i + 1 < nc;) {
		uint32_t par = t->ck[i].parent, off = t->pre[par] + 1;
		for (; i + 1 < nc && t->ck[i].parent == par; i++) {
			t->pre[t->ck[i].id] = off;
			off += t->size[t->ck[i].id];
		}
	}
}

int sp_folded_build(const struct stackpulse_profile *p, uint32_t flags, sp_folded *out)
{
	memset(out, 0, sizeof(*out));
	fold_tmp t;
	memset(&t, 0, sizeof(t));
	int rc = 0;
	for (uint64_t i = 0; i < p->nsamples && !rc; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		rc = sp_agg_add(&t.a, group_of(p, s->thread, flags), s->stack, s->thread, s->value);
	}
	if (rc)
		goto done;
	/* Frame index nframes stands for "[unknown]". */
	uint32_t nf = p->nframes + 1, ns = p->nstacks ? p->nstacks : 1, na = t.a.n;
	name_ctx fctx = { p, flags, 0 }, lctx = { p, flags, 1 };
	t.items = sp_calloc(nf > na ? nf : na, sizeof(*t.items));
	t.frank = sp_calloc(nf, sizeof(uint32_t));
	t.lrank = sp_calloc(na ? na : 1, sizeof(uint32_t));
	t.lk = sp_calloc(na ? na : 1, sizeof(*t.lk));
	t.canon = sp_calloc(ns, sizeof(uint32_t));
	t.crank = sp_calloc(ns, sizeof(uint32_t));
	t.size = sp_calloc(ns, sizeof(uint32_t));
	t.pre = sp_calloc(ns, sizeof(uint32_t));
	t.cdepth = sp_calloc(ns, sizeof(uint32_t));
	t.clen = sp_calloc(ns, sizeof(uint64_t));
	t.ck = sp_calloc(ns, sizeof(*t.ck));
	out->cparent = sp_calloc(ns, sizeof(uint32_t));
	out->cframe = sp_calloc(ns, sizeof(uint32_t));
	out->lines = sp_calloc(na ? na : 1, sizeof(*out->lines));
	if (!t.items || !t.frank || !t.lrank || !t.lk || !t.canon || !t.crank || !t.size ||
	    !t.pre || !t.cdepth || !t.clen || !t.ck || !out->cparent || !out->cframe ||
	    !out->lines) {
		rc = sp_error(-ENOMEM, "folded: tables for %u stack nodes", ns);
		goto done;
	}
	for (uint32_t i = 0; i < nf; i++)
		t.items[i] = (name_item){ &fctx, i, i };
	rank_items(t.items, nf, t.frank);
	rc = build_canon(p, &t, out);
	if (rc)
		goto done;
	build_preorder(&t, out);
	for (uint32_t c = 1; c < out->ncanon; c++) {
		sp_name nm;
		sp_name_frame(p, out->cframe[c], flags, &nm);
		t.clen[c] = t.clen[out->cparent[c]] + 1 + sp_name_len(&nm);
		t.cdepth[c] = t.cdepth[out->cparent[c]] + 1;
	}
	for (uint32_t i = 0; i < na; i++)
		t.items[i] = (name_item){ &lctx, t.a.thread[i], i };
	rank_items(t.items, na, t.lrank);
	for (uint32_t i = 0; i < na; i++) {
		uint32_t node = t.a.node[i];
		uint32_t leaf = node > 0 && node < p->nstacks ? t.canon[node] : 0;
		t.lk[i] = (line_key){ t.lrank[i], t.pre[leaf], t.a.thread[i], leaf, t.a.count[i] };
	}
	qsort(t.lk, na, sizeof(*t.lk), line_cmp);
	size_t w = 0;
	for (uint32_t i = 0; i < na; i++) {
		const line_key *k = &t.lk[i];
		out->total += k->count;
		if (w > 0 && out->lines[w - 1].label == k->label &&
		    out->lines[w - 1].leaf == k->leaf) {
			out->lines[w - 1].count += k->count;
			continue;
		}
		out->lines[w++] = (sp_folded_line){ k->thread, k->label, k->leaf, k->count };
	}
	out->n = w;
	if (p->time != STACKPULSE_TIME_SAMPLES) {
		/* Time profiles fold microseconds: to the nearest, at least 1 so
		 * that no stack with time vanishes. */
		out->total = 0;
		for (size_t i = 0; i < w; i++) {
			uint64_t us = (out->lines[i].count + 500) / 1000;
			out->lines[i].count = us ? us : 1;
			out->total += out->lines[i].count;
		}
	}
	for (size_t i = 0; i < w; i++) {
		const sp_folded_line *l = &out->lines[i];
		sp_name nm;
		sp_name_label(p, l->thread, flags, &nm);
		out->bytes += sp_name_len(&nm) + t.clen[l->leaf] + 2 + digits(l->count);
		if (t.cdepth[l->leaf] + 1 > out->max_depth)
			out->max_depth = t.cdepth[l->leaf] + 1;
	}
done:
	fold_tmp_free(&t);
	if (rc)
		sp_folded_free(out);
	return rc;
}

int sp_export_folded(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                     sp_out *out)
{
	sp_folded f;
	int rc = sp_folded_build(p, o->flags, &f);
	if (rc)
		return rc;
	if (f.bytes > out->limit) {
		rc = sp_error(STACKPULSE_ELIMIT,
		              "folded export would write %" PRIu64 " bytes, over the %llu-byte cap "
		              "(%zu lines up to %u frames deep)",
		              f.bytes, (unsigned long long)out->limit, f.n, f.max_depth);
		sp_folded_free(&f);
		return rc;
	}
	uint32_t *path = sp_calloc(f.max_depth ? f.max_depth : 1, sizeof(uint32_t));
	if (!path) {
		sp_folded_free(&f);
		return sp_error(-ENOMEM, "folded path of %u frames", f.max_depth);
	}
	for (size_t i = 0; i < f.n && !rc; i++) {
		sp_name nm;
		sp_name_label(p, f.lines[i].thread, o->flags, &nm);
		rc = sp_out_name(out, &nm);
		uint32_t depth = sp_folded_path(&f, i, path);
		for (uint32_t d = 0; d < depth && !rc; d++) {
			sp_name_frame(p, f.cframe[path[d]], o->flags, &nm);
			sp_out_write(out, ";", 1);
			rc = sp_out_name(out, &nm);
		}
		if (!rc)
			rc = sp_out_printf(out, " %" PRIu64 "\n", f.lines[i].count);
	}
	sp_free(path);
	sp_folded_free(&f);
	return rc;
}
