/* Pure tests of the CPython decoders: layouts and debug offsets, line
 * tables, frame walks over synthetic memory images (valid, shimmed, torn),
 * the code cache and the native+Python merge. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "harness.h"
#include "stackpulse.h"

#include "common/alloc.h"
#include "python/layout.h"
#include "python/memory.h"
#include "python/merge.h"
#include "python/names.h"

#include "py_image.h"

/* Reads the code object's header at @p addr and interns it, as a walk does
 * for each frame (memory.c reads the headers in batches). */
static int code_intern(sp_py_walker *w, uint64_t addr, uint32_t *id)
{
	uint8_t hdr[SP_PY_MAX_BLOCK];
	sp_py_iov iov = { addr, hdr, w->layout->code_read, 0 };
	int rc = sp_py_mem_read(&w->mem, &iov, 1);
	return rc ? rc : sp_py_code_intern_hdr(w, addr, hdr, id);
}

/* Entries the code cache holds now. */
static uint32_t codes_held(const sp_py_codes *c)
{
	sp_py_codes_usage u;
	sp_py_codes_get_usage(c, &u);
	return u.count;
}

/* ---- layouts ------------------------------------------------------------------ */

SP_TEST(layout_tables_match_measured_offsets)
{
	/* Values measured with offsetof() against each build's internal
	 * headers and on live processes (shared/notes/cpython-frames.md). */
	sp_py_layout l;
	REQUIRE_OK(sp_py_layout_from_table(0x030b07f0, &l));
	CHECK_EQ(l.runtime_interpreters_head, 40);
	CHECK_EQ(l.interp_threads_head, 16);
	CHECK_EQ(l.tstate_frame, 56);
	CHECK_EQ(l.cframe_current_frame, 8);
	CHECK_EQ(l.tstate_native_thread_id, 160);
	CHECK_EQ(l.frame_code, 32);
	CHECK_EQ(l.frame_previous, 48);
	CHECK_EQ(l.frame_instr, 56);
	CHECK_EQ(l.frame_is_entry, 68);
	CHECK_EQ(l.frame_owner, 69);
	CHECK_EQ(l.code_firstlineno, 72);
	CHECK_EQ(l.code_filename, 112);
	CHECK_EQ(l.code_qualname, 128);
	CHECK_EQ(l.code_linetable, 136);
	CHECK_EQ(l.code_adaptive, 184);
	CHECK_EQ(l.str_ascii, 48);
	/* Thread-list serial and thread names (offsetof() against the
	 * installed 3.10.13, 3.11.7 and 3.12.1 headers). */
	CHECK_EQ(l.interp_tstate_serial, 8);
	CHECK_EQ(l.names, 1);
	CHECK_EQ(l.interp_modules, 888);
	CHECK_EQ(l.type_cached_keys, 872);
	CHECK_EQ(l.managed, SP_PY_MANAGED_311);
	CHECK_EQ(l.dict_keys_log2, 1);

	REQUIRE_OK(sp_py_layout_from_table(0x030c01f0, &l));
	CHECK_EQ(l.runtime_interpreters_head, 40);
	CHECK_EQ(l.interp_threads_head, 72);
	CHECK_EQ(l.cframe_current_frame, 0);
	CHECK_EQ(l.tstate_native_thread_id, 144);
	CHECK_EQ(l.frame_code, 0);
	CHECK_EQ(l.frame_previous, 8);
	CHECK_EQ(l.frame_owner, 70);
	CHECK_EQ(l.code_firstlineno, 68);
	CHECK_EQ(l.code_adaptive, 192);
	CHECK_EQ(l.str_ascii, 40);
	CHECK_EQ(l.owner_first_c, 3);
	CHECK_EQ(l.interp_tstate_serial, 64);
	CHECK_EQ(l.interp_modules, 944);
	CHECK_EQ(l.type_cached_keys, 880);
	CHECK_EQ(l.managed, SP_PY_MANAGED_312);
	CHECK_EQ(l.long_tagged, 1);

	REQUIRE_OK(sp_py_layout_from_table(0x030a0df0, &l));
	CHECK_EQ(l.runtime_interpreters_head, 32);
	CHECK_EQ(l.interp_threads_head, 8);
	CHECK_EQ(l.tstate_frame, 24);
	CHECK_EQ(l.tstate_thread_id, 176);
	CHECK_EQ(l.tstate_native_thread_id, SP_PY_NONE);
	CHECK_EQ(l.frame_previous, 24);
	CHECK_EQ(l.frame_code, 32);
	CHECK_EQ(l.frame_instr, 96);
	CHECK_EQ(l.code_firstlineno, 40);
	CHECK_EQ(l.code_filename, 104);
	CHECK_EQ(l.code_name, 112);
	CHECK_EQ(l.code_linetable, 120);
	CHECK_EQ(l.linetable, SP_PY_LINETABLE_310);
	CHECK_EQ(l.interp_tstate_serial, 3448);
	CHECK_EQ(l.interp_modules, 856);
	CHECK_EQ(l.dict_keys_log2, 0);
	CHECK_EQ(l.managed, SP_PY_MANAGED_NONE);
	CHECK_EQ(l.long_tagged, 0);

	CHECK_EQ(sp_py_layout_from_table(0x03090000, &l), STACKPULSE_EUNSUPPORTED);
	CHECK_EQ(sp_py_layout_from_table(0x030d0000, &l), STACKPULSE_EUNSUPPORTED);
}

/* The version is said as "3.9" with the range that is read, never as hex. */
SP_TEST(unsupported_version_message)
{
	CHECK_EQ(sp_py_unsupported("/usr/lib/libpython3.9.so.1.0", 0x030912f0),
	         STACKPULSE_EUNSUPPORTED);
	CHECK_STR(stackpulse_last_error(), "/usr/lib/libpython3.9.so.1.0: CPython 3.9 is not "
	                                   "supported (stackpulse reads CPython 3.10 to 3.14)");
	CHECK_EQ(sp_py_unsupported(NULL, 0x02070000), STACKPULSE_EUNSUPPORTED);
	CHECK_STR(stackpulse_last_error(),
	          "CPython 2.7 is not supported (stackpulse reads CPython 3.10 to 3.14)");
	sp_py_unsupported("x", 0);
	CHECK(strstr(stackpulse_last_error(), "CPython of unknown version") != NULL);
}

SP_TEST(debug_offsets_313_and_314)
{
	uint8_t d[1024];
	sp_py_layout l;
	uint32_t n = img_debug_offsets(d, 13);
	REQUIRE_OK(sp_py_layout_from_debug(d, n, &l));
	CHECK_EQ(l.version, 0x030d00f0);
	CHECK_EQ(l.runtime_interpreters_head, 632);
	CHECK_EQ(l.interp_threads_head, 7344);
	CHECK_EQ(l.tstate_next, 8);
	CHECK_EQ(l.tstate_frame, 72);
	CHECK_EQ(l.cframe_current_frame, SP_PY_NONE);
	CHECK_EQ(l.tstate_native_thread_id, 160);
	CHECK_EQ(l.frame_code, 0);
	CHECK_EQ(l.frame_previous, 8);
	CHECK_EQ(l.frame_instr, 56);
	CHECK_EQ(l.frame_owner, 70);
	CHECK_EQ(l.code_firstlineno, 68);
	CHECK_EQ(l.code_filename, 112);
	CHECK_EQ(l.code_name, 120);
	CHECK_EQ(l.code_qualname, 128);
	CHECK_EQ(l.code_linetable, 136);
	CHECK_EQ(l.code_adaptive, 200);
	CHECK_EQ(l.str_ascii, 40);
	CHECK_EQ(l.str_state, 32);
	CHECK_EQ(l.code_tagged, 0);

	n = img_debug_offsets(d, 14);
	REQUIRE_OK(sp_py_layout_from_debug(d, n, &l));
	CHECK_EQ(l.version, 0x030e00f0);
	CHECK_EQ(l.code_tagged, 1);
	CHECK_EQ(l.interp_threads_head, 7344);
	CHECK_EQ(l.code_adaptive, 200);

	/* Too short, no cookie, free-threaded, too old, offset past its block. */
	CHECK_EQ(sp_py_layout_from_debug(d, 100, &l), STACKPULSE_ETRUNCATED);
	n = img_debug_offsets(d, 13);
	d[0] = 'X';
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EFORMAT);
	n = img_debug_offsets(d, 13);
	sp_put_le64(d + 16, 1);
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EUNSUPPORTED);
	n = img_debug_offsets(d, 13);
	sp_put_le64(d + 8, 0x030c01f0);
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EUNSUPPORTED);
	CHECK_STR(stackpulse_last_error(), "debug offsets: CPython 3.12 is not supported "
	                                   "(stackpulse reads CPython 3.10 to 3.14)");
	n = img_debug_offsets(d, 13);
	sp_put_le64(d + 224 + 8, 80); /* frame.previous == frame size */
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EFORMAT);
	n = img_debug_offsets(d, 13);
	sp_put_le64(d + 272, 1u << 20); /* code object block larger than allowed */
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EFORMAT);
	n = img_debug_offsets(d, 13);
	sp_put_le64(d + 544, 60); /* str.state past sizeof(PyASCIIObject) */
	CHECK_EQ(sp_py_layout_from_debug(d, n, &l), STACKPULSE_EFORMAT);
	/* A future minor uses the newest layout when it is consistent. */
	n = img_debug_offsets(d, 14);
	sp_put_le64(d + 8, 0x030f00a0);
	CHECK_OK(sp_py_layout_from_debug(d, n, &l));
}

/* Each offset the walker reads from a block must fit in the bytes read for
 * it: at the edge it does, one byte further it does not. A field a version
 * lacks (SP_PY_NONE) is fine until it names an offset that does not fit. */
typedef struct layout_field {
	size_t at;      /* offsetof(sp_py_layout, field) */
	size_t block;   /* offsetof the read size it must fit in, or 0: none */
	uint32_t width; /* bytes read at the offset (0: frame_instr) */
} layout_field;

#define LF(f, b, w)                                                                                \
	{                                                                                          \
		offsetof(sp_py_layout, f), offsetof(sp_py_layout, b), w                            \
	}

