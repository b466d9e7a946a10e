/* A growable byte buffer for encoders. Appends never write past the
 * allocation; a failed append leaves the buffer unchanged. */
#ifndef SP_COMMON_BUF_H
#define SP_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_buf {
	uint8_t *data; /* Owned bytes, or NULL when empty. */
	size_t len;    /* Bytes in use. */
	size_t cap;    /* Bytes allocated. */
	size_t limit;  /* Largest len allowed (0: SIZE_MAX / 2). */
} sp_buf;

void sp_buf_init(sp_buf *b);
void sp_buf_free(sp_buf *b);
/* Forgets the contents, keeps the allocation. */
void sp_buf_reset(sp_buf *b);
/* Ensures room for @p extra more bytes: 0, -ENOMEM or STACKPULSE_ELIMIT. */
int sp_buf_reserve(sp_buf *b, size_t extra);
int sp_buf_append(sp_buf *b, const void *p, size_t n);
int sp_buf_u8(sp_buf *b, uint8_t v);
int sp_buf_le32(sp_buf *b, uint32_t v);
int sp_buf_le64(sp_buf *b, uint64_t v);
int sp_buf_varint(sp_buf *b, uint64_t v);
int sp_buf_svarint(sp_buf *b, int64_t v);
/* A varint length then the bytes. */
int sp_buf_blob(sp_buf *b, const void *p, size_t n);
/* sp_buf_blob of a NUL-terminated string (NULL writes ""). */
int sp_buf_str(sp_buf *b, const char *s);

#endif
