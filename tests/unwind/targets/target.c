/* Sampling target for tests/unwind: built with -O2 -fomit-frame-pointer.
 * Modes: ladder | recurse N | shlib | plt | signal | vdso. Prints "ready" once its maps
 * are final, then spins until killed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__clang__)
#define NOIPA __attribute__((noinline))
#else
#define NOIPA __attribute__((noipa))
#endif

int sp_lib_outer(int x);
int sp_lib_tiny(int x);

volatile unsigned long sink;

NOIPA int leaf(int x)
{
	for (unsigned long i = 0; i < 100000; i++)
		sink += i ^ (unsigned long)x;
	return (int)sink;
}

NOIPA int middle(int x)
{
	int r = leaf(x + 1);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

NOIPA int entry(int x)
{
	int r = middle(x * 2);
	__asm__ volatile("" ::: "memory");
	return r + 2;
}

NOIPA int rec_leaf(int x)
{
	for (unsigned long i = 0; i < 100000; i++)
		sink += i + (unsigned long)x;
	return (int)sink;
}

NOIPA int recurse(int depth)
{
	char pad[48]; /* A real frame per level. */
	memset(pad, depth, sizeof(pad));
	__asm__ volatile("" : : "r"(pad) : "memory");
	int r = depth == 0 ? rec_leaf(pad[3]) : recurse(depth - 1);
	__asm__ volatile("" ::: "memory");
	return r + pad[5];
}

NOIPA int shlib_entry(int x)
{
	int r = sp_lib_outer(x);
	__asm__ volatile("" ::: "memory");
	return r + 3;
}

/* Calls through the PLT so often that samples land in its stubs. */
NOIPA int plt_entry(int x)
{
	for (int i = 0; i < 100000; i++)
		x = sp_lib_tiny(x);
	__asm__ volatile("" ::: "memory");
	return x;
}

NOIPA int sig_leaf(int x)
{
	for (unsigned long i = 0; i < 3000000; i++)
		sink += i * (unsigned long)x;
	return (int)sink;
}

NOIPA void on_signal(int sig)
{
	sig_leaf(sig);
	__asm__ volatile("" ::: "memory");
}

NOIPA int sig_middle(int x)
{
	raise(SIGUSR1);
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

NOIPA int vdso_entry(int x)
{
	struct timespec ts;
	for (int i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += (unsigned long)ts.tv_nsec;
	}
	__asm__ volatile("" ::: "memory");
	return x;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ladder";
	int depth = argc > 2 ? atoi(argv[2]) : 10;
	if (strcmp(mode, "signal") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigaction(SIGUSR1, &sa, NULL);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (strcmp(mode, "recurse") == 0)
			recurse(depth);
		else if (strcmp(mode, "shlib") == 0)
			shlib_entry(argc);
		else if (strcmp(mode, "plt") == 0)
			plt_entry(argc);
		else if (strcmp(mode, "signal") == 0)
			sig_middle(argc);
		else if (strcmp(mode, "vdso") == 0)
			vdso_entry(argc);
		else
			entry(argc);
		__asm__ volatile("" ::: "memory");
	}
}
