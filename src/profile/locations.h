/* Locations shared by the pprof and OTLP exporters: a physical frame with
 * the frames inlined into it, interned so each sequence gets one id. */
#ifndef SP_PROFILE_LOCATIONS_H
#define SP_PROFILE_LOCATIONS_H

#include <stdint.h>

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

#endif
