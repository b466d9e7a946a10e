/* Sysprof captures end to end: `report --syscap` of real recordings, decoded
 * by Sysprof's own libraries (targets/syscap_read.c, built here against
 * Debian's libsysprof-4 3.46: the capture reader, the capture, kernel, ELF
 * and JITMAP symbol resolvers the call graph uses, and the call graph
 * itself) and held to the profile this test builds from the same spool as
 * report does. `sysprof-cli --merge`, Sysprof's own capture writer, must
 * copy the capture with every name intact. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../format/hostile.h"
#include "common/alloc.h"
#include "example_tools.h"
#include "harness.h"
#include "profile/profile_internal.h"
#include "stackpulse.h"
#include "synth.h"

static char g_reader[512];

/* Builds syscap_read against libsysprof-4 (once). */
static const char *reader(void)
{
	if (g_reader[0])
		return g_reader;
	if (sp_test_run("pkg-config --exists sysprof-4 sysprof-capture-4") != 0)
		sp_test_skip("libsysprof-4-dev is not installed (apt-get install libsysprof-4-dev "
		             "sysprof, or .ci/setup)");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "cc -O1 -g -Wall -Wextra -Werror -o %s/syscap_read "
	         "%s/tests/profile/targets/syscap_read.c $(pkg-config --cflags --libs sysprof-4)",
	         sp_test_tmpdir(), sp_test_source_root());
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(g_reader, sizeof(g_reader), "%s/syscap_read", sp_test_tmpdir());
	return g_reader;
}

/* A list of owned lines. */
typedef struct lines {
	char **v;
	size_t n, cap;
} lines;

static void lines_add(lines *l, const char *s)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = realloc(l->v, l->cap * sizeof(char *));
		REQUIRE(l->v != NULL);
	}
	l->v[l->n] = strdup(s);
	REQUIRE(l->v[l->n] != NULL);
	l->n++;
}

static void lines_free(lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lines_sort(lines *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(char *), cmp_str);
}

/* Compares two lists line by line, printing the first few differences. */
static void check_lines(const char *what, const lines *got, const lines *want,
                        int (*same)(const char *, const char *))
{
	size_t bad = 0;
	if (got->n != want->n)
		fprintf(stderr, "    %s: %zu lines, want %zu\n", what, got->n, want->n);
	CHECK_EQ(got->n, want->n);
	for (size_t i = 0; i < got->n && i < want->n; i++) {
		if (same ? same(got->v[i], want->v[i]) : strcmp(got->v[i], want->v[i]) == 0)
			continue;
		if (bad++ < 3)
			fprintf(stderr, "    %s %zu:\n      got  %s\n      want %s\n", what, i,
			        got->v[i], want->v[i]);
	}
	CHECK_EQ(bad, 0);
}

/* The decoded capture, by line kind. */
typedef struct dump {
	long long start, end;
	char time[64];
	lines process, map, meta, jitmap, file, sample, mark, other;
	char callgraph[256];
	long long bytes;
} dump;

static void dump_free(dump *d)
{
	lines_free(&d->process);
	lines_free(&d->map);
	lines_free(&d->meta);
	lines_free(&d->jitmap);
	lines_free(&d->file);
	lines_free(&d->sample);
	lines_free(&d->mark);
	lines_free(&d->other);
}

