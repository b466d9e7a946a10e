/* Per-version CPython layouts: one table row for each of 3.10-3.12 and the
 * _Py_DebugOffsets parser for 3.13+. The table values come from each version's
 * Include/internal/pycore_{runtime,interp,frame,code}.h and
 * Include/cpython/{pystate,code,frameobject,unicodeobject}.h, and were checked
 * with offsetof() against the installed headers (see docs/python.md). */
#include "python/layout.h"

#include <stdio.h>
#include <string.h>

#include "common/bytes.h"
#include "common/error.h"

#define PY_VER(maj, min) ((uint32_t)(((maj) << 24) | ((min) << 16)))

/* One row per minor version. Fields a version lacks are SP_PY_NONE. */
/* clang-format off */
static const sp_py_layout tables[] = {
	{
	    /* 3.10: PyFrameObject chain; one eval activation per frame. */
	    .version = PY_VER(3, 10),
	    .runtime_interpreters_head = 32, .interp_next = 0,
	    .interp_threads_head = 8, /* tstate_head */
	    .interp_tstate_serial = 3448,
	    .tstate_read = 184, .tstate_next = 8, .tstate_thread_id = 176,
	    .tstate_native_thread_id = SP_PY_NONE, .tstate_frame = 24,
	    .cframe_current_frame = SP_PY_NONE, .cframe_previous = SP_PY_NONE,
	    .frame_read = 104, .frame_type = 8, .frame_previous = 24 /* f_back */,
	    .frame_code = 32, .frame_instr = 96 /* f_lasti, in code units */,
	    .frame_owner = SP_PY_NONE, .frame_is_entry = SP_PY_NONE, .frame_gen = 88,
	    .instr_is_lasti = 1, .owner_first_c = 0xff,
	    .code_read = 128, .code_firstlineno = 40, .code_filename = 104, .code_name = 112,
	    .code_qualname = SP_PY_NONE, .code_linetable = 120, .code_adaptive = SP_PY_NONE,
	    .code_framesize = SP_PY_NONE, .code_stacksize = SP_PY_NONE,
	    .code_nlocalsplus = SP_PY_NONE,
	    .linetable = SP_PY_LINETABLE_310,
	    .ob_type = 8, .var_size = 16, .bytes_data = 32, .str_length = 16, .str_state = 32,
	    .str_ascii = 48, .str_compact = 72,
	    .names = 1, .interp_modules = 856, .module_dict = 16, .dict_keys = 32,
	    .dict_values = 40, .dictvalues_items = 0, .dict_keys_log2 = 0,
	    .managed = SP_PY_MANAGED_NONE, .long_tagged = 0, .long_size = 16, .long_digits = 24,
	    .type_basicsize = 32, .type_flags = 168, .type_dictoffset = 288,
	    .type_cached_keys = 872,
	},
	{
	    .version = PY_VER(3, 11),
	    .runtime_interpreters_head = 40, .interp_next = 0, .interp_threads_head = 16,
	    .interp_tstate_serial = 8,
	    .tstate_read = 168, .tstate_next = 8, .tstate_thread_id = 152,
	    .tstate_native_thread_id = 160, .tstate_frame = 56 /* cframe */,
	    .cframe_current_frame = 8, .cframe_previous = 16,
	    .frame_read = 72, .frame_type = SP_PY_NONE, .frame_previous = 48, .frame_code = 32,
	    .frame_instr = 56 /* prev_instr */, .frame_owner = 69, .frame_is_entry = 68,
	    .frame_gen = SP_PY_NONE, .instr_is_prev = 1, .owner_first_c = 0xff,
	    .code_read = 144, .code_firstlineno = 72, .code_filename = 112, .code_name = 120,
	    .code_qualname = 128, .code_linetable = 136, .code_adaptive = 184,
	    .code_framesize = SP_PY_NONE, .code_stacksize = 68, .code_nlocalsplus = 76,
	    .linetable = SP_PY_LINETABLE_311,
	    .ob_type = 8, .var_size = 16, .bytes_data = 32, .str_length = 16, .str_state = 32,
	    .str_ascii = 48, .str_compact = 72,
	    .names = 1, .interp_modules = 888, .module_dict = 16, .dict_keys = 32,
	    .dict_values = 40, .dictvalues_items = 0, .dict_keys_log2 = 1,
	    .managed = SP_PY_MANAGED_311, .long_tagged = 0, .long_size = 16, .long_digits = 24,
	    .type_basicsize = 32, .type_flags = 168, .type_dictoffset = 288,
	    .type_cached_keys = 872,
	},
	{
	    .version = PY_VER(3, 12),
	    .runtime_interpreters_head = 40, .interp_next = 0, .interp_threads_head = 72,
	    .interp_tstate_serial = 64,
	    .tstate_read = 152, .tstate_next = 8, .tstate_thread_id = 136,
	    .tstate_native_thread_id = 144, .tstate_frame = 56 /* cframe */,
	    .cframe_current_frame = 0, .cframe_previous = 8,
	    .frame_read = 72, .frame_type = SP_PY_NONE, .frame_previous = 8, .frame_code = 0,
	    .frame_instr = 56 /* prev_instr */, .frame_owner = 70,
	    .frame_is_entry = SP_PY_NONE, .frame_gen = SP_PY_NONE, .instr_is_prev = 1,
	    .owner_first_c = 3, /* FRAME_OWNED_BY_CSTACK: the <shim> entry frame */
	    .code_read = 144, .code_firstlineno = 68, .code_filename = 112, .code_name = 120,
	    .code_qualname = 128, .code_linetable = 136, .code_adaptive = 192,
	    .code_framesize = 76, .code_stacksize = SP_PY_NONE, .code_nlocalsplus = SP_PY_NONE,
	    .linetable = SP_PY_LINETABLE_311,
	    .ob_type = 8, .var_size = 16, .bytes_data = 32, .str_length = 16, .str_state = 32,
	    .str_ascii = 40, .str_compact = 56,
	    .names = 1, .interp_modules = 944 /* imports.modules */, .module_dict = 16,
	    .dict_keys = 32, .dict_values = 40, .dictvalues_items = 0, .dict_keys_log2 = 1,
	    .managed = SP_PY_MANAGED_312, .long_tagged = 1, .long_size = 16, .long_digits = 24,
	    .type_basicsize = 32, .type_flags = 168, .type_dictoffset = 288,
	    .type_cached_keys = 880,
	},
};
/* clang-format on */

