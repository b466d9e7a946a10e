/* Pure decoders of CPython memory: thread states, frame chains, code
 * objects, strings and line tables. All target memory comes through a read
 * callback, so the same code serves live processes and the fuzzer's
 * synthetic images. Target memory is hostile: every pointer, type, length
 * and count is checked, and a walk that meets something invalid stops with
 * a truncation flag instead of returning garbage. No syscalls. */
#ifndef SP_PYTHON_MEMORY_H
#define SP_PYTHON_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

#define SP_PY_MAX_DEPTH     256u       /* Python frames per stack. */
#define SP_PY_OUTER_MAX     64u        /* Outer activations a walk can resume at. */
#define SP_PY_HOT           8u         /* Pages of a walk's live frames kept (hot). */
#define SP_PY_STALE_MAX     8u         /* Freed leaf frames kept by a 3.10 anchor. */
#define SP_PY_MAX_STR       1024u      /* Characters kept of a name or file. */
#define SP_PY_MAX_LINETABLE 65536u     /* Larger line tables are not kept. */
#define SP_PY_MAX_CODES     (1u << 20) /* Code objects interned per process. */
/* Bytes of decoded code objects (names, files, line tables and a fixed
 * part each) a code cache keeps: per process, and over all processes of a
 * recording that share a budget (sp_py_codes_set_budget). Beyond them the
 * least recently used entries are evicted (clock); one used by any of the
 * last SP_PY_CODE_PIN_WALKS walks is not (its id may still sit in a stack
 * read ahead of the drain: the recorder keeps at most 64 of those), and
 * when nothing can go, the new code object is refused (the walk ends
 * there, truncated). An id that outlives its entry anyway finds NULL
 * (generation check), never another code object. */
#define SP_PY_CODE_BUDGET       (32ull << 20)
#define SP_PY_CODE_BUDGET_TOTAL (128ull << 20)
#define SP_PY_CODE_PIN_WALKS    64u
#define SP_PY_MAX_THREADS       4096u /* Thread states listed per process. */
#define SP_PY_MAX_INTERPS       64u   /* Interpreters listed per process. */
#define SP_PY_MAX_IOV           16u   /* Reads per sp_py_mem_read. */
#define SP_PY_MAX_LIVE          32u   /* Reads per callback call. */

/* Highest user-space address on the 64-bit targets we support (x86_64 with
 * 5-level paging, aarch64 52-bit VA). */
#define SP_PY_USER_MAX 0x00ffffffffffffffULL

/* 1 when @p addr may be a user-space pointer aligned to @p align. */
static inline int sp_py_plausible(uint64_t addr, uint64_t align)
{
	return addr >= 4096 && addr < SP_PY_USER_MAX && (addr & (align - 1)) == 0;
}

/* One read of target memory: @p len bytes at @p addr into @p buf. The
 * callback sets @p ok to 1 for each read it completed in full. */
typedef struct sp_py_iov {
	uint64_t addr;
	void *buf;
	uint32_t len;
	uint8_t ok;
} sp_py_iov;
/* Performs @p n reads (n <= SP_PY_MAX_LIVE). Returns 0, or a negative code
 * when the target is gone; individual failures only leave ok == 0. With
 * @p prefix set only the leading readable run is wanted: the callback may
 * leave everything after the first failure unread. */
typedef int (*sp_py_read_fn)(void *ctx, sp_py_iov *iov, uint32_t n, int prefix);

/* Target memory: a read callback plus an optional copy of the sampled
 * stack. Reads that fall entirely inside the copy are served from it, so
 * C-stack objects (3.11/3.12 _PyCFrame, 3.12+ entry frames) are seen as
 * they were at sample time. */
#define SP_PY_PAGE     4096u
#define SP_PY_PAGES    32u
#define SP_PY_PREFETCH 8u /* Pages read below a 3.11+ top frame at once. */
/* 3.11+ data stack chunks are page-aligned mappings; the first frame of one
 * starts below this offset (after the chunk header and a reserved slot). */
