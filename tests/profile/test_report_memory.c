/* Reports in bounded memory: a spool of many samples of three stacks,
 * reported through every aggregate output (table, --top, --threads,
 * --folded, --svg, --pprof, --otlp-file) by the report example in a child
 * process, whose peak RSS (wait4) must not grow with the sample count:
 * 6.7x the samples may add at most a small constant; nor does Firefox's,
 * which streams its samples. The profile caps
 * (max_samples, max_stacks) and the export cap (max_bytes) fail with
 * STACKPULSE_ELIMIT, and a merged profile exports as an unmerged one. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "harness.h"
#include "many_samples.h"
#include "stackpulse.h"

/* 6.7x the samples; under ASan, where report runs several times slower,
 * 7x fewer of both (the binary would pass its 300 s otherwise). */
#define SMALL (SP_TEST_ASAN ? 43000ull : 300000ull)
#define LARGE (SP_TEST_ASAN ? 286000ull : 2000000ull)
/* What 6.7x the samples may add to a report's peak RSS. One record per
 * sample (32 bytes) would add 54 MB (7.8 MB under ASan). */
#define GROWTH_KB 4096

static const char *report_path(void)
{
	static char path[512];
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	snprintf(path, sizeof(path), "%s/report", bin);
	if (access(path, X_OK) != 0)
		sp_test_skip("report is not built (zig build examples)");
	return path;
}

static const char *spool_of(uint64_t n)
{
	static char paths[2][512];
	char *p = paths[n == LARGE];
	if (!p[0]) {
		snprintf(p, 512, "%s/many_%llu.spool", sp_test_tmpdir(), (unsigned long long)n);
		REQUIRE_OK(many_samples_spool(p, n, 3, 0));
	}
	return p;
}

/* Runs report SPOOL ARGS... with stdout to a file: exit status, peak RSS. */
static int run_report(const char *spool, const char *a1, const char *a2, long *maxrss_kb)
{
	char out[600];
	snprintf(out, sizeof(out), "%s/report_memory.out", sp_test_tmpdir());
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || chdir(sp_test_tmpdir()) != 0)
			_exit(126);
		char *argv[] = { (char *)report_path(), (char *)spool, (char *)a1, (char *)a2,
			         NULL };
		if (!a1)
			argv[2] = NULL;
		execv(argv[0], argv);
		_exit(127);
	}
	int st = 0;
	struct rusage ru;
	REQUIRE(wait4(pid, &st, 0, &ru) == pid);
	*maxrss_kb = ru.ru_maxrss;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

SP_TEST(aggregate_outputs_do_not_grow_with_samples)
{
	report_path();
	static const char *const outputs[][2] = {
		{ NULL, NULL },
		{ "--top", "5" },
		{ "--threads", NULL },
		{ "--folded", NULL },
		{ "--svg", "m.svg" },
		{ "--pprof", "m.pb.gz" },
		{ "--otlp-file", "m.otlp" },
	};
	const char *small = spool_of(SMALL), *large = spool_of(LARGE);
	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
		long a = 0, b = 0;
		CHECK_EQ(run_report(small, outputs[i][0], outputs[i][1], &a), 0);
		CHECK_EQ(run_report(large, outputs[i][0], outputs[i][1], &b), 0);
		printf("    %-12s %llu samples: %ld KiB, %llu: %ld KiB\n",
		       outputs[i][0] ? outputs[i][0] : "(table)", SMALL, a, LARGE, b);
		CHECK(b - a <= GROWTH_KB);
	}
	/* Every sample is counted. */
	char path[600];
	long rss;
	CHECK_EQ(run_report(large, "--top", "3", &rss), 0);
	snprintf(path, sizeof(path), "%s/report_memory.out", sp_test_tmpdir());
	char *text = sp_test_read_file(path, NULL);
	REQUIRE(text != NULL);
	char count[64];
	snprintf(count, sizeof(count), "%llu", LARGE);
	CHECK(strstr(text, count) != NULL || strstr(text, "100.0") != NULL);
	free(text);
	CHECK_EQ(run_report(large, NULL, NULL, &rss), 0);
	text = sp_test_read_file(path, NULL);
	REQUIRE(text != NULL);
	snprintf(count, sizeof(count), "%llu samples", LARGE);
	CHECK(strstr(text, count) != NULL);
	free(text);
}

static int collect(void *ctx, const void *data, size_t len)
{
	return sp_buf_append((sp_buf *)ctx, data, len);
}

