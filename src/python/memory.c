/* CPython target memory and frame walks over a read callback (see
 * memory.h): batched reads with a page cache, thread states, the
 * frame chain and its verification. Code objects are in code.c, the 3.10
 * anchor on the stack copy in anchor.c.
 * Hot paths return plain codes without formatting error details: invalid
 * frames are expected in a running target and only end a walk. */
#include "python/memory.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/error.h"

/* ---- memory ------------------------------------------------------------ */

/* Marks a slot empty: never equal to a page address (they are aligned). */
#define PAGE_NONE UINT64_MAX

void sp_py_mem_reset(sp_py_mem *m)
{
	m->page_used = 0;
	m->page_next = 0;
}

static const uint8_t *page_find(const sp_py_mem *m, uint64_t page)
{
	for (uint32_t i = 0; i < m->page_used; i++)
		if (m->page_addr[i] == page)
			return m->pages + (size_t)i * SP_PY_PAGE;
	return NULL;
}

/* Takes the next slot for page @p p, dropping any older copy of it. */
static uint32_t page_slot(sp_py_mem *m, uint64_t p)
{
	for (uint32_t i = 0; i < m->page_used; i++)
		if (m->page_addr[i] == p)
			m->page_addr[i] = PAGE_NONE;
	uint32_t s = m->page_next;
	m->page_next = (m->page_next + 1) % SP_PY_PAGES;
	if (m->page_used < SP_PY_PAGES && s == m->page_used)
		m->page_used++;
	m->page_addr[s] = PAGE_NONE; /* until read */
	return s;
}

