/* Symbol cache tables (pure): a compact per-binary table, keyed by build-id,
 * mapping file-offset ranges to resolved frames (function name, source
 * file and line, inline chain). The byte layout is specified in
 * docs/symcache-format.md. The same bytes live in the on-disk cache and are
 * embedded in self-contained spools.
 *
 * A resolution is a list of frames, leaf first: frames[0] is the innermost
 * inlined function at the address's own file:line; each later frame is the
 * function that inlined the previous one, at the call site; the last frame
 * is the physical function. */
#ifndef SP_SYMCACHE_SYMCACHE_H
#define SP_SYMCACHE_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#define SP_SYMCACHE_VERSION      1
#define SP_SYMCACHE_HEADER_SIZE  96
#define SP_SYMCACHE_RANGE_SIZE   32
#define SP_SYMCACHE_INLINE_SIZE  16
#define SP_SYMCACHE_NONE         UINT32_MAX
#define SP_SYMCACHE_MAX_BUILD_ID 64
/* Inline records per chain; a resolution has at most this plus one frames. */
#define SP_SYMCACHE_MAX_INLINE_DEPTH 64
#define SP_SYMCACHE_MAX_FRAMES       (SP_SYMCACHE_MAX_INLINE_DEPTH + 1)
#define SP_SYMCACHE_MAX_RANGES       (1u << 24)
#define SP_SYMCACHE_MAX_INLINES      (1u << 24)
#define SP_SYMCACHE_MAX_STRINGS      (1u << 28)

/* One resolved frame. Strings point into the table (lookup) or the caller's
 * memory (builder input); NULL name means "unresolved", NULL file unknown. */
typedef struct sp_symcache_frame {
	const char *name;
	const char *file;
	uint32_t line;
} sp_symcache_frame;

/* A validated table. Borrows the bytes, which must outlive it. */
typedef struct sp_symcache {
	const uint8_t *data;
	size_t len;
	uint8_t build_id[SP_SYMCACHE_MAX_BUILD_ID];
	uint32_t build_id_len;
	uint32_t range_count;
	uint32_t inline_count;
	uint32_t strings_size;
	const uint8_t *ranges;  /* range_count records of RANGE_SIZE bytes. */
	const uint8_t *inlines; /* inline_count records of INLINE_SIZE bytes. */
	const char *strings;    /* strings_size bytes, NUL-terminated strings. */
} sp_symcache;

/* Validates untrusted @p data completely (header, sizes, sorted ranges,
 * in-range indices, acyclic bounded chains, checksum) and fills @p out.
 * Returns 0 or STACKPULSE_EFORMAT / ETRUNCATED / EVERSION / ECHECKSUM /
 * ELIMIT with a detail. Allocates nothing. */
int sp_symcache_validate(const uint8_t *data, size_t len, sp_symcache *out);

/* Looks up file offset @p off in a validated table. On a hit writes up to
 * @p max frames (leaf first) to @p frames, sets @p start / @p range_len when
 * not NULL, and returns the frame count (>= 1; frames[last].name NULL means
 * the offset is known to be unresolvable). Returns 0 when no range covers
 * @p off. No allocation, no recursion. */
uint32_t sp_symcache_lookup(const sp_symcache *t, uint64_t off, sp_symcache_frame *frames,
                            uint32_t max, uint64_t *start, uint32_t *range_len);

/* Reads range @p i (i < range_count) like sp_symcache_lookup. */
uint32_t sp_symcache_range(const sp_symcache *t, uint32_t i, sp_symcache_frame *frames,
                           uint32_t max, uint64_t *start, uint32_t *range_len);

/* Builds tables. Entries may come in any order; strings are copied. */
typedef struct sp_symcache_builder sp_symcache_builder;

int sp_symcache_builder_new(const uint8_t *build_id, uint32_t build_id_len,
                            sp_symcache_builder **out);
void sp_symcache_builder_free(sp_symcache_builder *b);
/* Adds the resolution of [start, start + len): @p n frames leaf first
 * (1 <= n <= SP_SYMCACHE_MAX_FRAMES). When ranges overlap, the entry added
 * last wins for equal starts; other overlapping entries are dropped. */
int sp_symcache_builder_add(sp_symcache_builder *b, uint64_t start, uint32_t len,
                            const sp_symcache_frame *frames, uint32_t n);
/* Adds every range of validated table @p t (entries added later win). */
int sp_symcache_builder_merge(sp_symcache_builder *b, const sp_symcache *t);
/* Keeps every start that was added: adjacent ranges with the same answer
 * stay apart, for tables whose starts are answers themselves (kernel
 * symbols, where two neighbouring functions may share a name). */
void sp_symcache_builder_keep_starts(sp_symcache_builder *b);
/* Number of entries added so far. */
size_t sp_symcache_builder_count(const sp_symcache_builder *b);
/* Serialises into a fresh allocation (free with sp_free). */
int sp_symcache_builder_finish(sp_symcache_builder *b, uint8_t **data, size_t *len);

#endif
