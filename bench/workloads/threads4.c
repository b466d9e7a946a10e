/* Four busy threads, each main-less: thread_main -> t_hot_a 60% / t_hot_b 40%.
 * usage: threads4 [ROUNDS_PER_THREAD] */
#include <pthread.h>
#include <stdint.h>
#include "selfreport.h"

#define UNIT 100000u

__attribute__((noinline)) uint64_t t_hot_a(uint64_t acc)
{
	for (uint32_t i = 0; i < 6 * UNIT; i++)
		acc = acc * 6364136223846793005ull + i;
	return acc;
}

__attribute__((noinline)) uint64_t t_hot_b(uint64_t acc)
{
	for (uint32_t i = 0; i < 4 * UNIT; i++)
		acc = acc * 2862933555777941757ull + i;
	return acc;
}

static long rounds;
static volatile uint64_t sinks[4 * 8];

__attribute__((noinline)) static void *thread_main(void *arg)
{
	long id = (long)arg;
	uint64_t acc = (uint64_t)id;
	for (long r = 0; r < rounds; r++) {
		acc = t_hot_a(acc);
		acc = t_hot_b(acc);
	}
	sinks[id * 8] = acc;
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atol(argv[1]) : 150;
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
