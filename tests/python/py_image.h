/* Builds synthetic CPython memory images for the decoder tests and the
 * fuzz corpus: a byte buffer standing for target memory at IMG_BASE, laid
 * out with a given sp_py_layout (runtime, interpreter, thread state,
 * frames, code objects, strings, line tables).
 *
 * Image file format (also the fuzz input): byte 0 = version selector
 * (IMG_V310..IMG_V314; 3.13+ images start with _Py_DebugOffsets), byte 1 =
 * flags (bit 0: the last 4 KiB are the sampled stack copy, bit 1: page
 * cache, bit 2: 3.10 pthread tid offset, bit 3: depth limit 5, bit 4:
 * verification pass), bytes 2..5 = tid (LE), then the image bytes. */
#ifndef SP_TESTS_PY_IMAGE_H
#define SP_TESTS_PY_IMAGE_H

#include <stdint.h>
#include <string.h>

#include "common/bytes.h"
#include "python/layout.h"
#include "python/memory.h"

#define IMG_BASE    0x10000000ull
#define IMG_MAX     (24u * 1024u)
#define IMG_HDR     6u
#define IMG_T_CODE  0x7f0000001000ull
#define IMG_T_STR   0x7f0000002000ull
#define IMG_T_BYTES 0x7f0000003000ull
#define IMG_T_FRAME 0x7f0000004000ull
#define IMG_T_DICT  0x7f0000005000ull
#define IMG_T_LONG  0x7f0000006000ull
#define IMG_T_MOD   0x7f0000007000ull
/* The runtime sits at IMG_BASE; the "stack copy" is the last 4 KiB. */
#define IMG_STACK_LEN 4096u

enum {
	IMG_V310,
	IMG_V311,
	IMG_V312,
	IMG_V313,
	IMG_V314,
	IMG_NVERSIONS
};

typedef struct py_img {
	uint8_t mem[IMG_MAX];
	uint32_t used;
	sp_py_layout l;
} py_img;

static inline void img_put64(py_img *im, uint64_t addr, uint64_t v)
{
	sp_put_le64(im->mem + (addr - IMG_BASE), v);
}
static inline void img_put32(py_img *im, uint64_t addr, uint32_t v)
{
	sp_put_le32(im->mem + (addr - IMG_BASE), v);
}

/* Bump allocation, 16-aligned; 0 when full. */
static inline uint64_t img_alloc(py_img *im, uint32_t size)
{
	uint32_t at = (im->used + 15u) & ~15u;
	if (at + size > IMG_MAX - IMG_STACK_LEN)
		return 0;
	im->used = at + size;
	memset(im->mem + at, 0, size);
	return IMG_BASE + at;
}

static inline uint64_t img_str(py_img *im, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	uint64_t a = img_alloc(im, im->l.str_ascii + n + 1);
	if (!a)
		return 0;
	img_put64(im, a + im->l.ob_type, IMG_T_STR);
	img_put64(im, a + im->l.str_length, n);
	img_put32(im, a + im->l.str_state, (1u << 2) | (1u << 5) | (1u << 6));
	memcpy(im->mem + (a - IMG_BASE) + im->l.str_ascii, s, n);
	return a;
}

static inline uint64_t img_bytes(py_img *im, const uint8_t *d, uint32_t n)
{
	uint64_t a = img_alloc(im, im->l.bytes_data + n + 1);
	if (!a)
		return 0;
	img_put64(im, a + im->l.ob_type, IMG_T_BYTES);
	img_put64(im, a + im->l.var_size, n);
	if (n)
		memcpy(im->mem + (a - IMG_BASE) + im->l.bytes_data, d, n);
	return a;
}