SP_TEST(layout_check_refuses_each_field_out_of_its_block)
{
	static const layout_field fields[] = {
		LF(tstate_next, tstate_read, 8),      LF(tstate_frame, tstate_read, 8),
		LF(tstate_thread_id, tstate_read, 8), LF(tstate_native_thread_id, tstate_read, 4),
		LF(frame_previous, frame_read, 8),    LF(frame_code, frame_read, 8),
		LF(frame_instr, frame_read, 0),       LF(frame_owner, frame_read, 1),
		LF(frame_is_entry, frame_read, 1),    LF(frame_type, frame_read, 8),
		LF(frame_gen, frame_read, 8),         LF(code_filename, code_read, 8),
		LF(code_name, code_read, 8),          LF(code_qualname, code_read, 8),
		LF(code_linetable, code_read, 8),     LF(code_firstlineno, code_read, 4),
		LF(code_framesize, code_read, 4),     LF(code_stacksize, code_read, 4),
		LF(code_nlocalsplus, code_read, 4),   LF(ob_type, code_read, 8),
	};
	/* Sizes and offsets checked against a bound, not a block. */
	static const size_t bounded[] = {
		offsetof(sp_py_layout, tstate_read), offsetof(sp_py_layout, frame_read),
		offsetof(sp_py_layout, code_read),   offsetof(sp_py_layout, code_adaptive),
		offsetof(sp_py_layout, str_state),   offsetof(sp_py_layout, str_length),
		offsetof(sp_py_layout, str_ascii),   offsetof(sp_py_layout, str_compact),
		offsetof(sp_py_layout, bytes_data),  offsetof(sp_py_layout, var_size),
	};
	static const uint32_t versions[] = { 0x030a0df0, 0x030b07f0, 0x030c01f0 };
	uint8_t d[1024];
	sp_py_layout layouts[5];
	for (int v = 0; v < 3; v++)
		REQUIRE_OK(sp_py_layout_from_table(versions[v], &layouts[v]));
	REQUIRE_OK(sp_py_layout_from_debug(d, img_debug_offsets(d, 13), &layouts[3]));
	REQUIRE_OK(sp_py_layout_from_debug(d, img_debug_offsets(d, 14), &layouts[4]));
	for (int v = 0; v < 5; v++) {
		const sp_py_layout *good = &layouts[v];
		REQUIRE_OK(sp_py_layout_check(good));
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			sp_py_layout l = *good;
			uint32_t *f = (uint32_t *)((uint8_t *)&l + fields[i].at);
			uint32_t block =
			        *(const uint32_t *)((const uint8_t *)good + fields[i].block);
			uint32_t width = fields[i].width    ? fields[i].width
			                 : l.instr_is_lasti ? 4
			                                    : 8;
			*f = block - width; /* the last offset that fits */
			if (sp_py_layout_check(&l) != 0)
				sp_test_fail(__FILE__, __LINE__, "layout %d field %zu at the edge",
				             v, i);
			*f = block - width + 1;
			if (sp_py_layout_check(&l) != STACKPULSE_EFORMAT)
				sp_test_fail(__FILE__, __LINE__,
				             "layout %d field %zu past its block", v, i);
			*f = SP_PY_MAX_BLOCK * 4;
			CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		}
		for (size_t i = 0; i < sizeof(bounded) / sizeof(bounded[0]); i++) {
			sp_py_layout l = *good;
			*(uint32_t *)((uint8_t *)&l + bounded[i]) = UINT32_MAX - 16;
			if (sp_py_layout_check(&l) != STACKPULSE_EFORMAT)
				sp_test_fail(__FILE__, __LINE__, "layout %d bound %zu", v, i);
		}
		sp_py_layout l = *good;
		l.code_read = 0;
		CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		l = *good;
		l.frame_read = 0;
		CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		l = *good;
		l.str_compact = l.str_ascii - 1; /* before the ASCII data */
		CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		l = *good;
		l.bytes_data = l.var_size + 7; /* over ob_size */
		CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		l = *good;
		l.linetable = 0;
		CHECK_EQ(sp_py_layout_check(&l), STACKPULSE_EFORMAT);
		CHECK(strstr(stackpulse_last_error(), "line table format") != NULL);
	}
}

/* ---- line tables -------------------------------------------------------------------- */

SP_TEST(linetable_311_all_entry_kinds)
{
	/* first line 10. Entries (code, units):
	 *  short form code 3, 1 unit, +1 byte          -> line 10, bytes [0,2)
	 *  one-line form code 11 (+1), 2 units, +2 b   -> line 11, [2,6)
	 *  no-column code 13, delta -3 (svarint 7), 1  -> line 8,  [6,8)
	 *  long form code 14, delta +100 (200: 2 chunks), 3 varints, 1 unit -> 108, [8,10)
	 *  none code 15, 2 units                        -> 0,   [10,14)
	 *  one-line code 10 (+0), 8 units               -> 108, [14,30) */
	const uint8_t t[] = {
		0x80 | (3 << 3) | 0,
		0x05,
		0x80 | (11 << 3) | 1,
		0x01,
		0x02,
		0x80 | (13 << 3) | 0,
		7,
		0x80 | (14 << 3) | 0,
		(200 & 63) | 64,
		200 >> 6,
		1,
		2,
		3,
		0x80 | (15 << 3) | 1,
		0x80 | (10 << 3) | 7,
		0x00,
		0x00,
	};
	const int fmt = SP_PY_LINETABLE_311;
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, -1), 10);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 0), 10);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 2), 11);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 4), 11);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 6), 8);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 8), 108);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 10), 0);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 12), 0);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 14), 108);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 28), 108);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 10, 30), 0); /* past the end */
	/* Cut inside a varint, empty, NULL, bad start byte: never out of bounds. */
	for (size_t cut = 0; cut <= sizeof(t); cut++)
		for (int off = 0; off < 32; off += 2)
			(void)sp_py_line(fmt, t, cut, 10, off);
	CHECK_EQ(sp_py_line(fmt, NULL, 0, 10, 4), 0);
	const uint8_t bad[] = { 0x05, 0x80 };
	CHECK_EQ(sp_py_line(fmt, bad, sizeof(bad), 10, 0), 0);
}

SP_TEST(linetable_310_pairs)
{
	/* first line 5: [0,6) +0 -> 5; [6,6) +2 (empty, still counts) ->7;
	 * [6,10) +1 -> 8; [10,14) no line; [14,16) -3 -> 5;
	 * [16,271) 255 bytes split: (255,+1)->6 */
	const uint8_t t[] = { 6, 0, 0, 2, 4, 1, 4, (uint8_t)-128, 2, (uint8_t)-3, 255, 1 };
	const int fmt = SP_PY_LINETABLE_310;
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, -1), 5);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 0), 5);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 4), 5);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 6), 8);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 10), 0);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 14), 5);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 200), 6);
	CHECK_EQ(sp_py_line(fmt, t, sizeof(t), 5, 271), 0);
	CHECK_EQ(sp_py_line(fmt, t, 11, 5, 14), 5); /* odd length: last half pair ignored */
}

/* ---- frame walks ---------------------------------------------------------------------- */

typedef struct walk_env {
	py_img im;
	img_reader r;
	sp_py_walker w;
	uint64_t fib, run, mod;
} walk_env;

static const int32_t fib_lines[] = { 3, 4, 4, 5, 5, 5 };
static const int32_t run_lines[] = { 9, 10, 11, 11 };
static const int32_t mod_lines[] = { 1, 2, 13, 14 };

static void env_init(walk_env *e, int v)
{
	REQUIRE_OK(img_init(&e->im, v));
	e->r = (img_reader){ e->im.mem, IMG_MAX, IMG_BASE };
	memset(&e->w, 0, sizeof(e->w));
	e->w.layout = &e->im.l;
	e->w.types = (sp_py_types){ IMG_T_CODE, IMG_T_FRAME, IMG_T_STR, IMG_T_BYTES, 0, 0, 0, 0 };
	e->w.mem.read = img_read;
	e->w.mem.ctx = &e->r;
	REQUIRE_OK(sp_py_codes_new(&e->w.codes));
	e->fib = img_code(&e->im, "fib", "/t/demo.py", 2, fib_lines, 6);
	e->run = img_code(&e->im, "Worker.run", "/t/demo.py", 8, run_lines, 4);
	e->mod = img_code(&e->im, "<module>", "/t/demo.py", 1, mod_lines, 4);
	REQUIRE(e->fib && e->run && e->mod);
}

static void env_free(walk_env *e)
{
	sp_py_codes_free(e->w.codes);
}

static const char *qual(walk_env *e, const sp_py_frame *f)
{
	return sp_py_codes_get(e->w.codes, f->code)->qualname;
}

/* <module> (entry) -> [shim] -> run -> fib -> fib (leaf); run..fib in one
 * activation on 3.11+ (3.10: one per frame). */
static uint64_t build_chain(walk_env *e, int with_shim)
{
	const sp_py_layout *l = &e->im.l;
	uint64_t mod = img_frame(&e->im, e->mod, 2, 0, 1, 0, 0);
	uint64_t below = mod;
	if (with_shim && l->owner_first_c != 0xff) {
		/* The shim frame lives on the C stack. */
		uint64_t at = IMG_BASE + IMG_MAX - IMG_STACK_LEN + 512;
		below = img_frame(&e->im, 0, 0, mod, 0, 3, at);
	}
	uint64_t run = img_frame(&e->im, e->run, 2, below,
	                         with_shim && l->frame_is_entry != SP_PY_NONE, 0, 0);
	uint64_t fib1 = img_frame(&e->im, e->fib, 3, run, 0, 0, 0);
	return img_frame(&e->im, e->fib, 0, fib1, 0, 0, 0);
}

SP_TEST(walk_every_version)
{
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		uint64_t top = build_chain(&e, 1);
		uint64_t ts = img_runtime(&e.im, 4242, top);
		REQUIRE(top && ts);
		/* Thread listing and the tid. */
		uint64_t addrs[4];
		uint32_t nt;
		CHECK_OK(sp_py_list_tstates(&e.w, IMG_BASE, addrs, 4, &nt));
		REQUIRE_EQ(nt, 1);
		CHECK_EQ(addrs[0], ts);
		sp_py_tstate t;
		/* Serve the stack region from a "copy" so 3.11/3.12's cframe and
		 * 3.12+ shims come from it. */
		e.w.mem.stack = e.im.mem + IMG_MAX - IMG_STACK_LEN;
		e.w.mem.stack_len = IMG_STACK_LEN;
		e.w.mem.stack_start = IMG_BASE + IMG_MAX - IMG_STACK_LEN;
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_EQ(t.frame, top);
		if (v != IMG_V310)
			CHECK_EQ(t.tid, 4242);
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(tr, 0);
		REQUIRE_EQ(n, 4);
		CHECK_STR(qual(&e, &f[0]), "fib");
		CHECK_STR(qual(&e, &f[1]), "fib");
		CHECK_STR(qual(&e, &f[2]), "Worker.run");
		CHECK_STR(qual(&e, &f[3]), "<module>");
		CHECK_STR(sp_py_codes_get(e.w.codes, f[0].code)->filename, "/t/demo.py");
		CHECK_EQ(f[0].line, 3);
		CHECK_EQ(f[1].line, 5);
		CHECK_EQ(f[2].line, 11);
		CHECK_EQ(f[3].line, 13);
		CHECK_EQ(f[0].offset, 0);
		CHECK_EQ(f[1].offset, 12);
		/* Activations: 3.10 one per frame; 3.11+ fib,fib,run | module. */
		if (v == IMG_V310) {
			for (int i = 0; i < 4; i++)
				CHECK_EQ(f[i].flags, SP_PY_FRAME_ENTRY);
		} else {
			CHECK_EQ(f[0].flags, 0);
			CHECK_EQ(f[1].flags, 0);
			CHECK_EQ(f[2].flags, SP_PY_FRAME_ENTRY);
			CHECK_EQ(f[3].flags, SP_PY_FRAME_ENTRY);
		}
		/* A second walk reuses the interned code objects. */
		uint32_t codes = codes_held(e.w.codes);
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(codes_held(e.w.codes), codes);
		CHECK_EQ(codes, 3);
		/* max cuts cleanly. */
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 2, &n, &tr));
		CHECK_EQ(n, 2);
		CHECK_EQ(tr, 1);
		env_free(&e);
	}
}

