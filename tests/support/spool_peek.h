/* Read-only views of decoded spool records that only the tests and fuzz
 * harnesses look at (test support: not part of the library). */
#ifndef SP_TEST_SPOOL_PEEK_H
#define SP_TEST_SPOOL_PEEK_H

#include <stdint.h>

#include "stackpulse.h"

/* Kernel symbol @p index in address order: 0 or STACKPULSE_ENOTFOUND. */
int sp_spool_ksym_at(const stackpulse_spool *spool, uint32_t index, uint64_t *addr,
                     const char **name, const char **module);
/* The STATS records in order: their count, and record @p index. */
uint32_t sp_spool_stat_count(const stackpulse_spool *spool);
int sp_spool_stat_at(const stackpulse_spool *spool, uint32_t index, uint32_t *key, uint64_t *value);
/* 1 when the spool has a metadata record. */
int sp_spool_has_meta(const stackpulse_spool *spool);

#endif
