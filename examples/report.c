/* report: read a spool and print or export it.
 *
 *   report FILE [--folded | --top N | --pprof OUT | --firefox OUT | --svg OUT
 *                | --otlp-file OUT | --push URL | --otlp URL]
 *               [--pid] [--tid] [--thread-names] [--no-inline] [--lines]
 *               [--app NAME] [--label KEY=VALUE]...
 *
 * Default: the hottest stacks and functions as a table with self and total
 * percentages. --folded prints folded stacks to stdout; --top N prints the
 * N hottest functions; --pprof/--firefox/--svg/--otlp-file write a file;
 * --push sends the profile to a Pyroscope server and --otlp to an
 * OpenTelemetry collector (docs/continuous.md). Exit codes:
 * 0 done, 1 failed, 2 bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_top.h"
#include "stackpulse.h"

enum mode {
	M_TABLE,
	M_FOLDED,
	M_TOP,
	M_PPROF,
	M_FIREFOX,
	M_SVG,
	M_OTLP_FILE,
	M_PUSH_PYROSCOPE,
	M_PUSH_OTLP
};

#define MAX_LABELS 32

static void usage(FILE *f)
{
	fprintf(f, "usage: report FILE [--folded | --top N | --pprof OUT | --firefox OUT | --svg "
	           "OUT]\n"
	           "                   [--pid] [--tid] [--thread-names] [--no-inline] [--lines]\n"
	           "  (default)       hottest stacks and functions, with self and total %%\n"
	           "  --folded        folded stacks (flamegraph.pl input) on stdout\n"
	           "  --top N         the N hottest functions\n"
	           "  --pprof OUT     gzip'd profile.proto for `go tool pprof`\n"
	           "  --firefox OUT   JSON for https://profiler.firefox.com\n"
	           "  --svg OUT       interactive SVG flame graph\n"
	           "  --otlp-file OUT OTLP profiles request (protobuf) in a file\n"
	           "  --push URL      send to a Pyroscope server (URL/ingest)\n"
	           "  --otlp URL      send to an OTLP/HTTP collector (URL/v1development/profiles)\n"
	           "  --app NAME      application name for --push/--otlp/--otlp-file\n"
	           "  --label K=V     a label for --push/--otlp/--otlp-file (repeatable)\n"
	           "  --pid, --tid    name roots process-PID / process/TID\n"
	           "  --thread-names  root stacks at thread names instead of process names\n"
	           "  --no-inline     merge inlined functions into their callers\n"
	           "  --lines         add source lines to frame names\n");
}

static void fail(const char *what, int rc)
{
	fprintf(stderr, "report: %s: %s", what, stackpulse_strerror(rc));
	const char *detail = stackpulse_last_error();
	if (detail && *detail)
		fprintf(stderr, " (%s)", detail);
	fputc('\n', stderr);
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

static const char *kind_tag(int kind)
{
	switch (kind) {
	case STACKPULSE_FRAME_KERNEL: return " [k]";
	case STACKPULSE_FRAME_PYTHON: return " [py]";
	default: return "";
	}
}

static void print_functions(const stackpulse_profile *p, const struct sp_top *top, size_t limit)
{
	printf("%8s %7s %8s %7s  %s\n", "self", "self%", "total", "total%", "function");
	for (size_t i = 0; i < top->n && i < limit; i++) {
		const struct sp_top_row *r = &top->rows[i];
		printf("%8" PRIu64 " %6.2f%% %8" PRIu64 " %6.2f%%  %s%s\n", r->self,
		       pct(r->self, top->total), r->total, pct(r->total, top->total),
		       stackpulse_profile_string(p, r->name), kind_tag(r->kind));
	}
}

static int cmp_weight_desc(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b; /* {weight, path} pairs */
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Stacks by function names: profile nodes that differ only in lines or
 * addresses share one "name path" (parent path, function name). */
struct name_paths {
	uint32_t *parent, *name, *func; /* Per path; path 0 is the root. */
	uint32_t n;
	uint32_t *slots; /* Open addressing over paths, UINT32_MAX empty. */
	uint32_t cap;    /* Slots, a power of two. */
};

