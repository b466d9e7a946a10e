/* Error codes, messages and the per-thread last-error detail. */
#ifndef SP_COMMON_ERROR_H
#define SP_COMMON_ERROR_H

#include "stackpulse.h"

#if defined(__GNUC__) || defined(__clang__)
#define SP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SP_PRINTF(a, b)
#endif

/* Records @p code with a formatted detail for stackpulse_last_error() and
 * returns @p code, so callers can write `return sp_error(...)`. */
int sp_error(int code, const char *fmt, ...) SP_PRINTF(2, 3);

/* Prefixes the current detail with more context ("chunk 3: ...") and
 * returns @p code unchanged. */
int sp_error_context(int code, const char *fmt, ...) SP_PRINTF(2, 3);

/* Forgets the calling thread's last error. */
void sp_error_clear(void);

/* First statement of every public function (include/stackpulse.h's
 * conventions list the exceptions): the last error then always describes
 * the latest call. .ci/check-api-entry.py checks that none is missed. */
#define SP_API_ENTRY() sp_error_clear()

#endif
