/* CRC-32C (Castagnoli) for chunk and table checksums. */
#ifndef SP_COMMON_CHECKSUM_H
#define SP_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32C over @p n bytes; start with crc = 0. Uses the CPU's
 * crc32 instruction where there is one (x86_64 with SSE4.2). */
uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n);

/* The same in portable C (slice-by-8 tables): what sp_crc32c computes
 * without the instruction. Exposed so that tests compare the two. */
uint32_t sp_crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
