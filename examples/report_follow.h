/* report --follow: a live view of a spool that is still being written,
 * over the public tail reader (stackpulse_spool_tail_*). About once a
 * second it redraws the hottest functions (self and total, as the final
 * table counts them) or, with --folded, writes the folded stacks of the
 * samples that arrived in that second. Header-only, like report_top.h. */
#ifndef STACKPULSE_EXAMPLES_REPORT_FOLLOW_H
#define STACKPULSE_EXAMPLES_REPORT_FOLLOW_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stackpulse.h"

#define FOLLOW_MAX_FRAMES 1024
#define FOLLOW_ROWS       20

/* A function name and its weights in the current redraw. */
struct follow_fn {
	char *name;
	uint64_t self, total;
	uint64_t stamp; /* Last stack that counted it in total. */
};

struct follow {
	stackpulse_symbolizer *sym;
	uint64_t *all; /* Weight per stack id since the start. */
	uint64_t *win; /* Weight per stack id in the current window. */
	uint32_t nstacks;
	uint64_t samples, win_samples;
	struct follow_fn *fns;
	uint32_t nfns, fns_cap;
	uint32_t *slots; /* Function index + 1 per slot, 0 when empty. */
	uint32_t slots_cap;
	/* Frames of the stack being walked, leaf first (function indexes). */
	uint32_t frames[FOLLOW_MAX_FRAMES];
	uint32_t nframes;
	int oom;
};

static inline uint32_t follow_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* Index of function @p name, added when new; UINT32_MAX out of memory. */
static inline uint32_t follow_fn_get(struct follow *f, const char *name)
{
	if ((f->nfns + 1) * 2 > f->slots_cap) {
		uint32_t cap = f->slots_cap ? f->slots_cap * 2 : 256;
		uint32_t *s = calloc(cap, sizeof(*s));
		if (!s)
			return UINT32_MAX;
		for (uint32_t i = 0; i < f->nfns; i++) {
			uint32_t j = follow_hash(f->fns[i].name) & (cap - 1);
			while (s[j])
				j = (j + 1) & (cap - 1);
			s[j] = i + 1;
		}
		free(f->slots);
		f->slots = s;
		f->slots_cap = cap;
	}
	uint32_t j = follow_hash(name) & (f->slots_cap - 1);
	while (f->slots[j]) {
		if (strcmp(f->fns[f->slots[j] - 1].name, name) == 0)
			return f->slots[j] - 1;
		j = (j + 1) & (f->slots_cap - 1);
	}
	if (f->nfns == f->fns_cap) {
		uint32_t cap = f->fns_cap ? f->fns_cap * 2 : 256;
		struct follow_fn *n = realloc(f->fns, cap * sizeof(*n));
		if (!n)
			return UINT32_MAX;
		f->fns = n;
		f->fns_cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return UINT32_MAX;
	f->fns[f->nfns] = (struct follow_fn){ copy, 0, 0, UINT64_MAX };
	f->slots[j] = ++f->nfns;
	return f->nfns - 1;
}

static inline int follow_sample(const struct stackpulse_sample *s, void *ctx)
{
	struct follow *f = ctx;
	if (s->stack >= f->nstacks) {
		uint32_t n = f->nstacks ? f->nstacks : 1024;
		while (n <= s->stack)
			n *= 2;
		uint64_t *a = realloc(f->all, n * sizeof(*a));
		if (a)
			f->all = a;
		uint64_t *w = a ? realloc(f->win, n * sizeof(*w)) : NULL;
		if (!w)
			return -ENOMEM;
		f->win = w;
		memset(f->all + f->nstacks, 0, (n - f->nstacks) * sizeof(*a));
		memset(f->win + f->nstacks, 0, (n - f->nstacks) * sizeof(*w));
		f->nstacks = n;
	}
	f->all[s->stack] += s->weight;
	f->win[s->stack] += s->weight;
	f->samples++;
	f->win_samples++;
	return 0;
}

/* Names a frame as the final table does: unnamed code of a binary is
 * "BINARY [unresolved]". */
static inline int follow_frame(const stackpulse_frame *fr, void *ctx)
{
	struct follow *f = ctx;
	if (f->nframes == FOLLOW_MAX_FRAMES)
		return 0;
	const char *name = stackpulse_frame_func_name(fr);
	char buf[512];
	if (stackpulse_frame_kind(fr) == STACKPULSE_FRAME_KERNEL &&
	    (!name || strcmp(name, "[unknown]") == 0))
		name = "[kernel]"; /* Kernel symbols arrive at the end only. */
	if (!name || !*name) {
		const char *mod = stackpulse_frame_module(fr);
		const char *base = mod ? strrchr(mod, '/') : NULL;
		snprintf(buf, sizeof(buf), "%s [unresolved]",
		         base          ? base + 1
		         : mod && *mod ? mod
		                       : "[unknown]");
		name = buf;
	}
	uint32_t i = follow_fn_get(f, name);
	if (i == UINT32_MAX) {
		f->oom = 1;
		return -ENOMEM;
	}
	f->frames[f->nframes++] = i;
	return 0;
}

static inline int follow_walk(struct follow *f, uint32_t stack)
{
	f->nframes = 0;
	int rc = stackpulse_symbolizer_for_each_stack_frame(f->sym, stack, follow_frame, f);
	return f->oom ? -ENOMEM : rc < 0 && rc != STACKPULSE_ENOTFOUND ? rc : 0;
}

static const struct follow_fn *follow_sorting; /* qsort has no context. */

static inline int follow_cmp(const void *a, const void *b)
{
	const struct follow_fn *fns = follow_sorting;
	const struct follow_fn *x = &fns[*(const uint32_t *)a], *y = &fns[*(const uint32_t *)b];
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->name, y->name);
}