int sp_py_unsupported(const char *where, uint32_t hexversion)
{
	char ver[32];
	if (hexversion)
		snprintf(ver, sizeof(ver), "%u.%u", hexversion >> 24, (hexversion >> 16) & 0xff);
	else
		snprintf(ver, sizeof(ver), "of unknown version");
	return sp_error(STACKPULSE_EUNSUPPORTED,
	                "%s%sCPython %s is not supported (stackpulse reads CPython 3.%d to 3.%d)",
	                where ? where : "", where ? ": " : "", ver, SP_PY_MIN_MINOR,
	                SP_PY_MAX_MINOR);
}

int sp_py_layout_from_table(uint32_t hexversion, sp_py_layout *l)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if ((tables[i].version >> 16) == (hexversion >> 16)) {
			*l = tables[i];
			l->version = hexversion;
			return sp_py_layout_check(l);
		}
	}
	return sp_error(STACKPULSE_EUNSUPPORTED, "python %u.%u has no offset table",
	                hexversion >> 24, (hexversion >> 16) & 0xff);
}

int sp_py_has_debug_cookie(const uint8_t *buf, size_t len)
{
	return len >= 24 && memcmp(buf, "xdebugpy", 8) == 0;
}

static int fits(uint32_t off, uint32_t width, uint32_t block)
{
	return off != SP_PY_NONE && off <= block && block - off >= width;
}

