/* Open-addressing index set for the profile's interning tables. */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/profile_internal.h"

void sp_itab_free(sp_itab *t)
{
	sp_free(t->idx);
	sp_free(t->hash);
	memset(t, 0, sizeof(*t));
}

static void place(uint32_t *idx, uint32_t *hash, uint32_t cap, uint32_t h, uint32_t v)
{
	uint32_t pos = h & (cap - 1);
	while (idx[pos] != SP_NONE)
		pos = (pos + 1) & (cap - 1);
	idx[pos] = v;
	hash[pos] = h;
}

int sp_itab_reserve(sp_itab *t)
{
	/* Keep the load factor under 3/4 so probes stay short. */
	if (t->cap && (uint64_t)(t->count + 1) * 4 <= (uint64_t)t->cap * 3)
		return 0;
	uint32_t ncap = t->cap ? t->cap * 2 : 64;
	if (ncap < t->cap || ncap > (1u << 30))
		return sp_error(STACKPULSE_ELIMIT, "profile table exceeds %u entries", 1u << 29);
	uint32_t *nidx = sp_malloc((size_t)ncap * sizeof(uint32_t));
	uint32_t *nhash = sp_malloc((size_t)ncap * sizeof(uint32_t));
	if (!nidx || !nhash) {
		sp_free(nidx);
		sp_free(nhash);
		return sp_error(-ENOMEM, "profile table of %u slots", ncap);
	}
	memset(nidx, 0xff, (size_t)ncap * sizeof(uint32_t));
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->idx[i] != SP_NONE)
			place(nidx, nhash, ncap, t->hash[i], t->idx[i]);
	sp_free(t->idx);
	sp_free(t->hash);
	t->idx = nidx;
	t->hash = nhash;
	t->cap = ncap;
	return 0;
}

void sp_itab_probe_start(const sp_itab *t, uint64_t hash, sp_itab_probe *pr)
{
	pr->h = (uint32_t)hash;
	pr->pos = t->cap ? pr->h & (t->cap - 1) : 0;
	pr->slot = SP_NONE;
}

uint32_t sp_itab_probe_next(const sp_itab *t, sp_itab_probe *pr)
{
	if (!t->cap)
		return SP_NONE;
	for (;;) {
		uint32_t pos = pr->pos;
		uint32_t v = t->idx[pos];
		pr->pos = (pos + 1) & (t->cap - 1);
		if (v == SP_NONE) {
			pr->slot = pos;
			return SP_NONE;
		}
		if (t->hash[pos] == pr->h)
			return v;
	}
}

void sp_itab_insert(sp_itab *t, const sp_itab_probe *pr, uint32_t index)
{
	t->idx[pr->slot] = index;
	t->hash[pr->slot] = pr->h;
	t->count++;
}
