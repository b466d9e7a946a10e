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

#if defined(__GNUC__) || defined(__clang__)
#define SP_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define SP_TLS_INITIAL_EXEC
#endif

/* 1 while the calling thread has an error recorded. A small flag of the
 * initial-exec model, so testing it costs one load, where the error text
 * costs a __tls_get_addr call in a shared library. */
extern _Thread_local int sp_error_pending SP_TLS_INITIAL_EXEC;

/* First statement of every public function (include/stackpulse.h's
 * conventions list the exceptions): the last error then always describes
 * the latest call, at the cost of one test when there is none.
 * .ci/check-api-entry.py checks that none is missed. */
#define SP_API_ENTRY()                                                                             \
	do {                                                                                       \
		if (sp_error_pending)                                                              \
			sp_error_clear();                                                          \
	} while (0)

#endif