#define SP_PY_CHUNK_HEAD 64u
typedef struct sp_py_mem {
	sp_py_read_fn read;
	void *ctx;
	const uint8_t *stack; /* Stack copy, or NULL. */
	size_t stack_len;     /* Bytes in the copy. */
	uint64_t stack_start; /* Target address of stack[0]. */
	uint64_t calls;       /* Callback calls made (for cost statistics). */
	/* Optional page cache (SP_PY_PAGES * SP_PY_PAGE bytes, owned by the
	 * caller, NULL: off). Small reads fetch whole pages, so neighbouring
	 * frames (3.11+ keeps them contiguous in its data stack) and the
	 * objects a walk revisits cost no further calls, and one walk sees
	 * one snapshot of each page. Reset it between walks. */
	uint8_t *pages;
	uint64_t page_addr[SP_PY_PAGES];
	uint32_t page_used; /* Valid slots. */
	uint32_t page_next; /* Next slot to replace. */
	/* Optional buffer of SP_PY_MAX_LIVE * SP_PY_PAGE bytes (NULL: off) for
	 * checking a walk: the pages holding its frames are read again in one
	 * call, and the walk is refused when a frame changed, so a stack torn
	 * by the running target is never returned. */
	uint8_t *verify;
	uint64_t torn;      /* Walks found torn (statistics). */
	uint64_t misplaced; /* Of those, walks whose frames do not fit the data
	                     * stack's layout (a static image can have them). */
} sp_py_mem;

/* 1 when [@p addr, @p addr + @p len) lies inside the stack copy. */
static inline int sp_py_in_stack(const sp_py_mem *m, uint64_t addr, uint32_t len)
{
	return m->stack && addr >= m->stack_start && addr - m->stack_start <= m->stack_len &&
	       m->stack_len - (addr - m->stack_start) >= len;
}

/* Performs the reads; returns 0 when all completed, else STACKPULSE_ENOTFOUND
 * (some iov->ok are 0) or the callback's error. */
int sp_py_mem_read(sp_py_mem *m, sp_py_iov *iov, uint32_t n);
/* One read of @p len bytes at @p addr, as sp_py_mem_read. */
int sp_py_mem_read1(sp_py_mem *m, uint64_t addr, void *buf, uint32_t len);
/* Forgets cached pages (the target has moved on). */
void sp_py_mem_reset(sp_py_mem *m);
/* Reads the @p n pages ending with the one holding @p addr (downwards) into
 * the page cache in one call; unreadable ones are skipped. */
void sp_py_mem_prefetch(sp_py_mem *m, uint64_t addr, uint32_t n);

/* Reads the @p k (at most SP_PY_PAGES / 2) pages at @p pages that are not
 * cached yet into the page cache, in one call. */
void sp_py_mem_fetch(sp_py_mem *m, const uint64_t *pages, uint32_t k);

/* Addresses of type objects in the target; 0 skips that check, except
 * @p code, which every frame's code object must match. */
typedef struct sp_py_types {
	uint64_t code;         /* PyCode_Type. */
	uint64_t frame;        /* PyFrame_Type (3.10 frames). */
	uint64_t unicode;      /* PyUnicode_Type. */
	uint64_t bytes;        /* PyBytes_Type. */
	uint64_t init_cleanup; /* _Py_InitCleanup (3.13+ synthetic frame). */
	/* Thread names (names.c) read only when all three are known. */
	uint64_t dict;   /* PyDict_Type. */
	uint64_t long_;  /* PyLong_Type. */
	uint64_t module; /* PyModule_Type. */
} sp_py_types;

/* An interned code object. Immutable in CPython; an address that comes back
 * with a different fingerprint gets a new entry. */
typedef struct sp_py_code {
	uint64_t addr;
	char *qualname;     /* co_qualname (co_name on 3.10), UTF-8. */
	char *filename;     /* co_filename, UTF-8. */
	int32_t first_line; /* co_firstlineno. */
	uint8_t *linetable; /* co_linetable bytes, or NULL when not kept. */
	uint32_t linetable_len;
	uint32_t code_units; /* Bytecode length in 2-byte units (3.11+), else 0. */
	uint64_t fingerprint[4];
	uint8_t synthetic;    /* 1: 3.13+ __init__ cleanup shim (never shown). */
	uint32_t frame_words; /* Its frames' size in the data stack, 0: unknown. */
	uint32_t user;        /* Free for the caller (e.g. a spool index);
	                         * UINT32_MAX when new. */
	/* Cache bookkeeping (code.c). */
	uint64_t used_walk; /* Walk (sp_py_codes_walk_begin) of the last use. */
	uint32_t bytes;     /* What it counts against the budget. */
	uint16_t gen;       /* Bumped when the slot is reused; part of the id. */
	uint8_t live;       /* Holds a code object. */
	uint8_t in_hash;    /* Found by its address (not superseded). */
	uint8_t ref;        /* Used since the clock hand last passed. */
} sp_py_code;

