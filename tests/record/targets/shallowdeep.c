/* Shallow for argv[1] seconds (main -> shallow_spin), then deep for argv[2]
 * seconds: main -> deep_descend x DEPTH (about 20 KiB of stack) ->
 * deep_leaf. The learned stack copy shrinks in the first phase and must
 * grow back in the second. */
#include <stdlib.h>
#include <time.h>

#define DEPTH 160

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long shallow_spin(unsigned long x)
{
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 6364136223846793005UL + 1;
	return x;
}

__attribute__((noinline)) unsigned long deep_leaf(unsigned long x)
{
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 2862933555777941757UL + 3;
	return x;
}

__attribute__((noinline)) unsigned long deep_descend(int depth, unsigned long x)
{
	volatile char pad[96];
	pad[0] = (char)depth;
	unsigned long r = depth == 0 ? deep_leaf(x) : deep_descend(depth - 1, x + 1);
	return r + (unsigned long)pad[0]; /* not a tail call */
}

int main(int argc, char **argv)
{
	double t = now();
	double shallow_end = t + (argc > 1 ? atof(argv[1]) : 1.0);
	double deep_end = shallow_end + (argc > 2 ? atof(argv[2]) : 1.0);
	unsigned long acc = 0;
	while (now() < shallow_end)
		acc = shallow_spin(acc);
	while (now() < deep_end)
		acc = deep_descend(DEPTH, acc);
	sink = acc;
	return 0;
}
