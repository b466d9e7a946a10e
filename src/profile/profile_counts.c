/* Per-function self (leaf) and inclusive weights of a built profile. */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/profile_internal.h"

struct sp_func_counts {
	uint32_t n;
	struct stackpulse_profile_func_count items[];
};

static int by_weight(const void *a, const void *b)
{
	const struct stackpulse_profile_func_count *x = a, *y = b;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->inclusive != y->inclusive)
		return x->inclusive > y->inclusive ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

/* One pass over the samples; each stack walk stops at the root because
 * every node's parent is an older node (profile_internal.h). */
static int compute(const struct stackpulse_profile *p, struct sp_func_counts **out)
{
	uint32_t nf = p->nfuncs;
	uint64_t *self = sp_calloc(nf ? nf : 1, sizeof(uint64_t));
	uint64_t *incl = sp_calloc(nf ? nf : 1, sizeof(uint64_t));
	uint64_t *seen = sp_calloc(nf ? nf : 1, sizeof(uint64_t)); /* sample index + 1 */
	int rc = 0;
	if (!self || !incl || !seen) {
		rc = sp_error(-ENOMEM, "profile: cannot allocate function counts");
		goto done;
	}
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		uint32_t node = s->stack;
		if (node == 0 || node >= p->nstacks)
			continue;
		for (int leaf = 1; node != 0 && node < p->nstacks; leaf = 0) {
			const struct stackpulse_profile_stack *st = &p->stacks[node];
			uint32_t f = st->frame < p->nframes ? p->frames[st->frame].func : SP_NONE;
			if (f < nf) {
				if (leaf)
					self[f] += s->value;
				if (seen[f] != i + 1) {
					seen[f] = i + 1;
					incl[f] += s->value;
				}
			}
			if (st->parent >= node)
				break; /* not a tree: never loop */
			node = st->parent;
		}
	}
	uint32_t n = 0;
	for (uint32_t f = 0; f < nf; f++)
		n += incl[f] != 0;
	struct sp_func_counts *c =
	        sp_malloc(sizeof(*c) + (size_t)n * sizeof(struct stackpulse_profile_func_count));
	if (!c) {
		rc = sp_error(-ENOMEM, "profile: cannot allocate function counts");
		goto done;
	}
	c->n = 0;
	for (uint32_t f = 0; f < nf; f++)
		if (incl[f])
			c->items[c->n++] =
			        (struct stackpulse_profile_func_count){ f, self[f], incl[f] };
	qsort(c->items, c->n, sizeof(c->items[0]), by_weight);
	*out = c;
done:
	sp_free(self);
	sp_free(incl);
	sp_free(seen);
	return rc;
}

int stackpulse_profile_func_counts(const stackpulse_profile *p,
                                   const struct stackpulse_profile_func_count **out,
                                   uint32_t *count)
{
	SP_API_ENTRY();
	if (!p || !out || !count)
		return sp_error(-EINVAL, "profile_func_counts: NULL argument");
	*out = NULL;
	*count = 0;
	/* The profile is read-only for its users; this cache is the one field
	 * filled late, published with a compare-and-swap (the loser of a race
	 * frees its own copy). */
	struct sp_func_counts **slot = &((struct stackpulse_profile *)p)->counts;
	struct sp_func_counts *c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!c) {
		struct sp_func_counts *mine = NULL;
		int rc = compute(p, &mine);
		if (rc || !mine)
			return rc ? rc : sp_error(-ENOMEM, "profile: no function counts");
		struct sp_func_counts *expected = NULL;
		if (__atomic_compare_exchange_n(slot, &expected, mine, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE)) {
			c = mine;
		} else {
			sp_free(mine);
			c = expected;
		}
	}
	*out = c->n ? c->items : NULL;
	*count = c->n;
	return 0;
}

void sp_profile_counts_free(struct stackpulse_profile *p)
{
	sp_free(p->counts);
	p->counts = NULL;
}
