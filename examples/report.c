/* report: read a spool and print or export it.
 *
 *   report FILE [--follow] [--folded | --top N | --threads | --pprof OUT | --firefox OUT
 *               | --svg OUT | --syscap OUT | --otlp-file OUT | --push URL | --otlp URL]
 *               [--time=samples|cpu|off|wall]
 *               [--pid] [--tid] [--thread-names] [--lines]
 *               [--no-inline] [--python-only] [--addresses]
 *               [--app NAME] [--label KEY=VALUE]...
 *
 * Default: the hottest stacks and functions as a table with self and total
 * percentages. --time=cpu|off|wall weighs them by time instead of sample
 * counts (on-CPU, off-CPU, both); a spool recorded with off-CPU intervals
 * defaults to wall, others to samples. --folded prints folded stacks to stdout; --top N prints the
 * N hottest functions; --threads prints one row per thread; --pprof,
 * --firefox, --svg, --syscap (Sysprof) and --otlp-file write a file; --push sends the profile
 * to a Pyroscope server and --otlp to an OpenTelemetry collector
 * (docs/continuous.md). --pid, --tid and --thread-names split
 * stacks and functions by process or thread (the table, --top, --folded,
 * --svg and --pprof); --lines splits them by source line. Unnamed code of
 * a binary without symbols is summed as "BINARY [unresolved]" unless
 * --addresses is given. A spool with off-CPU intervals but no on-CPU
 * sample is shown as off-CPU time, with a note. Exit codes: 0 done, 1
 * failed (also for a spool without a readable sample or off-CPU
 * interval), 2 bad usage.
 *
 * --follow reads a spool that a recorder is still writing: the hottest
 * functions are redrawn about once a second until the recording ends,
 * then the final table (or --top) is printed; with --folded, the folded
 * stacks of each second are written, one window after another, each
 * ended by an empty line. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_follow.h"
#include "report_top.h"
#include "spool_profile.h"
#include "stackpulse.h"

enum mode {
	M_TABLE,
	M_FOLDED,
	M_TOP,
	M_THREADS,
	M_PPROF,
	M_FIREFOX,
	M_SVG,
	M_SYSCAP,
	M_OTLP_FILE,
	M_PUSH_PYROSCOPE,
	M_PUSH_OTLP
};

#define UNRESOLVED_TAG " [unresolved]"
#define MAX_LABELS     32

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: report FILE [--follow] [--folded | --top N | --threads | --pprof OUT | "
	        "--firefox OUT "
	        "| --svg OUT\n"
	        "                   | --syscap OUT | --otlp-file OUT | --push URL | --otlp URL]\n"
	        "                   [--pid] [--tid] [--thread-names] [--lines] [--no-inline]\n"
	        "                   [--python-only] [--addresses] [--strict] [--app NAME]\n"
	        "                   [--label K=V]... [--time=samples|cpu|off|wall]\n"
	        "  (default)       hottest stacks and functions, with self and total %%\n"
	        "  --follow        live view of a spool still being written: the table\n"
	        "                  (or --folded windows) every second, then the final one\n"
	        "  --folded        folded stacks (flamegraph.pl input) on stdout\n"
	        "  --top N         the N hottest functions\n"
	        "  --threads       one row per thread: samples, share, hottest function\n"
	        "  --pprof OUT     gzip'd profile.proto for `go tool pprof`\n"
	        "  --firefox OUT   JSON for https://profiler.firefox.com\n"
	        "  --svg OUT       interactive SVG flame graph\n"
	        "  --syscap OUT    Sysprof capture (samples, off-CPU marks) for `sysprof OUT`\n"
	        "  --otlp-file OUT OTLP profiles request (protobuf) in a file\n"
	        "  --push URL      send to a Pyroscope server (URL/ingest)\n"
	        "  --otlp URL      send to an OTLP/HTTP collector (URL/v1development/profiles)\n"
	        "  --app NAME      application name for --push/--otlp/--otlp-file\n"
	        "  --label K=V     a label for --push/--otlp/--otlp-file (repeatable)\n"
	        "  --time=WHAT     weigh by samples (count), or by time: cpu, off (off-CPU)\n"
	        "                  or wall (both); default wall for a spool recorded with\n"
	        "                  --off-cpu, else samples; off when it has no on-CPU\n"
	        "                  sample. --folded prints microseconds\n"
	        "  --pid, --tid    split by process (name-PID) / thread (name/TID)\n"
	        "  --thread-names  split by thread name instead of process name\n"
	        "  --lines         split functions by source line (name:line)\n"
	        "  --no-inline     merge inlined functions into their callers\n"
	        "  --python-only   keep only Python frames\n"
	        "  --addresses     list unnamed code per address, not per binary\n"
	        "  --strict        refuse a spool that was cut short or is damaged (exit 1)\n"
	        "                  instead of reading the chunks before the cut\n");
}

/* Prints "report: WHAT: ERROR (DETAIL)", saying each thing once: the
 * detail's own leading "WHAT: " is dropped; a detail that names WHAT
 * itself (a path) replaces "WHAT: ERROR", keeping ERROR only when it adds
 * to it; for -EINVAL the detail replaces the generic "invalid argument". */