static inline double follow_pct(uint64_t part, uint64_t total)
{
	return total ? 100.0 * (double)part / (double)total : 0.0;
}

/* The hottest functions of every sample so far. */
static inline int follow_table(struct follow *f, FILE *out, int tty, double secs)
{
	for (uint32_t i = 0; i < f->nfns; i++)
		f->fns[i].self = f->fns[i].total = 0, f->fns[i].stamp = UINT64_MAX;
	uint64_t total = 0;
	for (uint32_t s = 0; s < f->nstacks; s++) {
		if (!f->all[s])
			continue;
		int rc = follow_walk(f, s);
		if (rc)
			return rc;
		total += f->all[s];
		if (f->nframes)
			f->fns[f->frames[0]].self += f->all[s];
		for (uint32_t k = 0; k < f->nframes; k++) {
			struct follow_fn *fn = &f->fns[f->frames[k]];
			if (fn->stamp != s) { /* Recursion counts once. */
				fn->stamp = s;
				fn->total += f->all[s];
			}
		}
	}
	uint32_t *order = malloc((f->nfns ? f->nfns : 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->nfns; i++)
		if (f->fns[i].total)
			order[n++] = i;
	follow_sorting = f->fns;
	qsort(order, n, sizeof(*order), follow_cmp);
	if (tty)
		fputs("\033[H\033[2J", out); /* Home, clear: redraw in place. */
	fprintf(out,
	        "%" PRIu64
	        " samples after %.1f s (following; the table is redrawn every second)\n\n",
	        f->samples, secs);
	fprintf(out, "%8s %7s %8s %7s  %s\n", "self", "self%", "total", "total%", "function");
	for (uint32_t i = 0; i < n && i < FOLLOW_ROWS; i++) {
		const struct follow_fn *fn = &f->fns[order[i]];
		fprintf(out, "%8" PRIu64 " %6.2f%% %8" PRIu64 " %6.2f%%  %s\n", fn->self,
		        follow_pct(fn->self, total), fn->total, follow_pct(fn->total, total),
		        fn->name);
	}
	if (!tty)
		fputc('\n', out);
	free(order);
	return fflush(out) ? -EIO : 0;
}

/* One folded line of a window. */
struct follow_line {
	char *text;
	uint64_t weight;
};

static inline int follow_line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct follow_line *)a)->text, ((const struct follow_line *)b)->text);
}

