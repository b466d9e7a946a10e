/* The profile of an open spool, as `report` builds it and `record --rotate
 * --push` pushes each window: what it measures by default, whether there
 * is anything to show, how to say what it holds, and the build itself. */
#ifndef EXAMPLES_SPOOL_PROFILE_H
#define EXAMPLES_SPOOL_PROFILE_H

#include <inttypes.h>
#include <stdio.h>

#include "stackpulse.h"

/* 1 when the spool has something to show: an on-CPU sample or an off-CPU
 * interval (a process that slept the whole time has only intervals). */
static inline int spool_has_data(const struct stackpulse_spool_meta *m)
{
	return m->samples != 0 || m->offcpu_intervals != 0;
}

/* What the profile measures unless asked: wall-clock time (on- plus
 * off-CPU) for a spool recorded with off-CPU intervals, sample counts for
 * others. A spool of off-CPU intervals only reads the same as off-CPU
 * time. */
static inline enum stackpulse_time spool_default_time(const struct stackpulse_spool_meta *m)
{
	return m->off_cpu_method != STACKPULSE_OFFCPU_NONE || m->offcpu_intervals
	               ? STACKPULSE_TIME_WALL
	               : STACKPULSE_TIME_SAMPLES;
}

/* What @p p holds: "N samples", or "N samples, M off-CPU intervals" when
 * it counts off-CPU time. */
static inline const char *profile_holds(const stackpulse_profile *p, char *buf, size_t n)
{
	uint64_t on = stackpulse_profile_kept_count(p, 0),
	         off = stackpulse_profile_kept_count(p, 1);
	enum stackpulse_time t = stackpulse_profile_time(p);
	if (off || t == STACKPULSE_TIME_OFF || t == STACKPULSE_TIME_WALL)
		snprintf(buf, n, "%" PRIu64 " sample%s, %" PRIu64 " off-CPU interval%s", on,
		         on == 1 ? "" : "s", off, off == 1 ? "" : "s");
	else
		snprintf(buf, n, "%" PRIu64 " sample%s", on, on == 1 ? "" : "s");
	return buf;
}

/* Builds the profile of @p spool: symbolized (with raw module+offset
 * frames when no symbolizer can be made, which @p on_sym_error is told),
 * with @p po. Closes @p spool. */
static inline int spool_profile(stackpulse_spool *spool, const stackpulse_symbolizer_opts *so,
                                const stackpulse_profile_opts *po,
                                void (*on_sym_error)(const char *what, int rc),
                                stackpulse_profile **out)
{
	stackpulse_symbolizer *sym = NULL;
	int rc = stackpulse_symbolizer_new(spool, so, &sym);
	if (rc) {
		/* Still useful: frames then read module+offset. */
		on_sym_error("symbolizer (continuing with raw addresses)", rc);
		sym = NULL;
	}
	rc = stackpulse_profile_build(spool, sym, po, out);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	return rc;
}

#endif
