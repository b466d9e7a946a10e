/* Writes the seed corpora of the spool fuzz harnesses: valid spools of
 * several shapes made by the encoder, cut ones, and ones with bytes changed
 * (with checksums fixed up, so the change reaches the record decoder).
 * Every seed stays under 4 KiB.
 *
 * usage: gen_corpus DECODE_DIR ROUNDTRIP_DIR
 * build: cc -std=c17 -D_GNU_SOURCE -Iinclude -Isrc -Itests/support with the sources
 *        of src/common and src/format, -lzstd. */
#include <stdio.h>

#include "spool_fixture.h"

/* spool_fixture.h uses the test harness macros; this tool has none. */
void sp_test_fail(const char *file, int line, const char *fmt, ...)
{
	(void)fmt;
	fprintf(stderr, "gen_corpus: failure at %s:%d\n", file, line);
	exit(1);
}

void sp_test_abort(void)
{
	exit(1);
}

static const char *dirs[2];
static int written;

static void put(int which, const char *name, const uint8_t *p, size_t len)
{
	if (len > 4096) {
		fprintf(stderr, "gen_corpus: %s is %zu bytes, skipped\n", name, len);
		return;
	}
	for (int d = 0; d < 2; d++) {
		if (!(which & (1 << d)))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/seed-%s", dirs[d], name);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
			fprintf(stderr, "gen_corpus: cannot write %s\n", path);
			exit(1);
		}
		written++;
	}
}

#define BOTH   3
#define DECODE 1

typedef int (*shape_fn)(sp_writer *w);

static memsink make(shape_fn fn, int level, uint32_t chunk_bytes, int finish)
{
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { level, chunk_bytes };
	if (sp_writer_new(&opts, memsink_write, &m, &w) != 0 || fn(w) != 0 ||
	    (finish ? sp_writer_finish(w) : sp_writer_flush(w)) != 0) {
		fprintf(stderr, "gen_corpus: writer failed: %s\n", stackpulse_last_error());
		exit(1);
	}
	sp_writer_free(w);
	return m;
}

static int shape_rich(sp_writer *w)
{
	rich_ids ids;
	return write_rich(w, &ids, 0);
}

static int shape_empty(sp_writer *w)
{
	(void)w;
	return 0;
}

static int shape_meta(sp_writer *w)
{
	sp_meta meta = { 1, 2, 997, 65528, "cycles", "aarch64", "6.8.0", "h", 0, "paranoid" };
	return sp_writer_meta(w, &meta);
}

static int shape_steady(sp_writer *w)
{
	return write_steady(w, 300, 12, 3);
}

static int shape_deep(sp_writer *w)
{
	uint32_t proc, thr, frames[80], id;
	int rc;
	if ((rc = sp_writer_process(w, 7, UINT32_MAX, 0, "deep", "deep", &proc)) ||
	    (rc = sp_writer_thread(w, proc, 7, 0, "deep", &thr)))
		return rc;
	for (uint32_t i = 0; i < 80; i++) {
		struct stackpulse_raw_frame f = { STACKPULSE_FRAME_UNKNOWN, 0, 0x400000 + i * 4, 0,
			                          0 };
		if ((rc = sp_writer_frame(w, &f, &frames[i])))
			return rc;
	}
	if ((rc = sp_writer_stack_frames(w, frames, 80, &id)))
		return rc;
	for (uint32_t i = 0; i < 20; i++)
		if ((rc = sp_writer_sample(w, 100 + i * 1000000, thr, id - (i % 5), 1, 0)))
			return rc;
	return 0;
}

static int shape_python(sp_writer *w)
{
	uint32_t proc, thr, code[4], frames[4], id;
	int rc;
	if ((rc = sp_writer_process(w, 9, UINT32_MAX, 0, "python3", "python3 -m app", &proc)) ||
	    (rc = sp_writer_thread(w, proc, 9, 0, "python3", &thr)))
		return rc;
	static const char *names[] = { "<module>", "main", "App.handle", "json.dumps" };
	for (uint32_t i = 0; i < 4; i++) {
		if ((rc = sp_writer_pycode(w, names[i], "/srv/app.py", (int32_t)(i * 10 + 1),
		                           &code[i])))
			return rc;
		struct stackpulse_raw_frame f = { STACKPULSE_FRAME_PYTHON, 0, i * 2, code[i],
			                          (int32_t)(i * 10 + 3) };
		if ((rc = sp_writer_frame(w, &f, &frames[3 - i])))
			return rc;
	}
	if ((rc = sp_writer_stack_frames(w, frames, 4, &id)))
		return rc;
	for (uint32_t i = 0; i < 30; i++)
		if ((rc = sp_writer_sample(w, 5000 - i * 3, thr, i % 2 ? id : id - 1, 1 + i % 3,
		                           i % 4)))
			return rc;
	return sp_writer_stat(w, SP_STAT_PYTHON_SAMPLES, 30);
}

