/* Firefox Profiler: a Gecko profile (meta.version 31), the JSON shape
 * Firefox itself hands to profiler.firefox.com, which upgrades and
 * processes it on import. See firefox-devtools/profiler
 * src/types/gecko-profile.ts and docs-developer/gecko-profile-format.md.
 *
 * One thread entry per profile thread with samples; each carries its own
 * stringTable, frameTable and stackTable holding only what its samples use.
 * Stack prefixes always precede the stacks that use them, because profile
 * nodes are numbered parent first and kept in that order. Frames carry
 * categories Other / Native / Python / Kernel. Frame names are presymbolicated
 * ("name (in module)" for native and kernel code, so the profiler groups
 * them by library).
 *
 * From a spool (sp_export_firefox_stream with a sample stream) the
 * profile is merged: its records give each thread's tables, and the
 * samples are read again from the spool, one pass per thread, and written
 * as they come, so memory follows the stacks, not the samples. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"

/* Most Gecko samples one profile sample becomes in a time profile (an
 * off-CPU interval of 100 s at 1 kHz). */
#define FF_MAX_REPS 100000u

enum {
	CAT_OTHER = 0,
	CAT_NATIVE = 1,
	CAT_PYTHON = 2,
	CAT_KERNEL = 3
};

static int category(int kind)
{
	switch (kind) {
	case STACKPULSE_FRAME_NATIVE:
	case STACKPULSE_FRAME_INLINE:
	case STACKPULSE_FRAME_JIT: return CAT_NATIVE;
	case STACKPULSE_FRAME_PYTHON: return CAT_PYTHON;
	case STACKPULSE_FRAME_KERNEL: return CAT_KERNEL;
	default: return CAT_OTHER;
	}
}

typedef struct ff {
	const struct stackpulse_profile *p;
	sp_out *out;
	uint32_t *node_map;        /* Profile node -> thread stack index. */
	uint32_t *frame_map;       /* Profile frame -> thread frame index. */
	uint32_t *nodes, nnodes;   /* Used nodes of the thread (sorted). */
	uint32_t *frames, nframes; /* Used frames in first-use order. */
	uint64_t *order;           /* Sample indexes by thread, then time. */
	sp_buf name;               /* Scratch for a frame's location string. */
} ff;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The profile being sorted, for the comparator (qsort has no context). */
static _Thread_local const struct stackpulse_profile *g_sort_profile;

