/* Workload of the aarch64 guest tests (tests/arm64/test_arm64_guest.c),
 * built several ways by `zig build test-arm64-vm`: -O2 without frame
 * pointers (CFI), frame pointers without any CFI, and
 * -mbranch-protection=standard (return addresses signed with PAC).
 *
 *   tree MODE SECONDS
 *   spin       main -> outer -> middle -> leaf_spin (a leaf: its return
 *              address stays in x30)
 *   threads    two more threads, each thread_main -> outer -> ...
 *   forkexec   a forked child that execs `tree spin`, beside the parent's spin
 *   vdso       main -> vdso_loop -> clock_gettime in the vDSO
 *   syscall    main -> syscall_loop -> getppid in the kernel
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t leaf_spin(uint64_t n)
{
	uint64_t x = n;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + i;
	return x;
}

__attribute__((noinline)) uint64_t middle(uint64_t n)
{
	uint64_t r = leaf_spin(n);
	sink += r;
	return r ^ n;
}

__attribute__((noinline)) void outer(double secs)
{
	double end = now() + secs;
	while (now() < end)
		sink += middle(200000);
}

__attribute__((noinline)) void vdso_loop(double secs)
{
	double end = now() + secs;
	struct timespec ts;
	while (now() < end)
		for (int i = 0; i < 1000; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sink += (uint64_t)ts.tv_nsec;
		}
}

__attribute__((noinline)) void syscall_loop(double secs)
{
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 100; i++)
			sink += (uint64_t)getppid();
}

static double secs_arg;

__attribute__((noinline)) void *thread_main(void *arg)
{
	(void)arg;
	outer(secs_arg);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s spin|threads|forkexec|vdso|syscall SECONDS\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1];
	secs_arg = atof(argv[2]);
	if (strcmp(mode, "spin") == 0) {
		outer(secs_arg);
	} else if (strcmp(mode, "threads") == 0) {
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, thread_main, NULL) != 0)
				return 1;
		outer(secs_arg);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
	} else if (strcmp(mode, "forkexec") == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			execl(argv[0], argv[0], "spin", argv[2], (char *)NULL);
			_exit(127);
		}
		outer(secs_arg);
		int status = 0;
		if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
			return 1;
	} else if (strcmp(mode, "vdso") == 0) {
		vdso_loop(secs_arg);
	} else if (strcmp(mode, "syscall") == 0) {
		syscall_loop(secs_arg);
	} else {
		return 2;
	}
	return 0;
}
