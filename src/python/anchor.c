/* The sample's top frame on 3.10, from the stack copy (see sp_py_anchor in
 * memory.h): the anchor scan, the checks an anchored walk makes of each
 * next frame, and the freed leaf frames kept as a stale prefix. Pure:
 * reads go through the walker's memory callback. */
#include <string.h>

#include "common/bytes.h"
#include "common/error.h"
#include "python/memory.h"

/* Byte offset in the stack copy of the first aligned word equal to @p v in
 * [@p from, @p to), else SP_PY_NO_ANCHOR. */
static uint64_t stack_find(const sp_py_mem *m, uint64_t v, uint64_t from, uint64_t to)
{
	uint64_t o = from + ((8 - ((m->stack_start + from) & 7)) & 7);
	if (to > m->stack_len)
		to = m->stack_len;
	for (; o + 8 <= to; o += 8)
		if (sp_le64(m->stack + o) == v)
			return o;
	return SP_PY_NO_ANCHOR;
}

/* 1 when @p code appears within SP_PY_ANCHOR_NEAR bytes of offset @p pos. */
int sp_py_code_near(const sp_py_mem *m, uint64_t code, uint64_t pos)
{
	uint64_t from = pos > SP_PY_ANCHOR_NEAR ? pos - SP_PY_ANCHOR_NEAR : 0;
	return stack_find(m, code, from, pos + SP_PY_ANCHOR_NEAR + 8) != SP_PY_NO_ANCHOR;
}

/* Checks the next frame @p addr of an anchored walk against the copy:
 * 1 when it lies further up (*pos moves there), 2 when the chain has left
 * the copy (stop checking), 0 when it is missing (torn). */
int sp_py_anchor_next(const sp_py_mem *m, uint64_t addr, uint64_t *pos)
{
	uint64_t o = stack_find(m, addr, *pos + 8, m->stack_len);
	if (o != SP_PY_NO_ANCHOR) {
		*pos = o;
		return 1;
	}
	return m->stack_len - *pos <= SP_PY_ANCHOR_TAIL ? 2 : 0;
}

/* 1 when the frame @p fb found at offset @p pos may be the sample's top. */
static int anchor_ok(const sp_py_walker *w, const uint8_t *fb, uint64_t pos)
{
	const sp_py_layout *l = w->layout;
	/* Freed frames (free list, zombie frames) keep their type but have
	 * no references. */
	if (sp_le64(fb + l->frame_type) != w->types.frame || sp_le64(fb) == 0)
		return 0;
	uint64_t back = sp_le64(fb + l->frame_previous), code = sp_le64(fb + l->frame_code);
	uint64_t p = pos;
	if (!sp_py_plausible(code, 8) || !sp_py_code_near(&w->mem, code, pos))
		return 0;
	return back == 0 || sp_py_anchor_next(&w->mem, back, &p) != 0;
}

/* Scans the stack copy from offset @p from for the leafmost word that
 * points at a live frame object which may continue the sample's chain.
 * Returns 0 with its address and offset, STACKPULSE_ENOTFOUND or the read
 * callback's error. */
/* Freed frames an anchor scan passed over (for sp_py_anchor's stale
 * prefix): where each sat in the copy, its f_back and its code. */
#define ZOMBIES_MAX 32u
typedef struct zombies {
	uint32_t n;
	uint64_t addr[ZOMBIES_MAX], pos[ZOMBIES_MAX], back[ZOMBIES_MAX], code[ZOMBIES_MAX];
} zombies;

/* Keeps the candidate @p fb at @p addr, offset @p pos, when it is a freed
 * frame (type intact, no references) with its code pointer close by. */
static void zombie_add(const sp_py_walker *w, zombies *z, uint64_t addr, const uint8_t *fb,
                       uint64_t pos)
{
	const sp_py_layout *l = w->layout;
	uint64_t code = sp_le64(fb + l->frame_code);
	if (!z || z->n >= ZOMBIES_MAX || sp_le64(fb + l->frame_type) != w->types.frame ||
	    sp_le64(fb) != 0 || !sp_py_plausible(code, 8) || !sp_py_code_near(&w->mem, code, pos))
		return;
	z->addr[z->n] = addr;
	z->pos[z->n] = pos;
	z->back[z->n] = sp_le64(fb + l->frame_previous);
	z->code[z->n] = code;
	z->n++;
}

