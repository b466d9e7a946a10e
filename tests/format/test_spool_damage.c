/* Damaged spools: a bad checksum, zstd frame, header field or record in any
 * chunk opens the spool as damaged, keeping exactly the chunks before the
 * damage (the same contents as the file cut there), reporting where and
 * why; a strict open refuses it with the same code and detail. */
#include <errno.h>
#include <stdio.h>

#include "common/alloc.h"
#include "spool_copy.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"

#define MAX_CHUNKS 256

/* Chunk offsets of a well-formed file. */
typedef struct layout {
	uint32_t n;
	size_t off[MAX_CHUNKS]; /* Chunk header offsets. */
	size_t footer;          /* Footer offset. */
} layout;

static void layout_of(const memsink *m, layout *l)
{
	size_t off = SP_FILE_HEADER_LEN;
	l->n = 0;
	while (sp_le32(m->data + off) == SP_CHUNK_MAGIC) {
		REQUIRE(l->n < MAX_CHUNKS);
		l->off[l->n++] = off;
		off += SP_CHUNK_HEADER_LEN + sp_le32(m->data + off + 12);
	}
	REQUIRE_EQ(sp_le32(m->data + off), SP_FOOTER_MAGIC);
	REQUIRE_EQ(off + SP_FOOTER_LEN, m->len);
	l->footer = off;
}

static memsink rich_spool(uint32_t chunk_bytes)
{
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 1, chunk_bytes };
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	int rc = write_rich(w, &ids, 1);
	sp_writer_free(w);
	REQUIRE_OK(rc);
	return m;
}

static memsink steady_spool(uint64_t samples, uint32_t chunk_bytes)
{
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 3, chunk_bytes };
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	REQUIRE_OK(write_steady(w, samples, 40, 3));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	return m;
}

static uint64_t walk_samples(const stackpulse_spool *s, int *rc)
{
	stackpulse_sample_iter *it;
	uint64_t n = 0;
	*rc = stackpulse_sample_iter_new(s, &it);
	if (*rc)
		return 0;
	const struct stackpulse_sample *x;
	while ((*rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		CHECK(x->thread < stackpulse_spool_thread_count(s));
		CHECK(x->stack < stackpulse_spool_stack_count(s));
		n++;
	}
	stackpulse_sample_iter_free(it);
	return n;
}

/* Checks that @p len bytes at @p p (a copy of @p orig with chunk @p k, or
 * the footer when k == l->n, damaged) open as damaged at k, equal to
 * @p orig cut before k; and that a strict open refuses them. Returns 1 when
 * every check held. */
static int expect_damaged_at(const uint8_t *p, size_t len, const memsink *orig, const layout *l,
                             uint32_t k, const char *what)
{
	int ok = 1;
#define EXPECT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			CHECK(cond);                                                               \
			ok = 0;                                                                    \
		}                                                                                  \
	} while (0)
	size_t at = k < l->n ? l->off[k] : l->footer;
	stackpulse_spool *s = NULL, *ref = NULL, *x = NULL;
	int rc = sp_spool_open_memory(p, len, 0, &s);
	EXPECT(rc == 0);
	if (rc) {
		fprintf(stderr, "    %s: open gave %d (%s)\n", what, rc, stackpulse_last_error());
		return 0;
	}
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	EXPECT(m->damaged == 1);
	EXPECT(m->truncated == 1);
	EXPECT(m->chunks == k);
	EXPECT(m->damaged_chunk == k);
	EXPECT(m->damaged_offset == at);
	EXPECT(m->damaged_code < 0 && m->damaged_code != -ENOMEM);
	char want[96];
	if (k < l->n)
		snprintf(want, sizeof(want), "chunk %u at offset %zu", k, at);
	else
		snprintf(want, sizeof(want), " at offset %zu", at);
	EXPECT(strstr(m->damage, want) != NULL);
	/* Exactly what the file cut before the damage holds. */
	REQUIRE_OK(sp_spool_open_memory(orig->data, at, 0, &ref));
	char why[256] = "";
	EXPECT(sp_spool_equal(s, ref, why, sizeof(why)) == 1);
	EXPECT(m->samples == stackpulse_spool_meta(ref)->samples);
	int irc;
	EXPECT(walk_samples(s, &irc) == m->samples);
	EXPECT(irc == 0);
	/* Strict: the same code and detail, as an error. */
	int src = sp_spool_open_memory(p, len, STACKPULSE_SPOOL_STRICT, &x);
	EXPECT(src == m->damaged_code && x == NULL);
	EXPECT(strcmp(stackpulse_last_error(), m->damage) == 0);
	if (!ok)
		fprintf(stderr, "    %s: chunks %u, damaged %d at chunk %u offset %llu (%s), %s\n",
		        what, m->chunks, m->damaged, m->damaged_chunk,
		        (unsigned long long)m->damaged_offset, m->damage, why);
	stackpulse_spool_close(x);
	stackpulse_spool_close(ref);
	stackpulse_spool_close(s);
