/* Helpers shared by the spool tests: an in-memory sink, a spool that uses
 * every record kind, a steady synthetic workload, and a builder of raw files
 * from hand-made record bytes (for rejection tests). Header-only because
 * each test file is its own executable. */
#ifndef SP_TEST_SPOOL_FIXTURE_H
#define SP_TEST_SPOOL_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/bytes.h"
#include "common/checksum.h"
#include "format/spool_format.h"
#include "format/spool_reader.h"
#include "format/spool_writer.h"
#include "harness.h"

#define SP_FIXTURE_UNUSED __attribute__((unused))

/* A growable byte vector (plain libc, outside the fault injector). */
typedef struct memsink {
	uint8_t *data;
	size_t len, cap;
	size_t fail_at; /* Fail writes that would pass this many bytes (0: never). */
} memsink;

static SP_FIXTURE_UNUSED int memsink_write(void *ctx, const void *p, size_t n)
{
	memsink *m = ctx;
	if (m->fail_at && m->len + n > m->fail_at)
		return -28; /* -ENOSPC */
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap < m->len + n)
			cap *= 2;
		uint8_t *d = realloc(m->data, cap);
		if (!d)
			return -12;
		m->data = d;
		m->cap = cap;
	}
	if (n)
		memcpy(m->data + m->len, p, n);
	m->len += n;
	return 0;
}

static SP_FIXTURE_UNUSED void memsink_free(memsink *m)
{
	free(m->data);
	memset(m, 0, sizeof(*m));
}

/* Ids the rich spool defines, for checking accessors. */
typedef struct rich_ids {
	uint32_t proc0, proc1, thr0, thr1, thr2, mod_exe, mod_libc, py0;
	uint32_t f_native, f_libc, f_kernel, f_python, f_unknown, f_jit, f_trunc;
	uint32_t s_leaf, s_mid, s_root, s_py;
} rich_ids;

static SP_FIXTURE_UNUSED const uint8_t rich_build_id[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2, 3,
	                                                     4,    5,    6,    7,    8,  9, 10,
	                                                     11,   12,   13,   14,   15, 16 };
static SP_FIXTURE_UNUSED const uint8_t rich_symtab[] = "SYMTAB-BYTES\x00\x01\x02";

/* Writes one of everything (two samples per stack). Returns 0 or the first
 * error; the writer is finished when @p finish. */
