/* Shared library of the shlib target: lib_outer -> lib_inner. */
volatile unsigned long lib_sink;

__attribute__((noinline)) unsigned long lib_inner(unsigned long n)
{
	unsigned long x = n;
	for (unsigned long i = 0; i < 100000; i++)
		x = x * 2862933555777941757UL + 3037000493UL;
	lib_sink = x;
	return x;
}

__attribute__((noinline)) unsigned long lib_outer(unsigned long n)
{
	unsigned long r = lib_inner(n) + 1;
	__asm__ volatile("" ::: "memory");
	return r;
}