#undef EXPECT
	return ok;
}

/* Which chunk (or footer: l->n) holds byte @p i. */
static uint32_t chunk_at(const layout *l, size_t i)
{
	uint32_t k = 0;
	while (k < l->n && (k + 1 == l->n ? l->footer : l->off[k + 1]) <= i)
		k++;
	return k;
}

SP_TEST(every_bit_flip_in_every_chunk_keeps_the_chunks_before)
{
	memsink m = rich_spool(64);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 5);
	uint8_t *p = malloc(m.len);
	REQUIRE(p != NULL);
	memcpy(p, m.data, m.len);
	uint64_t flips = 0, bad = 0;
	for (size_t i = SP_FILE_HEADER_LEN; i < m.len; i++) {
		uint32_t k = chunk_at(&l, i);
		for (int bit = 0; bit < 8; bit++) {
			p[i] ^= (uint8_t)(1u << bit);
			char what[64];
			snprintf(what, sizeof(what), "bit %d of byte %zu", bit, i);
			if (!expect_damaged_at(p, m.len, &m, &l, k, what))
				bad++;
			p[i] ^= (uint8_t)(1u << bit);
			flips++;
		}
	}
	printf("    %zu bytes, %u chunks: %llu flips, %llu mishandled\n", m.len, l.n,
	       (unsigned long long)flips, (unsigned long long)bad);
	CHECK_EQ(bad, 0);
	free(p);
	memsink_free(&m);
}

SP_TEST(overwritten_bytes_in_every_chunk_keep_the_chunks_before)
{
	memsink m = steady_spool(3000, 700);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 8);
	uint8_t *p = malloc(m.len);
	REQUIRE(p != NULL);
	uint64_t seed = 99, runs = 0, bad = 0;
	static const uint8_t fills[] = { 0x00, 0xff, 0x55 };
	for (uint32_t k = 0; k < l.n; k++) {
		size_t start = l.off[k];
		size_t end = k + 1 < l.n ? l.off[k + 1] : l.footer;
		for (int trial = 0; trial < 24; trial++) {
			memcpy(p, m.data, m.len);
			/* Header fields early on, then anywhere in the chunk. */
			size_t at = trial < 8
			                    ? start + (size_t)trial * 4
			                    : start + (size_t)(fixture_rand(&seed) % (end - start));
			size_t n = 1 + (size_t)(fixture_rand(&seed) % 16);
			if (n > end - at)
				n = end - at;
			int fill = (int)(fixture_rand(&seed) % 4);
			for (size_t i = 0; i < n; i++)
				p[at + i] = fill < 3 ? fills[fill] : (uint8_t)fixture_rand(&seed);
			if (memcmp(p + at, m.data + at, n) == 0)
				continue; /* Nothing changed. */
			char what[64];
			snprintf(what, sizeof(what), "%zu bytes at %zu", n, at);
			if (!expect_damaged_at(p, m.len, &m, &l, k, what))
				bad++;
			runs++;
		}
	}
	/* The footer too: every chunk stays. */
	memcpy(p, m.data, m.len);
	memset(p + l.footer + 8, 0xee, 8);
	CHECK(expect_damaged_at(p, m.len, &m, &l, l.n, "footer sample count"));
	printf("    %zu bytes, %u chunks: %llu overwrites, %llu mishandled\n", m.len, l.n,
	       (unsigned long long)runs, (unsigned long long)bad);
	CHECK_EQ(bad, 0);
	CHECK(runs > 16u * l.n);
	free(p);
	memsink_free(&m);
}

/* Rebuilds @p src with the records of chunk @p k replaced by @p raw, stored
 * uncompressed with a valid checksum; later chunks and the footer move. */
