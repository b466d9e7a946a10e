/* Spool decoder: one validating pass over the whole file that keeps the
 * tables and counts the samples. Every id is checked against what was
 * defined before it, every length against its cap, and all table memory
 * against a budget relative to the file size. */
#include "format/spool_reader.h"

#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "format/spool_format.h"
#include "format/spool_internal.h"

/* ------------------------------------------------------------------ */
/* Chunk loading, shared with the sample iterator. */

void sp_chunk_scratch_free(struct sp_chunk_scratch *sc)
{
	sp_free(sc->stored);
	sp_free(sc->raw);
	ZSTD_freeDCtx(sc->dctx);
	memset(sc, 0, sizeof(*sc));
}

static int scratch_grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	uint8_t *n = sp_realloc_array(*p, need, 1);
	if (!n) {
		(void)sp_error(-ENOMEM, "cannot allocate %zu bytes for a chunk", need);
		return -ENOMEM; /* Spelled out for the static analyzer. */
	}
	*p = n;
	*cap = need;
	return 0;
}

int sp_chunk_load(const sp_source *src, uint32_t index, const struct sp_chunk_ref *ref,
                  struct sp_chunk_scratch *sc, const uint8_t **payload)
{
	size_t total = SP_CHUNK_HEADER_LEN + (size_t)ref->stored_len;
	int rc = scratch_grow(&sc->stored, &sc->stored_cap, total);
	if (rc)
		return rc;
	rc = src->read_at(src->ctx, ref->offset, sc->stored, total);
	if (rc)
		return sp_error_context(rc, "chunk %u at offset %llu", index,
		                        (unsigned long long)ref->offset);
	const uint8_t *h = sc->stored;
	/* The file may have changed since it was opened. */
	if (sp_le32(h) != SP_CHUNK_MAGIC || h[4] != ref->codec || sp_le32(h + 8) != index ||
	    sp_le32(h + 12) != ref->stored_len || sp_le32(h + 16) != ref->raw_len ||
	    sp_le64(h + 20) != ref->base_time || sp_le32(h + SP_CHUNK_CRC_OFFSET) != ref->crc)
		return sp_error(STACKPULSE_EFORMAT, "chunk %u at offset %llu changed since open",
		                index, (unsigned long long)ref->offset);
	const uint8_t *data = h + SP_CHUNK_HEADER_LEN;
	uint32_t crc = sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET);
	crc = sp_crc32c(crc, data, ref->stored_len);
	if (crc != ref->crc)
		return sp_error(
		        STACKPULSE_ECHECKSUM,
		        "chunk %u at offset %llu: checksum mismatch (stored %08x, computed %08x)",
		        index, (unsigned long long)ref->offset, ref->crc, crc);
	if (ref->codec == SP_CODEC_NONE) {
		*payload = data;
		return 0;
	}
	unsigned long long fcs = ZSTD_getFrameContentSize(data, ref->stored_len);
	if (fcs == ZSTD_CONTENTSIZE_ERROR || fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs != ref->raw_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: zstd frame does not declare %u bytes",
		                index, (unsigned long long)ref->offset, ref->raw_len);
	size_t fsize = ZSTD_findFrameCompressedSize(data, ref->stored_len);
	if (ZSTD_isError(fsize) || fsize != ref->stored_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: payload is not exactly one zstd frame",
		                index, (unsigned long long)ref->offset);
	if ((rc = scratch_grow(&sc->raw, &sc->raw_cap, ref->raw_len ? ref->raw_len : 1)))
		return rc;
	if (!sc->dctx && !(sc->dctx = ZSTD_createDCtx()))
		return sp_error(-ENOMEM, "cannot create zstd context");
	size_t n = ZSTD_decompressDCtx(sc->dctx, sc->raw, ref->raw_len, data, ref->stored_len);
	if (ZSTD_isError(n))
		return sp_error(STACKPULSE_ECOMPRESS, "chunk %u at offset %llu: zstd: %s", index,
		                (unsigned long long)ref->offset, ZSTD_getErrorName(n));
	if (n != ref->raw_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: decompressed %zu bytes, header says %u",
		                index, (unsigned long long)ref->offset, n, ref->raw_len);
	*payload = sc->raw;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The pass over the file. */

