/* entry -> middle -> leaf, spinning in leaf; argv[1] = seconds of CPU time. */
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long leaf(unsigned long n)
{
	unsigned long x = n;
	for (unsigned long i = 0; i < 200000; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
	__asm__ volatile("" ::: "memory");
	return x;
}

__attribute__((noinline)) unsigned long middle(unsigned long n)
{
	unsigned long r = leaf(n) + 1;
	__asm__ volatile("" ::: "memory");
	return r * 3;
}

__attribute__((noinline)) unsigned long entry(unsigned long n)
{
	unsigned long r = middle(n) ^ 7;
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	double end = now() + secs;
	unsigned long acc = 0;
	while (now() < end)
		acc += entry(acc);
	sink = acc;
	return 0;
}
