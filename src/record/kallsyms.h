/* Kernel symbols for the kernel addresses a recording saw, from
 * /proc/kallsyms (core kernel and modules). */
#ifndef SP_RECORD_KALLSYMS_H
#define SP_RECORD_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

#define SP_KALLSYMS_MAX_LINES 8000000u /* Far above any real kernel. */

/* Receives one symbol; @p module is "" for the core kernel. */
typedef int (*sp_ksym_fn)(void *ctx, uint64_t start, const char *name, const char *module);

/* Finds the text symbol containing each of the @p n sorted, distinct
 * addresses and calls @p fn once per symbol needed. Sets *zeroed when
 * every address in the file is 0 (kptr_restrict hides them), in which case
 * nothing is emitted. Returns 0, a negative errno or fn's nonzero value. */
int sp_kallsyms_resolve(const char *path, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx,
                        int *zeroed);

/* As sp_kallsyms_resolve, and also passes every text symbol of the file,
 * in file order, to @p each when it is not NULL (even when n is 0). */
int sp_kallsyms_scan(const char *path, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx,
                     int *zeroed, sp_ksym_fn each, void *each_ctx);

/* As sp_kallsyms_resolve on /proc/kallsyms, but answers from a table of the
 * core kernel text cached per boot in the symbol cache directory @p dir
 * (NULL: no cache) when every address lies inside it. A missing or invalid
 * table is rebuilt from the full read. */
int sp_kallsyms_resolve_cached(const char *dir, const uint64_t *addrs, size_t n, sp_ksym_fn fn,
                               void *ctx, int *zeroed);

#endif
