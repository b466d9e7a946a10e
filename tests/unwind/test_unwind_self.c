/* The unwinder on its own process, without perf: a leaf function stores
 * every register the way perf would sample them, plus a copy of its stack,
 * and the unwind must name its callers. Needs no privileges, so it also
 * runs on aarch64 under qemu-user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "stackpulse.h"
#include "perf_sampler.c"
#include "unwind/unwind.h"

#if defined(__clang__)
#define NOIPA __attribute__((noinline))
#else
#define NOIPA __attribute__((noinline, noclone))
#endif

typedef struct snapshot {
	sp_regs regs;
	uint8_t *stack;
	size_t len;
	uint64_t sp;
} snapshot;

static uintptr_t stack_limit; /* Highest stack address we may copy from. */

/* Byte copy that ASan lets cross the redzones between stack frames. */
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize_address))
#endif
static void
copy_stack(uint8_t *dst, const volatile uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* Registers in sp_unwind_regs_mask() order, taken at one instant. */
static NOIPA void self_leaf(snapshot *s)
{
	uint64_t r[SP_UNWIND_MAX_REGS];
	memset(r, 0, sizeof(r));
#if defined(__x86_64__)
	/* AX BX CX DX SI DI BP SP IP R8..R15 */
	__asm__ volatile("movq %%rax, 0(%0)\n\t"
	                 "movq %%rbx, 8(%0)\n\t"
	                 "movq %%rcx, 16(%0)\n\t"
	                 "movq %%rdx, 24(%0)\n\t"
	                 "movq %%rsi, 32(%0)\n\t"
	                 "movq %%rdi, 40(%0)\n\t"
	                 "movq %%rbp, 48(%0)\n\t"
	                 "movq %%rsp, 56(%0)\n\t"
	                 "leaq 0(%%rip), %%rax\n\t"
	                 "movq %%rax, 64(%0)\n\t"
	                 "movq %%r8, 72(%0)\n\t"
	                 "movq %%r9, 80(%0)\n\t"
	                 "movq %%r10, 88(%0)\n\t"
	                 "movq %%r11, 96(%0)\n\t"
	                 "movq %%r12, 104(%0)\n\t"
	                 "movq %%r13, 112(%0)\n\t"
	                 "movq %%r14, 120(%0)\n\t"
	                 "movq %%r15, 128(%0)\n\t"
	                 :
	                 : "r"(r)
	                 : "rax", "memory");
	s->regs.count = 17;
	s->sp = r[7];
#elif defined(__aarch64__)
	/* X0..X30, SP, PC */
	__asm__ volatile("stp x0, x1, [%0, #0]\n\t"
	                 "stp x2, x3, [%0, #16]\n\t"
	                 "stp x4, x5, [%0, #32]\n\t"
	                 "stp x6, x7, [%0, #48]\n\t"
	                 "stp x8, x9, [%0, #64]\n\t"
	                 "stp x10, x11, [%0, #80]\n\t"
	                 "stp x12, x13, [%0, #96]\n\t"
	                 "stp x14, x15, [%0, #112]\n\t"
	                 "stp x16, x17, [%0, #128]\n\t"
	                 "stp x18, x19, [%0, #144]\n\t"
	                 "stp x20, x21, [%0, #160]\n\t"
	                 "stp x22, x23, [%0, #176]\n\t"
	                 "stp x24, x25, [%0, #192]\n\t"
	                 "stp x26, x27, [%0, #208]\n\t"
	                 "stp x28, x29, [%0, #224]\n\t"
	                 "str x30, [%0, #240]\n\t"
	                 "mov x16, sp\n\t"
	                 "str x16, [%0, #248]\n\t"
	                 "adr x16, .\n\t"
	                 "str x16, [%0, #256]\n\t"
	                 :
	                 : "r"(r)
	                 : "x16", "memory");
	s->regs.count = 33;
	s->sp = r[31];
#endif
	memcpy(s->regs.value, r, sizeof(r));
	s->regs.abi = 2; /* PERF_SAMPLE_REGS_ABI_64 */
	s->len = stack_limit > s->sp ? (size_t)(stack_limit - s->sp) : 0;
	s->stack = malloc(s->len ? s->len : 1);
	if (s->stack && s->sp)
		copy_stack(s->stack, (const volatile uint8_t *)(uintptr_t)s->sp, s->len);
	__asm__ volatile("" ::: "memory");
}

static NOIPA void self_middle(snapshot *s)
{
	self_leaf(s);
	__asm__ volatile("" ::: "memory");
}

static NOIPA void self_entry(snapshot *s)
{
	char pad[64];
	memset(pad, 1, sizeof(pad));
	__asm__ volatile("" : : "r"(pad) : "memory");
	self_middle(s);
	__asm__ volatile("" ::: "memory");
}

/* Only the stack pointer and pc of snapshot @p snap known (a blocked
 * thread as /proc/PID/task/TID/syscall shows it): the walk names a prefix
 * of the @p rf.count callers @p full the full registers gave, and where it
 * needs a register it does not have it stops, marked truncated, rather
 * than guessing, whatever the unknown registers hold. */
static void unwind_sp_pc_only(sp_unwind_space *sp, const snapshot *snap, const uint64_t *full,
                              const sp_unwind_result *rf)
{
#if defined(__x86_64__)
	uint64_t pc = snap->regs.value[8];
#else
	uint64_t pc = snap->regs.value[32];
#endif
	sp_regs only;
	sp_unwind_regs_sp_pc(&only, snap->sp, pc);
	CHECK_EQ(only.count, snap->regs.count);
	uint64_t part[64], again[64];
	sp_unwind_result rp, rq;
	REQUIRE_OK(sp_unwind(sp, &only, snap->stack, snap->len, snap->sp, part, 64, &rp));
	printf("    %u of %u frames from sp and pc alone%s\n", rp.count, rf->count,
	       rp.truncated ? " (truncated)" : "");
	REQUIRE(rp.count >= 1);
	CHECK(rp.count <= rf->count);
	for (uint32_t i = 0; i < rp.count && i < rf->count; i++)
		CHECK_EQ(part[i], full[i]);
	CHECK(rp.count == rf->count || rp.truncated);
	for (uint32_t k = 0; k < only.count; k++)
		if (only.unknown & (1ULL << k))
			only.value[k] = snap->sp + 16; /* tempting, and unknown */
	REQUIRE_OK(sp_unwind(sp, &only, snap->stack, snap->len, snap->sp, again, 64, &rq));
	CHECK_EQ(rq.count, rp.count);
	for (uint32_t i = 0; i < rq.count && i < rp.count; i++)
		CHECK_EQ(again[i], part[i]);
}

SP_TEST(self_unwind_names_callers)
{
	volatile char top[32];
	top[0] = 1;
	/* Copy up to a little above this frame: enough for the three callees. */
	stack_limit = (uintptr_t)&top[0] + 256;
	snapshot s;
	memset(&s, 0, sizeof(s));
	self_entry(&s);
	REQUIRE(s.stack);

	ps_procmap *maps = NULL;
	int n = ps_read_maps(getpid(), &maps);
	REQUIRE(n > 0);
	char exe[4096];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	REQUIRE(el > 0);
	exe[el] = 0;
	ps_symtab tab;
	REQUIRE(ps_symtab_load(&tab, exe) == 0);
	sp_unwinder *u = NULL;
	sp_unwind_space *sp = NULL;
	REQUIRE_OK(sp_unwinder_new(&u));
	REQUIRE_OK(sp_unwind_space_new(u, getpid(), &sp));
	REQUIRE_OK(ps_feed_maps(sp, maps, n));
	uint64_t pcs[64];
	sp_unwind_result r;
	REQUIRE_OK(sp_unwind(sp, &s.regs, s.stack, s.len, s.sp, pcs, 64, &r));
	const char *names[4] = { NULL, NULL, NULL, NULL };
	for (uint32_t i = 0; i < r.count; i++) {
		const char *nm = ps_symbolize(maps, n, &tab, 1, pcs[i], i == 0);
		if (i < 4)
			names[i] = nm;
		printf("    #%u %#llx %s\n", i, (unsigned long long)pcs[i], nm ? nm : "?");
	}
	REQUIRE(r.count >= 4);
	CHECK_STR(names[0], "self_leaf");
	CHECK_STR(names[1], "self_middle");
	CHECK_STR(names[2], "self_entry");
	CHECK_STR(names[3], "self_unwind_names_callers");
	CHECK_EQ(r.used_fp, 0);
	/* The copy ends just above this frame, so the walk cannot finish. */
	CHECK_EQ(r.truncated, 1);
	unwind_sp_pc_only(sp, &s, pcs, &r);
	ps_symtab_free(&tab);
	free(s.stack);
	free(maps);
	sp_unwind_space_free(sp);
	sp_unwinder_free(u);
}
