/* Calls into libwork.so: main -> app_call -> lib_outer -> lib_inner. */
#include <stdlib.h>
#include <time.h>

unsigned long lib_outer(unsigned long n);
volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long app_call(unsigned long n)
{
	unsigned long r = lib_outer(n) * 5;
	__asm__ volatile("" ::: "memory");
	return r;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
	unsigned long acc = 0;
	while (now() < end)
		acc += app_call(acc);
	sink = acc;
	return 0;
}