/* A 3.11+ line table: one entry per 2-unit step, code 13 (line delta only). */
static inline uint32_t img_linetable311(uint8_t *out, const int32_t *lines, uint32_t n,
                                        int32_t first)
{
	uint32_t o = 0;
	int32_t cur = first;
	for (uint32_t i = 0; i < n; i++) {
		int32_t d = lines[i] - cur;
		cur = lines[i];
		out[o++] = (uint8_t)(0x80 | (13u << 3) | 1u); /* 2 code units */
		uint32_t v = d < 0 ? ((uint32_t)(-d) << 1) | 1u : (uint32_t)d << 1;
		do {
			uint8_t b = v & 63;
			v >>= 6;
			out[o++] = (uint8_t)(b | (v ? 64 : 0));
		} while (v);
	}
	return o;
}

/* A 3.10 line table: (4 bytes, line delta) pairs. */
static inline uint32_t img_linetable310(uint8_t *out, const int32_t *lines, uint32_t n,
                                        int32_t first)
{
	uint32_t o = 0;
	int32_t cur = first;
	for (uint32_t i = 0; i < n; i++) {
		out[o++] = 4;
		out[o++] = (uint8_t)(int8_t)(lines[i] - cur);
		cur = lines[i];
	}
	return o;
}

/* A code object of @p nsteps 4-byte steps whose step i is on lines[i]. */
static inline uint64_t img_code(py_img *im, const char *qualname, const char *file, int32_t first,
                                const int32_t *lines, uint32_t nsteps)
{
	uint8_t lt[512];
	if (nsteps > 64)
		return 0;
	uint32_t ltn = im->l.linetable == SP_PY_LINETABLE_310
	                       ? img_linetable310(lt, lines, nsteps, first)
	                       : img_linetable311(lt, lines, nsteps, first);
	uint64_t q = img_str(im, qualname), f = img_str(im, file), t = img_bytes(im, lt, ltn);
	uint32_t size = im->l.code_read;
	if (im->l.code_adaptive != SP_PY_NONE && im->l.code_adaptive + 4 * nsteps > size)
		size = im->l.code_adaptive + 4 * nsteps;
	uint64_t c = img_alloc(im, size);
	if (!q || !f || !t || !c)
		return 0;
	img_put64(im, c + im->l.ob_type, IMG_T_CODE);
	img_put64(im, c + im->l.var_size, im->l.code_adaptive != SP_PY_NONE ? 2 * nsteps : 0);
	img_put32(im, c + im->l.code_firstlineno, (uint32_t)first);
	img_put64(im, c + im->l.code_filename, f);
	img_put64(im, c + im->l.code_name, q);
	if (im->l.code_qualname != SP_PY_NONE)
		img_put64(im, c + im->l.code_qualname, q);
	img_put64(im, c + im->l.code_linetable, t);
	/* Frame size unknown (0 words, or a 3.11 stack size out of range), so
	 * frames may sit anywhere: see img_code_words. */
	if (im->l.code_stacksize != SP_PY_NONE)
		img_put32(im, c + im->l.code_stacksize, 0x7fffffffu);
	return c;
}

/* Gives code object @p c a frame size of @p words (at least 9), so that
 * the walk checks where its callees' frames sit. */
static inline void img_code_words(py_img *im, uint64_t c, uint32_t words)
{
	if (im->l.code_framesize != SP_PY_NONE)
		img_put32(im, c + im->l.code_framesize, words);
	if (im->l.code_stacksize != SP_PY_NONE && im->l.code_nlocalsplus != SP_PY_NONE) {
		img_put32(im, c + im->l.code_stacksize, words - SP_PY_FRAME_SPECIALS);
		img_put32(im, c + im->l.code_nlocalsplus, 0);
	}
}

/* A frame running @p code at step @p step; @p owner is 0 for Python frames
 * or the shim owner. Frames may be placed in the stack region (@p on_stack). */
