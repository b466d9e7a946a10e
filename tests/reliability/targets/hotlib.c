/* A small shared library for the hostile-file targets: one function that
 * burns CPU, so samples land in the library. */
#include <stdint.h>

uint64_t hotlib_spin(uint64_t n);

__attribute__((noinline)) uint64_t hotlib_spin(uint64_t n)
{
	volatile uint64_t x = 1;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + i;
	return x;
}

/* Four pages of text, so a target can split the executable mapping. */
__asm__(".text\n.globl hotlib_pad\n.type hotlib_pad, @function\nhotlib_pad:\n.fill 16384, 1, "
        "0x90\nret\n"
        ".size hotlib_pad, . - hotlib_pad\n");
