/* Included once by each bench workload: when BENCH_REPORT names a file, the
 * process that started writes "wall_s cpu_s rq_wait_s" (its own CPU plus that of its
 * waited-for children) at exit. The bench subtracts this from the rusage of
 * the recorder's whole process tree to get the recorder's own CPU, and uses
 * wall_s as the target's run time (recorder start-up excluded). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char *selfreport_path;
static double selfreport_wait0;
static pid_t selfreport_pid;
static struct timespec selfreport_t0;

static double selfreport_tv(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Seconds this thread has waited on a run queue (runnable, not running):
 * wall time minus that is what the target would take on an idle machine,
 * including any time a profiler keeps it stopped. */
static double selfreport_rq_wait(void)
{
	unsigned long long run = 0, wait = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &run, &wait) != 2)
		wait = 0;
	fclose(f);
	return (double)wait / 1e9;
}

static void selfreport_write(void)
{
	if (!selfreport_path || getpid() != selfreport_pid)
		return;
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	double wall = (double)(t1.tv_sec - selfreport_t0.tv_sec) +
	              (double)(t1.tv_nsec - selfreport_t0.tv_nsec) / 1e9;
	double cpu = selfreport_tv(self.ru_utime) + selfreport_tv(self.ru_stime) +
	             selfreport_tv(kids.ru_utime) + selfreport_tv(kids.ru_stime);
	FILE *f = fopen(selfreport_path, "w");
	if (f) {
		fprintf(f, "%.6f %.6f %.6f\n", wall, cpu, selfreport_rq_wait() - selfreport_wait0);
		fclose(f);
	}
}

__attribute__((constructor)) static void selfreport_init(void)
{
	clock_gettime(CLOCK_MONOTONIC, &selfreport_t0);
	selfreport_wait0 = selfreport_rq_wait();
	selfreport_path = getenv("BENCH_REPORT");
	if (selfreport_path && *selfreport_path) {
		static char buf[4096];
		snprintf(buf, sizeof(buf), "%s", selfreport_path);
		selfreport_path = buf;
		unsetenv("BENCH_REPORT"); /* exec'd children must not overwrite it */
		selfreport_pid = getpid();
		atexit(selfreport_write);
	} else {
		selfreport_path = NULL;
	}
}
