/* A process tree: argv[1] is "SECONDS:KINDS", one forked child per letter
 * of KINDS: 's' naps in nap_work() (20 ms sleeps), 'b' spins in
 * busy_work(), 'u' spins in hidden_work() after making itself not
 * dumpable (prctl PR_SET_DUMPABLE 0: a user without CAP_SYS_PTRACE can
 * then neither trace it, read its /proc maps and memory, nor open perf
 * events on it). The parent waits in parent_wait() for SECONDS, then ends
 * its children. The children's pids, in KINDS order, go to the file named
 * by $TREE_PIDS when set, once all of them have started. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_KIDS 16

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void busy_work(void)
{
	unsigned long x = 1;
	for (;;) {
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1;
		sink = x;
	}
}

__attribute__((noinline)) void hidden_work(void)
{
	unsigned long x = 5;
	for (;;) {
		for (int i = 0; i < 10000; i++)
			x = x * 2862933555777941757UL + 7;
		sink = x;
	}
}

__attribute__((noinline)) void nap_work(void)
{
	struct timespec ts = { 0, 20000000 };
	for (;;)
		nanosleep(&ts, NULL);
}

__attribute__((noinline)) void parent_wait(double until)
{
	while (now() < until) {
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
	}
}

int main(int argc, char **argv)
{
	const char *spec = argc > 1 ? argv[1] : "1:sb";
	double secs = atof(spec);
	const char *kinds = strchr(spec, ':');
	kinds = kinds ? kinds + 1 : "";
	int ready[2];
	if (pipe(ready) != 0)
		return 1;
	pid_t kids[MAX_KIDS];
	int n = 0;
	for (; kinds[n] && n < MAX_KIDS; n++) {
		char kind = kinds[n];
		kids[n] = fork();
		if (kids[n] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (kind == 'u')
				prctl(PR_SET_DUMPABLE, 0);
			close(ready[0]);
			close(ready[1]); /* Started. */
			if (kind == 's')
				nap_work();
			else if (kind == 'u')
				hidden_work();
			busy_work();
		}
	}
	close(ready[1]);
	char c;
	while (read(ready[0], &c, 1) > 0) /* EOF once every child closed it. */
		;
	const char *path = getenv("TREE_PIDS");
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path ? path : "");
	FILE *f = path ? fopen(tmp, "w") : NULL;
	for (int i = 0; f && i < n; i++)
		fprintf(f, "%d\n", (int)kids[i]);
	if (f && fclose(f) == 0)
		rename(tmp, path); /* Whole or absent for a reader. */
	parent_wait(now() + secs);
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}
