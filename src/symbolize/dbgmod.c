#include "dbgmod.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/search.h"
#include "symbolize/dbgrange.h"
#include "symbolize/demangle.h"
#include "io/elf.h"
#include "io/file.h"

#define MAX_SYMBOLS   (1u << 24)
#define MAX_CU_RANGES (1u << 22)

/* Hands libdwfl the binary as an Elf read with pread (ELF_C_READ):
 * dwfl_report_elf would mmap it, and a target that truncates its file
 * would then crash us with SIGBUS. */
static int find_elf_pread(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr base,
                          char **file_name, Elf **elfp)
{
	(void)mod, (void)name, (void)base;
	sp_dbgmod *m = ud ? *ud : NULL;
	if (!m || m->fd < 0)
		return -1;
	int fd = m->fd;
	char *copy = strdup(m->path); /* libdwfl frees it with free(). */
	Elf *elf = copy ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (!elf) {
		free(copy);
		return -1;
	}
	m->fd = -1; /* libdwfl owns fd and elf now. */
	*elfp = elf;
	*file_name = copy;
	return fd;
}

/* Replaces libdwfl's standard search (which would also reach debuginfod by
 * itself whenever DEBUGINFOD_URLS is set) with ours. */
static int find_debuginfo_cb(Dwfl_Module *mod, void **ud, const char *modname, Dwarf_Addr base,
                             const char *file_name, const char *debuglink_file,
                             GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)modname, (void)base;
	sp_dbgmod *m = ud ? *ud : NULL;
	if (!m)
		return -1;
	/* Once the module has its DWARF file, libdwfl calls back only for the
	 * dwz supplementary file: never answer that with the debug file. */
	Dwarf_Addr dwbias = (Dwarf_Addr)-1;
	dwfl_module_info(mod, NULL, NULL, NULL, &dwbias, NULL, NULL, NULL);
	if (dwbias != (Dwarf_Addr)-1)
		return sp_dbg_find_altlink(m->cfg, file_name, debuginfo_file_name);
	return sp_dbg_find_debuginfo(m->cfg, m->bid, m->bid_len, file_name ? file_name : m->path,
	                             debuglink_file, debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf_pread,
	.find_debuginfo = find_debuginfo_cb,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = NULL,
};