static int read_at(stackpulse_spool *s, uint64_t off, void *buf, size_t len)
{
	int rc = s->src.read_at(s->src.ctx, off, buf, len);
	return rc ? sp_error_context(rc, "reading %zu bytes at offset %llu", len,
	                             (unsigned long long)off)
	          : 0;
}

static int check_header(stackpulse_spool *s)
{
	static const uint8_t sp_file_magic[SP_FILE_MAGIC_LEN] = SP_FILE_MAGIC_BYTES;
	uint8_t h[SP_FILE_HEADER_LEN];
	uint64_t size = s->src.size;
	size_t have = size < sizeof(h) ? (size_t)size : sizeof(h);
	int rc = read_at(s, 0, h, have);
	if (rc)
		return rc;
	size_t cmp = have < SP_FILE_MAGIC_LEN ? have : SP_FILE_MAGIC_LEN;
	if (memcmp(h, sp_file_magic, cmp) != 0)
		return sp_error(STACKPULSE_EFORMAT, "not a spool file (bad magic)");
	if (have < sizeof(h))
		return sp_error(STACKPULSE_ETRUNCATED,
		                "file of %llu bytes ends inside the %u-byte header",
		                (unsigned long long)size, SP_FILE_HEADER_LEN);
	uint16_t version = sp_le16(h + 8);
	if (version != SP_SPOOL_VERSION)
		return sp_error(STACKPULSE_EVERSION,
		                "spool format version %u (this reader knows %u)", version,
		                SP_SPOOL_VERSION);
	if (sp_le16(h + 10) != 0)
		return sp_error(STACKPULSE_EUNSUPPORTED, "spool header flags %#x not supported",
		                sp_le16(h + 10));
	if (sp_le32(h + 12) != 0)
		return sp_error(STACKPULSE_EFORMAT, "reserved header field is %#x, not 0",
		                sp_le32(h + 12));
	return 0;
}

static int check_footer(stackpulse_spool *s, uint64_t off)
{
	uint8_t f[SP_FOOTER_LEN];
	int rc = read_at(s, off, f, sizeof(f));
	if (rc)
		return rc;
	uint32_t crc = sp_crc32c(0, f, 28);
	if (crc != sp_le32(f + 28))
		return sp_error(STACKPULSE_ECHECKSUM, "footer at offset %llu: checksum mismatch",
		                (unsigned long long)off);
	if (sp_le32(f + 24) != 0)
		return sp_error(STACKPULSE_EFORMAT, "footer at offset %llu: reserved field not 0",
		                (unsigned long long)off);
	if (sp_le32(f + 4) != s->nchunks || sp_le64(f + 8) != s->meta.samples ||
	    sp_le64(f + 16) != off)
		return sp_error(STACKPULSE_EFORMAT,
		                "footer at offset %llu says %u chunks, %llu samples, offset %llu; "
		                "file has %u, %llu, %llu",
		                (unsigned long long)off, sp_le32(f + 4),
		                (unsigned long long)sp_le64(f + 8),
		                (unsigned long long)sp_le64(f + 16), s->nchunks,
		                (unsigned long long)s->meta.samples, (unsigned long long)off);
	if (s->src.size - off != SP_FOOTER_LEN)
		return sp_error(STACKPULSE_EFORMAT, "%llu bytes after the footer",
		                (unsigned long long)(s->src.size - off - SP_FOOTER_LEN));
	return 0;
}

/* Finds a valid footer ending the file. With one, a chunk that does not
 * fit before it is damaged, not cut: the file was complete once. */
static int probe_footer(stackpulse_spool *s)
{
	s->footer_at = UINT64_MAX;
	if (s->src.size < SP_FILE_HEADER_LEN + SP_FOOTER_LEN)
		return 0;
	uint64_t off = s->src.size - SP_FOOTER_LEN;
	uint8_t f[SP_FOOTER_LEN];
	int rc = read_at(s, off, f, sizeof(f));
	if (rc)
		return rc;
	if (sp_le32(f) == SP_FOOTER_MAGIC && sp_le32(f + 28) == sp_crc32c(0, f, 28) &&
	    sp_le64(f + 16) == off)
		s->footer_at = off;
	return 0;
}

