/* Every rejection path of the spool decoder, each with hand-made bytes, and
 * the forward-compatibility rules (unknown records, trailing fields). */
#include <stdarg.h>

#include "common/buf.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"
#include "spool_peek.h"

#define FILE_CAP (1u << 20)
static uint8_t file[FILE_CAP];

/* Opens strictly, as the rejection rules are written, and checks that the
 * default open agrees: the same error for a bad file header, else a spool
 * opened as damaged at the chunk or footer the strict error names. The
 * strict result and its detail are what the caller sees. */
static int strict_open(const void *p, size_t n, stackpulse_spool **out)
{
	int rc = sp_spool_open_memory(p, n, STACKPULSE_SPOOL_STRICT, out);
	char detail[1024];
	snprintf(detail, sizeof(detail), "%s", stackpulse_last_error());
	stackpulse_spool *s = NULL;
	int lrc = sp_spool_open_memory(p, n, 0, &s);
	if (rc == 0) {
		CHECK_EQ(lrc, 0);
		if (s)
			CHECK_EQ(stackpulse_spool_meta(s)->damaged, 0);
	} else if (lrc != 0) {
		CHECK_EQ(lrc, rc); /* Nothing to keep: the file header is bad. */
	} else {
		const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
		CHECK_EQ(m->damaged, 1);
		CHECK_EQ(m->truncated, 1);
		CHECK_EQ(m->damaged_code, rc);
		CHECK_EQ(m->damaged_chunk, m->chunks);
		CHECK_STR(m->damage, detail);
		CHECK(m->damaged_offset >= SP_FILE_HEADER_LEN);
	}
	stackpulse_spool_close(s);
	/* The caller looks at the strict open's detail. */
	stackpulse_spool_close(*out);
	return sp_spool_open_memory(p, n, STACKPULSE_SPOOL_STRICT, out);
}

/* Builds the body of one record from varints and strings: "v" a varint,
 * "z" a zigzag varint, "s" a string, "b" a (ptr, len) blob. */
static void rec(sp_buf *out, unsigned type, const char *fmt, ...)
{
	sp_buf body;
	sp_buf_init(&body);
	va_list ap;
	va_start(ap, fmt);
	for (const char *f = fmt; *f; f++) {
		switch (*f) {
		case 'v': REQUIRE_OK(sp_buf_varint(&body, va_arg(ap, uint64_t))); break;
		case 'z': REQUIRE_OK(sp_buf_svarint(&body, va_arg(ap, int64_t))); break;
		case 's': REQUIRE_OK(sp_buf_str(&body, va_arg(ap, const char *))); break;
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			REQUIRE_OK(sp_buf_blob(&body, p, n));
			break;
		}
		default: REQUIRE(0);
		}
	}
	va_end(ap);
	REQUIRE_OK(sp_buf_varint(out, type));
	REQUIRE_OK(sp_buf_varint(out, body.len));
	REQUIRE_OK(sp_buf_append(out, body.data, body.len));
	sp_buf_free(&body);
}

#define V(x) ((uint64_t)(x))
#define Z(x) ((int64_t)(x))

/* A process, a thread, a module, a native frame and a one-frame stack. */
static void basics(sp_buf *b)
{
	rec(b, SP_REC_PROCESS, "vvvss", V(10), V(0), V(1), "p", "p");
	rec(b, SP_REC_THREAD, "vvvs", V(0), V(10), V(1), "t");
	rec(b, SP_REC_MODULE, "bb", "/bin/p", (size_t)6, "", (size_t)0);
	rec(b, SP_REC_FRAME, "vvv", V(STACKPULSE_FRAME_NATIVE), V(0), V(0x10));
	rec(b, SP_REC_STACK, "vv", V(0), V(0));
}

/* Opens one chunk of @p b (zstd, with footer) and returns the result. */
static int open_records(const sp_buf *b, uint64_t samples)
{
	size_t n = raw_spool(file, FILE_CAP, b->data, b->len, 1, 1, 0, 1, samples);
	REQUIRE(n > 0);
	stackpulse_spool *s = NULL;
	int rc = strict_open(file, n, &s);
	if (rc == 0) {
		/* Accepted input must also iterate cleanly. */
		stackpulse_sample_iter *it;
		REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
		const struct stackpulse_sample *x;
		while ((rc = stackpulse_sample_iter_next(it, &x)) == 1)
			;
		stackpulse_sample_iter_free(it);
		stackpulse_spool_close(s);
	} else {
		CHECK(s == NULL);
		CHECK(stackpulse_last_error()[0] != '\0');
		CHECK_EQ(stackpulse_last_error_code(), rc);
	}
	return rc;
}