static SP_FIXTURE_UNUSED int write_rich(sp_writer *w, rich_ids *ids, int finish)
{
	int rc;
	sp_meta meta = { 1700000000123456789ull, 5000,   99, 32768, "cpu-clock", "x86_64",
		         "6.1.0-test",           "host", 1,  "" };
#define TRY(x)                                                                                     \
	do {                                                                                       \
		if ((rc = (x)))                                                                    \
			return rc;                                                                 \
	} while (0)
	TRY(sp_writer_meta(w, &meta));
	TRY(sp_writer_process(w, 100, UINT32_MAX, 10, "init", "init --flag", &ids->proc0));
	TRY(sp_writer_thread(w, ids->proc0, 100, 10, "init", &ids->thr0));
	TRY(sp_writer_thread(w, ids->proc0, 101, 11, "worker", &ids->thr1));
	TRY(sp_writer_process(w, 200, ids->proc0, 20, "child", "child a b", &ids->proc1));
	TRY(sp_writer_fork(w, ids->proc0, ids->proc1, 20));
	TRY(sp_writer_thread(w, ids->proc1, 200, 20, "child", &ids->thr2));
	TRY(sp_writer_process_exec(w, ids->proc1, 25, "python3", "python3 app.py"));
	TRY(sp_writer_thread_name(w, ids->thr1, 30, "renamed"));
	TRY(sp_writer_module(w, "/usr/bin/app", rich_build_id, 20, &ids->mod_exe));
	TRY(sp_writer_module(w, "/lib/libc.so.6", NULL, 0, &ids->mod_libc));
	TRY(sp_writer_mapping(w, ids->proc0, ids->mod_exe, 0x400000, 0x401000, 0, 12));
	TRY(sp_writer_pycode(w, "App.run", "/srv/app.py", 42, &ids->py0));
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, ids->mod_exe, 0x1234, 0, 0 };
	TRY(sp_writer_frame(w, &f, &ids->f_native));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_NATIVE, ids->mod_libc, 0x99, 0, 0 };
	TRY(sp_writer_frame(w, &f, &ids->f_libc));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_KERNEL, 0, 0xffffffff81000100ull, 0,
		                           0 };
	TRY(sp_writer_frame(w, &f, &ids->f_kernel));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_PYTHON, 0, 16, ids->py0, 44 };
	TRY(sp_writer_frame(w, &f, &ids->f_python));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_UNKNOWN, 0, 0xdead, 0, 0 };
	TRY(sp_writer_frame(w, &f, &ids->f_unknown));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_JIT, 0, 0x7f0000001000ull, 0, 0 };
	TRY(sp_writer_frame(w, &f, &ids->f_jit));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_TRUNCATED, 0, 0, 0, 0 };
	TRY(sp_writer_frame(w, &f, &ids->f_trunc));
	uint32_t leaf_first[4] = { ids->f_kernel, ids->f_libc, ids->f_native, ids->f_trunc };
	TRY(sp_writer_stack_frames(w, leaf_first, 4, &ids->s_leaf));
	TRY(sp_writer_stack_frames(w, leaf_first + 2, 2, &ids->s_mid));
	TRY(sp_writer_stack_frames(w, leaf_first + 3, 1, &ids->s_root));
	uint32_t py_first[3] = { ids->f_python, ids->f_jit, ids->f_unknown };
	TRY(sp_writer_stack_frames(w, py_first, 3, &ids->s_py));
	TRY(sp_writer_sample(w, 1000, ids->thr0, ids->s_leaf, 1, 0));
	TRY(sp_writer_sample(w, 990, ids->thr1, ids->s_mid, 2, 1));
	TRY(sp_writer_sample(w, 2000, ids->thr2, ids->s_py, 1, 3));
	TRY(sp_writer_sample(w, 2500, ids->thr0, 0, 1, 0));
	TRY(sp_writer_lost(w, ids->thr1, 7, 2600));
	TRY(sp_writer_lost(w, UINT32_MAX, 3, 2700));
	TRY(sp_writer_flush(w));
	TRY(sp_writer_sample(w, 3000, ids->thr0, ids->s_root, 1, 1));
	TRY(sp_writer_exit(w, ids->proc1, ids->thr2, 3100));
	TRY(sp_writer_exit(w, ids->proc1, UINT32_MAX, 3200));
	TRY(sp_writer_ksym(w, 0xffffffff81000000ull, "_stext", ""));
	TRY(sp_writer_ksym(w, 0xffffffff81000200ull, "do_syscall_64", ""));
	TRY(sp_writer_ksym(w, 0xffffffffc0000000ull, "ext4_read", "ext4"));
	TRY(sp_writer_jitsym(w, ids->proc1, 0x7f0000001000ull, 0x100, "jit_fn"));
	TRY(sp_writer_symtab(w, ids->mod_exe, rich_symtab, sizeof(rich_symtab)));
	TRY(sp_writer_stat(w, SP_STAT_TRUNCATED_STACKS, 5));
	TRY(sp_writer_stat(w, SP_STAT_PYTHON_SAMPLES, 1));
	TRY(sp_writer_thread_stat(w, SP_STAT_LOST, 7, ids->thr1));
	if (finish)
		TRY(sp_writer_finish(w));
#undef TRY
	return 0;
}

/* A spool with off-CPU intervals (format: OFFCPU records, META method):
 * two chunks, an interval before the chunk's first sample, one without a
 * stack, one preempted, and start times that go backwards. */
