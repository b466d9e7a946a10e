/* CPython code objects: the per-process code cache, str and bytes
 * decoding, code-object interning and line tables (see memory.h).
 * Pure: all target memory comes through the walker's read callback. */
#include "python/memory.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"

/* ---- code cache ----------------------------------------------------------- */

#define GEN_SHIFT 20u /* id = slot | generation << GEN_SHIFT (SP_PY_MAX_CODES slots). */
#define GEN_MASK  0xfffu

struct sp_py_codes {
	sp_py_code *items;
	uint32_t count, cap; /* Slots ever used, allocated. */
	uint32_t live;       /* Slots holding a code object. */
	uint32_t *free_ids;  /* Evicted slots to reuse (cap entries). */
	uint32_t nfree;
	uint32_t *slots;  /* Slot + 1 per hash bucket; 0 is empty. */
	uint32_t nslots;  /* Power of two. */
	uint32_t in_hash; /* Entries in the hash. */
	uint32_t hand;    /* Clock hand. */
	uint64_t epoch;   /* Walks begun. */
	uint64_t bytes, budget;
	uint64_t *shared, *shared_peak, shared_limit;
	uint64_t evicted, refused;
};

int sp_py_codes_new(sp_py_codes **out)
{
	sp_py_codes *c = sp_calloc(1, sizeof(*c));
	if (!c)
		return sp_error(-ENOMEM, "python code cache");
	c->budget = SP_PY_CODE_BUDGET;
	c->shared_limit = SP_PY_CODE_BUDGET_TOTAL;
	*out = c;
	return 0;
}

static void entry_release(sp_py_code *e)
{
	sp_free(e->qualname);
	sp_free(e->filename);
	sp_free(e->linetable);
	e->qualname = e->filename = NULL;
	e->linetable = NULL;
}

void sp_py_codes_free(sp_py_codes *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->count; i++)
		if (c->items[i].live)
			entry_release(&c->items[i]);
	if (c->shared)
		*c->shared -= c->bytes;
	sp_free(c->items);
	sp_free(c->free_ids);
	sp_free(c->slots);
	sp_free(c);
}

sp_py_code *sp_py_codes_get(sp_py_codes *c, uint32_t id)
{
	uint32_t i = id & (SP_PY_MAX_CODES - 1);
	if (i >= c->count || !c->items[i].live || c->items[i].gen != (id >> GEN_SHIFT))
		return NULL;
	return &c->items[i];
}

void sp_py_codes_set_budget(sp_py_codes *c, uint64_t budget, uint64_t *shared,
                            uint64_t *shared_peak, uint64_t shared_limit)
{
	c->budget = budget ? budget : SP_PY_CODE_BUDGET;
	if (c->shared)
		*c->shared -= c->bytes;
	c->shared = shared;
	c->shared_peak = shared_peak;
	c->shared_limit = shared_limit ? shared_limit : SP_PY_CODE_BUDGET_TOTAL;
	if (shared) {
		*shared += c->bytes;
		if (shared_peak && *shared > *shared_peak)
			*shared_peak = *shared;
	}
}

void sp_py_codes_walk_begin(sp_py_codes *c)
{
	c->epoch++;
}

void sp_py_codes_get_usage(const sp_py_codes *c, sp_py_codes_usage *out)
{
	out->bytes = c->bytes;
	out->evicted = c->evicted;
	out->refused = c->refused;
	out->count = c->live;
}

static uint32_t code_id(const sp_py_codes *c, uint32_t slot)
{
	return slot | ((uint32_t)c->items[slot].gen << GEN_SHIFT);
}

/* Bucket for @p addr: its current entry or the empty bucket to fill. */
static uint32_t *codes_slot(sp_py_codes *c, uint64_t addr)
{
	uint32_t mask = c->nslots - 1, i = (uint32_t)sp_hash64(addr) & mask;
	while (c->slots[i] && c->items[c->slots[i] - 1].addr != addr)
		i = (i + 1) & mask;
	return &c->slots[i];
}

/* Takes entry @p slot out of the hash (backward-shift deletion, so
 * lookups never need tombstones). */
