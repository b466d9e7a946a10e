#include "symcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/htab.h"
#include "common/search.h"

static const uint8_t magic[4] = { 'S', 'P', 'S', 'C' };

/* ------------------------------------------------------------------ */
/* Decoding */

int sp_symcache_validate(const uint8_t *data, size_t len, sp_symcache *out)
{
	if (!data || len < SP_SYMCACHE_HEADER_SIZE + 4)
		return sp_error(STACKPULSE_ETRUNCATED, "symcache: %zu bytes, need at least %d", len,
		                SP_SYMCACHE_HEADER_SIZE + 4);
	if (memcmp(data, magic, 4) != 0)
		return sp_error(STACKPULSE_EFORMAT, "symcache: bad magic");
	uint16_t version = sp_le16(data + 4);
	if (version != SP_SYMCACHE_VERSION)
		return sp_error(STACKPULSE_EVERSION, "symcache: version %u unsupported", version);
	if (sp_le16(data + 6) != 0)
		return sp_error(STACKPULSE_EFORMAT, "symcache: reserved flags set");
	uint32_t total = sp_le32(data + 8);
	if ((size_t)total != len)
		return sp_error(len < total ? STACKPULSE_ETRUNCATED : STACKPULSE_EFORMAT,
		                "symcache: header says %u bytes, have %zu", total, len);
	uint32_t bid_len = data[12];
	if (bid_len > SP_SYMCACHE_MAX_BUILD_ID)
		return sp_error(STACKPULSE_EFORMAT, "symcache: build-id length %u", bid_len);
	if (data[13] || data[14] || data[15] || sp_le32(data + 28) != 0)
		return sp_error(STACKPULSE_EFORMAT, "symcache: reserved header bytes set");
	for (uint32_t i = bid_len; i < SP_SYMCACHE_MAX_BUILD_ID; i++)
		if (data[32 + i])
			return sp_error(STACKPULSE_EFORMAT, "symcache: build-id padding not zero");
	uint32_t nranges = sp_le32(data + 16);
	uint32_t ninl = sp_le32(data + 20);
	uint32_t nstr = sp_le32(data + 24);
	if (nranges > SP_SYMCACHE_MAX_RANGES || ninl > SP_SYMCACHE_MAX_INLINES ||
	    nstr > SP_SYMCACHE_MAX_STRINGS)
		return sp_error(STACKPULSE_ELIMIT,
		                "symcache: %u ranges, %u inlines, %u string bytes", nranges, ninl,
		                nstr);
	/* 64-bit math: the limits above keep this far from overflow. */
	uint64_t want = (uint64_t)SP_SYMCACHE_HEADER_SIZE +
	                (uint64_t)nranges * SP_SYMCACHE_RANGE_SIZE +
	                (uint64_t)ninl * SP_SYMCACHE_INLINE_SIZE + nstr + 4;
	if (want != len)
		return sp_error(STACKPULSE_EFORMAT,
		                "symcache: sections need %llu bytes, table has %zu",
		                (unsigned long long)want, len);
	uint32_t crc = sp_crc32c(0, data, len - 4);
	if (crc != sp_le32(data + len - 4))
		return sp_error(STACKPULSE_ECHECKSUM, "symcache: checksum mismatch");

	const uint8_t *ranges = data + SP_SYMCACHE_HEADER_SIZE;
	const uint8_t *inl = ranges + (size_t)nranges * SP_SYMCACHE_RANGE_SIZE;
	const char *strs = (const char *)(inl + (size_t)ninl * SP_SYMCACHE_INLINE_SIZE);
	if (nstr > 0 && strs[nstr - 1] != '\0')
		return sp_error(STACKPULSE_EFORMAT, "symcache: string table not NUL-terminated");
#define STR_OK(v) ((v) == SP_SYMCACHE_NONE || (v) < nstr)
	for (uint32_t i = 0; i < ninl; i++) {
		const uint8_t *r = inl + (size_t)i * SP_SYMCACHE_INLINE_SIZE;
		uint32_t name = sp_le32(r), file = sp_le32(r + 4), parent = sp_le32(r + 12);
		if (name == SP_SYMCACHE_NONE || name >= nstr || !STR_OK(file))
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: inline %u: string out of range", i);
		if (parent != SP_SYMCACHE_NONE && parent >= i)
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: inline %u: parent %u not earlier", i, parent);
		/* Parents strictly decrease, so this walk ends; bound its depth. */
		uint32_t depth = 1;
		while (parent != SP_SYMCACHE_NONE) {
			if (++depth > SP_SYMCACHE_MAX_INLINE_DEPTH)
				return sp_error(STACKPULSE_ELIMIT,
				                "symcache: inline %u: chain deeper than %d", i,
				                SP_SYMCACHE_MAX_INLINE_DEPTH);
			parent = sp_le32(inl + (size_t)parent * SP_SYMCACHE_INLINE_SIZE + 12);
		}
	}
	uint64_t prev_end = 0;
	for (uint32_t i = 0; i < nranges; i++) {
		const uint8_t *r = ranges + (size_t)i * SP_SYMCACHE_RANGE_SIZE;
		uint64_t start = sp_le64(r);
		uint32_t rlen = sp_le32(r + 8);
		uint32_t name = sp_le32(r + 12), file = sp_le32(r + 16), chain = sp_le32(r + 24);
		if (rlen == 0 || start > UINT64_MAX - rlen)
			return sp_error(STACKPULSE_EFORMAT, "symcache: range %u: bad length %u", i,
			                rlen);
		if (i > 0 && start < prev_end)
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: range %u: not sorted or overlapping", i);
		prev_end = start + rlen;
		if (!STR_OK(name) || !STR_OK(file))
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: range %u: string out of range", i);
		if (chain != SP_SYMCACHE_NONE && chain >= ninl)
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: range %u: inline %u out of range", i, chain);
		if (sp_le32(r + 28) != 0)
			return sp_error(STACKPULSE_EFORMAT,
			                "symcache: range %u: reserved bytes set", i);
	}
#undef STR_OK
	memset(out, 0, sizeof(*out));
	out->data = data;
	out->len = len;
	memcpy(out->build_id, data + 32, bid_len);
	out->build_id_len = bid_len;
	out->range_count = nranges;
	out->inline_count = ninl;
	out->strings_size = nstr;
	out->ranges = ranges;
	out->inlines = inl;
	out->strings = strs;
	return 0;
}

