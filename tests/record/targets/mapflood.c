/* A process that maps code at argv[1] distinct addresses (anonymous and
 * file-backed pages of its own executable, mapped and unmapped one by one,
 * top-down as mmap places them; perf reports no munmap, so a recorder sees
 * argv[1] executable mappings), while a forked child spins in other_work().
 * After the flood the parent spins in flood_work(). argv[2] = seconds of
 * spinning after the flood. Prints "flooded N" on stdout when done. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void other_work(double secs)
{
	double end = now() + secs;
	unsigned long x = 1;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1;
	sink = x;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void flood_work(double secs)
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
	long count = argc > 1 ? atol(argv[1]) : 70000;
	double secs = argc > 2 ? atof(argv[2]) : 1.0;
	pid_t child = fork();
	if (child == 0) {
		other_work(secs + 3.0);
		_exit(0);
	}
	int fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0)
		return 1;
	long page = sysconf(_SC_PAGESIZE), done = 0;
	/* Far below the libraries, two pages apart so nothing merges. */
	unsigned long base = 0x6f0000000000ul;
	for (long i = 0; i < count; i++) {
		void *want = (void *)(base - (unsigned long)i * 2ul * (unsigned long)page);
		void *p = i & 1 ? mmap(want, (size_t)page, PROT_READ | PROT_EXEC,
		                       MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0)
		                : mmap(want, (size_t)page, PROT_READ | PROT_EXEC,
		                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		munmap(p, (size_t)page);
		done++;
		if (i % 250 == 249)
			usleep(1000); /* Let the recorder drain: losses are not the point. */
	}
	printf("flooded %ld\n", done);
	fflush(stdout);
	flood_work(secs);
	waitpid(child, NULL, 0);
	return 0;
}
