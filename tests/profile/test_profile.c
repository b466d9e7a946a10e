/* Profile model and folded output against a synthetic spool with a known
 * call tree (tests/profile/synth.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "harness.h"
#include "stackpulse.h"
#include "synth.h"
#include "format/spool_reader.h"

static const char *const FOLDED_PLAIN =
        "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
        "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
        "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
        "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400;entry_SYSCALL_64_[k];do_syscall_64_[k] "
        "1\n"
        "ladder;python3+0x500;<module> (/tmp/app.py);fib (/tmp/app.py);fib (/tmp/app.py) 4\n";

static void check_folded(stackpulse_profile *p, uint32_t flags, const char *want)
{
	char *got = syn_export(p, STACKPULSE_EXPORT_FOLDED, flags, NULL);
	CHECK_STR(got, want);
	sp_free(got);
}

SP_TEST(folded_exact_tree)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	check_folded(p, 0, FOLDED_PLAIN);
	check_folded(p, STACKPULSE_EXPORT_LINES,
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400;entry_SYSCALL_64_[k];"
	             "do_syscall_64_[k] 1\n"
	             "ladder;python3+0x500;<module> (/tmp/app.py:10);fib (/tmp/app.py:5);"
	             "fib (/tmp/app.py:3) 4\n");
	check_folded(
	        p, STACKPULSE_EXPORT_PID | STACKPULSE_EXPORT_TID,
	        "ladder-100/100;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	        "ladder-100/100;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	        "ladder-100/100;ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
	        "ladder-100/100;ladder+0x1000;ladder+0x1100;ladder+0x1400;entry_SYSCALL_64_[k];"
	        "do_syscall_64_[k] 1\n"
	        "ladder-100/101;python3+0x500;<module> (/tmp/app.py);fib (/tmp/app.py);"
	        "fib (/tmp/app.py) 4\n");
	check_folded(p, STACKPULSE_EXPORT_THREAD_NAMES,
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400;entry_SYSCALL_64_[k];"
	             "do_syscall_64_[k] 1\n"
	             "worker;python3+0x500;<module> (/tmp/app.py);fib (/tmp/app.py);"
	             "fib (/tmp/app.py) 4\n");
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

SP_TEST(folded_names_are_sanitized)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, "we;ird\nname");
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	char *got = syn_export(p, STACKPULSE_EXPORT_FOLDED, 0, NULL);
	/* One line per stack, the ';' inside the name replaced. */
	int lines = 0;
	for (char *c = got; *c; c++)
		lines += *c == '\n';
	CHECK_EQ(lines, 5);
	CHECK(strncmp(got, "we:ird name;", 12) == 0);
	sp_free(got);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