static void decode(const char *capture, dump *d)
{
	char cmd[2048], out[600];
	memset(d, 0, sizeof(*d));
	snprintf(out, sizeof(out), "%s.dump", capture);
	snprintf(cmd, sizeof(cmd), "%s %s >%s", reader(), capture, out);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	for (char *line = text, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		REQUIRE(nl != NULL);
		*nl = '\0';
		if (sscanf(line, "header %lld %lld %63s", &d->start, &d->end, d->time) == 3)
			continue;
		if (strncmp(line, "callgraph ", 10) == 0)
			snprintf(d->callgraph, sizeof(d->callgraph), "%s", line + 10);
		else if (strncmp(line, "end ", 4) == 0)
			CHECK(sscanf(line, "end %*d %lld", &d->bytes) == 1);
		lines *l = strncmp(line, "process ", 8) == 0  ? &d->process
		           : strncmp(line, "map ", 4) == 0    ? &d->map
		           : strncmp(line, "meta ", 5) == 0   ? &d->meta
		           : strncmp(line, "jitmap ", 7) == 0 ? &d->jitmap
		           : strncmp(line, "file ", 5) == 0   ? &d->file
		           : strncmp(line, "sample ", 7) == 0 ? &d->sample
		           : strncmp(line, "mark ", 5) == 0   ? &d->mark
		                                              : &d->other;
		lines_add(l, line);
	}
	free(text);
	if (rc != 0)
		for (size_t i = 0; i < d->other.n; i++)
			fprintf(stderr, "    %s\n", d->other.v[i]);
	REQUIRE_EQ(rc, 0);
	struct stat st;
	REQUIRE_EQ(stat(capture, &st), 0);
	/* The reader read every frame up to the end of the file. */
	CHECK_EQ(d->bytes, st.st_size);
	CHECK_STR(d->callgraph, "ok");
}

/* ---- What the profile says the capture holds ---- */

typedef struct want {
	stackpulse_profile *p;
	uint64_t start_clock, start_wall;
	lines process, map, meta, sample, mark;
	long long end;
	uint64_t user_funcs; /* Distinct non-kernel functions on kept stacks. */
	uint64_t kernel_samples;
	uint64_t off_total; /* Summed off-CPU values, ns. */
} want;

static void want_free(want *w)
{
	stackpulse_profile_free(w->p);
	lines_free(&w->process);
	lines_free(&w->map);
	lines_free(&w->meta);
	lines_free(&w->sample);
	lines_free(&w->mark);
}

static const char *fname(const stackpulse_profile *p, uint32_t frame)
{
	const struct stackpulse_profile_frame *fr = stackpulse_profile_frame(p, frame);
	const struct stackpulse_profile_func *fn = fr ? stackpulse_profile_func(p, fr->func) : NULL;
	const char *n = fn ? stackpulse_profile_string(p, fn->name) : NULL;
	return n && *n ? n : "[unknown]";
}

static int is_kernel(const stackpulse_profile *p, uint32_t frame)
{
	const struct stackpulse_profile_frame *fr = stackpulse_profile_frame(p, frame);
	const struct stackpulse_profile_func *fn = fr ? stackpulse_profile_func(p, fr->func) : NULL;
	return fn && fn->kind == STACKPULSE_FRAME_KERNEL;
}

static const struct stackpulse_profile_process *proc_of(const stackpulse_profile *p,
                                                        uint32_t thread)
{
	const struct stackpulse_profile_thread *t = stackpulse_profile_thread(p, thread);
	return t ? stackpulse_profile_process(p, t->process) : NULL;
}

typedef struct item {
	uint64_t time, idx;
} item;

