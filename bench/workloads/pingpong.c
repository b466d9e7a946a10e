/* Switch-heavy target: two threads pass a byte back and forth over two
 * pipes as fast as they can, ROUNDS times; every pass blocks one thread
 * and wakes the other, so each round is two context switches per thread.
 * With SWITCH_FILE, the main thread then sleeps 10 ms ten times on each
 * CPU it may run on (the kernel tells a perf ring's reader what it could
 * not write to the full ring only with its next record there, so a
 * recorder that fell behind at the end of the loop is told what it lost
 * on every CPU), and writes there the context switches both threads made
 * (getrusage RUSAGE_THREAD; the other thread's up to the end of its loop):
 * the kernel's own count of their switch-outs, "TOTAL VOLUNTARY
 * INVOLUNTARY". Voluntary ones are the blocking reads (at most one per
 * thread and round) and the sleeps; involuntary ones are preemptions, as
 * many as the machine's load makes.
 * usage: pingpong ROUNDS [SWITCH_FILE] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "selfreport.h"

static int ab[2], ba[2];
static long rounds;

struct switches {
	long vol, invol;
};

static struct switches thread_switches(void)
{
	struct rusage ru;
	struct switches s = { 0, 0 };
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		s.vol = ru.ru_nvcsw;
		s.invol = ru.ru_nivcsw;
	}
	return s;
}

static void *pong_loop(void *arg)
{
	char c;
	for (long i = 0; i < rounds; i++)
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			exit(3);
	*(struct switches *)arg = thread_switches();
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atol(argv[1]) : 100000;
	if (pipe(ab) || pipe(ba))
		return 2;
	pthread_t t;
	struct switches pong = { 0, 0 };
	if (pthread_create(&t, NULL, pong_loop, &pong))
		return 2;
	char c = 'x';
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 3;
	pthread_join(t, NULL);
	if (argc > 2) {
		cpu_set_t all;
		if (sched_getaffinity(0, sizeof(all), &all) != 0)
			return 4;
		for (int round = 0; round < 10; round++)
			for (size_t cpu = 0; cpu < CPU_SETSIZE; cpu++) {
				if (!CPU_ISSET(cpu, &all))
					continue;
				cpu_set_t one;
				CPU_ZERO(&one);
				CPU_SET(cpu, &one);
				if (sched_setaffinity(0, sizeof(one), &one) == 0)
					nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
			}
		sched_setaffinity(0, sizeof(all), &all);
		struct switches m = thread_switches();
		FILE *f = fopen(argv[2], "w");
		if (!f ||
		    fprintf(f, "%ld %ld %ld\n", m.vol + m.invol + pong.vol + pong.invol,
		            m.vol + pong.vol, m.invol + pong.invol) < 0 ||
		    fclose(f))
			return 4;
	}
	return 0;
}