/* 1 when the thread-name fields fit their reads. */
static int names_fit(const sp_py_layout *l)
{
	return !(!fits(l->module_dict, 8, SP_PY_DICT_READ) ||
	         !fits(l->dict_keys, 8, SP_PY_DICT_READ) ||
	         !fits(l->dict_values, 8, SP_PY_DICT_READ) || l->dictvalues_items > 64 ||
	         !fits(l->long_size, 8, SP_PY_LONG_READ) ||
	         !fits(l->long_digits, 12, SP_PY_LONG_READ) ||
	         !fits(l->type_basicsize, 8, SP_PY_MAX_BLOCK) ||
	         !fits(l->type_flags, 8, SP_PY_MAX_BLOCK) ||
	         !fits(l->type_dictoffset, 8, SP_PY_MAX_BLOCK) ||
	         !fits(l->type_cached_keys, 8, SP_PY_MAX_BLOCK) || l->managed > SP_PY_MANAGED_313 ||
	         l->dict_keys_log2 > 1 || l->long_tagged > 1 || l->interp_modules > (1u << 24) ||
	         !fits(l->ob_type, 8, SP_PY_DICT_READ));
}

/* Byte positions of the fields we use inside _Py_DebugOffsets, per minor.
 * Each block starts with its struct's size. */
typedef struct dbg_map {
	uint32_t minor;
	uint32_t rt_size, rt_interp_head;
	uint32_t is_size, is_next, is_threads_head;
	uint32_t ts_size, ts_next, ts_current_frame, ts_thread_id, ts_native_thread_id;
	uint32_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
	uint32_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
	        co_adaptive;
	uint32_t ob_size, ob_type;
	uint32_t is_imports_modules, tp_size, tp_flags, di_size, di_keys, di_values, lo_size,
	        lo_tag, lo_digit;
	uint32_t by_size, by_ob_size, by_sval;
	uint32_t un_size, un_state, un_length, un_ascii_size;
	uint32_t end; /* Bytes of the struct we need. */
} dbg_map;

/* 3.13: Include/internal/pycore_runtime.h. 3.14: pycore_debug_offsets.h,
 * which adds threads_main, code_object_generation, tlbc_generation,
 * stackpointer, tlbc_index, co_tlbc and a set_object block. The is_, tp_,
 * di_ and lo_ fields are the interpreter's imports_modules and the type,
 * dict and long blocks, for thread names. */
/* clang-format off */
static const dbg_map dbg_maps[] = {
	{
	    .minor = 13,
	    .rt_size = 24, .rt_interp_head = 40,
	    .is_size = 48, .is_next = 64, .is_threads_head = 72,
	    .ts_size = 152, .ts_next = 168, .ts_current_frame = 184, .ts_thread_id = 192, .ts_native_thread_id = 200,
	    .fr_size = 224, .fr_previous = 232, .fr_executable = 240, .fr_instr_ptr = 248, .fr_owner = 264,
	    .co_size = 272, .co_filename = 280, .co_name = 288, .co_qualname = 296, .co_linetable = 304, .co_firstlineno = 312, .co_adaptive = 344,
	    .ob_size = 352, .ob_type = 360,
	    .is_imports_modules = 88, .tp_size = 368, .tp_flags = 392, .di_size = 448, .di_keys = 456,
	    .di_values = 464, .lo_size = 488, .lo_tag = 496, .lo_digit = 504,
	    .by_size = 512, .by_ob_size = 520, .by_sval = 528,
	    .un_size = 536, .un_state = 544, .un_length = 552, .un_ascii_size = 560,
	    .end = 568,
	},
	{
	    .minor = 14,
	    .rt_size = 24, .rt_interp_head = 40,
	    .is_size = 48, .is_next = 64, .is_threads_head = 72,
	    .ts_size = 176, .ts_next = 192, .ts_current_frame = 208, .ts_thread_id = 216, .ts_native_thread_id = 224,
	    .fr_size = 248, .fr_previous = 256, .fr_executable = 264, .fr_instr_ptr = 272, .fr_owner = 288,
	    .co_size = 312, .co_filename = 320, .co_name = 328, .co_qualname = 336, .co_linetable = 344, .co_firstlineno = 352, .co_adaptive = 384,
	    .ob_size = 400, .ob_type = 408,
	    .is_imports_modules = 96, .tp_size = 416, .tp_flags = 440, .di_size = 528, .di_keys = 536,
	    .di_values = 544, .lo_size = 568, .lo_tag = 576, .lo_digit = 584,
	    .by_size = 592, .by_ob_size = 600, .by_sval = 608,
	    .un_size = 616, .un_state = 624, .un_length = 632, .un_ascii_size = 640,
	    .end = 648,
	},
};
/* clang-format on */