static int cmp_item(const void *a, const void *b)
{
	const item *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The sample line Sysprof's call graph gives profile sample @p s: names
 * leaf first, kernel ones tagged, "- - kernel - -" where the chain leaves
 * the kernel, then the process root. */
static void sample_line(want *w, const struct stackpulse_profile_sample *s, char *buf, size_t n)
{
	const stackpulse_profile *p = w->p;
	const struct stackpulse_profile_thread *t = stackpulse_profile_thread(p, s->thread);
	const struct stackpulse_profile_process *pr = proc_of(p, s->thread);
	char names[16384];
	size_t len = 0;
	unsigned addrs = 0;
	int ctx = -1, kernel = 0;
	names[0] = '\0';
	for (uint32_t c = s->stack; c; c = stackpulse_profile_stack(p, c)->parent) {
		uint32_t f = stackpulse_profile_stack(p, c)->frame;
		int k = is_kernel(p, f);
		if (k != ctx) {
			addrs++;
			if (ctx >= 0)
				len += (size_t)snprintf(names + len, sizeof(names) - len,
				                        "\t- - %s - -", ctx ? "kernel" : "user");
			ctx = k;
		}
		kernel |= k;
		addrs++;
		len += (size_t)snprintf(names + len, sizeof(names) - len, "\t%s%s", fname(p, f),
		                        k ? "@Kernel" : "");
		REQUIRE(len < sizeof(names));
	}
	if (ctx == 1)
		snprintf(names + len, sizeof(names) - len, "\t- - kernel - -");
	const char *cmd = stackpulse_profile_string(p, pr->cmdline);
	if (!*cmd)
		cmd = stackpulse_profile_string(p, pr->name);
	snprintf(buf, n, "sample %llu %d %d %u%s\t[%s]", (unsigned long long)s->time_ns,
	         (int)pr->pid, (int)t->tid, addrs, names, cmd);
	w->kernel_samples += (uint64_t)kernel;
}

/* The mark of off-CPU interval @p s: "THREAD [TID]: leaf <- ... <- root". */
static void mark_line(want *w, const struct stackpulse_profile_sample *s, char *buf, size_t n)
{
	const stackpulse_profile *p = w->p;
	const struct stackpulse_profile_thread *t = stackpulse_profile_thread(p, s->thread);
	const struct stackpulse_profile_process *pr = proc_of(p, s->thread);
	int len =
	        snprintf(buf, n, "mark %llu %d %llu stackpulse\toff-CPU\t%s [%d]",
	                 (unsigned long long)s->time_ns, (int)pr->pid, (unsigned long long)s->value,
	                 stackpulse_profile_string(p, t->name), (int)t->tid);
	if (s->weight > 1)
		len += snprintf(buf + len, n - (size_t)len, " (+%u merged)", s->weight - 1);
	len += snprintf(buf + len, n - (size_t)len, ":");
	for (uint32_t c = s->stack; c; c = stackpulse_profile_stack(p, c)->parent)
		len += snprintf(buf + len, n - (size_t)len, "%s%s", c == s->stack ? " " : " <- ",
		                fname(p, stackpulse_profile_stack(p, c)->frame));
	REQUIRE((size_t)len < n && len < 4000);
}

static int in_modules(const stackpulse_spool *sp, const char *path)
{
	for (uint32_t i = 0; i < stackpulse_spool_module_count(sp); i++)
		if (strcmp(stackpulse_spool_module(sp, i)->path, path) == 0)
			return 1;
	return 0;
}

/* Builds the profile report builds for @p spool_path (@p time) and what
 * its capture must hold. */
static void expect(const char *spool_path, enum stackpulse_time time, want *w)
{
	memset(w, 0, sizeof(*w));
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool_path, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	w->start_clock = m->start_clock_ns;
	w->start_wall = m->start_time_ns;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, NULL, &sym));
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.flags = STACKPULSE_PROFILE_GROUP_UNRESOLVED;
	po.time = time;
	REQUIRE_OK(stackpulse_profile_build(sp, sym, &po, &w->p));
	stackpulse_symbolizer_free(sym);
	const stackpulse_profile *p = w->p;

	uint64_t n = stackpulse_profile_sample_count(p);
	item *it = calloc(n + 1, sizeof(item));
	uint32_t nf = stackpulse_profile_function_count(p),
	         np = stackpulse_profile_process_count(p);
	uint32_t nt = stackpulse_profile_thread_count(p);
	uint8_t *fseen = calloc(nf + 1, 1), *pseen = calloc(np + 1, 1), *tseen = calloc(nt + 1, 1);
	REQUIRE(it && fseen && pseen && tseen);
	/* Per process: its threads and the modules of its user code. */
	lines maps = { 0 };
	for (uint64_t i = 0; i < n; i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, i);
		it[i] = (item){ s->time_ns, i };
		const struct stackpulse_profile_thread *t = stackpulse_profile_thread(p, s->thread);
		const struct stackpulse_profile_process *pr = proc_of(p, s->thread);
		REQUIRE(t && pr);
		char line[8192];
		if (!pseen[t->process]) {
			pseen[t->process] = 1;
			const char *cmd = stackpulse_profile_string(p, pr->cmdline);
			snprintf(line, sizeof(line), "process %d %s", (int)pr->pid,
			         *cmd ? cmd : stackpulse_profile_string(p, pr->name));
			lines_add(&w->process, line);
		}
		if (!tseen[s->thread]) {
			tseen[s->thread] = 1;
			snprintf(line, sizeof(line), "meta %d stackpulse.thread %d %s",
			         (int)pr->pid, (int)t->tid, stackpulse_profile_string(p, t->name));
			lines_add(&w->meta, line);
		}
		for (uint32_t c = s->stack; c; c = stackpulse_profile_stack(p, c)->parent) {
			uint32_t f =
			        stackpulse_profile_frame(p, stackpulse_profile_stack(p, c)->frame)
			                ->func;
			const struct stackpulse_profile_func *fn = stackpulse_profile_func(p, f);
			if (fn->kind == STACKPULSE_FRAME_KERNEL)
				continue;
			if (!fseen[f])
				w->user_funcs++;
			fseen[f] = 1;
			const char *mod = stackpulse_profile_string(p, fn->module);
			if (*mod && in_modules(sp, mod)) {
				snprintf(line, sizeof(line), "map %d %s", (int)pr->pid, mod);
				lines_add(&maps, line);
			}
		}
		long long e = (long long)s->time_ns + (s->off_cpu ? (long long)s->value : 0);
		if (e > w->end)
			w->end = e;
	}
	/* One map per (pid, module). */
	lines_sort(&maps);
	for (size_t i = 0; i < maps.n; i++)
		if (i == 0 || strcmp(maps.v[i], maps.v[i - 1]) != 0)
			lines_add(&w->map, maps.v[i]);
	lines_free(&maps);
	qsort(it, (size_t)n, sizeof(item), cmp_item);
	for (uint64_t i = 0; i < n; i++) {
		const struct stackpulse_profile_sample *s = stackpulse_profile_sample(p, it[i].idx);
		char line[20000];
		if (s->off_cpu) {
			mark_line(w, s, line, sizeof(line));
			lines_add(&w->mark, line);
			w->off_total += s->value;
		} else {
			sample_line(w, s, line, sizeof(line));
			uint32_t reps = s->weight == 0 ? 1 : s->weight < 64 ? s->weight : 64;
			for (uint32_t r = 0; r < reps; r++)
				lines_add(&w->sample, line);
		}
	}
	free(it);
	free(fseen);
	free(pseen);
	free(tseen);
	stackpulse_spool_close(sp);
	lines_sort(&w->process);
	lines_sort(&w->meta);
}