SP_TEST(tables_and_accessors)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	CHECK_STR(stackpulse_profile_string(p, 0), "");
	CHECK(stackpulse_profile_string(p, stackpulse_profile_string_count(p)) == NULL);
	CHECK_EQ(stackpulse_profile_sample_count(p), 15);
	CHECK_EQ(stackpulse_profile_thread_count(p), 2);
	CHECK_EQ(stackpulse_profile_process_count(p), 1);
	/* 5 native + 2 kernel + 1 python3 native + 3 Python frames (fib twice). */
	CHECK_EQ(stackpulse_profile_frame_count(p), 11);
	CHECK_EQ(stackpulse_profile_function_count(p), 10);
	/* Root + main, run, a, b, c, 2 kernel, python3, <module>, fib, fib. */
	CHECK_EQ(stackpulse_profile_stack_count(p), 12);
	const struct stackpulse_profile_stack *root = stackpulse_profile_stack(p, 0);
	REQUIRE(root != NULL);
	CHECK_EQ(root->parent, 0);
	CHECK(stackpulse_profile_stack(p, 12) == NULL);
	CHECK(stackpulse_profile_sample(p, 15) == NULL);
	const struct stackpulse_profile_process *pr = stackpulse_profile_process(p, 0);
	REQUIRE(pr != NULL);
	CHECK_EQ(pr->pid, 100);
	CHECK_STR(stackpulse_profile_string(p, pr->name), "ladder");
	CHECK_STR(stackpulse_profile_string(p, pr->cmdline), "ladder --run");
	CHECK_EQ(pr->parent, UINT32_MAX);
	const struct stackpulse_profile_thread *t1 = stackpulse_profile_thread(p, 1);
	REQUIRE(t1 != NULL);
	CHECK_EQ(t1->tid, 101);
	CHECK_STR(stackpulse_profile_string(p, t1->name), "worker");
	/* Every node's parent precedes it, and every sample's leaf has a frame. */
	for (uint32_t i = 1; i < stackpulse_profile_stack_count(p); i++) {
		const struct stackpulse_profile_stack *st = stackpulse_profile_stack(p, i);
		CHECK(st->parent < i);
		CHECK(st->frame < stackpulse_profile_frame_count(p));
	}
	/* The last sample is the Python leaf fib at line 3. */
	const struct stackpulse_profile_sample *sm = stackpulse_profile_sample(p, 14);
	REQUIRE(sm != NULL);
	CHECK_EQ(sm->thread, 1);
	CHECK_EQ(sm->time_ns, SYN_BASE + 14 * SYN_STEP);
	const struct stackpulse_profile_frame *fr =
	        stackpulse_profile_frame(p, stackpulse_profile_stack(p, sm->stack)->frame);
	const struct stackpulse_profile_func *fn = stackpulse_profile_func(p, fr->func);
	CHECK_STR(stackpulse_profile_string(p, fn->name), "fib");
	CHECK_STR(stackpulse_profile_string(p, fn->file), "/tmp/app.py");
	CHECK_EQ(fn->kind, STACKPULSE_FRAME_PYTHON);
	CHECK_EQ(fr->line, 3);
	/* The profile owns everything: it outlives the spool. */
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
	char *got = syn_export(p, STACKPULSE_EXPORT_FOLDED, 0, NULL);
	CHECK_STR(got, FOLDED_PLAIN);
	sp_free(got);
	stackpulse_profile_free(p);
	stackpulse_profile_free(NULL);
}

SP_TEST(filters_and_views)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile *p =
	        syn_profile(s, STACKPULSE_PROFILE_HIDE_KERNEL, STACKPULSE_VIEW_MIXED);
	check_folded(p, 0,
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400 3\n"
	             "ladder;python3+0x500;<module> (/tmp/app.py);fib (/tmp/app.py);"
	             "fib (/tmp/app.py) 4\n");
	stackpulse_profile_free(p);

	p = syn_profile(s, 0, STACKPULSE_VIEW_PYTHON_ONLY);
	CHECK_EQ(stackpulse_profile_sample_count(p), 4);
	check_folded(p, 0, "ladder;<module> (/tmp/app.py);fib (/tmp/app.py);fib (/tmp/app.py) 4\n");
	stackpulse_profile_free(p);

	p = syn_profile(s, 0, STACKPULSE_VIEW_NATIVE_ONLY);
	check_folded(p, 0,
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
	             "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1400;entry_SYSCALL_64_[k];"
	             "do_syscall_64_[k] 1\n"
	             "ladder;python3+0x500 4\n");
	stackpulse_profile_free(p);

	p = syn_profile(s, STACKPULSE_PROFILE_BY_PROCESS | STACKPULSE_PROFILE_BY_THREAD,
	                STACKPULSE_VIEW_MIXED);
	check_folded(
	        p, STACKPULSE_EXPORT_PID,
	        "ladder-100;ladder [100];ladder [100];ladder+0x1000;ladder+0x1100;ladder+0x1200 5\n"
	        "ladder-100;ladder [100];ladder [100];ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n"
	        "ladder-100;ladder [100];ladder [100];ladder+0x1000;ladder+0x1100;ladder+0x1400 2\n"
	        "ladder-100;ladder [100];ladder [100];ladder+0x1000;ladder+0x1100;ladder+0x1400;"
	        "entry_SYSCALL_64_[k];do_syscall_64_[k] 1\n"
	        "ladder-100;ladder [100];worker [101];python3+0x500;<module> (/tmp/app.py);"
	        "fib (/tmp/app.py);fib (/tmp/app.py) 4\n");
	stackpulse_profile_free(p);

	stackpulse_profile_opts o = STACKPULSE_PROFILE_OPTS;
	o.tid = 101;
	REQUIRE_OK(stackpulse_profile_build(s, NULL, &o, &p));
	check_folded(p, 0,
	             "ladder;python3+0x500;<module> (/tmp/app.py);fib (/tmp/app.py);"
	             "fib (/tmp/app.py) 4\n");
	stackpulse_profile_free(p);

	o = STACKPULSE_PROFILE_OPTS;
	o.pid = 999;
	REQUIRE_OK(stackpulse_profile_build(s, NULL, &o, &p));
	CHECK_EQ(stackpulse_profile_sample_count(p), 0);
	check_folded(p, 0, "");
	stackpulse_profile_free(p);

	/* Time range [t=5, t=8): the three work_b samples. */
	o = STACKPULSE_PROFILE_OPTS;
	o.start_ns = SYN_BASE + 5 * SYN_STEP;
	o.end_ns = SYN_BASE + 8 * SYN_STEP;
	REQUIRE_OK(stackpulse_profile_build(s, NULL, &o, &p));
	check_folded(p, 0, "ladder;ladder+0x1000;ladder+0x1100;ladder+0x1300 3\n");
	stackpulse_profile_free(p);

	/* Bad options are refused with a detail, never crash. */
	o = STACKPULSE_PROFILE_OPTS;
	o.view = 7;
	CHECK_EQ(stackpulse_profile_build(s, NULL, &o, &p), -EINVAL);
	CHECK(p == NULL);
	CHECK(strlen(stackpulse_last_error()) > 0);
	o = STACKPULSE_PROFILE_OPTS;
	o.start_ns = 10;
	o.end_ns = 5;
	CHECK_EQ(stackpulse_profile_build(s, NULL, &o, &p), -EINVAL);
	CHECK_EQ(stackpulse_profile_build(NULL, NULL, NULL, &p), -EINVAL);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* An old caller's smaller opts struct reads only the fields it has. */
