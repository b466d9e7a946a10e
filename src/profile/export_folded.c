/* Folded stacks (flamegraph.pl / stackcollapse-perf conventions):
 *   procname[-PID][/TID];root_frame;...;leaf_frame COUNT
 * Kernel frames end in "_[k]"; Python frames read "qualname (file)" or,
 * with STACKPULSE_EXPORT_LINES, "qualname (file:line)". Names never hold ';'
 * or line breaks. Lines are sorted frame by frame and merged, so the output
 * is the same for the same profile. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/hash.h"
#include "profile/export_internal.h"

/* Appends @p s with ';' and control bytes replaced, so it is one frame. */
static int put_clean(sp_buf *b, const char *s)
{
	if (!s)
		return 0;
	size_t n = strlen(s);
	int rc = sp_buf_reserve(b, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ';')
			c = ':';
		else if (c < 0x20 || c == 0x7f)
			c = ' ';
		b->data[b->len++] = c;
	}
	return 0;
}

int sp_frame_name(const struct stackpulse_profile *p, uint32_t frame, uint32_t flags, sp_buf *b)
{
	if (frame >= p->nframes)
		return put_clean(b, "[unknown]");
	const struct stackpulse_profile_frame *fr = &p->frames[frame];
	const struct stackpulse_profile_func *fn = &p->funcs[fr->func];
	int rc = put_clean(b, sp_pstr(p, fn->name));
	char num[32];
	if (rc)
		return rc;
	if (fn->kind == STACKPULSE_FRAME_KERNEL)
		return put_clean(b, "_[k]");
	if (fn->kind == STACKPULSE_FRAME_PYTHON) {
		const char *file = sp_pstr(p, fn->file);
		if (!*file && !((flags & STACKPULSE_EXPORT_LINES) && fr->line))
			return 0;
		rc = put_clean(b, " (");
		if (!rc)
			rc = put_clean(b, *file ? file : "?");
		if (!rc && (flags & STACKPULSE_EXPORT_LINES) && fr->line) {
			snprintf(num, sizeof(num), ":%" PRIu32, fr->line);
			rc = put_clean(b, num);
		}
		if (!rc)
			rc = put_clean(b, ")");
		return rc;
	}
	if ((flags & STACKPULSE_EXPORT_LINES) && fr->line) {
		snprintf(num, sizeof(num), ":%" PRIu32, fr->line);
		rc = put_clean(b, num);
	}
	return rc;
}

/* Maps a byte to its sort rank: end < ';' < everything else. */
static int rank(const char *s, size_t len, size_t *i)
{
	while (*i < len && SP_IS_KIND_BYTE(s[*i]))
		(*i)++;
	if (*i >= len)
		return 0;
	unsigned char c = (unsigned char)s[(*i)++];
	return c == ';' ? 1 : (int)c + 2;
}

int sp_folded_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0, j = 0;
	for (;;) {
		int ra = rank(a, alen, &i), rb = rank(b, blen, &j);
		if (ra != rb)
			return ra < rb ? -1 : 1;
		if (ra == 0)
			return 0;
	}
}

static int line_cmp(const void *x, const void *y)
{
	const sp_folded_line *a = x, *b = y;
	return sp_folded_cmp(a->text, a->len, b->text, b->len);
}

void sp_folded_free(sp_folded *f)
{
	sp_buf_free(&f->text);
	sp_free(f->lines);
	memset(f, 0, sizeof(*f));
}