static void fail(const char *what, int rc)
{
	const char *detail = stackpulse_last_error(), *err = stackpulse_strerror(rc);
	size_t wl = strlen(what);
	if (detail && strncmp(detail, what, wl) == 0 && detail[wl] == ':' && detail[wl + 1] == ' ')
		detail += wl + 2;
	if (!detail || !*detail) {
		fprintf(stderr, "report: %s: %s\n", what, err);
		return;
	}
	int add_err = rc != -EINVAL && !strstr(detail, err);
	if (strstr(detail, what))
		fprintf(stderr, "report: %s%s%s%s\n", detail, add_err ? " (" : "",
		        add_err ? err : "", add_err ? ")" : "");
	else if (add_err)
		fprintf(stderr, "report: %s: %s (%s)\n", what, err, detail);
	else
		fprintf(stderr, "report: %s: %s\n", what, detail);
}

static int write_stdout(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	return fwrite(data, 1, len, stdout) == len ? 0 : -EIO;
}

static double pct(uint64_t part, uint64_t total)
{
	return total ? 100.0 * (double)part / (double)total : 0.0;
}

/* Set once the profile is built: values are nanoseconds. */
static int g_timed;

/* A sample value as printed: a count, or milliseconds of time. */
static const char *amount(uint64_t v, char *buf, size_t n)
{
	if (g_timed)
		snprintf(buf, n, "%.1fms", (double)v / 1e6);
	else
		snprintf(buf, n, "%" PRIu64, v);
	return buf;
}

static const char *kind_tag(int kind)
{
	switch (kind) {
	case STACKPULSE_FRAME_KERNEL: return " [k]";
	case STACKPULSE_FRAME_PYTHON: return " [py]";
	default: return "";
	}
}

/* Thread groups for --pid/--tid/--thread-names: threads whose root label
 * (as in --folded: name[-PID][/TID]) is the same share a group. */
struct groups {
	uint32_t *of_thread; /* Group per profile thread. */
	char **label;        /* Per group. */
	uint32_t n;
};

static void groups_free(struct groups *g)
{
	for (uint32_t i = 0; g->label && i < g->n; i++)
		free(g->label[i]);
	free(g->label);
	free(g->of_thread);
	memset(g, 0, sizeof(*g));
}

struct labelled {
	char *label;
	uint32_t thread;
};

static int cmp_labelled(const void *a, const void *b)
{
	const struct labelled *x = a, *y = b;
	int c = strcmp(x->label, y->label);
	return c ? c : (x->thread > y->thread) - (x->thread < y->thread);
}

static int groups_build(const stackpulse_profile *p, uint32_t flags, struct groups *g)
{
	memset(g, 0, sizeof(*g));
	uint32_t nt = stackpulse_profile_thread_count(p);
	struct labelled *l = calloc(nt ? nt : 1, sizeof(*l));
	g->of_thread = calloc(nt ? nt : 1, sizeof(uint32_t));
	g->label = calloc(nt ? nt : 1, sizeof(char *));
	int rc = -1;
	if (!l || !g->of_thread || !g->label)
		goto out;
	for (uint32_t t = 0; t < nt; t++) {
		const struct stackpulse_profile_thread *th = stackpulse_profile_thread(p, t);
		const struct stackpulse_profile_process *pr =
		        th ? stackpulse_profile_process(p, th->process) : NULL;
		const char *name = (flags & STACKPULSE_EXPORT_THREAD_NAMES)
		                           ? (th ? stackpulse_profile_string(p, th->name) : NULL)
		                           : (pr ? stackpulse_profile_string(p, pr->name) : NULL);
		char buf[512], num[48];
		snprintf(buf, sizeof(buf), "%s", name && *name ? name : "[unknown]");
		if (flags & STACKPULSE_EXPORT_PID) {
			snprintf(num, sizeof(num), "-%ld", pr ? (long)pr->pid : -1L);
			strncat(buf, num, sizeof(buf) - strlen(buf) - 1);
		}
		if (flags & STACKPULSE_EXPORT_TID) {
			snprintf(num, sizeof(num), "/%ld", th ? (long)th->tid : -1L);
			strncat(buf, num, sizeof(buf) - strlen(buf) - 1);
		}
		l[t].label = strdup(buf);
		l[t].thread = t;
		if (!l[t].label)
			goto out;
	}
	qsort(l, nt, sizeof(*l), cmp_labelled);
	for (uint32_t i = 0; i < nt; i++) {
		if (i == 0 || strcmp(l[i].label, g->label[g->n - 1]) != 0) {
			g->label[g->n++] = l[i].label;
			l[i].label = NULL;
		}
		g->of_thread[l[i].thread] = g->n - 1;
	}
	rc = 0;
out:
	for (uint32_t t = 0; l && t < nt; t++)
		free(l[t].label);
	free(l);
	if (rc)
		groups_free(g);
	return rc;
}

/* "name:line" when @p line is known and lines are asked for. */
static void print_name(const stackpulse_profile *p, uint32_t name, uint32_t line, int kind)
{
	printf("%s", stackpulse_profile_string(p, name));
	if (line)
		printf(":%" PRIu32, line);
	printf("%s", kind_tag(kind));
}

