/* Where CPython keeps what a stack walker needs, per minor version.
 * 3.10-3.12: tables written from each version's Include/internal headers.
 * 3.13+: parsed from the _Py_DebugOffsets block at the start of _PyRuntime,
 * with one small layout of that block per minor (it changes between minors).
 * Pure: no syscalls. Offsets are for 64-bit little-endian targets. */
#ifndef SP_PYTHON_LAYOUT_H
#define SP_PYTHON_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define SP_PY_NONE UINT32_MAX /* Field absent in this version. */

/* Largest object prefix ever read in one go; every offset + width used from
 * a block must fit in it, which bounds each read. */
#define SP_PY_MAX_BLOCK 1024u

/* Line table formats. */
enum sp_py_linetable {
	SP_PY_LINETABLE_310 = 1, /* (sdelta, ldelta) byte pairs (3.10). */
	SP_PY_LINETABLE_311 = 2, /* Objects/locations.md entries (3.11+). */
};

typedef struct sp_py_layout {
	uint32_t version; /* PY_VERSION_HEX; at least major.minor are set. */

	/* _PyRuntimeState and PyInterpreterState. */
	uint32_t runtime_interpreters_head;
	uint32_t interp_next;
	uint32_t interp_threads_head;
	/* threads.next_unique_id (3.10 tstate_next_unique_id): bumped for each
	 * thread state made, so a new one is seen even where the allocator
	 * put it at a freed one's address (the list head reads the same). */
	uint32_t interp_tstate_serial;

	/* PyThreadState. */
	uint32_t tstate_read; /* Bytes read per thread state. */
	uint32_t tstate_next;
	uint32_t tstate_thread_id;        /* pthread_t. */
	uint32_t tstate_native_thread_id; /* gettid(); SP_PY_NONE on 3.10. */
	uint32_t tstate_frame;            /* 3.10 frame, 3.11/3.12 cframe, 3.13+ current_frame. */
	uint32_t cframe_current_frame;    /* SP_PY_NONE: tstate_frame is the frame. */
	uint32_t cframe_previous;         /* The _PyCFrame it replaced (3.11/3.12). */

	/* Frames: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+). */
	uint32_t frame_read;     /* Bytes read per frame. */
	uint32_t frame_type;     /* ob_type to check (3.10), else SP_PY_NONE. */
	uint32_t frame_previous; /* f_back / previous. */
	uint32_t frame_code;     /* f_code / f_executable. */
	uint32_t frame_instr;    /* f_lasti (int, code units) or an instruction pointer. */
	uint32_t frame_owner;    /* char owner; SP_PY_NONE on 3.10. */
	uint32_t frame_is_entry; /* 3.11 is_entry; else SP_PY_NONE. */
	uint32_t frame_gen;      /* 3.10 f_gen (its generator, or NULL); else
	                          * SP_PY_NONE. */
	uint8_t instr_is_lasti;  /* 1: frame_instr is 3.10's int f_lasti. */
	uint8_t instr_is_prev;   /* 1: 3.11/3.12 prev_instr (may sit one unit before code). */
	uint8_t code_tagged;     /* 1: f_executable is a tagged _PyStackRef (3.14+). */
	uint8_t owner_first_c;   /* Owners >= this are not Python frames (shims,
	                          * base frames); 0xff when none exist. */

	/* PyCodeObject. */
	uint32_t code_read; /* Bytes read per code object header. */
	uint32_t code_firstlineno;
	uint32_t code_filename;
	uint32_t code_name;
	uint32_t code_qualname; /* SP_PY_NONE on 3.10 (co_name is used). */
	uint32_t code_linetable;
	uint32_t code_adaptive; /* Start of the bytecode; SP_PY_NONE on 3.10. */
	/* A frame's size in words, which places a callee's frame in the data
	 * stack: int co_framesize (3.12, 3.13), else co_stacksize +
	 * co_nlocalsplus + SP_PY_FRAME_SPECIALS (3.11). SP_PY_NONE when unknown. */
	uint32_t code_framesize;
	uint32_t code_stacksize;
	uint32_t code_nlocalsplus;
	uint8_t linetable; /* enum sp_py_linetable. */

	/* Generic objects. */
	uint32_t ob_type;     /* PyObject.ob_type. */
	uint32_t var_size;    /* PyVarObject.ob_size. */
	uint32_t bytes_data;  /* PyBytesObject.ob_sval. */
	uint32_t str_length;  /* PyASCIIObject.length. */
	uint32_t str_state;   /* PyASCIIObject.state (bit field word). */
	uint32_t str_ascii;   /* sizeof(PyASCIIObject): compact ASCII data. */
	uint32_t str_compact; /* sizeof(PyCompactUnicodeObject): other compact data. */

	/* Thread names, from the threading module's _active dict (names.c):
	 * sys.modules, dicts, heap types, instance attributes and ints. All
	 * of it is unused unless @c names is 1. */
	uint8_t names;             /* 1: the fields below were checked. */
	uint32_t interp_modules;   /* sys.modules: interp->modules (3.10, 3.11),
	                            * interp->imports.modules (3.12+). */
	uint32_t module_dict;      /* PyModuleObject.md_dict. */
	uint32_t dict_keys;        /* PyDictObject.ma_keys. */
	uint32_t dict_values;      /* PyDictObject.ma_values. */
	uint32_t dictvalues_items; /* values[] in PyDictValues (3.13+: after
	                            * capacity, size, embedded, valid). */
	uint8_t dict_keys_log2;    /* 1: 3.11+ keys (dk_log2_size,
	                            * dk_log2_index_bytes, dk_kind); 0: 3.10
	                            * keys (dk_size). */
	uint8_t managed;           /* enum sp_py_managed. */
	uint8_t long_tagged;       /* 1: PyLongObject's lv_tag (3.12+), 0: ob_size. */
	uint32_t long_size;        /* ob_size or lv_tag. */
	uint32_t long_digits;      /* ob_digit. */
	uint32_t type_basicsize;   /* PyTypeObject.tp_basicsize. */
	uint32_t type_flags;       /* PyTypeObject.tp_flags. */
	uint32_t type_dictoffset;  /* PyTypeObject.tp_dictoffset. */
	uint32_t type_cached_keys; /* PyHeapTypeObject.ht_cached_keys. */
} sp_py_layout;

