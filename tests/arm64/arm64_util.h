/* Shared by the aarch64 guest test and its x86_64 host check: every sample
 * of a spool as one folded line, root first ("main;outer;middle;leaf_spin"),
 * kernel frames as "k:NAME", Python frames as "py:NAME" and vDSO frames as
 * "vdso:NAME", so one spool is judged the same way on both machines. */
#ifndef SP_TEST_ARM64_UTIL_H
#define SP_TEST_ARM64_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stackpulse.h"

#define A64_MAX_SAMPLES 20000
#define A64_LINE        1024

typedef struct a64_folded {
	char (*lines)[A64_LINE];
	pid_t *pids, *tids;
	size_t n;
} a64_folded;

typedef struct a64_walk {
	const char *names[128];
	enum stackpulse_frame_kind kinds[128];
	int vdso[128];
	uint32_t n;
} a64_walk;

static int a64_collect(const stackpulse_frame *f, void *ctx)
{
	a64_walk *w = ctx;
	if (w->n < 128) {
		const char *mod = stackpulse_frame_module(f);
		w->names[w->n] = stackpulse_frame_func_name(f);
		w->kinds[w->n] = stackpulse_frame_kind(f);
		w->vdso[w->n] = mod && strcmp(mod, "[vdso]") == 0;
		w->n++;
	}
	return 0;
}

/* Symbolizes every sample of @p path (with @p flags, e.g.
 * STACKPULSE_SYM_OFFLINE) into @p out. */
static inline void a64_fold(const char *path, uint32_t flags, a64_folded *out)
{
	memset(out, 0, sizeof(*out));
	out->lines = calloc(A64_MAX_SAMPLES, A64_LINE);
	out->pids = calloc(A64_MAX_SAMPLES, sizeof(pid_t));
	out->tids = calloc(A64_MAX_SAMPLES, sizeof(pid_t));
	REQUIRE(out->lines && out->pids && out->tids);
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &sp));
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = flags;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	while (out->n < A64_MAX_SAMPLES && stackpulse_sample_iter_next(it, &s) == 1) {
		a64_walk w = { 0 };
		CHECK_OK(stackpulse_symbolizer_for_each_frame(sym, s, a64_collect, &w));
		char *line = out->lines[out->n];
		size_t len = 0;
		for (uint32_t i = w.n; i-- > 0 && len + 1 < A64_LINE;) {
			const char *pre = w.kinds[i] == STACKPULSE_FRAME_KERNEL   ? "k:"
			                  : w.kinds[i] == STACKPULSE_FRAME_PYTHON ? "py:"
			                  : w.vdso[i]                             ? "vdso:"
			                                                          : "";
			int k = snprintf(line + len, A64_LINE - len, "%s%s%s", len ? ";" : "", pre,
			                 w.names[i]);
			if (k < 0)
				break;
			len += (size_t)k;
		}
		out->pids[out->n] = s->pid;
		out->tids[out->n] = s->tid;
		out->n++;
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
}

static inline void a64_free(a64_folded *f)
{
	free(f->lines);
	free(f->pids);
	free(f->tids);
	memset(f, 0, sizeof(*f));
}

/* Samples whose line contains @p needle. */
static inline size_t a64_count(const a64_folded *f, const char *needle)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n; i++)
		n += strstr(f->lines[i], needle) != NULL;
	return n;
}

/* Of the samples whose last user frame (before any kernel frames) is
 * @p leaf, how many end with @p chain (root first, ";"-joined, ending in
 * @p leaf); *in_leaf gets their number. */
static inline size_t a64_leaf(const a64_folded *f, const char *leaf, const char *chain,
                              size_t *in_leaf)
{
	size_t n = 0, good = 0, ll = strlen(leaf), cl = strlen(chain);
	for (size_t i = 0; i < f->n; i++) {
		const char *l = f->lines[i];
		const char *k = strstr(l, ";k:");
		size_t end = k ? (size_t)(k - l) : strlen(l);
		if (end < ll || strncmp(l + end - ll, leaf, ll) != 0 ||
		    (end > ll && l[end - ll - 1] != ';'))
			continue;
		n++;
		good += end >= cl && strncmp(l + end - cl, chain, cl) == 0 &&
		        (end == cl || l[end - cl - 1] == ';');
	}
	fprintf(stderr, "    %zu of %zu samples in %s end with %s\n", good, n, leaf, chain);
	*in_leaf = n;
	return good;
}

/* Prints the first @p max lines (for failures). */
static inline void a64_dump(const a64_folded *f, size_t max)
{
	for (size_t i = 0; i < f->n && i < max; i++)
		fprintf(stderr, "    | %s\n", f->lines[i]);
}

#endif
