/* A spool of many samples of few stacks, shared by
 * tests/profile/test_report_memory.c, test_report_cli.c and
 * bench/report_scale.c: the shape where a report's memory must follow the
 * distinct stacks, not the samples.
 *
 * Process "many" (pid 4242) with two threads; @p nstacks (1..8) distinct
 * native stacks 3..10 frames deep of /usr/bin/many; @p nsamples samples
 * alternating between the threads, 1 ms apart per thread, each of a stack
 * drawn at random (a fixed seed: the same spool every time). */
#ifndef SP_TEST_PROFILE_MANY_SAMPLES_H
#define SP_TEST_PROFILE_MANY_SAMPLES_H

#include <stdint.h>
#include <stdio.h>

#include "format/spool_writer.h"
#include "stackpulse.h"

static int many_file_sink(void *ctx, const void *data, size_t len)
{
	return fwrite(data, 1, len, (FILE *)ctx) == len ? 0 : -5; /* -EIO */
}

/* Writes the spool to @p path with chunks of @p chunk_bytes (0: 1 MiB):
 * 0 or an error code. */
static inline int many_samples_spool(const char *path, uint64_t nsamples, uint32_t nstacks,
                                     uint32_t chunk_bytes)
{
	if (nstacks < 1 || nstacks > 8)
		return -22; /* -EINVAL */
	FILE *f = fopen(path, "wb");
	if (!f)
		return -5;
	sp_writer_opts wo = { 3, chunk_bytes };
	sp_writer *w = NULL;
	sp_meta meta = { 1700000000000000000ull,
		         1000000000ull,
		         1000,
		         8192,
		         "cpu-clock",
		         "x86_64",
		         "synthetic",
		         "many",
		         0,
		         "synthetic spool" };
	uint32_t proc = 0, thr[2] = { 0, 0 }, mod = 0, frames[16], stacks[8];
	int rc = sp_writer_new(&wo, many_file_sink, f, &w);
	if (!rc)
		rc = sp_writer_meta(w, &meta);
	if (!rc)
		rc = sp_writer_process(w, 4242, UINT32_MAX, meta.start_mono_ns, "many",
		                       "many --run", &proc);
	for (uint32_t i = 0; !rc && i < 2; i++)
		rc = sp_writer_thread(w, proc, (pid_t)(4242 + i), meta.start_mono_ns,
		                      i ? "worker" : "many", &thr[i]);
	if (!rc)
		rc = sp_writer_module(w, "/usr/bin/many", NULL, 0, &mod);
	for (uint32_t i = 0; !rc && i < 16; i++) {
		struct stackpulse_raw_frame fr = { 0 };
		fr.kind = STACKPULSE_FRAME_NATIVE;
		fr.module = mod;
		fr.offset = 0x1000u + (uint64_t)i * 0x40u;
		fr.pycode = UINT32_MAX;
		rc = sp_writer_frame(w, &fr, &frames[i]);
	}
	for (uint32_t k = 0; !rc && k < nstacks; k++) {
		uint32_t parent = 0;
		for (uint32_t d = 0; !rc && d < 3 + k; d++)
			rc = sp_writer_stack(w, parent, frames[(d + (d ? k : 0)) % 16], &parent);
		stacks[k] = parent;
	}
	/* Stacks drawn at random and times jittered by up to 63 ns, so the
	 * spool compresses like a recording (well inside the reader's 256x
	 * decompression cap). */
	uint64_t t = meta.start_mono_ns, x = 0x9E3779B97F4A7C15ull;
	for (uint64_t s = 0; !rc && s < nsamples; s++) {
		uint32_t th = (uint32_t)(s & 1);
		if (th == 0)
			t += 1000000u;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		rc = sp_writer_sample(w, t + th * 1000u + (x & 63u), thr[th],
		                      stacks[(x >> 8) % nstacks], 1, th);
	}
	if (!rc)
		rc = sp_writer_finish(w);
	sp_writer_free(w);
	if (fclose(f) && !rc)
		rc = -5;
	return rc;
}

#endif
