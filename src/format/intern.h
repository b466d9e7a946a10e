/* An open-addressing index of dense ids by hash, for interning. The caller
 * owns the values; the table stores (id, 32-bit hash) pairs and asks the
 * caller to compare candidates. Load factor stays at or below 1/2. */
#ifndef SP_FORMAT_INTERN_H
#define SP_FORMAT_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_intern_slot {
	uint32_t id1;  /* Id + 1; 0 marks an empty slot. */
	uint32_t hash; /* Low bits of the value's hash. */
} sp_intern_slot;

typedef struct sp_intern {
	sp_intern_slot *slots;
	size_t cap;   /* Slots, a power of two (0 before the first reserve). */
	size_t count; /* Ids stored. */
} sp_intern;

/* Returns nonzero when the value with @p id equals @p key. */
typedef int (*sp_intern_eq_fn)(const void *ctx, uint32_t id, const void *key);

void sp_intern_init(sp_intern *t);
void sp_intern_free(sp_intern *t);
/* Makes room for one more id: 0 or -ENOMEM. */
int sp_intern_reserve(sp_intern *t);
/* Bytes the table holds. */
size_t sp_intern_bytes(const sp_intern *t);
/* The id of a value equal to @p key, or UINT32_MAX. */
uint32_t sp_intern_find(const sp_intern *t, uint64_t hash, sp_intern_eq_fn eq, const void *ctx,
                        const void *key);
/* Adds @p id (not present yet); sp_intern_reserve must have succeeded. */
void sp_intern_insert(sp_intern *t, uint64_t hash, uint32_t id);

#endif