SP_TEST(opts_size_compat)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile_opts o = STACKPULSE_PROFILE_OPTS;
	o.tid = 101; /* Beyond sz: ignored. */
	o.sz = offsetof(stackpulse_profile_opts, pid);
	stackpulse_profile *p = NULL;
	REQUIRE_OK(stackpulse_profile_build(s, NULL, &o, &p));
	CHECK_EQ(stackpulse_profile_sample_count(p), 15);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* Every allocation failure is reported, nothing leaks or crashes. */
SP_TEST(allocation_failures)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	int ok = 0;
	for (long n = 0; n < 400 && !ok; n++) {
		stackpulse_profile *p = NULL;
		sp_alloc_fail_after(n);
		int rc = stackpulse_profile_build(s, NULL, NULL, &p);
		if (rc == 0) {
			sp_buf out;
			sp_buf_init(&out);
			for (int f = STACKPULSE_EXPORT_FOLDED; f <= STACKPULSE_EXPORT_SVG; f++) {
				sp_buf_reset(&out);
				int e = stackpulse_export(p, (enum stackpulse_export_format)f, NULL,
				                          syn_collect, &out);
				CHECK(e == 0 || e == -ENOMEM);
			}
			sp_alloc_fail_after(-1);
			sp_buf_free(&out);
			stackpulse_profile_free(p);
			ok = n > 50; /* Past the build; exports above ran with failures too. */
		} else {
			sp_alloc_fail_after(-1);
			CHECK(rc == -ENOMEM);
			CHECK(p == NULL);
		}
	}
	sp_alloc_fail_after(-1);
	CHECK(ok);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* Without a symbolizer, JIT frames take their perf-map name from the spool
 * (per process), and unknown addresses read [unknown]. */
