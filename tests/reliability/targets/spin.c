/* Busy target: argv[1] threads (default 1) spin in a three-deep call chain
 * for argv[2] seconds (default 5). */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static double secs = 5.0;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long spin_leaf(unsigned long x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	__asm__ volatile("" ::: "memory");
	return x;
}

__attribute__((noinline)) static unsigned long spin_mid(unsigned long x)
{
	unsigned long r = spin_leaf(x) + 1;
	__asm__ volatile("" ::: "memory");
	return r;
}

static void *spin_main(void *arg)
{
	(void)arg;
	double end = now() + secs;
	unsigned long acc = 0;
	while (now() < end)
		acc += spin_mid(acc);
	sink = acc;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	if (argc > 2)
		secs = atof(argv[2]);
	if (n < 1)
		n = 1;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	for (int i = 1; i < n; i++)
		pthread_create(&t[i], NULL, spin_main, NULL);
	spin_main(NULL);
	for (int i = 1; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	return 0;
}