static void print_functions(const stackpulse_profile *p, const struct sp_top *top, size_t limit,
                            const struct groups *g)
{
	printf("%8s %7s %8s %7s  %s%s\n", "self", "self%", "total", "total%",
	       g->n ? "thread/process                  " : "", "function");
	for (size_t i = 0; i < top->n && i < limit; i++) {
		const struct sp_top_row *r = &top->rows[i];
		char a[32], b[32];
		printf("%8s %6.2f%% %8s %6.2f%%  ", amount(r->self, a, sizeof(a)),
		       pct(r->self, top->total), amount(r->total, b, sizeof(b)),
		       pct(r->total, top->total));
		if (g->n)
			printf("%-31s ", r->group < g->n ? g->label[r->group] : "?");
		print_name(p, r->name, r->line, r->kind);
		printf("\n");
	}
}

static int cmp_weight_desc(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b; /* {weight, path} pairs */
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

#define LABEL_NODE UINT32_MAX /* Func of a path node that is a group's root label. */

/* The hottest distinct stacks, leaf first. Stacks are compared by function
 * names (and lines with @p lines), under their group's root label when
 * @p g has groups. Paths are entries of a map (parent path + 1, name,
 * line); entry data d is the function (LABEL_NODE for a label) and x the
 * weight. */
static int print_stacks(const stackpulse_profile *p, uint64_t total, size_t limit,
                        const struct groups *g, int lines)
{
	struct sp_tmap paths = { 0 }, memo = { 0 }; /* memo: (group, node) -> path + 1. */
	uint32_t nstacks = stackpulse_profile_stack_count(p);
	uint32_t nthreads = stackpulse_profile_thread_count(p);
	uint32_t *chain = calloc(nstacks ? nstacks : 1, sizeof(uint32_t));
	uint64_t *pairs = NULL;
	int rc = -1;
	if (!chain)
		goto out;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		uint32_t grp = g->n && s->thread < nthreads ? g->of_thread[s->thread] : 0;
		uint32_t path, at; /* Path + 1, starting at the group's root. */
		int added;
		if (sp_tmap_get(&paths, 0, grp, 0, &at, &added) != 0)
			goto out;
		paths.v[at].d = LABEL_NODE;
		paths.v[at].e = g->n == 0; /* Without groups the root has no label. */
		path = at + 1;
		/* Walk up to a node whose path is known, then intern downward. */
		uint32_t depth = 0, node = s->stack < nstacks ? s->stack : 0;
		while (node != 0 && depth < nstacks) {
			if (sp_tmap_get(&memo, grp, node, 0, &at, &added) != 0)
				goto out;
			if (!added) {
				path = memo.v[at].d;
				break;
			}
			chain[depth++] = node;
			const struct stackpulse_profile_stack *st =
			        stackpulse_profile_stack(p, node);
			node = st ? st->parent : 0;
		}
		while (depth > 0) {
			node = chain[--depth];
			const struct stackpulse_profile_stack *st =
			        stackpulse_profile_stack(p, node);
			const struct stackpulse_profile_frame *fr =
			        st ? stackpulse_profile_frame(p, st->frame) : NULL;
			const struct stackpulse_profile_func *fn =
			        fr ? stackpulse_profile_func(p, fr->func) : NULL;
			if (!fn)
				break;
			if (sp_tmap_get(&paths, path, fn->name, lines ? fr->line : 0, &at, &added))
				goto out;
			if (added)
				paths.v[at].d = fr->func;
			path = at + 1;
			if (sp_tmap_get(&memo, grp, node, 0, &at, NULL) != 0)
				goto out;
			memo.v[at].d = path;
		}
		paths.v[path - 1].x += s->value;
	}
	pairs = calloc(2 * ((size_t)paths.n + 1), sizeof(uint64_t));
	if (!pairs)
		goto out;
	size_t k = 0;
	for (uint32_t i = 0; i < paths.n; i++)
		if (paths.v[i].x) {
			pairs[2 * k] = paths.v[i].x;
			pairs[2 * k + 1] = i;
			k++;
		}
	qsort(pairs, k, 2 * sizeof(uint64_t), cmp_weight_desc);
	for (size_t i = 0; i < k && i < limit; i++) {
		char a[32];
		printf("%6.2f%% (%s%s)\n", pct(pairs[2 * i], total),
		       amount(pairs[2 * i], a, sizeof(a)), g_timed ? "" : " samples");
		const struct sp_tmap_entry *e = &paths.v[pairs[2 * i + 1]];
		if (e->d == LABEL_NODE)
			printf("    [no frames]\n");
		for (int depth = 0;; depth++) {
			if (e->d == LABEL_NODE) {
				if (!e->e)
					printf("    [%s]\n", e->b < g->n ? g->label[e->b] : "?");
				break;
			}
			if (depth == 24) {
				printf("    ...\n");
				break;
			}
			const struct stackpulse_profile_func *fn = stackpulse_profile_func(p, e->d);
			const char *file = fn ? stackpulse_profile_string(p, fn->file) : NULL;
			printf("    %s%s", fn ? stackpulse_profile_string(p, fn->name) : "?",
			       fn ? kind_tag((int)fn->kind) : "");
			if (file && *file && e->c)
				printf("  (%s:%" PRIu32 ")", file, e->c);
			else if (file && *file)
				printf("  (%s)", file);
			else if (e->c)
				printf("  (line %" PRIu32 ")", e->c);
			printf("\n");
			if (e->a == 0)
				break;
			e = &paths.v[e->a - 1];
		}
	}
	rc = 0;
out:
	sp_tmap_free(&paths);
	sp_tmap_free(&memo);
	free(chain);
	free(pairs);
	return rc;
}

