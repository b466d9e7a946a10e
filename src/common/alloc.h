/* The one allocation policy: every size is checked, every failure returned.
 * All library allocations go through here so tests can inject failures. */
#ifndef SP_COMMON_ALLOC_H
#define SP_COMMON_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *sp_malloc(size_t size);
void *sp_calloc(size_t count, size_t size);
/* Reallocates to count*size bytes; NULL (and @p ptr untouched) on overflow or
 * failure. */
void *sp_realloc_array(void *ptr, size_t count, size_t size);
void sp_free(void *ptr);
/* Copies a NUL-terminated string; NULL on failure. */
char *sp_strdup(const char *s);
/* Copies @p len bytes and appends a NUL; NULL on failure. */
char *sp_strndup(const char *s, size_t len);

/* Fault injection for tests: after @p n more successful allocations on this
 * thread, every allocation fails. -1 disables. */
void sp_alloc_fail_after(long n);
/* Allocations made on this thread since the counter was last reset. */
uint64_t sp_alloc_count(void);
/* Bytes requested on this thread since the counter was last reset (a
 * realloc counts its new size): an upper bound of the peak. */
uint64_t sp_alloc_bytes(void);
void sp_alloc_reset_count(void);

#endif
