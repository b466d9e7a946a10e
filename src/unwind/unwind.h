/* Online unwinding: sampled registers plus a copy of the user stack become a
 * list of return addresses, using DWARF CFI (.eh_frame, .debug_frame) of
 * the mapped files, with a frame-pointer fallback.
 *
 * State is cached per binary (CFI tables, opened ELF) and per address space
 * (the mapping list); nothing is rebuilt per sample. One sp_unwinder serves
 * a whole recording; one sp_unwind_space per process address space. */
#ifndef SP_UNWIND_UNWIND_H
#define SP_UNWIND_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sampled user registers, in the order of the perf sample_regs_user mask
 * that sp_unwind_regs_mask() returns (lowest bit first). */
#define SP_UNWIND_MAX_REGS 40
typedef struct sp_regs {
	uint64_t abi;                       /* PERF_SAMPLE_REGS_ABI_*; 0: none. */
	uint64_t value[SP_UNWIND_MAX_REGS]; /* Values for the mask's bits. */
	uint32_t count;                     /* Number of values. */
	uint64_t unknown;                   /* Bit k: value[k] is not known (the
	                                     * walk treats it as unavailable). */
} sp_regs;

/* The perf_event_attr.sample_regs_user mask this unwinder needs on the
 * build's architecture (x86_64 or aarch64). */
uint64_t sp_unwind_regs_mask(void);

/* Registers of a thread of which only the stack pointer @p sp and the
 * program counter @p pc are known (a thread blocked in a system call, as
 * /proc/PID/task/TID/syscall shows it): every other register unknown. */
void sp_unwind_regs_sp_pc(sp_regs *r, uint64_t sp, uint64_t pc);

typedef struct sp_unwinder sp_unwinder;
typedef struct sp_unwind_space sp_unwind_space;

/* Creates the per-recording cache of binaries. Each binary opened stays
 * cached until sp_unwinder_free: its CFI sections (.eh_frame and
 * .eh_frame_hdr, read with pread, never mmap, so a truncated file cannot
 * SIGBUS us) plus up to 512 cached frame rules (~0.3 KiB each). Only a
 * binary with .debug_frame keeps a descriptor open. */
int sp_unwinder_new(sp_unwinder **out);
void sp_unwinder_free(sp_unwinder *u);

/* Creates an empty address space for process @p pid. Files are opened as
 * the target sees them: through /proc/PID/map_files/START-END when
 * possible, else /proc/PID/root/PATH. */
int sp_unwind_space_new(sp_unwinder *u, pid_t pid, sp_unwind_space **out);
/* A copy of @p parent's mappings for a forked child @p pid. */
int sp_unwind_space_fork(const sp_unwind_space *parent, pid_t pid, sp_unwind_space **out);
void sp_unwind_space_free(sp_unwind_space *s);
/* Drops every mapping (exec). */
void sp_unwind_space_clear(sp_unwind_space *s);

/* Adds an executable mapping [start, end) of @p path at file offset
 * @p pgoff. A new mapping replaces any it overlaps. Paths like "[vdso]" or
 * "//anon" are accepted and unwound by frame pointers only; "[vdso]" uses
 * our own vDSO's CFI when its size matches (same kernel). The file is
 * opened now (the target may exit soon): a known @p build_id skips the
 * open, and a file whose build-id differs from @p build_id is ignored.
 * A file that cannot be opened is not an error: its frames use frame
 * pointers. Returns 0, -EINVAL or -ENOMEM. */
int sp_unwind_space_map(sp_unwind_space *s, uint64_t start, uint64_t end, uint64_t pgoff,
                        const char *path, const uint8_t *build_id, uint32_t build_id_len);

/* What one unwind produced. */
typedef struct sp_unwind_result {
	uint32_t count;    /* Addresses written, leaf first. */
	int truncated;     /* 1 when the walk stopped before the outermost frame
	                 * (stack copy ran out, no CFI, bad step). */
	int used_fp;       /* 1 when any step used the frame-pointer fallback. */
	uint64_t stack_hi; /* Bytes of the copy the walk needed: the end of the
	                    * highest read it made or tried (may exceed the copy). */
} sp_unwind_result;

/* Unwinds one sample. @p stack holds @p stack_len valid bytes copied from
 * user address @p stack_start (the sampled stack pointer). Writes up to
 * @p max addresses to @p pcs: pcs[0] is the sampled IP; later entries are
 * return addresses (callers subtract 1 when looking up lines). Never
 * reads target memory outside the stack copy and the mapped files.
 * Every address after pcs[0] lies in a mapping of @p s, so pass only
 * executable mappings to sp_unwind_space_map. A sample without 64-bit
 * user registers (abi NONE or 32-bit) gives count 0 and truncated.
 * Returns 0, or -EINVAL for NULL arguments; bad input only truncates.
 * Not thread-safe: one thread uses an unwinder and its spaces. */
int sp_unwind(sp_unwind_space *s, const sp_regs *regs, const uint8_t *stack, size_t stack_len,
              uint64_t stack_start, uint64_t *pcs, uint32_t max, sp_unwind_result *result);

#endif
