/* The sample's innermost eval activation on 3.11/3.12. Each activation of
 * _PyEval_EvalFrameDefault keeps a _PyCFrame on its C stack, linked to the
 * one it replaced (previous), and tstate->cframe names the innermost. That
 * pointer is read live, after the sample: by then the thread has often left
 * the sampled activation (a generator resumed by sum() yields within
 * microseconds), and tstate->cframe names an outer one, so the sample's
 * leaf frames would be lost. The stack copy still holds the sampled
 * activations' cframes: search it for the deepest chain that reaches the
 * live one. Pure: reads go through the walker's memory callback. */
#include <string.h>

#include "common/bytes.h"
#include "python/memory.h"

/* Levels of activations left since the sample that are looked for. */
#define CFRAME_LEVELS 8u
/* Activations entered since the sample that are followed out. */
#define CFRAME_HOPS 16u

static int read_word(sp_py_mem *m, uint64_t addr, uint64_t *v)
{
	uint8_t b[8];
	if (!sp_py_plausible(addr, 8) || sp_py_mem_read1(m, addr, b, 8) != 0)
		return -1;
	*v = sp_le64(b);
	return 0;
}

/* 1 when @p frame looks like a Python frame: readable, owned by the thread
 * or a generator, running a code object. */
static int frame_ok(sp_py_walker *w, uint64_t frame)
{
	const sp_py_layout *l = w->layout;
	uint8_t fb[SP_PY_MAX_BLOCK], cb[16];
	if (!sp_py_plausible(frame, 8))
		return 0;
	if (sp_py_mem_read1(&w->mem, frame, fb, l->frame_read) != 0 || fb[l->frame_owner] > 2)
		return 0;
	uint64_t code = sp_le64(fb + l->frame_code);
	if (!sp_py_plausible(code, 8))
		return 0;
	return l->ob_type + 8 <= sizeof(cb) &&
	       sp_py_mem_read1(&w->mem, code, cb, l->ob_type + 8) == 0 && w->types.code &&
	       sp_le64(cb + l->ob_type) == w->types.code;
}

/* The word at @p addr as the target holds it now, not as the copy held it. */
static int read_word_live(sp_py_mem *m, uint64_t addr, uint64_t *v)
{
	const uint8_t *stack = m->stack;
	m->stack = NULL;
	int rc = read_word(m, addr, v);
	m->stack = stack;
	return rc;
}

/* 1 unless the copy covers the cframe at @p c and shows something else
 * there (the thread entered that activation after the sample, where the
 * sample had other C frames): the copy's current frame is not a Python
 * frame, and its previous link is not the live one (an activation keeps
 * its link while it lives; its frame may have been popped since). */
static int copy_shows_cframe(sp_py_walker *w, uint64_t c, uint32_t need)
{
	const sp_py_layout *l = w->layout;
	sp_py_mem *m = &w->mem;
	if (c < m->stack_start || c - m->stack_start > m->stack_len ||
	    m->stack_len - (c - m->stack_start) < need)
		return 1;
	const uint8_t *at = m->stack + (c - m->stack_start);
	uint64_t prev = sp_le64(at + l->cframe_previous), now;
	if (frame_ok(w, sp_le64(at + l->cframe_current_frame)))
		return 1;
	return read_word_live(m, c + l->cframe_previous, &now) != 0 || now == prev;
}

/* The cframe in the copy, below @p c, whose previous is @p c and whose
 * current frame is a Python frame; the nearest to @p c wins (a stray copy
 * of the pointer, such as a saved local, sits in the same stack frame but
 * fails the frame check). 0 when there is none. */
static uint64_t child_cframe(sp_py_walker *w, uint64_t c)
{
	const sp_py_layout *l = w->layout;
	const sp_py_mem *m = &w->mem;
	uint64_t end = m->stack_len;
	if (c > m->stack_start && c - m->stack_start < end)
		end = c - m->stack_start;
	uint32_t need = l->cframe_previous + 8;
	if (l->cframe_current_frame + 8 > need)
		need = l->cframe_current_frame + 8;
	uint64_t o = (8 - (m->stack_start & 7)) & 7;
	uint64_t best = 0;
	for (; o + 8 <= end; o += 8) {
		if (sp_le64(m->stack + o) != c || o < l->cframe_previous)
			continue;
		uint64_t at = o - l->cframe_previous;
		if (at + need > m->stack_len || m->stack_start + at >= c)
			continue;
		uint64_t cur = sp_le64(m->stack + at + l->cframe_current_frame);
		if (frame_ok(w, cur))
			best = m->stack_start + at;
	}
	return best;
}

uint64_t sp_py_sample_cframe(sp_py_walker *w, uint64_t live, uint64_t *tops, uint32_t *ntops)
{
	const sp_py_layout *l = w->layout;
	sp_py_mem *m = &w->mem;
	*ntops = 0;
	if (!m->stack || l->cframe_previous == SP_PY_NONE ||
	    l->cframe_current_frame == SP_PY_NONE || l->frame_owner == SP_PY_NONE ||
	    !sp_py_plausible(live, 8))
		return live;
	/* Entered more activations since: their cframes sit below the copy. */
	uint64_t c = live;
	for (uint32_t hops = 0; c < m->stack_start && hops < CFRAME_HOPS; hops++)
		if (read_word(m, c + l->cframe_previous, &c) != 0 || !sp_py_plausible(c, 8))
			return live;
	if (c < m->stack_start)
		return live;
	/* Entered since at a depth the copy covers: the copy shows the
	 * sample's C frames there, not this cframe; its live links lead out
	 * to the sampled activations. */
	uint32_t need = l->cframe_previous + 8;
	if (l->cframe_current_frame + 8 > need)
		need = l->cframe_current_frame + 8;
	for (uint32_t hops = 0; !copy_shows_cframe(w, c, need); hops++) {
		uint64_t p;
		if (hops >= CFRAME_HOPS || read_word_live(m, c + l->cframe_previous, &p) != 0 ||
		    !sp_py_plausible(p, 8))
			return live;
		c = p;
	}
	/* Left some since: the sampled ones are still in the copy. */
	for (uint32_t level = 0; level < CFRAME_LEVELS; level++) {
		uint64_t d = child_cframe(w, c);
		if (!d)
			break;
		c = d;
	}
	/* The outer activations' current frames, as the copy holds them (the
	 * root cframe, in the thread state, has none). */
	uint64_t at = c, prev, top;
	while (*ntops < SP_PY_OUTER_MAX && read_word(m, at + l->cframe_previous, &prev) == 0 &&
	       sp_py_plausible(prev, 8) && prev > at &&
	       read_word(m, prev + l->cframe_current_frame, &top) == 0 && sp_py_plausible(top, 8)) {
		tops[(*ntops)++] = top;
		at = prev;
	}
	return c;
}
