/* Fuzz target: untrusted spool bytes -> decode -> profile (no symbolizer,
 * merged or not) -> every exporter into a counting sink, and Firefox and
 * folded straight from the spool (stackpulse_export_spool). Exports may fail (ELIMIT, a full
 * sink); they must not crash, and their memory must stay bounded by the
 * profile (fuzz-smoke runs this with -rss_limit_mb). A Sysprof capture is
 * also walked frame by frame as libsysprof-capture's reader does: each
 * frame 8-aligned, 24..65528 bytes, of a known type, and the frames end
 * where the output ends. Links the full library: the exporters live in
 * src/profile. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spool_fixup.h"
#include "stackpulse.h"

#define ENSURE(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			__builtin_trap();                                                          \
	} while (0)

/* The sink refuses past this, so one input cannot write for seconds. */
#define SINK_MAX (16u << 20)

typedef struct sink {
	uint64_t bytes;
} sink;

static int count(void *ctx, const void *data, size_t len)
{
	sink *s = ctx;
	ENSURE(data != NULL || len == 0);
	ENSURE(len <= 65536); /* Exporters hand over blocks, never whole files. */
	s->bytes += len;
	return s->bytes > SINK_MAX ? -28 /* -ENOSPC */ : 0;
}

/* Follows the frame lengths of a Sysprof capture across write blocks. */
typedef struct capture {
	uint64_t bytes, next; /* Bytes seen; offset of the next frame. */
	uint8_t head[24];     /* The frame header being read. */
	uint64_t frames;
} capture;

static int walk(void *ctx, const void *data, size_t len)
{
	capture *c = ctx;
	const uint8_t *b = data;
	ENSURE(data != NULL || len == 0);
	ENSURE(len <= 65536);
	for (size_t i = 0; i < len; i++) {
		uint64_t at = c->bytes + i;
		if (at < 256) {
			static const uint8_t magic[4] = { 0x5e, 0x97, 0xca, 0xfd };
			ENSURE(at >= 4 || b[i] == magic[at]);
			continue;
		}
		if (at < c->next || at - c->next >= 24)
			continue;
		c->head[at - c->next] = b[i];
		if (at - c->next == 23) {
			uint32_t flen = c->head[0] | (uint32_t)c->head[1] << 8;
			ENSURE(flen >= 24 && flen % 8 == 0 && flen <= 65528);
			ENSURE(c->head[16] >= 1 && c->head[16] <= 15); /* type */
			c->next += flen;
			c->frames++;
		}
	}
	c->bytes += len;
	return c->bytes > SINK_MAX ? -28 /* -ENOSPC */ : 0;
}

static void export_syscap(const stackpulse_profile *p)
{
	capture c = { 0, 256, { 0 }, 0 };
	int rc = stackpulse_export(p, STACKPULSE_EXPORT_SYSCAP, NULL, walk, &c);
	ENSURE(rc <= 0);
	/* A complete capture: the header and whole frames, nothing after. */
	ENSURE(rc != 0 || (c.bytes >= 256 && c.next == c.bytes));
}

static void export_one(const uint8_t *data, size_t size)
{
	stackpulse_spool *spool = NULL;
	stackpulse_spool_open_opts so = STACKPULSE_SPOOL_OPEN_OPTS;
	so.buf = data;
	so.len = size;
	if (stackpulse_spool_open(NULL, &so, &spool) != 0)
		return;
	/* The last byte picks export flags and the view, so every path runs. */
	uint8_t sel = size ? data[size - 1] : 0;
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.view = (sel >> 4) % 3;
	/* The byte before it picks the time view (off-CPU intervals in OFF and WALL). */
	po.time = (enum stackpulse_time)((size > 1 ? data[size - 2] : 0) & 3u);
	/* Its next bits pick merging: none, over all time, 1 ms or 1 ns windows. */
	static const uint64_t merges[4] = { 0, STACKPULSE_MERGE_ALL, 1000000u, 1u };
	po.merge_ns = merges[((size > 1 ? data[size - 2] : 0) >> 2) & 3u];
	stackpulse_profile *p = NULL;
	if (stackpulse_profile_build(spool, NULL, &po, &p) == 0) {
		for (int fmt = STACKPULSE_EXPORT_FOLDED; fmt <= STACKPULSE_EXPORT_SVG; fmt++) {
			stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
			eo.flags = sel & 0xfu;
			sink s = { 0 };
			int rc = stackpulse_export(p, (enum stackpulse_export_format)fmt, &eo,
			                           count, &s);
			ENSURE(rc <= 0);
			/* Only folded output may be empty (a profile without samples). */
			ENSURE(rc != 0 || s.bytes > 0 || fmt == STACKPULSE_EXPORT_FOLDED);
		}
		export_syscap(p);
		stackpulse_profile_free(p);
	}
	/* Straight from the spool: Firefox streams its samples, the others merge. */
	static const enum stackpulse_export_format from_spool[2] = { STACKPULSE_EXPORT_FIREFOX,
		                                                     STACKPULSE_EXPORT_FOLDED };
	for (int i = 0; i < 2; i++) {
		stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
		eo.flags = sel & 0xfu;
		sink s = { 0 };
		ENSURE(stackpulse_export_spool(spool, NULL, &po, from_spool[i], &eo, count, &s) <=
		       0);
	}
	stackpulse_spool_close(spool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	export_one(data, size);
	uint8_t *fixed = sp_fuzz_fix_checksums(data, size);
	if (fixed) {
		export_one(fixed, size);
		free(fixed);
	}
	return 0;
}
