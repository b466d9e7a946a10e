/* The one open-addressing index for interning: slots hold dense ids into
 * the caller's array plus 32 bits of the entry's hash; the caller compares
 * candidates. Linear probing, load factor at most 1/2.
 *
 * Callers hash with common/hash.h, which is seeded per process, so keys
 * taken from a file cannot be chosen to pile into one probe run. The table
 * counts its probes so tests can check that. */
#ifndef SP_COMMON_HTAB_H
#define SP_COMMON_HTAB_H

#include <stddef.h>
#include <stdint.h>

#define SP_HTAB_NONE    UINT32_MAX
#define SP_HTAB_MAX_IDS (1u << 29)

typedef struct sp_htab_slot {
	uint32_t id1;  /* Id + 1; 0 marks an empty slot. */
	uint32_t hash; /* Folded hash. */
} sp_htab_slot;

typedef struct sp_htab {
	sp_htab_slot *slots;
	uint32_t cap;       /* Slots, a power of two (0 before the first reserve). */
	uint32_t count;     /* Ids stored. */
	uint32_t max_probe; /* Longest probe run seen (slots visited - 1). */
	uint64_t probes;    /* Slots visited past the home slot, all lookups. */
} sp_htab;

/* Probe state: sp_htab_probe_start, then sp_htab_probe_next until it returns
 * SP_HTAB_NONE (absent: sp_htab_insert stores at the slot it ended on) or a
 * candidate id to compare. */
typedef struct sp_htab_probe {
	uint32_t pos, h, slot, len;
} sp_htab_probe;

/* Returns nonzero when the value with @p id equals @p key. */
typedef int (*sp_htab_eq_fn)(const void *ctx, uint32_t id, const void *key);

void sp_htab_init(sp_htab *t);
void sp_htab_free(sp_htab *t);
/* Makes room for one more id: 0, -ENOMEM, or STACKPULSE_ELIMIT past
 * SP_HTAB_MAX_IDS. Invalidates probes in progress. */
int sp_htab_reserve(sp_htab *t);
/* Bytes the table holds. */
size_t sp_htab_bytes(const sp_htab *t);

void sp_htab_probe_start(const sp_htab *t, uint64_t hash, sp_htab_probe *pr);
uint32_t sp_htab_probe_next(sp_htab *t, sp_htab_probe *pr);
/* Stores @p id in the empty slot the last probe ended at. */
void sp_htab_insert(sp_htab *t, const sp_htab_probe *pr, uint32_t id);

/* The id of a value equal to @p key, or SP_HTAB_NONE. */
uint32_t sp_htab_find(sp_htab *t, uint64_t hash, sp_htab_eq_fn eq, const void *ctx,
                      const void *key);
/* Adds @p id (known absent); sp_htab_reserve must have succeeded. */
void sp_htab_add(sp_htab *t, uint64_t hash, uint32_t id);

#endif
