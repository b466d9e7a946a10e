/* Reader throughput bench.
 *
 *   reader_throughput gen PATH SAMPLES   write a synthetic spool (internal writer)
 *   reader_throughput read PATH          open it with the public API, iterate
 *                                        every sample and walk its stack depth
 *
 * "read" prints one line: samples=N open_s=X iter_s=Y total_per_s=Z
 * iter_per_s=W. Peak memory is measured from outside (wait4 / time -f %M):
 * it must not grow with the number of samples, since the reader keeps the
 * tables in memory but streams samples one chunk at a time.
 *
 * The synthetic profile looks like a real one: 8 threads, 3 modules, 4,000
 * frames, about 20,000 distinct stacks 6..40 frames deep, samples drawn with
 * a skew so a few stacks dominate, 1 ms apart per thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/spool_writer.h"
#include "stackpulse.h"

#define NTHREADS 8u
#define NFRAMES  4000u
#define NSTACKS  20000u

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int file_sink(void *ctx, const void *data, size_t len)
{
	return fwrite(data, 1, len, (FILE *)ctx) == len ? 0 : -5; /* -EIO */
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "reader_throughput: %s: %s (%s)\n", what, stackpulse_strerror(rc),
	        stackpulse_last_error());
	return 1;
}

static int gen(const char *path, uint64_t nsamples)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return perror(path), 1;
	sp_writer_opts wopts = { 3, 0 };
	sp_writer *w = NULL;
	sp_meta meta = { 0 };
	meta.start_time_ns = 1700000000000000000ull;
	meta.start_mono_ns = 1000000000ull;
	meta.frequency = 999;
	meta.stack_size = 32768;
	meta.event = "cpu-clock";
	meta.machine = "x86_64";
	meta.kernel_release = "synthetic";
	meta.hostname = "bench";
	meta.kernel_note = "";
	uint32_t proc = 0, thr[NTHREADS], mods[3];
	static uint32_t frames[NFRAMES], stacks[NSTACKS];
	int rc = sp_writer_new(&wopts, file_sink, f, &w);
	if (!rc)
		rc = sp_writer_meta(w, &meta);
	if (!rc)
		rc = sp_writer_process(w, 4242, UINT32_MAX, meta.start_mono_ns, "synthetic",
		                       "synthetic --bench", &proc);
	for (uint32_t i = 0; !rc && i < NTHREADS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "worker-%u", i);
		rc = sp_writer_thread(w, proc, (pid_t)(4242 + i), meta.start_mono_ns, name,
		                      &thr[i]);
	}
	static const char *const paths[3] = { "/usr/bin/synthetic", "/usr/lib/libfoo.so",
		                              "/lib/x86_64-linux-gnu/libc.so.6" };
	for (uint32_t i = 0; !rc && i < 3; i++) {
		uint8_t bid[20];
		for (uint32_t k = 0; k < 20; k++)
			bid[k] = (uint8_t)(i * 31 + k);
		rc = sp_writer_module(w, paths[i], bid, 20, &mods[i]);
		if (!rc)
			rc = sp_writer_mapping(w, proc, mods[i], 0x400000ull + i * 0x10000000ull,
			                       0x400000ull + i * 0x10000000ull + 0x1000000ull, 0,
			                       meta.start_mono_ns);
	}
	for (uint32_t i = 0; !rc && i < NFRAMES; i++) {
		struct stackpulse_raw_frame fr = { 0 };
		fr.kind = STACKPULSE_FRAME_NATIVE;
		fr.module = mods[i % 3];
		fr.offset = 0x1000u + (uint64_t)i * 0x40u;
		fr.pycode = UINT32_MAX;
		rc = sp_writer_frame(w, &fr, &frames[i]);
	}
	/* Stacks share prefixes like real ones: each extends an earlier one or
	 * starts from a short common root. */
	for (uint32_t i = 0; !rc && i < NSTACKS; i++) {
		uint32_t parent = 0, depth;
		if (i < 64) {
			depth = 6;
			for (uint32_t d = 0; !rc && d < depth; d++)
				rc = sp_writer_stack(w, parent, frames[(i * 7 + d) % 50], &parent);
		} else {
			parent = stacks[rnd(i)];
			depth = 1 + rnd(4);
			for (uint32_t d = 0; !rc && d < depth; d++)
				rc = sp_writer_stack(w, parent, frames[rnd(NFRAMES)], &parent);
		}
		stacks[i] = parent;
	}
	uint64_t t = meta.start_mono_ns;
	for (uint64_t s = 0; !rc && s < nsamples; s++) {
		/* Skewed: half the samples hit 1% of the stacks. */
		uint32_t k = rnd(2) ? rnd(NSTACKS / 100) : rnd(NSTACKS);
		uint32_t th = (uint32_t)(s % NTHREADS);
		if (th == 0)
			t += 1000000u;
		rc = sp_writer_sample(w, t + th * 1000u, thr[th], stacks[k], 1, th % 2);
	}
	if (!rc)
		rc = sp_writer_finish(w);
	sp_writer_free(w);
	if (fclose(f) && !rc)
		rc = -5;
	return rc ? fail("gen", rc) : 0;
}

static int read_spool(const char *path)
{
	double t0 = now_s();
	stackpulse_spool *sp = NULL;
	int rc = stackpulse_spool_open(path, NULL, &sp);
	if (rc)
		return fail("open", rc);
	double t1 = now_s();
	stackpulse_sample_iter *it = NULL;
	rc = stackpulse_sample_iter_new(sp, &it);
	if (rc) {
		stackpulse_spool_close(sp);
		return fail("iter", rc);
	}
	const struct stackpulse_sample *s;
	uint64_t n = 0, frames = 0;
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		n++;
		frames += stackpulse_spool_stack_depth(sp, s->stack);
	}
	double t2 = now_s();
	stackpulse_sample_iter_free(it);
	uint64_t expect = stackpulse_spool_meta(sp)->samples;
	stackpulse_spool_close(sp);
	if (rc < 0)
		return fail("next", rc);
	if (n != expect) {
		fprintf(stderr,
		        "reader_throughput: read %" PRIu64 " samples, meta says %" PRIu64 "\n", n,
		        expect);
		return 1;
	}
	printf("samples=%" PRIu64 " frames=%" PRIu64 " open_s=%.6f iter_s=%.6f total_per_s=%.0f "
	       "iter_per_s=%.0f\n",
	       n, frames, t1 - t0, t2 - t1, (double)n / (t2 - t0), (double)n / (t2 - t1));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "gen") == 0)
		return gen(argv[2], strtoull(argv[3], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "read") == 0)
		return read_spool(argv[2]);
	fprintf(stderr, "usage: reader_throughput gen PATH SAMPLES | read PATH\n");
	return 2;
}