static int shape_lifecycle(sp_writer *w)
{
	uint32_t p[4], t[6];
	int rc;
	if ((rc = sp_writer_process(w, 1, UINT32_MAX, 5, "sh", "sh -c x", &p[0])) ||
	    (rc = sp_writer_thread(w, p[0], 1, 5, "sh", &t[0])))
		return rc;
	for (uint32_t i = 1; i < 4; i++) {
		if ((rc = sp_writer_process(w, (pid_t)(10 + i), p[i - 1], 10 * i, "child", "",
		                            &p[i])) ||
		    (rc = sp_writer_fork(w, p[i - 1], p[i], 10 * i)) ||
		    (rc = sp_writer_thread(w, p[i], (pid_t)(10 + i), 10 * i, "child", &t[i])) ||
		    (rc = sp_writer_process_exec(w, p[i], 10 * i + 1, "true", "/bin/true --x")) ||
		    (rc = sp_writer_thread_name(w, t[i], 10 * i + 2, "true")) ||
		    (rc = sp_writer_exit(w, p[i], t[i], 10 * i + 5)) ||
		    (rc = sp_writer_exit(w, p[i], UINT32_MAX, 10 * i + 6)) ||
		    (rc = sp_writer_lost(w, t[i], i, 10 * i + 7)))
			return rc;
	}
	uint32_t mod;
	if ((rc = sp_writer_module(w, "/bin/true", rich_build_id, 8, &mod)) ||
	    (rc = sp_writer_mapping(w, p[1], mod, 0x55550000, 0x55560000, 0x1000, 11)) ||
	    (rc = sp_writer_jitsym(w, p[2], 0x7f00, 0x40, "jit_a")) ||
	    (rc = sp_writer_jitsym(w, p[2], 0x7e00, 0x40, "jit_b")) ||
	    (rc = sp_writer_ksym(w, 0xffff0000, "k_b", "mod")) ||
	    (rc = sp_writer_ksym(w, 0xfff00000, "k_a", "")))
		return rc;
	static const uint8_t tab[] = "embedded symbol table bytes";
	return sp_writer_symtab(w, mod, tab, sizeof(tab));
}

/* Renames written out of time order, and a leader renamed by COMM. */
static int shape_names(sp_writer *w)
{
	uint32_t p, lead, other;
	int rc;
	if ((rc = sp_writer_process(w, 30, UINT32_MAX, 1, "bash", "bash -c run", &p)) ||
	    (rc = sp_writer_thread(w, p, 30, 1, "bash", &lead)) ||
	    (rc = sp_writer_thread(w, p, 31, 2, "bash", &other)) ||
	    (rc = sp_writer_process_exec(w, p, 50, "python3", "python3 app.py")) ||
	    (rc = sp_writer_thread_name(w, lead, 60, "app-main")) ||
	    (rc = sp_writer_thread_name(w, other, 70, "pool-1")) ||
	    (rc = sp_writer_process_exec(w, p, 40, "env", "env python3 app.py")) ||
	    (rc = sp_writer_thread_name(w, other, 45, "early")))
		return rc;
	return sp_writer_sample(w, 80, other, 0, 1, 0);
}

/* Runtime thread names (RTNAME): written out of time order, renamed, one
 * of a runtime the reader does not know, and one for a thread with a COMM
 * rename of its own. */
static int shape_rtnames(sp_writer *w)
{
	uint32_t p, lead, a, b;
	int rc;
	if ((rc = sp_writer_process(w, 40, UINT32_MAX, 1, "python3", "python3 app.py", &p)) ||
	    (rc = sp_writer_thread(w, p, 40, 1, "python3", &lead)) ||
	    (rc = sp_writer_thread(w, p, 41, 2, "python3", &a)) ||
	    (rc = sp_writer_thread(w, p, 42, 3, "python3", &b)) ||
	    (rc = sp_writer_thread_runtime_name(w, lead, 60, 1, "MainThread")) ||
	    (rc = sp_writer_thread_runtime_name(w, a, 70, 1, "CustomThreadName-1")) ||
	    (rc = sp_writer_thread_runtime_name(w, a, 65, 1, "Thread-1 (work)")) ||
	    (rc = sp_writer_thread_runtime_name(w, b, 75, 7, "other runtime")) ||
	    (rc = sp_writer_thread_name(w, b, 76, "pool-2")) ||
	    (rc = sp_writer_sample(w, 80, a, 0, 1, 0)))
		return rc;
	return sp_writer_sample(w, 81, lead, 0, 1, 1);
}

