/* threads: three named worker threads plus the main thread, each in its
 * own function, for demos of per-thread views (report --thread-names).
 *
 *   threads [SECONDS]   (default 3)
 *
 * Threads: "main" runs main_spin; "crunch-0".."crunch-2" run crunch_N. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds = 3.0;
volatile uint64_t threads_sink;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t spin_until(double end, uint64_t seed)
{
	uint64_t acc = seed;
	while (now_s() < end)
		for (int i = 0; i < 100000; i++)
			acc = acc * 6364136223846793005ull + (uint64_t)i;
	return acc;
}

__attribute__((noinline)) void crunch_0(double end)
{
	threads_sink += spin_until(end, 1);
}
__attribute__((noinline)) void crunch_1(double end)
{
	threads_sink += spin_until(end, 2);
}
__attribute__((noinline)) void crunch_2(double end)
{
	threads_sink += spin_until(end, 3);
}
__attribute__((noinline)) void main_spin(double end)
{
	threads_sink += spin_until(end, 4);
}

static void *worker(void *arg)
{
	int id = *(const int *)arg;
	char name[16];
	snprintf(name, sizeof(name), "crunch-%d", id);
	pthread_setname_np(pthread_self(), name);
	double end = now_s() + seconds;
	if (id == 0)
		crunch_0(end);
	else if (id == 1)
		crunch_1(end);
	else
		crunch_2(end);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds = strtod(argv[1], NULL);
	if (!(seconds > 0) || seconds > 3600) {
		fprintf(stderr, "usage: threads [SECONDS]\n");
		return 2;
	}
	static int ids[3] = { 0, 1, 2 };
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		if (pthread_create(&t[i], NULL, worker, &ids[i]) != 0) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	main_spin(now_s() + seconds);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("threads: done\n");
	return 0;
}