static uint64_t rd(const uint8_t *buf, uint32_t pos)
{
	return sp_le64(buf + pos);
}

/* field() without an error: 1 when the field does not fit. */
static int quiet_field(const uint8_t *buf, uint32_t size_pos, uint32_t pos, uint32_t width,
                       uint64_t limit, uint32_t *out)
{
	uint64_t size = rd(buf, size_pos), v = rd(buf, pos);
	if (size > limit || v > size || size - v < width)
		return 1;
	*out = (uint32_t)v;
	return 0;
}

/* Reads field @p pos of a block whose size sits at @p size_pos; the field
 * must leave @p width bytes inside the block. */
static int field(const uint8_t *buf, uint32_t size_pos, uint32_t pos, uint32_t width,
                 uint64_t limit, uint32_t *out, const char *what)
{
	uint64_t size = rd(buf, size_pos), v = rd(buf, pos);
	if (size > limit || v > size || size - v < width)
		return sp_error(STACKPULSE_EFORMAT,
		                "debug offsets: %s = %llu outside its block of %llu bytes", what,
		                (unsigned long long)v, (unsigned long long)size);
	*out = (uint32_t)v;
	return 0;
}

/* The thread-name fields of a 3.13+ layout: what the debug offsets give
 * (sys.modules, ma_keys and ma_values, tp_flags, lv_tag and ob_digit),
 * the rest as 3.13's and 3.14's headers have it (pycore_dict.h,
 * pycore_object.h, cpython/object.h: the same in both). A value that does
 * not check out leaves names off; stacks are read all the same. */
static void names_from_debug(const uint8_t *buf, const dbg_map *m, sp_py_layout *l)
{
	const uint64_t big = 1u << 24;
	l->names = 0;
	if (quiet_field(buf, m->is_size, m->is_imports_modules, 8, big, &l->interp_modules) ||
	    quiet_field(buf, m->tp_size, m->tp_flags, 8, SP_PY_MAX_BLOCK, &l->type_flags) ||
	    quiet_field(buf, m->di_size, m->di_keys, 8, SP_PY_DICT_READ, &l->dict_keys) ||
	    quiet_field(buf, m->di_size, m->di_values, 8, SP_PY_DICT_READ, &l->dict_values) ||
	    quiet_field(buf, m->lo_size, m->lo_tag, 8, SP_PY_LONG_READ, &l->long_size) ||
	    quiet_field(buf, m->lo_size, m->lo_digit, 4, SP_PY_LONG_READ, &l->long_digits))
		return;
	l->module_dict = 16;
	l->dictvalues_items = 8;
	l->dict_keys_log2 = 1;
	l->managed = SP_PY_MANAGED_313;
	l->long_tagged = 1;
	l->type_basicsize = 32;
	l->type_dictoffset = 288;
	l->type_cached_keys = 880;
	/* tp_flags sits among the fixed slots, before tp_dictoffset. */
	l->names = l->type_flags < l->type_dictoffset && names_fit(l);
}