static int open_fd(int fd, uint64_t size, const char *path, const uint8_t *bid, uint32_t bid_len,
                   const sp_dbg_config *cfg, sp_dbgmod **out)
{
	sp_dbgmod *m = sp_calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return sp_error(-ENOMEM, "symbolizer: out of memory");
	}
	m->fd = -1;
	m->cfg = cfg;
	int rc = sp_elf_read_info(fd, size, &m->info);
	if (rc) {
		sp_error_context(rc, "%s", path);
		goto fail;
	}
	/* Verify before libelf or libdw parse anything more of the file. */
	if (bid_len &&
	    (m->info.build_id_len != bid_len || memcmp(m->info.build_id, bid, bid_len) != 0)) {
		char want[129], have[129];
		sp_hex(bid, bid_len, want);
		sp_hex(m->info.build_id, m->info.build_id_len, have);
		if (cfg->counters)
			cfg->counters->build_id_mismatch++;
		rc = sp_error(STACKPULSE_EBUILDID, "%s: build-id %s differs from recorded %s", path,
		              m->info.build_id_len ? have : "(none)", want);
		goto fail;
	}
	if (bid_len)
		memcpy(m->bid, bid, bid_len);
	m->bid_len = bid_len;
	m->path = sp_strdup(path);
	m->dwfl = dwfl_begin(&callbacks);
	if (!m->path || !m->dwfl) {
		rc = sp_error(-ENOMEM, "symbolizer: out of memory");
		goto fail;
	}
	/* The module spans its PT_LOADs at their own vaddrs (bias 0), as
	 * dwfl_report_elf(base 0, add_p_vaddr) would place it. */
	if (m->info.nloads == 0) {
		rc = sp_error(STACKPULSE_EFORMAT, "%s: no PT_LOAD segment", path);
		goto fail;
	}
	const sp_elf_load *first = &m->info.loads[0];
	uint64_t lo = first->vaddr & -first->align, hi = lo + 1;
	for (uint32_t i = 0; i < m->info.nloads; i++) {
		const sp_elf_load *l = &m->info.loads[i];
		if (l->vaddr + l->memsz > hi && l->vaddr + l->memsz >= l->vaddr)
			hi = l->vaddr + l->memsz;
	}
	m->trusted = sp_file_trusted(fd);
	m->fd = fd;
	fd = -1; /* Closed by sp_dbgmod_free until libdwfl takes it. */
	dwfl_report_begin(m->dwfl);
	const char *base = strrchr(path, '/');
	m->mod = dwfl_report_module(m->dwfl, base ? base + 1 : path, lo, hi);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod) {
		rc = sp_error(STACKPULSE_EFORMAT, "%s: libdwfl: %s", path, dwfl_errmsg(-1));
		goto fail;
	}
	void **ud = NULL;
	dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (ud)
		*ud = m;
	/* Open it now, so a file libelf cannot read fails here as before. */
	Dwarf_Addr elf_bias = 0;
	if (!dwfl_module_getelf(m->mod, &elf_bias) || elf_bias != 0) {
		rc = sp_error(STACKPULSE_EFORMAT, "%s: libdwfl: %s", path, dwfl_errmsg(-1));
		goto fail;
	}
	if (cfg->counters)
		cfg->counters->binaries_opened++;
	*out = m;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	sp_dbgmod_free(m);
	return rc;
}

int sp_dbgmod_open(const char *path, const uint8_t *bid, uint32_t bid_len, const sp_dbg_config *cfg,
                   sp_dbgmod **out)
{
	uint64_t size;
	if (bid_len > 64)
		return sp_error(-EINVAL, "%s: build-id of %u bytes", path, bid_len);
	int fd = sp_elf_open_regular(path, &size);
	if (fd < 0)
		return fd;
	return open_fd(fd, size, path, bid, bid_len, cfg, out);
}

int sp_dbgmod_open_fd(int fd, const char *path, const uint8_t *bid, uint32_t bid_len,
                      const sp_dbg_config *cfg, sp_dbgmod **out)
{
	if (fd < 0)
		return sp_error(-EBADF, "%s: no descriptor", path);
	if (bid_len > 64) {
		close(fd);
		return sp_error(-EINVAL, "%s: build-id of %u bytes", path, bid_len);
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sp_error(STACKPULSE_EUNSUPPORTED, "%s: not a regular file", path);
	}
	if (st.st_size < 64 || (uint64_t)st.st_size > SP_ELF_MAX_FILE_SIZE) {
		close(fd);
		return sp_error(STACKPULSE_ELIMIT, "%s: %lld bytes is not a usable size", path,
		                (long long)st.st_size);
	}
	return open_fd(fd, (uint64_t)st.st_size, path, bid, bid_len, cfg, out);
}

int sp_dbgmod_trusted(const sp_dbgmod *m)
{
	return m && m->trusted;
}

void sp_dbgmod_free(sp_dbgmod *m)
{
	if (!m)
		return;
	if (m->dwfl)
		dwfl_end(m->dwfl);
	if (m->fd >= 0)
		close(m->fd);
	sp_free(m->syms);
	sp_free(m->plt_names);
	sp_free(m->cus);
	sp_free(m->tops);
	sp_free(m->topcus);
	sp_free(m->path);
	sp_free(m);
}

/* ------------------------------------------------------------------ */
/* Symbol table: one sorted array per binary (dwfl_module_addrinfo scans
 * linearly). Covers .symtab, the debug file's, MiniDebugInfo and .dynsym. */