/* Sysprof 3.46 hides these kernel functions (interrupt and NMI entry,
 * sysprof-kernel-symbol.c): its kernel resolver names them NULL. */
static int sysprof_hides(const char *name)
{
	static const char *const hidden[] = {
		"common_interrupt",
		"apic_timer_interrupt",
		"smp_apic_timer_interrupt",
		"hrtimer_interrupt",
		"__run_hrtimer",
		"perf_swevent_hrtimer",
		"perf_event_overflow",
		"__perf_event_overflow",
		"perf_prepare_sample",
		"perf_callchain",
		"perf_swcounter_hrtimer",
		"perf_counter_overflow",
		"__perf_counter_overflow",
		"perf_counter_output",
		"nmi_stack_correct",
		"do_nmi",
		"notify_die",
		"atomic_notifier_call_chain",
		"notifier_call_chain",
		"perf_event_nmi_handler",
		"perf_counter_nmi_handler",
		"intel_pmu_handle_irq",
	};
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		if (strcmp(name, hidden[i]) == 0)
			return 1;
	return 0;
}

/* Equal tab-separated fields, where Sysprof may leave a hidden kernel
 * function unnamed ("?ADDRESS" for "NAME@Kernel"). */
static int same_sample(const char *got, const char *want_line)
{
	const char *g = got, *x = want_line;
	for (;;) {
		size_t gl = strcspn(g, "\t"), xl = strcspn(x, "\t");
		int eq = gl == xl && memcmp(g, x, gl) == 0;
		if (!eq && *g == '?' && xl > 7 && memcmp(x + xl - 7, "@Kernel", 7) == 0) {
			char name[512];
			snprintf(name, sizeof(name), "%.*s", (int)(xl - 7), x);
			eq = sysprof_hides(name);
		}
		if (!eq)
			return 0;
		if (!g[gl] || !x[xl])
			return !g[gl] && !x[xl];
		g += gl + 1;
		x += xl + 1;
	}
}

