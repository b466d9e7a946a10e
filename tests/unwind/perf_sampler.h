/* Test helpers for tests/unwind and bench/: a minimal perf_event sampler of
 * one process (cpu-clock, user regs + stack copy), the target's mappings
 * from /proc, a symbol table per ELF file, and building and starting the
 * sampling target. Included as a .c file by its users. */
#ifndef SP_TEST_PERF_SAMPLER_H
#define SP_TEST_PERF_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

typedef struct ps_sample {
	uint32_t pid, tid;
	uint64_t ip;
	sp_regs regs;
	uint8_t *stack; /* dyn_size valid bytes copied at regs' SP. */
	uint64_t stack_len;
	uint64_t sp; /* Stack pointer (start address of @p stack). */
} ps_sample;

typedef struct ps_mmap {
	uint64_t start, len, pgoff;
	uint32_t prot;
	char path[4096];
} ps_mmap;

typedef struct ps_samples {
	ps_sample *v;
	size_t n, cap;
	ps_mmap *maps; /* MMAP2 records seen while sampling. */
	size_t nmaps;
	uint64_t lost;
} ps_samples;

/* Samples @p pid at @p freq Hz for @p ms milliseconds (longer, up to 8x,
 * until 200 samples arrived), copying @p stack_size bytes of user stack
 * per sample. Returns 0 or -errno. */
int ps_sample_process(pid_t pid, uint32_t freq, uint32_t stack_size, unsigned ms, ps_samples *out);
void ps_samples_free(ps_samples *s);

/* One line of /proc/PID/maps. */
typedef struct ps_procmap {
	uint64_t start, end, pgoff;
	char perms[5];
	char path[4096]; /* " (deleted)" kept as the kernel reports it. */
} ps_procmap;

/* Reads the executable mappings of @p pid. Returns their count or -errno. */
int ps_read_maps(pid_t pid, ps_procmap **out);
/* Feeds the executable file-backed and special mappings into @p s. */
int ps_feed_maps(sp_unwind_space *s, const ps_procmap *maps, int n);

/* Function symbols of one ELF file, for checking unwound frames. */
typedef struct ps_sym {
	uint64_t addr, size;
	char *name;
} ps_sym;
typedef struct ps_symtab {
	char path[4096];
	ps_sym *syms;
	size_t n;
	struct {
		uint64_t vaddr, offset, filesz;
	} loads[16];
	size_t nloads;
} ps_symtab;

int ps_symtab_load(ps_symtab *t, const char *path);
void ps_symtab_free(ps_symtab *t);
/* Name of the function holding link-time address @p addr, or NULL. */
const char *ps_symtab_lookup(const ps_symtab *t, uint64_t addr);

/* Names @p pc (a return address unless @p exact) using @p maps and the
 * tables in @p tabs (matched by path, " (deleted)" ignored). */
const char *ps_symbolize(const ps_procmap *maps, int nmaps, ps_symtab *tabs, size_t ntabs,
                         uint64_t pc, int exact);

/* Compiles tests/unwind/targets under @p srcroot into @p dir (gcc, -O2):
 * sptarget and libsptarget.so without frame pointers, sptarget_dbgframe
 * with its CFI only in .debug_frame, and (with clang) sptarget_fp with
 * frame pointers but no CFI. Returns 0 or -1. */
int ps_build_target(const char *srcroot, const char *dir);
/* The directory "@p tmpdir/target", where the first call builds the targets
 * (ps_build_target). NULL when they cannot be built. */
const char *ps_target_dir(const char *srcroot, const char *tmpdir);
/* Starts @p exe with @p args (NULL-terminated) and waits for "ready". */
pid_t ps_start_target(const char *exe, char *const args[]);
void ps_stop_target(pid_t pid);

#endif