static uint32_t path_intern(struct name_paths *np, uint32_t parent, uint32_t name, uint32_t func)
{
	uint64_t h = ((uint64_t)parent * 0x9e3779b97f4a7c15ull) ^
	             ((uint64_t)name * 0xc2b2ae3d27d4eb4full);
	h ^= h >> 29;
	for (uint32_t i = (uint32_t)h & (np->cap - 1);; i = (i + 1) & (np->cap - 1)) {
		uint32_t v = np->slots[i];
		if (v == UINT32_MAX) {
			np->slots[i] = np->n;
			np->parent[np->n] = parent;
			np->name[np->n] = name;
			np->func[np->n] = func;
			return np->n++;
		}
		if (np->parent[v] == parent && np->name[v] == name)
			return v;
	}
}

/* The hottest distinct stacks by function names, leaf first. */
static int print_stacks(const stackpulse_profile *p, uint64_t total, size_t limit)
{
	uint32_t n = stackpulse_profile_stack_count(p);
	struct name_paths np = { 0 };
	np.cap = 16;
	while (np.cap < 2 * (size_t)n + 2)
		np.cap *= 2;
	uint32_t *of_node = calloc(n ? n : 1, sizeof(uint32_t));
	np.parent = calloc((size_t)n + 1, sizeof(uint32_t));
	np.name = calloc((size_t)n + 1, sizeof(uint32_t));
	np.func = calloc((size_t)n + 1, sizeof(uint32_t));
	np.slots = malloc(np.cap * sizeof(uint32_t));
	uint64_t *w = calloc((size_t)n + 1, sizeof(uint64_t));
	uint64_t *pairs = calloc(2 * ((size_t)n + 1), sizeof(uint64_t));
	int rc = -1;
	if (!of_node || !np.parent || !np.name || !np.func || !np.slots || !w || !pairs)
		goto out;
	memset(np.slots, 0xff, np.cap * sizeof(uint32_t));
	np.n = 1;                          /* Path 0: no frames. */
	for (uint32_t i = 1; i < n; i++) { /* Parents come before children. */
		const struct stackpulse_profile_stack *st = stackpulse_profile_stack(p, i);
		const struct stackpulse_profile_frame *fr = stackpulse_profile_frame(p, st->frame);
		const struct stackpulse_profile_func *fn = stackpulse_profile_func(p, fr->func);
		of_node[i] = path_intern(&np, of_node[st->parent], fn->name, fr->func);
	}
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(p); i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		w[of_node[s->stack]] += s->weight;
	}
	size_t k = 0;
	for (uint32_t i = 0; i < np.n; i++)
		if (w[i]) {
			pairs[2 * k] = w[i];
			pairs[2 * k + 1] = i;
			k++;
		}
	qsort(pairs, k, 2 * sizeof(uint64_t), cmp_weight_desc);
	for (size_t i = 0; i < k && i < limit; i++) {
		printf("%6.2f%% (%" PRIu64 " samples)\n", pct(pairs[2 * i], total), pairs[2 * i]);
		uint32_t path = (uint32_t)pairs[2 * i + 1];
		if (path == 0)
			printf("    [no frames]\n");
		for (int depth = 0; path != 0; depth++, path = np.parent[path]) {
			if (depth == 24) {
				printf("    ...\n");
				break;
			}
			const struct stackpulse_profile_func *fn =
			        stackpulse_profile_func(p, np.func[path]);
			const char *file = stackpulse_profile_string(p, fn->file);
			printf("    %s%s", stackpulse_profile_string(p, fn->name),
			       kind_tag((int)fn->kind));
			if (file && *file)
				printf("  (%s)", file);
			printf("\n");
		}
	}
	rc = 0;
out:
	free(of_node);
	free(np.parent);
	free(np.name);
	free(np.func);
	free(np.slots);
	free(w);
	free(pairs);
	return rc;
}

