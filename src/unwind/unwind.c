/* The frame walker: DWARF CFI rules (from libdw) evaluated against the
 * sampled registers and the stack copy, with a validated frame-pointer
 * fallback. Memory reads come only from the stack copy. */
#include <dwarf.h>
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "unwind/unwind_internal.h"

/* Architecture description in DWARF register numbers. */
#if defined(__x86_64__)
#define SP_NREGS   17 /* rax..r15 plus the return-address column. */
#define SP_REG_SP  7
#define SP_REG_FP  6
#define SP_REG_RA  16
#define SP_PC_MASK UINT64_MAX
/* perf register (asm/perf_regs.h PERF_REG_X86_*) -> DWARF register. */
/* clang-format off */
static const int8_t perf_to_dwarf[24] = {
	0,  /* AX */    3,  /* BX */    2,  /* CX */    1,  /* DX */
	4,  /* SI */    5,  /* DI */    6,  /* BP */    7,  /* SP */
	16, /* IP */    -1, /* FLAGS */ -1, /* CS */    -1, /* SS */
	-1, /* DS */    -1, /* ES */    -1, /* FS */    -1, /* GS */
	8,  /* R8 */    9,  /* R9 */    10, /* R10 */   11, /* R11 */
	12, /* R12 */   13, /* R13 */   14, /* R14 */   15, /* R15 */
};
/* clang-format on */
/* GPRs, IP, SP and BP; not FLAGS or segment registers (DS..GS fail). */
#define SP_REGS_MASK (0x1ffULL | (0xffULL << 16))
#elif defined(__aarch64__)
#define SP_NREGS     33 /* x0..x30, sp, and the pc in slot 32. */
#define SP_REG_SP    31
#define SP_REG_FP    29
#define SP_REG_RA    32
/* Drops pointer-authentication bits from return addresses. */
#define SP_PC_MASK   0x0000ffffffffffffULL
/* PERF_REG_ARM64_X0..X28, X29, LR(30), SP(31), PC(32). */
static const int8_t perf_to_dwarf[33] = {
	0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};
#define SP_REGS_MASK ((1ULL << 33) - 1)
#else
#error "stackpulse unwinds x86_64 and aarch64 only"
#endif

#define SP_ABI_64     2 /* PERF_SAMPLE_REGS_ABI_64 */
#define SP_EXPR_STACK 16
#define SP_EXPR_STEPS 64

uint64_t sp_unwind_regs_mask(void)
{
	return SP_REGS_MASK;
}

void sp_unwind_regs_sp_pc(sp_regs *r, uint64_t sp, uint64_t pc)
{
	memset(r, 0, sizeof(*r));
	r->abi = SP_ABI_64;
	uint64_t mask = SP_REGS_MASK;
	for (unsigned bit = 0; bit < 64 && mask; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		mask &= ~(1ULL << bit);
		int d = bit < sizeof(perf_to_dwarf) ? perf_to_dwarf[bit] : -1;
		if (d == SP_REG_SP)
			r->value[r->count] = sp;
		else if (d == SP_REG_RA)
			r->value[r->count] = pc;
		else
			r->unknown |= 1ULL << r->count;
		r->count++;
	}
}

/* Registers of one frame; bit i of @p valid says reg[i] is known. */
typedef struct regset {
	uint64_t reg[SP_NREGS];
	uint64_t valid;
} regset;

/* The stack copy: the only target memory we read. */
typedef struct stack_view {
	const uint8_t *bytes;
	uint64_t start, len;
	uint64_t *hi; /* Highest read end, relative to start (sizing the copy). */
} stack_view;

static bool read8(const stack_view *st, uint64_t addr, uint64_t *out)
{
	if (addr >= st->start && addr - st->start < UINT64_MAX - 8 &&
	    addr - st->start + 8 > *st->hi)
		*st->hi = addr - st->start + 8;
	if (addr < st->start || st->len < 8 || addr - st->start > st->len - 8)
		return false;
	memcpy(out, st->bytes + (addr - st->start), 8);
	return true;
}

static bool get_reg(const regset *r, uint64_t regno, uint64_t *out)
{
	if (regno >= SP_NREGS || !(r->valid & (1ULL << regno)))
		return false;
	*out = r->reg[regno];
	return true;
}

static void set_reg(regset *r, unsigned regno, uint64_t v)
{
	r->reg[regno] = v;
	r->valid |= 1ULL << regno;
}

/* Evaluates a CFI expression. @p cfa is pushed for DW_OP_call_frame_cfa
 * (when @p have_cfa). Sets *is_value when it ends with DW_OP_stack_value. */