int sp_py_layout_from_debug(const uint8_t *buf, size_t len, sp_py_layout *l)
{
	memset(l, 0, sizeof(*l));
	if (!sp_py_has_debug_cookie(buf, len))
		return sp_error(STACKPULSE_EFORMAT, "no _Py_DebugOffsets cookie");
	uint64_t version = sp_le64(buf + 8), free_threaded = sp_le64(buf + 16);
	uint32_t major = (uint32_t)(version >> 24) & 0xff, minor = (uint32_t)(version >> 16) & 0xff;
	if (major != 3 || minor < 13 || version > 0xffffffffu)
		return sp_py_unsupported("debug offsets", (uint32_t)version);
	if (free_threaded != 0)
		return sp_error(STACKPULSE_EUNSUPPORTED, "free-threaded CPython is not supported");
	const dbg_map *m = &dbg_maps[sizeof(dbg_maps) / sizeof(dbg_maps[0]) - 1];
	for (size_t i = 0; i < sizeof(dbg_maps) / sizeof(dbg_maps[0]); i++)
		if (dbg_maps[i].minor == minor)
			m = &dbg_maps[i];
	if (len < m->end)
		return sp_error(STACKPULSE_ETRUNCATED, "debug offsets: %zu of %u bytes", len,
		                m->end);

	memset(l, 0, sizeof(*l));
	l->version = (uint32_t)version;
	const uint64_t big = 1u << 24; /* Runtime and interpreter are large structs. */
	int rc = 0;
	if ((rc = field(buf, m->rt_size, m->rt_interp_head, 8, big, &l->runtime_interpreters_head,
	                "runtime.interpreters_head")) ||
	    (rc = field(buf, m->is_size, m->is_next, 8, big, &l->interp_next, "interp.next")) ||
	    (rc = field(buf, m->is_size, m->is_threads_head, 8, big, &l->interp_threads_head,
	                "interp.threads_head")) ||
	    (rc = field(buf, m->ts_size, m->ts_next, 8, big, &l->tstate_next, "tstate.next")) ||
	    (rc = field(buf, m->ts_size, m->ts_current_frame, 8, big, &l->tstate_frame,
	                "tstate.current_frame")) ||
	    (rc = field(buf, m->ts_size, m->ts_thread_id, 8, big, &l->tstate_thread_id,
	                "tstate.thread_id")) ||
	    (rc = field(buf, m->ts_size, m->ts_native_thread_id, 8, big,
	                &l->tstate_native_thread_id, "tstate.native_thread_id")) ||
	    (rc = field(buf, m->fr_size, m->fr_previous, 8, SP_PY_MAX_BLOCK, &l->frame_previous,
	                "frame.previous")) ||
	    (rc = field(buf, m->fr_size, m->fr_executable, 8, SP_PY_MAX_BLOCK, &l->frame_code,
	                "frame.executable")) ||
	    (rc = field(buf, m->fr_size, m->fr_instr_ptr, 8, SP_PY_MAX_BLOCK, &l->frame_instr,
	                "frame.instr_ptr")) ||
	    (rc = field(buf, m->fr_size, m->fr_owner, 1, SP_PY_MAX_BLOCK, &l->frame_owner,
	                "frame.owner")) ||
	    (rc = field(buf, m->co_size, m->co_filename, 8, SP_PY_MAX_BLOCK, &l->code_filename,
	                "code.filename")) ||
	    (rc = field(buf, m->co_size, m->co_name, 8, SP_PY_MAX_BLOCK, &l->code_name,
	                "code.name")) ||
	    (rc = field(buf, m->co_size, m->co_qualname, 8, SP_PY_MAX_BLOCK, &l->code_qualname,
	                "code.qualname")) ||
	    (rc = field(buf, m->co_size, m->co_linetable, 8, SP_PY_MAX_BLOCK, &l->code_linetable,
	                "code.linetable")) ||
	    (rc = field(buf, m->co_size, m->co_firstlineno, 4, SP_PY_MAX_BLOCK,
	                &l->code_firstlineno, "code.firstlineno")) ||
	    (rc = field(buf, m->co_size, m->co_adaptive, 1, SP_PY_MAX_BLOCK, &l->code_adaptive,
	                "code.co_code_adaptive")) ||
	    (rc = field(buf, m->ob_size, m->ob_type, 8, 64, &l->ob_type, "object.ob_type")) ||
	    (rc = field(buf, m->by_size, m->by_ob_size, 8, 256, &l->var_size, "bytes.ob_size")) ||
	    (rc = field(buf, m->by_size, m->by_sval, 1, 256, &l->bytes_data, "bytes.ob_sval")) ||
	    (rc = field(buf, m->un_size, m->un_state, 4, 256, &l->str_state, "str.state")) ||
	    (rc = field(buf, m->un_size, m->un_length, 8, 256, &l->str_length, "str.length")) ||
	    (rc = field(buf, m->un_size, m->un_ascii_size, 0, 256, &l->str_ascii,
	                "str.asciiobject_size")))
		return rc;

	/* threads.next_unique_id comes right before threads.head (3.13 and
	 * 3.14 pycore_interp.h, struct pythreads). */
	if (l->interp_threads_head < 8)
		return sp_error(STACKPULSE_EFORMAT, "debug offsets: threads.head at %u",
		                l->interp_threads_head);
	l->interp_tstate_serial = l->interp_threads_head - 8;

	/* The thread-state fields we read must fit one bounded block. */
	uint32_t ts_end = l->tstate_next;
	if (l->tstate_frame > ts_end)
		ts_end = l->tstate_frame;
	if (l->tstate_thread_id > ts_end)
		ts_end = l->tstate_thread_id;
	if (l->tstate_native_thread_id > ts_end)
		ts_end = l->tstate_native_thread_id;
	l->tstate_read = ts_end + 8;
	uint32_t fr_end = l->frame_previous;
	if (l->frame_code > fr_end)
		fr_end = l->frame_code;
	if (l->frame_instr > fr_end)
		fr_end = l->frame_instr;
	l->frame_read = (fr_end + 8 > l->frame_owner + 1 ? fr_end + 8 : l->frame_owner + 1);
	l->frame_read = (l->frame_read + 7u) & ~7u;
	uint32_t co_end = l->code_filename;
	const uint32_t co_fields[] = { l->code_name, l->code_qualname, l->code_linetable };
	for (size_t i = 0; i < 3; i++)
		if (co_fields[i] > co_end)
			co_end = co_fields[i];
	co_end += 8;
	/* co_framesize follows co_firstlineno and co_nlocalsplus in 3.13
	 * (measured); later minors are not assumed to keep it there. */
	l->code_framesize = minor == 13 ? l->code_firstlineno + 8 : SP_PY_NONE;
	l->code_stacksize = SP_PY_NONE;
	l->code_nlocalsplus = SP_PY_NONE;
	uint32_t co_last =
	        l->code_framesize != SP_PY_NONE ? l->code_framesize : l->code_firstlineno;
	if (co_last + 4 > co_end)
		co_end = co_last + 4;
	l->code_read = (co_end + 7u) & ~7u;

	l->frame_type = SP_PY_NONE;
	l->frame_is_entry = SP_PY_NONE;
	l->frame_gen = SP_PY_NONE;
	l->cframe_current_frame = SP_PY_NONE;
	l->cframe_previous = SP_PY_NONE;
	/* 3.13: owner 3 is the C-stack entry frame. 3.14+: 3 is the interpreter's
	 * base frame and 4 the C-stack entry frame. */
	l->owner_first_c = 3;
	l->code_tagged = minor >= 14;
	l->linetable = SP_PY_LINETABLE_311;
	/* PyCompactUnicodeObject adds utf8_length and utf8 (3.12+). */
	l->str_compact = l->str_ascii + 16;
	if ((rc = sp_py_layout_check(l)) != 0)
		return rc;
	names_from_debug(buf, m, l);
	return 0;
}