static memsink rewrite_chunk(const memsink *src, const layout *l, uint32_t k, const uint8_t *raw,
                             size_t raw_len)
{
	memsink out = { 0 };
	size_t end = k + 1 < l->n ? l->off[k + 1] : l->footer;
	REQUIRE_OK(memsink_write(&out, src->data, l->off[k] + SP_CHUNK_HEADER_LEN));
	REQUIRE_OK(memsink_write(&out, raw, raw_len));
	REQUIRE(out.data != NULL);
	uint8_t *h = out.data + l->off[k];
	h[4] = SP_CODEC_NONE;
	sp_put_le32(h + 12, (uint32_t)raw_len);
	sp_put_le32(h + 16, (uint32_t)raw_len);
	fix_chunk_crc(out.data, l->off[k]);
	size_t footer = out.len + (l->footer - end);
	REQUIRE_OK(memsink_write(&out, src->data + end, src->len - end));
	uint8_t *f = out.data + footer;
	sp_put_le64(f + 16, footer);
	sp_put_le32(f + 28, sp_crc32c(0, f, 28));
	return out;
}

/* The decompressed records of chunk @p k. */
static uint8_t *chunk_records(const memsink *m, const layout *l, uint32_t k, size_t *len)
{
	const uint8_t *h = m->data + l->off[k];
	uint32_t stored = sp_le32(h + 12), raw_len = sp_le32(h + 16);
	uint8_t *raw = malloc(raw_len + 1);
	REQUIRE(raw != NULL);
	if (h[4] == SP_CODEC_ZSTD)
		REQUIRE_EQ(ZSTD_decompress(raw, raw_len, h + SP_CHUNK_HEADER_LEN, stored), raw_len);
	else
		memcpy(raw, h + SP_CHUNK_HEADER_LEN, raw_len);
	*len = raw_len;
	return raw;
}

static void put_rec(memsink *b, uint64_t type, const uint8_t *body, size_t n)
{
	uint8_t v[10];
	REQUIRE_OK(memsink_write(b, v, sp_varint_put(v, type)));
	REQUIRE_OK(memsink_write(b, v, sp_varint_put(v, n)));
	REQUIRE_OK(memsink_write(b, body, n));
}

/* A valid chunk whose records go wrong part way: what they changed before
 * the bad record (names, exits, lost counts, stats, new ids) must not
 * survive, and the result must equal the file cut before the chunk. */
SP_TEST(bad_record_in_a_middle_chunk_rolls_back_the_whole_chunk)
{
	memsink m = rich_spool(64);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 5);
	stackpulse_spool *pre;
	REQUIRE_OK(sp_spool_open_memory(m.data, l.off[2], 0, &pre));
	REQUIRE(stackpulse_spool_process_count(pre) >= 1);
	REQUIRE(stackpulse_spool_thread_count(pre) >= 1);
	const char *name0 = stackpulse_spool_process(pre, 0)->name;
	REQUIRE(strcmp(name0, "evil") != 0);
	for (uint32_t k = 2; k < l.n; k++) {
		size_t len;
		uint8_t *raw = chunk_records(&m, &l, k, &len);
		memsink b = { 0 };
		/* Edits of earlier definitions, then the chunk's own records. */
		static const uint8_t exec_body[] = { 0, 5, 4, 'e', 'v', 'i', 'l', 1, 'e' };
		static const uint8_t comm_body[] = { 0, 6, 4, 'e', 'v', 'i', 'l' };
		static const uint8_t lost_body[] = { 0, 0x90, 0x4e, 7 };
		static const uint8_t stats_body[] = { 1, 0x63 };
		static const uint8_t exit_body[] = { 0, 0, 0xff, 0x7f };
		static const uint8_t proc_body[] = { 9, 0, 1, 1, 'x', 0 };
		put_rec(&b, SP_REC_EXEC, exec_body, sizeof(exec_body));
		put_rec(&b, SP_REC_COMM, comm_body, sizeof(comm_body));
		put_rec(&b, SP_REC_LOST, lost_body, sizeof(lost_body));
		put_rec(&b, SP_REC_STATS, stats_body, sizeof(stats_body));
		put_rec(&b, SP_REC_EXIT, exit_body, sizeof(exit_body));
		put_rec(&b, SP_REC_PROCESS, proc_body, sizeof(proc_body));
		REQUIRE_OK(memsink_write(&b, raw, len));
		/* A stack node whose parent was never defined. */
		static const uint8_t bad_stack[] = { 0xff, 0x7f, 0 };
		put_rec(&b, SP_REC_STACK, bad_stack, sizeof(bad_stack));
		memsink d = rewrite_chunk(&m, &l, k, b.data, b.len);
		char what[64];
		snprintf(what, sizeof(what), "bad stack record ending chunk %u", k);
		CHECK(expect_damaged_at(d.data, d.len, &m, &l, k, what));
		stackpulse_spool *s;
		REQUIRE_OK(sp_spool_open_memory(d.data, d.len, 0, &s));
		CHECK_STR(stackpulse_spool_process(s, 0)->name, name0);
		CHECK(strstr(stackpulse_spool_meta(s)->damage, "not defined") != NULL);
		CHECK_EQ(stackpulse_spool_meta(s)->damaged_code, STACKPULSE_EFORMAT);
		stackpulse_spool_close(s);
		/* A chunk cut inside its last record (length fixed up). */
		memsink_free(&d);
		d = rewrite_chunk(&m, &l, k, raw, len - 1);
		snprintf(what, sizeof(what), "chunk %u one byte short", k);
		if (len > 1)
			CHECK(expect_damaged_at(d.data, d.len, &m, &l, k, what));
		memsink_free(&d);
		memsink_free(&b);
		free(raw);
	}
	stackpulse_spool_close(pre);
	memsink_free(&m);
}

