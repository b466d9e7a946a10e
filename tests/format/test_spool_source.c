/* Spools read through an sp_source: a read error at every read fails the
 * open (an I/O error is never taken for damage), sizes no file has, and
 * bytes that change after the open. The sample iterator re-reads each chunk
 * and must notice a changed header, and must check every record and id
 * again even when the change keeps the checksum (forged below). */
#include <errno.h>
#include <stdio.h>

#include "common/buf.h"
#include "common/error.h"
#include "format/spool_reader.h"
#include "spool_fixture.h"

/* Reads from memory, failing read number @p fail_at; bytes past the
 * memory read as zeros, so the source may claim any size. */
struct faulty {
	const uint8_t *p;
	size_t len;
	long reads;
	long fail_at; /* -1: never. */
	int closed;
};

static int faulty_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct faulty *f = ctx;
	if (f->reads++ == f->fail_at)
		return sp_error(-EIO, "injected read error");
	memset(buf, 0, len);
	if (off < f->len)
		memcpy(buf, f->p + off, len < f->len - off ? len : f->len - (size_t)off);
	return 0;
}

static void faulty_close(void *ctx)
{
	((struct faulty *)ctx)->closed++;
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

static char iter_detail[1024];

static int count_samples(const stackpulse_spool *s, uint64_t *n)
{
	stackpulse_sample_iter *it;
	*n = 0;
	int rc = stackpulse_sample_iter_new(s, &it);
	if (rc)
		return rc;
	const struct stackpulse_sample *x;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1)
		(*n)++;
	/* Errors are sticky; the detail of the first one is kept. */
	if (rc < 0) {
		snprintf(iter_detail, sizeof(iter_detail), "%s", stackpulse_last_error());
		CHECK_EQ(stackpulse_sample_iter_next(it, &x), rc);
	}
	stackpulse_sample_iter_free(it);
	return rc;
}

/* Fails each read of an open in turn, on an intact, a cut and a damaged
 * file: always -EIO with the offset named, the source closed once. */
SP_TEST(read_error_at_every_read_fails_the_open)
{
	memsink m = rich_spool(64);
	uint8_t *damaged = malloc(m.len);
	REQUIRE(damaged != NULL);
	memcpy(damaged, m.data, m.len);
	damaged[m.len / 2] ^= 4;
	const uint8_t *inputs[3] = { m.data, m.data, damaged };
	size_t lens[3] = { m.len, m.len - 40, m.len };
	for (int i = 0; i < 3; i++) {
		long n;
		int done = 0;
		for (n = 0; !done && n < 10000; n++) {
			struct faulty f = { inputs[i], lens[i], 0, n, 0 };
			sp_source src = { faulty_read, faulty_close, &f, lens[i] };
			stackpulse_spool *s = NULL;
			int rc = sp_spool_open_source_ex(&src, 0, &s);
			if (rc) {
				CHECK_EQ(rc, -EIO);
				CHECK(strstr(stackpulse_last_error(), "injected read error") !=
				      NULL);
				CHECK(strstr(stackpulse_last_error(), "offset") != NULL);
				CHECK_EQ(f.closed, 1);
				continue;
			}
			done = 1;
			CHECK_EQ(stackpulse_spool_meta(s)->damaged, i == 2);
			CHECK_EQ(stackpulse_spool_meta(s)->truncated, i != 0);
			/* The iterator's reads fail the same way. */
			uint64_t samples;
			f.fail_at = f.reads;
			CHECK_EQ(count_samples(s, &samples),
			         stackpulse_spool_meta(s)->samples ? -EIO : 0);
			CHECK_OK(count_samples(s, &samples));
			CHECK_EQ(samples, stackpulse_spool_meta(s)->samples);
			stackpulse_spool_close(s);
			CHECK_EQ(f.closed, 1);
		}
		CHECK(done);
		printf("    input %d: opened after %ld failing reads\n", i, n - 1);
	}
	free(damaged);
	memsink_free(&m);
}

/* A source larger than any file: the caps saturate, the zeros after the
 * header are damage, and a source without close is fine. */
SP_TEST(huge_source_without_close)
{
	memsink m = rich_spool(0);
	struct faulty f = { m.data, SP_FILE_HEADER_LEN, 0, -1, 0 };
	sp_source src = { faulty_read, NULL, &f, UINT64_MAX - 7 };
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_source_ex(&src, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->damaged, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 0);
	CHECK(strstr(stackpulse_spool_meta(s)->damage, "bad magic") != NULL);
	stackpulse_spool_close(s);
	CHECK_EQ(sp_spool_open_source_ex(&src, STACKPULSE_SPOOL_STRICT, &s), STACKPULSE_EFORMAT);
	CHECK(s == NULL);
	memsink_free(&m);
}

