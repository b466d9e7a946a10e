/* Protocol Buffers wire encoding over sp_buf, for the pprof and OTLP
 * exporters. Messages are built bottom-up in scratch buffers and appended
 * to their parent as length-delimited fields. */
#ifndef SP_PROFILE_PROTO_H
#define SP_PROFILE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Runs @p call only while no error has happened; keeps the first error in
 * a local `int rc`. */
#define PB(call)                                                                                   \
	do {                                                                                       \
		if (!rc)                                                                           \
			rc = (call);                                                               \
	} while (0)

/* A varint field; zero is the proto3 default and is omitted. */
int sp_pb_u64(sp_buf *b, uint32_t field, uint64_t v);
/* A fixed64 field (wire type 1); zero is omitted. */
int sp_pb_fixed64(sp_buf *b, uint32_t field, uint64_t v);
/* A length-delimited field, written even when empty. */
int sp_pb_bytes(sp_buf *b, uint32_t field, const void *p, size_t n);
/* sp_pb_bytes of a NUL-terminated string. */
int sp_pb_str(sp_buf *b, uint32_t field, const char *s);
/* A nested message: @p sub's bytes as a length-delimited field. */
int sp_pb_msg(sp_buf *b, uint32_t field, const sp_buf *sub);

#endif
