/* Internal shape of a built profile, shared by the builder and exporters.
 *
 * Ownership: a stackpulse_profile owns every array and string below; nothing
 * points into the spool or the symbolizer once stackpulse_profile_build has
 * returned. Exporters only read it. */
#ifndef SP_PROFILE_INTERNAL_H
#define SP_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/htab.h"
#include "stackpulse.h"

#define SP_NONE UINT32_MAX

/* Module info kept for pprof mappings. */
struct sp_profile_module {
	uint32_t path;     /* String index. */
	uint32_t build_id; /* String index of lowercase hex, 0 when none. */
};

struct stackpulse_profile {
	char **strings; /* Owned NUL-terminated strings; strings[0] = "". */
	uint32_t nstrings, cap_strings;
	sp_htab string_tab;

	struct stackpulse_profile_func *funcs;
	uint32_t nfuncs, cap_funcs;
	sp_htab func_tab;

	struct stackpulse_profile_frame *frames;
	uint32_t nframes, cap_frames;
	sp_htab frame_tab;

	/* Prefix tree; node 0 is the root. Parents are always created before
	 * their children, so parent < child for every node but the root. */
	struct stackpulse_profile_stack *stacks;
	uint32_t nstacks, cap_stacks;
	sp_htab stack_tab;

	struct stackpulse_profile_sample *samples;
	uint64_t nsamples, cap_samples;
	uint64_t kept[2]; /* On-CPU samples, off-CPU intervals kept (merged or not). */

	struct stackpulse_profile_thread *threads;
	uint32_t nthreads;
	struct stackpulse_profile_process *processes;
	uint32_t nprocesses;

	struct sp_profile_module *modules;
	uint32_t nmodules;

	/* Recording facts the exporters print. */
	uint64_t start_wall_ns; /* Wall clock at recording start. */
	uint64_t start_mono_ns; /* Sample clock at recording start (0: unknown). */
	uint64_t first_ns;      /* Earliest kept sample time (perf clock). */
	uint64_t last_ns;       /* Latest kept sample time. */
	uint32_t frequency;     /* Requested Hz (0 when unknown). */
	uint32_t event;         /* String index of the event name. */
	uint32_t machine;       /* String index of uname -m. */
	uint32_t hostname;      /* String index. */
	uint32_t flags;         /* stackpulse_profile_flag bits used. */
	int view;
	enum stackpulse_time time; /* What sample values measure. */

	/* Per-function weights, computed on first use (profile_counts.c);
	 * accessed with atomics so concurrent readers may race to fill it. */
	struct sp_func_counts *counts;
};

/* A second pass over a spool's samples, for per-sample outputs that must
 * not hold one record per sample: sp_profile_build_stream builds the
 * merged profile (merge_ns STACKPULSE_MERGE_ALL, whatever @p opts say) and
 * keeps what translating a spool sample into it needs; then, per thread,
 * sp_sample_stream_start and sp_sample_stream_next give the records of
 * that thread an unmerged profile would hold, in time order (on-CPU
 * samples and off-CPU intervals each as the spool holds them). The stream
 * reads the spool and symbolizer the profile was built from: they must
 * outlive it. The profile is the caller's, to free after the stream. */
typedef struct sp_sample_stream sp_sample_stream;
int sp_profile_build_stream(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                            const stackpulse_profile_opts *opts, stackpulse_profile **out,
                            sp_sample_stream **stream);
int sp_sample_stream_start(sp_sample_stream *st, uint32_t thread);
/* 1 and *out, 0 at the end of the thread's records, or an error. */
int sp_sample_stream_next(sp_sample_stream *st, struct stackpulse_profile_sample *out);
void sp_sample_stream_free(sp_sample_stream *st);

/* Frees what profile_counts.c computed. */
void sp_profile_counts_free(struct stackpulse_profile *p);

/* Interns a string (NULL reads as ""); *out receives its index. */
int sp_profile_intern(struct stackpulse_profile *p, const char *s, uint32_t *out);
/* Interns a string of @p len bytes (not NUL-terminated). */
int sp_profile_intern_n(struct stackpulse_profile *p, const char *s, size_t len, uint32_t *out);

static inline const char *sp_pstr(const struct stackpulse_profile *p, uint32_t i)
{
	return i < p->nstrings ? p->strings[i] : "";
}

/* Nanoseconds per sample for pprof and Firefox (from the frequency). */
static inline uint64_t sp_profile_period_ns(const struct stackpulse_profile *p)
{
	return p->frequency ? 1000000000ull / p->frequency : 10000000ull;
}

/* Last path component of @p path. */
const char *sp_basename(const char *path);

#endif