/* Parses and checks the chunk header at @p off. Returns 1 when the file ends
 * inside the chunk (a cut file), 0 with @p ref filled, or an error. */
static int chunk_header(stackpulse_spool *s, uint64_t off, struct sp_chunk_ref *ref)
{
	uint64_t left = s->src.size - off;
	uint8_t h[SP_CHUNK_HEADER_LEN];
	if (left < SP_CHUNK_HEADER_LEN)
		return 1;
	int rc = read_at(s, off, h, sizeof(h));
	if (rc)
		return rc;
	uint32_t index = s->nchunks;
	ref->offset = off;
	ref->codec = h[4];
	ref->stored_len = sp_le32(h + 12);
	ref->raw_len = sp_le32(h + 16);
	ref->base_time = sp_le64(h + 20);
	ref->crc = sp_le32(h + SP_CHUNK_CRC_OFFSET);
	ref->samples = 0;
	const char *bad = NULL;
	rc = STACKPULSE_EFORMAT;
	if (ref->codec != SP_CODEC_NONE && ref->codec != SP_CODEC_ZSTD) {
		bad = "unknown codec";
		rc = STACKPULSE_EUNSUPPORTED;
	} else if (h[5] != 0) {
		bad = "flags not 0";
		rc = STACKPULSE_EUNSUPPORTED;
	} else if (sp_le16(h + 6) != 0) {
		bad = "reserved field not 0";
	} else if (sp_le32(h + 8) != index) {
		bad = "sequence number out of order";
	} else if (ref->raw_len > SP_CHUNK_RAW_MAX) {
		bad = "raw length over the 8 MiB cap";
		rc = STACKPULSE_ELIMIT;
	} else if (ref->codec == SP_CODEC_NONE && ref->stored_len != ref->raw_len) {
		bad = "stored and raw lengths differ without compression";
	} else if (ref->codec == SP_CODEC_ZSTD &&
	           ref->stored_len > ZSTD_compressBound(ref->raw_len)) {
		bad = "stored length larger than zstd's bound for the raw length";
	} else if (s->footer_at != UINT64_MAX &&
	           (s->footer_at - off < SP_CHUNK_HEADER_LEN ||
	            ref->stored_len > s->footer_at - off - SP_CHUNK_HEADER_LEN)) {
		bad = "chunk runs into the footer";
	}
	if (bad)
		return sp_error(rc, "chunk %u at offset %llu: %s (codec %u, stored %u, raw %u)",
		                index, (unsigned long long)off, bad, ref->codec, ref->stored_len,
		                ref->raw_len);
	if (ref->stored_len > left - SP_CHUNK_HEADER_LEN)
		return 1;
	if (ref->raw_len > s->raw_cap - s->raw_used)
		return sp_error(
		        STACKPULSE_ELIMIT,
		        "chunk %u at offset %llu: decompressed total would exceed %llu bytes "
		        "for a file of %llu bytes",
		        index, (unsigned long long)off, (unsigned long long)s->raw_cap,
		        (unsigned long long)s->src.size);
	s->raw_used += ref->raw_len;
	return 0;
}

/* Where the walk stopped on damaged bytes. */
struct damage {
	int found;       /* The error belongs to the chunk or footer below. */
	int decoded;     /* Records of the damaged chunk reached the tables. */
	uint32_t chunk;  /* Index of the damaged chunk. */
	uint64_t offset; /* Its file offset. */
};

/* Errors that damaged bytes cause, as opposed to I/O or memory failures. */
static int is_damage(int rc)
{
	return rc == STACKPULSE_EFORMAT || rc == STACKPULSE_ECHECKSUM ||
	       rc == STACKPULSE_ECOMPRESS || rc == STACKPULSE_ELIMIT ||
	       rc == STACKPULSE_EUNSUPPORTED;
}