/* Expects @p b (after basics) to be rejected with @p code. */
#define EXPECT_REJECT(b, samples, code)                                                            \
	do {                                                                                       \
		int rc_ = open_records((b), (samples));                                            \
		CHECK_EQ(rc_, (code));                                                             \
		if (rc_ != (code))                                                                 \
			fprintf(stderr, "    detail: %s\n", stackpulse_last_error());              \
	} while (0)

SP_TEST(valid_baseline_opens)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(1), Z(5), V(0), V(1), V(1), V(0));
	CHECK_EQ(open_records(&b, 1), 0);
	sp_buf_free(&b);
}

SP_TEST(file_header_rejections)
{
	size_t n = raw_spool(file, FILE_CAP, NULL, 0, 0, 1, 0, 1, 0);
	stackpulse_spool *s;
	REQUIRE_OK(strict_open(file, n, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 0);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 0);
	stackpulse_spool_close(s);

	file[1] = 'X';
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	CHECK(strstr(stackpulse_last_error(), "magic") != NULL);
	n = raw_spool(file, FILE_CAP, NULL, 0, 0, 2, 0, 1, 0);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EVERSION);
	n = raw_spool(file, FILE_CAP, NULL, 0, 0, 0, 0, 1, 0);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EVERSION);
	n = raw_spool(file, FILE_CAP, NULL, 0, 0, 1, 1, 1, 0);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EUNSUPPORTED);
	n = raw_spool(file, FILE_CAP, NULL, 0, 0, 1, 0, 1, 0);
	file[13] = 1;
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	CHECK_EQ(strict_open(file, 0, &s), STACKPULSE_ETRUNCATED);
	CHECK_EQ(strict_open("ELF", 3, &s), STACKPULSE_EFORMAT);
	CHECK_EQ(strict_open(NULL, 5, &s), -22);
}

SP_TEST(chunk_header_rejections)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	stackpulse_spool *s;
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	const size_t c = SP_FILE_HEADER_LEN;
	REQUIRE_OK(strict_open(file, n, &s));
	stackpulse_spool_close(s);

	/* A flipped payload bit fails the checksum, with a precise message. */
	file[c + SP_CHUNK_HEADER_LEN + 3] ^= 0x10;
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_ECHECKSUM);
	CHECK(strstr(stackpulse_last_error(), "chunk 0 at offset 16") != NULL);
	file[c + SP_CHUNK_HEADER_LEN + 3] ^= 0x10;
	/* So does a flipped header bit (base time is covered too). */
	file[c + 20] ^= 1;
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_ECHECKSUM);
	file[c + 20] ^= 1;

	struct {
		size_t off;
		uint8_t value;
		int code;
	} cases[] = {
		{ c + 4, 2, STACKPULSE_EUNSUPPORTED }, /* codec */
		{ c + 5, 1, STACKPULSE_EUNSUPPORTED }, /* flags */
		{ c + 6, 1, STACKPULSE_EFORMAT },      /* reserved */
		{ c + 8, 1, STACKPULSE_EFORMAT },      /* sequence */
		{ c + 19, 0x01, STACKPULSE_ELIMIT },   /* raw length 16 MiB + ... */
		{ c + 15, 0x01, STACKPULSE_EFORMAT },  /* stored length beyond zstd's bound */
		{ c, 'X', STACKPULSE_EFORMAT },        /* chunk magic */
	};
	uint32_t stored = sp_le32(file + c + 12);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t old = file[cases[i].off];
		file[cases[i].off] = cases[i].value;
		fix_chunk_crc_len(file, c, stored);
		int rc = strict_open(file, n, &s);
		if (rc != cases[i].code)
			fprintf(stderr, "    case %zu: %d %s\n", i, rc, stackpulse_last_error());
		CHECK_EQ(rc, cases[i].code);
		file[cases[i].off] = old;
		fix_chunk_crc_len(file, c, stored);
	}

	/* Uncompressed chunks must have equal lengths. */
	n = raw_spool(file, FILE_CAP, b.data, b.len, 0, 1, 0, 1, 0);
	REQUIRE_OK(strict_open(file, n, &s));
	stackpulse_spool_close(s);
	sp_put_le32(file + c + 16, (uint32_t)b.len + 1);
	fix_chunk_crc(file, c);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	sp_buf_free(&b);
}

