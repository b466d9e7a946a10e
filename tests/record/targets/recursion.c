/* recurse() calls itself 12 deep, then spins in bottom(); argv[1] = seconds. */
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long bottom(unsigned long n)
{
	unsigned long x = n;
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 6364136223846793005UL + 1;
	sink = x;
	return x;
}

__attribute__((noinline)) unsigned long recurse(int depth, unsigned long n)
{
	unsigned long r = depth == 0 ? bottom(n) : recurse(depth - 1, n + 1);
	__asm__ volatile("" ::: "memory");
	return r + (unsigned long)depth;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
	unsigned long acc = 0;
	while (now() < end)
		acc += recurse(12, acc);
	sink = acc;
	return 0;
}