uint32_t sp_py_frame_words(const sp_py_layout *l, const uint8_t *hdr)
{
	uint64_t words;
	if (l->code_framesize != SP_PY_NONE)
		words = sp_le32(hdr + l->code_framesize);
	else if (l->code_stacksize != SP_PY_NONE && l->code_nlocalsplus != SP_PY_NONE)
		words = (uint64_t)sp_le32(hdr + l->code_stacksize) +
		        sp_le32(hdr + l->code_nlocalsplus) + SP_PY_FRAME_SPECIALS;
	else
		return 0;
	/* CPython caps a code object's stack and locals far below this. */
	return words >= SP_PY_FRAME_SPECIALS && words < (1u << 20) ? (uint32_t)words : 0;
}

int sp_py_names_check(const sp_py_layout *l)
{
	if (!names_fit(l))
		return sp_error(STACKPULSE_EFORMAT,
		                "python layout: inconsistent thread-name offsets");
	return 0;
}

int sp_py_layout_check(const sp_py_layout *l)
{
	const char *bad = NULL;
	if (l->tstate_read == 0 || l->tstate_read > SP_PY_MAX_BLOCK || l->frame_read == 0 ||
	    l->frame_read > SP_PY_MAX_BLOCK || l->code_read == 0 || l->code_read > SP_PY_MAX_BLOCK)
		bad = "read size";
	else if (!fits(l->tstate_next, 8, l->tstate_read) ||
	         !fits(l->tstate_frame, 8, l->tstate_read) ||
	         !fits(l->tstate_thread_id, 8, l->tstate_read) ||
	         (l->tstate_native_thread_id != SP_PY_NONE &&
	          !fits(l->tstate_native_thread_id, 4, l->tstate_read)))
		bad = "thread state";
	else if (!fits(l->frame_previous, 8, l->frame_read) ||
	         !fits(l->frame_code, 8, l->frame_read) ||
	         !fits(l->frame_instr, l->instr_is_lasti ? 4 : 8, l->frame_read) ||
	         (l->frame_owner != SP_PY_NONE && !fits(l->frame_owner, 1, l->frame_read)) ||
	         (l->frame_is_entry != SP_PY_NONE && !fits(l->frame_is_entry, 1, l->frame_read)) ||
	         (l->frame_gen != SP_PY_NONE && !fits(l->frame_gen, 8, l->frame_read)) ||
	         (l->frame_type != SP_PY_NONE && !fits(l->frame_type, 8, l->frame_read)))
		bad = "frame";
	else if (!fits(l->code_filename, 8, l->code_read) || !fits(l->code_name, 8, l->code_read) ||
	         (l->code_qualname != SP_PY_NONE && !fits(l->code_qualname, 8, l->code_read)) ||
	         !fits(l->code_linetable, 8, l->code_read) ||
	         !fits(l->code_firstlineno, 4, l->code_read) ||
	         (l->code_framesize != SP_PY_NONE && !fits(l->code_framesize, 4, l->code_read)) ||
	         (l->code_stacksize != SP_PY_NONE && !fits(l->code_stacksize, 4, l->code_read)) ||
	         (l->code_nlocalsplus != SP_PY_NONE &&
	          !fits(l->code_nlocalsplus, 4, l->code_read)) ||
	         !fits(l->ob_type, 8, l->code_read) || !fits(l->var_size, 8, l->code_read) ||
	         (l->code_adaptive != SP_PY_NONE && l->code_adaptive > SP_PY_MAX_BLOCK))
		bad = "code object";
	else if (l->str_ascii < l->str_state + 4 || l->str_ascii < l->str_length + 8 ||
	         l->str_ascii > 256 || l->str_compact < l->str_ascii || l->str_compact > 256 ||
	         l->bytes_data > 256 || l->bytes_data < l->var_size + 8)
		bad = "str/bytes";
	else if (l->linetable != SP_PY_LINETABLE_310 && l->linetable != SP_PY_LINETABLE_311)
		bad = "line table format";
	if (bad)
		return sp_error(STACKPULSE_EFORMAT, "python layout: inconsistent %s offsets", bad);
	return 0;
}