static int shape_offcpu(sp_writer *w)
{
	return write_offcpu(w, 0);
}

static void variants(const char *name, shape_fn fn)
{
	static const struct {
		int level;
		uint32_t chunk;
		const char *tag;
	} v[] = { { 3, 0, "" }, { 1, 64, "-small" }, { 19, 512, "-l19" } };
	char buf[256];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		memsink m = make(fn, v[i].level, v[i].chunk, 1);
		snprintf(buf, sizeof(buf), "%s%s", name, v[i].tag);
		put(BOTH, buf, m.data, m.len);
		memsink_free(&m);
	}
	memsink m = make(fn, 3, 128, 0);
	snprintf(buf, sizeof(buf), "%s-unfinished", name);
	put(BOTH, buf, m.data, m.len);
	memsink_free(&m);
}

/* Cut and changed versions of the rich spool (small chunks). */
static void damaged(void)
{
	memsink m = make(shape_rich, 1, 96, 1);
	char name[64];
	static const size_t cuts[] = { 10, 16, 20, 47, 48, 100, 300 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		if (cuts[i] >= m.len)
			continue;
		snprintf(name, sizeof(name), "cut-%zu", cuts[i]);
		put(BOTH, name, m.data, cuts[i]);
	}
	put(BOTH, "cut-in-footer", m.data, m.len - 5);
	/* Bit flips, raw and with the chunk checksum fixed up. */
	uint64_t seed = 99;
	for (int i = 0; i < 12; i++) {
		uint8_t *copy = malloc(m.len);
		memcpy(copy, m.data, m.len);
		size_t at = SP_FILE_HEADER_LEN + (size_t)(fixture_rand(&seed) % (m.len - 48));
		copy[at] ^= (uint8_t)(1u << (fixture_rand(&seed) % 8));
		if (i % 2) {
			/* Find the chunk holding @at and fix its CRC. */
			size_t off = SP_FILE_HEADER_LEN;
			while (off + SP_CHUNK_HEADER_LEN <= m.len - SP_FOOTER_LEN) {
				size_t end = off + SP_CHUNK_HEADER_LEN + sp_le32(m.data + off + 12);
				if (at < end) {
					if (at >= off + SP_CHUNK_HEADER_LEN || at < off + 12)
						fix_chunk_crc_len(copy, off,
						                  sp_le32(m.data + off + 12));
					break;
				}
				off = end;
			}
		}
		snprintf(name, sizeof(name), "flip-%d%s", i, i % 2 ? "-crcfixed" : "");
		put(DECODE, name, copy, m.len);
		free(copy);
	}
	memsink_free(&m);
}

/* A damaged chunk in the middle of a complete file: the spool opens with
 * the chunks before it. A broken checksum; a bad record under a valid
 * checksum (the chunk rewritten stored); a length running into the footer. */