SP_TEST(jit_and_unknown_frames_without_symbolizer)
{
	sp_buf mem;
	sp_buf_init(&mem);
	sp_writer *w = NULL;
	sp_writer_opts wo = { 0, 0 };
	REQUIRE_OK(sp_writer_new(&wo, syn_sink, &mem, &w));
	uint32_t p1, p2, t1, t2, fj, fu, s1, s2;
	REQUIRE_OK(sp_writer_process(w, 10, UINT32_MAX, 1, "node", "node app.js", &p1));
	REQUIRE_OK(sp_writer_process(w, 11, UINT32_MAX, 1, "java", "java App", &p2));
	REQUIRE_OK(sp_writer_thread(w, p1, 10, 1, "node", &t1));
	REQUIRE_OK(sp_writer_thread(w, p2, 11, 1, "java", &t2));
	REQUIRE_OK(sp_writer_jitsym(w, p1, 0x7000, 0x100, "LazyCompile:*hot app.js:3"));
	REQUIRE_OK(sp_writer_jitsym(w, p2, 0x7000, 0x100, "Interpreter"));
	struct stackpulse_raw_frame rf = { STACKPULSE_FRAME_JIT, UINT32_MAX, 0x7010, UINT32_MAX,
		                           0 };
	REQUIRE_OK(sp_writer_frame(w, &rf, &fj));
	rf.kind = STACKPULSE_FRAME_UNKNOWN;
	rf.offset = 0x1234;
	REQUIRE_OK(sp_writer_frame(w, &rf, &fu));
	uint32_t a[] = { fj, fu };
	REQUIRE_OK(sp_writer_stack_frames(w, a, 2, &s1));
	REQUIRE_OK(sp_writer_stack_frames(w, a, 1, &s2));
	REQUIRE_OK(sp_writer_sample(w, 5, t1, s1, 2, 0));
	REQUIRE_OK(sp_writer_sample(w, 6, t2, s1, 1, 0));
	REQUIRE_OK(sp_writer_sample(w, 7, t2, s2, 1, 0));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem.data, mem.len, 0, &s));
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	check_folded(p, 0,
	             "java;Interpreter 1\n"
	             "java;[unknown];Interpreter 1\n"
	             "node;[unknown];LazyCompile:*hot app.js:3 2\n");
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* An off-CPU row counts for its own time plus the time of the intervals
 * merged into it (no stack sample of their own), under its stack, with a
 * weight of 1 + their count; rows of older writers (no merged columns)
 * count for their own time. */
SP_TEST(offcpu_merged_time_counts_under_the_row_stack)
{
	sp_buf mem;
	sp_buf_init(&mem);
	sp_writer *w = NULL;
	sp_writer_opts wo = { 0, 0 };
	REQUIRE_OK(sp_writer_new(&wo, syn_sink, &mem, &w));
	sp_writer_set_offcpu_method(w, STACKPULSE_OFFCPU_SWITCH_EVENT);
	uint32_t p1, t1, fa, fb, sa, sb;
	REQUIRE_OK(sp_writer_process(w, 10, UINT32_MAX, 1, "pp", "pp", &p1));
	REQUIRE_OK(sp_writer_thread(w, p1, 10, 1, "pp", &t1));
	REQUIRE_OK(sp_writer_jitsym(w, p1, 0x7000, 0x100, "wait_a"));
	REQUIRE_OK(sp_writer_jitsym(w, p1, 0x8000, 0x100, "wait_b"));
	struct stackpulse_raw_frame rf = { STACKPULSE_FRAME_JIT, UINT32_MAX, 0x7010, UINT32_MAX,
		                           0 };
	REQUIRE_OK(sp_writer_frame(w, &rf, &fa));
	rf.offset = 0x8010;
	REQUIRE_OK(sp_writer_frame(w, &rf, &fb));
	REQUIRE_OK(sp_writer_stack_frames(w, &fa, 1, &sa));
	REQUIRE_OK(sp_writer_stack_frames(w, &fb, 1, &sb));
	REQUIRE_OK(sp_writer_offcpu(w, 100, 2000, t1, sa, STACKPULSE_OFFCPU_BLOCKED));
	REQUIRE_OK(sp_writer_flush(w));
	REQUIRE_OK(
	        sp_writer_offcpu_merged(w, 5000, 1000, t1, sb, STACKPULSE_OFFCPU_BLOCKED, 9, 9000));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem.data, mem.len, 0, &s));
	stackpulse_profile_opts o;
	stackpulse_profile_opts_init(&o);
	o.time = STACKPULSE_TIME_OFF;
	stackpulse_profile *p = NULL;
	REQUIRE_OK(stackpulse_profile_build(s, NULL, &o, &p));
	REQUIRE_EQ(stackpulse_profile_sample_count(p), 2);
	const struct stackpulse_profile_sample *a = stackpulse_profile_sample(p, 0);
	const struct stackpulse_profile_sample *b = stackpulse_profile_sample(p, 1);
	CHECK_EQ(a->value, 2000);
	CHECK_EQ(a->weight, 1);
	CHECK_EQ(b->value, 10000);
	CHECK_EQ(b->weight, 10);
	CHECK(a->stack != b->stack);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* Self and inclusive weights per function, against the known tree: a
 * recursive function counts once per sample, weights sum to the samples. */
