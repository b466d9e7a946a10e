/* Merging a native stack with the Python frames its eval loops ran (pure).
 * Each native _PyEval_EvalFrameDefault activation is replaced by the group
 * of Python frames it ran: one frame on 3.10, several on 3.11+ (inlined
 * Python-to-Python calls), up to and including the frame marked
 * SP_PY_FRAME_ENTRY. C frames (extensions, builtins) stay where they are. */
#ifndef SP_PYTHON_MERGE_H
#define SP_PYTHON_MERGE_H

#include <stdint.h>

#include "python/memory.h"

/* An address range [start, end) of eval-loop machine code. */
typedef struct sp_py_range {
	uint64_t start, end;
} sp_py_range;

enum sp_py_merge_kind {
	SP_PY_MERGE_NATIVE = 1,    /* index into pcs */
	SP_PY_MERGE_PYTHON = 2,    /* index into the Python frames */
	SP_PY_MERGE_TRUNCATED = 3, /* the Python part was cut here */
};

typedef struct sp_py_merge_item {
	uint32_t kind; /* enum sp_py_merge_kind */
	uint32_t index;
} sp_py_merge_item;

enum sp_py_merge_flag {
	SP_PY_MERGE_MISMATCH = 1u, /* Activation and group counts disagreed in a
	                             * way truncation does not explain. */
	SP_PY_MERGE_PY_CUT = 2u,   /* Python frames were truncated. */
	SP_PY_MERGE_OUT_FULL = 4u, /* @p max items were not enough. */
};

typedef struct sp_py_merge_in {
	const uint64_t *pcs; /* Native frames, leaf first: pcs[0] is the
	                            * sampled IP, the rest return addresses. */
	uint32_t npcs;
	int native_truncated;    /* The native unwind stopped early. */
	const sp_py_range *eval; /* Eval-loop code ranges. */
	uint32_t neval;
	const sp_py_frame *py; /* Python frames, leaf first. */
	uint32_t npy;
	int py_truncated; /* The Python walk stopped early. */
} sp_py_merge_in;

/* Writes the merged stack, leaf first, to @p out (at most @p max items).
 * Counts that agree pair activations and groups one to one. Otherwise the
 * certain end is kept: from the leaf when either side was truncated (the
 * cut end is unknown), else from the root (the leaf side may have moved
 * on since the sample); unmatched activations stay native and unmatched
 * leaf-side groups are dropped. Leaf-side activations left without frames
 * get one TRUNCATED marker before them (the sample's frames there were
 * not read), except a single leaf activation whose sampled IP is in the
 * eval loop (its entry or exit, where it has no frame linked). Python groups left over after a truncated
 * native stack are appended at the root end. A Python stack with a gap
 * (SP_PY_FRAME_GAP) pairs the frames before the gap from the leaf and those
 * after it from the root; the activations between stay native after one
 * TRUNCATED marker (with a truncated side, only the leaf part is kept).
 * SP_PY_FRAME_LEAF_GAP on the first frame is a gap before it. Leading
 * SP_PY_FRAME_STALE frames are kept only when, with them, a whole native
 * stack and a whole gapless Python stack pair one to one; else they are
 * left out (the indices written still refer to @p in->py). No Python
 * frame at all while the native stack runs the eval loop counts as a
 * truncated walk (a marker before the leafmost activation).
 * Returns 0; *flags gets enum sp_py_merge_flag bits. */
int sp_py_merge(const sp_py_merge_in *in, sp_py_merge_item *out, uint32_t max, uint32_t *n,
                uint32_t *flags);

/* 1 when @p pc (a sampled IP if @p leaf, else a return address) lies in
 * one of the ranges. */
int sp_py_in_eval(const sp_py_range *eval, uint32_t neval, uint64_t pc, int leaf);

#endif
