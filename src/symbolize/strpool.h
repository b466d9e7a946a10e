/* Interned strings with stable addresses for the symbolizer's lifetime.
 * Equal strings share one copy, so memory grows with unique names only. */
#ifndef SP_SYMBOLIZE_STRPOOL_H
#define SP_SYMBOLIZE_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_strpool {
	struct sp_strchunk *chunks; /* Newest first. */
	const char **slots;         /* Open-addressing set; NULL is empty. */
	size_t cap, used;           /* cap is a power of two. */
	size_t bytes;               /* Bytes of string data held. */
} sp_strpool;

void sp_strpool_init(sp_strpool *p);
void sp_strpool_free(sp_strpool *p);
/* Returns the pooled copy of @p s (@p n bytes, no NUL needed), or NULL on
 * allocation failure (with the error set). */
const char *sp_strpool_intern_n(sp_strpool *p, const char *s, size_t n);
const char *sp_strpool_intern(sp_strpool *p, const char *s);

#endif
