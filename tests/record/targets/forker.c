/* Forks a child that spins in child_work() and a second child that execs
 * argv[2] argv[3]; the parent spins in parent_work(). argv[1] = seconds. */
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void child_work(double secs)
{
	double end = now() + secs;
	unsigned long x = 1;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1;
	sink = x;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void parent_work(double secs)
{
	double end = now() + secs;
	unsigned long x = 2;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 2862933555777941757UL + 7;
	sink = x;
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	pid_t a = fork();
	if (a == 0) {
		prctl(PR_SET_NAME, "forked-kid");
		child_work(secs);
		_exit(0);
	}
	pid_t b = -1;
	if (argc > 3) {
		b = fork();
		if (b == 0) {
			execl(argv[2], argv[2], argv[3], (char *)NULL);
			_exit(127);
		}
	}
	parent_work(secs);
	waitpid(a, NULL, 0);
	if (b > 0)
		waitpid(b, NULL, 0);
	return 0;
}
