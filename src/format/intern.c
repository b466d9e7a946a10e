#include "format/intern.h"

#include <errno.h>

#include "common/alloc.h"
#include "common/error.h"

static uint32_t fold(uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32));
}

void sp_intern_init(sp_intern *t)
{
	t->slots = NULL;
	t->cap = 0;
	t->count = 0;
}

void sp_intern_free(sp_intern *t)
{
	sp_free(t->slots);
	sp_intern_init(t);
}

size_t sp_intern_bytes(const sp_intern *t)
{
	return t->cap * sizeof(sp_intern_slot);
}

static void place(sp_intern_slot *slots, size_t cap, uint32_t hash, uint32_t id1)
{
	size_t mask = cap - 1;
	size_t i = hash & mask;
	while (slots[i].id1)
		i = (i + 1) & mask;
	slots[i].id1 = id1;
	slots[i].hash = hash;
}

int sp_intern_reserve(sp_intern *t)
{
	if ((t->count + 1) * 2 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 64;
	if (cap > SIZE_MAX / sizeof(sp_intern_slot) / 2)
		return sp_error(-ENOMEM, "intern table too large");
	sp_intern_slot *slots = sp_calloc(cap, sizeof(*slots));
	if (!slots)
		return sp_error(-ENOMEM, "cannot grow intern table to %zu slots", cap);
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].id1)
			place(slots, cap, t->slots[i].hash, t->slots[i].id1);
	sp_free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

uint32_t sp_intern_find(const sp_intern *t, uint64_t hash, sp_intern_eq_fn eq, const void *ctx,
                        const void *key)
{
	if (!t->cap)
		return UINT32_MAX;
	uint32_t h = fold(hash);
	size_t mask = t->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		const sp_intern_slot *s = &t->slots[i];
		if (!s->id1)
			return UINT32_MAX;
		if (s->hash == h && eq(ctx, s->id1 - 1, key))
			return s->id1 - 1;
	}
}

void sp_intern_insert(sp_intern *t, uint64_t hash, uint32_t id)
{
	place(t->slots, t->cap, fold(hash), id + 1);
	t->count++;
}
