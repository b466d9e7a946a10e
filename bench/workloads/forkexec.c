/* fork+exec: the parent starts CHILDREN copies of itself through execv (in
 * turn, two at a time) and also works; children run child_work.
 * usage: forkexec [CHILDREN [ROUNDS]]   forkexec --child ROUNDS */
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include "selfreport.h"

#define UNIT 100000u
volatile uint64_t sink;

__attribute__((noinline)) void child_work(long rounds)
{
	uint64_t acc = sink;
	for (long r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < 10 * UNIT; i++)
			acc = acc * 6364136223846793005ull + i;
	sink = acc;
}

__attribute__((noinline)) void parent_work(long rounds)
{
	uint64_t acc = sink;
	for (long r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < 10 * UNIT; i++)
			acc = acc * 2862933555777941757ull + i;
	sink = acc;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--child") == 0) {
		child_work(atol(argv[2]));
		return 0;
	}
	long children = argc > 1 ? atol(argv[1]) : 8;
	long rounds = argc > 2 ? atol(argv[2]) : 30;
	char rbuf[32], self[4096];
	snprintf(rbuf, sizeof(rbuf), "%ld", rounds);
	/* exec the real path, not /proc/self/exe, so the child's comm stays "forkexec" */
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	for (long c = 0; c < children; c++) {
		pid_t pid = fork();
		if (pid == 0) {
			char *args[] = { self, "--child", rbuf, NULL };
			execv(self, args);
			_exit(127);
		}
		parent_work(rounds / 2);
		waitpid(pid, NULL, 0);
	}
	return 0;
}
