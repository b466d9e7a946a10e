/* A bounds-checked reader over untrusted bytes. Every getter checks what is
 * left before touching memory and reports malformed input through sp_error. */
#ifndef SP_COMMON_CURSOR_H
#define SP_COMMON_CURSOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_cursor {
	const uint8_t *p; /* Start of the readable range. */
	size_t len;       /* Bytes in the range. */
	size_t pos;       /* Bytes consumed. */
} sp_cursor;

static inline sp_cursor sp_cursor_make(const void *p, size_t len)
{
	sp_cursor c = { (const uint8_t *)p, len, 0 };
	return c;
}

static inline size_t sp_cursor_left(const sp_cursor *c)
{
	return c->len - c->pos;
}

/* Each returns 0 or STACKPULSE_ETRUNCATED / STACKPULSE_EFORMAT /
 * STACKPULSE_ELIMIT; @p what names the field in the error detail. On failure
 * the cursor does not move. */
int sp_cursor_u8(sp_cursor *c, uint8_t *v, const char *what);
int sp_cursor_le32(sp_cursor *c, uint32_t *v, const char *what);
int sp_cursor_le64(sp_cursor *c, uint64_t *v, const char *what);
int sp_cursor_varint(sp_cursor *c, uint64_t *v, const char *what);
/* A varint that must be <= @p max. */
int sp_cursor_varint_max(sp_cursor *c, uint64_t max, uint64_t *v, const char *what);
int sp_cursor_varint32(sp_cursor *c, uint32_t *v, const char *what);
int sp_cursor_svarint(sp_cursor *c, int64_t *v, const char *what);
/* Borrows @p n bytes. */
int sp_cursor_bytes(sp_cursor *c, size_t n, const uint8_t **out, const char *what);
/* A varint length (<= @p max_len) followed by that many bytes. */
int sp_cursor_blob(sp_cursor *c, size_t max_len, const uint8_t **out, size_t *len,
                   const char *what);

#endif
