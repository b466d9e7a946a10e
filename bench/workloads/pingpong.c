/* Switch-heavy target: two threads pass a byte back and forth over two
 * pipes as fast as they can, ROUNDS times; every pass blocks one thread
 * and wakes the other, so each round is two context switches per thread.
 * usage: pingpong ROUNDS */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "selfreport.h"

static int ab[2], ba[2];
static long rounds;

static void *pong(void *arg)
{
	(void)arg;
	char c;
	for (long i = 0; i < rounds; i++)
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			exit(3);
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atol(argv[1]) : 100000;
	if (pipe(ab) || pipe(ba))
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, pong, NULL))
		return 2;
	char c = 'x';
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 3;
	pthread_join(t, NULL);
	return 0;
}