/* Appends the root label of thread @p t: name, -PID, /TID. */
static int put_label(const struct stackpulse_profile *p, uint32_t t, uint32_t flags, sp_buf *b)
{
	const struct stackpulse_profile_thread *th = t < p->nthreads ? &p->threads[t] : NULL;
	const struct stackpulse_profile_process *pr =
	        th && th->process < p->nprocesses ? &p->processes[th->process] : NULL;
	const char *name = (flags & STACKPULSE_EXPORT_THREAD_NAMES)
	                           ? (th ? sp_pstr(p, th->name) : "")
	                           : (pr ? sp_pstr(p, pr->name) : "");
	char num[40];
	int rc = sp_buf_u8(b, (uint8_t)SP_KIND_ROOT);
	if (!rc)
		rc = put_clean(b, *name ? name : "[unknown]");
	if (!rc && (flags & STACKPULSE_EXPORT_PID)) {
		snprintf(num, sizeof(num), "-%ld", pr ? (long)pr->pid : -1L);
		rc = put_clean(b, num);
	}
	if (!rc && (flags & STACKPULSE_EXPORT_TID)) {
		snprintf(num, sizeof(num), "/%ld", th ? (long)th->tid : -1L);
		rc = put_clean(b, num);
	}
	return rc;
}

/* Samples are grouped by whatever makes their root label differ. */
static uint32_t group_of(const struct stackpulse_profile *p, uint32_t t, uint32_t flags)
{
	if (flags & (STACKPULSE_EXPORT_TID | STACKPULSE_EXPORT_THREAD_NAMES))
		return t;
	const struct stackpulse_profile_thread *th = t < p->nthreads ? &p->threads[t] : NULL;
	if (!th || th->process >= p->nprocesses)
		return SP_NONE;
	if (flags & STACKPULSE_EXPORT_PID)
		return th->process;
	return p->processes[th->process].name; /* Same comm, same root. */
}

void sp_agg_free(sp_agg *a)
{
	sp_free(a->group);
	sp_free(a->node);
	sp_free(a->thread);
	sp_free(a->count);
	sp_itab_free(&a->tab);
}

int sp_agg_add(sp_agg *a, uint32_t group, uint32_t node, uint32_t thread, uint64_t w)
{
	int rc = sp_itab_reserve(&a->tab);
	if (rc)
		return rc;
	sp_itab_probe pr;
	sp_itab_probe_start(&a->tab, sp_hash_combine(sp_hash64(group), node), &pr);
	uint32_t c;
	while ((c = sp_itab_probe_next(&a->tab, &pr)) != SP_NONE) {
		if (a->group[c] == group && a->node[c] == node) {
			a->count[c] += w;
			return 0;
		}
	}
	if (a->n == a->cap) {
		uint32_t ncap = a->cap ? a->cap * 2 : 256;
		if (ncap < a->cap)
			return sp_error(STACKPULSE_ELIMIT, "too many folded stacks");
		void *g = sp_realloc_array(a->group, ncap, sizeof(uint32_t));
		if (g)
			a->group = g;
		void *n = g ? sp_realloc_array(a->node, ncap, sizeof(uint32_t)) : NULL;
		if (n)
			a->node = n;
		void *t = n ? sp_realloc_array(a->thread, ncap, sizeof(uint32_t)) : NULL;
		if (t)
			a->thread = t;
		void *k = t ? sp_realloc_array(a->count, ncap, sizeof(uint64_t)) : NULL;
		if (!k)
			return sp_error(-ENOMEM, "folded stacks table");
		a->count = k;
		a->cap = ncap;
	}
	a->group[a->n] = group;
	a->node[a->n] = node;
	a->thread[a->n] = thread;
	a->count[a->n] = w;
	sp_itab_insert(&a->tab, &pr, a->n++);
	return 0;
}

