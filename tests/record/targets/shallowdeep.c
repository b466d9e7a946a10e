/* argv[1] rounds shallow (main -> shallow_spin), then argv[2] rounds deep:
 * main -> deep_descend x DEPTH (about 20 KiB of stack) -> deep_leaf. A
 * round is fixed work (about 0.1 ms of CPU), so the phases hold the same
 * share of the samples however loaded the machine is. The learned stack
 * copy shrinks in the first phase and must grow back in the second. */
#include <stdlib.h>

#define DEPTH 160

volatile unsigned long sink;

__attribute__((noinline)) unsigned long shallow_spin(unsigned long x)
{
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 6364136223846793005UL + 1;
	return x;
}

__attribute__((noinline)) unsigned long deep_leaf(unsigned long x)
{
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 2862933555777941757UL + 3;
	return x;
}

__attribute__((noinline)) unsigned long deep_descend(int depth, unsigned long x)
{
	volatile char pad[96];
	pad[0] = (char)depth;
	unsigned long r = depth == 0 ? deep_leaf(x) : deep_descend(depth - 1, x + 1);
	return r + (unsigned long)pad[0]; /* not a tail call */
}

int main(int argc, char **argv)
{
	long shallow = argc > 1 ? atol(argv[1]) : 3000;
	long deep = argc > 2 ? atol(argv[2]) : 3000;
	unsigned long acc = 0;
	for (long i = 0; i < shallow; i++)
		acc = shallow_spin(acc);
	for (long i = 0; i < deep; i++)
		acc = deep_descend(DEPTH, acc);
	sink = acc;
	return 0;
}