static const char *str_at(const sp_symcache *t, uint32_t off)
{
	return off == SP_SYMCACHE_NONE ? NULL : t->strings + off;
}

uint32_t sp_symcache_range(const sp_symcache *t, uint32_t i, sp_symcache_frame *frames,
                           uint32_t max, uint64_t *start, uint32_t *range_len)
{
	if (i >= t->range_count || max == 0)
		return 0;
	const uint8_t *r = t->ranges + (size_t)i * SP_SYMCACHE_RANGE_SIZE;
	if (start)
		*start = sp_le64(r);
	if (range_len)
		*range_len = sp_le32(r + 8);
	const char *file = str_at(t, sp_le32(r + 16));
	uint32_t line = sp_le32(r + 20);
	uint32_t chain = sp_le32(r + 24);
	uint32_t n = 0;
	/* Validation bounds the chain at MAX_INLINE_DEPTH records. */
	while (chain != SP_SYMCACHE_NONE && n + 1 < max) {
		const uint8_t *c = t->inlines + (size_t)chain * SP_SYMCACHE_INLINE_SIZE;
		frames[n].name = str_at(t, sp_le32(c));
		frames[n].file = file;
		frames[n].line = line;
		n++;
		file = str_at(t, sp_le32(c + 4));
		line = sp_le32(c + 8);
		chain = sp_le32(c + 12);
	}
	frames[n].name = str_at(t, sp_le32(r + 12));
	frames[n].file = file;
	frames[n].line = line;
	return n + 1;
}