SP_TEST(zstd_payload_rejections)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	stackpulse_spool *s;
	const size_t c = SP_FILE_HEADER_LEN;
	/* Header raw length disagrees with the frame's content size. */
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	sp_put_le32(file + c + 16, (uint32_t)b.len - 1);
	fix_chunk_crc(file, c);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	/* A corrupt frame body (checksum fixed up) is a decompression error. */
	n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	uint32_t stored = sp_le32(file + c + 12);
	for (uint32_t i = 6; i < stored; i++)
		file[c + SP_CHUNK_HEADER_LEN + i] ^= 0x5a;
	fix_chunk_crc(file, c);
	int rc = strict_open(file, n, &s);
	CHECK(rc == STACKPULSE_ECOMPRESS || rc == STACKPULSE_EFORMAT);
	/* Not a zstd frame at all. */
	n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	memset(file + c + SP_CHUNK_HEADER_LEN, 0, 4);
	fix_chunk_crc(file, c);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	sp_buf_free(&b);
}

/* Chunks of 8 MiB of zeros compress to a few hundred bytes each. The reader
 * must refuse to inflate a small file past max(16 MiB, 256 x size). */
SP_TEST(decompression_bomb_is_refused)
{
	size_t raw_len = SP_CHUNK_RAW_MAX;
	uint8_t *raw = calloc(1, raw_len);
	REQUIRE(raw != NULL);
	/* One unknown record spanning the chunk: type 99, varint length. */
	size_t hdr = 0;
	raw[hdr++] = 99;
	hdr += sp_varint_put(raw + hdr, raw_len - 5);
	REQUIRE(hdr == 5);
	memsink m = { 0 };
	uint8_t fh[SP_FILE_HEADER_LEN] = { 0 };
	static const uint8_t magic[SP_FILE_MAGIC_LEN] = SP_FILE_MAGIC_BYTES;
	memcpy(fh, magic, SP_FILE_MAGIC_LEN);
	fh[8] = 1;
	REQUIRE_OK(memsink_write(&m, fh, sizeof(fh)));
	size_t cap = ZSTD_compressBound(raw_len);
	uint8_t *comp = malloc(SP_CHUNK_HEADER_LEN + cap);
	REQUIRE(comp != NULL);
	for (uint32_t i = 0; i < 4; i++) {
		size_t stored = ZSTD_compress(comp + SP_CHUNK_HEADER_LEN, cap, raw, raw_len, 19);
		REQUIRE(!ZSTD_isError(stored));
		memset(comp, 0, SP_CHUNK_HEADER_LEN);
		sp_put_le32(comp, SP_CHUNK_MAGIC);
		comp[4] = SP_CODEC_ZSTD;
		sp_put_le32(comp + 8, i);
		sp_put_le32(comp + 12, (uint32_t)stored);
		sp_put_le32(comp + 16, (uint32_t)raw_len);
		REQUIRE_OK(memsink_write(&m, comp, SP_CHUNK_HEADER_LEN + stored));
		fix_chunk_crc(m.data, m.len - SP_CHUNK_HEADER_LEN - stored);
	}
	CHECK(m.len < 4096);
	stackpulse_spool *s;
	CHECK_EQ(strict_open(m.data, m.len, &s), STACKPULSE_ELIMIT);
	CHECK(strstr(stackpulse_last_error(), "decompressed total") != NULL);
	/* Two such chunks fit the 16 MiB floor: they open, as a cut file. */
	size_t two = SP_FILE_HEADER_LEN + 2 * (m.len - SP_FILE_HEADER_LEN) / 4;
	REQUIRE_OK(strict_open(m.data, two, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 2);
	stackpulse_spool_close(s);
	free(comp);
	free(raw);
	memsink_free(&m);
}

SP_TEST(footer_rejections)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(1), Z(5), V(0), V(1), V(1), V(0));
	stackpulse_spool *s;
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 2);
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT); /* count */
	n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 1);
	REQUIRE_OK(strict_open(file, n, &s));
	stackpulse_spool_close(s);
	file[n - 1] ^= 1;
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_ECHECKSUM);
	file[n - 1] ^= 1;
	/* Bytes after the footer. */
	file[n] = 0;
	CHECK_EQ(strict_open(file, n + 1, &s), STACKPULSE_EFORMAT);
	/* Footer offset must be where the footer is. */
	sp_put_le64(file + n - 16, 17);
	sp_put_le32(file + n - 4, sp_crc32c(0, file + n - 32, 28));
	CHECK_EQ(strict_open(file, n, &s), STACKPULSE_EFORMAT);
	sp_buf_free(&b);
}

