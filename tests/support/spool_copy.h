/* Re-encoding and comparing decoded spools, for the round-trip tests and
 * fuzz harnesses (test support: not part of the library). */
#ifndef SP_TEST_SPOOL_COPY_H
#define SP_TEST_SPOOL_COPY_H

#include <stddef.h>

#include "format/spool_reader.h"
#include "format/spool_writer.h"

/* Writes everything @p spool holds into the fresh writer @p w (nothing added
 * to it yet), in a canonical order, so equal spools encode to equal bytes.
 * Does not finish @p w. Returns 0 or the first error. */
int sp_spool_copy(const stackpulse_spool *spool, sp_writer *w);

/* Compares the contents of two spools (tables, events and every sample; not
 * the chunking or the truncated flag). Returns 1 when equal, 0 when not (with
 * the first difference in @p why), or a negative code when reading failed. */
int sp_spool_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why, size_t why_len);

#endif
