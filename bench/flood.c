/* Hostile-spool costs, one case per process so peak RSS is the case's own:
 *   flood flood N crafted|random
 *     open and profile-build CPU seconds of N kernel frames whose addresses
 *     all hash into n / 16 neighbouring slots under the old unseeded hash
 *     (tests/format/flood.h), or random ones: "flood N KIND OPEN_S PROFILE_S MAXRSS_KB"
 *   flood amplify DEPTH
 *     folded export of 8 lines recursing DEPTH deep through 60 KB names:
 *     "amplify DEPTH SPOOL_BYTES OUT_BYTES EXPORT_S MAXRSS_KB RC"
 * Build: gcc -O2 -Iinclude -Isrc -Itests bench/flood.c libstackpulse.a LIBS
 * (bench/run.py --hostile does it and runs the series). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/buf.h"
#include "format/flood.h"
#include "format/spool_writer.h"
#include "stackpulse.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* The machine is shared. */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int buf_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append(ctx, data, len);
}

static int count_sink(void *ctx, const void *data, size_t len)
{
	(void)data;
	*(uint64_t *)ctx += len;
	return 0;
}

#define OK(x)                                                                                      \
	do {                                                                                       \
		int rc_ = (x);                                                                     \
		if (rc_) {                                                                         \
			fprintf(stderr, "%s: %d %s\n", #x, rc_, stackpulse_last_error());          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static sp_writer *begin(sp_buf *mem, uint32_t *thr)
{
	sp_buf_init(mem);
	sp_writer *w = NULL;
	sp_writer_opts wo = { 0, 4096 };
	OK(sp_writer_new(&wo, buf_sink, mem, &w));
	sp_meta meta = { 1, 1, 100, 8192, "cpu-clock", "x86_64", "6.1.0", "h", 1, "" };
	OK(sp_writer_meta(w, &meta));
	uint32_t proc;
	OK(sp_writer_process(w, 1, UINT32_MAX, 1, "bench", "bench", &proc));
	OK(sp_writer_thread(w, proc, 1, 1, "bench", thr));
	return w;
}

static void flood(size_t n, int crafted)
{
	uint64_t *a = malloc(n * sizeof(uint64_t));
	/* Under the old hash the final table (2n slots or fewer) puts every key
	 * in a window of n / 16 home slots: one probe run of n keys. Crafting
	 * costs about 32 n hash evaluations. */
	unsigned bits = 1;
	while ((1ull << bits) < 2 * n)
		bits++;
	if (crafted)
		flood_kernel_addrs(a, n, bits, (uint32_t)(n / 16));
	else
		flood_random_addrs(a, n);
	sp_buf mem;
	uint32_t thr;
	sp_writer *w = begin(&mem, &thr);
	for (size_t i = 0; i < n; i++) {
		struct stackpulse_raw_frame rf;
		memset(&rf, 0, sizeof(rf));
		rf.kind = STACKPULSE_FRAME_KERNEL;
		rf.module = UINT32_MAX;
		rf.pycode = UINT32_MAX;
		rf.offset = a[i];
		uint32_t f, s;
		OK(sp_writer_frame(w, &rf, &f));
		OK(sp_writer_stack_frames(w, &f, 1, &s));
		OK(sp_writer_sample(w, 10 + i, thr, s, 1, 1));
	}
	OK(sp_writer_finish(w));
	sp_writer_free(w);
	double t0 = now();
	stackpulse_spool *sp = NULL;
	OK(stackpulse_spool_open_memory(mem.data, mem.len, &sp));
	double t1 = now();
	stackpulse_profile *p = NULL;
	OK(stackpulse_profile_build(sp, NULL, NULL, &p));
	double t2 = now();
	printf("flood %zu %s %.4f %.4f %ld\n", n, crafted ? "crafted" : "random", t1 - t0, t2 - t1,
	       maxrss_kb());
	fflush(stdout);
	stackpulse_profile_free(p);
	stackpulse_spool_close(sp);
	sp_buf_free(&mem);
	free(a);
}

static void amplify(uint32_t depth, uint32_t leaves)
{
	enum {
		NAME_LEN = 60000
	};
	sp_buf mem;
	uint32_t thr;
	sp_writer *w = begin(&mem, &thr);
	char *name = malloc(NAME_LEN + 1);
	uint32_t *fr = malloc((depth + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i <= leaves; i++) {
		memset(name, 'a' + (int)(i % 26), NAME_LEN);
		snprintf(name + NAME_LEN - 12, 13, "%012u", i);
		OK(sp_writer_ksym(w, 0xffffffff81000000ull + 0x1000ull * i, name, NULL));
	}
	struct stackpulse_raw_frame rf;
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_KERNEL;
	rf.module = UINT32_MAX;
	rf.pycode = UINT32_MAX;
	rf.offset = 0xffffffff81000010ull;
	uint32_t rec;
	OK(sp_writer_frame(w, &rf, &rec));
	for (uint32_t d = 1; d <= depth; d++)
		fr[d] = rec;
	for (uint32_t i = 1; i <= leaves; i++) {
		rf.offset = 0xffffffff81000010ull + 0x1000ull * i;
		uint32_t s;
		OK(sp_writer_frame(w, &rf, &fr[0]));
		OK(sp_writer_stack_frames(w, fr, depth + 1, &s));
		OK(sp_writer_sample(w, 10 + i, thr, s, 1, 1));
	}
	OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *sp = NULL;
	OK(stackpulse_spool_open_memory(mem.data, mem.len, &sp));
	stackpulse_profile *p = NULL;
	OK(stackpulse_profile_build(sp, NULL, NULL, &p));
	uint64_t out = 0;
	double t0 = now();
	int rc = stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, NULL, count_sink, &out);
	double t1 = now();
	printf("amplify %u %zu %llu %.4f %ld %d\n", depth, mem.len, (unsigned long long)out,
	       t1 - t0, maxrss_kb(), rc);
	fflush(stdout);
	stackpulse_profile_free(p);
	stackpulse_spool_close(sp);
	sp_buf_free(&mem);
	free(name);
	free(fr);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "flood"))
		flood((size_t)strtoul(argv[2], NULL, 10), !strcmp(argv[3], "crafted"));
	else if (argc == 3 && !strcmp(argv[1], "amplify"))
		amplify((uint32_t)strtoul(argv[2], NULL, 10), 8);
	else {
		fprintf(stderr, "usage: flood flood N crafted|random | flood amplify DEPTH\n");
		return 2;
	}
	return 0;
}
