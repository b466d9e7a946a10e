/* Shared library of the sampling target. */
#define NOIPA __attribute__((noipa))

volatile unsigned long sp_lib_sink;

NOIPA int sp_lib_inner(int x)
{
	for (unsigned long i = 0; i < 100000; i++)
		sp_lib_sink += i | (unsigned long)x;
	return (int)sp_lib_sink;
}

NOIPA int sp_lib_outer(int x)
{
	int r = sp_lib_inner(x + 7);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* Called in a tight loop through the PLT (mode plt). */
NOIPA int sp_lib_tiny(int x)
{
	return x + 1;
}
