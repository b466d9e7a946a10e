/* Fuzz target: decode → re-encode → decode must give the same contents, and
 * re-encoding the result must give the same bytes (the encoding of decoded
 * contents is canonical). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spool_copy.h"
#include "spool_fixup.h"
#include "stackpulse.h"
#include "format/spool_reader.h"

#define ENSURE(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			__builtin_trap();                                                          \
	} while (0)

struct vec {
	uint8_t *data;
	size_t len, cap;
};

static int vec_write(void *ctx, const void *p, size_t n)
{
	struct vec *v = ctx;
	if (v->len + n > v->cap) {
		size_t cap = v->cap ? v->cap : 4096;
		while (cap < v->len + n)
			cap *= 2;
		uint8_t *d = realloc(v->data, cap);
		if (!d)
			return -12;
		v->data = d;
		v->cap = cap;
	}
	memcpy(v->data + v->len, p, n);
	v->len += n;
	return 0;
}

/* Encodes @p s; small chunks so chunk boundaries get exercised too. */
static void encode(const stackpulse_spool *s, struct vec *out, uint32_t chunk_bytes)
{
	sp_writer *w = NULL;
	sp_writer_opts opts = { 1, chunk_bytes };
	ENSURE(sp_writer_new(&opts, vec_write, out, &w) == 0);
	ENSURE(sp_spool_copy(s, w) == 0);
	ENSURE(sp_writer_finish(w) == 0);
	sp_writer_free(w);
}

static void roundtrip_one(const uint8_t *data, size_t size)
{
	stackpulse_spool *a = NULL, *b = NULL, *c = NULL;
	if (sp_spool_open_memory(data, size, 0, &a) != 0)
		return;
	/* The chunk size comes from the input, so splits vary. */
	uint32_t chunk_bytes = size ? 64u + (uint32_t)data[size - 1] * 16u : 4096u;
	struct vec eb = { 0 }, ec = { 0 };
	encode(a, &eb, chunk_bytes);
	ENSURE(sp_spool_open_memory(eb.data, eb.len, 0, &b) == 0);
	ENSURE(stackpulse_spool_meta(b)->truncated == 0);
	char why[256];
	ENSURE(sp_spool_equal(a, b, why, sizeof(why)) == 1);
	encode(b, &ec, chunk_bytes);
	ENSURE(eb.len == ec.len && memcmp(eb.data, ec.data, eb.len) == 0);
	ENSURE(sp_spool_open_memory(ec.data, ec.len, 0, &c) == 0);
	ENSURE(sp_spool_equal(b, c, why, sizeof(why)) == 1);
	stackpulse_spool_close(c);
	stackpulse_spool_close(b);
	stackpulse_spool_close(a);
	free(eb.data);
	free(ec.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	roundtrip_one(data, size);
	uint8_t *fixed = sp_fuzz_fix_checksums(data, size);
	if (fixed) {
		roundtrip_one(fixed, size);
		free(fixed);
	}
	return 0;
}