/* 3.11/3.12: tstate->cframe is read after the sample. A generator that
 * sum() resumed has usually yielded by then (tstate->cframe names the
 * caller's activation) and its frame lost its caller; the stack copy still
 * holds the sampled activation's cframe. */
/* <module> -> Worker.run on the thread's data stack, and a <genexpr>
 * generator's frame that yielded (no caller); the thread state runs Worker.run.
 * 1 when the image holds them all. */
static int gen_env(walk_env *e, int v, uint64_t *mod, uint64_t *run, uint64_t *gen, uint64_t *ts)
{
	static const int32_t gen_lines[] = { 10, 10 };
	env_init(e, v);
	uint64_t genc = img_code(&e->im, "<genexpr>", "/t/demo.py", 10, gen_lines, 2);
	*mod = img_frame(&e->im, e->mod, 2, 0, 1, 0, 0);
	*run = img_frame(&e->im, e->run, 2, *mod, 0, 0, 0);
	*gen = img_frame(&e->im, genc, 1, 0, 1, 1, 0);
	*ts = img_runtime(&e->im, 4242, *run);
	return genc && *mod && *run && *gen && *ts;
}

SP_TEST(read_tstate_finds_the_sampled_generator_activation)
{
	for (int v = IMG_V311; v <= IMG_V312; v++) {
		walk_env e;
		uint64_t mod, run, gen, ts;
		REQUIRE(gen_env(&e, v, &mod, &run, &gen, &ts));
		const sp_py_layout *l = &e.im.l;
		uint64_t stack = IMG_BASE + IMG_MAX - IMG_STACK_LEN;
		uint64_t outer = stack + 64, inner = stack + 16; /* img_runtime's cframe */
		img_put64(&e.im, inner + l->cframe_current_frame, gen);
		img_put64(&e.im, inner + l->cframe_previous, outer);
		/* A stray copy of the outer pointer, nearer to it: no frame. */
		img_put64(&e.im, stack + 48, outer);
		sp_py_tstate t;
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		/* Without the copy: the live activation only. */
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_EQ(t.frame, run);
		CHECK_EQ(e.w.n_outer, 0);
		e.w.mem.stack = e.im.mem + IMG_MAX - IMG_STACK_LEN;
		e.w.mem.stack_len = IMG_STACK_LEN;
		e.w.mem.stack_start = stack;
		uint64_t tops[SP_PY_OUTER_MAX];
		uint32_t nt = 0;
		CHECK_EQ(sp_py_sample_cframe(&e.w, outer, tops, &nt), inner);
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_EQ(t.frame, gen);
		REQUIRE_EQ(e.w.n_outer, 1);
		CHECK_EQ(e.w.outer_tops[0], run);
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(tr, 0);
		REQUIRE_EQ(n, 3);
		/* 3.11: its own activation; 3.12 may have resumed it inline,
		 * so frames may be missing rootward of it. */
		uint32_t gen_flags = SP_PY_FRAME_ENTRY | (v == IMG_V312 ? SP_PY_FRAME_GAP : 0u);
		CHECK_STR(qual(&e, &f[0]), "<genexpr>");
		CHECK_EQ(f[0].flags, gen_flags);
		CHECK_STR(qual(&e, &f[1]), "Worker.run");
		CHECK_EQ(f[1].flags, 0);
		CHECK_STR(qual(&e, &f[2]), "<module>");
		CHECK_EQ(e.w.n_outer, 0); /* one walk only */
		/* Entered another activation since the sample: its cframe is
		 * below the copy and leads back into it. */
		uint64_t deeper = img_alloc(&e.im, 32);
		REQUIRE(deeper);
		img_put64(&e.im, deeper + l->cframe_current_frame, mod);
		img_put64(&e.im, deeper + l->cframe_previous, inner);
		CHECK_EQ(sp_py_sample_cframe(&e.w, deeper, tops, &nt), inner);
		REQUIRE_EQ(nt, 1);
		CHECK_EQ(tops[0], run);
		/* A chain that never reaches the copy: the live one stays. */
		img_put64(&e.im, deeper + l->cframe_previous, 0);
		CHECK_EQ(sp_py_sample_cframe(&e.w, deeper, tops, &nt), deeper);
		CHECK_EQ(nt, 0);
		/* The sampled generator still running: its caller is its own. */
		img_put64(&e.im, gen + l->frame_previous, run);
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(n, 3);
		/* A thread frame without a caller is the root: no resuming. */
		img_put64(&e.im, gen + l->frame_previous, 0);
		e.im.mem[gen - IMG_BASE + l->frame_owner] = 0;
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(n, 1);
		env_free(&e);
	}
	/* 3.10 and 3.13+ have no cframe: the live value stays. */
	walk_env e;
	env_init(&e, IMG_V313);
	uint64_t tops[SP_PY_OUTER_MAX];
	uint32_t nt = 1;
	CHECK_EQ(sp_py_sample_cframe(&e.w, 0x7f0000000000ull, tops, &nt), 0x7f0000000000ull);
	CHECK_EQ(nt, 0);
	env_free(&e);
}

/* The thread entered an activation after the sample, at a depth the
 * sample's stack copy covers: the copy shows the sample's C frames there,
 * not that cframe, so its current frame is not the sample's. Its live
 * links lead out to the sampled activation. And a sampled activation whose
 * frame was popped since keeps its place (its link is unchanged). */
SP_TEST(sample_cframe_skips_activations_entered_since_inside_the_copy)
{
	for (int v = IMG_V311; v <= IMG_V312; v++) {
		walk_env e;
		uint64_t mod, run, gen, ts;
		REQUIRE(gen_env(&e, v, &mod, &run, &gen, &ts));
		const sp_py_layout *l = &e.im.l;
		uint64_t stack = IMG_BASE + IMG_MAX - IMG_STACK_LEN;
		uint64_t fresh = stack + 512, inner = stack + 1024, outer = stack + 2048;
		img_put64(&e.im, outer + l->cframe_current_frame, run);
		img_put64(&e.im, outer + l->cframe_previous, 0);
		img_put64(&e.im, inner + l->cframe_current_frame, gen);
		img_put64(&e.im, inner + l->cframe_previous, outer);
		/* The sample's copy: C frames where the new cframe is now. */
		uint8_t *copy = malloc(IMG_STACK_LEN);
		REQUIRE(copy != NULL);
		memcpy(copy, e.im.mem + IMG_MAX - IMG_STACK_LEN, IMG_STACK_LEN);
		for (uint32_t k = 0; k < 64; k++)
			copy[512 + k] = 0x1a;
		img_put64(&e.im, fresh + l->cframe_current_frame, mod);
		img_put64(&e.im, fresh + l->cframe_previous, inner);
		e.w.mem.stack = copy;
		e.w.mem.stack_len = IMG_STACK_LEN;
		e.w.mem.stack_start = stack;
		uint64_t tops[SP_PY_OUTER_MAX];
		uint32_t nt = 0;
		CHECK_EQ(sp_py_sample_cframe(&e.w, fresh, tops, &nt), inner);
		REQUIRE_EQ(nt, 1);
		CHECK_EQ(tops[0], run);
		/* The generator's frame overwritten since: the sampled
		 * activation is still the one the thread runs. */
		e.im.mem[gen - IMG_BASE + l->frame_owner] = 0x89;
		sp_py_mem_reset(&e.w.mem);
		CHECK_EQ(sp_py_sample_cframe(&e.w, inner, tops, &nt), inner);
		CHECK_EQ(nt, 1);
		/* A link that changed since: a new activation, followed out. */
		copy[1024 + l->cframe_previous] ^= 0x40;
		sp_py_mem_reset(&e.w.mem);
		CHECK_EQ(sp_py_sample_cframe(&e.w, inner, tops, &nt), outer);
		CHECK_EQ(nt, 0);
		free(copy);
		env_free(&e);
	}
}

/* sum(evens(numbers())): two generators, each resumed from C in its own
 * activation, both yielded (callers cleared) before the read. Each
 * resumes at the frame its caller's activation ran at sample time. */
SP_TEST(read_tstate_resumes_nested_generators_at_each_activation)
{
	static const int32_t gen_lines[] = { 10, 10 };
	for (int v = IMG_V311; v <= IMG_V312; v++) {
		walk_env e;
		env_init(&e, v);
		const sp_py_layout *l = &e.im.l;
		uint64_t outc = img_code(&e.im, "evens", "/t/demo.py", 10, gen_lines, 2);
		uint64_t inc = img_code(&e.im, "numbers", "/t/demo.py", 10, gen_lines, 2);
		uint64_t mod = img_frame(&e.im, e.mod, 2, 0, 1, 0, 0);
		uint64_t run = img_frame(&e.im, e.run, 2, mod, 0, 0, 0);
		uint64_t g1 = img_frame(&e.im, outc, 1, 0, 1, 1, 0);
		uint64_t g2 = img_frame(&e.im, inc, 1, 0, 1, 1, 0);
		uint64_t ts = img_runtime(&e.im, 4242, run);
		REQUIRE(outc && inc && mod && run && g1 && g2 && ts);
		uint64_t stack = IMG_BASE + IMG_MAX - IMG_STACK_LEN;
		uint64_t outer = stack + 64, mid = stack + 32, inner = stack + 8;
		img_put64(&e.im, mid + l->cframe_current_frame, g1);
		img_put64(&e.im, mid + l->cframe_previous, outer);
		img_put64(&e.im, inner + l->cframe_current_frame, g2);
		img_put64(&e.im, inner + l->cframe_previous, mid);
		e.w.mem.stack = e.im.mem + IMG_MAX - IMG_STACK_LEN;
		e.w.mem.stack_len = IMG_STACK_LEN;
		e.w.mem.stack_start = stack;
		sp_py_tstate t;
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_EQ(t.frame, g2);
		REQUIRE_EQ(e.w.n_outer, 2);
		CHECK_EQ(e.w.outer_tops[0], g1);
		CHECK_EQ(e.w.outer_tops[1], run);
		CHECK_OK(sp_py_walk(&e.w, t.frame, f, 16, &n, &tr));
		CHECK_EQ(tr, 0);
		REQUIRE_EQ(n, 4);
		uint32_t gen_flags = SP_PY_FRAME_ENTRY | (v == IMG_V312 ? SP_PY_FRAME_GAP : 0u);
		CHECK_STR(qual(&e, &f[0]), "numbers");
		CHECK_EQ(f[0].flags, gen_flags);
		CHECK_STR(qual(&e, &f[1]), "evens");
		CHECK_EQ(f[1].flags, gen_flags);
		CHECK_STR(qual(&e, &f[2]), "Worker.run");
		CHECK_STR(qual(&e, &f[3]), "<module>");
		CHECK_EQ(e.w.lost_caller, 0);
		/* Without the copy the outer activations are unknown: the walk
		 * is cut at the generator, never shown as a whole chain. */
		e.w.mem.stack = NULL;
		CHECK_OK(sp_py_read_tstate(&e.w, ts, &t));
		CHECK_OK(sp_py_walk(&e.w, g2, f, 16, &n, &tr));
		CHECK_EQ(n, 1);
		CHECK_EQ(tr, 1);
		CHECK_EQ(e.w.lost_caller, 1);
		env_free(&e);
	}
}

