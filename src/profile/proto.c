/* Protocol Buffers wire encoding (see proto.h). */
#include <string.h>

#include "profile/proto.h"

enum {
	WT_VARINT = 0,
	WT_I64 = 1,
	WT_LEN = 2
};

static int pb_key(sp_buf *b, uint32_t field, int wt)
{
	return sp_buf_varint(b, ((uint64_t)field << 3) | (uint64_t)wt);
}

int sp_pb_u64(sp_buf *b, uint32_t field, uint64_t v)
{
	if (!v)
		return 0;
	int rc = pb_key(b, field, WT_VARINT);
	return rc ? rc : sp_buf_varint(b, v);
}

int sp_pb_fixed64(sp_buf *b, uint32_t field, uint64_t v)
{
	if (!v)
		return 0;
	int rc = pb_key(b, field, WT_I64);
	return rc ? rc : sp_buf_le64(b, v);
}

int sp_pb_bytes(sp_buf *b, uint32_t field, const void *p, size_t n)
{
	int rc = pb_key(b, field, WT_LEN);
	return rc ? rc : sp_buf_blob(b, p, n);
}

int sp_pb_str(sp_buf *b, uint32_t field, const char *s)
{
	return sp_pb_bytes(b, field, s, s ? strlen(s) : 0);
}

int sp_pb_msg(sp_buf *b, uint32_t field, const sp_buf *sub)
{
	return sp_pb_bytes(b, field, sub->data, sub->len);
}
