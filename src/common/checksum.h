/* CRC-32C (Castagnoli) for chunk and table checksums. */
#ifndef SP_COMMON_CHECKSUM_H
#define SP_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32C over @p n bytes; start with crc = 0. */
uint32_t sp_crc32c(uint32_t crc, const void *p, size_t n);

#endif
