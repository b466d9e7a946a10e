/* The profile of an open spool, as `report` builds it and `record --rotate
 * --push` pushes each window: symbolized (with raw module+offset frames
 * when no symbolizer can be made, which @p on_sym_error is told), built
 * with @p po. Closes @p spool. */
#ifndef EXAMPLES_SPOOL_PROFILE_H
#define EXAMPLES_SPOOL_PROFILE_H

#include "stackpulse.h"

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