static bool eval(const Dwarf_Op *ops, size_t nops, const regset *r, const stack_view *st,
                 bool have_cfa, uint64_t cfa, uint64_t *out, bool *is_value)
{
	uint64_t stack[SP_EXPR_STACK];
	size_t sp = 0;
	*is_value = false;
#define PUSH(v)                                                                                    \
	do {                                                                                       \
		if (sp == SP_EXPR_STACK)                                                           \
			return false;                                                              \
		uint64_t pushed_ = (v);                                                            \
		stack[sp++] = pushed_;                                                             \
	} while (0)
#define NEED(k)                                                                                    \
	do {                                                                                       \
		if (sp < (k))                                                                      \
			return false;                                                              \
	} while (0)
	size_t steps = 0;
	for (size_t i = 0; i < nops; i++) {
		if (++steps > SP_EXPR_STEPS)
			return false;
		const Dwarf_Op *op = &ops[i];
		uint8_t a = op->atom;
		uint64_t v, x;
		if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
			PUSH((uint64_t)(a - DW_OP_lit0));
			continue;
		}
		if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
			if (!get_reg(r, (uint64_t)(a - DW_OP_breg0), &v))
				return false;
			PUSH(v + op->number);
			continue;
		}
		switch (a) {
		case DW_OP_addr:
		case DW_OP_const1u:
		case DW_OP_const1s:
		case DW_OP_const2u:
		case DW_OP_const2s:
		case DW_OP_const4u:
		case DW_OP_const4s:
		case DW_OP_const8u:
		case DW_OP_const8s:
		case DW_OP_constu:
		case DW_OP_consts: PUSH(op->number); break;
		case DW_OP_bregx:
			if (!get_reg(r, op->number, &v))
				return false;
			PUSH(v + op->number2);
			break;
		case DW_OP_call_frame_cfa:
			if (!have_cfa)
				return false;
			PUSH(cfa);
			break;
		case DW_OP_plus_uconst:
			NEED(1);
			stack[sp - 1] += op->number;
			break;
		case DW_OP_deref:
			NEED(1);
			if (!read8(st, stack[sp - 1], &v))
				return false;
			stack[sp - 1] = v;
			break;
		case DW_OP_dup:
			NEED(1);
			PUSH(stack[sp - 1]);
			break;
		case DW_OP_drop:
			NEED(1);
			sp--;
			break;
		case DW_OP_over:
			NEED(2);
			PUSH(stack[sp - 2]);
			break;
		case DW_OP_pick:
			if (op->number >= sp)
				return false;
			PUSH(stack[sp - 1 - op->number]);
			break;
		case DW_OP_swap:
			NEED(2);
			v = stack[sp - 1];
			stack[sp - 1] = stack[sp - 2];
			stack[sp - 2] = v;
			break;
		case DW_OP_neg:
			NEED(1);
			stack[sp - 1] = 0 - stack[sp - 1];
			break;
		case DW_OP_not:
			NEED(1);
			stack[sp - 1] = ~stack[sp - 1];
			break;
		case DW_OP_plus:
		case DW_OP_minus:
		case DW_OP_mul:
		case DW_OP_and:
		case DW_OP_or:
		case DW_OP_xor:
		case DW_OP_shl:
		case DW_OP_shr:
		case DW_OP_shra:
		case DW_OP_eq:
		case DW_OP_ne:
		case DW_OP_lt:
		case DW_OP_gt:
		case DW_OP_le:
		case DW_OP_ge:
			NEED(2);
			x = stack[--sp]; /* Top of stack is the second operand. */
			v = stack[sp - 1];
			switch (a) {
			case DW_OP_plus: v += x; break;
			case DW_OP_minus: v -= x; break;
			case DW_OP_mul: v *= x; break;
			case DW_OP_and: v &= x; break;
			case DW_OP_or: v |= x; break;
			case DW_OP_xor: v ^= x; break;
			case DW_OP_shl: v = x >= 64 ? 0 : v << x; break;
			case DW_OP_shr: v = x >= 64 ? 0 : v >> x; break;
			case DW_OP_shra: v = (uint64_t)((int64_t)v >> (x >= 63 ? 63 : x)); break;
			case DW_OP_eq: v = v == x; break;
			case DW_OP_ne: v = v != x; break;
			case DW_OP_lt: v = (int64_t)v < (int64_t)x; break;
			case DW_OP_gt: v = (int64_t)v > (int64_t)x; break;
			case DW_OP_le: v = (int64_t)v <= (int64_t)x; break;
			default: v = (int64_t)v >= (int64_t)x; break;
			}
			stack[sp - 1] = v;
			break;
		case DW_OP_skip:
		case DW_OP_bra: {
			if (a == DW_OP_bra) {
				NEED(1);
				if (stack[--sp] == 0)
					break;
			}
			/* Targets are byte offsets; find the op that starts there. */
			uint64_t target = op->offset + 3 + (uint64_t)(int64_t)(int16_t)op->number;
			size_t j = 0;
			while (j < nops && ops[j].offset != target)
				j++;
			if (j == nops)
				return false;
			i = j - 1; /* The loop's i++ lands on j; j == 0 wraps back to 0. */
			break;
		}
		case DW_OP_nop: break;
		case DW_OP_stack_value:
			if (i + 1 != nops)
				return false;
			*is_value = true;
			break;
		default: return false;
		}
	}
