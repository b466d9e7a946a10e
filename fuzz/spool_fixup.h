/* Shared by the spool harnesses: a copy of the input with every chunk and
 * footer checksum recomputed, so mutations reach the record decoder instead
 * of stopping at the CRC. Harnesses run each input both as is and fixed. */
#ifndef SP_FUZZ_SPOOL_FIXUP_H
#define SP_FUZZ_SPOOL_FIXUP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checksum.h"
#include "format/spool_format.h"

/* Returns a malloc'd copy with checksums fixed, or NULL when nothing
 * changed (or out of memory). */
static uint8_t *sp_fuzz_fix_checksums(const uint8_t *data, size_t size)
{
	if (size < SP_FILE_HEADER_LEN + SP_FOOTER_LEN)
		return NULL;
	uint8_t *copy = malloc(size);
	if (!copy)
		return NULL;
	memcpy(copy, data, size);
	int changed = 0;
	size_t off = SP_FILE_HEADER_LEN;
	while (size - off >= 4) {
		uint8_t *h = copy + off;
		uint32_t magic = sp_le32(h);
		if (magic == SP_FOOTER_MAGIC && size - off >= SP_FOOTER_LEN) {
			uint32_t crc = sp_crc32c(0, h, 28);
			changed |= crc != sp_le32(h + 28);
			sp_put_le32(h + 28, crc);
			break;
		}
		if (magic != SP_CHUNK_MAGIC || size - off < SP_CHUNK_HEADER_LEN)
			break;
		uint32_t stored = sp_le32(h + 12);
		if (stored > size - off - SP_CHUNK_HEADER_LEN)
			break;
		uint32_t crc = sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET);
		crc = sp_crc32c(crc, h + SP_CHUNK_HEADER_LEN, stored);
		changed |= crc != sp_le32(h + SP_CHUNK_CRC_OFFSET);
		sp_put_le32(h + SP_CHUNK_CRC_OFFSET, crc);
		off += SP_CHUNK_HEADER_LEN + (size_t)stored;
	}
	if (!changed) {
		free(copy);
		return NULL;
	}
	return copy;
}

#endif