/* The code cache. An id names one entry and carries its slot's
 * generation: once the entry is evicted, the id gives NULL, never another
 * code object. Evicting only drops decoded strings: the spool keeps every
 * Python code record written (sp_py_code.user indexes stay valid), and a
 * code object seen again is decoded and written again. */
typedef struct sp_py_codes sp_py_codes;
int sp_py_codes_new(sp_py_codes **out);
void sp_py_codes_free(sp_py_codes *c);
/* Entry @p id, or NULL when unknown or evicted. Valid until the next insert. */
sp_py_code *sp_py_codes_get(sp_py_codes *c, uint32_t id);
/* Sets the per-cache byte budget (0: SP_PY_CODE_BUDGET) and the counter
 * of bytes shared with other caches (@p shared, NULL: none) with its peak
 * and limit (0: SP_PY_CODE_BUDGET_TOTAL). This cache's bytes move from the
 * old shared counter to the new one. */
void sp_py_codes_set_budget(sp_py_codes *c, uint64_t budget, uint64_t *shared,
                            uint64_t *shared_peak, uint64_t shared_limit);
/* Marks the start of a walk: what it interns stays pinned for
 * SP_PY_CODE_PIN_WALKS walks. */
void sp_py_codes_walk_begin(sp_py_codes *c);
typedef struct sp_py_codes_usage {
	uint64_t bytes;   /* Held now. */
	uint64_t evicted; /* Entries evicted so far. */
	uint64_t refused; /* Code objects refused (nothing evictable). */
	uint32_t count;   /* Entries held now. */
} sp_py_codes_usage;
void sp_py_codes_get_usage(const sp_py_codes *c, sp_py_codes_usage *out);

/* Line of the instruction at byte offset @p offset, from a line table of
 * format @p format (enum sp_py_linetable). Returns @p first_line for a
 * negative offset and 0 when unknown (no location, malformed table, offset
 * past the end). Never reads outside @p table. */
int32_t sp_py_line(int format, const uint8_t *table, size_t len, int32_t first_line,
                   int64_t offset);

/* One Python frame, leaf first in a walk. */
enum sp_py_frame_flag {
	SP_PY_FRAME_ENTRY = 1u,    /* Outermost frame of one eval activation: the
	                         * frames up to and including it ran in one
	                         * _PyEval_EvalFrameDefault call. */
	SP_PY_FRAME_GAP = 2u,      /* Frames of an unknown number are missing
	                         * between this frame and the next (3.10
	                         * frames freed between sample and read). */
	SP_PY_FRAME_LEAF_GAP = 4u, /* On the first frame: frames of an unknown
	                            * number are missing leafward of it (they
	                            * changed while read, twice). */
	SP_PY_FRAME_STALE = 8u,    /* A leaf-side 3.10 frame that returned after
	                            * the sample, or before it (see
	                            * sp_py_anchor): kept only when the native
	                            * stack has an activation for it. */
};
typedef struct sp_py_frame {
	uint32_t code;   /* Code id in the sp_py_codes. */
	uint32_t flags;  /* enum sp_py_frame_flag. */
	uint32_t offset; /* Bytecode byte offset of the current instruction. */
	int32_t line;    /* Line, or 0 when unknown. */
} sp_py_frame;

