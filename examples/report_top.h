/* A "top" table over a stackpulse profile: self and total weight per
 * function name, using only the public accessors. Header-only so the
 * examples and the tests share it. Functions with the same name (in
 * different files or modules) are summed, as `go tool pprof -top` does.
 *
 * Rows can be split further: by source line (SP_TOP_LINES, as
 * `go tool pprof -top -lines`) and by a group of threads (a caller-given
 * group per profile thread, for example one per thread or per process). */
#ifndef STACKPULSE_EXAMPLES_REPORT_TOP_H
#define STACKPULSE_EXAMPLES_REPORT_TOP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stackpulse.h"

/* A map from three 32-bit keys to an entry with two counters; entries
 * keep their insertion index. */
struct sp_tmap_entry {
	uint32_t a, b, c; /* Key. */
	uint32_t d, e;    /* Caller data. */
	uint64_t x, y;    /* Caller counters. */
};

struct sp_tmap {
	struct sp_tmap_entry *v;
	uint32_t n, cap_v;
	uint32_t *slots; /* Entry index + 1 per slot, 0 when empty. */
	uint32_t cap;    /* Slots, a power of two (0 before the first insert). */
};

static inline uint32_t sp_tmap_hash_(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)b + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
	h ^= ((uint64_t)c + 0x165667b19e3779f9ull) * 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return (uint32_t)(h ^ (h >> 32));
}

