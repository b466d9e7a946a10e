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
	uint64_t total; /* Bytes accepted so far. */
	uint64_t limit; /* Cap on total (ELIMIT past it). */
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

/* Frame kinds for the SVG colours: 1..8 (kind + 1, root label 8). */
#define SP_KIND_BYTE(kind) ((char)(1 + (kind)))
#define SP_KIND_ROOT       ((char)8)

/* Output caps (docs/exporters.md). Folded output is measured exactly before
 * the first byte is written; every export stops at its cap while writing. */
#define SP_EXPORT_MAX_BYTES (4ull << 30)
#define SP_SVG_MAX_BYTES    (256ull << 20)

/* stackpulse_export_spool writes Firefox from an unmerged profile (about
 * 40 bytes a sample: 10 MiB) up to this many samples and intervals, and
 * streams them from the spool (one pass per thread) past it. */
#define SP_FIREFOX_IN_MEMORY (256ull << 10)

/* A frame or root-label name as raw pieces: the folded cleaning (';' reads
 * ':', control bytes read ' ') applies on output and in comparisons, so a
 * name is never copied, however often it is printed. */
typedef struct sp_name {
	const char *s[5];
	size_t n[5];
	int k;
	char num[48]; /* ":LINE" or "-PID/TID"; a piece may point here. */
} sp_name;

/* The folded cleaning of one byte. */
static inline unsigned char sp_name_clean(unsigned char c)
{
	if (c == ';')
		return ':';
	return c < 0x20 || c == 0x7f ? ' ' : c;
}

/* Fills @p nm with frame @p frame's display name (folded conventions). */
void sp_name_frame(const struct stackpulse_profile *p, uint32_t frame, uint32_t flags, sp_name *nm);
/* Fills @p nm with the root label of thread @p t: name, -PID, /TID. */
void sp_name_label(const struct stackpulse_profile *p, uint32_t t, uint32_t flags, sp_name *nm);
size_t sp_name_len(const sp_name *nm);
/* Byte @p i of the cleaned name (i < sp_name_len). */
unsigned char sp_name_at(const sp_name *nm, size_t i);
/* Orders cleaned names bytewise, a prefix first. */
int sp_name_cmp(const sp_name *a, const sp_name *b);
/* Writes the cleaned name. */
int sp_out_name(sp_out *o, const sp_name *nm);

/* One merged folded line: a root label and a node of the canonical tree. */
typedef struct sp_folded_line {
	uint32_t thread; /* A thread with this line's root label. */
	uint32_t label;  /* Rank of the root label: equal labels, equal ranks. */
	uint32_t leaf;   /* Canonical node of the leaf (0: no frames). */
	uint64_t count;  /* Summed sample weight. */
} sp_folded_line;

/* The folded lines of a profile, sorted frame by frame and merged, without
 * their text: memory grows with the profile, never with depth x names.
 * Canonical nodes merge stack nodes whose paths print the same. */
typedef struct sp_folded {
	uint32_t *cparent; /* Canonical parent; node 0 is the root. */
	uint32_t *cframe;  /* A profile frame the node prints as. */
	uint32_t ncanon;
	sp_folded_line *lines;
	size_t n;
	uint64_t total;     /* Sum of all counts. */
	uint32_t max_depth; /* Most frames in one line, root label included. */
	uint64_t bytes;     /* Exact size of the folded text. */
} sp_folded;

int sp_folded_build(const struct stackpulse_profile *p, uint32_t flags, sp_folded *out);
void sp_folded_free(sp_folded *f);
/* Writes line @p i's canonical nodes root first into @p path (room for
 * max_depth); returns how many. */
uint32_t sp_folded_path(const sp_folded *f, size_t i, uint32_t *path);
/* The SVG kind byte of canonical node @p c. */
char sp_folded_kind(const struct stackpulse_profile *p, const sp_folded *f, uint32_t c);

/* Sums sample weight per (group, stack node); remembers one thread of each. */
typedef struct sp_agg {
	uint32_t *group, *node, *thread;
	uint64_t *count;
	uint32_t n, cap;
	sp_htab tab;
} sp_agg;
int sp_agg_add(sp_agg *a, uint32_t group, uint32_t node, uint32_t thread, uint64_t w);
void sp_agg_free(sp_agg *a);

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
/* With @p st (NULL: as sp_export_firefox), each thread's samples come from
 * the stream, @p p being the merged profile it was built with. */
int sp_export_firefox_stream(const struct stackpulse_profile *p, sp_sample_stream *st,
                             const stackpulse_export_opts *o, sp_out *out);
int sp_export_syscap(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                     sp_out *out);

#endif