SP_TEST(record_framing_rejections)
{
	sp_buf b;
	sp_buf_init(&b);
	/* Over-long varint (11 continuation bytes) as a record type. */
	for (int i = 0; i < 11; i++)
		REQUIRE_OK(sp_buf_u8(&b, 0x80));
	REQUIRE_OK(sp_buf_u8(&b, 0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* Non-canonical varint (0x80 0x00). */
	sp_buf_reset(&b);
	REQUIRE_OK(sp_buf_u8(&b, 0x81));
	REQUIRE_OK(sp_buf_u8(&b, 0x00));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* A body longer than the rest of the chunk. */
	sp_buf_reset(&b);
	REQUIRE_OK(sp_buf_varint(&b, SP_REC_KSYM));
	REQUIRE_OK(sp_buf_varint(&b, 50));
	REQUIRE_OK(sp_buf_append(&b, "abc", 3));
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* A record cut inside its body fields is malformed, not a cut file. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_PROCESS, "v", V(10));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	CHECK(strstr(stackpulse_last_error(), "chunk 0") != NULL);
	sp_buf_free(&b);
}

SP_TEST(forward_references_rejected)
{
	sp_buf b;
	sp_buf_init(&b);
	rec(&b, SP_REC_THREAD, "vvvs", V(0), V(1), V(0), "t");
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	CHECK(strstr(stackpulse_last_error(), "not defined") != NULL);

	struct {
		unsigned type;
		const char *fmt;
		uint64_t a, b, c;
	} cases[] = {
		{ SP_REC_PROCESS, "vvvss", 11, 2, 0 }, /* parent 1 of 1 process */
		{ SP_REC_EXEC, "vvss", 1, 0, 0 },
		{ SP_REC_THREAD, "vvvs", 1, 5, 0 },
		{ SP_REC_COMM, "vvs", 1, 0, 0 },
		{ SP_REC_RTNAME, "vvvs", 1, 0, 1 }, /* runtime name of thread 1 of 1 */
		{ SP_REC_EXIT, "vvv", 1, 0, 0 },
		{ SP_REC_EXIT, "vvv", 0, 2, 0 }, /* thread 1 of 1 */
		{ SP_REC_FORK, "vvv", 0, 1, 0 },
		{ SP_REC_LOST, "vvv", 2, 1, 0 },
		{ SP_REC_STATS, "vvv", 6, 1, 2 }, /* per-thread STATS, thread 1 of 1 */
		{ SP_REC_MAPPING, "vvvvvv", 0, 1, 0 },
		{ SP_REC_FRAME, "vvv", STACKPULSE_FRAME_NATIVE, 1, 0 },
		{ SP_REC_FRAME, "vvvz", STACKPULSE_FRAME_PYTHON, 0, 0 },
		{ SP_REC_STACK, "vv", 2, 0, 0 },
		{ SP_REC_STACK, "vv", 0, 1, 0 },
		{ SP_REC_JITSYM, "vvvs", 1, 0, 1 },
		{ SP_REC_SYMTAB, "vvvb", 1, 1, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sp_buf_reset(&b);
		basics(&b);
		const char *f = cases[i].fmt;
		if (strcmp(f, "vvvss") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, V(0), "x", "y");
		else if (strcmp(f, "vvss") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, "x", "y");
		else if (strcmp(f, "vvvs") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, cases[i].c, "x");
		else if (strcmp(f, "vvs") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, "x");
		else if (strcmp(f, "vvv") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, cases[i].c);
		else if (strcmp(f, "vv") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b);
		else if (strcmp(f, "vvvvvv") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, V(0x1000), V(0x1000),
			    V(0), V(0));
		else if (strcmp(f, "vvvz") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, cases[i].c, Z(1));
		else if (strcmp(f, "vvvb") == 0)
			rec(&b, cases[i].type, f, cases[i].a, cases[i].b, cases[i].c, "x",
			    (size_t)1);
		int rc = open_records(&b, 0);
		if (rc != STACKPULSE_EFORMAT)
			fprintf(stderr, "    case %zu (type %u): %d %s\n", i, cases[i].type, rc,
			        stackpulse_last_error());
		CHECK_EQ(rc, STACKPULSE_EFORMAT);
	}
	/* Samples: thread and stack must exist. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(1), Z(5), V(1), V(1), V(1), V(0));
	EXPECT_REJECT(&b, 1, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(1), Z(5), V(0), V(2), V(1), V(0));
	EXPECT_REJECT(&b, 1, STACKPULSE_EFORMAT);
	sp_buf_free(&b);
}

SP_TEST(limits_rejected)
{
	sp_buf b;
	sp_buf_init(&b);
	char *big = malloc(SP_NAME_MAX + 2);
	REQUIRE(big != NULL);
	memset(big, 'a', SP_NAME_MAX + 1);
	big[SP_NAME_MAX + 1] = 0;
	/* Names over 64 KiB. */
	rec(&b, SP_REC_PROCESS, "vvvss", V(1), V(0), V(0), big, "");
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	big[SP_NAME_MAX] = 0; /* Exactly the cap is fine. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_PROCESS, "vvvss", V(1), V(0), V(0), big, "");
	CHECK_EQ(open_records(&b, 0), 0);
	/* Paths over 4 KiB. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_MODULE, "bb", big, (size_t)SP_PATH_MAX + 1, "", (size_t)0);
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* Build-ids over 64 bytes. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_MODULE, "bb", "/x", (size_t)2, big, (size_t)SP_BUILD_ID_MAX + 1);
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* NUL inside strings. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_MODULE, "bb", "/x\0y", (size_t)4, "", (size_t)0);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_COMM, "vvb", V(0), V(0), "a\0", (size_t)2);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* pid beyond pid_t. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_PROCESS, "vvvss", V(0x80000000u), V(0), V(0), "", "");
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* Weight beyond 32 bits. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(1), Z(5), V(0), V(1), V(1ull << 32), V(0));
	EXPECT_REJECT(&b, 1, STACKPULSE_ELIMIT);
	/* Line beyond int32. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_PYCODE, "ssz", "f", "f.py", Z(1ll << 40));
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* A sample count that cannot fit the body. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "vzvvvv", V(2), Z(5), V(0), V(1), V(1), V(0));
	EXPECT_REJECT(&b, 2, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SAMPLES, "v", V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* Symbol table length over its cap. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(SP_SYMTAB_MAX + 1ull), V(0), "x", (size_t)1);
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* Too many distinct stats keys. */
	sp_buf_reset(&b);
	for (uint64_t k = 0; k <= SP_STATS_MAX; k++)
		rec(&b, SP_REC_STATS, "vv", k, V(1));
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	/* Kernel frames flag must be 0 or 1. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_META, "vvvvssssvs", V(1), V(1), V(99), V(8), "e", "m", "k", "h", V(2), "");
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	free(big);
	sp_buf_free(&b);
}

SP_TEST(depth_limit_rejected)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b); /* Stack 1 = frame 0, depth 1. */
	for (uint32_t d = 2; d <= SP_STACK_DEPTH_MAX; d++)
		rec(&b, SP_REC_STACK, "vv", V(d - 1), V(0));
	CHECK_EQ(open_records(&b, 0), 0);
	rec(&b, SP_REC_STACK, "vv", V(SP_STACK_DEPTH_MAX), V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_ELIMIT);
	sp_buf_free(&b);
}

SP_TEST(duplicates_and_bad_values_rejected)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_MODULE, "bb", "/bin/p", (size_t)6, "", (size_t)0);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_FRAME, "vvv", V(STACKPULSE_FRAME_NATIVE), V(0), V(0x10));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_STACK, "vv", V(0), V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	rec(&b, SP_REC_META, "vvvvssssvs", V(1), V(1), V(99), V(8), "e", "m", "k", "h", V(1), "");
	CHECK_EQ(open_records(&b, 0), 0);
	rec(&b, SP_REC_META, "vvvvssssvs", V(1), V(1), V(99), V(8), "e", "m", "k", "h", V(1), "");
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* Inline frames are a symbolizer notion, never stored. */
	sp_buf_reset(&b);
	rec(&b, SP_REC_FRAME, "vv", V(STACKPULSE_FRAME_INLINE), V(1));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	rec(&b, SP_REC_FRAME, "vv", V(77), V(1));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* Empty or wrapping ranges. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_MAPPING, "vvvvvv", V(0), V(0), V(0x1000), V(0), V(0), V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_MAPPING, "vvvvvv", V(0), V(0), V(UINT64_MAX - 1), V(2), V(0), V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_JITSYM, "vvvs", V(0), V(UINT64_MAX), V(2), "j");
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* Symbol table parts out of order, and a second table. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(4), V(1), "ab", (size_t)2);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(2), V(0), "ab", (size_t)2);
	CHECK_EQ(open_records(&b, 0), 0);
	rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(2), V(0), "ab", (size_t)2);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	/* A complete file may not end with half a table. */
	sp_buf_reset(&b);
	basics(&b);
	rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(4), V(0), "ab", (size_t)2);
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_free(&b);
}

