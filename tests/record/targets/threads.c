/* Four named threads, each spinning in its own function; argv[1] = seconds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static double secs = 1.0;
volatile unsigned long sink[4];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long spin(unsigned long x)
{
	for (unsigned long i = 0; i < 50000; i++)
		x = x * 6364136223846793005UL + 1;
	return x;
}

#define WORKER(N, I)                                                                               \
	__attribute__((noinline)) void *N(void *arg)                                               \
	{                                                                                          \
		double end = *(double *)arg;                                                       \
		unsigned long x = I;                                                               \
		while (now() < end) {                                                              \
			x = spin(x);                                                               \
			__asm__ volatile("" ::: "memory");                                         \
		}                                                                                  \
		sink[I] = x;                                                                       \
		return NULL;                                                                       \
	}
WORKER(work_alpha, 0)
WORKER(work_beta, 1)
WORKER(work_gamma, 2)
WORKER(work_delta, 3)

int main(int argc, char **argv)
{
	if (argc > 1)
		secs = atof(argv[1]);
	static double end;
	end = now() + secs;
	void *(*fns[4])(void *) = { work_alpha, work_beta, work_gamma, work_delta };
	const char *names[4] = { "t-alpha", "t-beta", "t-gamma", "t-delta" };
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		pthread_create(&t[i], NULL, fns[i], &end);
		pthread_setname_np(t[i], names[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