static inline uint64_t img_frame(py_img *im, uint64_t code, uint32_t step, uint64_t prev, int entry,
                                 uint8_t owner, uint64_t at)
{
	uint64_t f = at ? at : img_alloc(im, im->l.frame_read);
	if (!f)
		return 0;
	memset(im->mem + (f - IMG_BASE), 0, im->l.frame_read);
	img_put64(im, f + im->l.frame_previous, prev);
	img_put64(im, f + im->l.frame_code, code | (im->l.code_tagged && code ? 1u : 0u));
	if (im->l.instr_is_lasti) {
		img_put64(im, f, 1); /* ob_refcnt: a live frame object */
		img_put64(im, f + im->l.frame_type, IMG_T_FRAME);
		img_put32(im, f + im->l.frame_instr, 2 * step);
	} else {
		/* prev_instr points at the instruction; instr_ptr likewise. */
		img_put64(im, f + im->l.frame_instr, code + im->l.code_adaptive + 4 * step);
	}
	if (im->l.frame_owner != SP_PY_NONE)
		im->mem[f - IMG_BASE + im->l.frame_owner] = owner;
	if (im->l.frame_is_entry != SP_PY_NONE)
		im->mem[f - IMG_BASE + im->l.frame_is_entry] = (uint8_t)entry;
	return f;
}

/* Writes a _Py_DebugOffsets block for @p minor (13 or 14) at the image
 * start, with the values of the 3.13.0 build here (3.14: same offsets,
 * new block layout). Returns its size. */
static inline uint32_t img_debug_offsets(uint8_t *d, uint32_t minor)
{
	memset(d, 0, 700);
	memcpy(d, "xdebugpy", 8);
	sp_put_le64(d + 8, minor == 13 ? 0x030d00f0u : 0x030e00f0u);
	/* field positions: runtime, interp, tstate, frame, code, object, bytes, unicode */
	uint32_t rt = 24, is = 48, ts = minor == 13 ? 152 : 176, fr = minor == 13 ? 224 : 248,
	         co = minor == 13 ? 272 : 312, ob = minor == 13 ? 352 : 400,
	         by = minor == 13 ? 512 : 592, un = minor == 13 ? 536 : 616;
	sp_put_le64(d + rt, 1600);
	sp_put_le64(d + rt + 16, minor == 13 ? 632 : 1024); /* interpreters.head */
	sp_put_le64(d + is, 194968);
	sp_put_le64(d + is + 16, 7264); /* next */
	sp_put_le64(d + is + 24, 7344); /* threads.head */
	sp_put_le64(d + ts, 304);
	sp_put_le64(d + ts + 16, 8);   /* next */
	sp_put_le64(d + ts + 32, 72);  /* current_frame */
	sp_put_le64(d + ts + 40, 152); /* thread_id */
	sp_put_le64(d + ts + 48, 160); /* native_thread_id */
	sp_put_le64(d + fr, 80);
	sp_put_le64(d + fr + 8, 8);   /* previous */
	sp_put_le64(d + fr + 16, 0);  /* executable */
	sp_put_le64(d + fr + 24, 56); /* instr_ptr */
	sp_put_le64(d + fr + 40, 70); /* owner */
	sp_put_le64(d + co, 224);
	sp_put_le64(d + co + 8, 112);  /* filename */
	sp_put_le64(d + co + 16, 120); /* name */
	sp_put_le64(d + co + 24, 128); /* qualname */
	sp_put_le64(d + co + 32, 136); /* linetable */
	sp_put_le64(d + co + 40, 68);  /* firstlineno */
	sp_put_le64(d + co + 72, 200); /* co_code_adaptive */
	sp_put_le64(d + ob, 16);
	sp_put_le64(d + ob + 8, 8); /* ob_type */
	sp_put_le64(d + by, 40);
	sp_put_le64(d + by + 8, 16);  /* ob_size */
	sp_put_le64(d + by + 16, 32); /* ob_sval */
	sp_put_le64(d + un, 56);
	sp_put_le64(d + un + 8, 32);  /* state */
	sp_put_le64(d + un + 16, 16); /* length */
	sp_put_le64(d + un + 24, 40); /* asciiobject_size */
	/* For thread names: sys.modules, tp_flags, ma_keys/ma_values and
	 * lv_tag/ob_digit (3.14: its own block positions, and a
	 * sys.modules offset of its own, to tell the layouts apart). */
	uint32_t tp = minor == 13 ? 368 : 416, di = minor == 13 ? 448 : 528,
	         lo = minor == 13 ? 488 : 568;
	sp_put_le64(d + is + (minor == 13 ? 40 : 48),
	            minor == 13 ? 7656 : 7696); /* imports_modules */
	sp_put_le64(d + tp, 416);
	sp_put_le64(d + tp + 24, 168); /* tp_flags */
	sp_put_le64(d + di, 48);
	sp_put_le64(d + di + 8, 32);  /* ma_keys */
	sp_put_le64(d + di + 16, 40); /* ma_values */
	sp_put_le64(d + lo, 32);
	sp_put_le64(d + lo + 8, 16);  /* lv_tag */
	sp_put_le64(d + lo + 16, 24); /* ob_digit */
	return minor == 13 ? 568 : 648;
}