/* --threads: samples per thread, with each thread's hottest function. */
static int print_threads(const stackpulse_profile *p, uint32_t top_flags)
{
	uint32_t nt = stackpulse_profile_thread_count(p);
	uint32_t *ident = calloc(nt ? nt : 1, sizeof(uint32_t));
	uint64_t *w = calloc(nt ? nt : 1, sizeof(uint64_t));
	size_t *hot = calloc(nt ? nt : 1, sizeof(size_t));
	uint32_t *order = calloc(nt ? nt : 1, sizeof(uint32_t));
	struct sp_top top = { 0 };
	int rc = -1;
	if (!ident || !w || !hot || !order)
		goto out;
	for (uint32_t t = 0; t < nt; t++) {
		ident[t] = t;
		hot[t] = SIZE_MAX;
	}
	if (sp_top_compute_ex(p, ident, top_flags, &top) != 0)
		goto out;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		if (s->thread < nt)
			w[s->thread] += s->value;
	}
	for (size_t i = 0; i < top.n; i++) /* Sorted by self: the first is the hottest. */
		if (top.rows[i].group < nt && hot[top.rows[i].group] == SIZE_MAX &&
		    top.rows[i].self)
			hot[top.rows[i].group] = i;
	/* Heaviest thread first; insertion sort keeps ties in thread order. */
	uint32_t n = 0;
	for (uint32_t t = 0; t < nt; t++) {
		if (!w[t])
			continue;
		uint32_t j = n++;
		while (j > 0 && w[order[j - 1]] < w[t]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = t;
	}
	printf("%8s %7s %8s %8s  %-16s %-16s %s\n", g_timed ? "time" : "samples", "share", "pid",
	       "tid", "process", "thread", "hottest function (self%)");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t = order[i];
		const struct stackpulse_profile_thread *th = stackpulse_profile_thread(p, t);
		const struct stackpulse_profile_process *pr =
		        th ? stackpulse_profile_process(p, th->process) : NULL;
		char a[32];
		printf("%8s %6.2f%% %8ld %8ld  %-16s %-16s ", amount(w[t], a, sizeof(a)),
		       pct(w[t], top.total), pr ? (long)pr->pid : -1L, th ? (long)th->tid : -1L,
		       pr ? stackpulse_profile_string(p, pr->name) : "?",
		       th ? stackpulse_profile_string(p, th->name) : "?");
		if (hot[t] != SIZE_MAX) {
			const struct sp_top_row *r = &top.rows[hot[t]];
			print_name(p, r->name, r->line, r->kind);
			printf(" (%.2f%%)", pct(r->self, w[t]));
		} else {
			printf("[no frames]");
		}
		printf("\n");
	}
	rc = 0;
out:
	sp_top_free(&top);
	free(ident);
	free(w);
	free(hot);
	free(order);
	return rc;
}

/* Says once how to get names for binaries whose code was summed as
 * "BINARY [unresolved]". */
static void unresolved_hint(FILE *f, const stackpulse_profile *p, const struct sp_top *top)
{
	char names[512] = "";
	uint64_t self = 0;
	int count = 0;
	for (size_t i = 0; i < top->n; i++) {
		const char *name = stackpulse_profile_string(p, top->rows[i].name);
		size_t len = name ? strlen(name) : 0, tl = strlen(UNRESOLVED_TAG);
		if (len <= tl || strcmp(name + len - tl, UNRESOLVED_TAG) != 0)
			continue;
		self += top->rows[i].self;
		if (name[0] == '[')
			continue; /* [vdso] and the like: no debug file to install. */
		char one[128];
		snprintf(one, sizeof(one), "%.*s", (int)(len - tl > 100 ? 100 : len - tl), name);
		if (strstr(names, one))
			continue; /* Already named (another line or group). */
		if (count++ < 4)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			         count > 1 ? ", " : "", one);
	}
	if (!count)
		return; /* Only unnamed code of pseudo-modules: nothing to advise. */
	/* Off-CPU stacks end in named system-call wrappers: unnamed code is
	 * then only on the way there, and a 0.00% share would mislead. */
	if (pct(self, top->total) >= 0.005)
		fprintf(f, "\nnote: %.2f%% of samples are in code without symbols in %s%s.\n",
		        pct(self, top->total), names, count > 4 ? " and others" : "");
	else
		fprintf(f, "\nnote: stacks pass through code without symbols in %s%s.\n", names,
		        count > 4 ? " and others" : "");
	fprintf(f, "  For names, install the debug symbols (Debian: the -dbgsym or -dbg package;\n"
	           "  Fedora: debuginfo-install), point STACKPULSE_DEBUG_DIRS at a directory of\n"
	           "  debug files, or set DEBUGINFOD_URLS; --addresses lists the raw addresses.\n");
}

/* Why a spool has no sample (nor off-CPU interval) to report: the open's
 * own words. */
