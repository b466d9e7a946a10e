/* argv[1] = depth, argv[2] = rounds: spins argv[2] rounds in
 * shallow_spin, then argv[2] rounds in deep_leaf under `depth` frames of
 * descend() (16 bytes of stack each at -O1: 2,000 of them fit a 32 KiB
 * copy), making a system call in every round there (kernel frames on
 * top), then argv[2] rounds in shallow_spin again. A round is fixed work
 * (about 0.1 ms of CPU), so the phases hold the same share of the samples
 * however loaded the machine is. */
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long shallow_spin(long rounds)
{
	unsigned long x = 1;
	for (long r = 0; r < rounds; r++) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1;
		sink = x; /* Not a pure function: both calls stay. */
	}
	return x;
}

__attribute__((noinline)) unsigned long deep_leaf(long rounds)
{
	unsigned long x = 3;
	for (long r = 0; r < rounds * 400; r++) {
		for (int i = 0; i < 100; i++)
			x = x * 2862933555777941757UL + 3;
		x += (unsigned long)getppid();
	}
	return x;
}

static long deep_rounds;

__attribute__((noinline)) unsigned long descend(int n)
{
	if (n == 0)
		return deep_leaf(deep_rounds);
	unsigned long r = descend(n - 1);
	sink += r; /* not a tail call */
	return r + 1;
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 1100;
	long rounds = argc > 2 ? atol(argv[2]) : 5000;
	sink = shallow_spin(rounds);
	deep_rounds = rounds;
	sink += descend(depth);
	sink += shallow_spin(rounds);
	return 0;
}