static int sym_cmp(const void *pa, const void *pb)
{
	const sym *a = pa, *b = pb;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return b->rank - a->rank; /* Best first. */
}

/* PLT stubs have no symbols: samples in them took the name of whatever
 * came before (often _init). Name each stub "callee@plt" like perf does,
 * from the .rela.plt entry whose GOT slot its jump reads (x86_64: the
 * rip-relative jmp in the stub; aarch64: entries in relocation order after
 * the 32-byte header). */
#define PLT_MAX_ENTRIES 65536u

static Elf_Scn *section_named(Elf *elf, size_t shstrndx, const char *want, GElf_Shdr *sh)
{
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *name;
		if (gelf_getshdr(scn, sh) && (name = elf_strptr(elf, shstrndx, sh->sh_name)) &&
		    strcmp(name, want) == 0)
			return scn;
	}
	return NULL;
}

typedef struct plt_rel {
	uint64_t got;
	const char *name;
} plt_rel;

/* The callee named by the stub at @p at (@p len bytes of @p code). */
static const char *stub_callee(const uint8_t *code, size_t len, uint64_t at, const plt_rel *rels,
                               size_t nrels, size_t index, uint16_t machine)
{
	if (machine == EM_AARCH64)
		return index < nrels ? rels[index].name : NULL;
	for (size_t i = 0; i + 6 <= len; i++) {
		if (code[i] != 0xff || code[i + 1] != 0x25)
			continue;
		int32_t disp = (int32_t)((uint32_t)code[i + 2] | (uint32_t)code[i + 3] << 8 |
		                         (uint32_t)code[i + 4] << 16 | (uint32_t)code[i + 5] << 24);
		uint64_t got = at + i + 6 + (uint64_t)(int64_t)disp;
		for (size_t r = 0; r < nrels; r++)
			if (rels[r].got == got)
				return rels[r].name;
		return NULL;
	}
	return NULL;
}

/* Appends the PLT stubs of @p m's ELF to m->syms (@p k used so far).
 * Returns the new count; a binary without them, with a layout not
 * understood, or no memory for them adds nothing. */
static size_t plt_syms(sp_dbgmod *m, size_t k)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(m->mod, &bias);
	GElf_Ehdr eh;
	size_t shstrndx;
	GElf_Shdr rsh, ssh, psh;
	Elf_Scn *rscn, *pscn;
	if (!elf || !gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) != 0 ||
	    (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) ||
	    !(rscn = section_named(elf, shstrndx, ".rela.plt", &rsh)) || rsh.sh_type != SHT_RELA ||
	    !rsh.sh_entsize)
		return k;
	Elf_Scn *sscn = elf_getscn(elf, rsh.sh_link);
	Elf_Data *rd = elf_getdata(rscn, NULL), *sd = sscn ? elf_getdata(sscn, NULL) : NULL;
	if (!rd || !sd || !gelf_getshdr(sscn, &ssh))
		return k;
	size_t nrels = rsh.sh_size / rsh.sh_entsize;
	if (nrels > PLT_MAX_ENTRIES)
		nrels = PLT_MAX_ENTRIES;
	plt_rel *rels = sp_calloc(nrels ? nrels : 1, sizeof(*rels));
	if (!rels)
		return k;
	size_t names_len = 0, got_rels = 0;
	for (size_t i = 0; i < nrels; i++) {
		GElf_Rela r;
		GElf_Sym sy;
		const char *name;
		if (!gelf_getrela(rd, (int)i, &r) ||
		    !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sy) ||
		    !(name = elf_strptr(elf, ssh.sh_link, sy.st_name)) || !*name)
			name = NULL;
		rels[got_rels++] = (plt_rel){ r.r_offset, name };
		names_len += name ? strlen(name) + 5 : 0;
	}
	/* IBT binaries jump from .plt.sec; others from .plt after PLT0. */
	int sec = (pscn = section_named(elf, shstrndx, ".plt.sec", &psh)) != NULL;
	if (!sec)
		pscn = section_named(elf, shstrndx, ".plt", &psh);
	Elf_Data *pd = pscn ? elf_getdata(pscn, NULL) : NULL;
	uint64_t head = sec ? 0 : eh.e_machine == EM_AARCH64 ? 32 : 16;
	size_t stubs = pd && pd->d_buf && pd->d_size > head ? (pd->d_size - head) / 16 : 0;
	if (stubs > PLT_MAX_ENTRIES)
		stubs = PLT_MAX_ENTRIES;
	sym *grown = stubs && names_len ? sp_realloc_array(m->syms, k + stubs, sizeof(sym)) : NULL;
	if (grown) {
		m->syms = grown;
		m->plt_names = sp_malloc(names_len);
	}
	size_t used = 0;
	for (uint64_t off = head, idx = 0; m->plt_names && idx < stubs; off += 16, idx++) {
		const char *callee =
		        stub_callee((const uint8_t *)pd->d_buf + off, 16, psh.sh_addr + off, rels,
		                    got_rels, idx, eh.e_machine);
		size_t n = callee ? strlen(callee) : 0;
		if (!callee || used + n + 5 > names_len)
			continue;
		char *out = m->plt_names + used;
		snprintf(out, names_len - used, "%s@plt", callee);
		used += n + 5;
		m->syms[k++] = (sym){ psh.sh_addr + off + bias, 16, out, 8 };
	}
	sp_free(rels);
	return k;
}