static void no_samples(const char *path, const struct stackpulse_spool_meta *m)
{
	if (m->damaged)
		fprintf(stderr, "report: %s: no readable sample: %s\n", path, m->damage);
	else if (m->truncated)
		fprintf(stderr,
		        "report: %s: no readable sample: the file was cut short before its "
		        "first complete chunk (the recorder stopped early or the copy is "
		        "incomplete)\n",
		        path);
	else if (m->off_cpu_method != STACKPULSE_OFFCPU_NONE)
		fprintf(stderr,
		        "report: %s: the recording holds no samples and no off-CPU intervals\n",
		        path);
	else
		fprintf(stderr, "report: %s: the recording holds no samples\n", path);
}

/* Nanoseconds from the first sample or interval start to the last sample
 * or interval end: the span of an off-CPU profile, which the spool's
 * duration (first to last on-CPU sample) leaves out. */
static uint64_t span_ns(const stackpulse_profile *p)
{
	uint64_t first = UINT64_MAX, last = 0;
	int ns = stackpulse_profile_time(p) != STACKPULSE_TIME_SAMPLES;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		uint64_t end = s->time_ns;
		if (s->off_cpu && ns)
			end = s->value > UINT64_MAX - end ? UINT64_MAX : end + s->value;
		if (s->time_ns < first)
			first = s->time_ns;
		if (end > last)
			last = end;
	}
	return last > first ? last - first : 0;
}

/* Rejects flag combinations that would change nothing. */
static int check_combination(enum mode mode, uint32_t export_flags)
{
	const uint32_t split =
	        STACKPULSE_EXPORT_PID | STACKPULSE_EXPORT_TID | STACKPULSE_EXPORT_THREAD_NAMES;
	const char *why = NULL;
	if (mode == M_THREADS && (export_flags & split))
		why = "--threads lists every process and thread already; --pid, --tid and "
		      "--thread-names have no meaning with it";
	else if (mode == M_FIREFOX && (export_flags & (split | STACKPULSE_EXPORT_LINES)))
		why = "--firefox keeps threads and lines apart by itself; --pid, --tid, "
		      "--thread-names and --lines have no meaning with it";
	else if (mode == M_SYSCAP && (export_flags & (split | STACKPULSE_EXPORT_LINES)))
		why = "--syscap keeps threads apart by itself and Sysprof shows no lines; --pid, "
		      "--tid, --thread-names and --lines have no meaning with it";
	else if (mode == M_PPROF && (export_flags & STACKPULSE_EXPORT_LINES))
		why = "--pprof always carries lines (see `go tool pprof -lines`); --lines has no "
		      "meaning with it";
	if (!why)
		return 0;
	fprintf(stderr, "report: %s\n", why);
	return -1;
}

/* --firefox: one entry per sample, written as the samples are read again
 * from the spool (stackpulse_export_spool_to_path), so that memory does
 * not grow with them. Says what failed; 0 or an error. */
static int write_firefox(const char *spool_path, const stackpulse_symbolizer_opts *so,
                         const stackpulse_profile_opts *po, const stackpulse_export_opts *eo,
                         const char *out_path)
{
	stackpulse_spool *spool = NULL;
	int rc = stackpulse_spool_open(spool_path, NULL, &spool);
	if (rc) {
		fail(spool_path, rc);
		return rc;
	}
	stackpulse_symbolizer *sym = NULL;
	if (stackpulse_symbolizer_new(spool, so, &sym) != 0)
		sym = NULL; /* Said when the profile was built. */
	rc = stackpulse_export_spool_to_path(spool, sym, po, STACKPULSE_EXPORT_FIREFOX, eo,
	                                     out_path);
	if (rc)
		fail(out_path, rc);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	return rc;
}

/* The line a file output ends with: where, and what the profile holds. */
static void print_wrote(const char *out_path, const stackpulse_profile *prof)
{
	char what[96];
	printf("wrote %s (%s)\n", out_path, profile_holds(prof, what, sizeof(what)));
}