static inline void sp_tmap_free(struct sp_tmap *m)
{
	free(m->v);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

/* Finds or adds the entry (a, b, c); *idx receives its index and *added
 * (when not NULL) 1 when it was new (zeroed data). 0, or -1 out of memory. */
static inline int sp_tmap_get(struct sp_tmap *m, uint32_t a, uint32_t b, uint32_t c, uint32_t *idx,
                              int *added)
{
	/* Room for a new entry first, so entries exist whenever slots do. */
	if (m->n == m->cap_v) {
		uint32_t nc = m->cap_v ? m->cap_v * 2 : 64;
		struct sp_tmap_entry *nv = realloc(m->v, (size_t)nc * sizeof(*nv));
		if (!nv)
			return -1;
		m->v = nv;
		m->cap_v = nc;
	}
	if ((uint64_t)(m->n + 1) * 2 > m->cap) {
		if (m->cap >= (1u << 30))
			return -1;
		uint32_t ncap = m->cap ? m->cap * 2 : 64;
		uint32_t *ns = calloc(ncap, sizeof(uint32_t));
		if (!ns)
			return -1;
		for (uint32_t i = 0; i < m->n; i++) {
			uint32_t s = sp_tmap_hash_(m->v[i].a, m->v[i].b, m->v[i].c) & (ncap - 1);
			while (ns[s] != 0)
				s = (s + 1) & (ncap - 1);
			ns[s] = i + 1;
		}
		free(m->slots);
		m->slots = ns;
		m->cap = ncap;
	}
	uint32_t s = sp_tmap_hash_(a, b, c) & (m->cap - 1);
	for (; m->n > 0; s = (s + 1) & (m->cap - 1)) {
		if (m->slots[s] == 0 || m->slots[s] > m->n)
			break;
		uint32_t i = m->slots[s] - 1;
		if (m->v[i].a == a && m->v[i].b == b && m->v[i].c == c) {
			*idx = i;
			if (added)
				*added = 0;
			return 0;
		}
	}
	m->v[m->n] = (struct sp_tmap_entry){ a, b, c, 0, 0, 0, 0 };
	m->slots[s] = m->n + 1;
	*idx = m->n++;
	if (added)
		*added = 1;
	return 0;
}

enum sp_top_flag {
	SP_TOP_LINES = 1u << 0, /* One row per (function, source line). */
};

struct sp_top_row {
	uint32_t name;  /* Profile string index of the function name. */
	uint32_t line;  /* Source line with SP_TOP_LINES (0: unknown), else 0. */
	uint32_t group; /* The row's thread group (0 without groups). */
	int kind;       /* stackpulse_frame_kind of the first function seen. */
	uint64_t self;  /* Weight of samples whose leaf is this function. */
	uint64_t total; /* Weight of samples with this function anywhere. */
};

struct sp_top {
	struct sp_top_row *rows; /* Sorted: self, then total, descending. */
	size_t n;
	uint64_t total; /* Weight of all samples. */
};

static inline int sp_top_cmp_(const void *a, const void *b)
{
	const struct sp_top_row *x = a, *y = b;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static inline void sp_top_free(struct sp_top *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

/* Fills @p t. @p group_of_thread gives the group of each profile thread
 * (NULL: one group, 0); @p flags are sp_top_flag bits. Returns 0 or -1
 * when out of memory. */
static inline int sp_top_compute_ex(const stackpulse_profile *p, const uint32_t *group_of_thread,
                                    uint32_t flags, struct sp_top *t)
{
	memset(t, 0, sizeof(*t));
	uint32_t nstacks = stackpulse_profile_stack_count(p);
	uint32_t nthreads = stackpulse_profile_thread_count(p);
	struct sp_tmap leaves = { 0 }, rows = { 0 }; /* (group, leaf node); (group, name, line). */
	int rc = -1;
	uint32_t at;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		t->total += s->value;
		uint32_t g =
		        group_of_thread && s->thread < nthreads ? group_of_thread[s->thread] : 0;
		if (s->stack == 0 || s->stack >= nstacks)
			continue;
		if (sp_tmap_get(&leaves, g, s->stack, 0, &at, NULL) != 0)
			goto out;
		leaves.v[at].x += s->value;
	}
	/* One walk per distinct (group, leaf); the stamp (row data d) counts a
	 * row once per walk. */
	for (uint32_t e = 0; e < leaves.n; e++) {
		uint32_t g = leaves.v[e].a;
		uint64_t w = leaves.v[e].x;
		int leaf = 1;
		for (uint32_t c = leaves.v[e].b, steps = 0; c != 0 && steps < nstacks; steps++) {
			const struct stackpulse_profile_stack *st = stackpulse_profile_stack(p, c);
			if (!st)
				break;
			const struct stackpulse_profile_frame *fr =
			        stackpulse_profile_frame(p, st->frame);
			const struct stackpulse_profile_func *fn =
			        fr ? stackpulse_profile_func(p, fr->func) : NULL;
			if (fn) {
				uint32_t line = (flags & SP_TOP_LINES) ? fr->line : 0;
				int added;
				if (sp_tmap_get(&rows, g, fn->name, line, &at, &added) != 0)
					goto out;
				struct sp_tmap_entry *r = &rows.v[at];
				if (added)
					r->e = (uint32_t)fn->kind;
				if (leaf)
					r->x += w;
				if (r->d != e + 1) {
					r->d = e + 1;
					r->y += w;
				}
			}
			leaf = 0;
			c = st->parent;
		}
	}
	t->rows = calloc(rows.n ? rows.n : 1, sizeof(*t->rows));
	if (!t->rows)
		goto out;
	for (uint32_t i = 0; i < rows.n; i++) {
		const struct sp_tmap_entry *r = &rows.v[i];
		t->rows[t->n++] = (struct sp_top_row){ r->b, r->c, r->a, (int)r->e, r->x, r->y };
	}
	qsort(t->rows, t->n, sizeof(*t->rows), sp_top_cmp_);
	rc = 0;
out:
	sp_tmap_free(&leaves);
	sp_tmap_free(&rows);
	if (rc)
		sp_top_free(t);
	return rc;
}

/* The plain table: one row per function name, all threads together. */
static inline int sp_top_compute(const stackpulse_profile *p, struct sp_top *t)
{
	return sp_top_compute_ex(p, NULL, 0, t);
}

#endif