/* The capture's map lines without their ranges, after checking those are
 * non-empty, JITMAP-marked and disjoint per process. */
static void map_files(const lines *maps, lines *out)
{
	for (size_t i = 0; i < maps->n; i++) {
		int pid = 0, at = 0;
		unsigned long long a = 0, b = 0;
		REQUIRE(sscanf(maps->v[i], "map %d %llx %llx %n", &pid, &a, &b, &at) == 3);
		CHECK((a & 0xE000000000000000ull) == 0xE000000000000000ull && b > a);
		for (size_t j = 0; j < i; j++) {
			int pj = 0;
			unsigned long long c = 0, d = 0;
			REQUIRE(sscanf(maps->v[j], "map %d %llx %llx", &pj, &c, &d) == 3);
			CHECK(pj != pid || d <= a || b <= c);
		}
		char line[8192];
		snprintf(line, sizeof(line), "map %d %s", pid, maps->v[i] + at);
		lines_add(out, line);
	}
	lines_sort(out);
}

/* The checks both recordings share: header, processes, threads, maps,
 * JITMAP names, the samples and marks one by one. */
static void check_capture(dump *d, want *w)
{
	uint64_t first = 0;
	for (uint64_t i = 0; i < stackpulse_profile_sample_count(w->p); i++) {
		uint64_t t = stackpulse_profile_sample(w->p, i)->time_ns;
		if (i == 0 || t < first)
			first = t;
	}
	CHECK(w->start_clock > 0 && w->start_clock <= first);
	CHECK_EQ(d->start, (long long)w->start_clock);
	CHECK_EQ(d->end, w->end);
	char iso[64];
	time_t sec = (time_t)(w->start_wall / 1000000000u);
	struct tm tm;
	REQUIRE(gmtime_r(&sec, &tm) != NULL);
	strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
	CHECK_STR(d->time, iso);

	lines got = { 0 };
	for (size_t i = 0; i < d->process.n; i++)
		lines_add(&got, d->process.v[i]);
	lines_sort(&got);
	check_lines("process", &got, &w->process, NULL);
	lines_free(&got);
	for (size_t i = 0; i < d->meta.n; i++)
		lines_add(&got, d->meta.v[i]);
	lines_sort(&got);
	check_lines("thread", &got, &w->meta, NULL);
	lines_free(&got);
	map_files(&d->map, &got);
	check_lines("map", &got, &w->map, NULL);
	lines_free(&got);
	/* One JITMAP name per user function, each at its own address. */
	CHECK_EQ(d->jitmap.n, w->user_funcs);
	lines_sort(&d->jitmap);
	for (size_t i = 1; i < d->jitmap.n; i++)
		CHECK(strncmp(d->jitmap.v[i], d->jitmap.v[i - 1], 7 + 16) != 0);

	check_lines("sample", &d->sample, &w->sample, same_sample);
	check_lines("mark", &d->mark, &w->mark, NULL);
	long long total = 0;
	for (size_t i = 0; i < d->mark.n; i++) {
		long long dur = -1;
		CHECK(sscanf(d->mark.v[i], "mark %*d %*d %lld", &dur) == 1);
		total += dur;
	}
	CHECK_EQ(total, (long long)w->off_total);
	fprintf(stderr,
	        "    %zu processes, %zu threads, %zu maps, %zu JITMAP names, %zu samples "
	        "(%llu with kernel frames), %zu off-CPU marks (%.3f s)\n",
	        d->process.n, d->meta.n, d->map.n, d->jitmap.n, d->sample.n,
	        (unsigned long long)w->kernel_samples, d->mark.n, (double)total / 1e9);
}

