/* Fuzzes the bounds-checked cursor and the varint codec of src/common: the
 * first byte of each step picks a getter, which must stay in bounds, and
 * every value read is re-encoded with sp_buf and must give back exactly the
 * bytes it came from (the encodings are canonical). CRC-32C must agree
 * between one pass and a split pass. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stackpulse.h"
#include "common/buf.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/cursor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_bytes(const sp_buf *b, const uint8_t *from, size_t n)
{
	if (b->len != n || (n && memcmp(b->data, from, n) != 0))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 0) {
		size_t cut = data[0] % size;
		if (sp_crc32c(sp_crc32c(0, data, cut), data + cut, size - cut) !=
		    sp_crc32c(0, data, size))
			__builtin_trap();
	}
	sp_cursor c = sp_cursor_make(data, size);
	sp_buf out;
	sp_buf_init(&out);
	out.limit = 1 << 16;
	uint8_t op;
	while (sp_cursor_u8(&c, &op, "op") == 0) {
		size_t start = c.pos, end;
		int rc;
		sp_buf_reset(&out);
		switch (op % 7) {
		case 0: {
			uint64_t v;
			if ((rc = sp_cursor_varint(&c, &v, "varint")) == 0)
				rc = sp_buf_varint(&out, v);
			break;
		}
		case 1: {
			int64_t v;
			if ((rc = sp_cursor_svarint(&c, &v, "svarint")) == 0)
				rc = sp_buf_svarint(&out, v);
			break;
		}
		case 2: {
			uint32_t v;
			if ((rc = sp_cursor_varint32(&c, &v, "varint32")) == 0)
				rc = sp_buf_varint(&out, v);
			break;
		}
		case 3: {
			uint32_t v;
			if ((rc = sp_cursor_le32(&c, &v, "le32")) == 0)
				rc = sp_buf_le32(&out, v);
			break;
		}
		case 4: {
			uint64_t v;
			if ((rc = sp_cursor_le64(&c, &v, "le64")) == 0)
				rc = sp_buf_le64(&out, v);
			break;
		}
		case 5: {
			const uint8_t *p;
			size_t n;
			if ((rc = sp_cursor_blob(&c, 4096, &p, &n, "blob")) == 0) {
				if (p < data || p + n > data + size)
					__builtin_trap();
				rc = sp_buf_blob(&out, p, n);
			}
			break;
		}
		default: {
			uint64_t v;
			if ((rc = sp_cursor_varint_max(&c, 200, &v, "small")) == 0)
				rc = sp_buf_varint(&out, v);
			break;
		}
		}
		end = c.pos;
		if (end > size || end < start)
			__builtin_trap();
		if (rc != 0) {
			if (end != start) /* Failed reads consume nothing. */
				__builtin_trap();
			break;
		}
		same_bytes(&out, data + start, end - start);
	}
	sp_buf_free(&out);
	return 0;
}