/* The folded stacks of the samples of the window that just closed (stacks
 * with the same functions merged), followed by an empty line; the window
 * starts over. */
static inline int follow_folded(struct follow *f, FILE *out)
{
	struct follow_line *lines = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (uint32_t s = 0; s < f->nstacks && !rc; s++) {
		if (!f->win[s])
			continue;
		if ((rc = follow_walk(f, s)))
			break;
		size_t len = 1;
		for (uint32_t k = 0; k < f->nframes; k++)
			len += strlen(f->fns[f->frames[k]].name) + 1;
		char *text = malloc(len);
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct follow_line *nl = realloc(lines, cap * sizeof(*nl));
			if (nl)
				lines = nl;
			else
				cap = n;
		}
		if (!text || n == cap) {
			free(text);
			rc = -ENOMEM;
			break;
		}
		char *p = text;
		*p = 0;
		for (uint32_t k = f->nframes; k-- > 0;) {
			size_t l = strlen(f->fns[f->frames[k]].name);
			memcpy(p, f->fns[f->frames[k]].name, l);
			p += l;
			if (k)
				*p++ = ';';
		}
		*p = 0;
		lines[n++] = (struct follow_line){ text, f->win[s] };
		f->win[s] = 0;
	}
	if (!rc && n)
		qsort(lines, n, sizeof(*lines), follow_line_cmp);
	for (size_t i = 0; i < n; i++) {
		uint64_t w = lines[i].weight;
		while (i + 1 < n && strcmp(lines[i].text, lines[i + 1].text) == 0)
			w += lines[++i].weight;
		if (!rc)
			fprintf(out, "%s %" PRIu64 "\n", lines[i].text, w);
	}
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	f->win_samples = 0;
	fputc('\n', out);
	return rc ? rc : fflush(out) ? -EIO : 0;
}

static inline double follow_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Follows @p path until the recording is complete or its recorder is
 * gone. Returns 0 (then the caller prints the final report), or a
 * negative code. A spool not there yet is waited for (a recorder names it
 * once recording has started), up to @p wait_s seconds. */
static inline int follow_run(const char *path, int folded, double wait_s,
                             enum stackpulse_tail_state *end)
{
	stackpulse_spool_tail *t = NULL;
	double t0 = follow_now();
	int rc;
	while ((rc = stackpulse_spool_tail_open(path, NULL, &t)) == -ENOENT &&
	       follow_now() - t0 < wait_s)
		usleep(100000);
	if (rc)
		return rc;
	struct follow f;
	memset(&f, 0, sizeof(f));
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	if ((rc = stackpulse_symbolizer_new(stackpulse_spool_tail_spool(t), &so, &f.sym))) {
		stackpulse_spool_tail_close(t);
		return rc;
	}
	int tty = !folded && isatty(STDOUT_FILENO);
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	double next = follow_now() + 1.0;
	t0 = follow_now();
	while (!rc) {
		rc = stackpulse_spool_tail_poll(t, follow_sample, &f, &st);
		if (rc || st != STACKPULSE_TAIL_GROWING)
			break;
		double now = follow_now();
		if (now >= next) {
			next = now + 1.0;
			rc = folded ? follow_folded(&f, stdout)
			            : follow_table(&f, stdout, tty, now - t0);
		}
		usleep(100000);
	}
	if (!rc && folded && f.win_samples)
		rc = follow_folded(&f, stdout); /* The last, partial window. */
	*end = st;
	stackpulse_symbolizer_free(f.sym);
	stackpulse_spool_tail_close(t);
	for (uint32_t i = 0; i < f.nfns; i++)
		free(f.fns[i].name);
	free(f.fns);
	free(f.slots);
	free(f.all);
	free(f.win);
	return rc;
}

#endif
