/* See libunwind_oracle.h. The accessors follow perf's use of libunwind's
 * remote API: find_proc_info hands libunwind the binary's .eh_frame_hdr
 * search table (dwarf_search_unwind_table); memory reads are served from
 * the stack copy, else from the file behind the address. */
#include "libunwind_oracle.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

/* Not in libunwind's public headers; exported by libunwind-generic. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di, unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);

#define LO_MAX_LOADS 16
/* libunwind numbers registers as DWARF does on both architectures. */
#if defined(__x86_64__)
#define LO_NREGS 17 /* rax..r15, rip */
/* perf register (PERF_REG_X86_*) -> DWARF register; -1: not used. */
static const int8_t lo_perf_to_dwarf[24] = {
	0, 3, 2, 1, 4, 5, 6, 7, 16, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11, 12, 13, 14, 15,
};
#elif defined(__aarch64__)
#define LO_NREGS 33 /* x0..x30, sp, pc */
static const int8_t lo_perf_to_dwarf[33] = {
	0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};
#else
#error "the libunwind oracle covers x86_64 and aarch64"
#endif

typedef struct lo_load {
	uint64_t vaddr, offset, filesz;
} lo_load;

/* One executable mapping and the file behind it. */
typedef struct lo_map {
	uint64_t start, end; /* The executable mapping. */
	uint64_t bias;       /* Runtime minus link-time address. */
	uint64_t hdr;        /* Runtime address of .eh_frame_hdr; 0: none. */
	uint64_t fde_count;
	int fd;
	const uint8_t *mem; /* [vdso]: our own, the same kernel's; else NULL. */
	uint64_t mem_len;
	lo_load loads[LO_MAX_LOADS];
	size_t nloads;
} lo_map;

struct lo_oracle {
	lo_map *maps;
	size_t n;
	unw_addr_space_t as;
};

/* The snapshot one lo_unwind call reads. */
typedef struct lo_snap {
	lo_oracle *o;
	uint64_t reg[LO_NREGS];
	uint64_t valid; /* Bit i: reg[i] was sampled. */
	const uint8_t *stack;
	size_t len;
	uint64_t start;
} lo_snap;