SP_TEST(walk_frame_before_its_first_instruction)
{
	/* 3.11/3.12 prev_instr sits one unit before the code until the first
	 * instruction runs: offset 0, the definition's line. */
	for (int v = IMG_V311; v <= IMG_V312; v++) {
		walk_env e;
		env_init(&e, v);
		uint64_t f0 = img_frame(&e.im, e.fib, 0, 0, 1, 0, 0);
		REQUIRE(f0);
		img_put64(&e.im, f0 + e.im.l.frame_instr, e.fib + e.im.l.code_adaptive - 2);
		sp_py_frame f[4];
		uint32_t n;
		int tr;
		CHECK_OK(sp_py_walk(&e.w, f0, f, 4, &n, &tr));
		REQUIRE_EQ(n, 1);
		CHECK_EQ(f[0].offset, 0);
		CHECK_EQ(f[0].line, 2); /* co_firstlineno */
		/* Two units before is invalid. */
		img_put64(&e.im, f0 + e.im.l.frame_instr, e.fib + e.im.l.code_adaptive - 4);
		CHECK_OK(sp_py_walk(&e.w, f0, f, 4, &n, &tr));
		CHECK_EQ(n, 0);
		CHECK_EQ(tr, 1);
		env_free(&e);
	}
}

SP_TEST(walk_hides_synthetic_init_frame_313)
{
	walk_env e;
	env_init(&e, IMG_V313);
	const int32_t none[] = { 0 };
	uint64_t init = img_code(&e.im, "__init__", "__init__", 0, none, 0);
	REQUIRE(init);
	/* Its line table is empty. */
	uint64_t lt = sp_le64(e.im.mem + (init - IMG_BASE) + e.im.l.code_linetable);
	img_put64(&e.im, lt + e.im.l.var_size, 0);
	uint64_t mod = img_frame(&e.im, e.mod, 2, 0, 0, 0, 0);
	uint64_t shim = img_frame(&e.im, init, 0, mod, 0, 0, 0);
	uint64_t leaf = img_frame(&e.im, e.run, 1, shim, 0, 0, 0);
	sp_py_frame f[8];
	uint32_t n;
	int tr;
	CHECK_OK(sp_py_walk(&e.w, leaf, f, 8, &n, &tr));
	CHECK_EQ(tr, 0);
	REQUIRE_EQ(n, 2);
	CHECK_STR(qual(&e, &f[0]), "Worker.run");
	CHECK_STR(qual(&e, &f[1]), "<module>");
	env_free(&e);
}

SP_TEST(walk_stops_at_first_bad_frame)
{
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		uint64_t top = build_chain(&e, 0);
		REQUIRE(top);
		const sp_py_layout *l = &e.im.l;
		uint64_t fib1 = sp_le64(e.im.mem + (top - IMG_BASE) + l->frame_previous);
		uint64_t run = sp_le64(e.im.mem + (fib1 - IMG_BASE) + l->frame_previous);
		sp_py_frame f[16];
		uint32_t n;
		int tr;

		/* The run frame's code points at a non-code object (a str). */
		uint64_t saved = sp_le64(e.im.mem + (run - IMG_BASE) + l->frame_code);
		uint64_t s = img_str(&e.im, "not code");
		img_put64(&e.im, run + l->frame_code, s);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 2);
		CHECK_EQ(tr, 1);
		img_put64(&e.im, run + l->frame_code, saved);

		/* Instruction outside the code object. */
		if (!l->instr_is_lasti) {
			saved &= ~(uint64_t)7; /* 3.14 tags f_executable */
			img_put64(&e.im, run + l->frame_instr, saved + 4096);
			CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
			CHECK_EQ(n, 2);
			CHECK_EQ(tr, 1);
			img_put64(&e.im, run + l->frame_instr, saved + l->code_adaptive + 3);
			CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
			CHECK_EQ(n, 2); /* odd offset */
			img_put64(&e.im, run + l->frame_instr, saved + l->code_adaptive);
		} else {
			img_put32(&e.im, run + l->frame_instr, (uint32_t)-7);
			CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
			CHECK_EQ(n, 2);
			img_put32(&e.im, run + l->frame_instr, 0);
		}

		/* previous points outside the image, then at itself (a cycle). */
		img_put64(&e.im, run + l->frame_previous, 0x7ffff0000000ull);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 3);
		CHECK_EQ(tr, 1);
		img_put64(&e.im, run + l->frame_previous, run);
		sp_py_frame *big = calloc(SP_PY_MAX_DEPTH + 8, sizeof(*big));
		REQUIRE(big);
		CHECK_OK(sp_py_walk(&e.w, top, big, SP_PY_MAX_DEPTH + 8, &n, &tr));
		free(big);
		CHECK_EQ(n, SP_PY_MAX_DEPTH);
		CHECK_EQ(tr, 1);
		img_put64(&e.im, run + l->frame_previous, 1234567); /* misaligned */
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 3);
		CHECK_EQ(tr, 1);

		/* A broken string in a new code object. */
		uint64_t bad = img_code(&e.im, "bad", "/t/x.py", 1, fib_lines, 2);
		uint64_t fn = sp_le64(e.im.mem + (bad - IMG_BASE) + l->code_filename);
		img_put32(&e.im, fn + l->str_state, 0); /* not compact */
		img_put64(&e.im, top + l->frame_code, bad);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 0);
		CHECK_EQ(tr, 1);
		env_free(&e);
	}
}

/* A reader whose memory changes after a number of calls, like a target
 * that returns and calls again while it is read. */
typedef struct changing {
	img_reader r;
	uint32_t calls, change_at;
	uint64_t addr, value;
	py_img *im;
} changing;

static int changing_read(void *ctx, sp_py_iov *iov, uint32_t n, int prefix)
{
	changing *c = ctx;
	if (++c->calls == c->change_at)
		img_put64(c->im, c->addr, c->value);
	return img_read(&c->r, iov, n, prefix);
}

SP_TEST(walk_refuses_a_stack_torn_while_read)
{
	static uint8_t pages[SP_PY_PAGES * SP_PY_PAGE], verify_buf[SP_PY_MAX_LIVE * SP_PY_PAGE];
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		uint64_t top = build_chain(&e, 0);
		const sp_py_layout *l = &e.im.l;
		uint64_t fib1 = sp_le64(e.im.mem + (top - IMG_BASE) + l->frame_previous);
		changing c = { e.r, 0, 0, 0, 0, &e.im };
		e.w.mem.read = changing_read;
		e.w.mem.ctx = &c;
		e.w.mem.pages = pages;
		e.w.mem.verify = verify_buf;
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		/* Unchanged memory verifies. */
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		uint32_t calls = c.calls;
		CHECK(calls >= 2);
		/* The top frame moves to another instruction just before the
		 * check (the last call): still the same call, accepted. */
		sp_py_mem_reset(&e.w.mem);
		uint64_t ia = top + l->frame_instr;
		uint64_t old = sp_le64(e.im.mem + (ia - IMG_BASE));
		c.calls = 0;
		c.change_at = calls;
		c.addr = ia;
		c.value = l->instr_is_lasti ? (old & ~0xffffffffull) | 2 : old + 2;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		CHECK_EQ(e.w.mem.torn, 0);
		img_put64(&e.im, ia, old);
		/* A caller moves on: its callee returned, so the frames above it
		 * are another call's: refused. */
		sp_py_mem_reset(&e.w.mem);
		ia = fib1 + l->frame_instr;
		old = sp_le64(e.im.mem + (ia - IMG_BASE));
		c.calls = 0;
		c.change_at = calls;
		c.addr = ia;
		c.value = l->instr_is_lasti ? (old & ~0xffffffffull) | 0 : old - 4;
		CHECK_EQ(sp_py_walk(&e.w, top, f, 16, &n, &tr), STACKPULSE_ESTATE);
		CHECK_EQ(e.w.mem.torn, 1);
		/* A second try (loose) accepts the moved caller. */
		sp_py_mem_reset(&e.w.mem);
		img_put64(&e.im, ia, old);
		c.calls = 0;
		e.w.loose_verify = 1;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		CHECK_EQ(e.w.mem.torn, 1);
		/* A link that changes on a second try: the frames rootward of
		 * it are kept, flagged as missing their leaf side. */
		sp_py_mem_reset(&e.w.mem);
		img_put64(&e.im, ia, old);
		uint64_t la = fib1 + l->frame_previous;
		uint64_t old_link = sp_le64(e.im.mem + (la - IMG_BASE));
		c.calls = 0;
		c.change_at = calls;
		c.addr = la;
		c.value = old_link + 64;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		REQUIRE_EQ(n, 2); /* run, <module>: fib and fib1 dropped */
		CHECK(f[0].flags & SP_PY_FRAME_LEAF_GAP);
		CHECK_STR(qual(&e, &f[1]), "<module>");
		CHECK_EQ(e.w.mem.torn, 2);
		img_put64(&e.im, la, old_link);
		e.w.loose_verify = 0;
		e.w.mem.torn = 0;
		img_put64(&e.im, ia, old);
		/* Its link to its caller changes: the chain is another one now,
		 * refused. */
		sp_py_mem_reset(&e.w.mem);
		uint64_t pa = fib1 + l->frame_previous;
		uint64_t old_prev = sp_le64(e.im.mem + (pa - IMG_BASE));
		c.calls = 0;
		c.change_at = calls;
		c.addr = pa;
		c.value = old_prev + 64;
		CHECK_EQ(sp_py_walk(&e.w, top, f, 16, &n, &tr), STACKPULSE_ESTATE);
		CHECK_EQ(n, 0);
		CHECK_EQ(tr, 1);
		CHECK_EQ(e.w.mem.torn, 1);
		/* Changed back: fine again. */
		img_put64(&e.im, pa, old_prev);
		sp_py_mem_reset(&e.w.mem);
		c.change_at = 0;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		env_free(&e);
	}
}

/* 3.11+ push a callee's frame right after its caller's in the data stack.
 * A caller whose size does not put its callee there was read after the
 * stack was popped below it and pushed again: its callees are stale. */
/* A walk keeps the pages it read frames from (3.11+); fetched again in
 * one call before the next walk, they are what that walk sees: a frame
 * that changes after the fetch (a generator that yields and clears its
 * caller link) is walked as it was at the fetch. */
