/* Off-CPU target: per round, spin 30%, sleep 40% in nanosleep and block 30%
 * in read() on a pipe that a filler thread writes late. Prints the time
 * each phase really took (ns), the truth the recording is held to.
 * usage: phases ROUNDS ROUND_MS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int go_pipe[2], data_pipe[2];
static long round_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap(long ns)
{
	struct timespec ts = { ns / 1000000000l, ns % 1000000000l };
	while (nanosleep(&ts, &ts) != 0)
		;
}

__attribute__((noinline)) static void spin_phase(long ns)
{
	uint64_t end = now_ns() + (uint64_t)ns;
	volatile uint64_t x = 0;
	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x += (uint64_t)i;
}

__attribute__((noinline)) static void sleep_phase(long ns)
{
	nap(ns);
}

__attribute__((noinline)) static void read_phase(void)
{
	char c = 'g';
	if (write(go_pipe[1], &c, 1) != 1 || read(data_pipe[0], &c, 1) != 1)
		exit(3);
}

__attribute__((noinline)) static void *filler_main(void *arg)
{
	(void)arg;
	char c;
	while (read(go_pipe[0], &c, 1) == 1) {
		if (c == 'q')
			break;
		nap(round_ns * 3 / 10);
		if (write(data_pipe[1], &c, 1) != 1)
			exit(3);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10;
	round_ns = (argc > 2 ? atol(argv[2]) : 200) * 1000000l;
	if (pipe(go_pipe) || pipe(data_pipe))
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, filler_main, NULL))
		return 2;
	uint64_t spin = 0, sleep = 0, rd = 0;
	for (int r = 0; r < rounds; r++) {
		uint64_t a = now_ns();
		spin_phase(round_ns * 3 / 10);
		uint64_t b = now_ns();
		sleep_phase(round_ns * 4 / 10);
		uint64_t c = now_ns();
		read_phase();
		uint64_t d = now_ns();
		spin += b - a;
		sleep += c - b;
		rd += d - c;
	}
	char q = 'q';
	if (write(go_pipe[1], &q, 1) != 1)
		return 3;
	pthread_join(t, NULL);
	printf("spin %llu sleep %llu read %llu\n", (unsigned long long)spin,
	       (unsigned long long)sleep, (unsigned long long)rd);
	return 0;
}
