/* CPython memory decoders over a read callback (see python_memory.h).
 * Hot paths return plain codes without formatting error details: invalid
 * frames are expected in a running target and only end a walk. */
#include "record/python_memory.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"

/* Highest user-space address on the 64-bit targets we support (x86_64 with
 * 5-level paging, aarch64 52-bit VA). */
#define USER_MAX 0x00ffffffffffffffULL

static int plausible(uint64_t addr, uint64_t align)
{
	return addr >= 4096 && addr < USER_MAX && (addr & (align - 1)) == 0;
}

/* ---- memory ------------------------------------------------------------ */

static int in_stack(const sp_py_mem *m, uint64_t addr, uint32_t len)
{
	return m->stack && addr >= m->stack_start && addr - m->stack_start <= m->stack_len &&
	       m->stack_len - (addr - m->stack_start) >= len;
}

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
		} else if (in_stack(m, iov[i].addr, iov[i].len)) {
			memcpy(iov[i].buf, m->stack + (iov[i].addr - m->stack_start), iov[i].len);
			iov[i].ok = 1;
		} else if (!plausible(iov[i].addr, 1) || USER_MAX - iov[i].addr < iov[i].len) {
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
		if (page_find(m, pages[i]) || in_stack(m, pages[i], SP_PY_PAGE))
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

void sp_py_mem_prefetch(sp_py_mem *m, uint64_t addr, uint32_t n)
{
	uint64_t pages[SP_PY_PREFETCH];
	uint32_t k = 0;
	if (!m->pages || n > SP_PY_PREFETCH || !plausible(addr, 1))
		return;
	uint64_t top = addr & ~(uint64_t)(SP_PY_PAGE - 1);
	for (uint32_t i = 0; i < n && top >= (uint64_t)(i + 1) * SP_PY_PAGE; i++)
		pages[k++] = top - (uint64_t)i * SP_PY_PAGE;
	fetch_pages(m, pages, k, 1); /* frames below the chunk start are no use */
}

/* Copies from the stack copy or cached pages only; 1 when it could. */
static int mem_peek(const sp_py_mem *m, uint64_t addr, void *buf, uint32_t len)
{
	if (in_stack(m, addr, len)) {
		memcpy(buf, m->stack + (addr - m->stack_start), len);
		return 1;
	}
	sp_py_iov iov = { addr, buf, len, 0 };
	return m->pages && plausible(addr, 1) && USER_MAX - addr >= len && page_copy(m, &iov);
}

static int read1(sp_py_mem *m, uint64_t addr, void *buf, uint32_t len)
{
	sp_py_iov iov = { addr, buf, len, 0 };
	return sp_py_mem_read(m, &iov, 1);
}

/* ---- code cache ----------------------------------------------------------- */

struct sp_py_codes {
	sp_py_code *items;
	uint32_t count, cap;
	uint32_t *slots; /* id + 1 per slot; 0 is empty. */
	uint32_t nslots; /* Power of two. */
};

int sp_py_codes_new(sp_py_codes **out)
{
	sp_py_codes *c = sp_calloc(1, sizeof(*c));
	if (!c)
		return sp_error(-ENOMEM, "python code cache");
	*out = c;
	return 0;
}

void sp_py_codes_free(sp_py_codes *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->count; i++) {
		sp_free(c->items[i].qualname);
		sp_free(c->items[i].filename);
		sp_free(c->items[i].linetable);
	}
	sp_free(c->items);
	sp_free(c->slots);
	sp_free(c);
}

uint32_t sp_py_codes_count(const sp_py_codes *c)
{
	return c->count;
}

sp_py_code *sp_py_codes_get(sp_py_codes *c, uint32_t id)
{
	return id < c->count ? &c->items[id] : NULL;
}

/* Slot for @p addr: its current entry or the empty slot to fill. */
static uint32_t *codes_slot(sp_py_codes *c, uint64_t addr)
{
	uint32_t mask = c->nslots - 1, i = (uint32_t)sp_hash64(addr) & mask;
	while (c->slots[i] && c->items[c->slots[i] - 1].addr != addr)
		i = (i + 1) & mask;
	return &c->slots[i];
}