static int cmp_sample_time(const void *a, const void *b)
{
	uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
	uint32_t hi = g_sort_profile->samples[i].thread, hj = g_sort_profile->samples[j].thread;
	if (hi != hj)
		return hi < hj ? -1 : 1;
	uint64_t ti = g_sort_profile->samples[i].time_ns, tj = g_sort_profile->samples[j].time_ns;
	if (ti != tj)
		return ti < tj ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* The location string of profile frame @p f. */
static int location_name(ff *x, uint32_t f)
{
	const struct stackpulse_profile *p = x->p;
	const struct stackpulse_profile_func *fn = &p->funcs[p->frames[f].func];
	sp_buf_reset(&x->name);
	const char *name = sp_pstr(p, fn->name);
	int rc = sp_buf_append(&x->name, name, strlen(name));
	const char *where = NULL;
	if (fn->kind == STACKPULSE_FRAME_PYTHON)
		where = sp_pstr(p, fn->file);
	else if (fn->module)
		where = sp_basename(sp_pstr(p, fn->module));
	if (!rc && where && *where) {
		rc = sp_buf_append(&x->name, " (in ", 5);
		if (!rc)
			rc = sp_buf_append(&x->name, where, strlen(where));
		if (!rc)
			rc = sp_buf_append(&x->name, ")", 1);
	}
	if (!rc)
		rc = sp_buf_u8(&x->name, 0);
	return rc;
}

/* Writes thread @p t, whose records are order[0..n) sorted by time: its
 * samples are those records, or with @p st the stream's samples of @p t. */
static int write_thread(ff *x, uint32_t t, const uint64_t *order, uint64_t n, sp_sample_stream *st,
                        int *first_thread)
{
	const struct stackpulse_profile *p = x->p;
	sp_out *o = x->out;

	/* Mark used nodes (walking up until a marked one) and number them. */
	x->nnodes = 0;
	for (uint64_t i = 0; i < n; i++) {
		for (uint32_t c = p->samples[order[i]].stack; c != 0 && x->node_map[c] == SP_NONE;
		     c = p->stacks[c].parent) {
			x->node_map[c] = 0;
			x->nodes[x->nnodes++] = c;
		}
	}
	qsort(x->nodes, x->nnodes, sizeof(uint32_t), cmp_u32);
	x->nframes = 0;
	for (uint32_t i = 0; i < x->nnodes; i++) {
		x->node_map[x->nodes[i]] = i;
		uint32_t f = p->stacks[x->nodes[i]].frame;
		if (x->frame_map[f] == SP_NONE) {
			x->frame_map[f] = x->nframes;
			x->frames[x->nframes++] = f;
		}
	}

	const struct stackpulse_profile_thread *th = &p->threads[t];
	const struct stackpulse_profile_process *pr =
	        th->process < p->nprocesses ? &p->processes[th->process] : NULL;
	long pid = pr ? (long)pr->pid : 0;
	sp_out_str(o, *first_thread ? "\n" : ",\n");
	*first_thread = 0;
	sp_out_str(o, "{\"name\":");
	sp_out_json(o, *sp_pstr(p, th->name) ? sp_pstr(p, th->name) : "thread");
	sp_out_str(o, ",\"processName\":");
	sp_out_json(o, pr ? sp_pstr(p, pr->name) : "");
	sp_out_printf(o,
	              ",\"processType\":\"default\",\"registerTime\":0,\"unregisterTime\":null,"
	              "\"isMainThread\":%s,\"pid\":%ld,\"tid\":%ld,\"pausedRanges\":[],",
	              (long)th->tid == pid ? "true" : "false", pid, (long)th->tid);
	sp_out_str(o,
	           "\"markers\":{\"schema\":{\"name\":0,\"startTime\":1,\"endTime\":2,\"phase\":3,"
	           "\"category\":4,\"data\":5},\"data\":[]},\n");

	/* String table: one location string per used frame, in frame order. */
	sp_out_str(o, "\"stringTable\":[");
	int rc = 0;
	for (uint32_t i = 0; i < x->nframes && !rc; i++) {
		rc = location_name(x, x->frames[i]);
		if (!rc) {
			if (i)
				sp_out_str(o, ",");
			rc = sp_out_json(o, (const char *)x->name.data);
		}
	}
	if (rc)
		return rc;
	sp_out_str(o, "],\n\"frameTable\":{\"schema\":{\"location\":0,\"relevantForJS\":1,"
	              "\"innerWindowID\":2,\"implementation\":3,\"line\":4,\"column\":5,"
	              "\"category\":6,\"subcategory\":7},\"data\":[");
	for (uint32_t i = 0; i < x->nframes; i++) {
		const struct stackpulse_profile_frame *fr = &p->frames[x->frames[i]];
		int cat = category((int)p->funcs[fr->func].kind);
		if (fr->line)
			sp_out_printf(o, "%s[%u,false,0,null,%u,null,%d,0]", i ? "," : "", i,
			              fr->line, cat);
		else
			sp_out_printf(o, "%s[%u,false,0,null,null,null,%d,0]", i ? "," : "", i,
			              cat);
	}
	sp_out_str(o, "]},\n\"stackTable\":{\"schema\":{\"prefix\":0,\"frame\":1},\"data\":[");
	for (uint32_t i = 0; i < x->nnodes; i++) {
		const struct stackpulse_profile_stack *s = &p->stacks[x->nodes[i]];
		uint32_t fi = x->frame_map[s->frame];
		if (s->parent == 0)
			sp_out_printf(o, "%s[null,%u]", i ? "," : "", fi);
		else
			sp_out_printf(o, "%s[%u,%u]", i ? "," : "", x->node_map[s->parent], fi);
	}
	sp_out_str(o, "]},\n\"samples\":{\"schema\":{\"stack\":0,\"time\":1,\"eventDelay\":2},"
	              "\"data\":[");
	int first = 1;
	uint64_t period = sp_profile_period_ns(p);
	struct stackpulse_profile_sample cur;
	if (st && (rc = sp_sample_stream_start(st, t)) != 0)
		return rc;
	for (uint64_t i = 0; !o->err; i++) {
		const struct stackpulse_profile_sample *s;
		if (st) {
			int k = sp_sample_stream_next(st, &cur);
			if (k <= 0) {
				rc = k;
				break;
			}
			s = &cur;
		} else {
			if (i >= n)
				break;
			s = &p->samples[order[i]];
		}
		double ms = (double)(s->time_ns - p->first_ns) / 1e6;
		/* Gecko samples have no weight column: repeat weighted ones
		 * (bounded). In a time profile a sample stands for its time: an
		 * off-CPU interval becomes one sample per period across it, so
		 * the call tree and the timeline both show the time. */
		uint64_t reps = s->weight ? (s->weight < 64 ? s->weight : 64) : 1;
		double step = 0;
		if (p->time != STACKPULSE_TIME_SAMPLES) {
			reps = (s->value + period / 2) / period;
			reps = reps < 1 ? 1 : reps > FF_MAX_REPS ? FF_MAX_REPS : reps;
			step = s->off_cpu ? (double)s->value / 1e6 / (double)reps : 0;
		}
		for (uint64_t r = 0; r < reps && !o->err; r++) {
			double at = ms + step * (double)r;
			if (s->stack == 0 || s->stack >= p->nstacks ||
			    x->node_map[s->stack] == SP_NONE)
				sp_out_printf(o, "%s[null,%.3f,0]", first ? "" : ",", at);
			else
				sp_out_printf(o, "%s[%u,%.3f,0]", first ? "" : ",",
				              x->node_map[s->stack], at);
			first = 0;
		}
	}
	if (!rc)
		rc = sp_out_str(o, "]}}");

	/* Reset the maps for the next thread. */
	for (uint32_t i = 0; i < x->nnodes; i++)
		x->node_map[x->nodes[i]] = SP_NONE;
	for (uint32_t i = 0; i < x->nframes; i++)
		x->frame_map[x->frames[i]] = SP_NONE;
	return rc;
}

int sp_export_firefox(const struct stackpulse_profile *p, const stackpulse_export_opts *opts,
                      sp_out *out)
{
	return sp_export_firefox_stream(p, NULL, opts, out);
}

int sp_export_firefox_stream(const struct stackpulse_profile *p, sp_sample_stream *st,
                             const stackpulse_export_opts *opts, sp_out *out)
{
	(void)opts;
	ff x;
	memset(&x, 0, sizeof(x));
	x.p = p;
	x.out = out;
	sp_buf_init(&x.name);
	x.node_map = sp_malloc((size_t)p->nstacks * sizeof(uint32_t));
	x.frame_map = sp_malloc((size_t)(p->nframes ? p->nframes : 1) * sizeof(uint32_t));
	x.nodes = sp_malloc((size_t)p->nstacks * sizeof(uint32_t));
	x.frames = sp_malloc((size_t)(p->nframes ? p->nframes : 1) * sizeof(uint32_t));
	x.order = sp_malloc((size_t)(p->nsamples ? p->nsamples : 1) * sizeof(uint64_t));
	int rc = 0;
	if (!x.node_map || !x.frame_map || !x.nodes || !x.frames || !x.order) {
		rc = sp_error(-ENOMEM, "firefox export tables");
		goto done;
	}
	memset(x.node_map, 0xff, (size_t)p->nstacks * sizeof(uint32_t));
	memset(x.frame_map, 0xff, (size_t)(p->nframes ? p->nframes : 1) * sizeof(uint32_t));

	double interval = p->frequency ? 1000.0 / p->frequency : 10.0;
	sp_out_str(out, "{\"meta\":{\"version\":31,\"product\":\"stackpulse\",\"processType\":0,");
	sp_out_printf(out, "\"interval\":%.6f,\"startTime\":%.3f,\"shutdownTime\":null,", interval,
	              (double)p->start_wall_ns / 1e6);
	sp_out_str(out, "\"stackwalk\":1,\"debug\":0,\"gcpoison\":0,\"asyncstack\":0,"
	                "\"presymbolicated\":true,\"platform\":\"Linux\",\"oscpu\":");
	sp_out_json(out, sp_pstr(p, p->machine));
	sp_out_str(out, ",\"misc\":");
	sp_out_json(out, sp_pstr(p, p->event));
	sp_out_str(out,
	           ",\"markerSchema\":[],\"categories\":["
	           "{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
	           "{\"name\":\"Native\",\"color\":\"blue\",\"subcategories\":[\"Other\"]},"
	           "{\"name\":\"Python\",\"color\":\"green\",\"subcategories\":[\"Other\"]},"
	           "{\"name\":\"Kernel\",\"color\":\"orange\",\"subcategories\":[\"Other\"]}]},\n");
	sp_out_str(out,
	           "\"libs\":[],\"pages\":[],\"pausedRanges\":[],\"processes\":[],\"threads\":[");
	for (uint64_t i = 0; i < p->nsamples; i++)
		x.order[i] = i;
	g_sort_profile = p;
	qsort(x.order, (size_t)p->nsamples, sizeof(uint64_t), cmp_sample_time);
	int first = 1;
	for (uint64_t i = 0; i < p->nsamples && !rc;) {
		uint32_t t = p->samples[x.order[i]].thread;
		uint64_t j = i;
		while (j < p->nsamples && p->samples[x.order[j]].thread == t)
			j++;
		if (t < p->nthreads)
			rc = write_thread(&x, t, x.order + i, j - i, st, &first);
		i = j;
	}
	if (!rc)
		rc = sp_out_str(out, "\n]}\n");
done:
	sp_free(x.node_map);
	sp_free(x.frame_map);
	sp_free(x.nodes);
	sp_free(x.frames);
	sp_free(x.order);
	sp_buf_free(&x.name);
	return rc;
}