/* Sets up an empty image whose layout is that of selector @p v. */
static inline int img_init(py_img *im, int v)
{
	memset(im, 0, sizeof(*im));
	int rc;
	if (v <= IMG_V312) {
		rc = sp_py_layout_from_table((3u << 24) | ((uint32_t)(10 + v) << 16), &im->l);
		im->used = 2048; /* room for the runtime */
	} else {
		uint32_t n = img_debug_offsets(im->mem, v == IMG_V313 ? 13 : 14);
		rc = sp_py_layout_from_debug(im->mem, n, &im->l);
		im->used = 2048;
	}
	return rc;
}

/* A single-interpreter, single-thread runtime whose thread @p tid has the
 * top frame @p top. Returns the thread state address. */
static inline uint64_t img_runtime(py_img *im, int32_t tid, uint64_t top)
{
	uint64_t interp = img_alloc(im, 8192), ts = img_alloc(im, im->l.tstate_read);
	if (!interp || !ts)
		return 0;
	/* The interpreter state is big (3.13: threads.head at 7344); only the
	 * fields read are set. */
	img_put64(im, IMG_BASE + im->l.runtime_interpreters_head, interp);
	img_put64(im, interp + im->l.interp_next, 0);
	img_put64(im, interp + im->l.interp_threads_head, ts);
	img_put64(im, ts + im->l.tstate_next, 0);
	if (im->l.tstate_native_thread_id != SP_PY_NONE)
		img_put64(im, ts + im->l.tstate_native_thread_id, (uint64_t)tid);
	if (im->l.cframe_current_frame != SP_PY_NONE) {
		/* _PyCFrame lives on the C stack: put it in the stack region. */
		uint64_t cf = IMG_BASE + IMG_MAX - IMG_STACK_LEN + 64;
		img_put64(im, ts + im->l.tstate_frame, cf);
		img_put64(im, cf + im->l.cframe_current_frame, top);
	} else {
		img_put64(im, ts + im->l.tstate_frame, top);
	}
	return ts;
}

/* ---- threading._active ---------------------------------------------------- */

/* A dict of @p n entries: @p kind 0 (hash, key, value) entries, 1 str keys,
 * 2 a split table whose values are at @p values (then the entries' values
 * are not stored). Returns its keys object in *keys (may be NULL). */
static inline uint64_t img_dict(py_img *im, uint32_t n, const uint64_t *k, const uint64_t *v,
                                int kind, uint64_t values, uint64_t *keys_out)
{
	const sp_py_layout *l = &im->l;
	uint32_t lg = n <= 5 ? 3 : 4, size = 1u << lg; /* 1-byte indices */
	uint32_t esize = l->dict_keys_log2 && kind ? 16 : 24, head = l->dict_keys_log2 ? 32 : 40;
	uint64_t keys = img_alloc(im, head + size + n * esize);
	uint64_t dict = img_alloc(im, SP_PY_DICT_READ);
	if (!keys || !dict)
		return 0;
	img_put64(im, keys, 1);
	if (l->dict_keys_log2) {
		im->mem[keys - IMG_BASE + 8] = (uint8_t)lg;
		im->mem[keys - IMG_BASE + 9] = (uint8_t)lg;
		im->mem[keys - IMG_BASE + 10] = (uint8_t)kind;
		img_put64(im, keys + 24, n);
	} else {
		img_put64(im, keys + 8, size);
		img_put64(im, keys + 32, n);
	}
	uint64_t e = keys + head + size;
	for (uint32_t i = 0; i < n; i++, e += esize) {
		uint32_t ko = esize == 24 ? 8 : 0;
		if (esize == 24)
			img_put64(im, e, 0x5a5a0000u + i); /* hash */
		img_put64(im, e + ko, k[i]);
		img_put64(im, e + ko + 8, values ? 0 : v[i]);
	}
	img_put64(im, dict, 1);
	img_put64(im, dict + l->ob_type, IMG_T_DICT);
	img_put64(im, dict + 16, n); /* ma_used */
	img_put64(im, dict + l->dict_keys, keys);
	img_put64(im, dict + l->dict_values, values);
	if (keys_out)
		*keys_out = keys;
	return dict;
}

