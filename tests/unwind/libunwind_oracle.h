/* libunwind as the differential oracle of src/unwind: the same snapshot
 * (sampled registers plus a copy of the user stack) is unwound with
 * libunwind's remote API, whose accessors read only the stack copy and the
 * mapped binaries' files, never the target. Used by
 * tests/unwind/test_unwind_oracle.c and fuzz/unwind_oracle.c; included as a
 * .c file, after perf_sampler.c. x86_64 and aarch64. */
#ifndef SP_TEST_LIBUNWIND_ORACLE_H
#define SP_TEST_LIBUNWIND_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#include "perf_sampler.h"
#include "unwind/unwind.h"

typedef struct lo_oracle lo_oracle;

/* An oracle for the executable mappings @p maps (ps_read_maps) of one
 * process; each file is opened now. Returns 0 or -errno. */
int lo_new(const ps_procmap *maps, int nmaps, lo_oracle **out);
void lo_free(lo_oracle *o);

/* Unwinds one snapshot as sp_unwind does (same arguments): pcs[0] is the
 * sampled IP, later entries return addresses. Sets *complete to 1 when
 * libunwind reached the outermost frame (unw_step returned 0, or a zero
 * return address, where sp_unwind stops too and which is not listed), 0
 * when it stopped on an error or ran out of room. Returns the number of
 * addresses. */
uint32_t lo_unwind(lo_oracle *o, const sp_regs *regs, const uint8_t *stack, size_t stack_len,
                   uint64_t stack_start, uint64_t *pcs, uint32_t max, int *complete);

/* The length of the common prefix of two address chains. */
uint32_t lo_common_prefix(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb);

#endif
