/* A process with a thread in uninterruptible sleep: main vfork()s a child
 * that sleeps argv[1] seconds before it exits, so main waits in the kernel
 * (state D) all that time, while a second thread spins. After the child
 * is gone main works for half a second and exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static void *spin(void *arg)
{
	(void)arg;
	for (;;)
		sink++;
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 8;
	pthread_t t;
	pthread_create(&t, NULL, spin, NULL);
	pid_t c = vfork();
	if (c == 0) {
		/* Only a raw system call between vfork and _exit. */
		struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
		syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			sink++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 < 0.5);
	return 0;
}