SP_TEST(walk_hot_pages_snapshot_the_frames)
{
	static uint8_t pages[SP_PY_PAGES * SP_PY_PAGE];
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		uint64_t top = build_chain(&e, 0);
		const sp_py_layout *l = &e.im.l;
		changing c = { e.r, 0, 0, 0, 0, &e.im };
		e.w.mem.read = changing_read;
		e.w.mem.ctx = &c;
		e.w.mem.pages = pages;
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		REQUIRE_EQ(n, 4);
		if (v == IMG_V310) {
			CHECK_EQ(e.w.nhot, 0); /* frame objects: anchored on the copy instead */
			env_free(&e);
			continue;
		}
		REQUIRE(e.w.nhot > 0 && e.w.nhot <= SP_PY_HOT);
		CHECK_EQ(e.w.hot[0], top & ~(uint64_t)(SP_PY_PAGE - 1));
		uint64_t hot[SP_PY_HOT];
		uint32_t nhot = e.w.nhot;
		memcpy(hot, e.w.hot, sizeof(hot));
		/* Fetched in one call; then the top frame loses its caller. */
		sp_py_mem_reset(&e.w.mem);
		c.calls = 0;
		sp_py_mem_fetch(&e.w.mem, hot, nhot);
		CHECK_EQ(c.calls, 1);
		uint64_t pa = top + l->frame_previous;
		uint64_t old = sp_le64(e.im.mem + (pa - IMG_BASE));
		img_put64(&e.im, pa, 0);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		CHECK_EQ(tr, 0);
		/* Without the fetch, the walk sees the cleared link. */
		sp_py_mem_reset(&e.w.mem);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK(n < 4);
		img_put64(&e.im, pa, old);
		/* More pages than one call takes, or no cache: nothing breaks. */
		uint64_t many[SP_PY_PAGES];
		for (uint32_t i = 0; i < SP_PY_PAGES; i++)
			many[i] = IMG_BASE + (uint64_t)i * SP_PY_PAGE;
		sp_py_mem_reset(&e.w.mem);
		sp_py_mem_fetch(&e.w.mem, many, SP_PY_PAGES);
		e.w.mem.pages = NULL;
		c.calls = 0;
		sp_py_mem_fetch(&e.w.mem, hot, nhot);
		CHECK_EQ(c.calls, 0);
		env_free(&e);
	}
}