#undef PUSH
#undef NEED
	if (sp == 0)
		return false;
	*out = stack[sp - 1];
	return true;
}

enum step_result {
	STEP_OK,
	STEP_END,
	STEP_NOCFI,
	STEP_FAIL
};

/* One CFI step from @p cur (at @p pc, looked up at @p lookup) to its
 * caller in @p next. */
static enum step_result cfi_step(const sp_unwind_map *m, uint64_t lookup, const regset *cur,
                                 const stack_view *st, regset *next, uint64_t *next_pc,
                                 bool *signal)
{
	if (!m || !m->bin)
		return STEP_NOCFI;
	Dwarf_Frame *f = sp_unwind_binary_frame(m->bin, lookup - m->bias);
	if (!f)
		return STEP_NOCFI;
	int ra = dwarf_frame_info(f, NULL, NULL, signal);
#if defined(__aarch64__)
	if (ra != 30)
		return STEP_FAIL;
#else
	if (ra != SP_REG_RA)
		return STEP_FAIL;
#endif
	Dwarf_Op *ops;
	size_t nops;
	uint64_t cfa;
	bool is_value;
	if (dwarf_frame_cfa(f, &ops, &nops) != 0 || nops == 0 ||
	    !eval(ops, nops, cur, st, false, 0, &cfa, &is_value))
		return STEP_FAIL;
	next->valid = 0;
	/* Callers only rely on callee-saved registers (and the RA), so only
	 * those are recovered, except through a signal frame, which restores
	 * every register of the interrupted code. */
#if defined(__x86_64__)
	static const uint8_t saved[] = { 3, 6, 12, 13, 14, 15, 16 };
	static const uint8_t all[] = { 0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
#else
	static const uint8_t saved[] = { 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30 };
	static const uint8_t all[] = { 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
		                       11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
		                       22, 23, 24, 25, 26, 27, 28, 29, 30 };
#endif
	const uint8_t *cols = *signal ? all : saved;
	size_t ncols = *signal ? sizeof(all) : sizeof(saved);
	bool have_ra = false;
	uint64_t ra_val = 0;
	for (size_t ci = 0; ci < ncols; ci++) {
		int regno = cols[ci];
		Dwarf_Op mem[3];
		uint64_t v;
		if (dwarf_frame_register(f, regno, mem, &ops, &nops) != 0)
			continue;
		if (nops == 0) {
			/* libdw reports callee-saved registers the CIE leaves
			 * unspecified as undefined; they are unchanged by the ABI. */
			bool same = ops == NULL || (regno != ra && !*signal);
			if (same && get_reg(cur, (uint64_t)regno, &v))
				set_reg(next, (unsigned)regno, v);
			else if (ops == NULL && regno == ra)
				return STEP_FAIL; /* Same value of an unknown RA. */
			else if (regno == ra)
				return STEP_END; /* Undefined RA: the outermost frame. */
			continue;
		}
		if (!eval(ops, nops, cur, st, true, cfa, &v, &is_value) ||
		    (!is_value && !read8(st, v, &v))) {
			if (regno == ra)
				return STEP_FAIL; /* Saved RA beyond the stack copy. */
			continue;
		}
		set_reg(next, (unsigned)regno, v);
		if (regno == ra) {
			have_ra = true;
			ra_val = v;
		}
	}
	if (!have_ra) {
		/* Same-value RA (aarch64 leaf functions keep it in x30). */
		if (!get_reg(next, (uint64_t)ra, &ra_val))
			return STEP_FAIL;
	}
	set_reg(next, SP_REG_SP, cfa);
	*next_pc = ra_val & SP_PC_MASK;
	return STEP_OK;
}

/* One frame-pointer step: [fp] is the caller's fp, [fp + 8] the return
 * address (x86_64 and aarch64 alike). On x86_64 the caller's sp is then
 * fp + 16. An aarch64 frame record sits anywhere in its frame (usually at
 * the bottom), so fp + 16 is only a lower bound there: it is kept in
 * reg[SP] without its valid bit, so CFI rules based on sp fail and the walk
 * goes on by frame pointers. */
static enum step_result fp_step(const regset *cur, const stack_view *st, regset *next,
                                uint64_t *next_pc)
{
	uint64_t fp, up, ra;
	uint64_t sp = cur->reg[SP_REG_SP]; /* Exact, or a lower bound (see above). */
	if (!get_reg(cur, SP_REG_FP, &fp))
		return STEP_FAIL;
	if (fp == 0)
		return STEP_END; /* The ABI's outermost-frame marker. */
	/* The frame must lie above the current sp, inside the copy, aligned. */
	if ((fp & 7) != 0 || fp < sp || !read8(st, fp, &up) || !read8(st, fp + 8, &ra))
		return STEP_FAIL;
	next->valid = 0;
	set_reg(next, SP_REG_FP, up);
#if defined(__aarch64__)
	next->reg[SP_REG_SP] = fp + 16;
#else
	set_reg(next, SP_REG_SP, fp + 16);
#endif
	*next_pc = ra & SP_PC_MASK;
	return STEP_OK;
}

int sp_unwind(sp_unwind_space *s, const sp_regs *regs, const uint8_t *stack, size_t stack_len,
              uint64_t stack_start, uint64_t *pcs, uint32_t max, sp_unwind_result *result)
{
	if (!s || !regs || !result || (!pcs && max) || (!stack && stack_len))
		return sp_error(-EINVAL, "sp_unwind: NULL argument");
	memset(result, 0, sizeof(*result));
	if (max == 0)
		return 0;
	regset cur = { { 0 }, 0 };
	uint64_t pc = 0;
	bool have_pc = false;
	uint64_t mask = SP_REGS_MASK;
	uint32_t k = 0;
	if (regs->abi == SP_ABI_64) {
		for (unsigned bit = 0; bit < 64 && mask; bit++) {
			if (!(mask & (1ULL << bit)))
				continue;
			mask &= ~(1ULL << bit);
			if (k >= regs->count || k >= SP_UNWIND_MAX_REGS)
				break;
			int known = !((regs->unknown >> k) & 1);
			uint64_t v = regs->value[k++];
			if (!known || bit >= sizeof(perf_to_dwarf) || perf_to_dwarf[bit] < 0)
				continue;
			unsigned d = (unsigned)perf_to_dwarf[bit];
			/* The sampled IP (x86_64) or PC (aarch64) is also a
			 * register of the leaf frame: CFA expressions read it
			 * (x86_64 PLT stubs: rsp + 8, or + 16 past the push). */
			if (d == SP_REG_RA) {
				pc = v;
				have_pc = true;
			}
			set_reg(&cur, d, v);
		}
	}
	if (!have_pc || !(cur.valid & (1ULL << SP_REG_SP))) {
		result->truncated = 1; /* No user registers (kernel thread, 32-bit task). */
		return 0;
	}
	stack_view st = { stack, stack_start, stack ? stack_len : 0, &result->stack_hi };
	pcs[0] = pc;
	result->count = 1;
	bool activation = true; /* pc is exact, not a return address. */
	while (result->count < max) {
		const sp_unwind_map *m = sp_unwind_space_find(s, pc);
		uint64_t lookup = activation ? pc : pc - 1;
		regset next;
		uint64_t next_pc = 0;
		bool signal = false;
		enum step_result r = cfi_step(m, lookup, &cur, &st, &next, &next_pc, &signal);
		/* After an aarch64 frame-pointer step sp is unknown: CFI that
		 * needs it fails, and frame pointers take over. */
		bool sp_known = (cur.valid & (1ULL << SP_REG_SP)) != 0;
		if (r == STEP_NOCFI || (r == STEP_FAIL && !sp_known)) {
			r = fp_step(&cur, &st, &next, &next_pc);
			if (r == STEP_OK)
				result->used_fp = 1;
		}
		if (r == STEP_END)
			return 0;
		if (r != STEP_OK) {
			result->truncated = 1;
			return 0;
		}
		if (next_pc == 0)
			return 0; /* A zero return address ends the chain. */
		uint64_t old_sp = cur.reg[SP_REG_SP], new_sp = next.reg[SP_REG_SP];
		/* Callers sit higher on the stack; a signal frame may switch stacks,
		 * and an aarch64 leaf may have no frame of its own. */
		bool sp_ok = signal || new_sp > old_sp || (result->count == 1 && new_sp == old_sp);
		if (!sp_ok || !sp_unwind_space_find(s, next_pc)) {
			result->truncated = 1;
			return 0;
		}
		pcs[result->count++] = next_pc;
		cur = next;
		pc = next_pc;
		activation = signal;
	}
	result->truncated = 1; /* Out of room before the outermost frame. */
	return 0;
}
