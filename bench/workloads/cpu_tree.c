/* Call tree without frame pointers and known self-time shares:
 *   main -> run -> step -> work_a 50% / work_b 30% / work_c 20%
 * usage: cpu_tree [ROUNDS]  (fixed work, not fixed time) */
#include <stdint.h>
#include "selfreport.h"

#define UNIT 100000u
volatile uint64_t sink;

#define SPIN(n)                                                                                    \
	do {                                                                                       \
		uint64_t acc = sink;                                                               \
		for (uint32_t i = 0; i < (n); i++)                                                 \
			acc = acc * 6364136223846793005ull + i;                                    \
		sink = acc;                                                                        \
	} while (0)

__attribute__((noinline)) void work_a(void)
{
	SPIN(5 * UNIT);
}
__attribute__((noinline)) void work_b(void)
{
	SPIN(3 * UNIT);
}
__attribute__((noinline)) void work_c(void)
{
	SPIN(2 * UNIT);
}

__attribute__((noinline)) void step(void)
{
	work_a();
	work_b();
	work_c();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void run(long rounds)
{
	for (long r = 0; r < rounds; r++)
		step();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atol(argv[1]) : 600);
	return 0;
}