static int read_chunks(stackpulse_spool *s, struct damage *d)
{
	struct sp_chunk_scratch sc = { 0 };
	uint64_t off = SP_FILE_HEADER_LEN;
	int complete = 0;
	int rc = 0;
	for (;;) {
		uint64_t left = s->src.size - off;
		uint8_t m[4];
		d->chunk = s->nchunks;
		d->offset = off;
		d->decoded = 0;
		if (left < sizeof(m) || s->nchunks == s->chunk_limit)
			break;
		if ((rc = read_at(s, off, m, sizeof(m))))
			break;
		uint32_t magic = sp_le32(m);
		if (magic == SP_FOOTER_MAGIC) {
			if (left < SP_FOOTER_LEN)
				break;
			if (!(rc = check_footer(s, off)))
				complete = 1;
			break;
		}
		if (magic != SP_CHUNK_MAGIC) {
			rc = sp_error(STACKPULSE_EFORMAT, "chunk %u at offset %llu: bad magic %08x",
			              s->nchunks, (unsigned long long)off, magic);
			break;
		}
		struct sp_chunk_ref ref;
		rc = chunk_header(s, off, &ref);
		if (rc == 1) {
			rc = 0;
			break;
		}
		const uint8_t *raw = NULL;
		if (rc || (rc = sp_chunk_load(&s->src, s->nchunks, &ref, &sc, &raw)))
			break;
		d->decoded = 1;
		if ((rc = sp_spool_decode_chunk(s, s->nchunks, &ref, raw)) ||
		    (rc = SP_SPOOL_GROW(s, s->chunks, s->chunks_cap, s->nchunks + 1, "chunks")))
			break;
		s->chunks[s->nchunks++] = ref;
		off += SP_CHUNK_HEADER_LEN + (uint64_t)ref.stored_len;
	}
	sp_chunk_scratch_free(&sc);
	if (rc) {
		d->found = is_damage(rc);
		return rc;
	}
	s->meta.truncated = !complete;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Finishing touches: drop half-received symbol tables, order the tables
 * that are looked up by key. */

typedef int (*cmp_fn)(const void *a, const void *b);

/* Stable bottom-up merge sort, so ties keep file order. */
static int stable_sort(void *base, size_t n, size_t size, cmp_fn cmp)
{
	if (n < 2)
		return 0;
	uint8_t *tmp = sp_malloc(n * size);
	if (!tmp)
		return sp_error(-ENOMEM, "cannot allocate %zu bytes to sort a table", n * size);
	uint8_t *src = base, *dst = tmp;
	for (size_t width = 1; width < n; width *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * width) {
			size_t mid = lo + width < n ? lo + width : n;
			size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				if (cmp(src + j * size, src + i * size) < 0)
					memcpy(dst + k++ * size, src + j++ * size, size);
				else
					memcpy(dst + k++ * size, src + i++ * size, size);
			}
			while (i < mid)
				memcpy(dst + k++ * size, src + i++ * size, size);
			while (j < hi)
				memcpy(dst + k++ * size, src + j++ * size, size);
		}
		uint8_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != base)
		memcpy(base, src, n * size);
	sp_free(tmp);
	return 0;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_event(const void *a, const void *b)
{
	return cmp_u64(((const struct stackpulse_spool_event *)a)->time_ns,
	               ((const struct stackpulse_spool_event *)b)->time_ns);
}

static int cmp_rtname(const void *a, const void *b)
{
	return cmp_u64(((const struct sp_rtname *)a)->time_ns,
	               ((const struct sp_rtname *)b)->time_ns);
}

static int cmp_ksym(const void *a, const void *b)
{
	return cmp_u64(((const struct sp_ksym *)a)->addr, ((const struct sp_ksym *)b)->addr);
}

static int cmp_jitsym(const void *a, const void *b)
{
	const struct sp_jitsym *x = a, *y = b;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return cmp_u64(x->start, y->start);
}

static int cmp_stat(const void *a, const void *b)
{
	return cmp_u64(((const struct sp_stat *)a)->key, ((const struct sp_stat *)b)->key);
}