uint32_t sp_symcache_lookup(const sp_symcache *t, uint64_t off, sp_symcache_frame *frames,
                            uint32_t max, uint64_t *start, uint32_t *range_len)
{
	/* Find the last range starting at or before off. */
	size_t lo;
	SP_PARTITION_POINT(lo, t->range_count, mid,
	                   sp_le64(t->ranges + mid * SP_SYMCACHE_RANGE_SIZE) <= off);
	if (lo == 0)
		return 0;
	const uint8_t *r = t->ranges + (size_t)(lo - 1) * SP_SYMCACHE_RANGE_SIZE;
	if (off - sp_le64(r) >= sp_le32(r + 8))
		return 0;
	return sp_symcache_range(t, (uint32_t)(lo - 1), frames, max, start, range_len);
}

/* ------------------------------------------------------------------ */
/* Building */

typedef struct bentry {
	uint64_t start;
	uint32_t len;
	uint32_t name, file, line, chain;
	uint64_t seq; /* Insertion order: later wins. */
} bentry;

typedef struct binline {
	uint32_t name, file, line, parent;
} binline;

struct sp_symcache_builder {
	uint8_t build_id[SP_SYMCACHE_MAX_BUILD_ID];
	uint32_t build_id_len;
	sp_buf strings;  /* Concatenated NUL-terminated strings. */
	sp_htab str_map; /* String offsets, keyed by content. */
	binline *inl;    /* Inline records, parents first. */
	size_t ninl, inl_cap;
	sp_htab inl_map;
	bentry *ent;
	size_t nent, ent_cap;
	int keep_starts; /* No joining of equal neighbours. */
};

static uint64_t inl_hash(const binline *r)
{
	uint64_t h = sp_hash64(r->name);
	h = sp_hash_combine(h, r->file);
	h = sp_hash_combine(h, r->line);
	return sp_hash_combine(h, r->parent);
}

/* Interns @p s, returning its offset in *off (NONE for NULL). */
static int intern_str(sp_symcache_builder *b, const char *s, uint32_t *off)
{
	if (!s) {
		*off = SP_SYMCACHE_NONE;
		return 0;
	}
	size_t n = strlen(s);
	int rc = sp_htab_reserve(&b->str_map);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&b->str_map, sp_hash_bytes(s, n), &pr);
	uint32_t o;
	while ((o = sp_htab_probe_next(&b->str_map, &pr)) != SP_HTAB_NONE) {
		if (strcmp((const char *)b->strings.data + o, s) == 0) {
			*off = o;
			return 0;
		}
	}
	if (b->strings.len + n + 1 > SP_SYMCACHE_MAX_STRINGS)
		return sp_error(STACKPULSE_ELIMIT, "symcache: string table over %u bytes",
		                SP_SYMCACHE_MAX_STRINGS);
	uint32_t at = (uint32_t)b->strings.len;
	rc = sp_buf_append(&b->strings, s, n + 1);
	if (rc)
		return rc;
	sp_htab_insert(&b->str_map, &pr, at);
	*off = at;
	return 0;
}

static int intern_inline(sp_symcache_builder *b, const binline *r, uint32_t *idx)
{
	int rc = sp_htab_reserve(&b->inl_map);
	if (rc)
		return rc;
	sp_htab_probe pr;
	sp_htab_probe_start(&b->inl_map, inl_hash(r), &pr);
	uint32_t k;
	while ((k = sp_htab_probe_next(&b->inl_map, &pr)) != SP_HTAB_NONE) {
		if (memcmp(&b->inl[k], r, sizeof(*r)) == 0) {
			*idx = k;
			return 0;
		}
	}
	if (b->ninl >= SP_SYMCACHE_MAX_INLINES)
		return sp_error(STACKPULSE_ELIMIT, "symcache: over %u inline records",
		                SP_SYMCACHE_MAX_INLINES);
	if (b->ninl == b->inl_cap) {
		size_t ncap = b->inl_cap ? b->inl_cap * 2 : 64;
		binline *n = sp_realloc_array(b->inl, ncap, sizeof(*n));
		if (!n)
			return sp_error(-ENOMEM, "symcache: out of memory");
		b->inl = n;
		b->inl_cap = ncap;
	}
	b->inl[b->ninl] = *r;
	*idx = (uint32_t)b->ninl;
	sp_htab_insert(&b->inl_map, &pr, (uint32_t)b->ninl);
	b->ninl++;
	return 0;
}

