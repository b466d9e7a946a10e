/* Native + Python stack merge (see merge.h). */
#include "python/merge.h"

int sp_py_in_eval(const sp_py_range *eval, uint32_t neval, uint64_t pc, int leaf)
{
	/* A return address points after the call; the call itself is at pc-1. */
	uint64_t a = leaf || pc == 0 ? pc : pc - 1;
	for (uint32_t i = 0; i < neval; i++)
		if (a >= eval[i].start && a < eval[i].end)
			return 1;
	return 0;
}

typedef struct emitter {
	sp_py_merge_item *out;
	uint32_t max, n;
	uint32_t *flags;
} emitter;

static void emit(emitter *e, uint32_t kind, uint32_t index)
{
	if (e->n >= e->max) {
		*e->flags |= SP_PY_MERGE_OUT_FULL;
		return;
	}
	e->out[e->n].kind = kind;
	e->out[e->n].index = index;
	e->n++;
}

/* Start of group @p g (frames [start, end)) of @p py. */
static void group_bounds(const sp_py_frame *py, uint32_t npy, uint32_t g, uint32_t *start,
                         uint32_t *end)
{
	uint32_t k = 0, s = 0;
	for (uint32_t i = 0; i < npy; i++) {
		if ((py[i].flags & SP_PY_FRAME_ENTRY) || i + 1 == npy) {
			if (k == g) {
				*start = s;
				*end = i + 1;
				return;
			}
			k++;
			s = i + 1;
		}
	}
	*start = *end = npy;
}

static uint32_t group_count(const sp_py_frame *py, uint32_t npy)
{
	uint32_t g = 0;
	for (uint32_t i = 0; i < npy; i++)
		if ((py[i].flags & SP_PY_FRAME_ENTRY) || i + 1 == npy)
			g++;
	return g;
}

static void emit_group(emitter *e, const sp_py_frame *py, uint32_t npy, uint32_t g)
{
	uint32_t s, end;
	group_bounds(py, npy, g, &s, &end);
	for (uint32_t i = s; i < end; i++)
		emit(e, SP_PY_MERGE_PYTHON, i);
}

/* A Python stack with a gap (SP_PY_FRAME_GAP on frame cut - 1, or
 * SP_PY_FRAME_LEAF_GAP on frame 0 and cut 0): the frames
 * before it pair with the leafmost activations, those after it with the
 * rootmost; activations in between stay native, after one marker. */
static void merge_gap(const sp_py_merge_in *in, uint32_t cut, emitter *e, uint32_t E)
{
	uint32_t G1 = group_count(in->py, cut), G2 = group_count(in->py + cut, in->npy - cut);
	if (G2 > E)
		G2 = E; /* cannot happen with a consistent stack: keep the root */
	if (G1 > E - G2)
		G1 = E - G2;
	if (G1 + G2 < E)
		*e->flags |= SP_PY_MERGE_PY_CUT;
	int marker_done = G1 + G2 == E;
	uint32_t k = 0;
	for (uint32_t i = 0; i < in->npcs; i++) {
		if (!sp_py_in_eval(in->eval, in->neval, in->pcs[i], i == 0)) {
			emit(e, SP_PY_MERGE_NATIVE, i);
			continue;
		}
		uint32_t a = k++;
		if (a < G1) {
			emit_group(e, in->py, cut, a);
		} else if (a >= E - G2) {
			uint32_t s, end;
			group_bounds(in->py + cut, in->npy - cut, a - (E - G2), &s, &end);
			for (uint32_t j = s; j < end; j++)
				emit(e, SP_PY_MERGE_PYTHON, cut + j);
		} else {
			if (!marker_done) {
				emit(e, SP_PY_MERGE_TRUNCATED, 0);
				marker_done = 1;
			}
			emit(e, SP_PY_MERGE_NATIVE, i);
		}
	}
}

/* Number of eval activations in the native stack. */
static uint32_t activations(const sp_py_merge_in *in)
{
	uint32_t E = 0;
	for (uint32_t i = 0; i < in->npcs; i++)
		E += (uint32_t)sp_py_in_eval(in->eval, in->neval, in->pcs[i], i == 0);
	return E;
}

/* 1 when some frame of @p in has a gap flag. */
static int has_gap(const sp_py_merge_in *in)
{
	for (uint32_t i = 0; i < in->npy; i++)
		if (in->py[i].flags & (SP_PY_FRAME_GAP | SP_PY_FRAME_LEAF_GAP))
			return 1;
	return 0;
}