static const struct stackpulse_profile_func_count *find_count(
        const stackpulse_profile *p, const struct stackpulse_profile_func_count *c, uint32_t n,
        const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(stackpulse_profile_string(p,
		                                     stackpulse_profile_func(p, c[i].func)->name),
		           name) == 0)
			return &c[i];
	return NULL;
}

SP_TEST(func_counts_self_and_inclusive)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	const struct stackpulse_profile_func_count *c = NULL, *again = NULL;
	uint32_t n = 0, n2 = 0;
	REQUIRE_OK(stackpulse_profile_func_counts(p, &c, &n));
	REQUIRE_OK(stackpulse_profile_func_counts(p, &again, &n2));
	CHECK(c == again); /* computed once, kept by the profile */
	CHECK_EQ(n, n2);
	CHECK_EQ(n, 10);
	struct {
		const char *name;
		uint64_t self, incl;
	} want[] = {
		{ "ladder+0x1200", 5, 5 },    { "fib", 4, 4 },           { "ladder+0x1300", 3, 3 },
		{ "ladder+0x1400", 2, 3 },    { "do_syscall_64", 1, 1 }, { "ladder+0x1000", 0, 11 },
		{ "ladder+0x1100", 0, 11 },   { "<module>", 0, 4 },      { "python3+0x500", 0, 4 },
		{ "entry_SYSCALL_64", 0, 1 },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct stackpulse_profile_func_count *f = find_count(p, c, n, want[i].name);
		if (!f) {
			sp_test_fail(__FILE__, __LINE__, "no count for %s", want[i].name);
			continue;
		}
		CHECK_EQ(f->self, want[i].self);
		CHECK_EQ(f->inclusive, want[i].incl);
	}
	uint64_t self_sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		self_sum += c[i].self;
		CHECK(c[i].inclusive >= c[i].self);
		if (i)
			CHECK(c[i - 1].self > c[i].self ||
			      (c[i - 1].self == c[i].self && c[i - 1].inclusive >= c[i].inclusive));
	}
	CHECK_EQ(self_sum, 15);
	CHECK_EQ(stackpulse_profile_func_counts(NULL, &c, &n), -EINVAL);
	stackpulse_profile_free(p);

	/* Python-only view: only the Python functions remain. */
	p = syn_profile(s, 0, STACKPULSE_VIEW_PYTHON_ONLY);
	REQUIRE_OK(stackpulse_profile_func_counts(p, &c, &n));
	CHECK_EQ(n, 2);
	const struct stackpulse_profile_func_count *fib = find_count(p, c, n, "fib");
	REQUIRE(fib != NULL);
	CHECK_EQ(fib->self, 4);
	CHECK_EQ(fib->inclusive, 4);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* Every public entry clears the thread's last error (include/stackpulse.h,
 * conventions): after a failure, a successful call of another function
 * leaves "" and code 0. The error functions, stackpulse_version and the
 * free functions leave it alone. */
static void expect_failure_then_clear(int rc, int ok_rc)
{
	(void)rc;
	CHECK_EQ(ok_rc, 0);
	CHECK_STR(stackpulse_last_error(), "");
	CHECK_EQ(stackpulse_last_error_code(), 0);
}

