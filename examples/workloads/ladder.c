/* ladder: a CPU-bound workload with a known call tree, for demos and tests.
 *
 *   main -> ladder_run -> work_a   50% of the work
 *                      -> work_b   30%
 *                      -> work_c   20%
 *
 *   ladder [SECONDS]   (default 3)
 *
 * Each work function spins in its own body, so it is the leaf of its
 * samples. noinline and external linkage keep the names exact at -O2. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 200000u

volatile uint64_t ladder_sink;

__attribute__((noinline)) void work_a(void)
{
	uint64_t acc = ladder_sink;
	for (uint32_t i = 0; i < 5 * UNIT; i++)
		acc = acc * 6364136223846793005ull + i;
	ladder_sink = acc;
}

__attribute__((noinline)) void work_b(void)
{
	uint64_t acc = ladder_sink;
	for (uint32_t i = 0; i < 3 * UNIT; i++)
		acc = acc * 6364136223846793005ull + i;
	ladder_sink = acc;
}

__attribute__((noinline)) void work_c(void)
{
	uint64_t acc = ladder_sink;
	for (uint32_t i = 0; i < 2 * UNIT; i++)
		acc = acc * 6364136223846793005ull + i;
	ladder_sink = acc;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t ladder_run(double seconds)
{
	double end = now_s() + seconds;
	uint64_t rounds = 0;
	while (now_s() < end) {
		work_a();
		work_b();
		work_c();
		rounds++;
	}
	return rounds;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 3.0;
	if (!(seconds > 0) || seconds > 3600) {
		fprintf(stderr, "usage: ladder [SECONDS]\n");
		return 2;
	}
	uint64_t rounds = ladder_run(seconds);
	/* Using the result keeps ladder_run from being a tail call. */
	printf("ladder: %llu rounds\n", (unsigned long long)rounds);
	return 0;
}
