/* Address spaces: a sorted, non-overlapping list of executable mappings per
 * process, each pointing at a shared cached binary. */
#include <errno.h>
#include <libelf.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/search.h"
#include "unwind/unwind_internal.h"

int sp_unwinder_new(sp_unwinder **out)
{
	if (!out)
		return sp_error(-EINVAL, "sp_unwinder_new: NULL output");
	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return sp_error(STACKPULSE_EUNSUPPORTED, "libelf: %s", elf_errmsg(-1));
	sp_unwinder *u = sp_calloc(1, sizeof(*u));
	if (!u)
		return sp_error(-ENOMEM, "out of memory for the unwinder");
	*out = u;
	return 0;
}

void sp_unwinder_free(sp_unwinder *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->nbins; i++)
		sp_unwind_binary_free(u->bins[i]);
	sp_free(u->bins);
	sp_free(u);
}

int sp_unwind_space_new(sp_unwinder *u, pid_t pid, sp_unwind_space **out)
{
	if (!u || !out)
		return sp_error(-EINVAL, "sp_unwind_space_new: NULL argument");
	*out = NULL;
	sp_unwind_space *s = sp_calloc(1, sizeof(*s));
	if (!s)
		return sp_error(-ENOMEM, "out of memory for an address space");
	s->u = u;
	s->pid = pid;
	*out = s;
	return 0;
}

int sp_unwind_space_fork(const sp_unwind_space *parent, pid_t pid, sp_unwind_space **out)
{
	if (!parent || !out)
		return sp_error(-EINVAL, "sp_unwind_space_fork: NULL argument");
	int rc = sp_unwind_space_new(parent->u, pid, out);
	if (rc)
		return rc;
	sp_unwind_space *s = *out;
	if (!s)
		return sp_error(STACKPULSE_EINTERNAL, "sp_unwind_space_fork: no space created");
	if (parent->n && parent->maps) {
		s->maps = sp_calloc(parent->n, sizeof(*s->maps));
		if (!s->maps) {
			sp_unwind_space_free(s);
			*out = NULL;
			return sp_error(-ENOMEM, "out of memory copying %zu mappings", parent->n);
		}
		memcpy(s->maps, parent->maps, parent->n * sizeof(*s->maps));
		s->n = s->cap = parent->n;
	}
	return 0;
}

void sp_unwind_space_free(sp_unwind_space *s)
{
	if (!s)
		return;
	sp_free(s->maps);
	sp_free(s);
}

void sp_unwind_space_clear(sp_unwind_space *s)
{
	if (s)
		s->n = 0;
}

/* Index of the first mapping whose end is above @p addr. */
static size_t first_ending_after(const sp_unwind_space *s, uint64_t addr)
{
	size_t lo;
	SP_PARTITION_POINT(lo, s->n, mid, s->maps[mid].end <= addr);
	return lo;
}

const sp_unwind_map *sp_unwind_space_find(const sp_unwind_space *s, uint64_t pc)
{
	size_t i = first_ending_after(s, pc);
	if (i < s->n && s->maps[i].start <= pc)
		return &s->maps[i];
	return NULL;
}

static int reserve(sp_unwind_space *s, size_t extra)
{
	if (s->n + extra <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap * 2 : 32;
	while (cap < s->n + extra)
		cap *= 2;
	sp_unwind_map *m = sp_realloc_array(s->maps, cap, sizeof(*m));
	if (!m)
		return sp_error(-ENOMEM, "out of memory for %zu mappings", cap);
	s->maps = m;
	s->cap = cap;
	return 0;
}

static void insert_at(sp_unwind_space *s, size_t i, const sp_unwind_map *m)
{
	memmove(&s->maps[i + 1], &s->maps[i], (s->n - i) * sizeof(*m));
	s->maps[i] = *m;
	s->n++;
}

/* Cuts [start, end) out of the list; a mapping straddling both ends is
 * split in two. Needs one free slot for that case. */
static void cut(sp_unwind_space *s, uint64_t start, uint64_t end)
{
	size_t i = first_ending_after(s, start);
	while (i < s->n && s->maps[i].start < end) {
		sp_unwind_map *m = &s->maps[i];
		if (m->start < start && m->end > end) {
			sp_unwind_map right = *m;
			right.pgoff += end - m->start;
			right.start = end;
			m->end = start;
			insert_at(s, i + 1, &right);
			return;
		}
		if (m->start < start) {
			m->end = start;
			i++;
		} else if (m->end > end) {
			m->pgoff += end - m->start;
			m->start = end;
			return;
		} else {
			memmove(m, m + 1, (s->n - i - 1) * sizeof(*m));
			s->n--;
		}
	}
}

int sp_unwind_space_map(sp_unwind_space *s, uint64_t start, uint64_t end, uint64_t pgoff,
                        const char *path, const uint8_t *build_id, uint32_t build_id_len)
{
	if (!s || !path)
		return sp_error(-EINVAL, "sp_unwind_space_map: NULL argument");
	if (end <= start)
		return sp_error(-EINVAL, "mapping %#llx-%#llx is empty", (unsigned long long)start,
		                (unsigned long long)end);
	int rc = reserve(s, 2);
	if (rc)
		return rc;
	sp_unwind_map m = { start, end, pgoff, 0, NULL };
	m.bin = sp_unwind_binary_get(s->u, s->pid, start, end, path, build_id, build_id_len);
	if (m.bin && !sp_unwind_binary_bias(m.bin, start, pgoff, &m.bias))
		m.bin = NULL;
	cut(s, start, end);
	insert_at(s, first_ending_after(s, start), &m);
	return 0;
}