SP_TEST(unknown_records_and_trailing_fields_are_skipped)
{
	sp_buf b;
	sp_buf_init(&b);
	/* Unknown record types, including a huge type number. */
	rec(&b, 99, "vvs", V(1), V(2), "future");
	rec(&b, 0, "");
	REQUIRE_OK(sp_buf_varint(&b, UINT64_MAX));
	REQUIRE_OK(sp_buf_varint(&b, 0));
	/* Known records with extra fields a newer writer added. */
	rec(&b, SP_REC_PROCESS, "vvvssvs", V(10), V(0), V(1), "p", "p c", V(42), "extra");
	rec(&b, SP_REC_THREAD, "vvvsv", V(0), V(10), V(1), "t", V(7));
	rec(&b, SP_REC_KSYM, "vssv", V(0x1000), "sym", "", V(0x40));
	rec(&b, SP_REC_STACK, "vvv", V(0), V(0), V(0)); /* Wrong, but frame 0 is undefined: */
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	b.len = 0;
	rec(&b, 99, "vvs", V(1), V(2), "future");
	rec(&b, SP_REC_PROCESS, "vvvssvs", V(10), V(0), V(1), "p", "p c", V(42), "extra");
	rec(&b, SP_REC_THREAD, "vvvsv", V(0), V(10), V(1), "t", V(7));
	rec(&b, SP_REC_KSYM, "vssv", V(0x1000), "sym", "", V(0x40));
	rec(&b, SP_REC_FRAME, "vvv", V(STACKPULSE_FRAME_KERNEL), V(0x1010), V(5));
	rec(&b, SP_REC_STACK, "vvv", V(0), V(0), V(9));
	/* A SAMPLES block with a sixth column appended. */
	rec(&b, SP_REC_SAMPLES, "vzvvvvv", V(1), Z(5), V(0), V(1), V(1), V(3), V(1));
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 1);
	stackpulse_spool *s;
	REQUIRE_OK(strict_open(file, n, &s));
	CHECK_STR(stackpulse_spool_process(s, 0)->cmdline, "p c");
	CHECK_STR(stackpulse_spool_thread(s, 0)->name, "t");
	CHECK_EQ(stackpulse_spool_frame(s, 0)->offset, 0x1010);
	CHECK_EQ(stackpulse_spool_stack_depth(s, 1), 1);
	const char *name;
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0x1010, &name, NULL, NULL));
	CHECK_STR(name, "sym");
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *x;
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &x), 1);
	CHECK_EQ(x->time_ns, 5);
	CHECK_EQ(x->cpu, 3);
	CHECK_EQ(x->stack, 1);
	CHECK_EQ(stackpulse_sample_iter_next(it, &x), 0);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);
	sp_buf_free(&b);
}