static void damaged_middle(void)
{
	memsink m = make(shape_rich, 1, 96, 1);
	size_t offs[64] = { 0 };
	size_t n = 0, off = SP_FILE_HEADER_LEN;
	while (n < 64 && sp_le32(m.data + off) == SP_CHUNK_MAGIC) {
		offs[n++] = off;
		off += SP_CHUNK_HEADER_LEN + sp_le32(m.data + off + 12);
	}
	if (n < 4)
		exit(1);
	size_t footer = off, c = offs[n / 2], end = offs[n / 2 + 1];
	uint8_t *copy = malloc(m.len + 64);
	memcpy(copy, m.data, m.len);
	copy[c + SP_CHUNK_HEADER_LEN + 1] ^= 0x08;
	put(BOTH, "mid-checksum", copy, m.len);
	/* The last chunk claims 8 bytes of the footer. */
	memcpy(copy, m.data, m.len);
	size_t last = offs[n - 1];
	sp_put_le32(copy + last + 12, sp_le32(m.data + last + 12) + 8);
	fix_chunk_crc_len(copy, last, sp_le32(m.data + last + 12));
	put(BOTH, "last-into-footer", copy, m.len);
	/* Chunk c's records plus a stack node with an undefined parent. */
	const uint8_t *h = m.data + c;
	uint32_t stored = sp_le32(h + 12), raw_len = sp_le32(h + 16);
	uint8_t raw[4096];
	if (raw_len + 4 > sizeof(raw))
		exit(1);
	if (h[4] == SP_CODEC_ZSTD)
		(void)ZSTD_decompress(raw, raw_len, h + SP_CHUNK_HEADER_LEN, stored);
	else
		memcpy(raw, h + SP_CHUNK_HEADER_LEN, raw_len);
	static const uint8_t bad[] = { SP_REC_STACK, 3, 0xff, 0x7f, 0 };
	memcpy(raw + raw_len, bad, sizeof(bad));
	size_t new_len = raw_len + sizeof(bad);
	memcpy(copy, m.data, c + SP_CHUNK_HEADER_LEN);
	copy[c + 4] = SP_CODEC_NONE;
	sp_put_le32(copy + c + 12, (uint32_t)new_len);
	sp_put_le32(copy + c + 16, (uint32_t)new_len);
	memcpy(copy + c + SP_CHUNK_HEADER_LEN, raw, new_len);
	fix_chunk_crc(copy, c);
	size_t at = c + SP_CHUNK_HEADER_LEN + new_len;
	memcpy(copy + at, m.data + end, m.len - end);
	size_t new_footer = at + (footer - end);
	sp_put_le64(copy + new_footer + 16, new_footer);
	sp_put_le32(copy + new_footer + 28, sp_crc32c(0, copy + new_footer, 28));
	put(BOTH, "mid-bad-record", copy, new_footer + SP_FOOTER_LEN);
	free(copy);
	memsink_free(&m);
}

/* Hand-made files: unknown records, trailing fields, stored chunks. */
static void handmade(void)
{
	static uint8_t out[4096];
	static const uint8_t recs[] = {
		99,
		3,
		1,
		2,
		3, /* unknown type 99 */
		SP_REC_PROCESS,
		8,
		10,
		0,
		1,
		1,
		'p',
		1,
		'p',
		42, /* trailing field */
		SP_REC_THREAD,
		5,
		0,
		10,
		1,
		1,
		't', /* thread */
		SP_REC_FRAME,
		3,
		STACKPULSE_FRAME_KERNEL,
		0x80,
		0x20, /* kernel frame */
		SP_REC_STACK,
		2,
		0,
		0, /* stack 1 */
		SP_REC_KSYM,
		5,
		0x80,
		0x20,
		1,
		'k',
		0, /* ksym */
		SP_REC_SAMPLES,
		7,
		1,
		10,
		0,
		1,
		1,
		2,
		9, /* 1 sample + column */
	};
	size_t n = raw_spool(out, sizeof(out), recs, sizeof(recs), 0, 1, 0, 1, 1);
	put(BOTH, "handmade-stored", out, n);
	n = raw_spool(out, sizeof(out), recs, sizeof(recs), 1, 1, 0, 1, 1);
	put(BOTH, "handmade-zstd", out, n);
	n = raw_spool(out, sizeof(out), recs, sizeof(recs), 0, 1, 0, 0, 0);
	put(BOTH, "handmade-nofooter", out, n);
	n = raw_spool(out, sizeof(out), NULL, 0, 0, 1, 0, 1, 0);
	put(BOTH, "header-footer", out, n);
	put(DECODE, "header-only", out, SP_FILE_HEADER_LEN);
	n = raw_spool(out, sizeof(out), recs, sizeof(recs), 0, 2, 0, 1, 1);
	put(DECODE, "bad-version", out, n);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_corpus DECODE_DIR ROUNDTRIP_DIR\n");
		return 2;
	}
	dirs[0] = argv[1];
	dirs[1] = argv[2];
	variants("rich", shape_rich);
	variants("empty", shape_empty);
	variants("meta", shape_meta);
	variants("steady", shape_steady);
	variants("deep", shape_deep);
	variants("python", shape_python);
	variants("lifecycle", shape_lifecycle);
	variants("names", shape_names);
	variants("rtnames", shape_rtnames);
	variants("offcpu", shape_offcpu);
	damaged();
	damaged_middle();
	handmade();
	printf("gen_corpus: %d seeds written\n", written);
	return 0;
}