static int scan(sp_py_walker *w, uint64_t from, uint64_t skip, uint64_t *top, uint64_t *top_pos,
                zombies *z)
{
	const sp_py_layout *l = w->layout;
	sp_py_mem *m = &w->mem;
	/* The verify buffer is free between walks: candidates' headers go there. */
	sp_py_iov iov[SP_PY_MAX_LIVE];
	uint64_t pos[SP_PY_MAX_LIVE];
	uint64_t o = from + ((8 - ((m->stack_start + from) & 7)) & 7), last = 0;
	uint32_t words = 0, calls = 0;
	while (o + 8 <= m->stack_len && words < SP_PY_ANCHOR_WORDS &&
	       calls < SP_PY_ANCHOR_BATCHES) {
		/* The top frame is usually among the first candidates, and each
		 * candidate on another page costs the kernel a page walk: start
		 * small. */
		uint32_t n = 0, batch = calls == 0 ? SP_PY_MAX_LIVE / 4 : SP_PY_MAX_LIVE;
		for (; o + 8 <= m->stack_len && words < SP_PY_ANCHOR_WORDS && n < batch;
		     o += 8, words++) {
			uint64_t v = sp_le64(m->stack + o);
			if (v == last || v == skip || !sp_py_plausible(v, 8) ||
			    SP_PY_USER_MAX - v < l->frame_read || sp_py_in_stack(m, v, 1))
				continue;
			last = v;
			int dup = 0;
			for (uint32_t k = 0; k < n && !dup; k++)
				dup = iov[k].addr == v;
			if (dup)
				continue;
			iov[n] = (sp_py_iov){ v, m->verify + (size_t)n * (SP_PY_PAGE / 2),
				              l->frame_read, 0 };
			pos[n++] = o;
		}
		if (!n)
			break;
		calls++;
		m->calls++;
		int rc = m->read(m->ctx, iov, n, 0);
		if (rc < 0)
			return rc;
		for (uint32_t k = 0; k < n; k++) {
			if (iov[k].ok && anchor_ok(w, iov[k].buf, pos[k])) {
				w->anchor_addr = iov[k].addr;
				memcpy(w->anchor_frame, iov[k].buf, l->frame_read);
				*top = iov[k].addr;
				*top_pos = pos[k];
				return 0;
			}
			if (iov[k].ok)
				zombie_add(w, z, iov[k].addr, iov[k].buf, pos[k]);
		}
	}
	return STACKPULSE_ENOTFOUND;
}

int sp_py_anchor(sp_py_walker *w, uint64_t *top)
{
	const sp_py_layout *l = w->layout;
	const sp_py_mem *m = &w->mem;
	w->anchor_pos = 0;
	w->anchor_addr = 0;
	w->nstale = 0;
	if (!m->stack || !m->verify || l->frame_type == SP_PY_NONE || !w->types.frame ||
	    l->frame_read > SP_PY_PAGE / 2)
		return STACKPULSE_ENOTFOUND;
	uint64_t pos;
	zombies z;
	z.n = 0;
	int rc = scan(w, 0, 0, top, &pos, &z);
	if (rc != 0)
		return rc;
	w->anchor_pos = pos + 1;
	/* Freed frames leafward of the anchor that link to it, one below the
	 * other in the copy: the sample's leaf side, returned since (or
	 * returned before it; the merge decides). */
	uint64_t chain[SP_PY_STALE_MAX], at = *top, at_pos = pos;
	uint32_t k = 0;
	while (k < SP_PY_STALE_MAX) {
		uint32_t best = UINT32_MAX;
		for (uint32_t i = 0; i < z.n; i++)
			if (z.back[i] == at && z.pos[i] < at_pos &&
			    (best == UINT32_MAX || z.pos[i] > z.pos[best]))
				best = i;
		if (best == UINT32_MAX)
			break;
		chain[k++] = z.code[best];
		at = z.addr[best];
		at_pos = z.pos[best];
	}
	for (uint32_t i = 0; i < k; i++)
		w->stale_code[i] = chain[k - 1 - i];
	w->nstale = k;
	return 0;
}

int sp_py_anchor_scan(sp_py_walker *w, uint64_t from, uint64_t skip, uint64_t *top,
                      uint64_t *top_pos)
{
	return scan(w, from, skip, top, top_pos, NULL);
}
