/* Starts and reaps argv[1] (default 500) short-lived children one after
 * another; each spins argv[2] iterations (default 300000, about 1 ms). */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;
static long iters = 300000;

__attribute__((noinline)) static void child_work(void)
{
	unsigned long x = (unsigned long)getpid();
	for (long i = 0; i < iters; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500;
	if (argc > 2)
		iters = atol(argv[2]);
	int reaped = 0;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			child_work();
			_exit(0);
		}
		if (p > 0 && waitpid(p, NULL, 0) == p)
			reaped++;
	}
	return reaped == n ? 0 : 1;
}