/* Everything a walk needs. */
typedef struct sp_py_walker {
	const sp_py_layout *layout;
	sp_py_types types;
	sp_py_codes *codes;
	sp_py_mem mem;
	/* Set by sp_py_anchor for the next walk: 1 + the byte offset of the
	 * top frame's pointer in the stack copy; 0: none. */
	uint64_t anchor_pos;
	/* The anchor frame as the scan read and checked it: the walk starts
	 * from these bytes (a leaf frame may be freed microseconds later). */
	uint64_t anchor_addr;
	uint8_t anchor_frame[SP_PY_MAX_BLOCK];
	uint64_t anchor_misses; /* Frames missing from the copy in anchored walks. */
	/* Set by sp_py_anchor for the next walk: the code objects of freed
	 * frames leafward of the anchor in the copy that chain to it,
	 * leafmost first. */
	uint32_t nstale;
	uint64_t stale_code[SP_PY_STALE_MAX];
	uint8_t loose_verify; /* 1 (a second try): verification compares
	                         * links and code only, not the callers'
	                         * instructions, and a torn walk keeps the
	                         * frames rootward of the change. */
	uint32_t pthread_tid; /* 3.10: offset of the tid in glibc's struct
	                       * pthread (thread_id points at it); 0: unknown. */
	/* Set by sp_py_read_tstate for the next walk (3.11/3.12 with a stack
	 * copy): the current frame, at sample time, of each activation outer
	 * to the sample's innermost one (outer_tops[0] called it, [1] called
	 * that one, ...). A walk resumes there from a generator frame that no
	 * longer has a caller (it yielded since, and its link was cleared). */
	uint64_t outer_tops[SP_PY_OUTER_MAX];
	uint32_t n_outer;
	/* Set by a walk that met a generator frame whose caller link was
	 * cleared (it yielded while read) and could not resume: the walk
	 * was cut there (truncated), and a fresh read may do better. */
	uint8_t lost_caller;
	/* Set by each walk: the pages its frames were read from outside the
	 * stack copy, leaf first (3.11+ generator and coroutine frames live
	 * in their objects, not in the data stack). Read with the thread
	 * state at the thread's next sample, they give its frames as of that
	 * instant: a generator that yields a microsecond later has cleared
	 * its caller link by the time a separate read gets there. */
	uint64_t hot[SP_PY_HOT];
	uint32_t nhot;
} sp_py_walker;

/* A thread state as read. */
typedef struct sp_py_tstate {
	uint64_t addr;
	uint64_t next;
	uint64_t thread_id; /* pthread_t. */
	int64_t tid;        /* Kernel tid, or -1 when it cannot be known. */
	uint64_t frame;     /* Top frame (already through 3.11/3.12's cframe). */
} sp_py_tstate;

/* The sample's innermost _PyCFrame (3.11/3.12), given the live
 * tstate->cframe @p live: the deepest cframe in the stack copy whose
 * previous chain reaches @p live, or the first one in the copy on the chain
 * from a deeper @p live. Returns @p live when there is no copy or nothing
 * better; fills @p tops (at most SP_PY_OUTER_MAX, *ntops of them) with the
 * current frames of the cframes outer to the returned one, innermost
 * first, up to the first without a frame (the thread's root cframe). */
uint64_t sp_py_sample_cframe(sp_py_walker *w, uint64_t live, uint64_t *tops, uint32_t *ntops);

/* Reads the thread state at @p addr. With a stack copy, 3.11/3.12 start
 * from the sample's innermost activation (sp_py_sample_cframe). Returns 0
 * or a negative code. */
int sp_py_read_tstate(sp_py_walker *w, uint64_t addr, sp_py_tstate *out);

/* Reads the kernel tids (-1: none yet, or not knowable) and the pthread_t
 * idents of the @p n thread states at @p addrs, batched (3.10: through
 * glibc's struct pthread, w->pthread_tid). An unreadable thread state
 * gets tid -1 and ident 0. Returns 0 or the read callback's error. */
int sp_py_read_tids(sp_py_walker *w, const uint64_t *addrs, uint32_t n, int64_t *tids,
                    uint64_t *idents);

/* Lists thread states of every interpreter reachable from @p runtime
 * (the address of _PyRuntime). Returns 0 (also when the interpreter is not
 * initialised yet: *n == 0), or STACKPULSE_ELIMIT / a read error. */
int sp_py_list_tstates(sp_py_walker *w, uint64_t runtime, uint64_t *addrs, uint32_t max,
                       uint32_t *n);

/* The head of the thread list of interpreter @p interp (the newest thread
 * state: CPython links new ones at the head) and its count of thread
 * states made (@p serial, may be NULL), or, with @p interp 0, the head of
 * @p runtime's interpreter list (*serial 0): one read that tells whether
 * the list changed since it was last listed. Returns 0 or a read error. */
int sp_py_list_head(sp_py_walker *w, uint64_t runtime, uint64_t interp, uint64_t *head,
                    uint64_t *serial);

/* Walks the frame chain from @p top (a _PyInterpreterFrame, or 3.10's
 * PyFrameObject), leaf first, into @p out. Sets *truncated to 1 when the
 * walk stopped early (invalid frame, unreadable memory, depth or @p max).
 * With mem.verify set, the frames are then read again in one call; when one
 * changed, the walk returns STACKPULSE_ESTATE with *n = 0 (the caller may
 * start again from a fresh top frame). Returns 0 (the frames written are
 * valid even when truncated), STACKPULSE_ESTATE or -ENOMEM. */