int main(int argc, char **argv)
{
	const char *spool_path = NULL, *out_path = NULL;
	enum mode mode = M_TABLE;
	int modes = 0;
	long top_n = 20;
	uint32_t export_flags = 0, profile_flags = 0;
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
		} else if (strcmp(a, "--folded") == 0) {
			mode = M_FOLDED;
			modes++;
		} else if (strcmp(a, "--top") == 0 || strcmp(a, "--pprof") == 0 ||
		           strcmp(a, "--firefox") == 0 || strcmp(a, "--svg") == 0) {
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
				mode = a[2] == 'p' ? M_PPROF : a[2] == 'f' ? M_FIREFOX : M_SVG;
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
		fprintf(stderr, "report: choose one of --folded, --top, --pprof, --firefox, --svg, "
		                "--otlp-file, --push, --otlp\n");
		return 2;
	}
	if ((app || nlabels) && mode != M_PUSH_PYROSCOPE && mode != M_PUSH_OTLP &&
	    mode != M_OTLP_FILE) {
		fprintf(stderr,
		        "report: --app and --label go with --push, --otlp or --otlp-file\n");
		return 2;
	}

	stackpulse_spool *spool = NULL;
	int rc = stackpulse_spool_open(spool_path, NULL, &spool);
	if (rc) {
		fail(spool_path, rc);
		return 1;
	}
	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(spool);
	if (meta->damaged)
		fprintf(stderr, "report: %s is damaged (%s); reading the %u chunks before it\n",
		        spool_path, meta->damage, meta->chunks);
	else if (meta->truncated)
		fprintf(stderr, "report: %s was cut short; reading its %u complete chunks\n",
		        spool_path, meta->chunks);
	/* Copied now: the meta belongs to the spool, closed before printing. */
	uint64_t lost = meta->lost, duration_ns = meta->duration_ns;
	uint32_t freq = meta->frequency;
	char event[64];
	snprintf(event, sizeof(event), "%s", meta->event ? meta->event : "");
	stackpulse_symbolizer *sym = NULL;
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	if (profile_flags & STACKPULSE_PROFILE_MERGE_INLINE)
		so.flags |= STACKPULSE_SYM_NO_INLINE;
	rc = stackpulse_symbolizer_new(spool, &so, &sym);
	if (rc) {
		/* Still useful: frames then read module+offset. */
		fail("symbolizer (continuing with raw addresses)", rc);
		sym = NULL;
	}
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.flags = profile_flags;
	stackpulse_profile *prof = NULL;
	rc = stackpulse_profile_build(spool, sym, &po, &prof);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	if (rc) {
		fail("building the profile", rc);
		return 1;
	}

	stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
	eo.flags = export_flags;
	eo.app = app;
	eo.labels = labels;
	eo.nlabels = nlabels;
	int status = 0;
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
			printf("pushed %" PRIu64 " samples to %s\n",
			       stackpulse_profile_sample_count(prof), out_path);
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
	case M_PPROF:
	case M_FIREFOX:
	case M_SVG:
	case M_OTLP_FILE: {
		enum stackpulse_export_format fmt = mode == M_PPROF     ? STACKPULSE_EXPORT_PPROF
		                                    : mode == M_FIREFOX ? STACKPULSE_EXPORT_FIREFOX
		                                    : mode == M_SVG     ? STACKPULSE_EXPORT_SVG
		                                                        : STACKPULSE_EXPORT_OTLP;
		rc = stackpulse_export_to_path(prof, fmt, &eo, out_path);
		if (rc) {
			fail(out_path, rc);
			status = 1;
		} else {
			printf("wrote %s (%" PRIu64 " samples)\n", out_path,
			       stackpulse_profile_sample_count(prof));
		}
		break;
	}
	case M_TOP:
	case M_TABLE: {
		struct sp_top top;
		if (sp_top_compute(prof, &top) != 0) {
			fprintf(stderr, "report: out of memory\n");
			status = 1;
			break;
		}
		if (mode == M_TABLE) {
			printf("%" PRIu64 " samples, %" PRIu64 " lost, %.2f s at %u Hz (%s)\n\n",
			       stackpulse_profile_sample_count(prof), lost,
			       (double)duration_ns / 1e9, freq, event);
		}
		if (mode == M_TABLE) {
			printf("Hottest stacks (leaf first):\n");
			if (print_stacks(prof, top.total, 5) != 0) {
				fprintf(stderr, "report: out of memory\n");
				status = 1;
			}
			printf("\nHottest functions:\n");
		}
		print_functions(prof, &top, mode == M_TOP ? (size_t)top_n : 20);
		sp_top_free(&top);
		break;
	}
	}
	stackpulse_profile_free(prof);
	if (fflush(stdout) != 0)
		status = 1;
	return status;
}
