/* A "top" table over a stackpulse profile: self and total weight per
 * function name, using only the public accessors. Header-only so the
 * examples and the tests share it. Functions with the same name (in
 * different files or modules) are summed, as `go tool pprof -top` does. */
#ifndef STACKPULSE_EXAMPLES_REPORT_TOP_H
#define STACKPULSE_EXAMPLES_REPORT_TOP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stackpulse.h"

struct sp_top_row {
	uint32_t name;  /* Profile string index of the function name. */
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
	return x->name < y->name ? -1 : x->name > y->name;
}

static inline void sp_top_free(struct sp_top *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

/* Fills @p t; returns 0 or -1 when out of memory. */
static inline int sp_top_compute(const stackpulse_profile *p, struct sp_top *t)
{
	memset(t, 0, sizeof(*t));
	uint32_t nstacks = stackpulse_profile_stack_count(p);
	uint32_t nstr = stackpulse_profile_string_count(p);
	uint64_t *w = calloc(nstacks ? nstacks : 1, sizeof(uint64_t));
	uint64_t *self = calloc(nstr ? nstr : 1, sizeof(uint64_t));
	uint64_t *tot = calloc(nstr ? nstr : 1, sizeof(uint64_t));
	uint32_t *stamp = calloc(nstr ? nstr : 1, sizeof(uint32_t));
	int *kind = calloc(nstr ? nstr : 1, sizeof(int));
	int rc = -1;
	if (!w || !self || !tot || !stamp || !kind)
		goto out;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		if (s->stack < nstacks)
			w[s->stack] += s->weight;
		t->total += s->weight;
	}
	/* One walk per distinct leaf; the stamp counts a name once per stack. */
	for (uint32_t n = 1; n < nstacks; n++) {
		if (!w[n])
			continue;
		int leaf = 1;
		for (uint32_t c = n, steps = 0; c != 0 && steps < nstacks; steps++) {
			const struct stackpulse_profile_stack *st = stackpulse_profile_stack(p, c);
			const struct stackpulse_profile_frame *fr =
			        stackpulse_profile_frame(p, st->frame);
			const struct stackpulse_profile_func *fn =
			        fr ? stackpulse_profile_func(p, fr->func) : NULL;
			if (fn && fn->name < nstr) {
				if (leaf)
					self[fn->name] += w[n];
				if (stamp[fn->name] != n) {
					stamp[fn->name] = n;
					tot[fn->name] += w[n];
					kind[fn->name] = (int)fn->kind;
				}
			}
			leaf = 0;
			c = st->parent;
		}
	}
	size_t count = 0;
	for (uint32_t i = 0; i < nstr; i++)
		count += tot[i] != 0;
	t->rows = calloc(count ? count : 1, sizeof(*t->rows));
	if (!t->rows)
		goto out;
	for (uint32_t i = 0; i < nstr; i++)
		if (tot[i])
			t->rows[t->n++] = (struct sp_top_row){ i, kind[i], self[i], tot[i] };
	qsort(t->rows, t->n, sizeof(*t->rows), sp_top_cmp_);
	rc = 0;
out:
	free(w);
	free(self);
	free(tot);
	free(stamp);
	free(kind);
	return rc;
}

#endif
