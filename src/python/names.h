/* Thread names as CPython's threading module keeps them (pure): the
 * interpreter's sys.modules dict gives the threading module, its dict the
 * _active dict (ident -> Thread object), and each Thread object its _name
 * attribute, as py-spy reads them. CPython does not name the OS threads
 * before 3.14, so this is the only place "MainThread" and the names given
 * to threading.Thread(name=...) exist.
 *
 * Dicts, instance attributes (3.11+ managed dicts and inline values) and
 * ints are decoded with the layout's per-version fields (layout.h). Target
 * memory is hostile: every object's type is checked, every dict walk is
 * bounded by its entry count, itself capped, and a thread whose name does
 * not decode is left out, never given garbage. */
#ifndef SP_PYTHON_NAMES_H
#define SP_PYTHON_NAMES_H

#include <stdint.h>

#include "python/memory.h"

#define SP_PY_TNAME_MAX        128u       /* Bytes kept of a name, with its NUL. */
#define SP_PY_DICT_ENTRIES_MAX (1u << 16) /* Entries of a dict that may be walked. */
#define SP_PY_NAME_SLOTS       4u         /* Classes whose _name slot is remembered. */

/* One thread of threading._active. */
typedef struct sp_py_tname {
	uint64_t ident;             /* Thread.ident: the thread's pthread_t, as in
	                             * its thread state's thread_id. */
	char name[SP_PY_TNAME_MAX]; /* Thread.name, UTF-8, cut at a character. */
} sp_py_tname;

/* What the reads of one process learned, kept between them (zero it to
 * start): the _active dict, and where a class's instances keep _name. */
typedef struct sp_py_names_cache {
	uint64_t interp; /* Interpreter the rest belongs to. */
	uint64_t active; /* threading._active, 0 until found. */
	struct {
		uint64_t keys; /* A class's shared keys (ht_cached_keys). */
		uint64_t key;  /* The "_name" str at entry ix. */
		uint32_t ix;
	} slot[SP_PY_NAME_SLOTS];
	uint32_t nslot, next;
} sp_py_names_cache;

/* Reads the names of the threads in threading._active of interpreter
 * @p interp into @p out (at most @p max). Returns 0 with *n names (0 while
 * threading is not imported), STACKPULSE_EUNSUPPORTED when the layout or
 * the type addresses (dict, int, module, str) do not allow it, or the
 * read callback's error (-ESRCH: the process is gone). */
int sp_py_thread_names(sp_py_walker *w, uint64_t interp, sp_py_names_cache *cache, sp_py_tname *out,
                       uint32_t max, uint32_t *n);

#endif
