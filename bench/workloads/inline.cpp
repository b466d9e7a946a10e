// Heavy inlining: templates and always_inline helpers fold into two
// noinline kernels, so the hot code has inline frames only.
//   main -> run -> kernel_mix 70% (inlined Mixer<>::apply, rotl, ...)
//               -> kernel_sum 30% (inlined Accum<>::add, ...)
// usage: inline [ROUNDS]
#include <cstdint>
#include <cstdlib>
#include "selfreport.h"

volatile std::uint64_t sink;

template <int R> __attribute__((always_inline)) inline std::uint64_t rotl(std::uint64_t x)
{
	return (x << R) | (x >> (64 - R));
}

template <typename T, int K> struct Mixer {
	__attribute__((always_inline)) static inline T apply(T x, T i)
	{
		x ^= rotl<K>(x) + i;
		return x * 0x9E3779B97F4A7C15ull;
	}
};

template <typename T> struct Accum {
	T total = 0;
	__attribute__((always_inline)) inline void add(T v) { total += Mixer<T, 7>::apply(v, total); }
};

__attribute__((noinline)) std::uint64_t kernel_mix(std::uint64_t seed)
{
	for (std::uint32_t i = 0; i < 700000u; i++)
		seed = Mixer<std::uint64_t, 13>::apply(seed, i);
	return seed;
}

__attribute__((noinline)) std::uint64_t kernel_sum(std::uint64_t seed)
{
	Accum<std::uint64_t> a;
	for (std::uint32_t i = 0; i < 300000u; i++)
		a.add(seed + i);
	return a.total;
}

__attribute__((noinline)) void run(long rounds)
{
	std::uint64_t s = sink;
	for (long r = 0; r < rounds; r++)
		s = kernel_sum(kernel_mix(s));
	sink = s;
}

int main(int argc, char **argv)
{
	run(argc > 1 ? std::atol(argv[1]) : 1500);
	return 0;
}
