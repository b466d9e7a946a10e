/* Switch-heavy target: two threads pass a byte back and forth over two
 * pipes as fast as they can, ROUNDS times; every pass blocks one thread
 * and wakes the other, so each round is two context switches per thread.
 * With SWITCH_FILE, writes there the context switches (voluntary +
 * involuntary, getrusage RUSAGE_THREAD) both threads made up to the end of
 * their loop: the kernel's own count of their switch-outs.
 * usage: pingpong ROUNDS [SWITCH_FILE] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "selfreport.h"

static int ab[2], ba[2];
static long rounds;

static long thread_switches(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw + ru.ru_nivcsw : 0;
}

static void *pong(void *arg)
{
	char c;
	for (long i = 0; i < rounds; i++)
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			exit(3);
	*(long *)arg = thread_switches();
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atol(argv[1]) : 100000;
	if (pipe(ab) || pipe(ba))
		return 2;
	pthread_t t;
	long pong_switches = 0;
	if (pthread_create(&t, NULL, pong, &pong_switches))
		return 2;
	char c = 'x';
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 3;
	long main_switches = thread_switches();
	pthread_join(t, NULL);
	if (argc > 2) {
		FILE *f = fopen(argv[2], "w");
		if (!f || fprintf(f, "%ld\n", main_switches + pong_switches) < 0 || fclose(f))
			return 4;
	}
	return 0;
}