SP_TEST(walk_refuses_frames_misplaced_in_the_data_stack)
{
	int tested = 0;
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		const sp_py_layout *l = &e.im.l;
		uint8_t probe[SP_PY_MAX_BLOCK] = { 0 };
		if (l->frame_owner == SP_PY_NONE) {
			CHECK_EQ(sp_py_frame_words(l, probe), 0);
			env_free(&e);
			continue;
		}
		uint64_t other =
		        img_code(&e.im, "Random.randint", "/t/random.py", 20, run_lines, 4);
		REQUIRE(other);
		/* Codes start with an unknown size: no check (3.14 keeps that). */
		CHECK_EQ(sp_py_frame_words(l, e.im.mem + (e.fib - IMG_BASE)), 0);
		img_code_words(&e.im, e.mod, 26);
		img_code_words(&e.im, e.run, 18);
		img_code_words(&e.im, e.fib, 17);
		img_code_words(&e.im, other, 21);
		if (sp_py_frame_words(l, e.im.mem + (e.fib - IMG_BASE)) != 17) {
			CHECK_EQ(l->version >> 16, 0x030e); /* only 3.14 lacks the field */
			env_free(&e);
			continue;
		}
		tested++;
		/* A data stack chunk: page-aligned mapping. */
		uint64_t a = img_alloc(&e.im, SP_PY_PAGE + 1024);
		REQUIRE(a);
		uint64_t chunk = (a + SP_PY_PAGE - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
		uint64_t mod = img_frame(&e.im, e.mod, 2, 0, 1, 0, chunk + 256);
		uint64_t run = img_frame(&e.im, e.run, 2, mod, 0, 0, mod + 26 * 8);
		uint64_t fib1 = img_frame(&e.im, e.fib, 3, run, 0, 0, run + 18 * 8);
		uint64_t top = img_frame(&e.im, e.fib, 0, fib1, 0, 0, fib1 + 17 * 8);
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		CHECK_EQ(e.w.mem.torn, 0);
		/* run's slot now holds another call (randint, 21 words): fib1
		 * was pushed by an earlier one. Refused, then on a second try
		 * cut below randint. */
		REQUIRE_EQ(img_frame(&e.im, other, 1, mod, 0, 0, run), run);
		sp_py_mem_reset(&e.w.mem);
		CHECK_EQ(sp_py_walk(&e.w, top, f, 16, &n, &tr), STACKPULSE_ESTATE);
		CHECK_EQ(n, 0);
		CHECK_EQ(e.w.mem.torn, 1);
		CHECK_EQ(e.w.mem.misplaced, 1);
		e.w.loose_verify = 1;
		sp_py_mem_reset(&e.w.mem);
		CHECK_OK(sp_py_walk(&e.w, top, f, 16, &n, &tr));
		REQUIRE_EQ(n, 2);
		CHECK_STR(qual(&e, &f[0]), "Random.randint");
		CHECK(f[0].flags & SP_PY_FRAME_LEAF_GAP);
		CHECK_STR(qual(&e, &f[1]), "<module>");
		CHECK_EQ(e.w.mem.misplaced, 2);
		e.w.loose_verify = 0;
		REQUIRE_EQ(img_frame(&e.im, e.run, 2, mod, 0, 0, run), run);
		/* A callee that opened a new chunk sits at its start, anywhere. */
		uint64_t leaf = img_frame(&e.im, e.fib, 0, fib1, 0, 0, chunk + 24);
		sp_py_mem_reset(&e.w.mem);
		CHECK_OK(sp_py_walk(&e.w, leaf, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		/* Generator frames live in their generator object: no check on
		 * either side of one. */
		uint64_t gen = img_frame(&e.im, e.fib, 3, run, 0, 1, 0);
		leaf = img_frame(&e.im, e.fib, 0, gen, 0, 0, chunk + 896);
		sp_py_mem_reset(&e.w.mem);
		CHECK_OK(sp_py_walk(&e.w, leaf, f, 16, &n, &tr));
		CHECK_EQ(n, 4);
		/* The same leaf under a data-stack caller is misplaced. */
		img_put64(&e.im, leaf + l->frame_previous, fib1);
		sp_py_mem_reset(&e.w.mem);
		CHECK_EQ(sp_py_walk(&e.w, leaf, f, 16, &n, &tr), STACKPULSE_ESTATE);
		CHECK_EQ(e.w.mem.misplaced, 3);
		env_free(&e);
	}
	CHECK_EQ(tested, 3); /* 3.11, 3.12, 3.13 */
}

SP_TEST(code_cache_notices_reused_address)
{
	walk_env e;
	env_init(&e, IMG_V312);
	uint32_t a, b, c;
	REQUIRE_OK(code_intern(&e.w, e.fib, &a));
	REQUIRE_OK(code_intern(&e.w, e.fib, &b));
	CHECK_EQ(a, b);
	/* Same address, new object: a different name pointer. */
	uint64_t s = img_str(&e.im, "other");
	img_put64(&e.im, e.fib + e.im.l.code_qualname, s);
	REQUIRE_OK(code_intern(&e.w, e.fib, &c));
	CHECK(c != a);
	CHECK_STR(sp_py_codes_get(e.w.codes, c)->qualname, "other");
	CHECK_STR(sp_py_codes_get(e.w.codes, a)->qualname, "fib");
	/* Many objects grow the table. */
	for (int i = 0; i < 300; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d", i);
		uint64_t code = img_code(&e.im, name, "/t/m.py", i + 1, fib_lines, 1);
		if (!code)
			break;
		uint32_t id;
		REQUIRE_OK(code_intern(&e.w, code, &id));
		CHECK_STR(sp_py_codes_get(e.w.codes, id)->qualname, name);
		CHECK_EQ(sp_py_codes_get(e.w.codes, id)->first_line, i + 1);
	}
	REQUIRE_OK(code_intern(&e.w, e.run, &a));
	CHECK_STR(sp_py_codes_get(e.w.codes, a)->qualname, "Worker.run");
	env_free(&e);
}

/* The code cache stays within its byte budget by evicting entries no
 * recent walk used; ids of evicted entries give NULL (never another code
 * object); entries of the current walk are pinned, so a walk that needs
 * more than the budget is refused (ELIMIT) instead of growing it. */
SP_TEST(code_cache_is_bounded_in_bytes)
{
	walk_env e;
	env_init(&e, IMG_V312);
	uint64_t shared = 0, peak = 0, budget = 4096;
	sp_py_codes_set_budget(e.w.codes, budget, &shared, &peak, 1u << 20);
	uint64_t codes[300];
	int ncodes = 0;
	for (int i = 0; i < 300; i++) {
		char name[32];
		snprintf(name, sizeof(name), "g%d", i);
		codes[i] = img_code(&e.im, name, "/t/flood.py", i + 1, fib_lines, 6);
		if (!codes[i])
			break;
		ncodes++;
	}
	REQUIRE(ncodes >= 40);
	uint32_t first = 0;
	for (int i = 0; i < ncodes; i++) {
		/* One code object per walk, each walk far past the pin window. */
		for (uint32_t k = 0; k < SP_PY_CODE_PIN_WALKS; k++)
			sp_py_codes_walk_begin(e.w.codes);
		uint32_t id;
		REQUIRE_OK(code_intern(&e.w, codes[i], &id));
		if (i == 0)
			first = id;
		char name[32];
		snprintf(name, sizeof(name), "g%d", i);
		CHECK_STR(sp_py_codes_get(e.w.codes, id)->qualname, name);
	}
	sp_py_codes_usage u;
	sp_py_codes_get_usage(e.w.codes, &u);
	printf("%d code objects: %llu bytes held, %llu evicted, peak %llu\n", ncodes,
	       (unsigned long long)u.bytes, (unsigned long long)u.evicted,
	       (unsigned long long)peak);
	CHECK(u.bytes <= budget);
	CHECK(peak <= budget);
	CHECK_EQ(shared, u.bytes);
	CHECK(u.evicted > 0);
	CHECK(codes_held(e.w.codes) < (uint32_t)ncodes);
	CHECK(sp_py_codes_get(e.w.codes, first) == NULL); /* Evicted: no other object. */
	/* Seen again: decoded again, as new for the spool writer. */
	uint32_t again;
	REQUIRE_OK(code_intern(&e.w, codes[0], &again));
	CHECK(again != first);
	CHECK_STR(sp_py_codes_get(e.w.codes, again)->qualname, "g0");
	CHECK_EQ(sp_py_codes_get(e.w.codes, again)->user, UINT32_MAX);
	/* One walk: everything it interned is pinned, so past the budget the
	 * next code object is refused and nothing of the walk is lost. */
	sp_py_codes_walk_begin(e.w.codes);
	uint32_t ids[300];
	int got = 0, refused = 0;
	for (int i = 0; i < ncodes; i++) {
		int rc = code_intern(&e.w, codes[i], &ids[got]);
		if (rc == STACKPULSE_ELIMIT) {
			refused = 1;
			break;
		}
		REQUIRE_OK(rc);
		got++;
	}
	CHECK(refused);
	CHECK(got > 10);
	for (int i = 0; i < got; i++) {
		char name[32];
		snprintf(name, sizeof(name), "g%d", i);
		const sp_py_code *c = sp_py_codes_get(e.w.codes, ids[i]);
		REQUIRE(c != NULL);
		CHECK_STR(c->qualname, name);
	}
	sp_py_codes_get_usage(e.w.codes, &u);
	CHECK(u.bytes <= budget);
	CHECK_EQ(u.refused, 1u);
	env_free(&e);
	CHECK_EQ(shared, 0u); /* Freeing a cache returns its bytes. */
}

/* The edges of the code cache and of decoding one code object: ids of no
 * entry, moving a cache between shared budgets, missing type addresses,
 * the 3.13+ cleanup shim, and code pointers that lead nowhere. */
SP_TEST(code_cache_and_intern_edges)
{
	walk_env e;
	env_init(&e, IMG_V313);
	sp_py_codes_free(NULL);
	CHECK(sp_py_codes_get(e.w.codes, 0) == NULL);
	CHECK(sp_py_codes_get(e.w.codes, 12345) == NULL);
	uint32_t a, b;
	REQUIRE_OK(code_intern(&e.w, e.fib, &a));
	CHECK(sp_py_codes_get(e.w.codes, a + 1) == NULL); /* a slot not used yet */
	CHECK_EQ(sp_py_codes_get(e.w.codes, a)->synthetic, 0);

	/* A cache moves its bytes from one shared counter to the next. */
	sp_py_codes_usage u;
	sp_py_codes_get_usage(e.w.codes, &u);
	REQUIRE(u.bytes > 0);
	uint64_t s1 = 0, p1 = 0, s2 = 100, p2 = 0;
	sp_py_codes_set_budget(e.w.codes, 0, &s1, &p1, 0);
	CHECK_EQ(s1, u.bytes);
	CHECK_EQ(p1, u.bytes);
	sp_py_codes_set_budget(e.w.codes, 0, &s2, &p2, 0);
	CHECK_EQ(s1, 0u);
	CHECK_EQ(s2, 100 + u.bytes);
	CHECK_EQ(p2, 100 + u.bytes);
	sp_py_codes_set_budget(e.w.codes, 0, NULL, NULL, 0);
	CHECK_EQ(s2, 100u);

	/* Without the str and bytes type addresses the type checks are
	 * skipped; the objects still decode. */
	env_free(&e);
	REQUIRE_OK(sp_py_codes_new(&e.w.codes));
	e.w.types.unicode = 0;
	e.w.types.bytes = 0;
	REQUIRE_OK(code_intern(&e.w, e.run, &b));
	CHECK_STR(sp_py_codes_get(e.w.codes, b)->qualname, "Worker.run");
	CHECK_STR(sp_py_codes_get(e.w.codes, b)->filename, "/t/demo.py");
	/* The code object at _Py_InitCleanup is the shim, whatever its name. */
	e.w.types.init_cleanup = e.fib;
	REQUIRE_OK(code_intern(&e.w, e.fib, &a));
	CHECK_EQ(sp_py_codes_get(e.w.codes, a)->synthetic, 1);

	/* Nowhere: a pointer no object can have (a walk does not read it),
	 * unmapped memory, and no PyCode_Type to check against. */
	CHECK(!sp_py_plausible(0x11, 8));
	CHECK_EQ(code_intern(&e.w, IMG_BASE + IMG_MAX + 4096, &a), STACKPULSE_ENOTFOUND);
	e.w.types.code = 0;
	CHECK_EQ(code_intern(&e.w, e.mod, &a), STACKPULSE_EFORMAT);
	env_free(&e);

	/* No memory for a cache. */
	sp_py_codes *c = NULL;
	sp_alloc_fail_after(0);
	int rc = sp_py_codes_new(&c);
	sp_alloc_fail_after(-1);
	CHECK_EQ(rc, -ENOMEM);
	CHECK(c == NULL);
}

SP_TEST(walk_fails_cleanly_without_memory)
{
	for (long k = 0; k < 12; k++) {
		walk_env e;
		env_init(&e, IMG_V311);
		uint64_t top = build_chain(&e, 0);
		sp_py_frame f[16];
		uint32_t n;
		int tr;
		sp_alloc_fail_after(k);
		int rc = sp_py_walk(&e.w, top, f, 16, &n, &tr);
		sp_alloc_fail_after(-1);
		CHECK(rc == 0 || rc == -ENOMEM);
		if (rc == 0)
			CHECK(n <= 4);
		env_free(&e);
	}
}

/* ---- merge ------------------------------------------------------------------------------- */

static const sp_py_range eval_r[] = { { 0x1000, 0x2000 } };

static void merged(const sp_py_merge_item *m, uint32_t n, char *out)
{
	out[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		char b[16];
		snprintf(b, sizeof(b), "%s%c%u", i ? " " : "",
		         m[i].kind == SP_PY_MERGE_NATIVE   ? 'n'
		         : m[i].kind == SP_PY_MERGE_PYTHON ? 'p'
		                                           : 'T',
		         m[i].kind == SP_PY_MERGE_TRUNCATED ? 0 : m[i].index);
		strcat(out, b);
	}
}

SP_TEST(merge_replaces_eval_activations)
{
	/* native: leaf libc, eval, C ext, eval, main; return addresses are
	 * looked up at pc-1 (0x1000 as a return address is outside). */
	const uint64_t pcs[] = { 0x9000, 0x1500, 0x8000, 0x1001, 0x7000 };
	sp_py_frame py[4] = { { 0, 0, 0, 0 },
		              { 1, SP_PY_FRAME_ENTRY, 0, 0 },
		              { 2, 0, 0, 0 },
		              { 3, SP_PY_FRAME_ENTRY, 0, 0 } };
	sp_py_merge_in in = { pcs, 5, 0, eval_r, 1, py, 4, 0 };
	sp_py_merge_item m[32];
	uint32_t n, fl;
	char s[256];
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p0 p1 n2 p2 p3 n4");
	CHECK_EQ(fl, 0);

	/* More activations than groups, Python complete: align at the root;
	 * the extra leaf activation stays native, after a marker (its frames
	 * were not read: the thread left it before the read). */
	in.npy = 2;
	py[1].flags = SP_PY_FRAME_ENTRY;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 T0 n1 n2 p0 p1 n4");
	CHECK_EQ(fl, SP_PY_MERGE_MISMATCH | SP_PY_MERGE_PY_CUT);

	/* The same sampled in the eval loop itself (its entry or exit, no
	 * frame linked yet): whole, no marker. */
	const uint64_t pcs_e[] = { 0x1200, 0x8000, 0x1001, 0x7000 };
	sp_py_merge_in in_e = { pcs_e, 4, 0, eval_r, 1, py, 2, 0 };
	CHECK_OK(sp_py_merge(&in_e, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 n1 p0 p1 n3");
	CHECK_EQ(fl, SP_PY_MERGE_MISMATCH);

	/* Two activations short, even so: cut. */
	in_e.npy = 1;
	py[0].flags = SP_PY_FRAME_ENTRY;
	const uint64_t pcs_e2[] = { 0x1200, 0x8000, 0x1001, 0x8000, 0x1001, 0x7000 };
	in_e.pcs = pcs_e2;
	in_e.npcs = 6;
	CHECK_OK(sp_py_merge(&in_e, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "T0 n0 n1 n2 n3 p0 n5");
	CHECK_EQ(fl, SP_PY_MERGE_MISMATCH | SP_PY_MERGE_PY_CUT);
	py[0].flags = 0;

	/* Python walk truncated after group 0: leaf alignment and a marker. */
	in.py_truncated = 1;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p0 p1 T0 n2 n3 n4");
	CHECK_EQ(fl, SP_PY_MERGE_PY_CUT);

	/* Walk truncated with no frames at all: marker before the first eval. */
	in.npy = 0;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 T0 n1 n2 n3 n4");

	/* No frame read, the walk not truncated, while the eval loop ran
	 * (the thread left Python before the read): marked the same. */
	in.py_truncated = 0;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 T0 n1 n2 n3 n4");
	CHECK_EQ(fl, SP_PY_MERGE_PY_CUT);
	in.py_truncated = 1;

	/* Native stack cut: remaining groups go to the root end. */
	const uint64_t pcs2[] = { 0x9000, 0x1500 };
	sp_py_merge_in in2 = { pcs2, 2, 1, eval_r, 1, py, 4, 0 };
	CHECK_OK(sp_py_merge(&in2, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p0 p1 p2 p3");
	CHECK_EQ(fl, 0);

	/* More groups than activations, both complete: leaf groups dropped. */
	const uint64_t pcs3[] = { 0x9000, 0x1500, 0x7000 };
	sp_py_merge_in in3 = { pcs3, 3, 0, eval_r, 1, py, 4, 0 };
	CHECK_OK(sp_py_merge(&in3, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p2 p3 n2");
	CHECK_EQ(fl, SP_PY_MERGE_MISMATCH);

	/* Output too small. */
	CHECK_OK(sp_py_merge(&in3, m, 2, &n, &fl));
	CHECK_EQ(n, 2);
	CHECK(fl & SP_PY_MERGE_OUT_FULL);

	/* Leaf IP exactly at a range start counts; not as a return address. */
	CHECK_EQ(sp_py_in_eval(eval_r, 1, 0x1000, 1), 1);
	CHECK_EQ(sp_py_in_eval(eval_r, 1, 0x1000, 0), 0);
	CHECK_EQ(sp_py_in_eval(eval_r, 1, 0x2000, 0), 1);
	CHECK_EQ(sp_py_in_eval(eval_r, 1, 0x2000, 1), 0);
}

/* ---- 3.10: anchoring on the stack copy ------------------------------------------------- */

static uint8_t anchor_verify[SP_PY_MAX_LIVE * SP_PY_PAGE];

/* A 3.10 stack copy in which each activation keeps its frame and code
 * pointers (as _PyEval_EvalFrameDefault spills them), 416 bytes apart. */
static void stack_words(uint8_t *stk, size_t len, const uint64_t *frames, const uint64_t *codes,
                        uint32_t n)
{
	memset(stk, 0, len);
	for (uint32_t i = 0; i < n; i++) {
		sp_put_le64(stk + 32 + 416 * i, frames[i]);
		sp_put_le64(stk + 72 + 416 * i, codes[i]);
		sp_put_le64(stk + 192 + 416 * i, frames[i]);
	}
}

SP_TEST(anchor_310_on_stack_copy_and_bridge_freed_frames)
{
	walk_env e;
	env_init(&e, IMG_V310);
	uint64_t mod = img_frame(&e.im, e.mod, 2, 0, 1, 0, 0);
	uint64_t run = img_frame(&e.im, e.run, 2, mod, 1, 0, 0);
	uint64_t fib1 = img_frame(&e.im, e.fib, 3, run, 1, 0, 0);
	uint64_t fib0 = img_frame(&e.im, e.fib, 0, fib1, 1, 0, 0);
	REQUIRE(fib0);
	uint64_t frames[4] = { fib0, fib1, run, mod }, codes[4] = { e.fib, e.fib, e.run, e.mod };
	static uint8_t stk[8192];
	stack_words(stk, sizeof(stk), frames, codes, 4);
	e.w.mem.stack = stk;
	e.w.mem.stack_len = sizeof(stk);
	e.w.mem.stack_start = 0x7ff000000000ull;
	e.w.mem.verify = anchor_verify;
	sp_py_frame f[8];
	uint32_t n;
	int tr;
	uint64_t top = 0;

	/* The thread has moved on (tstate->frame would say <module>): the
	 * copy still names the sample's leaf. */
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_EQ(top, fib0);
	CHECK_OK(sp_py_walk(&e.w, top, f, 8, &n, &tr));
	REQUIRE_EQ(n, 4);
	CHECK_EQ(tr, 0);
	CHECK_STR(qual(&e, &f[0]), "fib");
	CHECK_STR(qual(&e, &f[3]), "<module>");
	for (uint32_t i = 0; i < n; i++)
		CHECK_EQ(f[i].flags & SP_PY_FRAME_GAP, 0);

	/* fib1 was freed since (no references): fib0 -> gap -> run. */
	img_put64(&e.im, fib1, 0);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_OK(sp_py_walk(&e.w, top, f, 8, &n, &tr));
	REQUIRE_EQ(n, 3);
	CHECK_EQ(tr, 0);
	CHECK_STR(qual(&e, &f[0]), "fib");
	CHECK(f[0].flags & SP_PY_FRAME_GAP);
	CHECK_STR(qual(&e, &f[1]), "Worker.run");
	CHECK_EQ(f[1].line, 11);

	/* A frame reused by another call: its code is not the sample's. */
	img_put64(&e.im, fib1, 1);
	img_put64(&e.im, fib1 + e.im.l.frame_code, e.mod);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_OK(sp_py_walk(&e.w, top, f, 8, &n, &tr));
	REQUIRE_EQ(n, 3);
	CHECK(f[0].flags & SP_PY_FRAME_GAP);
	img_put64(&e.im, fib1 + e.im.l.frame_code, e.fib);

	/* The leaf itself was freed: the walk starts at fib1, and the freed
	 * leaf, beside its code pointer and linked to fib1, comes first as a
	 * stale frame without a line (the merge keeps it only when the
	 * native stack has an activation for it). */
	img_put64(&e.im, fib0, 0);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_EQ(top, fib1);
	CHECK_EQ(e.w.nstale, 1);
	CHECK_OK(sp_py_walk(&e.w, top, f, 8, &n, &tr));
	REQUIRE_EQ(n, 4);
	CHECK_EQ(tr, 0);
	CHECK_STR(qual(&e, &f[0]), "fib");
	CHECK_EQ(f[0].flags, SP_PY_FRAME_ENTRY | SP_PY_FRAME_STALE);
	CHECK_EQ(f[0].line, 0);
	CHECK_STR(qual(&e, &f[1]), "fib");
	CHECK_EQ(f[1].flags & (SP_PY_FRAME_GAP | SP_PY_FRAME_STALE), 0);
	CHECK_STR(qual(&e, &f[3]), "<module>");
	/* One walk only: a walk without a new anchor has no stale prefix. */
	CHECK_OK(sp_py_walk(&e.w, fib1, f, 8, &n, &tr));
	CHECK_EQ(n, 3);

	/* A freed frame that links elsewhere is not the sample's leaf. */
	img_put64(&e.im, fib0 + e.im.l.frame_previous, run);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_EQ(top, fib1);
	CHECK_EQ(e.w.nstale, 0);
	/* Nor one whose code pointer is not beside it (reused for another
	 * code object). */
	img_put64(&e.im, fib0 + e.im.l.frame_previous, fib1);
	img_put64(&e.im, fib0 + e.im.l.frame_code, e.mod);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_EQ(e.w.nstale, 0);
	img_put64(&e.im, fib0 + e.im.l.frame_code, e.fib);
	/* A stale code object that cannot be read: no stale frame at all. */
	img_put64(&e.im, e.fib + e.im.l.ob_type, 0);
	REQUIRE_OK(sp_py_anchor(&e.w, &top));
	CHECK_OK(sp_py_walk(&e.w, top, f, 8, &n, &tr));
	CHECK(n == 0 || (f[0].flags & SP_PY_FRAME_STALE) == 0);

	/* No frame in the copy: no anchor (the caller reads tstate->frame). */
	memset(stk, 0, sizeof(stk));
	CHECK_EQ(sp_py_anchor(&e.w, &top), STACKPULSE_ENOTFOUND);
	/* 3.11+ never anchors this way. */
	walk_env e2;
	env_init(&e2, IMG_V311);
	e2.w.mem.stack = stk;
	e2.w.mem.stack_len = sizeof(stk);
	e2.w.mem.verify = anchor_verify;
	CHECK_EQ(sp_py_anchor(&e2.w, &top), STACKPULSE_ENOTFOUND);
	env_free(&e2);
	env_free(&e);
}

SP_TEST(merge_keeps_stale_leaf_frames_only_when_the_counts_agree)
{
	/* native: leaf libc, eval, C, eval, main. Python: a stale leaf frame
	 * (returned since the sample) and one live frame, each its own
	 * activation (3.10). */
	const uint64_t pcs[] = { 0x9000, 0x1500, 0x8000, 0x1001, 0x7000 };
	sp_py_frame py[2] = { { 0, SP_PY_FRAME_ENTRY | SP_PY_FRAME_STALE, 0, 0 },
		              { 1, SP_PY_FRAME_ENTRY, 0, 0 } };
	sp_py_merge_in in = { pcs, 5, 0, eval_r, 1, py, 2, 0 };
	sp_py_merge_item m[32];
	uint32_t n, fl;
	char s[256];
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p0 n2 p1 n4");
	CHECK_EQ(fl, 0);

	/* One activation only: the stale frame returned before the sample
	 * (its pointer lingered in reused stack): left out, indices kept. */
	const uint64_t pcs1[] = { 0x9000, 0x8000, 0x1001, 0x7000 };
	in.pcs = pcs1;
	in.npcs = 4;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 n1 p1 n3");
	CHECK_EQ(fl, 0);

	/* Counts agree but the native stack is cut: not trusted. */
	in.pcs = pcs;
	in.npcs = 5;
	in.native_truncated = 1;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_STR(s, "n0 p1 n2 n3 n4");
	in.native_truncated = 0;

	/* A gap elsewhere in the Python stack: not trusted either. */
	py[1].flags |= SP_PY_FRAME_GAP;
	sp_py_frame py3[3] = { py[0], py[1], { 2, SP_PY_FRAME_ENTRY, 0, 0 } };
	in.py = py3;
	in.npy = 3;
	CHECK_OK(sp_py_merge(&in, m, 32, &n, &fl));
	merged(m, n, s);
	CHECK_EQ(strstr(s, "p0") == NULL, 1);
}

SP_TEST(merge_pairs_both_sides_of_a_gap)
{
	/* Four eval activations (0x1200..) with C frames between them. */
	const sp_py_range eval[1] = { { 0x1200, 0x1300 } };
	const uint64_t pcs[8] = { 0x1210, 0x5001, 0x1221, 0x5001, 0x1231, 0x5001, 0x1241, 0x6001 };
	/* Leaf fib (gap after it), then run and <module>: 3.10, one frame
	 * per activation. */
	sp_py_frame py[3] = { { 0, SP_PY_FRAME_ENTRY | SP_PY_FRAME_GAP, 0, 3 },
		              { 1, SP_PY_FRAME_ENTRY, 0, 11 },
		              { 2, SP_PY_FRAME_ENTRY, 0, 13 } };
	sp_py_merge_in in = { pcs, 8, 0, eval, 1, py, 3, 0 };
	sp_py_merge_item out[16];
	uint32_t m, flags;
	CHECK_OK(sp_py_merge(&in, out, 16, &m, &flags));
	/* py0, C, [truncated], eval (unknown), C, py1, C, py2, root */
	const uint32_t kinds[9] = { SP_PY_MERGE_PYTHON, SP_PY_MERGE_NATIVE, SP_PY_MERGE_TRUNCATED,
		                    SP_PY_MERGE_NATIVE, SP_PY_MERGE_NATIVE, SP_PY_MERGE_PYTHON,
		                    SP_PY_MERGE_NATIVE, SP_PY_MERGE_PYTHON, SP_PY_MERGE_NATIVE };
	const uint32_t index[9] = { 0, 1, 0, 2, 3, 1, 5, 2, 7 };
	REQUIRE_EQ(m, 9);
	for (uint32_t i = 0; i < m; i++) {
		CHECK_EQ(out[i].kind, kinds[i]);
		CHECK_EQ(out[i].index, index[i]);
	}
	CHECK(flags & SP_PY_MERGE_PY_CUT);
	/* A leaf gap: the groups pair from the root, a marker at the leaf. */
	py[0].flags = SP_PY_FRAME_ENTRY | SP_PY_FRAME_LEAF_GAP;
	CHECK_OK(sp_py_merge(&in, out, 16, &m, &flags));
	REQUIRE_EQ(m, 9);
	CHECK_EQ(out[0].kind, SP_PY_MERGE_TRUNCATED);
	CHECK_EQ(out[1].kind, SP_PY_MERGE_NATIVE);
	CHECK_EQ(out[1].index, 0);
	CHECK_EQ(out[3].kind, SP_PY_MERGE_PYTHON);
	CHECK_EQ(out[3].index, 0);
	CHECK_EQ(out[7].kind, SP_PY_MERGE_PYTHON);
	CHECK_EQ(out[7].index, 2);
	/* With the native stack cut, only the leaf side is kept, as cut. */
	py[0].flags = SP_PY_FRAME_ENTRY | SP_PY_FRAME_GAP;
	in.native_truncated = 1;
	CHECK_OK(sp_py_merge(&in, out, 16, &m, &flags));
	CHECK_EQ(out[0].kind, SP_PY_MERGE_PYTHON);
	CHECK_EQ(out[0].index, 0);
	for (uint32_t i = 1; i < m; i++)
		CHECK(out[i].kind != SP_PY_MERGE_PYTHON);
}

/* ---- thread names ------------------------------------------------------------------ */

static const char *const tnames[] = { "MainThread", "CustomThreadName-1", "Thread-2 (work)" };
static const uint64_t tidents[] = { 0x7f0012345740ull, 0x7f00017fe6c0ull,
	                            0x8000000000000001ull /* three digits */ };

static uint64_t names_env(walk_env *e, int v, int with_dict)
{
	env_init(e, v);
	e->w.types.dict = IMG_T_DICT;
	e->w.types.long_ = IMG_T_LONG;
	e->w.types.module = IMG_T_MOD;
	REQUIRE(img_runtime(&e->im, 4242, 0) != 0);
	uint64_t interp = sp_le64(e->im.mem + e->im.l.runtime_interpreters_head);
	REQUIRE_EQ(img_threading(&e->im, interp, 3, tnames, tidents, with_dict), 0);
	return interp;
}

SP_TEST(thread_names_every_version)
{
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		for (int with_dict = 0; with_dict < 2; with_dict++) {
			walk_env e;
			uint64_t interp = names_env(&e, v, with_dict);
			REQUIRE_EQ(e.im.l.names, 1);
			sp_py_names_cache c;
			memset(&c, 0, sizeof(c));
			sp_py_tname out[8];
			uint32_t n = 0;
			/* Twice: the second read goes by the remembered _active
			 * and _name slot. */
			for (int pass = 0; pass < 2; pass++) {
				CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
				REQUIRE_EQ(n, 3);
				for (uint32_t i = 0; i < n; i++) {
					CHECK_EQ(out[i].ident, tidents[i]);
					CHECK_STR(out[i].name, tnames[i]);
				}
			}
			CHECK(c.active != 0);
			/* At most @p max. */
			CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 2, &n));
			CHECK_EQ(n, 2);
			env_free(&e);
		}
	}
}

/* 3.14 from its debug offsets alone: the block positions of its
 * _Py_DebugOffsets (pycore_debug_offsets.h) give sys.modules, tp_flags,
 * the dict's keys and values and the int's tag and digits; the rest is
 * 3.13's. */
SP_TEST(thread_names_314_from_debug_offsets)
{
	walk_env e;
	uint64_t interp = names_env(&e, IMG_V314, 0);
	const sp_py_layout *l = &e.im.l;
	CHECK_EQ(l->version >> 16, 0x030e);
	CHECK_EQ(l->names, 1);
	CHECK_EQ(l->interp_modules, 7696);
	CHECK_EQ(l->type_flags, 168);
	CHECK_EQ(l->dict_keys, 32);
	CHECK_EQ(l->dict_values, 40);
	CHECK_EQ(l->long_size, 16);
	CHECK_EQ(l->long_digits, 24);
	CHECK_EQ(l->managed, SP_PY_MANAGED_313);
	CHECK_EQ(l->dictvalues_items, 8);
	CHECK_EQ(l->interp_tstate_serial, l->interp_threads_head - 8);
	sp_py_names_cache c;
	memset(&c, 0, sizeof(c));
	sp_py_tname out[8];
	uint32_t n = 0;
	CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
	CHECK_EQ(n, 3);
	CHECK_STR(out[1].name, "CustomThreadName-1");

	/* A names field outside its block turns names off, not the stacks. */
	uint8_t d[1024];
	uint32_t dn = img_debug_offsets(d, 14);
	sp_put_le64(d + 528 + 8, 4096); /* ma_keys past sizeof(PyDictObject) */
	sp_py_layout bad;
	CHECK_OK(sp_py_layout_from_debug(d, dn, &bad));
	CHECK_EQ(bad.names, 0);
	dn = img_debug_offsets(d, 13);
	sp_put_le64(d + 48 + 40, (uint64_t)1 << 30); /* imports_modules */
	CHECK_OK(sp_py_layout_from_debug(d, dn, &bad));
	CHECK_EQ(bad.names, 0);
	e.w.layout = &bad;
	CHECK_EQ(sp_py_thread_names(&e.w, interp, &c, out, 8, &n), STACKPULSE_EUNSUPPORTED);
	env_free(&e);
}

/* Each thread-name offset must fit the bytes read for it, or names are
 * not read (the stacks are: sp_py_layout_check does not look at them). */
SP_TEST(names_check_refuses_each_field_out_of_its_read)
{
	static const struct {
		size_t at;
		uint32_t block, width;
	} fields[] = {
		{ offsetof(sp_py_layout, module_dict), SP_PY_DICT_READ, 8 },
		{ offsetof(sp_py_layout, dict_keys), SP_PY_DICT_READ, 8 },
		{ offsetof(sp_py_layout, dict_values), SP_PY_DICT_READ, 8 },
		{ offsetof(sp_py_layout, long_size), SP_PY_LONG_READ, 8 },
		{ offsetof(sp_py_layout, long_digits), SP_PY_LONG_READ, 12 },
		{ offsetof(sp_py_layout, type_basicsize), SP_PY_MAX_BLOCK, 8 },
		{ offsetof(sp_py_layout, type_flags), SP_PY_MAX_BLOCK, 8 },
		{ offsetof(sp_py_layout, type_dictoffset), SP_PY_MAX_BLOCK, 8 },
		{ offsetof(sp_py_layout, type_cached_keys), SP_PY_MAX_BLOCK, 8 },
		{ offsetof(sp_py_layout, ob_type), SP_PY_DICT_READ, 8 },
	};
	uint8_t d[1024];
	sp_py_layout layouts[5];
	for (int v = 0; v < 3; v++)
		REQUIRE_OK(sp_py_layout_from_table((3u << 24) | ((10u + (uint32_t)v) << 16),
		                                   &layouts[v]));
	REQUIRE_OK(sp_py_layout_from_debug(d, img_debug_offsets(d, 13), &layouts[3]));
	REQUIRE_OK(sp_py_layout_from_debug(d, img_debug_offsets(d, 14), &layouts[4]));
	for (int v = 0; v < 5; v++) {
		REQUIRE_EQ(layouts[v].names, 1);
		CHECK_OK(sp_py_names_check(&layouts[v]));
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			sp_py_layout l = layouts[v];
			uint32_t *f = (uint32_t *)((uint8_t *)&l + fields[i].at);
			*f = fields[i].block - fields[i].width;
			if (sp_py_names_check(&l) != 0)
				sp_test_fail(__FILE__, __LINE__, "layout %d field %zu at the edge",
				             v, i);
			*f += 1;
			if (sp_py_names_check(&l) != STACKPULSE_EFORMAT)
				sp_test_fail(__FILE__, __LINE__,
				             "layout %d field %zu past its read", v, i);
		}
		sp_py_layout l = layouts[v];
		l.managed = 9;
		CHECK_EQ(sp_py_names_check(&l), STACKPULSE_EFORMAT);
		l = layouts[v];
		l.interp_modules = 1u << 25;
		CHECK_EQ(sp_py_names_check(&l), STACKPULSE_EFORMAT);
	}
}

/* Hostile memory: a thread whose name or ident does not decode is left
 * out, a dict too big or not a dict ends the read with what it has, and
 * nothing unknown is ever named. */
SP_TEST(thread_names_refuse_bad_memory)
{
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		uint64_t interp = names_env(&e, v, 0);
		const sp_py_layout *l = &e.im.l;
		sp_py_names_cache c;
		memset(&c, 0, sizeof(c));
		sp_py_tname out[8];
		uint32_t n = 0;
		CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
		REQUIRE_EQ(n, 3);
		/* Find the objects through the _active dict just found. */
		uint64_t active = c.active;
		uint64_t keys = sp_le64(e.im.mem + (active - IMG_BASE) + l->dict_keys);
		uint32_t head = l->dict_keys_log2 ? 32 : 40;
		uint64_t ent = keys + head + 8; /* 8 one-byte indices */
		uint64_t k1 = sp_le64(e.im.mem + (ent + 24 + 8 - IMG_BASE));
		uint64_t o2 = sp_le64(e.im.mem + (ent + 48 + 16 - IMG_BASE));
		/* Thread 1's ident is no int; thread 2 has a foreign type. */
		img_put64(&e.im, k1 + l->ob_type, IMG_T_STR);
		uint64_t cls = sp_le64(e.im.mem + (o2 - IMG_BASE) + l->ob_type);
		uint64_t flags = sp_le64(e.im.mem + (cls - IMG_BASE) + l->type_flags);
		img_put64(&e.im, cls + l->type_flags, flags & ~(uint64_t)(1u << 9));
		CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
		CHECK_EQ(n, 0); /* all three share the class */
		img_put64(&e.im, cls + l->type_flags, flags);
		CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
		CHECK_EQ(n, 2);
		CHECK_STR(out[0].name, "MainThread");
		CHECK_STR(out[1].name, "Thread-2 (work)");
		/* A keys object claiming more entries than its table holds. */
		if (l->dict_keys_log2)
			img_put64(&e.im, keys + 24, 100);
		else
			img_put64(&e.im, keys + 32, 100);
		CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
		CHECK_EQ(n, 0);
		CHECK_EQ(c.active, 0); /* looked for again next time */
		/* _active no longer a dict: found again, refused again. */
		img_put64(&e.im, active + l->ob_type, IMG_T_MOD);
		CHECK_OK(sp_py_thread_names(&e.w, interp, &c, out, 8, &n));
		CHECK_EQ(n, 0);
		/* No threading in sys.modules: nothing, no error. */
		CHECK_OK(sp_py_thread_names(&e.w, interp + 4096, &c, out, 8, &n));
		CHECK_EQ(n, 0);
		/* Without the type addresses, names are not read. */
		e.w.types.dict = 0;
		CHECK_EQ(sp_py_thread_names(&e.w, interp, &c, out, 8, &n), STACKPULSE_EUNSUPPORTED);
		env_free(&e);
	}
}

/* The tids and idents of thread states in one batched read, 3.10 through
 * glibc's struct pthread. */
SP_TEST(read_tids_batched)
{
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		walk_env e;
		env_init(&e, v);
		const sp_py_layout *l = &e.im.l;
		uint64_t ts[20];
		for (int i = 0; i < 20; i++) {
			ts[i] = img_alloc(&e.im, l->tstate_read);
			REQUIRE(ts[i]);
			/* A struct pthread whose tid (at 720) is all there is. */
			uint64_t pt = img_alloc(&e.im, 8);
			REQUIRE(pt);
			img_put64(&e.im, ts[i] + l->tstate_thread_id, pt - 720);
			img_put32(&e.im, pt, (uint32_t)(5000 + i));
			if (l->tstate_native_thread_id != SP_PY_NONE)
				img_put64(&e.im, ts[i] + l->tstate_native_thread_id,
				          i == 3 ? 0 : (uint64_t)(5000 + i));
		}
		ts[7] = 12; /* not a pointer */
		e.w.pthread_tid = 720;
		int64_t tids[20];
		uint64_t idents[20];
		CHECK_OK(sp_py_read_tids(&e.w, ts, 20, tids, idents));
		for (int i = 0; i < 20; i++) {
			int64_t want = i == 7 || (i == 3 && v != IMG_V310) ? -1 : 5000 + i;
			CHECK_EQ(tids[i], want);
		}
		CHECK_EQ(idents[7], 0);
		env_free(&e);
	}
}