static SP_FIXTURE_UNUSED int write_offcpu(sp_writer *w, int finish)
{
	int rc;
	uint32_t proc, t0, t1, mod, f0, f1, leaf, root;
	sp_meta meta = {
		1700000000000000000ull, 1000, 99, 8192, "cpu-clock", "x86_64", "6.1", "host", 1, ""
	};
#define TRY(x)                                                                                     \
	do {                                                                                       \
		if ((rc = (x)))                                                                    \
			return rc;                                                                 \
	} while (0)
	sp_writer_set_offcpu_method(w, STACKPULSE_OFFCPU_SWITCH_EVENT);
	TRY(sp_writer_meta(w, &meta));
	TRY(sp_writer_process(w, 300, UINT32_MAX, 1000, "waiter", "waiter", &proc));
	TRY(sp_writer_thread(w, proc, 300, 1000, "waiter", &t0));
	TRY(sp_writer_thread(w, proc, 301, 1000, "filler", &t1));
	TRY(sp_writer_module(w, "/usr/bin/waiter", NULL, 0, &mod));
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, mod, 0x1000, 0, 0 };
	TRY(sp_writer_frame(w, &f, &f0));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_KERNEL, 0, 0xffffffff81000100ull, 0,
		                           0 };
	TRY(sp_writer_frame(w, &f, &f1));
	uint32_t frames[2] = { f1, f0 };
	TRY(sp_writer_stack_frames(w, frames, 2, &leaf));
	TRY(sp_writer_stack_frames(w, frames + 1, 1, &root));
	TRY(sp_writer_offcpu(w, 5000, 40000000, t0, leaf, STACKPULSE_OFFCPU_BLOCKED));
	TRY(sp_writer_sample(w, 6000, t0, root, 1, 0));
	TRY(sp_writer_offcpu(w, 4000, 1500, t1, root, STACKPULSE_OFFCPU_PREEMPTED));
	TRY(sp_writer_offcpu(w, 9000, 7, t1, 0, STACKPULSE_OFFCPU_BLOCKED));
	TRY(sp_writer_flush(w));
	/* The second chunk's block carries the merged columns, the first's not. */
	TRY(sp_writer_offcpu_merged(w, 50000000, 30000000000ull, t0, leaf,
	                            STACKPULSE_OFFCPU_BLOCKED, 3, 4500));
	TRY(sp_writer_sample(w, 60000000, t1, leaf, 1, 1));
	TRY(sp_writer_stat(w, SP_STAT_OFFCPU_INTERVALS, 4));
	TRY(sp_writer_stat(w, SP_STAT_OFFCPU_NO_STACK, 1));
	TRY(sp_writer_stat(w, SP_STAT_OFFCPU_DROPPED, 2));
	TRY(sp_writer_stat(w, SP_STAT_OFFCPU_MERGED, 3));
	if (finish)
		TRY(sp_writer_finish(w));
#undef TRY
	return 0;
}

/* A deterministic pseudo-random generator for synthetic workloads. */
static SP_FIXTURE_UNUSED uint64_t fixture_rand(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return *state >> 33;
}

/* A steady workload: @p nthreads threads at 99 Hz with a few microseconds of
 * timer jitter, each sample one of @p nstacks stacks (skewed: a few are hot). */
static SP_FIXTURE_UNUSED int write_steady(sp_writer *w, uint64_t nsamples, uint32_t nstacks,
                                          uint32_t nthreads)
{
	int rc;
	uint32_t proc, mod, thr[16], stacks[256];
	if (nthreads > 16 || nstacks > 256)
		return -22;
	if ((rc = sp_writer_process(w, 4242, UINT32_MAX, 0, "steady", "steady --run", &proc)) ||
	    (rc = sp_writer_module(w, "/usr/bin/steady", rich_build_id, 20, &mod)))
		return rc;
	for (uint32_t i = 0; i < nthreads; i++)
		if ((rc = sp_writer_thread(w, proc, (pid_t)(4242 + i), 0, "steady", &thr[i])))
			return rc;
	uint64_t seed = 12345;
	for (uint32_t i = 0; i < nstacks; i++) {
		uint32_t frames[12];
		uint32_t depth = 4 + (uint32_t)(fixture_rand(&seed) % 8);
		for (uint32_t d = 0; d < depth; d++) {
			/* Shared roots, diverging leaves: like a real call tree. */
			uint64_t off = d + 1 < depth ? 0x1000 + (depth - d) * 0x40 + (i % 4) * 0x10
			                             : 0x8000 + i * 0x20;
			struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, mod, off, 0, 0 };
			if ((rc = sp_writer_frame(w, &f, &frames[d])))
				return rc;
		}
		if ((rc = sp_writer_stack_frames(w, frames, depth, &stacks[i])))
			return rc;
	}
	uint64_t t = 1000000000ull;
	for (uint64_t n = 0; n < nsamples; n++) {
		uint32_t th = (uint32_t)(n % nthreads);
		uint64_t r = fixture_rand(&seed);
		/* Zipf-ish: half the samples on 4 hot stacks. */
		uint32_t st = (r & 1) ? (uint32_t)((r >> 1) % 4) : (uint32_t)((r >> 1) % nstacks);
		t += 10101010ull / nthreads + (fixture_rand(&seed) % 4000);
		if ((rc = sp_writer_sample(w, t, thr[th], stacks[st], 1, th % 2)))
			return rc;
	}
	return 0;
}

