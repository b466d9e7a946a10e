/* Creates and joins short-lived threads for argv[1] seconds, then exits:
 * a target whose thread list changes under the attacher. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *brief(void *arg)
{
	volatile unsigned long x = (unsigned long)arg;
	for (int i = 0; i < 20000; i++)
		x = x * 3 + 1;
	return NULL;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
	unsigned long n = 0;
	while (now() < end) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, brief, (void *)n++);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
	return 0;
}