int main(int argc, char **argv)
{
	const char *spool_path = NULL, *out_path = NULL;
	enum mode mode = M_TABLE;
	int modes = 0, python_only = 0, addresses = 0, follow = 0, strict = 0;
	long top_n = 20;
	uint32_t export_flags = 0, profile_flags = 0;
	int time_given = 0;
	enum stackpulse_time time_view = STACKPULSE_TIME_SAMPLES;
	const char *app = NULL, *labels[MAX_LABELS];
	size_t nlabels = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int push_opt = strcmp(a, "--push") == 0 || strcmp(a, "--otlp") == 0 ||
		               strcmp(a, "--otlp-file") == 0 || strcmp(a, "--app") == 0 ||
		               strcmp(a, "--label") == 0;
		if (push_opt && i + 1 >= argc) {
			fprintf(stderr, "report: %s needs an argument\n", a);
			return 2;
		}
		if (strcmp(a, "--app") == 0) {
			app = argv[++i];
		} else if (strcmp(a, "--label") == 0) {
			if (nlabels == MAX_LABELS || !strchr(argv[i + 1], '=')) {
				fprintf(stderr,
				        "report: --label wants KEY=VALUE (at most %d), not '%s'\n",
				        MAX_LABELS, argv[i + 1]);
				return 2;
			}
			labels[nlabels++] = argv[++i];
		} else if (push_opt) {
			out_path = argv[++i];
			mode = strcmp(a, "--push") == 0   ? M_PUSH_PYROSCOPE
			       : strcmp(a, "--otlp") == 0 ? M_PUSH_OTLP
			                                  : M_OTLP_FILE;
			modes++;
		} else if (strcmp(a, "--folded") == 0 || strcmp(a, "--threads") == 0) {
			mode = a[2] == 'f' ? M_FOLDED : M_THREADS;
			modes++;
		} else if (strcmp(a, "--top") == 0 || strcmp(a, "--pprof") == 0 ||
		           strcmp(a, "--firefox") == 0 || strcmp(a, "--svg") == 0 ||
		           strcmp(a, "--syscap") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "report: %s needs an argument\n", a);
				return 2;
			}
			const char *v = argv[++i];
			modes++;
			if (strcmp(a, "--top") == 0) {
				char *end;
				errno = 0;
				top_n = strtol(v, &end, 10);
				if (errno || end == v || *end || top_n <= 0 || top_n > INT_MAX) {
					fprintf(stderr,
					        "report: --top wants a positive count, not '%s'\n",
					        v);
					return 2;
				}
				mode = M_TOP;
			} else {
				out_path = v;
				mode = a[2] == 'p'                  ? M_PPROF
				       : a[2] == 'f'                ? M_FIREFOX
				       : strcmp(a, "--syscap") == 0 ? M_SYSCAP
				                                    : M_SVG;
			}
		} else if (strcmp(a, "--pid") == 0) {
			export_flags |= STACKPULSE_EXPORT_PID;
		} else if (strcmp(a, "--tid") == 0) {
			export_flags |= STACKPULSE_EXPORT_TID;
		} else if (strcmp(a, "--thread-names") == 0) {
			export_flags |= STACKPULSE_EXPORT_THREAD_NAMES;
		} else if (strcmp(a, "--no-inline") == 0) {
			profile_flags |= STACKPULSE_PROFILE_MERGE_INLINE;
		} else if (strcmp(a, "--lines") == 0) {
			export_flags |= STACKPULSE_EXPORT_LINES;
		} else if (strncmp(a, "--time=", 7) == 0) {
			static const char *const names[] = { "samples", "cpu", "off", "wall" };
			time_given = 0;
			for (int k = 0; k < 4 && !time_given; k++)
				if (strcmp(a + 7, names[k]) == 0) {
					time_view = (enum stackpulse_time)k;
					time_given = 1;
				}
			if (!time_given) {
				fprintf(stderr,
				        "report: --time wants samples, cpu, off or wall, not "
				        "'%s'\n",
				        a + 7);
				return 2;
			}
		} else if (strcmp(a, "--follow") == 0) {
			follow = 1;
		} else if (strcmp(a, "--python-only") == 0) {
			python_only = 1;
		} else if (strcmp(a, "--addresses") == 0) {
			addresses = 1;
		} else if (strcmp(a, "--strict") == 0) {
			strict = 1;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "report: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else if (!spool_path) {
			spool_path = a;
		} else {
			fprintf(stderr, "report: only one FILE, got '%s' and '%s'\n", spool_path,
			        a);
			return 2;
		}
	}
	if (!spool_path) {
		usage(stderr);
		return 2;
	}
	if (modes > 1) {
		fprintf(stderr, "report: choose one of --folded, --top, --threads, --pprof, "
		                "--firefox, --svg, --syscap, --otlp-file, --push, --otlp\n");
		return 2;
	}
	if ((app || nlabels) && mode != M_PUSH_PYROSCOPE && mode != M_PUSH_OTLP &&
	    mode != M_OTLP_FILE) {
		fprintf(stderr,
		        "report: --app and --label go with --push, --otlp or --otlp-file\n");
		return 2;
	}
	if (check_combination(mode, export_flags) != 0)
		return 2;
	if (follow && time_given && time_view != STACKPULSE_TIME_SAMPLES) {
		fprintf(stderr, "report: --follow counts samples; --time goes without it\n");
		return 2;
	}
	if (follow && strict) {
		fprintf(stderr,
		        "report: --strict reads a finished spool; --follow a growing one\n");
		return 2;
	}
	if (follow && (mode != M_TABLE && mode != M_TOP && mode != M_FOLDED)) {
		fprintf(stderr, "report: --follow goes with the table, --top or --folded\n");
		return 2;
	}
	if (follow) {
		enum stackpulse_tail_state end = STACKPULSE_TAIL_GROWING;
		int frc = follow_run(spool_path, mode == M_FOLDED, 30.0, &end);
		if (frc) {
			fail(spool_path, frc);
			return 1;
		}
		if (mode == M_FOLDED)
			return end == STACKPULSE_TAIL_COMPLETE ? 0 : 1;
		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout);
		/* The final table: the whole spool, as without --follow. */
	}
	if (!addresses)
		profile_flags |= STACKPULSE_PROFILE_GROUP_UNRESOLVED;

	stackpulse_spool *spool = NULL;
	stackpulse_spool_open_opts oo = STACKPULSE_SPOOL_OPEN_OPTS;
	if (strict)
		oo.flags |= STACKPULSE_SPOOL_STRICT;
	int rc = stackpulse_spool_open(spool_path, &oo, &spool);
	if (rc) {
		fail(spool_path, rc);
		/* Damage past the header: say what --strict turned down. */
		if (strict && stackpulse_spool_open(spool_path, NULL, &spool) == 0) {
			fprintf(stderr,
			        "report: --strict refuses a damaged spool (without it, the %u "
			        "chunks before the damage would be read)\n",
			        stackpulse_spool_meta(spool)->chunks);
			stackpulse_spool_close(spool);
		}
		return 1;
	}
	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(spool);
	if (strict && meta->truncated) {
		fprintf(stderr,
		        "report: %s was cut short (%u complete chunks, no footer); --strict "
		        "refuses it\n",
		        spool_path, meta->chunks);
		stackpulse_spool_close(spool);
		return 1;
	}
	if (!spool_has_data(meta)) {
		no_samples(spool_path, meta);
		stackpulse_spool_close(spool);
		return 1;
	}
	if (meta->damaged)
		fprintf(stderr, "report: %s is damaged (%s); reading the %u chunks before it\n",
		        spool_path, meta->damage, meta->chunks);
	else if (meta->truncated)
		fprintf(stderr, "report: %s was cut short; reading its %u complete chunks\n",
		        spool_path, meta->chunks);
	/* Above 1% lost, shares are skewed wherever the loss is uneven: say so,
	 * and name the threads that lost most. */
	if ((double)meta->lost * 100.0 > (double)meta->lost + (double)meta->samples) {
		fprintf(stderr,
		        "report: warning: %.1f%% of the samples were lost (%" PRIu64 " of %" PRIu64
		        ")",
		        100.0 * (double)meta->lost / (double)(meta->lost + meta->samples),
		        meta->lost, meta->lost + meta->samples);
		uint32_t top[3] = { UINT32_MAX, UINT32_MAX, UINT32_MAX };
		for (uint32_t i = 0; i < stackpulse_spool_thread_count(spool); i++) {
			uint64_t l = stackpulse_spool_thread(spool, i)->lost;
			for (int k = 0; k < 3 && l; k++) {
				if (top[k] == UINT32_MAX ||
				    l > stackpulse_spool_thread(spool, top[k])->lost) {
					memmove(&top[k + 1], &top[k],
					        (size_t)(2 - k) * sizeof(top[0]));
					top[k] = i;
					break;
				}
			}
		}
		for (int k = 0; k < 3 && top[k] != UINT32_MAX; k++) {
			const struct stackpulse_thread *t = stackpulse_spool_thread(spool, top[k]);
			fprintf(stderr, "%s tid %d (%s) %" PRIu64, k ? "," : "; most in",
			        (int)t->tid, t->name ? t->name : "", t->lost);
		}
		fprintf(stderr, "\n");
	}
	/* A spool with off-CPU intervals reads as wall-clock time by default. */
	int has_offcpu = spool_default_time(meta) != STACKPULSE_TIME_SAMPLES;
	if (!time_given && !follow)
		time_view = spool_default_time(meta);
	/* Only off-CPU time (a sleeping process attached, or a start-up that
	 * got no sample): shown as such, whatever view was asked for, since
	 * the on-CPU views would be empty. */
	if (meta->samples == 0) {
		int asked =
		        time_view == STACKPULSE_TIME_SAMPLES || time_view == STACKPULSE_TIME_CPU;
		fprintf(stderr,
		        "report: %s has no on-CPU samples, only %" PRIu64
		        " off-CPU interval%s; %s\n",
		        spool_path, meta->offcpu_intervals, meta->offcpu_intervals == 1 ? "" : "s",
		        !asked       ? "showing them (off-CPU time = wall-clock time)"
		        : time_given ? "showing them instead (--time=off)"
		                     : "showing them (--time=off)");
		if (asked)
			time_view = STACKPULSE_TIME_OFF;
	}
	if (!has_offcpu &&
	    (time_view == STACKPULSE_TIME_OFF || time_view == STACKPULSE_TIME_WALL)) {
		fprintf(stderr,
		        "report: %s has no off-CPU intervals (record with --off-cpu); "
		        "--time=cpu or samples reads it\n",
		        spool_path);
		stackpulse_spool_close(spool);
		return 1;
	}
	g_timed = time_view != STACKPULSE_TIME_SAMPLES;
	/* Copied now: the meta belongs to the spool, closed before printing. */
	uint64_t lost = meta->lost, duration_ns = meta->duration_ns;
	uint32_t freq = meta->frequency;
	int kernel_frames = meta->kernel_frames;
	char event[64], kernel_note[256];
	snprintf(event, sizeof(event), "%s", meta->event ? meta->event : "");
	snprintf(kernel_note, sizeof(kernel_note), "%s",
	         meta->kernel_note ? meta->kernel_note : "");
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	if (profile_flags & STACKPULSE_PROFILE_MERGE_INLINE)
		so.flags |= STACKPULSE_SYM_NO_INLINE;
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.flags = profile_flags;
	if (python_only)
		po.view = STACKPULSE_VIEW_PYTHON_ONLY;
	po.time = time_view;
	/* Every output but Sysprof (one entry per sample) sums the samples per
	 * thread and stack: merged, memory follows the distinct stacks and
	 * threads, not the samples. Firefox, one entry per sample too, reads
	 * them again from the spool as it writes them (write_firefox). */
	if (mode != M_SYSCAP)
		po.merge_ns = STACKPULSE_MERGE_ALL;
	stackpulse_profile *prof = NULL;
	rc = spool_profile(spool, &so, &po, fail, &prof);
	if (rc) {
		fail("building the profile", rc);
		return 1;
	}

	struct sp_top top;
	uint32_t top_flags = (export_flags & STACKPULSE_EXPORT_LINES) ? SP_TOP_LINES : 0;
	struct groups g = { 0 };
	int status = 0;
	if ((export_flags &
	     (STACKPULSE_EXPORT_PID | STACKPULSE_EXPORT_TID | STACKPULSE_EXPORT_THREAD_NAMES)) &&
	    groups_build(prof, export_flags, &g) != 0) {
		fprintf(stderr, "report: out of memory\n");
		stackpulse_profile_free(prof);
		return 1;
	}
	if (sp_top_compute_ex(prof, g.n ? g.of_thread : NULL, top_flags, &top) != 0) {
		fprintf(stderr, "report: out of memory\n");
		groups_free(&g);
		stackpulse_profile_free(prof);
		return 1;
	}
	if (python_only) {
		int any = 0;
		for (size_t i = 0; i < top.n && !any; i++)
			any = top.rows[i].kind == STACKPULSE_FRAME_PYTHON;
		if (!any) {
			fprintf(stderr,
			        "report: %s: --python-only: the recording has no Python frames "
			        "(record a CPython 3.10-3.13 target; record's summary says "
			        "\"Python frames\" when it read them)\n",
			        spool_path);
			status = 1;
			goto done;
		}
	}

	stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
	eo.flags = export_flags;
	eo.app = app;
	eo.labels = labels;
	eo.nlabels = nlabels;
	switch (mode) {
	case M_PUSH_PYROSCOPE:
	case M_PUSH_OTLP: {
		stackpulse_push_opts pu = STACKPULSE_PUSH_OPTS;
		pu.protocol =
		        mode == M_PUSH_OTLP ? STACKPULSE_PUSH_OTLP : STACKPULSE_PUSH_PYROSCOPE;
		pu.url = out_path;
		pu.app = app;
		pu.labels = labels;
		pu.nlabels = nlabels;
		rc = stackpulse_push(prof, &pu);
		if (rc) {
			fail("push", rc);
			status = 1;
		} else {
			char what[96];
			printf("pushed %s to %s\n", profile_holds(prof, what, sizeof(what)),
			       out_path);
		}
		break;
	}
	case M_FOLDED:
		rc = stackpulse_export(prof, STACKPULSE_EXPORT_FOLDED, &eo, write_stdout, NULL);
		if (!rc && fflush(stdout) != 0)
			rc = -EIO;
		if (rc) {
			fail("folded output", rc);
			status = 1;
		}
		break;
	case M_FIREFOX:
		rc = write_firefox(spool_path, &so, &po, &eo, out_path);
		if (rc)
			status = 1;
		else
			print_wrote(out_path, prof);
		break;
	case M_PPROF:
	case M_SVG:
	case M_SYSCAP:
	case M_OTLP_FILE: {
		enum stackpulse_export_format fmt = mode == M_PPROF    ? STACKPULSE_EXPORT_PPROF
		                                    : mode == M_SVG    ? STACKPULSE_EXPORT_SVG
		                                    : mode == M_SYSCAP ? STACKPULSE_EXPORT_SYSCAP
		                                                       : STACKPULSE_EXPORT_OTLP;
		rc = stackpulse_export_to_path(prof, fmt, &eo, out_path);
		if (rc) {
			fail(out_path, rc);
			status = 1;
		} else {
			print_wrote(out_path, prof);
		}
		break;
	}
	case M_THREADS:
		if (print_threads(prof, top_flags) != 0) {
			fprintf(stderr, "report: out of memory\n");
			status = 1;
		}
		break;
	case M_TOP:
	case M_TABLE:
		if (mode == M_TABLE) {
			char held[96];
			uint64_t span = span_ns(prof);
			printf("%s, %" PRIu64 " lost, %.2f s at %u Hz (%s)\n",
			       profile_holds(prof, held, sizeof(held)), lost,
			       (double)(span > duration_ns ? span : duration_ns) / 1e9, freq,
			       event);
			if (g_timed) {
				static const char *const what[] = { "", "on-CPU", "off-CPU",
					                            "wall-clock (on- + off-CPU)" };
				char a[32];
				printf("%s time: %s\n", what[time_view],
				       amount(top.total, a, sizeof(a)));
			}
			if (!kernel_frames && *kernel_note)
				printf("no kernel frames: %s\n", kernel_note);
			printf("\nHottest stacks (leaf first):\n");
			if (print_stacks(prof, top.total, 5, &g, top_flags != 0) != 0) {
				fprintf(stderr, "report: out of memory\n");
				status = 1;
			}
			printf("\nHottest functions:\n");
		}
		print_functions(prof, &top, mode == M_TOP ? (size_t)top_n : 20, &g);
		break;
	}
	unresolved_hint(mode == M_TABLE || mode == M_TOP ? stdout : stderr, prof, &top);
done:
	sp_top_free(&top);
	groups_free(&g);
	stackpulse_profile_free(prof);
	if (fflush(stdout) != 0)
		status = 1;
	return status;
}