SP_TEST(damage_details_name_the_chunk_and_the_cause)
{
	memsink m = steady_spool(2000, 600);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 4);
	uint8_t *p = malloc(m.len);
	REQUIRE(p != NULL);
	struct {
		size_t delta; /* Byte of chunk 3 to change. */
		uint8_t x;    /* XOR mask. */
		int fix_crc;  /* Recompute the chunk CRC afterwards. */
		int code;
		const char *text;
	} cases[] = {
		{ SP_CHUNK_HEADER_LEN + 7, 0x01, 0, STACKPULSE_ECHECKSUM, "checksum mismatch" },
		{ SP_CHUNK_CRC_OFFSET, 0x80, 0, STACKPULSE_ECHECKSUM, "checksum mismatch" },
		{ 0, 0x20, 0, STACKPULSE_EFORMAT, "bad magic" },
		{ 4, 0x04, 0, STACKPULSE_EUNSUPPORTED, "unknown codec" },
		{ 8, 0x01, 0, STACKPULSE_EFORMAT, "sequence" },
		{ 19, 0x40, 0, STACKPULSE_ELIMIT, "8 MiB" },
		{ 14, 0x01, 1, STACKPULSE_EFORMAT, "stored" },
		{ SP_CHUNK_HEADER_LEN + 6, 0xff, 1, 0, "zstd" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(p, m.data, m.len);
		p[l.off[3] + cases[i].delta] ^= cases[i].x;
		if (cases[i].fix_crc)
			fix_chunk_crc_len(p, l.off[3], sp_le32(m.data + l.off[3] + 12));
		stackpulse_spool *s;
		REQUIRE_OK(sp_spool_open_memory(p, m.len, 0, &s));
		const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
		CHECK_EQ(meta->chunks, 3);
		CHECK_EQ(meta->damaged_offset, l.off[3]);
		if (cases[i].code)
			CHECK_EQ(meta->damaged_code, cases[i].code);
		else
			CHECK(meta->damaged_code == STACKPULSE_ECOMPRESS ||
			      meta->damaged_code == STACKPULSE_EFORMAT);
		if (!strstr(meta->damage, cases[i].text))
			fprintf(stderr, "    case %zu: %s\n", i, meta->damage);
		CHECK(strstr(meta->damage, cases[i].text) != NULL);
		stackpulse_spool_close(s);
	}
	free(p);
	memsink_free(&m);
}

/* Without a footer, a chunk longer than the rest of the file is a cut, not
 * damage; with the footer it is damage. A cut after damage stays damage. */
