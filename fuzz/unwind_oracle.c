/* Fuzzes the unwinder (src/unwind) against libunwind as its oracle. On the
 * first call the harness snapshots the registers and stack of a thread of
 * its own, a few frames deep in this (real, optimized) binary, whose chain
 * runs on through libc's thread start to clone3: the same snapshot
 * whichever driver calls the harness, so findings replay. Each input patches bytes
 * of the registers and of a copy of that stack and cuts the copy short;
 * the snapshot is then unwound by sp_unwind and by libunwind's remote API.
 * sp_unwind must stay in bounds and return only addresses of mapped code;
 * where both unwinders reach the outermost frame, their chains must be
 * equal.
 *
 * Input: byte 0 scales the stack copy's length ((b0 + 1) / 256 of it),
 * then 3-byte patches: a little-endian u16 position and a byte. Positions
 * below 8 * LO_NREGS patch a register byte (DWARF order); the others a
 * stack byte at (position - 8 * LO_NREGS) modulo the length. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "../tests/unwind/perf_sampler.c"
#include "../tests/unwind/libunwind_oracle.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_FRAMES 256
#define FUZZ_MAX_STACK  (256u * 1024)

static struct {
	int state; /* 0: not taken, 1: ready, -1: failed. */
	sp_regs regs;
	uint8_t *stack;
	size_t len;
	uint64_t start;
	ps_procmap *maps;
	int nmaps;
	sp_unwinder *u;
	sp_unwind_space *space;
	lo_oracle *o;
} snap;

/* Plain byte copy: the live stack holds sanitizer redzones. */
__attribute__((no_sanitize_address, noinline)) static void copy_stack(uint8_t *dst,
                                                                      const uint8_t *src,
                                                                      size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = ((const volatile uint8_t *)src)[i];
}

/* Registers in sp_unwind_regs_mask order from a ucontext. */
static int regs_from_context(const ucontext_t *uc, sp_regs *r)
{
	memset(r, 0, sizeof(*r));
	r->abi = 2; /* PERF_SAMPLE_REGS_ABI_64 */
#if defined(__x86_64__)
	static const int order[] = {
		REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_RIP,
		REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15,
	};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		r->value[r->count++] = (uint64_t)uc->uc_mcontext.gregs[order[i]];
#elif defined(__aarch64__)
	for (int i = 0; i < 31; i++)
		r->value[r->count++] = uc->uc_mcontext.regs[i];
	r->value[r->count++] = uc->uc_mcontext.sp;
	r->value[r->count++] = uc->uc_mcontext.pc;
#endif
	return 0;
}

static uint64_t reg_sp(const sp_regs *r)
{
#if defined(__x86_64__)
	return r->value[7];
#else
	return r->value[31];
#endif
}

/* The frames below the snapshot: a few levels of real calls. */
__attribute__((noinline)) static int take(void)
{
	ucontext_t uc;
	if (getcontext(&uc) != 0 || regs_from_context(&uc, &snap.regs) != 0)
		return -1;
	pthread_attr_t attr;
	void *base;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return -1;
	int rc = pthread_attr_getstack(&attr, &base, &size);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return -1;
	uint64_t sp = reg_sp(&snap.regs), end = (uint64_t)(uintptr_t)base + size;
	if (end <= sp || end - sp > FUZZ_MAX_STACK)
		return -1;
	snap.len = (size_t)(end - sp);
	snap.start = sp;
	if (!(snap.stack = malloc(snap.len)))
		return -1;
	copy_stack(snap.stack, (const uint8_t *)(uintptr_t)sp, snap.len);
	return 0;
}

__attribute__((noinline)) static int descend(int depth)
{
	int rc = depth == 0 ? take() : descend(depth - 1);
	__asm__ volatile("" ::: "memory");
	return rc;
}

static void *snapshot_thread(void *arg)
{
	*(int *)arg = descend(3);
	return NULL;
}