/* Copies @p iov from cached pages; 1 when it was fully cached. */
static int page_copy(const sp_py_mem *m, const sp_py_iov *iov)
{
	uint64_t p0 = iov->addr & ~(uint64_t)(SP_PY_PAGE - 1);
	uint64_t p1 = (iov->addr + iov->len - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
	const uint8_t *a = page_find(m, p0), *b = p1 != p0 ? page_find(m, p1) : a;
	if (!a || !b)
		return 0;
	uint32_t off = (uint32_t)(iov->addr - p0);
	uint32_t first = iov->len < SP_PY_PAGE - off ? iov->len : SP_PY_PAGE - off;
	memcpy(iov->buf, a + off, first);
	if (first < iov->len)
		memcpy((uint8_t *)iov->buf + first, b, iov->len - first);
	return 1;
}

/* Batches of live reads: the iovs themselves or the pages they need. */
#define LIVE_MAX SP_PY_MAX_LIVE

int sp_py_mem_read(sp_py_mem *m, sp_py_iov *iov, uint32_t n)
{
	sp_py_iov live[LIVE_MAX];
	uint32_t map[LIVE_MAX], nlive = 0, npages = 0;
	uint64_t want[LIVE_MAX];
	uint8_t paged[SP_PY_MAX_IOV] = { 0 }; /* waits for pages of this batch */
	if (n > SP_PY_MAX_IOV)
		return STACKPULSE_ELIMIT;
	for (uint32_t i = 0; i < n; i++) {
		iov[i].ok = 0;
		if (iov[i].len == 0) {
			iov[i].ok = 1;
		} else if (sp_py_in_stack(m, iov[i].addr, iov[i].len)) {
			memcpy(iov[i].buf, m->stack + (iov[i].addr - m->stack_start), iov[i].len);
			iov[i].ok = 1;
		} else if (!sp_py_plausible(iov[i].addr, 1) ||
		           SP_PY_USER_MAX - iov[i].addr < iov[i].len) {
			continue;
		} else if (m->pages && iov[i].len <= SP_PY_PAGE) {
			if (page_copy(m, &iov[i])) {
				iov[i].ok = 1;
				continue;
			}
			uint64_t p0 = iov[i].addr & ~(uint64_t)(SP_PY_PAGE - 1);
			uint64_t p1 = (iov[i].addr + iov[i].len - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
			/* Fetch only as many pages per batch as half the slots, so
			 * that no page fetched here evicts another fetched here. */
			if (npages + 2 > SP_PY_PAGES / 2) {
				live[nlive] = iov[i];
				map[nlive++] = i;
				continue;
			}
			for (uint64_t p = p0;; p += SP_PY_PAGE) {
				int dup = 0;
				for (uint32_t k = 0; k < npages && !dup; k++)
					dup = want[k] == p;
				if (!dup)
					want[npages++] = p;
				if (p == p1)
					break;
			}
			paged[i] = 1;
		} else {
			live[nlive] = iov[i];
			map[nlive++] = i;
		}
	}
	uint32_t first_page = nlive;
	for (uint32_t k = 0; k < npages; k++) {
		uint32_t s = page_slot(m, want[k]);
		live[nlive] =
		        (sp_py_iov){ want[k], m->pages + (size_t)s * SP_PY_PAGE, SP_PY_PAGE, 0 };
		map[nlive++] = s;
	}
	if (nlive) {
		m->calls++;
		int rc = m->read(m->ctx, live, nlive, 0);
		if (rc < 0)
			return rc;
		for (uint32_t i = 0; i < first_page; i++)
			iov[map[i]].ok = live[i].ok ? 1 : 0;
		for (uint32_t i = first_page; i < nlive; i++)
			if (live[i].ok)
				m->page_addr[map[i]] = live[i].addr;
		for (uint32_t i = 0; i < n; i++)
			if (paged[i])
				iov[i].ok = (uint8_t)page_copy(m, &iov[i]);
	}
	for (uint32_t i = 0; i < n; i++)
		if (!iov[i].ok)
			return STACKPULSE_ENOTFOUND;
	return 0;
}

/* Reads @p k (<= SP_PY_PAGES / 2) pages that are not cached yet into the
 * cache in one call; unreadable ones are left out. */
static void fetch_pages(sp_py_mem *m, const uint64_t *pages, uint32_t k, int prefix)
{
	sp_py_iov live[SP_PY_PAGES / 2];
	uint32_t slots[SP_PY_PAGES / 2], n = 0;
	for (uint32_t i = 0; i < k && n < SP_PY_PAGES / 2; i++) {
		if (page_find(m, pages[i]) || sp_py_in_stack(m, pages[i], SP_PY_PAGE))
			continue;
		slots[n] = page_slot(m, pages[i]);
		live[n] = (sp_py_iov){ pages[i], m->pages + (size_t)slots[n] * SP_PY_PAGE,
			               SP_PY_PAGE, 0 };
		n++;
	}
	if (!n)
		return;
	m->calls++;
	if (m->read(m->ctx, live, n, prefix) < 0)
		return;
	for (uint32_t i = 0; i < n; i++)
		if (live[i].ok)
			m->page_addr[slots[i]] = live[i].addr;
}

void sp_py_mem_fetch(sp_py_mem *m, const uint64_t *pages, uint32_t k)
{
	if (m->pages)
		fetch_pages(m, pages, k < SP_PY_PAGES / 2 ? k : SP_PY_PAGES / 2, 0);
}

/* Adds the pages of the frame at @p addr to the walk's hot pages. */
static void hot_add(sp_py_walker *w, uint64_t addr, uint32_t len)
{
	uint64_t a = addr & ~(uint64_t)(SP_PY_PAGE - 1);
	uint64_t b = (addr + len - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
	for (uint64_t p = a; w->nhot < SP_PY_HOT; p += SP_PY_PAGE) {
		int dup = 0;
		for (uint32_t k = 0; k < w->nhot && !dup; k++)
			dup = w->hot[k] == p;
		if (!dup)
			w->hot[w->nhot++] = p;
		if (p == b)
			break;
	}
}

void sp_py_mem_prefetch(sp_py_mem *m, uint64_t addr, uint32_t n)
{
	uint64_t pages[SP_PY_PREFETCH];
	uint32_t k = 0;
	if (!m->pages || n > SP_PY_PREFETCH || !sp_py_plausible(addr, 1))
		return;
	uint64_t top = addr & ~(uint64_t)(SP_PY_PAGE - 1);
	for (uint32_t i = 0; i < n && top >= (uint64_t)(i + 1) * SP_PY_PAGE; i++)
		pages[k++] = top - (uint64_t)i * SP_PY_PAGE;
	fetch_pages(m, pages, k, 1); /* frames below the chunk start are no use */
}

/* Copies from the stack copy or cached pages only; 1 when it could. */
static int mem_peek(const sp_py_mem *m, uint64_t addr, void *buf, uint32_t len)
{
	if (sp_py_in_stack(m, addr, len)) {
		memcpy(buf, m->stack + (addr - m->stack_start), len);
		return 1;
	}
	sp_py_iov iov = { addr, buf, len, 0 };
	return m->pages && sp_py_plausible(addr, 1) && SP_PY_USER_MAX - addr >= len &&
	       page_copy(m, &iov);
}

int sp_py_mem_read1(sp_py_mem *m, uint64_t addr, void *buf, uint32_t len)
{
	sp_py_iov iov = { addr, buf, len, 0 };
	return sp_py_mem_read(m, &iov, 1);
}

/* ---- thread states -------------------------------------------------------------- */

int sp_py_read_tstate(sp_py_walker *w, uint64_t addr, sp_py_tstate *out)
{
	const sp_py_layout *l = w->layout;
	uint8_t b[SP_PY_MAX_BLOCK];
	if (!sp_py_plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, addr, b, l->tstate_read);
	if (rc)
		return rc;
	out->addr = addr;
	out->next = sp_le64(b + l->tstate_next);
	out->thread_id = sp_le64(b + l->tstate_thread_id);
	out->tid = -1;
	out->frame = sp_le64(b + l->tstate_frame);
	if (l->tstate_native_thread_id != SP_PY_NONE) {
		uint64_t t = sp_le64(b + l->tstate_native_thread_id);
		if (t > 0 && t <= INT32_MAX)
			out->tid = (int64_t)t;
	} else if (w->pthread_tid && sp_py_plausible(out->thread_id, 8)) {
		uint8_t t[4];
		if (sp_py_mem_read1(&w->mem, out->thread_id + w->pthread_tid, t, 4) == 0) {
			uint32_t v = sp_le32(t);
			if (v > 0 && v <= INT32_MAX)
				out->tid = v;
		}
	}
	w->n_outer = 0;
	if (l->cframe_current_frame != SP_PY_NONE && out->frame) {
		uint8_t f[8];
		out->frame = sp_py_sample_cframe(w, out->frame, w->outer_tops, &w->n_outer);
		if (!sp_py_plausible(out->frame, 8) ||
		    sp_py_mem_read1(&w->mem, out->frame + l->cframe_current_frame, f, 8) != 0)
			out->frame = 0;
		else
			out->frame = sp_le64(f);
	}
	return 0;
}

int sp_py_read_tids(sp_py_walker *w, const uint64_t *addrs, uint32_t n, int64_t *tids,
                    uint64_t *idents)
{
	const sp_py_layout *l = w->layout;
	int native = l->tstate_native_thread_id != SP_PY_NONE;
	for (uint32_t at = 0; at < n; at += SP_PY_MAX_IOV) {
		uint32_t k = n - at < SP_PY_MAX_IOV ? n - at : SP_PY_MAX_IOV;
		uint8_t id[SP_PY_MAX_IOV][8], nt[SP_PY_MAX_IOV][8];
		sp_py_iov iov[2 * SP_PY_MAX_IOV];
		uint32_t ni = 0;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t a = addrs[at + i];
			tids[at + i] = -1;
			idents[at + i] = 0;
			if (!sp_py_plausible(a, 8))
				continue;
			iov[ni++] = (sp_py_iov){ a + l->tstate_thread_id, id[i], 8, 0 };
			if (native)
				iov[ni++] =
				        (sp_py_iov){ a + l->tstate_native_thread_id, nt[i], 8, 0 };
		}
		/* Reads at most SP_PY_MAX_IOV at a time (sp_py_mem_read's cap). */
		for (uint32_t done = 0; done < ni;) {
			uint32_t m = ni - done < SP_PY_MAX_IOV ? ni - done : SP_PY_MAX_IOV;
			int rc = sp_py_mem_read(&w->mem, iov + done, m);
			if (rc < 0 && rc != STACKPULSE_ENOTFOUND)
				return rc;
			done += m;
		}
		uint32_t j = 0, nth = 0;
		uint8_t th[SP_PY_MAX_IOV][4];
		sp_py_iov tv[SP_PY_MAX_IOV];
		uint32_t tix[SP_PY_MAX_IOV];
		for (uint32_t i = 0; i < k; i++) {
			if (!sp_py_plausible(addrs[at + i], 8))
				continue;
			const sp_py_iov *vi = &iov[j++], *vn = native ? &iov[j++] : NULL;
			if (!vi->ok)
				continue;
			idents[at + i] = sp_le64(id[i]);
			if (native) {
				uint64_t t = vn->ok ? sp_le64(nt[i]) : 0;
				if (t > 0 && t <= INT32_MAX)
					tids[at + i] = (int64_t)t;
			} else if (w->pthread_tid && sp_py_plausible(idents[at + i], 8) &&
			           UINT64_MAX - idents[at + i] > w->pthread_tid) {
				tv[nth] = (sp_py_iov){ idents[at + i] + w->pthread_tid, th[nth], 4,
					               0 };
				tix[nth++] = at + i;
			}
		}
		if (nth) {
			int rc = sp_py_mem_read(&w->mem, tv, nth);
			if (rc < 0 && rc != STACKPULSE_ENOTFOUND)
				return rc;
			for (uint32_t i = 0; i < nth; i++) {
				uint32_t v = tv[i].ok ? sp_le32(th[i]) : 0;
				if (v > 0 && v <= INT32_MAX)
					tids[tix[i]] = v;
			}
		}
	}
	return 0;
}

int sp_py_list_tstates(sp_py_walker *w, uint64_t runtime, uint64_t *addrs, uint32_t max,
                       uint32_t *n)
{
	const sp_py_layout *l = w->layout;
	uint8_t v[8];
	*n = 0;
	int rc = sp_py_mem_read1(&w->mem, runtime + l->runtime_interpreters_head, v, 8);
	if (rc)
		return rc;
	uint64_t interp = sp_le64(v);
	for (uint32_t ni = 0; interp; ni++) {
		if (ni >= SP_PY_MAX_INTERPS || !sp_py_plausible(interp, 8))
			return sp_error(STACKPULSE_ELIMIT, "python: bad interpreter list");
		uint8_t nx[8], th[8];
		sp_py_iov iov[2] = { { interp + l->interp_next, nx, 8, 0 },
			             { interp + l->interp_threads_head, th, 8, 0 } };
		if ((rc = sp_py_mem_read(&w->mem, iov, 2)) != 0)
			return rc;
		uint64_t ts = sp_le64(th);
		while (ts) {
			if (*n >= max || *n >= SP_PY_MAX_THREADS)
				return sp_error(STACKPULSE_ELIMIT, "python: more than %u threads",
				                *n);
			sp_py_tstate t;
			if ((rc = sp_py_read_tstate(w, ts, &t)) != 0)
				return rc;
			addrs[(*n)++] = ts;
			ts = t.next;
		}
		interp = sp_le64(nx);
	}
	return 0;
}

int sp_py_list_head(sp_py_walker *w, uint64_t runtime, uint64_t interp, uint64_t *head,
                    uint64_t *serial)
{
	const sp_py_layout *l = w->layout;
	uint8_t v[8], c[8];
	*head = 0;
	if (serial)
		*serial = 0;
	sp_py_iov iov[2] = { { interp ? interp + l->interp_threads_head
		                      : runtime + l->runtime_interpreters_head,
		               v, 8, 0 },
		             { interp + l->interp_tstate_serial, c, 8, 0 } };
	int rc = sp_py_mem_read(&w->mem, iov, interp && serial ? 2 : 1);
	if (rc == 0) {
		*head = sp_le64(v);
		if (interp && serial)
			*serial = sp_le64(c);
	}
	return rc;
}

/* ---- frame walk ------------------------------------------------------------------ */

/* A frame read but not yet resolved (its code object is fetched together
 * with the next frame, halving the number of read calls). */
typedef struct pending {
	uint64_t code;
	uint64_t instr;
	int entry;
	int gap;        /* frames of its activation may be missing rootward of it */
	uint64_t addr;  /* the frame's own address */
	uint64_t child; /* its callee's frame, when both sit in the data stack */
} pending;

/* Resolves @p p with the code header @p hdr into @p out. Returns 1 when a
 * frame was written, 0 when it is a hidden frame, or a negative code. */
static int resolve(sp_py_walker *w, const pending *p, const uint8_t *hdr, sp_py_frame *out,
                   int *misplaced)
{
	const sp_py_layout *l = w->layout;
	uint32_t id;
	memset(out, 0, sizeof(*out));
	int rc = sp_py_code_intern_hdr(w, p->code, hdr, &id);
	if (rc)
		return rc;
	const sp_py_code *c = sp_py_codes_get(w->codes, id);
	/* A callee's frame is pushed right after its caller's, unless it
	 * opened a new data stack chunk (page-aligned, frame near its start).
	 * Elsewhere, the caller read is not the one that made that call: the
	 * stack was popped below it and pushed again while it was read. */
	*misplaced = p->child && c->frame_words &&
	             p->child != p->addr + 8 * (uint64_t)c->frame_words &&
	             (p->child & (SP_PY_PAGE - 1)) >= SP_PY_CHUNK_HEAD;
	if (c->synthetic)
		return 0;
	int64_t off;
	if (l->instr_is_lasti) {
		int32_t lasti = (int32_t)(uint32_t)p->instr;
		if (lasti < -1 || lasti > (1 << 28))
			return STACKPULSE_EFORMAT;
		off = lasti < 0 ? -1 : 2 * (int64_t)lasti;
	} else {
		uint64_t start = p->code + l->code_adaptive;
		/* 3.11/3.12 prev_instr sits one unit before the code until the
		 * first instruction runs. */
		if (l->instr_is_prev && p->instr == start - 2) {
			off = -1;
		} else {
			if (p->instr < start || p->instr - start > 2 * (uint64_t)c->code_units ||
			    ((p->instr - start) & 1))
				return STACKPULSE_EFORMAT;
			off = (int64_t)(p->instr - start);
		}
	}
	out->code = id;
	out->flags = (p->entry ? SP_PY_FRAME_ENTRY : 0) | (p->gap ? SP_PY_FRAME_GAP : 0);
	out->offset = off < 0 ? 0 : (uint32_t)off;
	out->line = sp_py_line(l->linetable, c->linetable, c->linetable_len, c->first_line, off);
	return 1;
}

/* What a walk read of each frame it used, to check it again. */
typedef struct frame_rec {
	uint64_t addr;
	uint8_t bytes[24];  /* previous, code, instr fields as read */
	uint32_t out_index; /* Index in the output its frame gets (if shown). */
	uint8_t gen;        /* A generator's frame (owner 1, 3.11+). */
} frame_rec;

static void rec_fields(const sp_py_layout *l, const uint8_t *fb, uint8_t *out)
{
	memcpy(out, fb + l->frame_previous, 8);
	memcpy(out + 8, fb + l->frame_code, 8);
	memcpy(out + 16, fb + l->frame_instr, l->instr_is_lasti ? 4 : 8);
	if (l->instr_is_lasti)
		memset(out + 20, 0, 4);
}

/* Follows the chain through what is already cached (the prefetched data
 * stack) and fetches the pages of the code objects it names in one call,
 * so the walk proper finds frames and code headers cached. */
static void prefetch_codes(sp_py_walker *w, uint64_t top)
{
	const sp_py_layout *l = w->layout;
	uint8_t fb[SP_PY_MAX_BLOCK];
	uint64_t want[SP_PY_PAGES / 2];
	uint32_t nw = 0;
	uint64_t addr = top;
	for (uint32_t steps = 0; steps < 2 * SP_PY_MAX_DEPTH + 2 && nw + 2 <= SP_PY_PAGES / 2;
	     steps++) {
		if (!sp_py_plausible(addr, 8) || !mem_peek(&w->mem, addr, fb, l->frame_read))
			break;
		uint64_t code = sp_le64(fb + l->frame_code);
		if (l->code_tagged)
			code &= ~(uint64_t)7;
		int shim = l->frame_owner != SP_PY_NONE && fb[l->frame_owner] >= l->owner_first_c;
		if (!shim && sp_py_plausible(code, 8) && SP_PY_USER_MAX - code >= l->code_read) {
			uint64_t a = code & ~(uint64_t)(SP_PY_PAGE - 1);
			uint64_t b = (code + l->code_read - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
			for (uint64_t p = a;; p += SP_PY_PAGE) {
				int dup = page_find(&w->mem, p) != NULL;
				for (uint32_t k = 0; k < nw && !dup; k++)
					dup = want[k] == p;
				if (!dup)
					want[nw++] = p;
				if (p == b)
					break;
			}
		}
		addr = sp_le64(fb + l->frame_previous);
	}
	fetch_pages(&w->mem, want, nw, 0);
}

/* @p misplaced_from: the output index of the rootmost frame whose callee
 * is not where that frame's size puts it (UINT32_MAX: none); frames leafward
 * of it belong to an earlier stack. */
static int walk_once(sp_py_walker *w, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
                     int *truncated, frame_rec *recs, uint32_t *nrecs, uint32_t *misplaced_from)
{
	const sp_py_layout *l = w->layout;
	uint8_t fb[SP_PY_MAX_BLOCK] = { 0 }, cb[SP_PY_MAX_BLOCK] = { 0 };
	uint64_t addr = top;
	pending p = { 0, 0, 0, 0, 0, 0 };
	uint64_t child = 0; /* the last frame read, when it is in the data stack */
	int have = 0;
	uint32_t count = 0, steps = 0, group_start = 0, gaps = 0;
	uint64_t last_frame = 0; /* the last frame that passed */
	uint64_t apos = w->anchor_pos ? w->anchor_pos - 1 : 0;
	int anchored = w->anchor_pos && w->mem.stack && apos < w->mem.stack_len;
	w->anchor_pos = 0; /* one walk only */
	/* Eval activations left so far; the next one's top is outer_tops[act]. */
	uint32_t act = 0, n_outer = w->n_outer;
	w->n_outer = 0; /* one walk only */
	w->lost_caller = 0;
	w->nhot = 0;
	*misplaced_from = UINT32_MAX;
	*n = 0;
	*nrecs = 0;
	*truncated = 0;
	if (max > SP_PY_MAX_DEPTH)
		max = SP_PY_MAX_DEPTH;
	/* 3.11+ frames sit below the top one in the thread's data stack:
	 * take them in one read, close to one instant. */
	if (!l->instr_is_lasti && sp_py_plausible(top, 8))
		sp_py_mem_prefetch(&w->mem, top, SP_PY_PREFETCH);
	if (w->mem.pages)
		prefetch_codes(w, top);
	/* The anchor's stale prefix (3.10): freed frames, each its own
	 * activation; no line (f_lasti moved on when they returned). All or
	 * none: a hole would pair the wrong frames with activations. */
	uint32_t nstale = anchored ? w->nstale : 0;
	w->nstale = 0; /* one walk only */
	for (uint32_t i = 0; i < nstale && count < max; i++) {
		uint8_t hdr[SP_PY_MAX_BLOCK];
		uint32_t id;
		int rc = sp_py_mem_read1(&w->mem, w->stale_code[i], hdr, l->code_read);
		if (rc == 0)
			rc = sp_py_code_intern_hdr(w, w->stale_code[i], hdr, &id);
		if (rc == -ENOMEM)
			return rc;
		if (rc != 0 || sp_py_codes_get(w->codes, id)->synthetic) {
			count = 0;
			break;
		}
		out[count++] = (sp_py_frame){ id, SP_PY_FRAME_ENTRY | SP_PY_FRAME_STALE, 0, 0 };
	}
	group_start = count;
	for (;;) {
		if (addr && (!sp_py_plausible(addr, 8) || ++steps > 2 * SP_PY_MAX_DEPTH + 2)) {
			*truncated = 1;
			addr = 0;
			if (!have)
				break;
		}
		if (have && count >= max) {
			*truncated = 1;
			break;
		}
		sp_py_iov iov[2];
		uint32_t ni = 0, fi = UINT32_MAX, ci = UINT32_MAX;
		int saved = anchored && addr && addr == top && w->anchor_addr == addr;
		if (addr && !saved) {
			iov[ni] = (sp_py_iov){ addr, fb, l->frame_read, 0 };
			fi = ni++;
		}
		if (have) {
			iov[ni] = (sp_py_iov){ p.code, cb, l->code_read, 0 };
			ci = ni++;
		}
		if (ni == 0 && !saved)
			break;
		int rc = ni ? sp_py_mem_read(&w->mem, iov, ni) : 0;
		if (rc < 0 && rc != STACKPULSE_ENOTFOUND)
			return rc == -ENOMEM ? rc : (*truncated = 1, 0);
		if (have) {
			int misplaced = 0;
			rc = iov[ci].ok ? resolve(w, &p, cb, &out[count], &misplaced)
			                : STACKPULSE_EFORMAT;
			if (rc == -ENOMEM)
				return rc;
			if (rc < 0) {
				*truncated = 1;
				break;
			}
			if (misplaced)
				*misplaced_from = count;
			if (rc == 1)
				count++;
			have = 0;
		}
		if (saved) {
			memcpy(fb, w->anchor_frame, l->frame_read);
			w->anchor_addr = 0;
		} else if (fi == UINT32_MAX) {
			break;
		} else if (!iov[fi].ok) {
			*truncated = 1;
			break;
		}
		/* 3.10 frame objects: freed ones keep their type, not their
		 * references. */
		int dead = l->frame_type != SP_PY_NONE && w->types.frame &&
		           (sp_le64(fb + l->frame_type) != w->types.frame || sp_le64(fb) == 0);
		if (dead && !(anchored && addr != top)) {
			*truncated = 1;
			break;
		}
		/* A frame matched against the sample's stack copy is the
		 * sample's (or one of the same function, called from the same
		 * frame): it needs no re-read. Racing a running 3.10 target,
		 * the re-read only ever found its frames reused since. */
		int checked = anchored && addr == top;
		if (anchored && addr != top) {
			/* Each next frame of the sample sits further up its copy,
			 * with its code pointer close by. */
			uint64_t at = apos;
			int a = dead ? 0 : sp_py_anchor_next(&w->mem, addr, &at);
			if (a == 1 && !sp_py_code_near(&w->mem, sp_le64(fb + l->frame_code), at))
				a = 0;
			if (a != 0)
				apos = at;
			if (a == 0) {
				/* Freed since the sample: go on from the next live
				 * frame further up the copy, and say that frames
				 * are missing in between. */
				uint64_t next, npos;
				w->anchor_misses++;
				if (++gaps > SP_PY_ANCHOR_GAPS ||
				    sp_py_anchor_scan(w, apos + 8, last_frame, &next, &npos) != 0) {
					*truncated = 1;
					break;
				}
				if (count > 0)
					out[count - 1].flags |= SP_PY_FRAME_GAP;
				addr = next;
				apos = npos;
				top = next;
				continue;
			}
			anchored = a == 1;
			checked = anchored;
		}
		last_frame = addr;
		if (!saved && !l->instr_is_lasti && !sp_py_in_stack(&w->mem, addr, l->frame_read))
			hot_add(w, addr, l->frame_read);
		if (!checked && *nrecs < 2 * SP_PY_MAX_DEPTH + 2 &&
		    !sp_py_in_stack(&w->mem, addr, l->frame_read)) {
			recs[*nrecs].addr = addr;
			recs[*nrecs].out_index = count;
			recs[*nrecs].gen = l->frame_owner != SP_PY_NONE && fb[l->frame_owner] == 1;
			rec_fields(l, fb, recs[*nrecs].bytes);
			(*nrecs)++;
		}
		uint64_t prev = sp_le64(fb + l->frame_previous);
		uint64_t code = sp_le64(fb + l->frame_code);
		if (l->code_tagged)
			code &= ~(uint64_t)7;
		if (l->frame_owner != SP_PY_NONE) {
			uint8_t owner = fb[l->frame_owner];
			if (owner >= l->owner_first_c) {
				/* A shim or base frame: ends one eval activation. */
				if (owner > 4) {
					*truncated = 1;
					break;
				}
				if (count > group_start)
					out[count - 1].flags |= SP_PY_FRAME_ENTRY;
				group_start = count;
				child = 0;
				act++;
				addr = prev;
				continue;
			}
			if (owner > 2) {
				*truncated = 1;
				break;
			}
		}
		/* Owner 0: the thread's data stack (not a generator's frame). */
		int in_data_stack = l->frame_owner != SP_PY_NONE && fb[l->frame_owner] == 0;
		if (!sp_py_plausible(code, 8)) {
			*truncated = 1;
			break;
		}
		p.code = code;
		p.instr = l->instr_is_lasti ? sp_le32(fb + l->frame_instr)
		                            : sp_le64(fb + l->frame_instr);
		/* 3.10: every frame has its own eval activation. */
		p.entry = l->instr_is_lasti ||
		          (l->frame_is_entry != SP_PY_NONE && fb[l->frame_is_entry] != 0);
		/* A generator frame of the sample that lost its caller since:
		 * it ran in its own activation, whose caller's frame the copy
		 * holds. */
		/* 3.11 resumes a generator from C only, in an activation of
		 * its own: nothing is skipped. 3.12+ also resume generators
		 * inline (FOR_ITER_GEN, SEND_GEN), so frames of the activation
		 * may lie between: say so. Without a known outer activation the
		 * chain is cut: a generator frame is never a thread's root. */
		p.gap = 0;
		/* 3.10: a generator's frame object that lost its f_back. Each
		 * frame had its own activation, so its caller's frame sits
		 * further up the copy: resume at the next live one there (as
		 * for a freed frame, flagged: the scan may have passed one). */
		if (prev == 0 && l->frame_gen != SP_PY_NONE && sp_le64(fb + l->frame_gen) != 0) {
			uint64_t next, npos;
			if (anchored && gaps < SP_PY_ANCHOR_GAPS &&
			    sp_py_anchor_scan(w, apos + 8, addr, &next, &npos) == 0) {
				gaps++;
				prev = next;
				apos = npos;
				top = next; /* found in the copy: checked */
				p.gap = 1;
			} else {
				w->lost_caller = 1;
				*truncated = 1;
			}
		}
		if (prev == 0 && l->frame_owner != SP_PY_NONE && fb[l->frame_owner] == 1) {
			if (act < n_outer) {
				prev = w->outer_tops[act];
				p.gap = l->frame_is_entry == SP_PY_NONE;
				p.entry = 1;
			} else {
				w->lost_caller = 1;
				*truncated = 1;
			}
		}
		if (p.entry)
			act++; /* this activation ends here */
		p.addr = addr;
		p.child = in_data_stack ? child : 0;
		child = in_data_stack ? addr : 0;
		have = 1;
		addr = prev;
	}
	/* Without an entry marker below it, the outermost group still ends at
	 * the root of the chain, unless the walk was cut. */
	if (!*truncated && count > group_start)
		out[count - 1].flags |= SP_PY_FRAME_ENTRY;
	*n = count;
	return 0;
}

/* Reads the pages of @p recs again in one call and compares the fields.
 * Returns 1 when every frame is unchanged (the stack existed as returned at
 * the time of this read), 0 when one changed (*changed: the rootmost such
 * record), -1 when it cannot tell. */
static int verify(sp_py_walker *w, uint64_t top, const frame_rec *recs, uint32_t nrecs,
                  uint32_t *changed)
{
	int bad = 0;
	const sp_py_layout *l = w->layout;
	sp_py_iov iov[SP_PY_MAX_LIVE];
	uint32_t np = 0;
	for (uint32_t i = 0; i < nrecs; i++) {
		uint64_t a = recs[i].addr & ~(uint64_t)(SP_PY_PAGE - 1);
		uint64_t b = (recs[i].addr + l->frame_read - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
		for (uint64_t p = a;; p += SP_PY_PAGE) {
			int dup = 0;
			for (uint32_t k = 0; k < np && !dup; k++)
				dup = iov[k].addr == p;
			if (!dup) {
				if (np == SP_PY_MAX_LIVE)
					return -1; /* too scattered to check in one call */
				iov[np] = (sp_py_iov){ p, w->mem.verify + (size_t)np * SP_PY_PAGE,
					               SP_PY_PAGE, 0 };
				np++;
			}
			if (p == b)
				break;
		}
	}
	if (!np)
		return 1;
	w->mem.calls++;
	if (w->mem.read(w->mem.ctx, iov, np, 0) < 0)
		return -1;
	for (uint32_t i = 0; i < nrecs; i++) {
		uint8_t fb[SP_PY_MAX_BLOCK], now[24];
		uint32_t got = 0;
		for (uint32_t k = 0; k < np && got < l->frame_read; k++) {
			uint64_t p = iov[k].addr;
			uint64_t lo = recs[i].addr > p ? recs[i].addr : p;
			uint64_t hi = recs[i].addr + l->frame_read < p + SP_PY_PAGE
			                      ? recs[i].addr + l->frame_read
			                      : p + SP_PY_PAGE;
			if (lo >= hi)
				continue;
			if (!iov[k].ok)
				break; /* unmapped since: the stack shrank */
			memcpy(fb + (lo - recs[i].addr), (uint8_t *)iov[k].buf + (lo - p), hi - lo);
			got += (uint32_t)(hi - lo);
		}
		if (got != l->frame_read) {
			bad = 1;
			*changed = i;
			continue;
		}
		rec_fields(l, fb, now);
		/* Links and code of every frame; the instruction of callers too:
		 * a caller only moves on once its callee has returned, so the
		 * frames above it are another call's. The top frame's may move:
		 * it is still the same call, with a slightly later line. A
		 * generator's frame lives in its generator object: its link is
		 * set at each resume and cleared at each yield, and it moves on
		 * between resumes, yet it stays the same generator while it
		 * holds the same code there (its callers are checked each on
		 * their own). */
		int gen = recs[i].gen && fb[l->frame_owner] == 1;
		uint32_t from = gen ? 8 : 0,
		         to = gen || recs[i].addr == top || w->loose_verify ? 16 : 24;
		if (memcmp(now + from, recs[i].bytes + from, to - from) != 0) {
			bad = 1;
			*changed = i;
		}
	}
	return bad ? 0 : 1;
}

int sp_py_walk(sp_py_walker *w, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
               int *truncated)
{
	frame_rec *recs = sp_malloc((2 * SP_PY_MAX_DEPTH + 2) * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	uint32_t nrecs, changed = 0, misplaced;
	int rc = walk_once(w, top, out, max, n, truncated, recs, &nrecs, &misplaced);
	int torn = rc == 0 && misplaced != UINT32_MAX;
	uint32_t keep = torn ? misplaced : 0;
	if (rc == 0 && w->mem.verify && verify(w, top, recs, nrecs, &changed) == 0) {
		torn = 1;
		if (recs[changed].out_index + 1 > keep)
			keep = recs[changed].out_index + 1;
	}
	if (torn) {
		/* Changed under the reader: never a mix. With loose_verify (a
		 * second try), the frames rootward of the rootmost change are
		 * kept, flagged as missing their leaf side; else nothing. */
		w->mem.torn++;
		w->mem.misplaced += misplaced != UINT32_MAX;
		if (w->loose_verify && keep < *n) {
			memmove(out, out + keep, (*n - keep) * sizeof(*out));
			*n -= keep;
			out[0].flags |= SP_PY_FRAME_LEAF_GAP;
		} else {
			*n = 0;
			*truncated = 1;
			rc = STACKPULSE_ESTATE;
		}
	}
	sp_free(recs);
	return rc;
}
