/* A real binary whose function names a spool may claim. */
#include <stdio.h>

__attribute__((noinline)) int rel_victim_fn(int x)
{
	volatile int acc = x;
	for (int i = 0; i < x * 7; i++)
		acc = acc * 31 + i;
	return acc * 3 + 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d\n", rel_victim_fn(argc));
	return 0;
}