SP_TEST(cut_and_damaged_are_told_apart)
{
	memsink m = steady_spool(2000, 600);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 5);
	uint8_t *p = malloc(m.len);
	REQUIRE(p != NULL);
	memcpy(p, m.data, m.len);
	/* The last chunk claims 40 more bytes (within zstd's bound). */
	uint32_t last = l.n - 1;
	REQUIRE_EQ(p[l.off[last] + 4], SP_CODEC_ZSTD);
	uint32_t stored = sp_le32(p + l.off[last] + 12);
	sp_put_le32(p + l.off[last] + 12, stored + 40);
	fix_chunk_crc_len(p, l.off[last], stored);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(p, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, last);
	CHECK(strstr(stackpulse_spool_meta(s)->damage, "runs into the footer") != NULL);
	stackpulse_spool_close(s);
	REQUIRE_OK(sp_spool_open_memory(p, m.len - 1, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 0);
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	CHECK_STR(stackpulse_spool_meta(s)->damage, "");
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, last);
	stackpulse_spool_close(s);
	/* A middle chunk claiming the whole file breaks zstd's bound: damage,
	 * with or without the footer. */
	memcpy(p, m.data, m.len);
	sp_put_le32(p + l.off[2] + 12, (uint32_t)m.len);
	REQUIRE_OK(sp_spool_open_memory(p, m.len - 1, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 2);
	stackpulse_spool_close(s);
	/* Damage in chunk 1, cut inside chunk 4. */
	memcpy(p, m.data, m.len);
	p[l.off[1] + SP_CHUNK_HEADER_LEN + 1] ^= 0x10;
	REQUIRE_OK(sp_spool_open_memory(p, l.off[4] + 40, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->damaged_chunk, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 1);
	stackpulse_spool_close(s);
	/* Damage in chunk 0 keeps nothing, but still opens. */
	memcpy(p, m.data, m.len);
	p[l.off[0] + SP_CHUNK_HEADER_LEN + 1] ^= 0x10;
	REQUIRE_OK(sp_spool_open_memory(p, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 0);
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 0);
	CHECK_EQ(stackpulse_spool_process_count(s), 0);
	CHECK_EQ(stackpulse_spool_meta(s)->damaged_offset, SP_FILE_HEADER_LEN);
	stackpulse_spool_close(s);
	/* An intact file is neither. */
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 0);
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 0);
	CHECK_EQ(stackpulse_spool_meta(s)->damaged_code, 0);
	stackpulse_spool_close(s);
	CHECK_EQ(sp_spool_open_memory(m.data, m.len, 2, &s), -EINVAL);
	CHECK_EQ(sp_spool_open_memory(m.data, m.len, 0, NULL), -EINVAL);
	free(p);
	memsink_free(&m);
}

/* Allocation failure at every point of opening a damaged spool, on both
 * paths (checksum damage keeps the tables; record damage reads again). */
SP_TEST(damaged_open_survives_allocation_failures)
{
	memsink m = rich_spool(64);
	layout l;
	layout_of(&m, &l);
	REQUIRE(l.n >= 5);
	uint8_t *crc_bad = malloc(m.len);
	REQUIRE(crc_bad != NULL);
	memcpy(crc_bad, m.data, m.len);
	crc_bad[l.off[3] + SP_CHUNK_HEADER_LEN] ^= 1;
	size_t len;
	uint8_t *raw = chunk_records(&m, &l, 3, &len);
	memsink rec_bad = rewrite_chunk(&m, &l, 3, raw, len - 1);
	const uint8_t *inputs[2] = { crc_bad, rec_bad.data };
	size_t lens[2] = { m.len, rec_bad.len };
	for (int i = 0; i < 2; i++) {
		int done = 0;
		long n;
		for (n = 0; !done && n < 100000; n++) {
			stackpulse_spool *s = NULL;
			sp_alloc_fail_after(n);
			int rc = sp_spool_open_memory(inputs[i], lens[i], 0, &s);
			sp_alloc_fail_after(-1);
			if (rc) {
				CHECK_EQ(rc, -ENOMEM);
			} else {
				CHECK_EQ(stackpulse_spool_meta(s)->chunks, 3);
				CHECK_EQ(stackpulse_spool_meta(s)->damaged, 1);
				done = 1;
			}
			stackpulse_spool_close(s);
		}
		CHECK(done);
		printf("    input %d opened after %ld injected failures\n", i, n - 1);
	}
	memsink_free(&rec_bad);
	free(raw);
	free(crc_bad);
	memsink_free(&m);
}
