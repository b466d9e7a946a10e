#include "common/hash.h"

#include <string.h>

_Atomic uint64_t sp_hash_key_;

static _Thread_local int tls_anchor;
static int static_anchor;

uint64_t sp_hash_seed_init(void)
{
	/* Addresses ASLR places independently: the stack, this library's data,
	 * the thread-local block and libc's memcpy. */
	int stack_anchor = 0;
	uint64_t s = sp_mix64((uint64_t)(uintptr_t)&stack_anchor);
	s = sp_mix64(s ^ (uint64_t)(uintptr_t)&static_anchor);
	s = sp_mix64(s ^ (uint64_t)(uintptr_t)&tls_anchor);
	s = sp_mix64(s ^ (uint64_t)(uintptr_t)&memcpy);
#if defined(__x86_64__) && defined(__clang__)
	s = sp_mix64(s ^ __builtin_readcyclecounter());
#endif
	if (!s)
		s = 0x9e3779b97f4a7c15ULL;
	uint64_t expect = 0;
	/* The first thread to get here decides; everyone else uses its value. */
	if (!atomic_compare_exchange_strong(&sp_hash_key_, &expect, s))
		return expect;
	return s;
}

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = rotl(v1, 13);                                                                 \
		v1 ^= v0;                                                                          \
		v0 = rotl(v0, 32);                                                                 \
		v2 += v3;                                                                          \
		v3 = rotl(v3, 16);                                                                 \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = rotl(v3, 21);                                                                 \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = rotl(v1, 17);                                                                 \
		v1 ^= v2;                                                                          \
		v2 = rotl(v2, 32);                                                                 \
	} while (0)

static inline uint64_t load_le64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | b[i];
	return v;
}

uint64_t sp_hash_bytes(const void *p, size_t n)
{
	uint64_t k0 = sp_hash_seed(), k1 = sp_mix64(k0 ^ 0x736f6d6570736575ULL);
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL,
	         v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	const uint8_t *b = p;
	size_t whole = n & ~(size_t)7;
	for (size_t i = 0; i < whole; i += 8) {
		uint64_t m = load_le64(b + i);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t last = (uint64_t)(n & 0xff) << 56;
	for (size_t i = 0; i < (n & 7); i++)
		last |= (uint64_t)b[whole + i] << (8 * i);
	v3 ^= last;
	SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