static int codes_grow(sp_py_codes *c)
{
	if (c->count >= SP_PY_MAX_CODES)
		return STACKPULSE_ELIMIT;
	if (c->count == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 64;
		sp_py_code *items = sp_realloc_array(c->items, cap, sizeof(*items));
		if (!items)
			return -ENOMEM;
		c->items = items;
		c->cap = cap;
	}
	/* Keep the table at most half full; entries replaced by address reuse
	 * keep their slot, so count bounds the occupancy. */
	if ((c->count + 1) * 2 > c->nslots) {
		uint32_t n = c->nslots ? c->nslots * 2 : 128;
		uint32_t *slots = sp_calloc(n, sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		sp_free(c->slots);
		c->slots = slots;
		c->nslots = n;
		for (uint32_t id = 0; id < c->count; id++) {
			uint32_t *s = codes_slot(c, c->items[id].addr);
			if (*s == 0 || c->items[*s - 1].addr == c->items[id].addr)
				*s = id + 1; /* The newest entry per address wins. */
		}
	}
	return 0;
}

/* ---- strings -------------------------------------------------------------- */

static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp == 0 || (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
		cp = '?';
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Where a str's characters are, from its header. */
typedef struct str_loc {
	uint64_t data;
	uint32_t kind;  /* Bytes per character: 1, 2 or 4. */
	uint32_t chars; /* Characters to read (capped). */
	int ascii;
} str_loc;

static int str_locate(const sp_py_walker *w, uint64_t addr, const uint8_t *hdr, str_loc *loc)
{
	const sp_py_layout *l = w->layout;
	if (w->types.unicode && sp_le64(hdr + l->ob_type) != w->types.unicode)
		return STACKPULSE_EFORMAT;
	uint64_t length = sp_le64(hdr + l->str_length);
	uint32_t state = sp_le32(hdr + l->str_state);
	uint32_t kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return STACKPULSE_EFORMAT;
	if (length > (1u << 30))
		return STACKPULSE_EFORMAT;
	loc->chars = length > SP_PY_MAX_STR ? SP_PY_MAX_STR : (uint32_t)length;
	loc->kind = kind;
	loc->ascii = (int)ascii;
	loc->data = addr + (ascii ? l->str_ascii : l->str_compact);
	return 0;
}

/* Converts @p n characters of @p kind at @p raw to a new UTF-8 string. */
static char *str_convert(const uint8_t *raw, const str_loc *loc)
{
	char *s = sp_malloc((size_t)loc->chars * 4 + 1);
	if (!s)
		return NULL;
	size_t o = 0;
	for (uint32_t i = 0; i < loc->chars; i++) {
		uint32_t cp;
		if (loc->kind == 1)
			cp = raw[i];
		else if (loc->kind == 2)
			cp = sp_le16(raw + 2 * (size_t)i);
		else
			cp = sp_le32(raw + 4 * (size_t)i);
		if (loc->ascii && cp >= 0x80)
			cp = '?';
		o += put_utf8(s + o, cp);
	}
	s[o] = 0;
	return s;
}

/* ---- code objects ---------------------------------------------------------- */

/* Decodes a new code object from its header @p hdr. */
static int code_decode(sp_py_walker *w, uint64_t addr, const uint8_t *hdr, sp_py_code *out)
{
	const sp_py_layout *l = w->layout;
	uint64_t fname = sp_le64(hdr + l->code_filename);
	uint64_t qname =
	        sp_le64(hdr + (l->code_qualname != SP_PY_NONE ? l->code_qualname : l->code_name));
	uint64_t ltab = sp_le64(hdr + l->code_linetable);
	if (!plausible(fname, 8) || !plausible(qname, 8) || !plausible(ltab, 8))
		return STACKPULSE_EFORMAT;

	uint8_t fh[256], qh[256], lh[256];
	sp_py_iov iov[3] = { { fname, fh, l->str_compact, 0 },
		             { qname, qh, l->str_compact, 0 },
		             { ltab, lh, l->bytes_data, 0 } };
	int rc = sp_py_mem_read(&w->mem, iov, 3);
	if (rc < 0)
		return rc == STACKPULSE_ENOTFOUND ? STACKPULSE_EFORMAT : rc;
	str_loc floc, qloc;
	if (str_locate(w, fname, fh, &floc) || str_locate(w, qname, qh, &qloc))
		return STACKPULSE_EFORMAT;
	if (w->types.bytes && sp_le64(lh + l->ob_type) != w->types.bytes)
		return STACKPULSE_EFORMAT;
	uint64_t llen = sp_le64(lh + l->var_size);
	if (llen > (1u << 30))
		return STACKPULSE_EFORMAT;

	uint8_t *fraw = sp_malloc((size_t)floc.chars * floc.kind + 1);
	uint8_t *qraw = sp_malloc((size_t)qloc.chars * qloc.kind + 1);
	uint8_t *table = llen <= SP_PY_MAX_LINETABLE ? sp_malloc((size_t)llen + 1) : NULL;
	rc = -ENOMEM;
	if (!fraw || !qraw || (llen <= SP_PY_MAX_LINETABLE && !table))
		goto out;
	sp_py_iov d[3] = { { floc.data, fraw, floc.chars * floc.kind, 0 },
		           { qloc.data, qraw, qloc.chars * qloc.kind, 0 },
		           { ltab + l->bytes_data, table, table ? (uint32_t)llen : 0, 0 } };
	rc = sp_py_mem_read(&w->mem, d, 3);
	if (rc < 0) {
		rc = rc == STACKPULSE_ENOTFOUND ? STACKPULSE_EFORMAT : rc;
		goto out;
	}
	memset(out, 0, sizeof(*out));
	out->addr = addr;
	out->filename = str_convert(fraw, &floc);
	out->qualname = str_convert(qraw, &qloc);
	if (!out->filename || !out->qualname) {
		sp_free(out->filename);
		sp_free(out->qualname);
		rc = -ENOMEM;
		goto out;
	}
	out->first_line = (int32_t)sp_le32(hdr + l->code_firstlineno);
	out->linetable = table;
	out->linetable_len = table ? (uint32_t)llen : 0;
	table = NULL;
	out->user = UINT32_MAX;
	if (l->code_adaptive != SP_PY_NONE) {
		uint64_t units = sp_le64(hdr + l->var_size);
		out->code_units = units > (1u << 28) ? 0 : (uint32_t)units;
	}
	out->synthetic =
	        (w->types.init_cleanup && addr == w->types.init_cleanup) ||
	        ((l->version >> 16) >= 0x030d && out->linetable_len == 0 &&
	         strcmp(out->filename, "__init__") == 0 && strcmp(out->qualname, "__init__") == 0);
	rc = 0;
out:
	sp_free(fraw);
	sp_free(qraw);
	sp_free(table);
	return rc;
}

static void code_fingerprint(const sp_py_layout *l, const uint8_t *hdr, uint64_t fp[4])
{
	fp[0] = sp_le64(hdr + l->code_filename);
	fp[1] = sp_le64(hdr + (l->code_qualname != SP_PY_NONE ? l->code_qualname : l->code_name));
	fp[2] = sp_le64(hdr + l->code_linetable);
	fp[3] = sp_le32(hdr + l->code_firstlineno) |
	        (l->code_adaptive != SP_PY_NONE ? sp_le64(hdr + l->var_size) << 32 : 0);
}

/* Interns the code object at @p addr whose header @p hdr was just read. */
static int code_intern_hdr(sp_py_walker *w, uint64_t addr, const uint8_t *hdr, uint32_t *id)
{
	const sp_py_layout *l = w->layout;
	if (!w->types.code || sp_le64(hdr + l->ob_type) != w->types.code)
		return STACKPULSE_EFORMAT;
	uint64_t fp[4];
	code_fingerprint(l, hdr, fp);
	sp_py_codes *c = w->codes;
	if (c->nslots) {
		uint32_t s = *codes_slot(c, addr);
		if (s && memcmp(c->items[s - 1].fingerprint, fp, sizeof(fp)) == 0) {
			*id = s - 1;
			return 0;
		}
	}
	int rc = codes_grow(c);
	if (rc)
		return rc;
	sp_py_code code;
	rc = code_decode(w, addr, hdr, &code);
	if (rc)
		return rc;
	memcpy(code.fingerprint, fp, sizeof(fp));
	c->items[c->count] = code;
	*codes_slot(c, addr) = c->count + 1;
	*id = c->count++;
	return 0;
}

int sp_py_code_intern(sp_py_walker *w, uint64_t addr, uint32_t *id)
{
	uint8_t hdr[SP_PY_MAX_BLOCK];
	if (!plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = read1(&w->mem, addr, hdr, w->layout->code_read);
	if (rc)
		return rc == STACKPULSE_ENOTFOUND ? STACKPULSE_EFORMAT : rc;
	return code_intern_hdr(w, addr, hdr, id);
}

/* ---- line tables ------------------------------------------------------------ */

static uint32_t lt_varint(const uint8_t *t, size_t len, size_t *i)
{
	uint32_t v = 0, shift = 0;
	while (*i < len) {
		uint8_t b = t[(*i)++];
		if (shift < 32)
			v |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64))
			break;
	}
	return v;
}

static int32_t lt_svarint(const uint8_t *t, size_t len, size_t *i)
{
	uint32_t v = lt_varint(t, len, i);
	return (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
}

int32_t sp_py_line(int format, const uint8_t *t, size_t len, int32_t first_line, int64_t offset)
{
	if (offset < 0)
		return first_line;
	if (!t)
		return 0;
	int64_t line = first_line, addr = 0;
	if (format == SP_PY_LINETABLE_310) {
		/* (unsigned byte delta, signed line delta); -128: no line. */
		for (size_t i = 0; i + 1 < len; i += 2) {
			int64_t start = addr;
			int8_t ld = (int8_t)t[i + 1];
			addr += t[i];
			int no_line = ld == -128;
			if (!no_line)
				line += ld;
			if (offset >= start && offset < addr)
				return no_line || line < 0 || line > INT32_MAX ? 0 : (int32_t)line;
		}
		return 0;
	}
	for (size_t i = 0; i < len;) {
		uint8_t b = t[i];
		if (!(b & 0x80))
			return 0; /* Not at an entry start: malformed. */
		uint32_t code = (b >> 3) & 15;
		int64_t end = addr + 2 * ((b & 7) + 1);
		size_t j = i + 1;
		int no_line = 0;
		if (code == 15)
			no_line = 1;
		else if (code == 13 || code == 14)
			line += lt_svarint(t, len, &j);
		else if (code >= 10)
			line += code - 10;
		if (offset >= addr && offset < end)
			return no_line || line < 0 || line > INT32_MAX ? 0 : (int32_t)line;
		addr = end;
		/* Entries start at the next byte with bit 7 set. */
		for (i = i + 1; i < len && !(t[i] & 0x80); i++)
			;
	}
	return 0;
}

/* ---- thread states -------------------------------------------------------------- */

int sp_py_read_tstate(sp_py_walker *w, uint64_t addr, sp_py_tstate *out)
{
	const sp_py_layout *l = w->layout;
	uint8_t b[SP_PY_MAX_BLOCK];
	if (!plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = read1(&w->mem, addr, b, l->tstate_read);
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
	} else if (w->pthread_tid && plausible(out->thread_id, 8)) {
		uint8_t t[4];
		if (read1(&w->mem, out->thread_id + w->pthread_tid, t, 4) == 0) {
			uint32_t v = sp_le32(t);
			if (v > 0 && v <= INT32_MAX)
				out->tid = v;
		}
	}
	if (l->cframe_current_frame != SP_PY_NONE && out->frame) {
		uint8_t f[8];
		if (!plausible(out->frame, 8) ||
		    read1(&w->mem, out->frame + l->cframe_current_frame, f, 8) != 0)
			out->frame = 0;
		else
			out->frame = sp_le64(f);
	}
	return 0;
}

int sp_py_list_tstates(sp_py_walker *w, uint64_t runtime, uint64_t *addrs, uint32_t max,
                       uint32_t *n)
{
	const sp_py_layout *l = w->layout;
	uint8_t v[8];
	*n = 0;
	int rc = read1(&w->mem, runtime + l->runtime_interpreters_head, v, 8);
	if (rc)
		return rc;
	uint64_t interp = sp_le64(v);
	for (uint32_t ni = 0; interp; ni++) {
		if (ni >= SP_PY_MAX_INTERPS || !plausible(interp, 8))
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

/* ---- frame walk ------------------------------------------------------------------ */

/* A frame read but not yet resolved (its code object is fetched together
 * with the next frame, halving the number of read calls). */
typedef struct pending {
	uint64_t code;
	uint64_t instr;
	int entry;
} pending;

/* Resolves @p p with the code header @p hdr into @p out. Returns 1 when a
 * frame was written, 0 when it is a hidden frame, or a negative code. */
static int resolve(sp_py_walker *w, const pending *p, const uint8_t *hdr, sp_py_frame *out)
{
	const sp_py_layout *l = w->layout;
	uint32_t id;
	memset(out, 0, sizeof(*out));
	int rc = code_intern_hdr(w, p->code, hdr, &id);
	if (rc)
		return rc;
	const sp_py_code *c = &w->codes->items[id];
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
	out->flags = p->entry ? SP_PY_FRAME_ENTRY : 0;
	out->offset = off < 0 ? 0 : (uint32_t)off;
	out->line = sp_py_line(l->linetable, c->linetable, c->linetable_len, c->first_line, off);
	return 1;
}

/* What a walk read of each frame it used, to check it again. */
typedef struct frame_rec {
	uint64_t addr;
	uint8_t bytes[24]; /* previous, code, instr fields as read */
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
		if (!plausible(addr, 8) || !mem_peek(&w->mem, addr, fb, l->frame_read))
			break;
		uint64_t code = sp_le64(fb + l->frame_code);
		if (l->code_tagged)
			code &= ~(uint64_t)7;
		int shim = l->frame_owner != SP_PY_NONE && fb[l->frame_owner] >= l->owner_first_c;
		if (!shim && plausible(code, 8) && USER_MAX - code >= l->code_read) {
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

static int walk_once(sp_py_walker *w, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
                     int *truncated, frame_rec *recs, uint32_t *nrecs)
{
	const sp_py_layout *l = w->layout;
	uint8_t fb[SP_PY_MAX_BLOCK], cb[SP_PY_MAX_BLOCK];
	uint64_t addr = top;
	pending p = { 0, 0, 0 };
	int have = 0;
	uint32_t count = 0, steps = 0, group_start = 0;
	*n = 0;
	*nrecs = 0;
	*truncated = 0;
	if (max > SP_PY_MAX_DEPTH)
		max = SP_PY_MAX_DEPTH;
	/* 3.11+ frames sit below the top one in the thread's data stack:
	 * take them in one read, close to one instant. */
	if (!l->instr_is_lasti && plausible(top, 8))
		sp_py_mem_prefetch(&w->mem, top, SP_PY_PREFETCH);
	if (w->mem.pages)
		prefetch_codes(w, top);
	for (;;) {
		if (addr && (!plausible(addr, 8) || ++steps > 2 * SP_PY_MAX_DEPTH + 2)) {
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
		if (addr) {
			iov[ni] = (sp_py_iov){ addr, fb, l->frame_read, 0 };
			fi = ni++;
		}
		if (have) {
			iov[ni] = (sp_py_iov){ p.code, cb, l->code_read, 0 };
			ci = ni++;
		}
		if (ni == 0)
			break;
		int rc = sp_py_mem_read(&w->mem, iov, ni);
		if (rc < 0 && rc != STACKPULSE_ENOTFOUND)
			return rc == -ENOMEM ? rc : (*truncated = 1, 0);
		if (have) {
			rc = iov[ci].ok ? resolve(w, &p, cb, &out[count]) : STACKPULSE_EFORMAT;
			if (rc == -ENOMEM)
				return rc;
			if (rc < 0) {
				*truncated = 1;
				break;
			}
			if (rc == 1)
				count++;
			have = 0;
		}
		if (fi == UINT32_MAX)
			break;
		if (!iov[fi].ok) {
			*truncated = 1;
			break;
		}
		if (l->frame_type != SP_PY_NONE && w->types.frame &&
		    sp_le64(fb + l->frame_type) != w->types.frame) {
			*truncated = 1;
			break;
		}
		if (*nrecs < 2 * SP_PY_MAX_DEPTH + 2 && !in_stack(&w->mem, addr, l->frame_read)) {
			recs[*nrecs].addr = addr;
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
				addr = prev;
				continue;
			}
			if (owner > 2) {
				*truncated = 1;
				break;
			}
		}
		if (!plausible(code, 8)) {
			*truncated = 1;
			break;
		}
		p.code = code;
		p.instr = l->instr_is_lasti ? sp_le32(fb + l->frame_instr)
		                            : sp_le64(fb + l->frame_instr);
		/* 3.10: every frame has its own eval activation. */
		p.entry = l->instr_is_lasti ||
		          (l->frame_is_entry != SP_PY_NONE && fb[l->frame_is_entry] != 0);
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
 * the time of this read), 0 when one changed, -1 when it cannot tell. */
static int verify(sp_py_walker *w, const frame_rec *recs, uint32_t nrecs)
{
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
				return 0; /* unmapped since: the stack shrank */
			memcpy(fb + (lo - recs[i].addr), (uint8_t *)iov[k].buf + (lo - p), hi - lo);
			got += (uint32_t)(hi - lo);
		}
		if (got != l->frame_read)
			return -1;
		rec_fields(l, fb, now);
		/* Links and code only: a frame that merely moved to another
		 * instruction is still the same call, with a slightly later line. */
		if (memcmp(now, recs[i].bytes, 16) != 0)
			return 0;
	}
	return 1;
}

int sp_py_walk(sp_py_walker *w, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
               int *truncated)
{
	frame_rec *recs = sp_malloc((2 * SP_PY_MAX_DEPTH + 2) * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	uint32_t nrecs;
	int rc = walk_once(w, top, out, max, n, truncated, recs, &nrecs);
	if (rc == 0 && w->mem.verify && verify(w, recs, nrecs) == 0) {
		/* Changed under the reader: return nothing rather than a mix. */
		w->mem.torn++;
		*n = 0;
		*truncated = 1;
		rc = STACKPULSE_ESTATE;
	}
	sp_free(recs);
	return rc;
}
