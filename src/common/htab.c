#include "common/htab.h"

#include <errno.h>

#include "common/alloc.h"
#include "common/error.h"

static uint32_t fold(uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32));
}

void sp_htab_init(sp_htab *t)
{
	t->slots = NULL;
	t->cap = 0;
	t->count = 0;
	t->max_probe = 0;
	t->probes = 0;
}

void sp_htab_free(sp_htab *t)
{
	sp_free(t->slots);
	sp_htab_init(t);
}

size_t sp_htab_bytes(const sp_htab *t)
{
	return (size_t)t->cap * sizeof(sp_htab_slot);
}

/* Places an entry during a rehash, counting the run like any lookup. */
static void place(sp_htab *t, sp_htab_slot *slots, uint32_t cap, uint32_t h, uint32_t id1)
{
	uint32_t mask = cap - 1, i = h & mask, len = 0;
	while (slots[i].id1) {
		i = (i + 1) & mask;
		len++;
	}
	slots[i].id1 = id1;
	slots[i].hash = h;
	t->probes += len;
	if (len > t->max_probe)
		t->max_probe = len;
}

int sp_htab_reserve(sp_htab *t)
{
	if ((uint64_t)(t->count + 1) * 2 <= t->cap)
		return 0;
	if (t->count >= SP_HTAB_MAX_IDS)
		return sp_error(STACKPULSE_ELIMIT, "intern table exceeds %u entries",
		                SP_HTAB_MAX_IDS);
	uint32_t cap = t->cap ? t->cap * 2 : 64;
	sp_htab_slot *slots = sp_calloc(cap, sizeof(*slots));
	if (!slots)
		return sp_error(-ENOMEM, "cannot grow intern table to %u slots", cap);
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->slots[i].id1)
			place(t, slots, cap, t->slots[i].hash, t->slots[i].id1);
	sp_free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

void sp_htab_probe_start(const sp_htab *t, uint64_t hash, sp_htab_probe *pr)
{
	pr->h = fold(hash);
	pr->pos = t->cap ? pr->h & (t->cap - 1) : 0;
	pr->slot = SP_HTAB_NONE;
	pr->len = 0;
}

uint32_t sp_htab_probe_next(sp_htab *t, sp_htab_probe *pr)
{
	if (!t->cap)
		return SP_HTAB_NONE;
	for (;;) {
		uint32_t pos = pr->pos;
		const sp_htab_slot *s = &t->slots[pos];
		pr->pos = (pos + 1) & (t->cap - 1);
		if (pr->len) {
			t->probes++;
			if (pr->len > t->max_probe)
				t->max_probe = pr->len;
		}
		pr->len++;
		if (!s->id1) {
			pr->slot = pos;
			return SP_HTAB_NONE;
		}
		if (s->hash == pr->h)
			return s->id1 - 1;
	}
}

void sp_htab_insert(sp_htab *t, const sp_htab_probe *pr, uint32_t id)
{
	t->slots[pr->slot].id1 = id + 1;
	t->slots[pr->slot].hash = pr->h;
	t->count++;
}

uint32_t sp_htab_find(sp_htab *t, uint64_t hash, sp_htab_eq_fn eq, const void *ctx, const void *key)
{
	sp_htab_probe pr;
	sp_htab_probe_start(t, hash, &pr);
	uint32_t id;
	while ((id = sp_htab_probe_next(t, &pr)) != SP_HTAB_NONE)
		if (eq(ctx, id, key))
			return id;
	return SP_HTAB_NONE;
}

void sp_htab_add(sp_htab *t, uint64_t hash, uint32_t id)
{
	sp_htab_probe pr;
	sp_htab_probe_start(t, hash, &pr);
	while (sp_htab_probe_next(t, &pr) != SP_HTAB_NONE)
		;
	sp_htab_insert(t, &pr, id);
}
