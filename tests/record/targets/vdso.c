/* vDSO-heavy: vdso_loop() calls clock_gettime, which glibc runs in the
 * vDSO without entering the kernel; argv[1] = seconds. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) void vdso_loop(double secs)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double end = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + secs;
	for (;;) {
		for (int i = 0; i < 1000; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sink += (uint64_t)ts.tv_nsec;
		}
		if ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9 >= end)
			break;
	}
}

int main(int argc, char **argv)
{
	vdso_loop(argc > 1 ? atof(argv[1]) : 1.0);
	return 0;
}