static int snapshot(void)
{
	if (snap.state != 0)
		return snap.state;
	snap.state = -1;
	pthread_t t;
	int taken = -1;
	if (pthread_create(&t, NULL, snapshot_thread, &taken) == 0)
		pthread_join(t, NULL);
	if (taken != 0 || (snap.nmaps = ps_read_maps(getpid(), &snap.maps)) <= 0 ||
	    sp_unwinder_new(&snap.u) != 0 ||
	    sp_unwind_space_new(snap.u, getpid(), &snap.space) != 0 ||
	    ps_feed_maps(snap.space, snap.maps, snap.nmaps) != 0 ||
	    lo_new(snap.maps, snap.nmaps, &snap.o) != 0) {
		fprintf(stderr, "unwind_oracle: cannot snapshot this process\n");
		abort();
	}
	snap.state = 1;
	return 1;
}

static int mapped(uint64_t pc)
{
	for (int i = 0; i < snap.nmaps; i++)
		if (pc >= snap.maps[i].start && pc < snap.maps[i].end)
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	snapshot();
	size_t len = size ? snap.len * ((size_t)data[0] + 1) / 256 : snap.len;
	uint8_t *stack = malloc(len ? len : 1); /* Exact size: ASan sees overreads. */
	if (!stack)
		return 0;
	memcpy(stack, snap.stack, len);
	sp_regs regs = snap.regs;
	uint64_t dwarf[LO_NREGS];
	/* Patch registers in DWARF order, as lo_unwind numbers them. */
	uint64_t mask = sp_unwind_regs_mask();
	uint32_t k = 0;
	int slot[LO_NREGS];
	for (int i = 0; i < LO_NREGS; i++)
		slot[i] = -1;
	for (unsigned bit = 0; bit < 64 && k < regs.count; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		if (bit < sizeof(lo_perf_to_dwarf) && lo_perf_to_dwarf[bit] >= 0)
			slot[lo_perf_to_dwarf[bit]] = (int)k;
		k++;
	}
	for (int i = 0; i < LO_NREGS; i++)
		dwarf[i] = slot[i] >= 0 ? regs.value[slot[i]] : 0;
	for (size_t i = 1; i + 3 <= size; i += 3) {
		size_t pos = (size_t)data[i] | (size_t)data[i + 1] << 8;
		if (pos < sizeof(dwarf)) {
			((uint8_t *)dwarf)[pos] = data[i + 2];
		} else if (len) {
			stack[(pos - sizeof(dwarf)) % len] = data[i + 2];
		}
	}
	for (int i = 0; i < LO_NREGS; i++)
		if (slot[i] >= 0)
			regs.value[slot[i]] = dwarf[i];

	uint64_t ours[FUZZ_MAX_FRAMES], theirs[FUZZ_MAX_FRAMES];
	sp_unwind_result r;
	if (sp_unwind(snap.space, &regs, stack, len, snap.start, ours, FUZZ_MAX_FRAMES, &r) != 0 ||
	    r.count > FUZZ_MAX_FRAMES)
		abort();
	for (uint32_t i = 1; i < r.count; i++)
		if (!mapped(ours[i]))
			abort(); /* Every return address lies in mapped code. */
	int complete = 0;
	uint32_t n = lo_unwind(snap.o, &regs, stack, len, snap.start, theirs, FUZZ_MAX_FRAMES,
	                       &complete);
	/* Where ours reached the outermost frame by CFI alone, libunwind must
	 * have found the same frames as far as it got, and the same number if
	 * it reached the end too. (It may stop one frame early: libunwind
	 * 1.6 fails on an outermost frame without CFI, such as the _start of
	 * a zig-linked program, where ours stops at the zero frame pointer.)
	 * Frame-pointer steps are not compared: the two fallbacks differ. */
	uint32_t both = n < r.count ? n : r.count;
	if (!r.truncated && !r.used_fp &&
	    (lo_common_prefix(ours, r.count, theirs, n) != both || (complete && n != r.count))) {
		fprintf(stderr, "unwind_oracle: chains differ: ours %u frames, libunwind %u\n",
		        r.count, n);
		for (uint32_t i = 0; i < r.count || i < n; i++)
			fprintf(stderr, "  #%u %#llx %#llx\n", i,
			        (unsigned long long)(i < r.count ? ours[i] : 0),
			        (unsigned long long)(i < n ? theirs[i] : 0));
		abort();
	}
	free(stack);
	return 0;
}