int sp_py_walk(sp_py_walker *w, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
               int *truncated);

/* Interns the code object at @p addr whose header (layout->code_read
 * bytes) @p hdr was just read: its type must be PyCode_Type. Returns 0 and
 * its id, STACKPULSE_EFORMAT, STACKPULSE_ELIMIT or -ENOMEM. */
int sp_py_code_intern_hdr(sp_py_walker *w, uint64_t addr, const uint8_t *hdr, uint32_t *id);

/* Decodes the str object at @p addr (compact, of PyUnicode_Type when that
 * is known) into @p out as UTF-8 of at most @p cap - 1 bytes, cut at a
 * character, NUL-terminated. Returns 0, STACKPULSE_EFORMAT (not a str),
 * STACKPULSE_ENOTFOUND (unreadable) or the read callback's error. */
int sp_py_read_str(sp_py_walker *w, uint64_t addr, char *out, size_t cap);

/* 3.10 keeps its frames in heap objects that nothing on the C stack
 * describes, so a late read of tstate->frame sees the thread where it is
 * now, not where the sample caught it. Each eval activation keeps its
 * frame pointer (and code pointer) in its stack frame, though, so the
 * sample's stack copy names the frames that were running: the leafmost
 * word of the copy that points at a frame object (whose f_back is 0 or
 * further up the copy, and whose code pointer sits near it) is the
 * sample's top frame. An anchored walk then requires each next frame to
 * appear further up the copy (within its last SP_PY_ANCHOR_TAIL bytes the
 * chain may leave the copy and is read live). A frame that does not was
 * freed since the sample: the walk goes on from the next live frame
 * further up the copy and flags the gap (SP_PY_FRAME_GAP), so the root
 * side of the stack survives fast-changing leaves. Leafward of the anchor,
 * frames freed since the sample (json.loads -> decode -> raw_decode, all
 * returned by the time of the read) still sit in the copy beside their
 * code pointers, each linked to the next: they are kept as well, flagged
 * SP_PY_FRAME_STALE with no line (their f_lasti has moved on). The copy
 * cannot tell them from frames that returned before the sample, whose
 * pointers linger in reused stack; the merge keeps them only when the
 * native stack has an eval activation for each. */
#define SP_PY_NO_ANCHOR      UINT64_MAX
#define SP_PY_ANCHOR_TAIL    4096u /* Bytes at the end of the copy past which frames are read live. */
#define SP_PY_ANCHOR_WORDS   4096u /* Stack words scanned for the top frame. */
#define SP_PY_ANCHOR_BATCHES 4u    /* Read calls spent looking for it. */
#define SP_PY_ANCHOR_NEAR    512u  /* Code pointer within this many bytes of the frame's. */
#define SP_PY_ANCHOR_GAPS    16u   /* Gaps (frames freed since the sample) bridged per walk. */
/* Finds the sample's top frame from the stack copy (mem.stack, which
 * must stay set for the walk) for layouts with frame objects (3.10).
 * Returns 0 with *top (and w->anchor_pos set for the next sp_py_walk),
 * STACKPULSE_ENOTFOUND, or the read callback's error. */
int sp_py_anchor(sp_py_walker *w, uint64_t *top);
/* For an anchored walk (anchor.c): 1 when the code pointer @p code appears
 * within SP_PY_ANCHOR_NEAR bytes of copy offset @p pos. */
int sp_py_code_near(const sp_py_mem *m, uint64_t code, uint64_t pos);
/* The next frame @p addr of an anchored walk against the copy: 1 when it
 * lies further up (*pos moves there), 2 when the chain has left the copy
 * (stop checking), 0 when it is missing (freed since the sample). */
int sp_py_anchor_next(const sp_py_mem *m, uint64_t addr, uint64_t *pos);
/* The leafmost live frame pointed at from copy offset @p from on (not
 * @p skip) that may continue the sample's chain: 0 with its address and
 * offset, STACKPULSE_ENOTFOUND or the read callback's error. */
int sp_py_anchor_scan(sp_py_walker *w, uint64_t from, uint64_t skip, uint64_t *top,
                      uint64_t *top_pos);

#endif