static void hash_remove(sp_py_codes *c, uint32_t slot)
{
	uint32_t mask = c->nslots - 1;
	uint32_t i = (uint32_t)(codes_slot(c, c->items[slot].addr) - c->slots);
	if (c->slots[i] != slot + 1)
		return;
	c->slots[i] = 0;
	for (uint32_t j = (i + 1) & mask; c->slots[j]; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)sp_hash64(c->items[c->slots[j] - 1].addr) & mask;
		/* Move it back when its home is not cyclically within (i, j]. */
		int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			c->slots[i] = c->slots[j];
			c->slots[j] = 0;
			i = j;
		}
	}
	c->items[slot].in_hash = 0;
	c->in_hash--;
}

static int hash_reserve(sp_py_codes *c)
{
	/* At most half full. */
	if ((c->in_hash + 1) * 2 <= c->nslots)
		return 0;
	uint32_t n = c->nslots ? c->nslots * 2 : 128;
	uint32_t *slots = sp_calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	sp_free(c->slots);
	c->slots = slots;
	c->nslots = n;
	for (uint32_t i = 0; i < c->count; i++)
		if (c->items[i].live && c->items[i].in_hash)
			*codes_slot(c, c->items[i].addr) = i + 1;
	return 0;
}

static void entry_evict(sp_py_codes *c, uint32_t slot)
{
	sp_py_code *e = &c->items[slot];
	if (e->in_hash)
		hash_remove(c, slot);
	entry_release(e);
	c->bytes -= e->bytes;
	if (c->shared)
		*c->shared -= e->bytes;
	e->live = 0;
	e->gen = (uint16_t)((e->gen + 1) & GEN_MASK);
	c->live--;
	c->free_ids[c->nfree++] = slot;
	c->evicted++;
}

/* Clock: evicts one entry not used by the last SP_PY_CODE_PIN_WALKS walks,
 * giving recently used ones a second chance. 0 when none can go. */
static int evict_one(sp_py_codes *c)
{
	for (uint64_t steps = 0; c->count && steps < 2ull * c->count; steps++) {
		uint32_t i = c->hand;
		c->hand = (c->hand + 1) % c->count;
		sp_py_code *e = &c->items[i];
		if (!e->live || e->used_walk + SP_PY_CODE_PIN_WALKS > c->epoch)
			continue;
		if (e->ref && e->in_hash) {
			e->ref = 0;
			continue;
		}
		entry_evict(c, i);
		return 1;
	}
	return 0;
}

static int over_budget(const sp_py_codes *c, uint64_t need)
{
	return c->bytes + need > c->budget || (c->shared && *c->shared + need > c->shared_limit);
}

/* A free slot for an entry of @p need bytes, evicting as needed. */
static int codes_make_room(sp_py_codes *c, uint64_t need, uint32_t *slot)
{
	while (over_budget(c, need) || (!c->nfree && c->count >= SP_PY_MAX_CODES)) {
		if (!evict_one(c)) {
			c->refused++;
			return STACKPULSE_ELIMIT;
		}
	}
	if (c->nfree) {
		*slot = c->free_ids[--c->nfree];
		return 0;
	}
	if (!c->items || c->count >= c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 64;
		sp_py_code *items = sp_realloc_array(c->items, cap, sizeof(*items));
		if (!items)
			return -ENOMEM;
		c->items = items;
		uint32_t *free_ids = sp_realloc_array(c->free_ids, cap, sizeof(*free_ids));
		if (!free_ids)
			return -ENOMEM;
		c->free_ids = free_ids;
		c->cap = cap;
	}
	*slot = c->count++;
	c->items[*slot].gen = 0;
	c->items[*slot].live = 0;
	return 0;
}