static void report_syscap(const char *report, const char *spool, const char *out)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s %s --syscap %s >%s.log 2>&1", report, spool, out, out);
	int rc = sp_test_run(cmd);
	if (rc != 0) {
		snprintf(cmd, sizeof(cmd), "%s.log", out);
		char *text = sp_test_read_file(cmd, NULL);
		fprintf(stderr, "    report --syscap failed (%d): %s\n", rc, text ? text : "");
		free(text);
	}
	REQUIRE_EQ(rc, 0);
}

/* Lines holding @p a and then @p b (NULL: any). */
static int count_has(const lines *l, const char *a, const char *b)
{
	int n = 0;
	for (size_t i = 0; i < l->n; i++) {
		const char *at = strstr(l->v[i], a);
		n += at && (!b || strstr(at + strlen(a), b));
	}
	return n;
}

SP_TEST(syscap_samples_of_two_processes)
{
	char record[512], report[512], ladder[512], syscalls[512], cmd[4096];
	tools(record, report, sizeof(record));
	reader();
	build_workload("ladder", ladder, sizeof(ladder));
	snprintf(syscalls, sizeof(syscalls), "%s/syscalls", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "cc -O2 -g -fomit-frame-pointer -o %s %s/tests/record/targets/syscalls.c",
	         syscalls, sp_test_source_root());
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char spool[512], cap[512], args[2048];
	snprintf(spool, sizeof(spool), "%s/two.spool", sp_test_tmpdir());
	snprintf(cap, sizeof(cap), "%s/two.syscap", sp_test_tmpdir());
	/* Kernel frames when this user may record them (root here). */
	snprintf(args, sizeof(args), "sh -c '%s 1.5 >/dev/null & %s 1; wait'", ladder, syscalls);
	snprintf(cmd, sizeof(cmd), "%s -F 499 -o %s -- %s >%s.log 2>&1", record, spool, args,
	         spool);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	report_syscap(report, spool, cap);

	want w;
	expect(spool, STACKPULSE_TIME_SAMPLES, &w);
	dump d;
	decode(cap, &d);
	check_capture(&d, &w);
	/* The workloads' own functions, named and in order. */
	CHECK(count_has(&d.sample, "\twork_a\tladder_run\tmain\t", NULL) > 0);
	CHECK(count_has(&d.sample, "\twork_c\tladder_run\tmain\t", NULL) > 0);
	CHECK(count_has(&d.sample, "\tsys_loop\tmain\t", NULL) > 0);
	CHECK(d.process.n >= 2);
	CHECK_EQ(d.mark.n, 0);
	if (geteuid() == 0) {
		/* The syscall loop runs in the kernel: names from the embedded
		 * /proc/kallsyms, tagged by Sysprof's kernel resolver. */
		CHECK(w.kernel_samples > 0);
		CHECK(count_has(&d.sample, "@Kernel\t- - kernel - -\t", "\tsys_loop\tmain\t") > 0);
		CHECK_EQ(d.file.n, 1);
		CHECK(d.file.n == 1 && strstr(d.file.v[0], "file /proc/kallsyms ") &&
		      strstr(d.file.v[0], " last"));
	}

	/* Sysprof's own writer copies it: twice the samples, every name kept
	 * through its renumbered JITMAP. */
	if (!sp_test_have_program("sysprof-cli"))
		sp_test_skip("sysprof-cli is not installed (Debian sysprof)");
	char merged[600];
	snprintf(merged, sizeof(merged), "%s/merged.syscap", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "sysprof-cli --merge %s %s >%s 2>%s.log", cap, cap, merged,
	         merged);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	dump m;
	decode(merged, &m);
	lines twice = { 0 };
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < d.sample.n; i++)
			lines_add(&twice, d.sample.v[i]);
	check_lines("merged sample", &m.sample, &twice, NULL);
	lines_free(&twice);
	dump_free(&m);
	dump_free(&d);
	want_free(&w);
}

