/* Range answers: the addresses around a resolved one that get the very
 * same frames (its line row inside its innermost scope, or its symbol),
 * turned back into file offsets so one answer serves a whole range in
 * symbol caches. */
#include "dbgrange.h"

#include <stddef.h>
#include <stdint.h>

#include "common/search.h"

/* Module addresses around @p addr that name the same symbol (or none):
 * up to the next symbol, and inside the symbol's size. */
void sp_sym_range(const sp_dbgmod *m, uint64_t addr, uint64_t *lo, uint64_t *hi)
{
	size_t l;
	SP_PARTITION_POINT(l, m->nsyms, mid, m->syms[mid].addr <= addr);
	*lo = addr;
	*hi = l < m->nsyms ? m->syms[l].addr : addr + 1;
	if (l > 0) {
		const sym *s = &m->syms[l - 1];
		uint64_t end = s->size ? s->addr + s->size : UINT64_MAX;
		if (addr < end) {
			*lo = s->addr;
			if (end < *hi)
				*hi = end;
		} else if (l < m->nsyms) {
			*lo = end; /* Past its end: unnamed up to the next symbol. */
		} else {
			/* Past the last symbol (a stripped binary's code after its
			 * PLT): nothing bounds the gap, and a debug file found later
			 * may name it: answer for this address alone. */
			*lo = addr;
		}
	}
	if (*hi <= addr)
		*hi = addr + 1;
}

/* Narrows [*lo, *hi) (DWARF addresses, containing @p da) to where the
 * line row @p ln holds and the innermost scope stays @p inner: inside the
 * range of @p inner that holds @p da, and outside every child's ranges.
 * Leaves [da, da + 1) when unsure. */
void sp_dwarf_answer_range(Dwarf_Die *cudie, uint64_t da, Dwarf_Line *ln, Dwarf_Die *inner,
                           uint64_t *lo, uint64_t *hi)
{
	*lo = da;
	*hi = da + 1;
	Dwarf_Lines *lines;
	size_t nl;
	if (!ln || dwarf_getsrclines(cudie, &lines, &nl) != 0 || nl == 0)
		return;
	/* Rows are sorted by address: the row for da, then the next address. */
	size_t l = 0, h = nl;
	while (l < h) {
		size_t mid = l + (h - l) / 2;
		Dwarf_Addr ad;
		if (dwarf_lineaddr(dwarf_onesrcline(lines, mid), &ad) != 0)
			return;
		if (ad <= da)
			l = mid + 1;
		else
			h = mid;
	}
	if (l == 0 || l >= nl)
		return;
	Dwarf_Addr rlo, rhi;
	if (dwarf_lineaddr(dwarf_onesrcline(lines, l - 1), &rlo) != 0 ||
	    dwarf_lineaddr(dwarf_onesrcline(lines, l), &rhi) != 0 || rhi <= da || rlo > da)
		return;
	/* The lookup is monotonic in the address, so equal ends mean equal
	 * rows all the way between. */
	if (dwarf_getsrc_die(cudie, rlo) != ln || dwarf_getsrc_die(cudie, rhi - 1) != ln)
		return;
	uint64_t a = rlo, b = rhi;
	ptrdiff_t o = 0;
	Dwarf_Addr base, slo, shi;
	int inside = 0;
	while ((o = dwarf_ranges(inner, o, &base, &slo, &shi)) > 0) {
		if (slo <= da && da < shi) {
			inside = 1;
			if (slo > a)
				a = slo;
			if (shi < b)
				b = shi;
		}
	}
	if (o < 0 || !inside)
		return;
	Dwarf_Die child;
	int r = dwarf_child(inner, &child);
	while (r == 0) {
		o = 0;
		while ((o = dwarf_ranges(&child, o, &base, &slo, &shi)) > 0) {
			if (shi <= slo)
				continue;
			if (shi <= da) {
				if (shi > a)
					a = shi;
			} else if (slo > da) {
				if (slo < b)
					b = slo;
			} else {
				return; /* A child holds da: inner was not innermost. */
			}
		}
		if (o < 0)
			return;
		r = dwarf_siblingof(&child, &child);
	}
	if (r < 0 || a > da || b <= da)
		return;
	*lo = a;
	*hi = b;
}

int sp_dbgmod_resolve_range(sp_dbgmod *m, uint64_t off, sp_strpool *pool, int raw_names,
                            sp_symcache_frame *frames, uint32_t max, uint64_t *start, uint32_t *len)
{
	int n = sp_dbgmod_resolve(m, off, pool, raw_names, frames, max);
	*start = off;
	*len = 1;
	if (n <= 0 || m->ans_hi <= m->ans_lo)
		return n;
	/* Back to file offsets, inside the segment that holds off. */
	for (uint32_t i = 0; i < m->info.nloads; i++) {
		const sp_elf_load *l = &m->info.loads[i];
		if (off < l->offset || off - l->offset >= l->filesz)
			continue;
		uint64_t a = l->vaddr + (off - l->offset);
		uint64_t lo = m->ans_lo > l->vaddr ? m->ans_lo : l->vaddr;
		uint64_t hi = m->ans_hi < l->vaddr + l->filesz ? m->ans_hi : l->vaddr + l->filesz;
		if (lo > a || hi <= a)
			break;
		uint64_t span = hi - lo;
		if (span > UINT32_MAX)
			break;
		*start = off - (a - lo);
		*len = (uint32_t)span;
		break;
	}
	return n;
}
