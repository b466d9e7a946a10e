/* Hashing for interning tables: seeded per process, so keys read from an
 * untrusted file (kernel addresses, names) cannot be crafted to collide.
 *
 * The seed is drawn once, on first use, from the address-space layout
 * (stack, heap, library and thread-local addresses, which ASLR randomizes)
 * and, on x86-64, the cycle counter. The pure layers make no syscalls, so
 * there is no getrandom here. Hashes differ from one process to the next:
 * never store one in a file or let output order depend on it. */
#ifndef SP_COMMON_HASH_H
#define SP_COMMON_HASH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The process seed, 0 until first use (then never 0 again). */
extern _Atomic uint64_t sp_hash_key_;
uint64_t sp_hash_seed_init(void);

static inline uint64_t sp_hash_seed(void)
{
	uint64_t k = atomic_load_explicit(&sp_hash_key_, memory_order_relaxed);
	return k ? k : sp_hash_seed_init();
}

/* Unseeded bijective mixer (murmur3 fmix64): only for values an attacker
 * does not choose, or on top of a seeded value. */
static inline uint64_t sp_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Mixes a 64-bit value with the process seed into a well-spread hash. */
static inline uint64_t sp_hash64(uint64_t x)
{
	uint64_t k = sp_hash_seed();
	return sp_mix64(sp_mix64(x ^ k) + k);
}

static inline uint64_t sp_hash_combine(uint64_t h, uint64_t v)
{
	return sp_hash64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* SipHash-1-3 of @p n bytes keyed with the process seed. */
uint64_t sp_hash_bytes(const void *p, size_t n);

#endif