/* A positive int of 1 to 3 digits. */
static inline uint64_t img_long(py_img *im, uint64_t v)
{
	const sp_py_layout *l = &im->l;
	uint64_t a = img_alloc(im, SP_PY_LONG_READ);
	if (!a)
		return 0;
	uint32_t nd = 0;
	for (uint64_t x = v; x; x >>= 30)
		img_put32(im, a + l->long_digits + 4 * nd++, (uint32_t)(x & 0x3fffffffu));
	img_put64(im, a, 1);
	img_put64(im, a + l->ob_type, IMG_T_LONG);
	img_put64(im, a + l->long_size, l->long_tagged ? (uint64_t)nd << 3 : nd);
	return a;
}

/* sys.modules of interpreter @p interp with a threading module whose
 * _active holds @p n Thread objects (ident idents[i], _name names[i]),
 * laid out as the version keeps instance attributes: 3.10 a split
 * __dict__, 3.11 a values pointer, 3.12 a tagged one, 3.13+ inline
 * values. With @p with_dict, thread 0 has a dict of its own (a combined
 * one: someone looked at its __dict__). 0 or -1 when the image is full. */
static inline int img_threading(py_img *im, uint64_t interp, uint32_t n, const char *const *names,
                                const uint64_t *idents, int with_dict)
{
	const sp_py_layout *l = &im->l;
	if (n > 8)
		return -1;
	/* The class: a heap type whose instances share keys (_target, _name,
	 * _ident). */
	uint64_t attrs[3] = { img_str(im, "_target"), img_str(im, "_name"), img_str(im, "_ident") };
	uint64_t none[3] = { 0, 0, 0 }, ckeys = 0;
	uint64_t cls = img_alloc(im, l->type_cached_keys + 8);
	if (!attrs[0] || !attrs[1] || !attrs[2] || !cls ||
	    !img_dict(im, 3, attrs, none, 2, 8 /* split: no values here */, &ckeys))
		return -1;
	uint64_t flags = 1u << 9; /* heap type */
	if (l->managed != SP_PY_MANAGED_NONE)
		flags |= 1u << 4; /* managed dict */
	if (l->managed == SP_PY_MANAGED_313)
		flags |= 1u << 2; /* inline values */
	img_put64(im, cls, 1);
	img_put64(im, cls + l->type_flags, flags);
	img_put64(im, cls + l->type_basicsize, l->managed == SP_PY_MANAGED_NONE ? 32 : 16);
	img_put64(im, cls + l->type_dictoffset,
	          l->managed == SP_PY_MANAGED_NONE ? 16 : (uint64_t)(int64_t)-1);
	img_put64(im, cls + l->type_cached_keys, ckeys);
	uint64_t keys[8], objs[8];
	for (uint32_t i = 0; i < n; i++) {
		uint64_t name = img_str(im, names[i]);
		uint64_t vals[3] = { 0, name, img_long(im, idents[i]) };
		uint64_t block = img_alloc(im, 32 + 16 + 8 + 3 * 8);
		keys[i] = img_long(im, idents[i]);
		if (!name || !vals[2] || !block || !keys[i])
			return -1;
		uint64_t obj = block + 32;
		objs[i] = obj;
		img_put64(im, obj, 1);
		img_put64(im, obj + l->ob_type, cls);
		uint64_t dict = 0;
		if (with_dict && i == 0) {
			dict = img_dict(im, 3, attrs, vals, 1, 0, NULL);
			if (!dict)
				return -1;
		}
		/* The values array: 3.13+ after a 4-byte header (capacity, size,
		 * embedded, valid) padded to 8; before, the array itself. */
		uint64_t va = 0;
		if (l->managed == SP_PY_MANAGED_313) {
			va = obj + 16;
			im->mem[va - IMG_BASE] = 3;
			im->mem[va - IMG_BASE + 1] = 3;
			im->mem[va - IMG_BASE + 2] = 1;
			im->mem[va - IMG_BASE + 3] = 1;
		} else {
			va = img_alloc(im, 3 * 8);
			if (!va)
				return -1;
		}
		for (uint32_t k = 0; k < 3; k++)
			img_put64(im, va + l->dictvalues_items + 8 * k, vals[k]);
		switch (l->managed) {
		case SP_PY_MANAGED_NONE:
			if (!dict) {
				dict = img_dict(im, 3, attrs, none, 0, va, NULL);
				if (!dict)
					return -1;
				img_put64(im, dict + l->dict_keys, ckeys); /* the class's keys */
			}
			img_put64(im, obj + 16, dict);
			break;
		case SP_PY_MANAGED_311:
			img_put64(im, obj - 32, dict ? 0 : va);
			img_put64(im, obj - 24, dict);
			break;
		case SP_PY_MANAGED_312: img_put64(im, obj - 24, dict ? dict : va - 1); break;
		default:
			img_put64(im, obj - 24, dict);
			if (dict)
				im->mem[va - IMG_BASE + 3] = 0; /* the dict took over */
			break;
		}
	}
	uint64_t active = img_dict(im, n, keys, objs, 0, 0, NULL);
	uint64_t mk[2] = { img_str(im, "_limbo"), img_str(im, "_active") };
	uint64_t mv[2] = { active, active };
	uint64_t md = img_dict(im, 2, mk, mv, 1, 0, NULL);
	uint64_t mod = img_alloc(im, SP_PY_DICT_READ);
	uint64_t sk[2] = { img_str(im, "sys"), img_str(im, "threading") };
	uint64_t sv[2] = { mod, mod };
	uint64_t sys = img_dict(im, 2, sk, sv, 1, 0, NULL);
	if (!active || !md || !mod || !sys || !mk[0] || !mk[1] || !sk[0] || !sk[1])
		return -1;
	img_put64(im, mod, 1);
	img_put64(im, mod + l->ob_type, IMG_T_MOD);
	img_put64(im, mod + l->module_dict, md);
	img_put64(im, interp + l->interp_modules, sys);
	return 0;
}

/* Memory reader over an image (also used by the fuzz harness). */
typedef struct img_reader {
	const uint8_t *mem;
	size_t len;
	uint64_t base;
} img_reader;

/* Real memory is mapped in whole pages: the image reads as if padded with
 * zeros to its next page boundary, so that a page re-read (the walk's
 * verification) sees what a frame read saw. */
static inline int img_read(void *ctx, sp_py_iov *iov, uint32_t n, int prefix)
{
	(void)prefix;
	const img_reader *r = ctx;
	uint64_t mapped = ((uint64_t)r->len + SP_PY_PAGE - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
	for (uint32_t i = 0; i < n; i++) {
		iov[i].ok = 0;
		if (iov[i].addr >= r->base && iov[i].addr - r->base <= mapped &&
		    mapped - (iov[i].addr - r->base) >= iov[i].len) {
			uint64_t off = iov[i].addr - r->base;
			uint64_t have = off < r->len ? r->len - off : 0;
			if (have > iov[i].len)
				have = iov[i].len;
			memcpy(iov[i].buf, r->mem + off, (size_t)have);
			memset((uint8_t *)iov[i].buf + have, 0, (size_t)(iov[i].len - have));
			iov[i].ok = 1;
		}
	}
	return 0;
}

#endif
