/* Hash-flood keys: kernel-frame addresses that all land in one probe run
 * under the unseeded frame hash the spool reader used before hashing was
 * seeded (the murmur3 finalizer, combined field by field, folded to 32
 * bits). Shared by tests/format/test_spool_flood.c and bench/flood.c. */
#ifndef SP_TEST_FORMAT_FLOOD_H
#define SP_TEST_FORMAT_FLOOD_H

#include <stddef.h>
#include <stdint.h>

#include "stackpulse.h"

static inline uint64_t flood_old_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t flood_old_combine(uint64_t h, uint64_t v)
{
	return flood_old_mix(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* The old slot hash of a kernel frame at @p addr (sp_frame_hash, folded). */
static inline uint32_t flood_old_kernel_slot_hash(uint64_t addr)
{
	uint64_t h = flood_old_mix((uint64_t)(uint32_t)STACKPULSE_FRAME_KERNEL);
	h = flood_old_combine(h, UINT32_MAX); /* module */
	h = flood_old_combine(h, addr);
	h = flood_old_combine(h, UINT32_MAX); /* pycode */
	h = flood_old_combine(h, 0);          /* line */
	return (uint32_t)(h ^ (h >> 32));
}

/* Fills @p out with @p n distinct kernel addresses whose old hashes, in
 * their low @p bits bits, fall below @p window: every table of up to 2^bits
 * slots puts them in one run of home slots (window 1: one slot). Costs
 * about n x 2^bits / window hash evaluations. */
static inline void flood_kernel_addrs(uint64_t *out, size_t n, unsigned bits, uint32_t window)
{
	uint32_t mask = (uint32_t)((1ull << bits) - 1);
	uint64_t a = 0xffffffff81000000ull;
	for (size_t i = 0; i < n; a++)
		if ((flood_old_kernel_slot_hash(a) & mask) < window)
			out[i++] = a;
}

/* @p n distinct kernel addresses with no structure. */
static inline void flood_random_addrs(uint64_t *out, size_t n)
{
	uint64_t x = 0x243f6a8885a308d3ull;
	for (size_t i = 0; i < n; i++) {
		x = flood_old_mix(x + 0x9e3779b97f4a7c15ull);
		out[i] = 0xffffffff81000000ull + ((x >> 16) << 4) + i; /* distinct */
	}
}

#endif
