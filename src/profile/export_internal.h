/* Shared pieces of the exporters: a block-buffered output, text escaping,
 * and folded stack lines (used by the folded and SVG writers). */
#ifndef SP_PROFILE_EXPORT_INTERNAL_H
#define SP_PROFILE_EXPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "profile/profile_internal.h"

#define SP_OUT_BLOCK 65536

/* Buffers output and hands it to the caller's write function in blocks.
 * After the first error every call returns that error. */
typedef struct sp_out {
	stackpulse_write_fn fn;
	void *ctx;
	int err;
	size_t len;
	uint8_t buf[SP_OUT_BLOCK];
} sp_out;

int sp_out_write(sp_out *o, const void *p, size_t n);
int sp_out_str(sp_out *o, const char *s);
int sp_out_printf(sp_out *o, const char *fmt, ...) SP_PRINTF(2, 3);
int sp_out_flush(sp_out *o);
/* XML text/attribute escaping; invalid UTF-8 and control bytes become '?'. */
int sp_out_xml(sp_out *o, const char *s, size_t n);
/* A JSON string literal with quotes; invalid UTF-8 becomes U+FFFD. */
int sp_out_json(sp_out *o, const char *s);

/* Length of the valid UTF-8 sequence at @p s (1..4), or 0 when invalid. */
size_t sp_utf8_seq(const unsigned char *s, size_t left);

/* Folded lines carry the frame kind of each frame as one byte in front of
 * its name, so the SVG can colour frames. Kind bytes are 1..8 (kind + 1,
 * root label 8); names never contain bytes below 0x20. */
#define SP_KIND_BYTE(kind) ((char)(1 + (kind)))
#define SP_KIND_ROOT       ((char)8)
#define SP_IS_KIND_BYTE(c) ((unsigned char)(c) >= 1 && (unsigned char)(c) <= 8)

typedef struct sp_folded_line {
	const char *text; /* Frames root first, ';'-separated, with kind bytes. */
	uint32_t len;     /* Bytes of text. */
	uint64_t count;   /* Summed sample weight. */
} sp_folded_line;

typedef struct sp_folded {
	sp_buf text;           /* Owns the bytes the lines point into. */
	sp_folded_line *lines; /* Sorted frame by frame, duplicates merged. */
	size_t n;
	uint64_t total;     /* Sum of all counts. */
	uint32_t max_depth; /* Most frames in one line, root label included. */
} sp_folded;

int sp_folded_build(const struct stackpulse_profile *p, uint32_t flags, sp_folded *out);
void sp_folded_free(sp_folded *f);
/* Orders lines frame by frame, ignoring kind bytes (a shorter prefix first). */
int sp_folded_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Sums sample weight per (group, stack node); remembers one thread of each. */
typedef struct sp_agg {
	uint32_t *group, *node, *thread;
	uint64_t *count;
	uint32_t n, cap;
	sp_itab tab;
} sp_agg;
int sp_agg_add(sp_agg *a, uint32_t group, uint32_t node, uint32_t thread, uint64_t w);
void sp_agg_free(sp_agg *a);

/* Appends the display name of frame @p frame (folded conventions). */
int sp_frame_name(const struct stackpulse_profile *p, uint32_t frame, uint32_t flags, sp_buf *b);

int sp_export_folded(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                     sp_out *out);
int sp_export_svg(const struct stackpulse_profile *p, const stackpulse_export_opts *o, sp_out *out);
int sp_export_pprof(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                    sp_out *out);
int sp_export_otlp(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                   sp_out *out);
/* 0 when each of @p labels is `key=value` with a key of 1..255 bytes. */
int sp_export_check_labels(const char *const *labels, size_t n);
int sp_export_firefox(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                      sp_out *out);

#endif