/* Builds a raw spool: file header (with @p version and @p flags), one chunk
 * holding @p records (compressed when @p zstd), and a footer when
 * @p footer. Returns the length written into @p out (capacity @p cap). */
static SP_FIXTURE_UNUSED size_t raw_spool(uint8_t *out, size_t cap, const uint8_t *records,
                                          size_t rec_len, int zstd, uint16_t version,
                                          uint16_t flags, int footer, uint64_t samples)
{
	size_t need = SP_FILE_HEADER_LEN + SP_CHUNK_HEADER_LEN + ZSTD_compressBound(rec_len) +
	              SP_FOOTER_LEN;
	if (need > cap)
		return 0;
	static const uint8_t magic[SP_FILE_MAGIC_LEN] = SP_FILE_MAGIC_BYTES;
	memcpy(out, magic, SP_FILE_MAGIC_LEN);
	sp_put_le16(out + 8, version);
	sp_put_le16(out + 10, flags);
	sp_put_le32(out + 12, 0);
	size_t off = SP_FILE_HEADER_LEN;
	uint32_t nchunks = 0;
	if (records) {
		uint8_t *h = out + off;
		uint8_t *payload = h + SP_CHUNK_HEADER_LEN;
		size_t stored = rec_len;
		if (zstd)
			stored = ZSTD_compress(payload, ZSTD_compressBound(rec_len), records,
			                       rec_len, 3);
		else
			memcpy(payload, records, rec_len);
		sp_put_le32(h, SP_CHUNK_MAGIC);
		h[4] = zstd ? SP_CODEC_ZSTD : SP_CODEC_NONE;
		h[5] = 0;
		sp_put_le16(h + 6, 0);
		sp_put_le32(h + 8, 0);
		sp_put_le32(h + 12, (uint32_t)stored);
		sp_put_le32(h + 16, (uint32_t)rec_len);
		sp_put_le64(h + 20, 0);
		uint32_t crc = sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET);
		sp_put_le32(h + SP_CHUNK_CRC_OFFSET, sp_crc32c(crc, payload, stored));
		off += SP_CHUNK_HEADER_LEN + stored;
		nchunks = 1;
	}
	if (footer) {
		uint8_t *f = out + off;
		sp_put_le32(f, SP_FOOTER_MAGIC);
		sp_put_le32(f + 4, nchunks);
		sp_put_le64(f + 8, samples);
		sp_put_le64(f + 16, off);
		sp_put_le32(f + 24, 0);
		sp_put_le32(f + 28, sp_crc32c(0, f, 28));
		off += SP_FOOTER_LEN;
	}
	return off;
}

/* Recomputes the CRC of the chunk at @p off after a test edited it, over
 * @p stored payload bytes (0: the header's stored length). */
static SP_FIXTURE_UNUSED void fix_chunk_crc_len(uint8_t *file, size_t off, uint32_t stored)
{
	uint8_t *h = file + off;
	if (!stored)
		stored = sp_le32(h + 12);
	uint32_t crc = sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET);
	sp_put_le32(h + SP_CHUNK_CRC_OFFSET, sp_crc32c(crc, h + SP_CHUNK_HEADER_LEN, stored));
}

static SP_FIXTURE_UNUSED void fix_chunk_crc(uint8_t *file, size_t off)
{
	fix_chunk_crc_len(file, off, 0);
}

#endif
