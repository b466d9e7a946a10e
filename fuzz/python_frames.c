/* Fuzzes the pure CPython memory decoders (src/python) over synthetic
 * memory images: the input is a version selector, flags, a tid and a
 * memory image at IMG_BASE (format in tests/python/py_image.h). It lists
 * thread states, walks every frame chain with and without a stack copy and
 * the page cache, anchored on the stack copy (3.10), decodes line tables,
 * parses debug offsets, merges the result into a made-up native stack,
 * reads the thread-state tids in a batch and the thread names of the
 * threading module (sys.modules, dicts, instance attributes, ints).
 * Everything returned must be in bounds and self-consistent; the walk must
 * never exceed its limits. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stackpulse.h"

#include "python/layout.h"
#include "python/memory.h"
#include "python/merge.h"
#include "python/names.h"

#include "../tests/python/py_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t pages[SP_PY_PAGES * SP_PY_PAGE];
static uint8_t verify_buf[SP_PY_MAX_LIVE * SP_PY_PAGE];

static void check_frames(sp_py_walker *w, const sp_py_frame *f, uint32_t n, uint32_t max)
{
	if (n > max || n > SP_PY_MAX_DEPTH)
		__builtin_trap();
	for (uint32_t i = 0; i < n; i++) {
		const sp_py_code *c = sp_py_codes_get(w->codes, f[i].code);
		if (!c || !c->qualname || !c->filename || c->synthetic)
			__builtin_trap();
		if (strlen(c->qualname) > 4 * SP_PY_MAX_STR ||
		    strlen(c->filename) > 4 * SP_PY_MAX_STR)
			__builtin_trap();
		if (c->linetable_len > SP_PY_MAX_LINETABLE || (f[i].flags & ~15u))
			__builtin_trap();
	}
}

static void merge_check(const uint8_t *data, size_t size, const sp_py_frame *f, uint32_t n, int tr)
{
	uint64_t pcs[24];
	uint32_t npcs = 0;
	for (; npcs < 24 && (npcs + 1) * 2 <= size; npcs++)
		pcs[npcs] = 0x1000 + (uint64_t)(data[npcs * 2] % 8) * 0x100 + data[npcs * 2 + 1];
	const sp_py_range eval[2] = { { 0x1200, 0x1400 }, { 0x1600, 0x1680 } };
	sp_py_merge_in in = { pcs, npcs, size & 1, eval, 2, f, n, tr };
	sp_py_merge_item out[64];
	uint32_t m, flags;
	for (uint32_t max = 8; max <= 64; max *= 8) {
		if (sp_py_merge(&in, out, max, &m, &flags) != 0 || m > max)
			__builtin_trap();
		for (uint32_t i = 0; i < m; i++) {
			if (out[i].kind == SP_PY_MERGE_NATIVE && out[i].index >= npcs)
				__builtin_trap();
			if (out[i].kind == SP_PY_MERGE_PYTHON && out[i].index >= n)
				__builtin_trap();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < IMG_HDR)
		return 0;
	int v = data[0] % IMG_NVERSIONS, flags = data[1];
	const uint8_t *img = data + IMG_HDR;
	size_t len = size - IMG_HDR;
	if (len > IMG_MAX)
		len = IMG_MAX;

	/* 3.13+: the image's own debug offsets when they parse, else canned. */
	sp_py_layout l;
	uint8_t dbg[1024];
	if (v >= IMG_V313 && sp_py_layout_from_debug(img, len, &l) == 0) {
		/* accepted: every offset was checked against its block */
	} else if (v >= IMG_V313) {
		uint32_t dn = img_debug_offsets(dbg, v == IMG_V313 ? 13 : 14);
		if (sp_py_layout_from_debug(dbg, dn, &l) != 0)
			__builtin_trap();
	} else if (sp_py_layout_from_table((3u << 24) | ((uint32_t)(10 + v) << 16), &l) != 0) {
		__builtin_trap();
	}
	if (sp_py_layout_check(&l) != 0)
		__builtin_trap();

	img_reader r = { img, len, IMG_BASE };
	sp_py_walker w;
	memset(&w, 0, sizeof(w));
	w.layout = &l;
	w.types = (sp_py_types){ IMG_T_CODE, IMG_T_FRAME, IMG_T_STR,  IMG_T_BYTES,
		                 0,          IMG_T_DICT,  IMG_T_LONG, IMG_T_MOD };
	w.mem.read = img_read;
	w.mem.ctx = &r;
	w.pthread_tid = (flags & 4) ? 720 : 0;
	if (flags & 2)
		w.mem.pages = pages;
	if (flags & 16)
		w.mem.verify = verify_buf;
	if ((flags & 1) && len >= IMG_STACK_LEN) {
		/* The image's last 4 KiB stand for the sampled stack copy. */
		w.mem.stack = img + len - IMG_STACK_LEN;
		w.mem.stack_len = IMG_STACK_LEN;
		w.mem.stack_start = IMG_BASE + len - IMG_STACK_LEN;
	}
	if (sp_py_codes_new(&w.codes) != 0)
		return 0;

	static sp_py_frame f[SP_PY_MAX_DEPTH];
	uint64_t ts[8];
	uint32_t nts = 0, n = 0;
	int tr = 0;
	(void)sp_py_list_tstates(&w, IMG_BASE, ts, 8, &nts);
	if (nts > 8)
		__builtin_trap();
	for (uint32_t i = 0; i < nts; i++) {
		sp_py_tstate t;
		sp_py_mem_reset(&w.mem);
		if (sp_py_read_tstate(&w, ts[i], &t) != 0 || !t.frame)
			continue;
		uint32_t max = (flags & 8) ? 5 : SP_PY_MAX_DEPTH;
		uint64_t misplaced = w.mem.misplaced;
		int wrc = sp_py_walk(&w, t.frame, f, max, &n, &tr);
		if (wrc == STACKPULSE_ESTATE && w.mem.misplaced == misplaced)
			__builtin_trap(); /* an image does not change */
		if (wrc == STACKPULSE_ESTATE) {
			/* Frames placed against the data stack's layout: a
			 * second try keeps the rootward part. */
			w.loose_verify = 1;
			wrc = sp_py_walk(&w, t.frame, f, max, &n, &tr);
			w.loose_verify = 0;
		}
		if (wrc != 0)
			continue;
		check_frames(&w, f, n, max);
		merge_check(img, len, f, n, tr);
	}
	/* A walk anchored on the stack copy (3.10 frame objects), as the
	 * reader does when it has one. */
	uint64_t anchor = 0;
	if (sp_py_anchor(&w, &anchor) == 0) {
		uint64_t misplaced = w.mem.misplaced;
		int arc = sp_py_walk(&w, anchor, f, SP_PY_MAX_DEPTH, &n, &tr);
		if (arc == STACKPULSE_ESTATE && w.mem.misplaced == misplaced)
			__builtin_trap();
		if (arc == 0) {
			check_frames(&w, f, n, SP_PY_MAX_DEPTH);
			merge_check(img, len, f, n, tr);
		}
	}
	/* A walk from an arbitrary address taken from the input. */
	if (len >= 16) {
		uint64_t top = IMG_BASE + (sp_le32(img + len - 8) % (uint32_t)len);
		if (sp_py_walk(&w, top & ~(uint64_t)7, f, SP_PY_MAX_DEPTH, &n, &tr) == 0)
			check_frames(&w, f, n, SP_PY_MAX_DEPTH);
	}
	/* The tids of the thread states listed, in one batch. */
	int64_t tids[8];
	uint64_t idents[8];
	if (sp_py_read_tids(&w, ts, nts, tids, idents) == 0)
		for (uint32_t i = 0; i < nts; i++)
			if (tids[i] == 0 || tids[i] > INT32_MAX)
				__builtin_trap();
	/* Thread names of the first interpreter (and of one from the input),
	 * twice: the second read goes by what the first remembered. */
	if (len >= 64 && len - 8 >= l.runtime_interpreters_head) {
		static sp_py_tname names[16];
		sp_py_names_cache nc;
		memset(&nc, 0, sizeof(nc));
		uint64_t interps[2] = { sp_le64(img + l.runtime_interpreters_head),
			                IMG_BASE + (sp_le32(img + len - 16) % (uint32_t)len) };
		for (int k = 0; k < 4; k++) {
			uint32_t nn = 99;
			sp_py_mem_reset(&w.mem);
			int nrc = sp_py_thread_names(&w, interps[k / 2] & ~(uint64_t)7, &nc, names,
			                             16, &nn);
			if (nrc == 0 && nn > 16)
				__builtin_trap();
			for (uint32_t i = 0; nrc == 0 && i < nn; i++)
				if (!names[i].ident || strlen(names[i].name) >= SP_PY_TNAME_MAX)
					__builtin_trap();
		}
	}
	/* Line tables straight from the input, both formats. */
	size_t tl = len < 512 ? len : 512;
	for (int64_t off = -2; off < 64; off += 6) {
		int32_t a = sp_py_line(SP_PY_LINETABLE_311, img, tl, 7, off);
		int32_t b = sp_py_line(SP_PY_LINETABLE_310, img, tl, 7, off);
		if (a < 0 || b < 0)
			__builtin_trap();
	}
	sp_py_codes_free(w.codes);
	return 0;
}