static stackpulse_profile *build(stackpulse_spool *s, uint64_t merge, uint64_t max_samples,
                                 uint32_t max_stacks, int *rc)
{
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.merge_ns = merge;
	po.max_samples = max_samples;
	po.max_stacks = max_stacks;
	stackpulse_profile *p = NULL;
	*rc = stackpulse_profile_build(s, NULL, &po, &p);
	return p;
}

/* Firefox, one entry per sample, streams them past 256K samples (below,
 * it holds them: 10 MiB at most): its peak RSS does not grow with them
 * either (one record per sample would add 12 MB). */
SP_TEST(firefox_streams_its_samples)
{
	report_path();
	char small[600], large[600];
	snprintf(small, sizeof(small), "%s/ff_small.spool", sp_test_tmpdir());
	snprintf(large, sizeof(large), "%s/ff_large.spool", sp_test_tmpdir());
	REQUIRE_OK(many_samples_spool(small, 300000, 3, 0));
	REQUIRE_OK(many_samples_spool(large, 600000, 3, 0));
	long a = 0, b = 0;
	CHECK_EQ(run_report(small, "--firefox", "ff.json", &a), 0);
	CHECK_EQ(run_report(large, "--firefox", "ff.json", &b), 0);
	printf("    --firefox 300000 samples: %ld KiB, 600000: %ld KiB\n", a, b);
	CHECK(b - a <= GROWTH_KB);
	char path[600];
	snprintf(path, sizeof(path), "%s/report_memory.out", sp_test_tmpdir());
	char *text = sp_test_read_file(path, NULL);
	REQUIRE(text != NULL);
	CHECK(strstr(text, "(600000 samples)") != NULL);
	free(text);
	/* Every sample is in the JSON: 600000 entries "[stack,time,0]". */
	snprintf(path, sizeof(path), "%s/ff.json", sp_test_tmpdir());
	size_t n = 0;
	text = sp_test_read_file(path, &n);
	REQUIRE(text != NULL);
	size_t entries = 0;
	for (const char *q = text; (q = strstr(q, "\"samples\":{")) != NULL;) {
		const char *end = strstr(q, "]}}");
		REQUIRE(end != NULL);
		/* By hand, not strstr per entry: ASan's strstr measures the
		 * whole rest of the text at every call. */
		for (; q + 3 <= end; q++)
			if (q[0] == ',' && q[1] == '0' && q[2] == ']')
				entries++;
		q = end;
	}
	CHECK_EQ(entries, 600000);
	free(text);
}

SP_TEST(caps_fail_with_elimit)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/caps.spool", sp_test_tmpdir());
	REQUIRE_OK(many_samples_spool(path, 10000, 3, 0));
	stackpulse_spool *s = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	int rc;
	stackpulse_profile *p = build(s, STACKPULSE_MERGE_ALL, 9999, 0, &rc);
	CHECK_EQ(rc, STACKPULSE_ELIMIT);
	CHECK(p == NULL);
	CHECK(strstr(stackpulse_last_error(), "max_samples") != NULL);
	p = build(s, 0, 10000, 0, &rc);
	CHECK_EQ(rc, 0);
	stackpulse_profile_free(p);
	/* Three stacks of 3..5 frames sharing their root frame: 11 nodes. */
	CHECK(build(s, 0, 0, 5, &rc) == NULL);
	CHECK_EQ(rc, STACKPULSE_ELIMIT);
	CHECK(strstr(stackpulse_last_error(), "max_stacks") != NULL);
	p = build(s, STACKPULSE_MERGE_ALL, 0, 64, &rc);
	REQUIRE_OK(rc);
	CHECK_EQ(stackpulse_profile_kept_count(p, 0), 10000);
	CHECK_EQ(stackpulse_profile_kept_count(p, 1), 0);
	/* Two threads x three stacks. */
	CHECK_EQ(stackpulse_profile_sample_count(p), 6);
	static const enum stackpulse_export_format fmts[] = {
		STACKPULSE_EXPORT_FOLDED, STACKPULSE_EXPORT_PPROF,   STACKPULSE_EXPORT_SVG,
		STACKPULSE_EXPORT_OTLP,   STACKPULSE_EXPORT_FIREFOX,
	};
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
		eo.max_bytes = 100;
		sp_buf b;
		sp_buf_init(&b);
		CHECK_EQ(stackpulse_export(p, fmts[i], &eo, collect, &b), STACKPULSE_ELIMIT);
		CHECK(strstr(stackpulse_last_error(), "100-byte cap") != NULL);
		CHECK(b.len <= 100);
		sp_buf_free(&b);
	}
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
}