int sp_symcache_builder_new(const uint8_t *build_id, uint32_t build_id_len,
                            sp_symcache_builder **out)
{
	if (build_id_len > SP_SYMCACHE_MAX_BUILD_ID || (build_id_len && !build_id))
		return sp_error(-EINVAL, "symcache: build-id length %u", build_id_len);
	sp_symcache_builder *b = sp_calloc(1, sizeof(*b));
	if (!b)
		return sp_error(-ENOMEM, "symcache: out of memory");
	if (build_id_len)
		memcpy(b->build_id, build_id, build_id_len);
	b->build_id_len = build_id_len;
	sp_buf_init(&b->strings);
	*out = b;
	return 0;
}

void sp_symcache_builder_free(sp_symcache_builder *b)
{
	if (!b)
		return;
	sp_buf_free(&b->strings);
	sp_htab_free(&b->str_map);
	sp_htab_free(&b->inl_map);
	sp_free(b->inl);
	sp_free(b->ent);
	sp_free(b);
}

void sp_symcache_builder_keep_starts(sp_symcache_builder *b)
{
	b->keep_starts = 1;
}

size_t sp_symcache_builder_count(const sp_symcache_builder *b)
{
	return b->nent;
}

int sp_symcache_builder_add(sp_symcache_builder *b, uint64_t start, uint32_t len,
                            const sp_symcache_frame *frames, uint32_t n)
{
	if (n == 0 || n > SP_SYMCACHE_MAX_FRAMES || !frames || len == 0 || start > UINT64_MAX - len)
		return sp_error(-EINVAL, "symcache: bad entry (%u frames, length %u)", n, len);
	if (b->nent >= SP_SYMCACHE_MAX_RANGES)
		return sp_error(STACKPULSE_ELIMIT, "symcache: over %u ranges",
		                SP_SYMCACHE_MAX_RANGES);
	for (uint32_t i = 0; i + 1 < n; i++)
		if (!frames[i].name)
			return sp_error(-EINVAL, "symcache: inlined frame %u has no name", i);
	/* Emit inline records outermost first so parents precede children. */
	uint32_t parent = SP_SYMCACHE_NONE;
	for (uint32_t k = n - 1; k-- > 0;) {
		binline r = { 0, 0, 0, 0 };
		int rc = intern_str(b, frames[k].name, &r.name);
		if (!rc)
			rc = intern_str(b, frames[k + 1].file, &r.file);
		if (rc)
			return rc;
		r.line = frames[k + 1].line;
		r.parent = parent;
		rc = intern_inline(b, &r, &parent);
		if (rc)
			return rc;
	}
	bentry e;
	e.start = start;
	e.len = len;
	e.chain = parent;
	e.line = frames[0].line;
	int rc = intern_str(b, frames[n - 1].name, &e.name);
	if (!rc)
		rc = intern_str(b, frames[0].file, &e.file);
	if (rc)
		return rc;
	if (b->nent == b->ent_cap) {
		size_t ncap = b->ent_cap ? b->ent_cap * 2 : 64;
		bentry *ne = sp_realloc_array(b->ent, ncap, sizeof(*ne));
		if (!ne)
			return sp_error(-ENOMEM, "symcache: out of memory");
		b->ent = ne;
		b->ent_cap = ncap;
	}
	e.seq = b->nent;
	b->ent[b->nent++] = e;
	return 0;
}

