/* Identity of interned spool values, shared by the writer (to intern) and
 * the reader (to reject duplicate definitions). */
#ifndef SP_FORMAT_SPOOL_KEYS_H
#define SP_FORMAT_SPOOL_KEYS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/hash.h"
#include "stackpulse.h"

/* Sets the fields a frame kind does not use to their fixed values, so equal
 * frames compare equal bytewise-by-field. Returns 0, or -EINVAL for a kind
 * that cannot be stored (INLINE or out of range). */
static inline int sp_frame_canonical(struct stackpulse_raw_frame *f)
{
	switch (f->kind) {
	case STACKPULSE_FRAME_NATIVE:
		f->pycode = UINT32_MAX;
		f->line = 0;
		return 0;
	case STACKPULSE_FRAME_KERNEL:
	case STACKPULSE_FRAME_UNKNOWN:
	case STACKPULSE_FRAME_JIT:
		f->module = UINT32_MAX;
		f->pycode = UINT32_MAX;
		f->line = 0;
		return 0;
	case STACKPULSE_FRAME_PYTHON: f->module = UINT32_MAX; return 0;
	case STACKPULSE_FRAME_TRUNCATED:
		f->module = UINT32_MAX;
		f->pycode = UINT32_MAX;
		f->offset = 0;
		f->line = 0;
		return 0;
	default: return -EINVAL;
	}
}

static inline uint64_t sp_frame_hash(const struct stackpulse_raw_frame *f)
{
	uint64_t h = sp_hash64((uint64_t)(uint32_t)f->kind);
	h = sp_hash_combine(h, f->module);
	h = sp_hash_combine(h, f->offset);
	h = sp_hash_combine(h, f->pycode);
	return sp_hash_combine(h, (uint32_t)f->line);
}

static inline int sp_frame_equal(const struct stackpulse_raw_frame *a,
                                 const struct stackpulse_raw_frame *b)
{
	return a->kind == b->kind && a->module == b->module && a->offset == b->offset &&
	       a->pycode == b->pycode && a->line == b->line;
}

static inline uint64_t sp_stack_hash(uint32_t parent, uint32_t frame)
{
	return sp_hash64(((uint64_t)parent << 32) | frame);
}

static inline uint64_t sp_module_hash(const char *path, size_t path_len, const uint8_t *bid,
                                      size_t bid_len)
{
	return sp_hash_combine(sp_hash_bytes(path, path_len), sp_hash_bytes(bid, bid_len));
}

/* A module's identity: path and build-id. */
typedef struct sp_module_key {
	const char *path;
	size_t path_len;
	const uint8_t *build_id;
	size_t build_id_len;
} sp_module_key;

static inline int sp_module_key_equal(const sp_module_key *k, const char *path, const uint8_t *bid,
                                      size_t bid_len)
{
	return strlen(path) == k->path_len && memcmp(path, k->path, k->path_len) == 0 &&
	       bid_len == k->build_id_len &&
	       (bid_len == 0 || memcmp(bid, k->build_id, bid_len) == 0);
}

#endif