/* Where an instance of a class with Py_TPFLAGS_MANAGED_DICT keeps its
 * attributes (Include/internal/pycore_object.h of each version). */
enum sp_py_managed {
	SP_PY_MANAGED_NONE = 0, /* 3.10: a __dict__ at tp_dictoffset. */
	SP_PY_MANAGED_311 = 1,  /* values pointer 4 words before the object,
	                         * dict pointer 3 words before. */
	SP_PY_MANAGED_312 = 2,  /* 3 words before: a dict, or values - 1
	                         * (tagged by bit 0). */
	SP_PY_MANAGED_313 = 3,  /* 3 words before: a dict, or NULL and the
	                         * values inline at tp_basicsize
	                         * (Py_TPFLAGS_INLINE_VALUES). */
};

/* Bytes read of a dict, a type, an int and an object's header. */
#define SP_PY_DICT_READ 64u
#define SP_PY_LONG_READ 40u

/* Words of _PyInterpreterFrame before its locals (3.11). */
#define SP_PY_FRAME_SPECIALS 9u

/* Size in words of a frame running the code object whose header (code_read
 * bytes) is @p hdr, or 0 when the layout does not say or the value is not
 * plausible. */
uint32_t sp_py_frame_words(const sp_py_layout *l, const uint8_t *hdr);

/* The CPython minors the reader knows: 3.10-3.12 from tables, 3.13+ from
 * _Py_DebugOffsets (a newer minor is read with the newest layout). */
#define SP_PY_MIN_MINOR 10
#define SP_PY_MAX_MINOR 14

/* Records and returns STACKPULSE_EUNSUPPORTED for CPython @p hexversion
 * (PY_VERSION_HEX; 0 when unknown) found in @p where (a path, or NULL):
 * "WHERE: CPython 3.9 is not supported (stackpulse reads CPython 3.10 to
 * 3.14)". */
int sp_py_unsupported(const char *where, uint32_t hexversion);

/* Fills @p out for 3.10, 3.11 or 3.12 (only major.minor of @p hexversion
 * matter). Returns 0 or STACKPULSE_EUNSUPPORTED. */
int sp_py_layout_from_table(uint32_t hexversion, sp_py_layout *out);

/* Bytes of _PyRuntime to read for sp_py_layout_from_debug. */
#define SP_PY_DEBUG_OFFSETS_READ 1024u

/* Returns 1 when @p buf (at least 24 bytes) starts with the debug cookie. */
int sp_py_has_debug_cookie(const uint8_t *buf, size_t len);

/* Parses the _Py_DebugOffsets image @p buf of @p len bytes (3.13+). Every
 * offset is checked against its block's size and SP_PY_MAX_BLOCK. Returns 0,
 * STACKPULSE_EFORMAT (no cookie, inconsistent offsets),
 * STACKPULSE_EUNSUPPORTED (free-threaded build, version before 3.13) or
 * STACKPULSE_ETRUNCATED. Minors after the newest known use its layout and
 * are accepted only when every check passes. */
int sp_py_layout_from_debug(const uint8_t *buf, size_t len, sp_py_layout *out);

/* Checks the thread-name fields of @p l (offsets fit their reads): names
 * are read only when they pass, whatever the rest of the layout (which
 * sp_py_layout_check checks for stacks). Returns 0 or STACKPULSE_EFORMAT. */
int sp_py_names_check(const sp_py_layout *l);

/* Checks internal consistency of any layout (offsets fit their read sizes,
 * read sizes within SP_PY_MAX_BLOCK). Returns 0 or STACKPULSE_EFORMAT. */
int sp_py_layout_check(const sp_py_layout *l);

#endif