/* Every field of a chunk header is compared again when the iterator loads
 * the chunk. */
SP_TEST(changed_chunk_header_stops_the_iterator)
{
	memsink m = rich_spool(0);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	uint64_t n;
	REQUIRE_OK(count_samples(s, &n));
	REQUIRE(n > 0);
	size_t c = SP_FILE_HEADER_LEN;
	static const size_t fields[] = { 0, 4, 8, 12, 16, 20, SP_CHUNK_CRC_OFFSET };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		m.data[c + fields[i]] ^= 1;
		CHECK_EQ(count_samples(s, &n), STACKPULSE_EFORMAT);
		CHECK(strstr(iter_detail, "changed since open") != NULL);
		m.data[c + fields[i]] ^= 1;
		CHECK_OK(count_samples(s, &n));
	}
	/* A payload change with the header intact fails the checksum. */
	m.data[c + SP_CHUNK_HEADER_LEN + 2] ^= 1;
	CHECK_EQ(count_samples(s, &n), STACKPULSE_ECHECKSUM);
	m.data[c + SP_CHUNK_HEADER_LEN + 2] ^= 1;
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* ---- a chunk whose records change while its checksum stays ---- */

static uint32_t chunk_crc(const uint8_t *h, const uint8_t *payload, size_t n)
{
	return sp_crc32c(sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET), payload, n);
}

/* Sets payload[at..at+3] so the chunk's CRC-32C equals @p want. CRC is
 * affine over GF(2), so the 32 bits solve a 32x32 linear system. */