static int build_syms(sp_dbgmod *m)
{
	m->syms_built = 1;
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return 0;
	if ((unsigned)n > MAX_SYMBOLS)
		n = (int)MAX_SYMBOLS;
	m->syms = sp_calloc((size_t)n, sizeof(sym));
	if (!m->syms)
		return sp_error(-ENOMEM, "symbolizer: out of memory");
	size_t k = 0;
	for (int i = 1; i < n; i++) {
		GElf_Sym s;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name =
		        dwfl_module_getsym_info(m->mod, i, &s, &addr, &shndx, &elf, &bias);
		if (!name || !*name || shndx == SHN_UNDEF)
			continue;
		int type = GELF_ST_TYPE(s.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		int bind = GELF_ST_BIND(s.st_info);
		m->syms[k].addr = addr;
		m->syms[k].size = s.st_size;
		m->syms[k].name = name;
		m->syms[k].rank = (s.st_size ? 4 : 0) + (bind == STB_GLOBAL ? 2
		                                         : bind == STB_WEAK ? 1
		                                                            : 0);
		k++;
	}
	k = plt_syms(m, k);
	qsort(m->syms, k, sizeof(sym), sym_cmp);
	/* One symbol per address: the best ranked (first after sorting). */
	size_t w = 0;
	for (size_t i = 0; i < k; i++)
		if (w == 0 || m->syms[w - 1].addr != m->syms[i].addr)
			m->syms[w++] = m->syms[i];
	m->nsyms = w;
	return 0;
}

static const char *sym_lookup(sp_dbgmod *m, uint64_t addr)
{
	size_t lo;
	SP_PARTITION_POINT(lo, m->nsyms, mid, m->syms[mid].addr <= addr);
	if (lo == 0)
		return NULL;
	const sym *s = &m->syms[lo - 1];
	if (s->size && addr - s->addr >= s->size)
		return NULL;
	return s->name;
}

/* ------------------------------------------------------------------ */
/* DWARF */

static int cu_cmp(const void *pa, const void *pb)
{
	const cu_range *a = pa, *b = pb;
	return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : 0;
}

/* For CUs without .debug_aranges (clang's default): every CU's ranges,
 * sorted, built once. */
static int build_cu_index(sp_dbgmod *m)
{
	m->cu_index_built = 1;
	size_t cap = 0;
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias;
	while ((cu = dwfl_module_nextcu(m->mod, cu, &bias)) != NULL) {
		ptrdiff_t o = 0;
		Dwarf_Addr base, lo, hi;
		while ((o = dwarf_ranges(cu, o, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (m->ncus == cap) {
				if (cap >= MAX_CU_RANGES)
					goto done;
				size_t ncap = cap ? cap * 2 : 64;
				cu_range *n = sp_realloc_array(m->cus, ncap, sizeof(*n));
				if (!n)
					return sp_error(-ENOMEM, "symbolizer: out of memory");
				m->cus = n;
				cap = ncap;
			}
			m->cus[m->ncus].lo = lo;
			m->cus[m->ncus].hi = hi;
			m->cus[m->ncus].cu = *cu;
			m->ncus++;
		}
	}
done:
	if (m->ncus)
		qsort(m->cus, m->ncus, sizeof(*m->cus), cu_cmp);
	return 0;
}

static Dwarf_Die *cu_index_find(sp_dbgmod *m, uint64_t a)
{
	size_t lo;
	SP_PARTITION_POINT(lo, m->ncus, mid, m->cus[mid].lo <= a);
	/* Ranges of different CUs may nest (rare): look back a little. */
	for (size_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++)
		if (a < m->cus[i - 1].hi)
			return &m->cus[i - 1].cu;
	return NULL;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	return n;
}

/* Pools a name, demangled unless raw; NULL stays NULL. */
static int pool_name(sp_strpool *pool, const char *raw, int raw_names, const char **out)
{
	*out = NULL;
	if (!raw)
		return 0;
	*out = sp_demangle(pool, raw, raw_names);
	return *out ? 0 : -ENOMEM;
}

static int pool_str(sp_strpool *pool, const char *s, const char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = sp_strpool_intern(pool, s);
	return *out ? 0 : -ENOMEM;
}

static int top_cmp(const void *pa, const void *pb)
{
	const top_range *a = pa, *b = pb;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->die.addr < b->die.addr ? -1 : a->die.addr > b->die.addr;
}

/* Indexes the top-level DIEs of one CU, once, on its first lookup: a
 * segment of m->tops sorted by lo. A CU that imports units (dwz) or has
 * ranges libdw cannot read is marked unusable. */
static int cu_tops(sp_dbgmod *m, Dwarf_Die *cudie, const top_cu **out)
{
	*out = NULL;
	Dwarf_Off cu_off = dwarf_dieoffset(cudie);
	size_t lo;
	SP_PARTITION_POINT(lo, m->ntopcus, mid, m->topcus[mid].cu_off < cu_off);
	if (lo < m->ntopcus && m->topcus[lo].cu_off == cu_off) {
		*out = &m->topcus[lo];
		return 0;
	}
	if (m->ntopcus == m->captopcus) {
		size_t ncap = m->captopcus ? m->captopcus * 2 : 16;
		top_cu *n = sp_realloc_array(m->topcus, ncap, sizeof(*n));
		if (!n)
			return sp_error(-ENOMEM, "symbolizer: out of memory");
		m->topcus = n;
		m->captopcus = ncap;
	}
	top_cu c = { cu_off, m->ntops, 0, 1 };
	Dwarf_Die die;
	int r = dwarf_child(cudie, &die);
	while (r == 0 && c.usable) {
		if (dwarf_tag(&die) == DW_TAG_imported_unit) {
			c.usable = 0;
			break;
		}
		ptrdiff_t o = 0;
		Dwarf_Addr base, rlo, rhi;
		while ((o = dwarf_ranges(&die, o, &base, &rlo, &rhi)) > 0) {
			if (rhi <= rlo)
				continue;
			if (m->ntops == m->captops) {
				size_t ncap = m->captops ? m->captops * 2 : 256;
				if (ncap > MAX_CU_RANGES) {
					c.usable = 0;
					break;
				}
				top_range *n = sp_realloc_array(m->tops, ncap, sizeof(*n));
				if (!n) {
					m->ntops = c.first;
					return sp_error(-ENOMEM, "symbolizer: out of memory");
				}
				m->tops = n;
				m->captops = ncap;
			}
			top_range *t = &m->tops[m->ntops++];
			t->lo = rlo;
			t->hi = rhi;
			t->die = die;
		}
		if (o < 0)
			c.usable = 0;
		r = dwarf_siblingof(&die, &die);
	}
	if (r < 0)
		c.usable = 0;
	if (!c.usable) {
		m->ntops = c.first;
	} else {
		c.count = m->ntops - c.first;
		/* m->tops is NULL while no CU had ranges: no offset on NULL. */
		top_range *seg = c.count ? m->tops + c.first : NULL;
		if (c.count > 1)
			qsort(seg, c.count, sizeof(*seg), top_cmp);
		uint64_t mx = 0;
		for (size_t i = 0; i < c.count; i++) {
			if (seg[i].hi > mx)
				mx = seg[i].hi;
			seg[i].max_hi = mx;
		}
	}
	memmove(&m->topcus[lo + 1], &m->topcus[lo], (m->ntopcus - lo) * sizeof(*m->topcus));
	m->topcus[lo] = c;
	m->ntopcus++;
	*out = &m->topcus[lo];
	return 0;
}

static int is_scope_tag(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_lexical_block;
}

/* Scope DIEs kept per lookup by fast_innermost (deeper: ask libdw). */
#define MAX_SCOPE_DEPTH 256

/* The innermost scope DIE containing @p da, as dwarf_getscopes finds it
 * (first match at each level, in DIE order), and the chain of DIEs
 * descended to reach it in @p chain (outermost, a child of the CU, first;
 * *@p depth of them, the last one the innermost): that chain is what
 * dwarf_getscopes_die would return, without its walk over every DIE of the
 * CU before the innermost one. Returns 1 found, 0 none, -1 when this fast
 * path cannot be sure (the caller then asks libdw). */
static int fast_innermost(sp_dbgmod *m, const top_cu *c, uint64_t da,
                          Dwarf_Die chain[MAX_SCOPE_DEPTH], int *depth)
{
	if (!c || !c->usable)
		return -1;
	if (!c->count)
		return 0;
	const top_range *seg = m->tops + c->first;
	size_t lo;
	SP_PARTITION_POINT(lo, c->count, mid, seg[mid].lo <= da);
	const top_range *best = NULL;
	for (size_t i = lo; i > 0 && seg[i - 1].max_hi > da; i--) {
		const top_range *t = &seg[i - 1];
		if (t->hi > da &&
		    (!best || (const char *)t->die.addr < (const char *)best->die.addr))
			best = t;
	}
	if (!best)
		return 0;
	Dwarf_Die cur = best->die;
	for (int d = 0; d < MAX_SCOPE_DEPTH; d++) {
		if (!is_scope_tag(dwarf_tag(&cur)))
			return -1;
		chain[d] = cur;
		Dwarf_Die child;
		int r = dwarf_child(&cur, &child);
		if (r < 0)
			return -1;
		int found = 0;
		while (r == 0) {
			if (dwarf_tag(&child) == DW_TAG_imported_unit)
				return -1;
			int h = dwarf_haspc(&child, da);
			if (h < 0)
				return -1;
			if (h > 0) {
				found = 1;
				break;
			}
			r = dwarf_siblingof(&child, &child);
			if (r < 0)
				return -1;
		}
		if (!found) {
			*depth = d + 1;
			return 1;
		}
		cur = child;
	}
	return -1;
}

/* True when @p da belongs to the innermost scope @p inner found for a
 * neighbouring address: inside it and inside none of its children (the
 * scope walk descends only into DIEs that contain the address). */
static int same_innermost(Dwarf_Die *inner, uint64_t da)
{
	if (dwarf_haspc(inner, da) != 1)
		return 0;
	Dwarf_Die child;
	if (dwarf_child(inner, &child) != 0)
		return 1;
	do {
		if (dwarf_tag(&child) == DW_TAG_imported_unit)
			return 0;
		if (dwarf_haspc(&child, da) != 0)
			return 0; /* Inside it, or unknown: take the full walk. */
	} while (dwarf_siblingof(&child, &child) == 0);
	return 1;
}

/* Fills frames from DWARF for module address @p a. Returns the count, 0
 * when DWARF knows nothing of @p a, or -ENOMEM. */
static int dwarf_frames(sp_dbgmod *m, uint64_t a, sp_strpool *pool, int raw_names,
                        sp_symcache_frame *frames, uint32_t max)
{
	Dwarf_Addr bias = 0;
	if (!m->dwarf_tried) {
		m->dwarf_tried = 1;
		m->dw = dwfl_module_getdwarf(m->mod, &bias);
		if (m->dw && m->cfg->counters)
			m->cfg->counters->dwarf_loads++;
	}
	if (!m->dw)
		return 0;
	if (m->cfg->counters)
		m->cfg->counters->dwarf_lookups++;
	Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, a, &bias);
	if (!cudie) {
		if (!m->cu_index_built) {
			int rc = build_cu_index(m);
			if (rc)
				return rc;
		}
		dwfl_module_getdwarf(m->mod, &bias);
		cudie = cu_index_find(m, a - bias);
		if (!cudie)
			return 0;
	}
	uint64_t da = a - bias;
	const char *file = NULL;
	int line = 0;
	Dwarf_Line *ln = dwarf_getsrc_die(cudie, da);
	if (ln) {
		file = dwarf_linesrc(ln, NULL, NULL);
		if (dwarf_lineno(ln, &line) != 0)
			line = 0;
	}
	if (m->memo_valid && m->memo_a == a + 1 && m->memo_pool == pool &&
	    m->memo_raw == raw_names && m->memo_n <= max && m->memo_cu_addr == cudie->addr && ln &&
	    ln == m->memo_line && same_innermost(&m->memo_inner, da)) {
		memcpy(frames, m->memo_frames, m->memo_n * sizeof(*frames));
		if (a >= m->memo_lo && a < m->memo_hi) {
			m->ans_lo = m->memo_lo;
			m->ans_hi = m->memo_hi;
		}
		return (int)m->memo_n;
	}
	m->memo_valid = 0;
	uint32_t n = 0;
	int rc = 0;
	Dwarf_Die *scopes = NULL;
	Dwarf_Die inner = { 0 };
	const top_cu *tc;
	if ((rc = cu_tops(m, cudie, &tc)) != 0)
		return rc;
	Dwarf_Die chain[MAX_SCOPE_DEPTH];
	int depth = 0;
	int nscopes = fast_innermost(m, tc, da, chain, &depth);
	if (nscopes > 0) {
		/* Innermost first, as dwarf_getscopes_die orders them. */
		for (int i = 0, j = depth - 1; i < j; i++, j--) {
			Dwarf_Die t = chain[i];
			chain[i] = chain[j];
			chain[j] = t;
		}
		inner = chain[0];
		nscopes = depth;
	} else if (nscopes < 0) {
		nscopes = dwarf_getscopes(cudie, da, &scopes);
		if (nscopes > 0) {
			/* dwarf_getscopes loses the outer levels of nested inlines: redo
			 * the walk from the innermost DIE, as eu-addr2line -i does. */
			Dwarf_Off off = dwarf_dieoffset(&scopes[0]);
			free(scopes);
			scopes = NULL;
			nscopes = dwarf_offdie(dwarf_cu_getdwarf(cudie->cu), off, &inner)
			                  ? dwarf_getscopes_die(&inner, &scopes)
			                  : -1;
		}
	}
	Dwarf_Die *sc = scopes ? scopes : chain;
	Dwarf_Files *files = NULL;
	if (nscopes > 0) {
		Dwarf_Die cu;
		if (!dwarf_diecu(&sc[0], &cu, NULL, NULL) ||
		    dwarf_getsrcfiles(&cu, &files, NULL) != 0)
			files = NULL;
	}
	const char *loc_file = file;
	uint32_t loc_line = line > 0 ? (uint32_t)line : 0;
	int have_func = 0;
	for (int i = 0; i < nscopes && !rc; i++) {
		Dwarf_Die *die = &sc[i];
		int tag = dwarf_tag(die);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		/* Keep the physical frame even when the chain is too deep. */
		if (tag == DW_TAG_inlined_subroutine && n + 1 >= max)
			continue;
		const char *name = die_name(die);
		rc = pool_name(pool, name ? name : "[unknown]", raw_names, &frames[n].name);
		if (!rc)
			rc = pool_str(pool, loc_file, &frames[n].file);
		frames[n].line = loc_line;
		n++;
		if (tag == DW_TAG_subprogram) {
			have_func = 1;
			break;
		}
		Dwarf_Attribute attr;
		Dwarf_Word val;
		loc_file = NULL;
		loc_line = 0;
		if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
			loc_file = dwarf_filesrc(files, val, NULL, NULL);
		if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0 &&
		    val <= UINT32_MAX)
			loc_line = (uint32_t)val;
	}
	free(scopes);
	if (rc)
		return rc;
	if (have_func && nscopes > 0) {
		uint64_t rlo, rhi;
		sp_dwarf_answer_range(cudie, da, ln, &inner, &rlo, &rhi);
		m->ans_lo = rlo + bias;
		m->ans_hi = rhi + bias;
	}
	if (have_func && ln && n <= SP_SYMCACHE_MAX_FRAMES) {
		m->memo_lo = m->ans_lo;
		m->memo_hi = m->ans_hi;
		m->memo_valid = 1;
		m->memo_a = a;
		m->memo_cu_addr = cudie->addr;
		m->memo_line = ln;
		m->memo_inner = inner;
		m->memo_pool = pool;
		m->memo_raw = raw_names;
		m->memo_n = n;
		memcpy(m->memo_frames, frames, n * sizeof(*frames));
	}
	if (!have_func) {
		/* No subprogram DIE: the symbol table names the physical frame. */
		if (n >= max)
			n = max - 1;
		if (!m->syms_built && (rc = build_syms(m)) != 0)
			return rc;
		const char *s = sym_lookup(m, a);
		if (!s && n == 0 && !file)
			return 0;
		rc = pool_name(pool, s, raw_names, &frames[n].name);
		if (!rc)
			rc = pool_str(pool, loc_file, &frames[n].file);
		if (rc)
			return rc;
		frames[n].line = loc_line;
		n++;
	}
	return (int)n;
}

int sp_dbgmod_resolve(sp_dbgmod *m, uint64_t off, sp_strpool *pool, int raw_names,
                      sp_symcache_frame *frames, uint32_t max)
{
	if (max == 0)
		return sp_error(-EINVAL, "symbolizer: no room for frames");
	frames[0].name = NULL;
	frames[0].file = NULL;
	frames[0].line = 0;
	uint64_t a;
	m->ans_lo = m->ans_hi = 0;
	if (sp_elf_offset_to_vaddr(&m->info, off, &a) != 0)
		return 1;
	m->ans_lo = a;
	m->ans_hi = a + 1;
	int n = dwarf_frames(m, a, pool, raw_names, frames, max);
	if (n != 0)
		return n;
	if (!m->syms_built) {
		int rc = build_syms(m);
		if (rc)
			return rc;
	}
	const char *s = sym_lookup(m, a);
	if (s && pool_name(pool, s, raw_names, &frames[0].name) != 0)
		return -ENOMEM;
	/* With DWARF loaded, a neighbour might have lines: stay exact. */
	if (!m->dw)
		sp_sym_range(m, a, &m->ans_lo, &m->ans_hi);
	return 1;
}