/* STATS with the optional thread field: key 6 is that thread's lost samples;
 * other per-thread keys and the global values stay apart; a STATS record
 * without it (older writers) is a global counter. */
SP_TEST(stats_per_thread_lost)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_STATS, "vv", V(6), V(40));
	rec(&b, SP_REC_STATS, "vvv", V(6), V(9), V(1));
	rec(&b, SP_REC_STATS, "vvv", V(77), V(3), V(1));
	rec(&b, SP_REC_STATS, "vvv", V(6), V(11), V(0)); /* thread "none": global */
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	stackpulse_spool *s;
	REQUIRE_OK(strict_open(file, n, &s));
	CHECK_EQ(stackpulse_spool_thread(s, 0)->lost, 9);
	uint64_t v = 0;
	REQUIRE_OK(sp_spool_stat(s, 6, &v));
	CHECK_EQ(v, 11);
	CHECK_EQ(sp_spool_stat(s, 77, &v), STACKPULSE_ENOTFOUND);
	stackpulse_spool_close(s);
	sp_buf_free(&b);
}

/* OFFCPU: ids defined before, states 0 and 1 only, a count that fits; a
 * META method is a trailing field older readers skip. */
SP_TEST(offcpu_rejections)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_OFFCPU, "vzvvvv", V(1), Z(5), V(0), V(1), V(100), V(1));
	CHECK_EQ(open_records(&b, 0), 0);
	sp_buf_free(&b);
	/* The two merged columns come together: both, or a short body. */
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_OFFCPU, "vzvvvvvv", V(1), Z(5), V(0), V(1), V(100), V(1), V(3), V(4500));
	CHECK_EQ(open_records(&b, 0), 0);
	sp_buf_free(&b);
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_OFFCPU, "vzvvvvv", V(1), Z(5), V(0), V(1), V(100), V(1), V(3));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_free(&b);
	/* Merged counts that add up past 2^64. */
	sp_buf_init(&b);
	basics(&b);
	rec(&b, SP_REC_OFFCPU, "vzzvvvvvvvvvvv", V(2), Z(5), Z(1), V(0), V(0), V(1), V(1), V(100),
	    V(100), V(1), V(1), V(UINT64_MAX), V(1), V(0), V(0));
	EXPECT_REJECT(&b, 0, STACKPULSE_EFORMAT);
	sp_buf_free(&b);
	struct {
		uint64_t n, thread, stack, state;
		int code;
	} bad[] = {
		{ 1, 1, 0, 0, STACKPULSE_EFORMAT }, /* thread 1 not defined */
		{ 1, 0, 2, 0, STACKPULSE_EFORMAT }, /* stack 2 not defined */
		{ 1, 0, 0, 2, STACKPULSE_ELIMIT },  /* state 2 */
		{ 2, 0, 0, 0, STACKPULSE_EFORMAT }, /* count 2 in 5 bytes */
		{ 0, 0, 0, 0, STACKPULSE_EFORMAT }, /* empty block */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sp_buf_init(&b);
		basics(&b);
		rec(&b, SP_REC_OFFCPU, "vzvvvv", V(bad[i].n), Z(5), V(bad[i].thread),
		    V(bad[i].stack), V(100), V(bad[i].state));
		EXPECT_REJECT(&b, 0, bad[i].code);
		sp_buf_free(&b);
	}
	/* The META method, then a later field this reader does not know. */
	sp_buf_init(&b);
	rec(&b, SP_REC_META, "vvvvssssvsvv", V(1), V(2), V(99), V(8), "cpu-clock", "x86_64", "6.1",
	    "h", V(0), "", V(STACKPULSE_OFFCPU_SWITCH_EVENT), V(77));
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	stackpulse_spool *s;
	REQUIRE_OK(strict_open(file, n, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->off_cpu_method, STACKPULSE_OFFCPU_SWITCH_EVENT);
	stackpulse_spool_close(s);
	sp_buf_free(&b);
}