/* Inserts the decoded @p code (owning its strings) and returns its id. */
static int codes_insert(sp_py_codes *c, sp_py_code *code, uint32_t *id)
{
	uint64_t need = sizeof(sp_py_code) + 2 * sizeof(uint32_t) + strlen(code->qualname) + 1 +
	                strlen(code->filename) + 1 + code->linetable_len;
	uint32_t slot = 0;
	int rc = codes_make_room(c, need, &slot);
	if (rc) {
		entry_release(code);
		return rc;
	}
	if ((rc = hash_reserve(c)) != 0) {
		c->free_ids[c->nfree++] = slot; /* Unused: back to the free list. */
		entry_release(code);
		return rc;
	}
	uint32_t *bucket = codes_slot(c, code->addr);
	if (*bucket) {
		/* The address came back as another object: the old entry stays
		 * for ids already handed out, out of the hash. */
		c->items[*bucket - 1].in_hash = 0;
		c->in_hash--;
	}
	uint16_t gen = c->items[slot].gen;
	c->items[slot] = *code;
	sp_py_code *e = &c->items[slot];
	e->gen = gen;
	e->live = 1;
	e->in_hash = 1;
	e->ref = 1;
	e->used_walk = c->epoch;
	e->bytes = (uint32_t)need;
	*bucket = slot + 1;
	c->in_hash++;
	c->live++;
	c->bytes += need;
	if (c->shared) {
		*c->shared += need;
		if (c->shared_peak && *c->shared > *c->shared_peak)
			*c->shared_peak = *c->shared;
	}
	*id = code_id(c, slot);
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

int sp_py_read_str(sp_py_walker *w, uint64_t addr, char *out, size_t cap)
{
	const sp_py_layout *l = w->layout;
	uint8_t hdr[256];
	str_loc loc;
	if (cap == 0)
		return STACKPULSE_ELIMIT;
	out[0] = 0;
	if (!sp_py_plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, addr, hdr, l->str_compact);
	if (rc)
		return rc;
	if (str_locate(w, addr, hdr, &loc))
		return STACKPULSE_EFORMAT;
	/* No more characters than could fit. */
	if (loc.chars > cap - 1)
		loc.chars = (uint32_t)(cap - 1);
	uint8_t raw[4 * SP_PY_MAX_STR];
	if (loc.chars > SP_PY_MAX_STR)
		loc.chars = SP_PY_MAX_STR;
	if ((rc = sp_py_mem_read1(&w->mem, loc.data, raw, loc.chars * loc.kind)) != 0)
		return rc;
	size_t o = 0;
	for (uint32_t i = 0; i < loc.chars; i++) {
		uint32_t cp = loc.kind == 1   ? raw[i]
		              : loc.kind == 2 ? sp_le16(raw + 2 * (size_t)i)
		                              : sp_le32(raw + 4 * (size_t)i);
		if (loc.ascii && cp >= 0x80)
			cp = '?';
		char u[4];
		size_t k = put_utf8(u, cp);
		if (o + k > cap - 1)
			break;
		memcpy(out + o, u, k);
		o += k;
	}
	out[o] = 0;
	return 0;
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
	if (!sp_py_plausible(fname, 8) || !sp_py_plausible(qname, 8) || !sp_py_plausible(ltab, 8))
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
	out->frame_words = sp_py_frame_words(l, hdr);
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
int sp_py_code_intern_hdr(sp_py_walker *w, uint64_t addr, const uint8_t *hdr, uint32_t *id)
{
	const sp_py_layout *l = w->layout;
	if (!w->types.code || sp_le64(hdr + l->ob_type) != w->types.code)
		return STACKPULSE_EFORMAT;
	uint64_t fp[4];
	code_fingerprint(l, hdr, fp);
	sp_py_codes *c = w->codes;
	if (c->nslots) {
		uint32_t s = *codes_slot(c, addr);
		sp_py_code *e = s ? &c->items[s - 1] : NULL;
		if (e && memcmp(e->fingerprint, fp, sizeof(fp)) == 0) {
			e->ref = 1;
			e->used_walk = c->epoch;
			*id = code_id(c, s - 1);
			return 0;
		}
	}
	sp_py_code code;
	int rc = code_decode(w, addr, hdr, &code);
	if (rc)
		return rc;
	memcpy(code.fingerprint, fp, sizeof(fp));
	return codes_insert(c, &code, id);
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