/* What the lookups need: sorted keyed tables, latest names, counts. */
static int order_tables(stackpulse_spool *s)
{
	int rc;
	if ((rc = stable_sort(s->events, s->nevents, sizeof(*s->events), cmp_event)) ||
	    (rc = stable_sort(s->rtnames, s->nrtnames, sizeof(*s->rtnames), cmp_rtname)) ||
	    (rc = stable_sort(s->ksyms, s->nksyms, sizeof(*s->ksyms), cmp_ksym)) ||
	    (rc = stable_sort(s->jitsyms, s->njitsyms, sizeof(*s->jitsyms), cmp_jitsym)) ||
	    (rc = stable_sort(s->stats, s->nstats, sizeof(*s->stats), cmp_stat)))
		return rc;
	if ((rc = sp_spool_apply_names(s)) != 0)
		return rc;
	s->meta.chunks = s->nchunks;
	s->meta.duration_ns = s->meta.samples ? s->last_time - s->first_time : 0;
	return 0;
}

static int finish_tables(stackpulse_spool *s)
{
	for (uint32_t i = 0; i < s->nmodules; i++) {
		struct sp_symtab *t = &s->symtabs[i];
		if (t->total && t->len != t->total) {
			if (!s->meta.truncated)
				return sp_error(
				        STACKPULSE_EFORMAT,
				        "symbol table of module %u ends after %llu of %llu bytes",
				        i, (unsigned long long)t->len,
				        (unsigned long long)t->total);
			sp_free(t->data);
			memset(t, 0, sizeof(*t));
		}
	}
	return order_tables(s);
}

static uint64_t cap_for(uint64_t size, uint64_t floor, uint64_t ratio)
{
	if (size > UINT64_MAX / ratio)
		return UINT64_MAX;
	return size * ratio > floor ? size * ratio : floor;
}

/* One pass over the file, reading at most @p limit chunks. The spool is
 * left in *out, also on failure, and does not own the source yet. */
static int spool_init(const sp_source *src, uint32_t limit, stackpulse_spool **out)
{
	stackpulse_spool *s = sp_calloc(1, sizeof(*s));
	*out = s;
	if (!s) {
		(void)sp_error(-ENOMEM, "cannot allocate a spool");
		return -ENOMEM; /* Spelled out for the static analyzer. */
	}
	s->src = *src;
	s->src.close = NULL;
	s->chunk_limit = limit;
	s->meta.format_version = SP_SPOOL_VERSION;
	s->meta.event = s->meta.machine = s->meta.kernel_release = "";
	s->meta.hostname = s->meta.kernel_note = s->meta.damage = "";
	s->raw_cap = cap_for(src->size, SP_RAW_TOTAL_FLOOR, SP_RAW_TOTAL_RATIO);
	s->mem_cap = cap_for(src->size, SP_TABLE_BYTES_FLOOR, SP_TABLE_BYTES_RATIO);
	sp_htab_init(&s->module_ix);
	sp_htab_init(&s->frame_ix);
	sp_htab_init(&s->stack_ix);
	int rc = SP_SPOOL_GROW(s, s->stacks, s->stacks_cap, 1, "stack nodes");
	if (rc)
		return rc;
	s->stacks[0] = (struct sp_stack_node){ 0, UINT32_MAX, 0 };
	s->nstacks = 1;
	return 0;
}

static int open_pass(const sp_source *src, uint32_t limit, struct damage *d, stackpulse_spool **out)
{
	int rc = spool_init(src, limit, out);
	if (rc || (rc = check_header(*out)) || (rc = probe_footer(*out)))
		return rc;
	return read_chunks(*out, d);
}

/* Records the damage in the metadata; takes @p detail. */
static int mark_damaged(stackpulse_spool *s, const struct damage *d, int code, char *detail)
{
	int rc = SP_SPOOL_GROW(s, s->strings, s->strings_cap, s->nstrings + 1, "strings");
	if (rc) {
		sp_free(detail);
		return rc;
	}
	s->strings[s->nstrings++] = detail;
	s->meta.truncated = 1;
	s->meta.damaged = 1;
	s->meta.damaged_chunk = d->chunk;
	s->meta.damaged_offset = d->offset;
	s->meta.damaged_code = code;
	s->meta.damage = detail;
	return 0;
}