SP_TEST(syscap_off_cpu_marks_of_a_sleeper)
{
	char record[512], report[512], exe[512], cmd[4096];
	tools(record, report, sizeof(record));
	reader();
	if (geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	snprintf(exe, sizeof(exe), "%s/phases", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "cc -O2 -g -fomit-frame-pointer -pthread -o %s %s/tests/record/targets/phases.c",
	         exe, sp_test_source_root());
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char spool[512], cap[512];
	snprintf(spool, sizeof(spool), "%s/phases.spool", sp_test_tmpdir());
	snprintf(cap, sizeof(cap), "%s/phases.syscap", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s -F 499 --off-cpu -o %s -- %s 10 100 >%s.log 2>&1", record,
	         spool, exe, spool);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	/* report reads an off-CPU spool as wall-clock time by default. */
	report_syscap(report, spool, cap);

	want w;
	expect(spool, STACKPULSE_TIME_WALL, &w);
	dump d;
	decode(cap, &d);
	check_capture(&d, &w);
	/* The sleeps: a mark per interval, its stack under sleep_phase
	 * through nanosleep; the filler thread blocks in read. */
	CHECK(d.mark.n >= 10);
	CHECK(count_has(&d.mark, "nanosleep <- ", NULL) > 0);
	CHECK(count_has(&d.mark, " <- sleep_phase <- main <- ", NULL) >= 5);
	CHECK(count_has(&d.mark, " <- filler_main <- ", NULL) > 0);
	CHECK(count_has(&d.sample, "\tspin_phase\tmain\t", NULL) > 0);
	CHECK_EQ(d.meta.n, 2);
	dump_free(&d);
	want_free(&w);
}

/* The synthetic spool (synth.h) without a symbolizer: every line exact. */
SP_TEST(syscap_synthetic_profile_reads_exactly)
{
	reader();
	sp_buf mem;
	stackpulse_spool *spool = syn_spool(&mem, NULL);
	stackpulse_profile *p = syn_profile(spool, 0, STACKPULSE_VIEW_MIXED);
	char cap[512];
	snprintf(cap, sizeof(cap), "%s/synth.syscap", sp_test_tmpdir());
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_SYSCAP, NULL, cap));
	dump d;
	decode(cap, &d);
	CHECK_EQ(d.start, (long long)SYN_BASE);
	CHECK_EQ(d.end, (long long)(SYN_BASE + 14 * SYN_STEP));
	CHECK_STR(d.time, "2023-11-14T22:13:20Z");
	REQUIRE_EQ(d.process.n, 1);
	CHECK_STR(d.process.v[0], "process 100 ladder --run");
	REQUIRE_EQ(d.meta.n, 2);
	CHECK_STR(d.meta.v[0], "meta 100 stackpulse.thread 100 ladder");
	CHECK_STR(d.meta.v[1], "meta 100 stackpulse.thread 101 worker");
	REQUIRE_EQ(d.map.n, 2);
	CHECK(strstr(d.map.v[0], " /usr/bin/ladder") != NULL);
	CHECK(strstr(d.map.v[1], " /usr/bin/python3") != NULL);
	/* ladder+0x1000..0x1400 (5), python3+0x500, <module> and fib. */
	CHECK_EQ(d.jitmap.n, 8);
	REQUIRE_EQ(d.file.n, 1);
	CHECK_STR(d.file.v[0], "file /proc/kallsyms 70 last");
	REQUIRE_EQ(d.sample.n, 15);
	const char *root = "\tladder+0x1100\tladder+0x1000\t[ladder --run]";
	char want_line[1024];
	for (int i = 0; i < 15; i++) {
		unsigned long long t = SYN_BASE + (unsigned long long)i * SYN_STEP;
		if (i < 10)
			snprintf(want_line, sizeof(want_line),
			         "sample %llu 100 100 4\tladder+0x%x%s", t,
			         i < 5   ? 0x1200
			         : i < 8 ? 0x1300
			                 : 0x1400,
			         root);
		else if (i == 10)
			snprintf(want_line, sizeof(want_line),
			         "sample %llu 100 100 "
			         "7\tdo_syscall_64@Kernel\tentry_SYSCALL_64@Kernel"
			         "\t- - kernel - -\tladder+0x1400%s",
			         t, root);
		else
			snprintf(want_line, sizeof(want_line),
			         "sample %llu 100 101 5\tfib (/tmp/app.py)\tfib (/tmp/app.py)"
			         "\t<module> (/tmp/app.py)\tpython3+0x500\t[ladder --run]",
			         t);
		CHECK_STR(d.sample.v[i], want_line);
	}
	CHECK_EQ(d.mark.n, 0);
	dump_free(&d);
	stackpulse_profile_free(p);
	stackpulse_spool_close(spool);
	sp_buf_free(&mem);
}