/* A table sent in many small parts is joined in order (its buffer grows
 * geometrically, never past the total), and lost counts saturate. */
SP_TEST(symtab_parts_join_and_lost_saturates)
{
	sp_buf b;
	sp_buf_init(&b);
	basics(&b);
	static const char text[] = "0123456789abcdef";
	for (uint64_t off = 0; off < 16; off += 2)
		rec(&b, SP_REC_SYMTAB, "vvvb", V(0), V(16), off, text + off, (size_t)2);
	rec(&b, SP_REC_LOST, "vvv", V(0), V(UINT64_MAX - 1), V(5));
	rec(&b, SP_REC_LOST, "vvv", V(1), V(3), V(6));
	size_t n = raw_spool(file, FILE_CAP, b.data, b.len, 1, 1, 0, 1, 0);
	stackpulse_spool *s;
	REQUIRE_OK(strict_open(file, n, &s));
	const uint8_t *tab;
	size_t len;
	REQUIRE_OK(sp_spool_module_symtab(s, 0, &tab, &len));
	CHECK_EQ(len, 16);
	CHECK(memcmp(tab, text, 16) == 0);
	CHECK(stackpulse_spool_module(s, 0)->has_symbols);
	CHECK_EQ(stackpulse_spool_meta(s)->lost, UINT64_MAX);
	CHECK_EQ(stackpulse_spool_event(s, 1)->count, 3);
	stackpulse_spool_close(s);
	sp_buf_free(&b);
}
