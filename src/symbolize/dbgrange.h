/* Internals of a resolved binary shared by dbgmod.c (opening, symbols,
 * DWARF frames) and dbgrange.c (range answers); no other file includes
 * this. */
#ifndef SP_SYMBOLIZE_DBGRANGE_H
#define SP_SYMBOLIZE_DBGRANGE_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize/dbgmod.h"
#include "io/elf.h"

typedef struct sym {
	uint64_t addr, size;
	const char *name; /* Owned by libdwfl (lives as long as the Dwfl), or
	                   * by plt_names. */
	int rank;         /* Preference among symbols at one address. */
} sym;

/* A top-level DIE's address range: dwarf_getscopes scans every top-level
 * DIE of the CU per lookup (thousands in big CUs); this index finds the
 * first one containing an address directly. */
typedef struct top_range {
	uint64_t lo, hi; /* [lo, hi) in DWARF addresses. */
	uint64_t max_hi; /* Highest hi up to here in lo order. */
	Dwarf_Die die;
} top_range;

typedef struct top_cu {
	Dwarf_Off cu_off;
	size_t first, count; /* Its segment of tops. */
	int usable;
} top_cu;

typedef struct cu_range {
	uint64_t lo, hi; /* [lo, hi) in DWARF addresses. */
	Dwarf_Die cu;
} cu_range;

struct sp_dbgmod {
	char *path;
	int fd;      /* The binary until libdwfl takes it (find_elf), else -1. */
	int trusted; /* sp_file_trusted: may feed the shared symbol cache. */
	uint8_t bid[64];
	uint32_t bid_len;
	sp_elf_info info;
	const sp_dbg_config *cfg;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	int syms_built;
	sym *syms;
	size_t nsyms;
	char *plt_names; /* "name@plt" strings of the PLT stubs' symbols. */
	int dwarf_tried;
	Dwarf *dw;
	int cu_index_built;
	cu_range *cus;
	size_t ncus;
	/* The last DWARF answer: a return address (offset - 1) usually sits in
	 * the same line row and innermost scope as the offset looked up just
	 * before it, and then gets the same frames without dwarf_getscopes. */
	top_range *tops;
	size_t ntops, captops;
	top_cu *topcus; /* Sorted by cu_off. */
	size_t ntopcus, captopcus;
	int memo_valid;
	uint64_t memo_a;
	void *memo_cu_addr;
	Dwarf_Line *memo_line;
	Dwarf_Die memo_inner;
	const sp_strpool *memo_pool;
	int memo_raw;
	uint32_t memo_n;
	sp_symcache_frame memo_frames[SP_SYMCACHE_MAX_FRAMES];
	uint64_t memo_lo, memo_hi;
	/* Module addresses [ans_lo, ans_hi) around the last address resolved
	 * that all get the same answer (its line row inside its innermost scope,
	 * or its symbol when there is no DWARF). */
	uint64_t ans_lo, ans_hi;
};

/* [*lo, *hi): module addresses around @p addr naming the same symbol (or none). */
void sp_sym_range(const sp_dbgmod *m, uint64_t addr, uint64_t *lo, uint64_t *hi);

/* [*lo, *hi): DWARF addresses around @p da in line row @p ln and innermost scope @p inner. */
void sp_dwarf_answer_range(Dwarf_Die *cudie, uint64_t da, Dwarf_Line *ln, Dwarf_Die *inner,
                           uint64_t *lo, uint64_t *hi);

#endif
