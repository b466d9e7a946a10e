#include "cursor.h"

#include "bytes.h"
#include "error.h"

static int short_read(const sp_cursor *c, size_t need, const char *what)
{
	return sp_error(STACKPULSE_ETRUNCATED, "%s: need %zu bytes at offset %zu, %zu left", what,
	                need, c->pos, sp_cursor_left(c));
}

int sp_cursor_u8(sp_cursor *c, uint8_t *v, const char *what)
{
	if (sp_cursor_left(c) < 1)
		return short_read(c, 1, what);
	*v = c->p[c->pos++];
	return 0;
}

int sp_cursor_le32(sp_cursor *c, uint32_t *v, const char *what)
{
	if (sp_cursor_left(c) < 4)
		return short_read(c, 4, what);
	*v = sp_le32(c->p + c->pos);
	c->pos += 4;
	return 0;
}

int sp_cursor_le64(sp_cursor *c, uint64_t *v, const char *what)
{
	if (sp_cursor_left(c) < 8)
		return short_read(c, 8, what);
	*v = sp_le64(c->p + c->pos);
	c->pos += 8;
	return 0;
}

int sp_cursor_varint(sp_cursor *c, uint64_t *v, const char *what)
{
	/* Checked first: p may be NULL on an empty range, and NULL + 0 is UB. */
	int n = sp_cursor_left(c) ? sp_varint_get(c->p + c->pos, sp_cursor_left(c), v) : 0;
	if (n <= 0)
		*v = 0; /* Failed reads leave a defined value behind. */
	if (n == 0)
		return short_read(c, sp_cursor_left(c) + 1, what);
	if (n < 0)
		return sp_error(STACKPULSE_EFORMAT, "%s: bad varint at offset %zu", what, c->pos);
	c->pos += (size_t)n;
	return 0;
}

int sp_cursor_varint_max(sp_cursor *c, uint64_t max, uint64_t *v, const char *what)
{
	size_t at = c->pos;
	int rc = sp_cursor_varint(c, v, what);
	if (rc)
		return rc;
	if (*v > max) {
		c->pos = at; /* Failed reads never move the cursor. */
		return sp_error(STACKPULSE_ELIMIT, "%s: %llu exceeds %llu at offset %zu", what,
		                (unsigned long long)*v, (unsigned long long)max, at);
	}
	return 0;
}

int sp_cursor_varint32(sp_cursor *c, uint32_t *v, const char *what)
{
	uint64_t wide;
	int rc = sp_cursor_varint_max(c, UINT32_MAX, &wide, what);
	if (rc)
		return rc;
	*v = (uint32_t)wide;
	return 0;
}

int sp_cursor_svarint(sp_cursor *c, int64_t *v, const char *what)
{
	uint64_t raw;
	int rc = sp_cursor_varint(c, &raw, what);
	if (rc)
		return rc;
	*v = sp_unzigzag(raw);
	return 0;
}

int sp_cursor_bytes(sp_cursor *c, size_t n, const uint8_t **out, const char *what)
{
	if (sp_cursor_left(c) < n)
		return short_read(c, n, what);
	*out = n ? c->p + c->pos : c->p; /* No NULL + 0 on an empty range. */
	c->pos += n;
	return 0;
}

int sp_cursor_blob(sp_cursor *c, size_t max_len, const uint8_t **out, size_t *len, const char *what)
{
	size_t at = c->pos;
	uint64_t n;
	int rc = sp_cursor_varint_max(c, max_len, &n, what);
	if (rc)
		return rc;
	rc = sp_cursor_bytes(c, (size_t)n, out, what);
	if (rc) {
		c->pos = at;
		return rc;
	}
	*len = (size_t)n;
	return 0;
}