SP_TEST(last_error_is_cleared_by_every_entry)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);

	/* A failing open, then an accessor of another object. */
	stackpulse_spool *none = NULL;
	int rc = stackpulse_spool_open("/nonexistent/x.spool", NULL, &none);
	CHECK(rc < 0);
	CHECK(stackpulse_last_error()[0] != '\0');
	CHECK_EQ(stackpulse_last_error_code(), rc);
	/* The exempt calls keep it, so it can be printed with strerror. */
	(void)stackpulse_strerror(rc);
	(void)stackpulse_version();
	stackpulse_spool_close(NULL);
	stackpulse_profile_free(NULL);
	CHECK(stackpulse_last_error()[0] != '\0');
	expect_failure_then_clear(rc, stackpulse_spool_process_count(s) > 0 ? 0 : -1);

	/* A failing lookup, then a successful call of another kind. */
	rc = stackpulse_spool_stack_node(s, 0, NULL, NULL);
	CHECK_EQ(rc, STACKPULSE_ENOTFOUND);
	CHECK(stackpulse_last_error()[0] != '\0');
	const struct stackpulse_profile_func_count *c;
	uint32_t n;
	expect_failure_then_clear(rc, stackpulse_profile_func_counts(p, &c, &n));

	/* A failing export, then an opts initialiser. */
	rc = stackpulse_export(p, (enum stackpulse_export_format)99, NULL, NULL, NULL);
	CHECK(rc < 0);
	CHECK(stackpulse_last_error()[0] != '\0');
	stackpulse_symbolizer_opts so;
	stackpulse_symbolizer_opts_init(&so);
	expect_failure_then_clear(rc, 0);

	/* A failing build, then a symbolizer and its iteration. */
	stackpulse_profile *bad = NULL;
	stackpulse_profile_opts po;
	stackpulse_profile_opts_init(&po);
	po.view = (enum stackpulse_view)7;
	rc = stackpulse_profile_build(s, NULL, &po, &bad);
	CHECK_EQ(rc, -EINVAL);
	CHECK(stackpulse_last_error()[0] != '\0');
	stackpulse_sample_iter *it = NULL;
	expect_failure_then_clear(rc, stackpulse_sample_iter_new(s, &it));
	stackpulse_sample_iter_free(it);

	/* A failing recorder call, then a profile accessor. */
	rc = stackpulse_recorder_wait(NULL, 0);
	CHECK_EQ(rc, -EINVAL);
	expect_failure_then_clear(rc, stackpulse_profile_string_count(p) > 0 ? 0 : -1);

	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

/* The opts_init functions give what the macros give, for C++ callers
 * (field by field: padding bytes are unspecified). */
SP_TEST(opts_init_matches_the_macros)
{
	stackpulse_recorder_opts r = STACKPULSE_RECORDER_OPTS, ri;
	memset(&ri, 0x5a, sizeof(ri));
	stackpulse_recorder_opts_init(&ri);
	CHECK_EQ(ri.sz, sizeof(ri));
	CHECK(r.frequency == ri.frequency && r.stack_size == ri.stack_size &&
	      r.kernel == ri.kernel && r.children == ri.children && r.python == ri.python &&
	      r.perf_event == ri.perf_event && r.ring_kb == ri.ring_kb &&
	      r.zstd_level == ri.zstd_level && r.self_contained == ri.self_contained &&
	      r.chunk_bytes == ri.chunk_bytes && ri.cache_dir == NULL && r.realtime == ri.realtime);
	stackpulse_symbolizer_opts yi;
	memset(&yi, 0x5a, sizeof(yi));
	stackpulse_symbolizer_opts_init(&yi);
	CHECK(yi.sz == sizeof(yi) && yi.flags == 0 && !yi.debug_dirs && !yi.cache_dir);
	stackpulse_profile_opts qi;
	memset(&qi, 0x5a, sizeof(qi));
	stackpulse_profile_opts_init(&qi);
	CHECK(qi.sz == sizeof(qi) && qi.flags == 0 && qi.view == STACKPULSE_VIEW_MIXED &&
	      qi.start_ns == 0 && qi.end_ns == 0 && qi.pid == 0 && qi.tid == 0);
	stackpulse_export_opts ei;
	memset(&ei, 0x5a, sizeof(ei));
	stackpulse_export_opts_init(&ei);
	CHECK(ei.sz == sizeof(ei) && ei.flags == 0 && !ei.title);
	stackpulse_spool_open_opts oi;
	memset(&oi, 0x5a, sizeof(oi));
	stackpulse_spool_open_opts_init(&oi);
	CHECK(oi.sz == sizeof(oi) && oi.flags == 0 && !oi.buf && oi.len == 0);
	stackpulse_push_opts pi, pm = STACKPULSE_PUSH_OPTS;
	memset(&pi, 0x5a, sizeof(pi));
	stackpulse_push_opts_init(&pi);
	CHECK(pi.sz == sizeof(pi) && pi.protocol == pm.protocol && !pi.url && !pi.app &&
	      !pi.labels && pi.nlabels == 0 && pi.timeout_ms == 0 && pi.retries == pm.retries &&
	      pi.backoff_ms == 0);
	CHECK(!ei.app && !ei.labels && ei.nlabels == 0);
	stackpulse_recorder_opts_init(NULL); /* ignored */
}