/* Merged or not, the aggregate exports are the same bytes. */
SP_TEST(merged_profile_exports_the_same)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/same.spool", sp_test_tmpdir());
	REQUIRE_OK(many_samples_spool(path, 20000, 5, 4096));
	stackpulse_spool *s = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	int rc;
	stackpulse_profile *plain = build(s, 0, 0, 0, &rc);
	REQUIRE_OK(rc);
	stackpulse_profile *merged = build(s, STACKPULSE_MERGE_ALL, 0, 0, &rc);
	REQUIRE_OK(rc);
	stackpulse_profile *windows = build(s, 1000000000ull, 0, 0, &rc); /* 1 s windows */
	REQUIRE_OK(rc);
	CHECK_EQ(stackpulse_profile_sample_count(plain), 20000);
	CHECK_EQ(stackpulse_profile_sample_count(merged), 10);
	/* 10 s of samples: 10 or 11 windows of each thread and stack. */
	CHECK(stackpulse_profile_sample_count(windows) >= 100);
	CHECK(stackpulse_profile_sample_count(windows) <= 110);
	static const enum stackpulse_export_format fmts[] = {
		STACKPULSE_EXPORT_FOLDED,
		STACKPULSE_EXPORT_SVG,
		STACKPULSE_EXPORT_PPROF,
		STACKPULSE_EXPORT_OTLP,
	};
	static const uint32_t flags[] = { 0, STACKPULSE_EXPORT_PID | STACKPULSE_EXPORT_TID };
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		for (size_t f = 0; f < 2; f++) {
			stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
			eo.flags = flags[f];
			sp_buf a, b, c;
			sp_buf_init(&a);
			sp_buf_init(&b);
			sp_buf_init(&c);
			REQUIRE_OK(stackpulse_export(plain, fmts[i], &eo, collect, &a));
			REQUIRE_OK(stackpulse_export(merged, fmts[i], &eo, collect, &b));
			REQUIRE_OK(stackpulse_export(windows, fmts[i], &eo, collect, &c));
			CHECK(a.len > 0);
			CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
			CHECK(a.len == c.len && memcmp(a.data, c.data, a.len) == 0);
			sp_buf_free(&a);
			sp_buf_free(&b);
			sp_buf_free(&c);
		}
	}
	/* From the spool: the same bytes again, Firefox included (streamed). */
	static const enum stackpulse_export_format all[] = {
		STACKPULSE_EXPORT_FOLDED, STACKPULSE_EXPORT_SVG,     STACKPULSE_EXPORT_PPROF,
		STACKPULSE_EXPORT_OTLP,   STACKPULSE_EXPORT_FIREFOX,
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		sp_buf a, b;
		sp_buf_init(&a);
		sp_buf_init(&b);
		REQUIRE_OK(stackpulse_export(plain, all[i], NULL, collect, &a));
		REQUIRE_OK(stackpulse_export_spool(s, NULL, NULL, all[i], NULL, collect, &b));
		CHECK(a.len > 0);
		CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
		sp_buf_free(&a);
		sp_buf_free(&b);
	}
	/* Past 256K samples Firefox streams from the spool: the same bytes. */
	char big[600];
	snprintf(big, sizeof(big), "%s/same_big.spool", sp_test_tmpdir());
	REQUIRE_OK(many_samples_spool(big, 300000, 3, 0));
	stackpulse_spool *sb = NULL;
	REQUIRE_OK(stackpulse_spool_open(big, NULL, &sb));
	stackpulse_profile *pb = build(sb, 0, 0, 0, &rc);
	REQUIRE_OK(rc);
	{
		sp_buf a, b;
		sp_buf_init(&a);
		sp_buf_init(&b);
		REQUIRE_OK(stackpulse_export(pb, STACKPULSE_EXPORT_FIREFOX, NULL, collect, &a));
		REQUIRE_OK(stackpulse_export_spool(sb, NULL, NULL, STACKPULSE_EXPORT_FIREFOX, NULL,
		                                   collect, &b));
		CHECK(a.len > 300000);
		CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
		sp_buf_free(&a);
		sp_buf_free(&b);
	}
	stackpulse_profile_free(pb);
	stackpulse_spool_close(sb);
	const struct stackpulse_profile_func_count *ca, *cb;
	uint32_t na, nb;
	REQUIRE_OK(stackpulse_profile_func_counts(plain, &ca, &na));
	REQUIRE_OK(stackpulse_profile_func_counts(merged, &cb, &nb));
	REQUIRE_EQ(na, nb);
	CHECK(memcmp(ca, cb, na * sizeof(*ca)) == 0);
	stackpulse_profile_free(plain);
	stackpulse_profile_free(merged);
	stackpulse_profile_free(windows);
	stackpulse_spool_close(s);
}
