/* Tables the protobuf exporters (pprof, OTLP) share: locations (a physical
 * frame with the frames inlined into it, interned so each sequence gets
 * one id), the string table, and the order of the mappings. */
#ifndef SP_PROFILE_PROTO_TABLES_H
#define SP_PROFILE_PROTO_TABLES_H

#include <stdint.h>

#include "common/buf.h"
#include "profile/profile_internal.h"

typedef struct sp_locs {
	const struct stackpulse_profile *p;
	/* Frame sequences: physical frame first, then its inline frames
	 * outermost to innermost. */
	uint32_t *seq;
	uint32_t nseq, cap_seq;
	uint32_t *start, *len; /* Per location: its slice of seq. */
	uint32_t n, cap;       /* Locations; ids are 1..n. */
	sp_htab tab;
	uint32_t *ids; /* Location ids of the last stack, leaf first. */
	uint32_t cap_ids;
} sp_locs;

void sp_locs_init(sp_locs *l, const struct stackpulse_profile *p);
void sp_locs_free(sp_locs *l);
/* Fills l->ids with the location ids of stack node @p node, leaf first;
 * *n_out receives their count. */
int sp_locs_stack(sp_locs *l, uint32_t node, uint32_t *n_out);
/* Frames of location @p id (1-based): *frames points at *len frame
 * indices, physical first. */
void sp_locs_frames(const sp_locs *l, uint32_t id, const uint32_t **frames, uint32_t *len);

/* The string table of a protobuf exporter: strings are appended to *out as
 * repeated field @c field, index 0 being "", and each profile string is
 * written once. */
typedef struct sp_pbstrings {
	const struct stackpulse_profile *p;
	sp_buf *out;
	uint32_t field;
	uint32_t n;    /* Strings written so far. */
	uint32_t *map; /* Profile string -> table index, SP_NONE until written. */
} sp_pbstrings;

/* Writes "" as string 0. 0, -ENOMEM or a buffer error. */
int sp_pbstrings_init(sp_pbstrings *t, const struct stackpulse_profile *p, sp_buf *out,
                      uint32_t field);
void sp_pbstrings_free(sp_pbstrings *t);
/* Appends @p s (not deduplicated); *idx receives its index. */
int sp_pbstrings_add(sp_pbstrings *t, const char *s, uint32_t *idx);
/* The index of profile string @p pstr, written on first use (0 for 0). */
int sp_pbstrings_of(sp_pbstrings *t, uint32_t pstr, uint32_t *idx);

/* Receives one mapping: module string @p module with build-id string
 * @p build_id (0 when none) becomes mapping @p index (1-based). */
typedef int (*sp_mapping_fn)(void *ctx, uint32_t module, uint32_t build_id, uint32_t index);

/* Numbers the modules that native and kernel functions name, once each,
 * into @p map_of_str (indexed by string, zeroed by the caller, receiving
 * 1-based mapping indices) and calls @p fn for each in order. pprof takes
 * the first mapping for the main binary (`File:` in `go tool pprof`), so
 * the order is the spool's module order, in which the recorder meets the
 * target's executable first; modules only functions name (kernel ones)
 * follow in function order. Returns 0, or the first error of @p fn. */
int sp_profile_mappings(const struct stackpulse_profile *p, uint32_t *map_of_str, sp_mapping_fn fn,
                        void *ctx);
/* The mapping index of function @p func's module (0: none). */
uint32_t sp_profile_mapping_of(const struct stackpulse_profile *p, const uint32_t *map_of_str,
                               uint32_t func);

#endif