int sp_spool_open_source_ex(const sp_source *src, unsigned flags, stackpulse_spool **out)
{
	*out = NULL;
	struct damage d = { 0, 0, 0, 0 };
	stackpulse_spool *s = NULL;
	int rc = open_pass(src, UINT32_MAX, &d, &s);
	if (rc && d.found && !(flags & STACKPULSE_SPOOL_STRICT)) {
		/* Keep every chunk before the damage, like a cut file. */
		int code = rc;
		char *detail = sp_strdup(stackpulse_last_error());
		rc = detail ? 0 : sp_error(-ENOMEM, "cannot copy the damage detail");
		if (!rc && d.decoded) {
			/* Part of the damaged chunk reached the tables: read
			 * again, stopping before it. */
			stackpulse_spool_close(s);
			struct damage again = { 0, 0, 0, 0 };
			rc = open_pass(src, d.chunk, &again, &s);
		}
		if (rc)
			sp_free(detail);
		else
			rc = mark_damaged(s, &d, code, detail);
	}
	if (!rc)
		rc = finish_tables(s);
	if (rc) {
		stackpulse_spool_close(s);
		if (src->close)
			src->close(src->ctx);
		return rc;
	}
	s->src.close = src->close;
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Tailing: the walk of read_chunks, resumed at each poll over a file that
 * grows. */

int sp_spool_tail_new(const sp_source *src, unsigned flags, stackpulse_spool **out)
{
	*out = NULL;
	stackpulse_spool *s = NULL;
	int rc = spool_init(src, UINT32_MAX, &s);
	if (!rc && !(s->tail_sc = sp_calloc(1, sizeof(*s->tail_sc))))
		rc = sp_error(-ENOMEM, "cannot allocate chunk buffers");
	if (rc) {
		stackpulse_spool_close(s);
		if (src->close)
			src->close(src->ctx);
		return rc;
	}
	s->src.close = src->close;
	s->tail = 1;
	s->tail_strict = (flags & STACKPULSE_SPOOL_STRICT) != 0;
	s->tail_suspect = UINT64_MAX;
	s->footer_at = UINT64_MAX;
	s->meta.truncated = 1;
	*out = s;
	return 0;
}

/* One chunk (or the footer) at s->tail_off: 1 when it is not all there
 * yet, 2 at a valid footer, 0 after a chunk, or an error. */
static int tail_chunk(stackpulse_spool *s, stackpulse_sample_fn fn, void *ctx, int *decoded)
{
	uint64_t off = s->tail_off;
	uint64_t left = s->src.size - off;
	uint8_t m[4];
	if (left < sizeof(m))
		return 1;
	int rc = read_at(s, off, m, sizeof(m));
	if (rc)
		return rc;
	uint32_t magic = sp_le32(m);
	if (magic == SP_FOOTER_MAGIC) {
		if (left < SP_FOOTER_LEN)
			return 1;
		return (rc = check_footer(s, off)) ? rc : 2;
	}
	if (magic != SP_CHUNK_MAGIC)
		return sp_error(STACKPULSE_EFORMAT, "chunk %u at offset %llu: bad magic %08x",
		                s->nchunks, (unsigned long long)off, magic);
	struct sp_chunk_ref ref;
	if ((rc = chunk_header(s, off, &ref)) != 0)
		return rc;
	const uint8_t *raw = NULL;
	if ((rc = sp_chunk_load(&s->src, s->nchunks, &ref, s->tail_sc, &raw))) {
		s->raw_used -= ref.raw_len; /* Charged again when read again. */
		return rc;
	}
	*decoded = 1;
	if ((rc = sp_spool_decode_chunk(s, s->nchunks, &ref, raw)))
		return rc;
	s->nchunks++;
	s->tail_off = off + SP_CHUNK_HEADER_LEN + (uint64_t)ref.stored_len;
	s->tail_suspect = UINT64_MAX;
	return fn ? sp_spool_chunk_samples(s, &ref, raw, fn, ctx) : 0;
}

int sp_spool_tail_step(stackpulse_spool *s, uint64_t size, int final, stackpulse_sample_fn fn,
                       void *ctx, enum stackpulse_tail_state *state)
{
	*state = s->tail_state;
	if (s->tail_done)
		return 0;
	if (size < s->src.size)
		return sp_error(STACKPULSE_EFORMAT, "spool shrank from %llu to %llu bytes",
		                (unsigned long long)s->src.size, (unsigned long long)size);
	s->src.size = size;
	/* The budgets scale with the file, as for a whole open. */
	s->raw_cap = cap_for(size, SP_RAW_TOTAL_FLOOR, SP_RAW_TOTAL_RATIO);
	s->mem_cap = cap_for(size, SP_TABLE_BYTES_FLOOR, SP_TABLE_BYTES_RATIO);
	int rc = 0, complete = 0;
	if (s->tail_off == 0) {
		if (size >= SP_FILE_HEADER_LEN || final) {
			if ((rc = check_header(s)))
				return rc; /* Not a spool: nothing to tail. */
			s->tail_off = SP_FILE_HEADER_LEN;
		}
	}
	while (s->tail_off) {
		int decoded = 0;
		rc = tail_chunk(s, fn, ctx, &decoded);
		if (rc == 1) {
			rc = 0;
			break;
		}
		if (rc == 2) {
			rc = 0;
			complete = 1;
			break;
		}
		if (rc == 0)
			continue;
		if (!is_damage(rc) || decoded)
			break; /* I/O, memory, the callback, or damage behind a good checksum. */
		/* A chunk that fails its checks may still be being written: look
		 * again next poll; a second failure, or one after the writer is
		 * gone, is damage. */
		if (!final && s->tail_suspect != s->tail_off) {
			s->tail_suspect = s->tail_off;
			rc = 0;
		}
		break;
	}
	int damaged = rc && is_damage(rc);
	if (damaged && !s->tail_strict) {
		struct damage d = { 1, 0, s->nchunks, s->tail_off };
		char *detail = sp_strdup(stackpulse_last_error());
		int code = rc;
		rc = detail ? mark_damaged(s, &d, code, detail)
		            : sp_error(-ENOMEM, "cannot copy the damage detail");
	}
	/* Half-received symbol tables are kept for their next parts. */
	int rc2 = order_tables(s);
	if (damaged && s->tail_strict) {
		s->tail_state = *state = STACKPULSE_TAIL_TRUNCATED;
		s->tail_done = 1;
	}
	if (rc || (rc = rc2))
		return rc;
	if (complete) {
		s->meta.truncated = 0;
		s->tail_state = STACKPULSE_TAIL_COMPLETE;
		s->tail_done = 1;
	} else if (final || damaged) {
		s->tail_state = STACKPULSE_TAIL_TRUNCATED;
		s->tail_done = 1;
	}
	*state = s->tail_state;
	return 0;
}

void stackpulse_spool_close(stackpulse_spool *s)
{
	if (!s)
		return;
	if (s->tail_sc) {
		sp_chunk_scratch_free(s->tail_sc);
		sp_free(s->tail_sc);
	}
	if (s->src.close)
		s->src.close(s->src.ctx);
	for (uint32_t i = 0; i < s->nstrings; i++)
		sp_free(s->strings[i]);
	for (uint32_t i = 0; i < s->nmodules; i++)
		sp_free(s->symtabs[i].data);
	sp_free(s->strings);
	sp_free(s->procs);
	sp_free(s->threads);
	sp_free(s->modules);
	sp_free(s->symtabs);
	sp_free(s->mappings);
	sp_free(s->pycodes);
	sp_free(s->frames);
	sp_free(s->stacks);
	sp_free(s->events);
	sp_free(s->rtnames);
	sp_free(s->thread_rtname);
	sp_free(s->ksyms);
	sp_free(s->jitsyms);
	sp_free(s->stats);
	sp_free(s->chunks);
	sp_htab_free(&s->module_ix);
	sp_htab_free(&s->frame_ix);
	sp_htab_free(&s->stack_ix);
	sp_free(s);
}