int sp_folded_build(const struct stackpulse_profile *p, uint32_t flags, sp_folded *out)
{
	memset(out, 0, sizeof(*out));
	sp_buf_init(&out->text);
	sp_agg a;
	memset(&a, 0, sizeof(a));
	uint32_t *path = NULL, cap_path = 0;
	size_t *offs = NULL;
	int rc = 0;
	for (uint64_t i = 0; i < p->nsamples && !rc; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		rc = sp_agg_add(&a, group_of(p, s->thread, flags), s->stack, s->thread, s->weight);
	}
	if (rc)
		goto done;
	offs = sp_calloc(a.n ? a.n : 1, sizeof(size_t));
	out->lines = sp_calloc(a.n ? a.n : 1, sizeof(*out->lines));
	if (!offs || !out->lines) {
		rc = sp_error(-ENOMEM, "folded lines");
		goto done;
	}
	for (uint32_t i = 0; i < a.n && !rc; i++) {
		/* Collect the path leaf to root, then write it root first. */
		uint32_t depth = 0;
		for (uint32_t n = a.node[i]; n != 0 && n < p->nstacks; n = p->stacks[n].parent) {
			if (depth == cap_path) {
				uint32_t nc = cap_path ? cap_path * 2 : 64;
				uint32_t *np = sp_realloc_array(path, nc, sizeof(uint32_t));
				if (!np) {
					rc = sp_error(-ENOMEM, "folded path");
					break;
				}
				path = np;
				cap_path = nc;
			}
			path[depth++] = p->stacks[n].frame;
			if (depth > p->nstacks)
				break; /* Parent < child always holds; never loop. */
		}
		if (rc)
			break;
		offs[i] = out->text.len;
		rc = put_label(p, a.thread[i], flags, &out->text);
		for (uint32_t d = depth; d > 0 && !rc; d--) {
			uint32_t f = path[d - 1];
			int kind = f < p->nframes ? (int)p->funcs[p->frames[f].func].kind : 0;
			if (kind == STACKPULSE_FRAME_NATIVE && p->frames[f].inline_depth > 0)
				kind = STACKPULSE_FRAME_INLINE; /* Coloured apart in the SVG. */
			rc = sp_buf_u8(&out->text, ';');
			if (!rc)
				rc = sp_buf_u8(&out->text, (uint8_t)SP_KIND_BYTE(kind));
			if (!rc)
				rc = sp_frame_name(p, f, flags, &out->text);
		}
		if (depth + 1 > out->max_depth)
			out->max_depth = depth + 1;
		if (!rc && out->text.len - offs[i] > UINT32_MAX)
			rc = sp_error(STACKPULSE_ELIMIT, "folded line too long");
		out->lines[i].len = (uint32_t)(out->text.len - offs[i]);
		out->lines[i].count = a.count[i];
		out->total += a.count[i];
	}
	if (rc)
		goto done;
	/* The text buffer is final: turn offsets into pointers, sort, merge. */
	for (uint32_t i = 0; i < a.n; i++)
		out->lines[i].text = (const char *)out->text.data + offs[i];
	qsort(out->lines, a.n, sizeof(*out->lines), line_cmp);
	size_t w = 0;
	for (size_t i = 0; i < a.n; i++) {
		if (w > 0 && line_cmp(&out->lines[w - 1], &out->lines[i]) == 0)
			out->lines[w - 1].count += out->lines[i].count;
		else
			out->lines[w++] = out->lines[i];
	}
	out->n = w;
done:
	sp_agg_free(&a);
	sp_free(path);
	sp_free(offs);
	if (rc)
		sp_folded_free(out);
	return rc;
}

int sp_export_folded(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                     sp_out *out)
{
	sp_folded f;
	int rc = sp_folded_build(p, o->flags, &f);
	if (rc)
		return rc;
	for (size_t i = 0; i < f.n && !rc; i++) {
		const char *s = f.lines[i].text;
		size_t len = f.lines[i].len, start = 0;
		/* Write runs between kind bytes. */
		for (size_t k = 0; k <= len && !rc; k++) {
			if (k == len || SP_IS_KIND_BYTE(s[k])) {
				if (k > start)
					rc = sp_out_write(out, s + start, k - start);
				start = k + 1;
			}
		}
		if (!rc)
			rc = sp_out_printf(out, " %" PRIu64 "\n", f.lines[i].count);
	}
	sp_folded_free(&f);
	return rc;
}