int sp_symcache_builder_merge(sp_symcache_builder *b, const sp_symcache *t)
{
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
	for (uint32_t i = 0; i < t->range_count; i++) {
		uint64_t start;
		uint32_t len;
		uint32_t n = sp_symcache_range(t, i, fr, SP_SYMCACHE_MAX_FRAMES, &start, &len);
		int rc = sp_symcache_builder_add(b, start, len, fr, n);
		if (rc)
			return rc;
	}
	return 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
	const bentry *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	/* Later insertions first, so they win the dedup below. */
	return a->seq > b->seq ? -1 : (a->seq < b->seq ? 1 : 0);
}

int sp_symcache_builder_finish(sp_symcache_builder *b, uint8_t **data, size_t *len)
{
	if (b->nent)
		qsort(b->ent, b->nent, sizeof(*b->ent), entry_cmp);
	/* Keep the first entry per start and drop entries overlapping a kept one. */
	size_t kept = 0;
	uint64_t prev_end = 0;
	for (size_t i = 0; i < b->nent; i++) {
		if (kept && b->ent[i].start < prev_end)
			continue;
		bentry *last = kept ? &b->ent[kept - 1] : NULL;
		const bentry *e = &b->ent[i];
		/* Adjacent ranges with the same answer become one. */
		if (last && !b->keep_starts && e->start == prev_end && e->name == last->name &&
		    e->file == last->file && e->line == last->line && e->chain == last->chain &&
		    e->len <= UINT32_MAX - last->len) {
			last->len += e->len;
			prev_end += e->len;
			continue;
		}
		b->ent[kept++] = *e;
		prev_end = e->start + e->len;
	}
	b->nent = kept;

	uint64_t total = (uint64_t)SP_SYMCACHE_HEADER_SIZE +
	                 (uint64_t)kept * SP_SYMCACHE_RANGE_SIZE +
	                 (uint64_t)b->ninl * SP_SYMCACHE_INLINE_SIZE + b->strings.len + 4;
	if (total > UINT32_MAX)
		return sp_error(STACKPULSE_ELIMIT, "symcache: table of %llu bytes",
		                (unsigned long long)total);
	uint8_t *p = sp_calloc(1, (size_t)total);
	if (!p)
		return sp_error(-ENOMEM, "symcache: out of memory");
	memcpy(p, magic, 4);
	sp_put_le16(p + 4, SP_SYMCACHE_VERSION);
	sp_put_le32(p + 8, (uint32_t)total);
	p[12] = (uint8_t)b->build_id_len;
	sp_put_le32(p + 16, (uint32_t)kept);
	sp_put_le32(p + 20, (uint32_t)b->ninl);
	sp_put_le32(p + 24, (uint32_t)b->strings.len);
	memcpy(p + 32, b->build_id, b->build_id_len);
	uint8_t *w = p + SP_SYMCACHE_HEADER_SIZE;
	for (size_t i = 0; i < kept; i++, w += SP_SYMCACHE_RANGE_SIZE) {
		const bentry *e = &b->ent[i];
		sp_put_le64(w, e->start);
		sp_put_le32(w + 8, e->len);
		sp_put_le32(w + 12, e->name);
		sp_put_le32(w + 16, e->file);
		sp_put_le32(w + 20, e->line);
		sp_put_le32(w + 24, e->chain);
	}
	for (size_t i = 0; i < b->ninl; i++, w += SP_SYMCACHE_INLINE_SIZE) {
		sp_put_le32(w, b->inl[i].name);
		sp_put_le32(w + 4, b->inl[i].file);
		sp_put_le32(w + 8, b->inl[i].line);
		sp_put_le32(w + 12, b->inl[i].parent);
	}
	if (b->strings.len)
		memcpy(w, b->strings.data, b->strings.len);
	w += b->strings.len;
	sp_put_le32(w, sp_crc32c(0, p, (size_t)total - 4));
	*data = p;
	*len = (size_t)total;
	return 0;
}
