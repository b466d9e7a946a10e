/* Hostile-spool costs, one case per process so peak RSS is the case's own:
 *   flood flood N crafted|random
 *     open and profile-build CPU seconds of N kernel frames whose addresses
 *     all hash into n / 16 neighbouring slots under the old unseeded hash
 *     (tests/format/hostile.h), or random ones: "flood N KIND OPEN_S PROFILE_S MAXRSS_KB"
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
#include "format/hostile.h"
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

static void run_open(sp_buf *mem, stackpulse_spool **sp, stackpulse_profile **p, double *t)
{
	double t0 = now();
	stackpulse_spool_open_opts so = STACKPULSE_SPOOL_OPEN_OPTS;
	so.buf = mem->data;
	so.len = mem->len;
	OK(stackpulse_spool_open(NULL, &so, sp));
	double t1 = now();
	OK(stackpulse_profile_build(*sp, NULL, NULL, p));
	t[0] = t1 - t0;
	t[1] = now() - t1;
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
	sp_buf_init(&mem);
	OK(hostile_flood_spool(buf_sink, &mem, a, n));
	stackpulse_spool *sp = NULL;
	stackpulse_profile *p = NULL;
	double t[2];
	run_open(&mem, &sp, &p, t);
	printf("flood %zu %s %.4f %.4f %ld\n", n, crafted ? "crafted" : "random", t[0], t[1],
	       maxrss_kb());
	fflush(stdout);
	stackpulse_profile_free(p);
	stackpulse_spool_close(sp);
	sp_buf_free(&mem);
	free(a);
}

static void amplify(uint32_t depth, uint32_t leaves)
{
	sp_buf mem;
	sp_buf_init(&mem);
	OK(hostile_amp_spool(buf_sink, &mem, depth, leaves));
	stackpulse_spool *sp = NULL;
	stackpulse_profile *p = NULL;
	double t[2];
	run_open(&mem, &sp, &p, t);
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
