#include "buf.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "error.h"

void sp_buf_init(sp_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->limit = 0;
}

void sp_buf_free(sp_buf *b)
{
	sp_free(b->data);
	sp_buf_init(b);
}

void sp_buf_reset(sp_buf *b)
{
	b->len = 0;
}

int sp_buf_reserve(sp_buf *b, size_t extra)
{
	size_t limit = b->limit ? b->limit : SIZE_MAX / 2;
	if (extra > limit || b->len > limit - extra)
		return sp_error(STACKPULSE_ELIMIT, "buffer would exceed %zu bytes", limit);
	size_t need = b->len + extra;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	if (cap > limit)
		cap = limit; /* Never allocate past what may be used. */
	while (cap < need)
		cap = cap > limit / 2 ? limit : cap * 2;
	uint8_t *grown = sp_realloc_array(b->data, cap, 1);
	if (!grown)
		return sp_error(-ENOMEM, "cannot grow buffer to %zu bytes", cap);
	b->data = grown;
	b->cap = cap;
	return 0;
}

int sp_buf_append(sp_buf *b, const void *p, size_t n)
{
	int rc = sp_buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int sp_buf_u8(sp_buf *b, uint8_t v)
{
	return sp_buf_append(b, &v, 1);
}

int sp_buf_le32(sp_buf *b, uint32_t v)
{
	uint8_t tmp[4];
	sp_put_le32(tmp, v);
	return sp_buf_append(b, tmp, sizeof(tmp));
}

int sp_buf_le64(sp_buf *b, uint64_t v)
{
	uint8_t tmp[8];
	sp_put_le64(tmp, v);
	return sp_buf_append(b, tmp, sizeof(tmp));
}

int sp_buf_varint(sp_buf *b, uint64_t v)
{
	uint8_t tmp[SP_VARINT_MAX];
	return sp_buf_append(b, tmp, sp_varint_put(tmp, v));
}

int sp_buf_svarint(sp_buf *b, int64_t v)
{
	return sp_buf_varint(b, sp_zigzag(v));
}

int sp_buf_blob(sp_buf *b, const void *p, size_t n)
{
	/* Catch size_t overflow of the worst-case prefix, so a failed blob never
	 * leaves its length behind. */
	if (n > SIZE_MAX - SP_VARINT_MAX)
		return sp_error(STACKPULSE_ELIMIT, "blob of %zu bytes is too large", n);
	int rc = sp_buf_reserve(b, n + SP_VARINT_MAX);
	if (rc)
		return rc;
	rc = sp_buf_varint(b, n);
	if (rc)
		return rc;
	return sp_buf_append(b, p, n);
}

int sp_buf_str(sp_buf *b, const char *s)
{
	return s ? sp_buf_blob(b, s, strlen(s)) : sp_buf_blob(b, "", 0);
}