int sp_py_merge(const sp_py_merge_in *in, sp_py_merge_item *out, uint32_t max, uint32_t *n,
                uint32_t *flags)
{
	/* A stale leaf prefix (SP_PY_FRAME_STALE) stays only when, with it,
	 * every activation of a whole native stack has its group: then the
	 * frames returned after the sample. Else they may have returned
	 * before it (their pointers linger in reused stack): dropped. */
	uint32_t S = 0;
	while (S < in->npy && (in->py[S].flags & SP_PY_FRAME_STALE))
		S++;
	if (S && (in->native_truncated || in->py_truncated || has_gap(in) ||
	          group_count(in->py, in->npy) != activations(in))) {
		sp_py_merge_in rest = *in;
		rest.py += S;
		rest.npy -= S;
		int rc = sp_py_merge(&rest, out, max, n, flags);
		for (uint32_t i = 0; i < *n; i++)
			if (out[i].kind == SP_PY_MERGE_PYTHON)
				out[i].index += S;
		return rc;
	}
	emitter e = { out, max, 0, flags };
	*flags = 0;
	uint32_t cut = 0;
	int gap = in->npy > 0 && (in->py[0].flags & SP_PY_FRAME_LEAF_GAP);
	for (uint32_t i = 0; i + 1 < in->npy && !gap; i++)
		if (in->py[i].flags & SP_PY_FRAME_GAP) {
			cut = i + 1;
			gap = 1;
		}
	if (gap) {
		if (in->native_truncated || in->py_truncated) {
			/* No certain root end to pair the far side with: keep
			 * the leaf side only, as a cut stack. */
			sp_py_merge_in leaf = *in;
			leaf.npy = cut;
			leaf.py_truncated = 1;
			return sp_py_merge(&leaf, out, max, n, flags);
		}
		merge_gap(in, cut, &e, activations(in));
		*n = e.n;
		return 0;
	}
	uint32_t E = activations(in);
	uint32_t G = group_count(in->py, in->npy);
	/* No frame read while the sample ran the eval loop: the thread left
	 * its frames before the read (or the read could not reach them). */
	int py_truncated = in->py_truncated || (in->npy == 0 && E > 0);
	int leaf_aligned = E == G || in->native_truncated || py_truncated;
	/* Activation k (from the leaf) runs group k + shift. */
	int64_t shift = leaf_aligned ? 0 : (int64_t)G - (int64_t)E;
	if ((E > G && !py_truncated) || (G > E && !in->native_truncated))
		*flags |= SP_PY_MERGE_MISMATCH;
	/* Fewer groups than activations: the thread left activations (or
	 * moved on) between the sample and the read. Only the leaf one may
	 * lack frames at the sample itself, caught in the eval loop's entry
	 * or exit, before its frame is linked or after it is unlinked. Else
	 * the leaf side is cut: marked, never shown as whole. */
	int leaf_cut =
	        E > G && !py_truncated && !in->native_truncated &&
	        !(E == G + 1 && in->npcs > 0 && sp_py_in_eval(in->eval, in->neval, in->pcs[0], 1));
	if (py_truncated || leaf_cut)
		*flags |= SP_PY_MERGE_PY_CUT;

	int marker_done = !py_truncated && !leaf_cut;
	uint32_t k = 0, last_group = UINT32_MAX;
	for (uint32_t i = 0; i < in->npcs; i++) {
		if (!sp_py_in_eval(in->eval, in->neval, in->pcs[i], i == 0)) {
			emit(&e, SP_PY_MERGE_NATIVE, i);
			continue;
		}
		int64_t g = (int64_t)k++ + shift;
		if (g >= 0 && g < (int64_t)G) {
			emit_group(&e, in->py, in->npy, (uint32_t)g);
			last_group = (uint32_t)g;
			if (!marker_done && (uint32_t)g + 1 == G) {
				emit(&e, SP_PY_MERGE_TRUNCATED, 0);
				marker_done = 1;
			}
		} else {
			/* Where the Python walk gave out: mark it once, keep the
			 * native frame. */
			if (!marker_done && (last_group == UINT32_MAX || last_group + 1 >= G)) {
				emit(&e, SP_PY_MERGE_TRUNCATED, 0);
				marker_done = 1;
			}
			emit(&e, SP_PY_MERGE_NATIVE, i);
		}
	}
	/* Groups whose activations were cut off with the native stack. */
	if (leaf_aligned) {
		for (int64_t g = (int64_t)E + shift; g < (int64_t)G; g++)
			emit_group(&e, in->py, in->npy, (uint32_t)g);
	}
	if (!marker_done && in->npy > 0)
		emit(&e, SP_PY_MERGE_TRUNCATED, 0);
	*n = e.n;
	return 0;
}
