/* main() leaves with pthread_exit while a worker spins on for argv[1]
 * seconds: the process outlives its leader thread. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;
static double secs = 1.0;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void *orphan_work(void *arg)
{
	(void)arg;
	double end = now() + secs;
	unsigned long x = 1;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1;
	sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		secs = atof(argv[1]);
	pthread_t t;
	pthread_create(&t, NULL, orphan_work, NULL);
	pthread_exit(NULL);
}
