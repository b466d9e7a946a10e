/* Tables the protobuf exporters share (see proto_tables.h). */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/hash.h"
#include "profile/proto_tables.h"
#include "profile/proto.h"

static int grow32(uint32_t **arr, uint32_t *cap, uint32_t need)
{
	return sp_grow((void **)arr, cap, need, sizeof(uint32_t), SP_HTAB_MAX_IDS, "locations");
}

void sp_locs_init(sp_locs *l, const struct stackpulse_profile *p)
{
	memset(l, 0, sizeof(*l));
	l->p = p;
}

void sp_locs_free(sp_locs *l)
{
	sp_free(l->seq);
	sp_free(l->start);
	sp_free(l->len);
	sp_htab_free(&l->tab);
	sp_free(l->ids);
	memset(l, 0, sizeof(*l));
}

/* Interns the frame sequence seq[start..start+len) as a location id. */
static int intern(sp_locs *l, uint32_t start, uint32_t len, uint32_t *id)
{
	uint64_t h = sp_hash64(len);
	for (uint32_t i = 0; i < len; i++)
		h = sp_hash_combine(h, l->seq[start + i]);
	int rc = sp_htab_reserve(&l->tab);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&l->tab, h, &pr);
	uint32_t c;
	while ((c = sp_htab_probe_next(&l->tab, &pr)) != SP_NONE) {
		if (l->len[c] == len &&
		    memcmp(&l->seq[l->start[c]], &l->seq[start], len * sizeof(uint32_t)) == 0) {
			l->nseq = start; /* Already known: drop the copy. */
			*id = c + 1;
			return 0;
		}
	}
	uint32_t cap = l->cap;
	rc = grow32(&l->start, &cap, l->n + 1);
	if (!rc) {
		cap = l->cap;
		rc = grow32(&l->len, &cap, l->n + 1);
	}
	if (rc)
		return rc;
	l->cap = cap;
	l->start[l->n] = start;
	l->len[l->n] = len;
	sp_htab_insert(&l->tab, &pr, l->n);
	*id = ++l->n;
	return 0;
}

int sp_locs_stack(sp_locs *l, uint32_t node, uint32_t *n_out)
{
	const struct stackpulse_profile *p = l->p;
	uint32_t n = 0, steps = 0;
	/* Leaf-first walk: inline frames gather until their physical frame. */
	uint32_t pending[256];
	uint32_t npend = 0;
	for (uint32_t cur = node; cur != 0 && cur < p->nstacks; cur = p->stacks[cur].parent) {
		if (++steps > p->nstacks)
			break;
		uint32_t f = p->stacks[cur].frame;
		if (f >= p->nframes)
			continue;
		if (npend < 256)
			pending[npend++] = f;
		int last = p->stacks[cur].parent == 0;
		if (p->frames[f].inline_depth == 0 || last || npend == 256) {
			/* Physical first, then inline frames outermost to innermost. */
			int rc = grow32(&l->seq, &l->cap_seq, l->nseq + npend);
			if (rc)
				return rc;
			uint32_t start = l->nseq;
			for (uint32_t k = npend; k > 0; k--)
				l->seq[l->nseq++] = pending[k - 1];
			uint32_t id;
			rc = intern(l, start, npend, &id);
			if (!rc)
				rc = grow32(&l->ids, &l->cap_ids, n + 1);
			if (rc)
				return rc;
			l->ids[n++] = id;
			npend = 0;
		}
	}
	*n_out = n;
	return 0;
}

void sp_locs_frames(const sp_locs *l, uint32_t id, const uint32_t **frames, uint32_t *len)
{
	*frames = &l->seq[l->start[id - 1]];
	*len = l->len[id - 1];
}

int sp_profile_mappings(const struct stackpulse_profile *p, uint32_t *map_of_str, sp_mapping_fn fn,
                        void *ctx)
{
	const uint32_t USED = UINT32_MAX; /* Marked until numbered. */
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		const struct stackpulse_profile_func *f = &p->funcs[i];
		if (f->module != 0 && f->module < p->nstrings &&
		    (f->kind == STACKPULSE_FRAME_NATIVE || f->kind == STACKPULSE_FRAME_KERNEL))
			map_of_str[f->module] = USED;
	}
	uint32_t n = 0;
	for (uint32_t m = 0; m < p->nmodules; m++) {
		uint32_t path = p->modules[m].path;
		if (path != 0 && path < p->nstrings && map_of_str[path] == USED) {
			map_of_str[path] = ++n;
			int rc = fn(ctx, path, p->modules[m].build_id, n);
			if (rc)
				return rc;
		}
	}
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		uint32_t module = p->funcs[i].module;
		if (module != 0 && module < p->nstrings && map_of_str[module] == USED) {
			map_of_str[module] = ++n;
			int rc = fn(ctx, module, 0, n);
			if (rc)
				return rc;
		}
	}
	return 0;
}

uint32_t sp_profile_mapping_of(const struct stackpulse_profile *p, const uint32_t *map_of_str,
                               uint32_t func)
{
	const struct stackpulse_profile_func *f = &p->funcs[func];
	if (f->module == 0 || f->module >= p->nstrings ||
	    (f->kind != STACKPULSE_FRAME_NATIVE && f->kind != STACKPULSE_FRAME_KERNEL &&
	     f->kind != STACKPULSE_FRAME_INLINE))
		return 0;
	return map_of_str[f->module];
}

int sp_pbstrings_init(sp_pbstrings *t, const struct stackpulse_profile *p, sp_buf *out,
                      uint32_t field)
{
	size_t n = p->nstrings ? p->nstrings : 1;
	t->p = p;
	t->out = out;
	t->field = field;
	t->n = 0;
	t->map = sp_malloc(n * sizeof(uint32_t));
	if (!t->map)
		return sp_error(-ENOMEM, "string table map of %zu", n);
	memset(t->map, 0xff, n * sizeof(uint32_t));
	uint32_t empty;
	return sp_pbstrings_add(t, "", &empty);
}

void sp_pbstrings_free(sp_pbstrings *t)
{
	sp_free(t->map);
	t->map = NULL;
}

int sp_pbstrings_add(sp_pbstrings *t, const char *s, uint32_t *idx)
{
	int rc = sp_pb_str(t->out, t->field, s);
	if (rc)
		return rc;
	*idx = t->n++;
	return 0;
}

int sp_pbstrings_of(sp_pbstrings *t, uint32_t pstr, uint32_t *idx)
{
	if (pstr == 0 || pstr >= t->p->nstrings) {
		*idx = 0;
		return 0;
	}
	if (t->map[pstr] == SP_NONE) {
		int rc = sp_pbstrings_add(t, sp_pstr(t->p, pstr), &t->map[pstr]);
		if (rc)
			return rc;
	}
	*idx = t->map[pstr];
	return 0;
}
