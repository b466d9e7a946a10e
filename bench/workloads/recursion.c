/* Deep recursion: main -> run -> descend (DEPTH levels, ~100 bytes of frame
 * each) -> leaf_spin. usage: recursion [ROUNDS [DEPTH]] */
#include <stdint.h>
#include "selfreport.h"

volatile uint64_t sink;

__attribute__((noinline)) void leaf_spin(void)
{
	uint64_t acc = sink;
	for (uint32_t i = 0; i < 200000u; i++)
		acc = acc * 6364136223846793005ull + i;
	sink = acc;
}

__attribute__((noinline)) int descend(int depth)
{
	volatile char pad[64];
	pad[0] = (char)depth;
	if (depth == 0) {
		leaf_spin();
		return pad[0];
	}
	int r = descend(depth - 1);
	return r + pad[0]; /* not a tail call */
}

__attribute__((noinline)) void run(long rounds, int depth)
{
	for (long r = 0; r < rounds; r++)
		descend(depth);
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atol(argv[1]) : 2500, argc > 2 ? atoi(argv[2]) : 100);
	return 0;
}