static void forge_crc(const uint8_t *h, uint8_t *payload, size_t n, size_t at, uint32_t want)
{
	memset(payload + at, 0, 4);
	uint32_t base = chunk_crc(h, payload, n);
	uint32_t col[32];
	for (int i = 0; i < 32; i++) {
		payload[at + (size_t)i / 8] ^= (uint8_t)(1u << (i % 8));
		col[i] = chunk_crc(h, payload, n) ^ base;
		payload[at + (size_t)i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	uint32_t rows[32], t = base ^ want;
	uint8_t rhs[32];
	for (int j = 0; j < 32; j++) {
		rows[j] = 0;
		for (int i = 0; i < 32; i++)
			rows[j] |= ((col[i] >> j) & 1u) << i;
		rhs[j] = (uint8_t)((t >> j) & 1u);
	}
	int where[32], piv = 0;
	for (int i = 0; i < 32; i++) {
		where[i] = -1;
		int r = -1;
		for (int j = piv; j < 32 && r < 0; j++)
			if ((rows[j] >> i) & 1u)
				r = j;
		if (r < 0)
			continue;
		uint32_t tr = rows[r];
		rows[r] = rows[piv];
		rows[piv] = tr;
		uint8_t tb = rhs[r];
		rhs[r] = rhs[piv];
		rhs[piv] = tb;
		for (int j = 0; j < 32; j++) {
			if (j != piv && ((rows[j] >> i) & 1u)) {
				rows[j] ^= rows[piv];
				rhs[j] ^= rhs[piv];
			}
		}
		where[i] = piv++;
	}
	for (int i = 0; i < 32; i++)
		if (where[i] >= 0 && rhs[where[i]])
			payload[at + (size_t)i / 8] ^= (uint8_t)(1u << (i % 8));
	REQUIRE_EQ(chunk_crc(h, payload, n), want);
}

static void put(sp_buf *b, uint64_t type, const uint8_t *body, size_t n)
{
	REQUIRE_OK(sp_buf_varint(b, type));
	REQUIRE_OK(sp_buf_varint(b, n));
	REQUIRE_OK(sp_buf_append(b, body, n));
}

#define TAIL 24 /* Bytes at the end of the chunk that each case rewrites. */

SP_TEST(iterator_checks_records_again_when_the_checksum_still_matches)
{
	/* One stored chunk: a process, a thread, a frame, a stack, then 4 free
	 * bytes for forging, then TAIL bytes of samples and padding. */
	sp_buf b;
	sp_buf_init(&b);
	static const uint8_t proc[] = { 10, 0, 1, 1, 'p', 1, 'p' };
	static const uint8_t thr[] = { 0, 10, 1, 1, 't' };
	static const uint8_t frame[] = { STACKPULSE_FRAME_KERNEL, 0x10 };
	static const uint8_t stack[] = { 0, 0 };
	static const uint8_t free4[] = { 0, 0, 0, 0 };
	put(&b, SP_REC_PROCESS, proc, sizeof(proc));
	put(&b, SP_REC_THREAD, thr, sizeof(thr));
	put(&b, SP_REC_FRAME, frame, sizeof(frame));
	put(&b, SP_REC_STACK, stack, sizeof(stack));
	put(&b, 99, free4, sizeof(free4));
	size_t free_at = b.len - 4, tail_at = b.len;
	/* Two samples: delta, thread, stack, weight, cpu columns. */
	static const uint8_t good[] = { 2, 10, 2, 0, 0, 1, 1, 1, 1, 0, 3 };
	put(&b, SP_REC_SAMPLES, good, sizeof(good));
	uint8_t pad[TAIL] = { 0 };
	put(&b, 99, pad, TAIL - (b.len - tail_at) - 2);
	REQUIRE_EQ(b.len - tail_at, TAIL);
	static uint8_t file[4096];
	size_t n = raw_spool(file, sizeof(file), b.data, b.len, 0, 1, 0, 1, 2);
	REQUIRE(n > 0);
	uint8_t *h = file + SP_FILE_HEADER_LEN, *payload = h + SP_CHUNK_HEADER_LEN;
	uint32_t crc = sp_le32(h + SP_CHUNK_CRC_OFFSET);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(file, n, 0, &s));
	uint64_t count;
	REQUIRE_OK(count_samples(s, &count));
	REQUIRE_EQ(count, 2);
	uint8_t orig[TAIL];
	memcpy(orig, payload + tail_at, TAIL);

	/* Record bytes for the tail; short ones are padded with an unknown
	 * record. Each must stop the iterator with EFORMAT or ELIMIT. */
	static const struct {
		const char *why;
		uint8_t len;
		uint8_t bytes[TAIL];
	} cases[] = {
		{ "record type overlong",
		  12,
		  { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0 } },
		{ "record length past the chunk", 3, { 14, 60, 0 } },
		{ "sample count non-canonical", 8, { 14, 6, 0x81, 0, 0, 0, 0, 0 } },
		{ "sample count 0", 7, { 14, 5, 0, 0, 0, 0, 0 } },
		{ "sample count too large", 8, { 14, 6, 2, 0, 0, 0, 0, 0 } },
		{ "cpu column cut", 8, { 14, 6, 1, 0, 0, 1, 0, 0x80 } },
		{ "thread not defined", 8, { 14, 6, 1, 0, 1, 1, 1, 0 } },
		{ "stack not defined", 8, { 14, 6, 1, 0, 0, 2, 1, 0 } },
		{ "thread over 32 bits",
		  12,
		  { 14, 10, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 1, 0 } },
		{ "stack over 32 bits",
		  12,
		  { 14, 10, 1, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 0 } },
		{ "weight over 32 bits",
		  12,
		  { 14, 10, 1, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0 } },
		{ "cpu over 32 bits", 12, { 14, 10, 1, 0, 0, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x10 } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t *t = payload + tail_at;
		memset(t, 0, TAIL);
		memcpy(t, cases[i].bytes, cases[i].len);
		size_t left = TAIL - cases[i].len;
		if (left) {
			REQUIRE(left >= 2);
			t[cases[i].len] = 99;
			t[cases[i].len + 1] = (uint8_t)(left - 2);
		}
		forge_crc(h, payload, b.len, free_at, crc);
		int rc = count_samples(s, &count);
		if (rc != STACKPULSE_EFORMAT && rc != STACKPULSE_ELIMIT)
			fprintf(stderr, "    %s: %d %s\n", cases[i].why, rc,
			        stackpulse_last_error());
		CHECK(rc == STACKPULSE_EFORMAT || rc == STACKPULSE_ELIMIT);
		/* The same bytes in a fresh file are refused at open. */
		stackpulse_spool *x = NULL;
		CHECK(sp_spool_open_memory(file, n, STACKPULSE_SPOOL_STRICT, &x) < 0);
		CHECK(x == NULL);
	}
	/* The original tail again: the spool iterates as before. */
	memcpy(payload + tail_at, orig, TAIL);
	forge_crc(h, payload, b.len, free_at, crc);
	CHECK_OK(count_samples(s, &count));
	CHECK_EQ(count, 2);
	stackpulse_spool_close(s);
	sp_buf_free(&b);
}
