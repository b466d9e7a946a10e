/* N busy threads for a fixed wall time: thread_main -> busy_outer ->
 * busy_a 2/3 / busy_b 1/3. The load case of the recorder (many runnable
 * threads on few CPUs). usage: busy [THREADS [SECONDS]] */
#include <pthread.h>
#include <stdint.h>
#include "selfreport.h"

static double seconds;
static struct timespec t_start;
static volatile uint64_t sinks[256 * 8];

__attribute__((noinline)) uint64_t busy_a(uint64_t acc)
{
	for (uint32_t i = 0; i < 20000u; i++)
		acc = acc * 6364136223846793005ull + i;
	return acc;
}

__attribute__((noinline)) uint64_t busy_b(uint64_t acc)
{
	for (uint32_t i = 0; i < 10000u; i++)
		acc = acc * 2862933555777941757ull + i;
	return acc;
}

__attribute__((noinline)) static uint64_t busy_outer(uint64_t acc)
{
	return busy_b(busy_a(acc));
}

static double elapsed(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t_start.tv_sec) + (double)(t.tv_nsec - t_start.tv_nsec) / 1e9;
}

__attribute__((noinline)) static void *thread_main(void *arg)
{
	long id = (long)arg;
	uint64_t acc = (uint64_t)id;
	while (elapsed() < seconds)
		for (int k = 0; k < 16; k++)
			acc = busy_outer(acc);
	sinks[(id % 256) * 8] = acc;
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 64;
	seconds = argc > 2 ? atof(argv[2]) : 5;
	if (n < 1 || n > 4096)
		n = 64;
	clock_gettime(CLOCK_MONOTONIC, &t_start);
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	if (!t)
		return 1;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)i);
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	return 0;
}