static int read_at(const lo_map *m, void *buf, size_t len, uint64_t off)
{
	if (m->mem) {
		if (off > m->mem_len || m->mem_len - off < len)
			return -1;
		memcpy(buf, m->mem + off, len);
		return 0;
	}
	return pread(m->fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
}

/* Reads @p len bytes at runtime address @p addr of map @p m's file. */
static int image_read(const lo_map *m, uint64_t addr, void *buf, size_t len)
{
	uint64_t la = addr - m->bias;
	for (size_t i = 0; i < m->nloads; i++) {
		const lo_load *l = &m->loads[i];
		if (la >= l->vaddr && la - l->vaddr <= l->filesz &&
		    l->filesz - (la - l->vaddr) >= len)
			return read_at(m, buf, len, l->offset + (la - l->vaddr));
	}
	return -1;
}

/* The length of our own [vdso] mapping, or 0. */
static uint64_t own_vdso_len(void)
{
	ps_procmap *maps = NULL;
	int n = ps_read_maps(getpid(), &maps);
	uint64_t len = 0;
	for (int i = 0; i < n; i++)
		if (strcmp(maps[i].path, "[vdso]") == 0)
			len = maps[i].end - maps[i].start;
	free(maps);
	return len;
}

/* Opens the file of @p pm and finds its loads, bias and .eh_frame_hdr. */
static int map_open(const ps_procmap *pm, lo_map *m)
{
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->start = pm->start;
	m->end = pm->end;
	if (strcmp(pm->path, "[vdso]") == 0) {
		/* The target's vDSO is ours: same kernel, same image. */
		m->mem = (const uint8_t *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
		m->mem_len = pm->end - pm->start;
		if (!m->mem || m->mem_len != own_vdso_len())
			return -1;
	} else {
		if (pm->path[0] == '/' && !strstr(pm->path, " (deleted)"))
			m->fd = open(pm->path, O_RDONLY | O_CLOEXEC);
		if (m->fd < 0)
			return -1;
	}
	Elf64_Ehdr eh;
	if (read_at(m, &eh, sizeof(eh), 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > 64)
		return -1;
	uint64_t hdr_vaddr = 0;
	bool have_bias = false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (read_at(m, &ph, sizeof(ph), eh.e_phoff + (uint64_t)i * sizeof(ph)) != 0)
			return -1;
		if (ph.p_type == PT_GNU_EH_FRAME)
			hdr_vaddr = ph.p_vaddr;
		if (ph.p_type != PT_LOAD || m->nloads == LO_MAX_LOADS)
			continue;
		m->loads[m->nloads++] = (lo_load){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
		if (pm->pgoff >= ph.p_offset && pm->pgoff - ph.p_offset < ph.p_filesz) {
			m->bias = pm->start - (ph.p_vaddr + (pm->pgoff - ph.p_offset));
			have_bias = true;
		}
	}
	if (!have_bias)
		return -1;
	/* version 1, any 4-byte eh_frame_ptr, udata4 count, datarel sdata4 table. */
	uint8_t h[12];
	if (hdr_vaddr && image_read(m, hdr_vaddr + m->bias, h, sizeof(h)) == 0 && h[0] == 1 &&
	    (h[1] & 0x0f) == 0x0b && h[2] == 0x03 && h[3] == 0x3b) {
		uint32_t count;
		memcpy(&count, h + 8, 4);
		m->hdr = hdr_vaddr + m->bias;
		m->fde_count = count;
	}
	return 0;
}

static lo_map *find_map(lo_oracle *o, uint64_t ip)
{
	for (size_t i = 0; i < o->n; i++)
		if (ip >= o->maps[i].start && ip < o->maps[i].end)
			return &o->maps[i];
	return NULL;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg)
{
	lo_snap *s = arg;
	lo_map *m = find_map(s->o, ip);
	if (!m || !m->hdr)
		return -UNW_ENOINFO;
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.start_ip = m->start;
	di.end_ip = m->end;
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.u.rti.segbase = m->hdr;
	di.u.rti.table_data = m->hdr + 12;
	di.u.rti.table_len = m->fde_count * 8 / sizeof(unw_word_t);
	return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as, (void)pi, (void)arg; /* As perf: the info lives in libunwind's pool. */
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as, (void)addr, (void)arg;
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write, void *arg)
{
	(void)as;
	lo_snap *s = arg;
	if (write)
		return -UNW_EINVAL;
	if (addr >= s->start && addr - s->start <= s->len && s->len - (addr - s->start) >= 8) {
		memcpy(valp, s->stack + (addr - s->start), 8);
		return 0;
	}
	for (size_t i = 0; i < s->o->n; i++)
		if (image_read(&s->o->maps[i], addr, valp, 8) == 0)
			return 0;
	return -UNW_EINVAL;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *valp, int write, void *arg)
{
	(void)as;
	lo_snap *s = arg;
	if (write || reg < 0 || reg >= LO_NREGS || !(s->valid & (1ULL << reg)))
		return -UNW_EBADREG;
	*valp = s->reg[reg];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                        void *arg)
{
	(void)as, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                         unw_word_t *offp, void *arg)
{
	(void)as, (void)addr, (void)buf, (void)len, (void)offp, (void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

int lo_new(const ps_procmap *maps, int nmaps, lo_oracle **out)
{
	*out = NULL;
	lo_oracle *o = calloc(1, sizeof(*o));
	if (!o || nmaps < 0 || !(o->maps = calloc((size_t)nmaps + 1, sizeof(lo_map)))) {
		free(o);
		return -ENOMEM;
	}
	for (int i = 0; i < nmaps; i++) {
		lo_map *m = &o->maps[o->n];
		if (map_open(&maps[i], m) == 0) {
			o->n++;
		} else if (m->fd >= 0) {
			close(m->fd);
		}
	}
	o->as = unw_create_addr_space(&accessors, 0);
	if (!o->as) {
		lo_free(o);
		return -ENOMEM;
	}
	/* Snapshots differ; nothing may carry over between them. */
	unw_set_caching_policy(o->as, UNW_CACHE_NONE);
	*out = o;
	return 0;
}

void lo_free(lo_oracle *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->n; i++)
		if (o->maps[i].fd >= 0)
			close(o->maps[i].fd);
	if (o->as)
		unw_destroy_addr_space(o->as);
	free(o->maps);
	free(o);
}

uint32_t lo_unwind(lo_oracle *o, const sp_regs *regs, const uint8_t *stack, size_t stack_len,
                   uint64_t stack_start, uint64_t *pcs, uint32_t max, int *complete)
{
	*complete = 0;
	lo_snap s = { .o = o, .stack = stack, .len = stack ? stack_len : 0, .start = stack_start };
	uint64_t mask = sp_unwind_regs_mask();
	uint32_t k = 0;
	for (unsigned bit = 0; bit < 64 && k < regs->count && k < SP_UNWIND_MAX_REGS; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		uint64_t v = regs->value[k++];
		if (bit < sizeof(lo_perf_to_dwarf) && lo_perf_to_dwarf[bit] >= 0) {
			s.reg[lo_perf_to_dwarf[bit]] = v;
			s.valid |= 1ULL << lo_perf_to_dwarf[bit];
		}
	}
	unw_cursor_t c;
	unw_word_t ip;
	if (max == 0 || regs->abi != 2 /* PERF_SAMPLE_REGS_ABI_64 */ ||
	    unw_init_remote(&c, o->as, &s) < 0 || unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
		return 0;
	uint32_t n = 0;
	pcs[n++] = ip;
	while (n < max) {
		int r = unw_step(&c);
		if (r <= 0 || unw_get_reg(&c, UNW_REG_IP, &ip) < 0) {
			*complete = r == 0;
			break;
		}
		if (ip == 0) {
			/* libunwind reports a zero return address as one more frame;
			 * sp_unwind ends the chain there, as the ABI says. */
			*complete = 1;
			break;
		}
		pcs[n++] = ip;
	}
	return n;
}

uint32_t lo_common_prefix(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
	uint32_t i = 0;
	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i;
}