/* Checks sample line @p s: @p n addresses, then @p same frames named by
 * 1024 bytes of @p leaf, @p rest of 'a', "- - kernel - -" and "[amp]". */
static void check_deep(const char *s, unsigned n, size_t same, char leaf, size_t rest)
{
	unsigned got = 0;
	REQUIRE(sscanf(s, "sample %*d %*d %*d %u", &got) == 1);
	CHECK_EQ(got, n);
	size_t k = 0, bad = 0;
	for (const char *f = strchr(s, '\t'); f; f = strchr(f, '\t'), k++) {
		f++;
		size_t fl = strcspn(f, "\t");
		if (k < same + rest) {
			char c = k < same ? leaf : 'a';
			int ok = fl == 1024 + 7 && memcmp(f + 1024, "@Kernel", 7) == 0;
			for (size_t j = 0; j < 1024 && ok; j++)
				ok = f[j] == c;
			bad += !ok;
		} else if (k == same + rest) {
			bad += fl != 14 || memcmp(f, "- - kernel - -", 14) != 0;
		} else {
			bad += fl != 5 || memcmp(f, "[amp]", 5) != 0;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(k, same + rest + 2);
}

/* Stacks through kernel names of 60 KB, one deeper than a SAMPLE frame
 * holds: names are cut at 1024 bytes and that chain at 8000 addresses
 * (leaf first), Sysprof reads every frame, and the export holds memory
 * sized by the profile, not by its output. */
SP_TEST(syscap_bounds_deep_stacks_and_long_names)
{
	reader();
	sp_buf mem;
	sp_buf_init(&mem);
	REQUIRE_OK(hostile_amp_spool(syn_sink, &mem, 1000, 2));
	stackpulse_spool *spool = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem.data, mem.len, 0, &spool));
	stackpulse_profile *p = NULL;
	REQUIRE_OK(stackpulse_profile_build(spool, NULL, NULL, &p));
	REQUIRE_EQ(p->nsamples, 2);
	/* A spool stack holds at most 1024 frames (inline frames can make a
	 * profile's deeper): 9000 more leaf frames under the first sample. */
	uint32_t old = p->nstacks, leaf = p->samples[0].stack, extra = 9000;
	struct stackpulse_profile_stack *st =
	        sp_realloc_array(p->stacks, (size_t)old + extra, sizeof(*st));
	REQUIRE(st != NULL);
	p->stacks = st;
	p->cap_stacks = p->nstacks = old + extra;
	for (uint32_t i = 0; i < extra; i++)
		st[old + i] =
		        (struct stackpulse_profile_stack){ i ? old + i - 1 : leaf, st[leaf].frame };
	p->samples[0].stack = old + extra - 1;

	char cap[512];
	snprintf(cap, sizeof(cap), "%s/deep.syscap", sp_test_tmpdir());
	sp_alloc_reset_count();
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_SYSCAP, NULL, cap));
	uint64_t used = sp_alloc_bytes();
	dump d;
	decode(cap, &d);
	printf("    %zu samples, %lld bytes, %llu bytes allocated\n", d.sample.n, d.bytes,
	       (unsigned long long)used);
	CHECK(used < 1u << 20);
	REQUIRE_EQ(d.sample.n, 2);
	/* A context marker and 7999 of the 10001 frames; then 1 + 1001. */
	check_deep(d.sample.v[0], 8000, 7999, 'b', 0);
	check_deep(d.sample.v[1], 1002, 1, 'c', 1000);
	dump_free(&d);
	stackpulse_profile_free(p);
	stackpulse_spool_close(spool);
	sp_buf_free(&mem);
}
