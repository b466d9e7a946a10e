/* Pushing profiles to backends, checked by real decoders on loopback:
 * tests/profile/push_server.py parses OTLP bodies with the
 * opentelemetry-proto package and hands Pyroscope bodies to
 * `go tool pprof -raw`. Also the failure paths: 5xx then 2xx (retried),
 * 4xx, a server that never answers, and a refused connection. */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "harness.h"
#include "push_util.h"
#include "stackpulse.h"
#include "synth.h"

static const char *const labels[] = { "env=test", "region=eu-1" };

static stackpulse_push_opts push_opts(int port, enum stackpulse_push_protocol proto)
{
	static char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	stackpulse_push_opts o = STACKPULSE_PUSH_OPTS;
	o.protocol = proto;
	o.url = url;
	o.app = "app1";
	o.labels = labels;
	o.nlabels = 2;
	o.timeout_ms = 5000;
	o.backoff_ms = 50;
	return o;
}

/* The synthetic profile: 15 samples at 100 Hz, 11 on thread "ladder"
 * (native and kernel frames), 4 on "worker" (Python fib under <module>). */
static stackpulse_profile *fixture(sp_buf *mem)
{
	stackpulse_spool *s = syn_spool(mem, NULL);
	stackpulse_profile *p = syn_profile(s, 0, STACKPULSE_VIEW_MIXED);
	stackpulse_spool_close(s);
	return p;
}

#ifndef SP_HAVE_CURL

SP_TEST(push_without_curl_says_so)
{
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	stackpulse_push_opts o = push_opts(9, STACKPULSE_PUSH_OTLP);
	CHECK_EQ(stackpulse_push(p, &o), STACKPULSE_EUNSUPPORTED);
	CHECK(strstr(stackpulse_last_error(), "-Dcurl=false") != NULL);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

#else

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 1 when @p text has the line @p line. */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
	return 0;
}

#define CHECK_LINE(text, line)                                                                     \
	do {                                                                                       \
		if (!has_line((text), (line)))                                                     \
			sp_test_fail(__FILE__, __LINE__, "no line \"%s\" in:\n%s", (line),         \
			             (text));                                                      \
	} while (0)

static char *log_of(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/log", dir);
	return sp_test_read_file(path, NULL);
}

static int count_lines(const char *text)
{
	int n = 0;
	for (const char *p = text; p && *p; p++)
		n += *p == '\n';
	return n;
}

SP_TEST(otlp_push_decodes_with_opentelemetry_proto)
{
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	const char *dir = server_dir("otlp");
	int port = start_server(dir, "");
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_OTLP);
	REQUIRE_OK(stackpulse_push(p, &o));
	char *s = summary(dir);
	CHECK(strstr(s, "error ") == NULL);
	CHECK_LINE(s, "total 15");
	CHECK_LINE(s, "incl fib 4");
	CHECK_LINE(s, "incl <module> 4");
	CHECK_LINE(s, "self fib 4");
	CHECK_LINE(s, "incl do_syscall_64 1");
	CHECK_LINE(s, "self do_syscall_64 1");
	CHECK_LINE(s, "incl entry_SYSCALL_64 1");
	CHECK_LINE(s, "thread ladder 11");
	CHECK_LINE(s, "thread worker 4");
	CHECK_LINE(s, "attr service.name app1");
	CHECK_LINE(s, "attr env test");
	CHECK_LINE(s, "attr region eu-1");
	CHECK_LINE(s, "attr host.name testhost");
	CHECK_LINE(s, "scope stackpulse");
	CHECK_LINE(s, "sample_type samples/count");
	CHECK_LINE(s, "period_type cpu/nanoseconds");
	CHECK_LINE(s, "period 10000000");
	CHECK_LINE(s, "time 1700000000000000000");
	/* 15 samples 10 ms apart: 140 ms from first to last. */
	CHECK_LINE(s, "duration 140000000");
	char *log = log_of(dir);
	REQUIRE(log != NULL);
	CHECK(strstr(log, "POST /v1development/profiles application/x-protobuf 200") != NULL);
	free(log);
	free(s);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

SP_TEST(pyroscope_push_decodes_with_go_tool_pprof)
{
	if (!sp_test_have_program("go"))
		sp_test_skip("go is not installed (Debian golang-go provides `go tool pprof`)");
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	const char *dir = server_dir("pyroscope");
	int port = start_server(dir, "--deadline 120");
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_PYROSCOPE);
	REQUIRE_OK(stackpulse_push(p, &o));
	char *s = summary(dir);
	CHECK(strstr(s, "error ") == NULL);
	CHECK_LINE(s, "total 15");
	CHECK_LINE(s, "incl fib 4");
	CHECK_LINE(s, "incl <module> 4");
	CHECK_LINE(s, "self do_syscall_64 1");
	CHECK_LINE(s, "period_type cpu/nanoseconds");
	CHECK_LINE(s, "query name app1.cpu{env=test,region=eu-1}");
	CHECK_LINE(s, "query format pprof");
	CHECK_LINE(s, "query sampleRate 100");
	/* Recording started at 1700000000 s; the samples span 0.14 s. */
	CHECK_LINE(s, "query from 1700000000");
	CHECK_LINE(s, "query until 1700000001");
	char *log = log_of(dir);
	REQUIRE(log != NULL);
	CHECK(strstr(log, " application/octet-stream 200") != NULL);
	free(log);
	free(s);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

SP_TEST(push_retries_a_5xx_then_succeeds)
{
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	const char *dir = server_dir("retry");
	int port = start_server(dir, "--script 500,503,200 --requests 3");
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_OTLP);
	REQUIRE_OK(stackpulse_push(p, &o));
	char *s = summary(dir);
	CHECK_LINE(s, "total 15");
	char *log = log_of(dir);
	REQUIRE(log != NULL);
	CHECK_EQ(count_lines(log), 3);
	CHECK(strstr(log, " 500\n") != NULL && strstr(log, " 503\n") != NULL);
	free(log);
	free(s);

	/* Retries used up: the last 5xx is the error. */
	dir = server_dir("retry_out");
	port = start_server(dir, "--script 502 --requests 2");
	o = push_opts(port, STACKPULSE_PUSH_OTLP);
	o.retries = 1;
	CHECK_EQ(stackpulse_push(p, &o), -EPROTO);
	CHECK(strstr(stackpulse_last_error(), "HTTP 502") != NULL);
	CHECK(strstr(stackpulse_last_error(), "after every retry") != NULL);
	log = log_of(dir);
	CHECK(log && count_lines(log) == 2);
	free(log);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

SP_TEST(push_fails_clearly_on_4xx_without_retrying)
{
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	const char *dir = server_dir("bad_request");
	int port = start_server(dir, "--script 400 --deadline 5");
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_PYROSCOPE);
	CHECK_EQ(stackpulse_push(p, &o), -EPROTO);
	CHECK(strstr(stackpulse_last_error(), "HTTP 400") != NULL);
	CHECK(strstr(stackpulse_last_error(), "refused with 400") != NULL);
	char *log = log_of(dir);
	CHECK(log && count_lines(log) == 1);
	free(log);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

SP_TEST(push_times_out_on_a_server_that_never_answers)
{
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	const char *dir = server_dir("hang");
	int port = start_server(dir, "--hang --deadline 10");
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_OTLP);
	o.timeout_ms = 700;
	double t0 = now_s();
	CHECK_EQ(stackpulse_push(p, &o), -ETIMEDOUT);
	double took = now_s() - t0;
	/* One attempt only: a timeout is not retried. A loose bound, the
	 * point is that the call returns. */
	CHECK(took < 8.0);
	CHECK(strstr(stackpulse_last_error(), "did not answer in time") != NULL);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

SP_TEST(push_reports_a_refused_connection)
{
	/* A port that was free a moment ago: bind, read it, close. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	socklen_t len = sizeof(a);
	REQUIRE(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	stackpulse_push_opts o = push_opts(ntohs(a.sin_port), STACKPULSE_PUSH_PYROSCOPE);
	CHECK_EQ(stackpulse_push(p, &o), -ECONNREFUSED);
	CHECK(strstr(stackpulse_last_error(), "cannot connect") != NULL);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

/* libcurl and the libraries it pulls in are loaded by the first push, not
 * at the start of every program built with push support: the examples
 * (linked with this build's library) load no libcurl before main, nor
 * libdebuginfod (which needs libcurl; a build with debuginfod loads it at
 * the first debuginfod query), and after a push this process has libcurl. */
SP_TEST(libcurl_is_loaded_by_the_first_push_only)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	const char *tools[] = { "record", "report" };
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "ldd '%s/%s' 2>&1", bindir, tools[i]);
		FILE *f = popen(cmd, "r");
		REQUIRE(f != NULL);
		char line[512];
		int libs = 0, curl = 0, dif = 0;
		while (fgets(line, sizeof(line), f)) {
			libs++;
			curl += strstr(line, "libcurl") != NULL;
			dif += strstr(line, "libdebuginfod") != NULL;
		}
		CHECK_EQ(pclose(f), 0);
		printf("%s: %d libraries at start, libcurl %d, libdebuginfod %d\n", tools[i], libs,
		       curl, dif);
		CHECK(libs >= 3); /* libc, the loader, libdw at least: ldd did answer. */
		CHECK_EQ(curl, 0);
		CHECK_EQ(dif, 0);
	}
	const char *dir = server_dir("lazycurl");
	int port = start_server(dir, "");
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	stackpulse_push_opts o = push_opts(port, STACKPULSE_PUSH_OTLP);
	CHECK_OK(stackpulse_push(p, &o));
	void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_NOLOAD);
	CHECK(lib != NULL);
	if (lib)
		dlclose(lib);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

#endif

SP_TEST(push_rejects_bad_options)
{
	sp_buf mem;
	stackpulse_profile *p = fixture(&mem);
	stackpulse_push_opts o = push_opts(9, STACKPULSE_PUSH_OTLP);
	o.url = "ftp://127.0.0.1/";
	CHECK_EQ(stackpulse_push(p, &o), -EINVAL);
	o = push_opts(9, STACKPULSE_PUSH_OTLP);
	o.app = "app name";
	CHECK_EQ(stackpulse_push(p, &o), -EINVAL);
	static const char *const bad[] = { "novalue" };
	o = push_opts(9, STACKPULSE_PUSH_OTLP);
	o.labels = bad;
	o.nlabels = 1;
	CHECK_EQ(stackpulse_push(p, &o), -EINVAL);
	CHECK(strstr(stackpulse_last_error(), "novalue") != NULL);
	o = push_opts(9, STACKPULSE_PUSH_OTLP);
	o.protocol = (enum stackpulse_push_protocol)7;
	CHECK_EQ(stackpulse_push(p, &o), -EINVAL);
	CHECK_EQ(stackpulse_push(p, NULL), -EINVAL);
	CHECK_EQ(stackpulse_push(NULL, &o), -EINVAL);
	stackpulse_profile_free(p);
	sp_buf_free(&mem);
}

#ifdef SP_HAVE_CURL
/* The examples end to end: record a busy shell loop, then `report --otlp`
 * and `report --push`; a refused push exits 1 and leaves the spool as it
 * was. */
SP_TEST(report_example_pushes_a_recording)
{
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	const char *tmp = sp_test_tmpdir();
	char spool[512], cmd[4096], out[600];
	snprintf(spool, sizeof(spool), "%s/busy.spool", tmp);
	snprintf(cmd, sizeof(cmd),
	         "%s/record -F 499 --kernel=off -o %s -- sh -c 'i=0; while [ $i -lt 400000 ]; do "
	         "i=$((i+1)); done' >%s.log 2>&1",
	         bin, spool, spool);
	REQUIRE_EQ(sp_test_run(cmd), 0);

	/* The sample count report sees, from its folded output. */
	snprintf(out, sizeof(out), "%s/busy.folded", tmp);
	snprintf(cmd, sizeof(cmd), "%s/report %s --folded >%s", bin, spool, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *folded = sp_test_read_file(out, NULL);
	REQUIRE(folded != NULL);
	long long total = 0;
	for (char *l = strtok(folded, "\n"); l; l = strtok(NULL, "\n")) {
		char *sp = strrchr(l, ' ');
		if (sp)
			total += strtoll(sp + 1, NULL, 10);
	}
	free(folded);
	REQUIRE(total > 20);

	const char *dir = server_dir("report_otlp");
	int port = start_server(dir, "");
	snprintf(cmd, sizeof(cmd),
	         "%s/report %s --otlp http://127.0.0.1:%d --app busy --label host=ci >%s/out 2>&1",
	         bin, spool, port, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *s = summary(dir);
	char want[64];
	snprintf(want, sizeof(want), "total %lld", total);
	CHECK_LINE(s, want);
	CHECK_LINE(s, "attr service.name busy");
	CHECK_LINE(s, "attr host ci");
	CHECK(strstr(s, "error ") == NULL);
	CHECK(strstr(s, "\nthread sh ") != NULL);
	free(s);

	/* A 400: exit status 1, a message naming it, the spool untouched. */
	size_t before_len = 0, after_len = 0;
	char *before = sp_test_read_file(spool, &before_len);
	REQUIRE(before != NULL);
	dir = server_dir("report_400");
	port = start_server(dir, "--script 400 --deadline 5");
	snprintf(cmd, sizeof(cmd),
	         "%s/report %s --push http://127.0.0.1:%d --app busy >%s/out 2>&1", bin, spool,
	         port, dir);
	CHECK_EQ(sp_test_run(cmd), 1);
	snprintf(out, sizeof(out), "%s/out", dir);
	char *msg = sp_test_read_file(out, NULL);
	CHECK(msg && strstr(msg, "HTTP 400") != NULL);
	free(msg);
	char *after = sp_test_read_file(spool, &after_len);
	CHECK(after && after_len == before_len && memcmp(before, after, before_len) == 0);
	free(before);
	free(after);
}
#endif

#ifdef SP_HAVE_CURL
/* Builds tests/record/targets/ladder.c (leaf <- middle <- entry <- main)
 * with -g into the test directory; returns its path. */
static const char *ladder_target(void)
{
	static char bin[600];
	if (!bin[0]) {
		char cmd[1600];
		snprintf(bin, sizeof(bin), "%s/push_ladder", sp_test_tmpdir());
		snprintf(cmd, sizeof(cmd),
		         "gcc -O2 -g -fomit-frame-pointer -o '%s' "
		         "'%s/tests/record/targets/ladder.c'",
		         bin, sp_test_source_root());
		REQUIRE_EQ(sp_test_run(cmd), 0);
	}
	return bin;
}

/* The value of the first line of @p text that starts with @p key ("total "),
 * or -1. */
static long long line_value(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, n) == 0)
			return strtoll(p + n, NULL, 10);
	return -1;
}

/* Samples in spool @p path, or -1 when it does not open. */
static long long spool_samples(const char *path)
{
	stackpulse_spool *sp = NULL;
	if (stackpulse_spool_open(path, NULL, &sp) != 0)
		return -1;
	long long n = (long long)stackpulse_spool_meta(sp)->samples;
	stackpulse_spool_close(sp);
	return n;
}

/* Runs `record ARGS -o DIR/w.spool -- ladder SECONDS` against the server of
 * @p dir, then stops the server; returns record's output (printed) and
 * its exit status in *rc. */
static char *record_rotating(const char *dir, const char *args, const char *seconds, int *rc)
{
	char cmd[4096], path[700];
	snprintf(cmd, sizeof(cmd), "%s/record %s -o %s/w.spool -- %s %s >%s/record.out 2>&1",
	         getenv("SP_BIN_DIR"), args, dir, ladder_target(), seconds, dir);
	*rc = sp_test_run(cmd);
	snprintf(path, sizeof(path), "%s/stop", dir);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "%s/record.out", dir);
	char *out = sp_test_read_file(path, NULL);
	REQUIRE(out != NULL);
	fprintf(stderr, "%s", out);
	return out;
}

/* The pushes a `record --rotate` run in @p dir made (record's output
 * @p out): one per window with samples, in window order, each decoded with
 * the window's own total, the app name and label, the ladder's names, and
 * a start later than the window before. */
static void check_window_pushes(const char *dir, const char *out, int pyroscope)
{
	int windows = 0, pushed = 0;
	long long total = 0, leaf = 0, prev_start = -1;
	char path[700];
	for (int i = 1; i < 100; i++) {
		snprintf(path, sizeof(path), "%s/w.spool.%04d", dir, i);
		long long n = spool_samples(path);
		if (n < 0)
			break;
		windows++;
		if (n == 0)
			continue;
		char sp[600];
		snprintf(sp, sizeof(sp), "%s/summary-%d", dir, pushed);
		char *s = sp_test_read_file(sp, NULL);
		if (!s) {
			sp_test_fail(__FILE__, __LINE__, "window %d (%lld samples): no push %d", i,
			             n, pushed);
			break;
		}
		pushed++;
		CHECK(strstr(s, "error ") == NULL);
		CHECK_EQ(line_value(s, "total "), n);
		if (pyroscope) {
			CHECK_LINE(s, "query name rot.cpu{env=ci}");
			CHECK_LINE(s, "query format pprof");
			CHECK_LINE(s, "query sampleRate 499");
		} else {
			CHECK_LINE(s, "attr service.name rot");
			CHECK_LINE(s, "attr env ci");
		}
		long long start = line_value(s, pyroscope ? "query from " : "time ");
		CHECK(start > prev_start);
		prev_start = start;
		long long l = line_value(s, "incl leaf ");
		if (l > 0)
			leaf += l;
		total += n;
		free(s);
	}
	fprintf(stderr, "    %d windows, %d pushed, %lld samples, %lld in leaf\n", windows, pushed,
	        total, leaf);
	CHECK(windows >= 3);
	char *log = log_of(dir);
	REQUIRE(log != NULL);
	CHECK_EQ(count_lines(log), pushed);
	free(log);
	char want[64];
	snprintf(want, sizeof(want), "%d pushed, 0 failed", pushed);
	CHECK(strstr(out, want) != NULL);
	CHECK(total >= 150);
	CHECK(leaf * 100 >= total * 90);
}

/* `record --rotate --push`, the minimal agent: one Pyroscope push per
 * window with samples, each decoded by `go tool pprof`; windows stay on
 * disk. */
SP_TEST(record_rotate_pushes_each_window)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	if (!sp_test_have_program("go"))
		sp_test_skip("go is not installed (Debian golang-go provides `go tool pprof`)");
	const char *dir = server_dir("rotate_push");
	int port = start_server(dir, "--requests 1000 --deadline 300");
	char args[256];
	snprintf(args, sizeof(args),
	         "-F 499 --rotate 1 --push http://127.0.0.1:%d --app rot --label env=ci", port);
	int rc = 0;
	char *out = record_rotating(dir, args, "3.2", &rc);
	CHECK_EQ(rc, 0);
	check_window_pushes(dir, out, 1);
	free(out);
}

/* The same with `--otlp`: each window's ExportProfilesServiceRequest
 * parsed by opentelemetry-proto. */
SP_TEST(record_rotate_otlp_pushes_each_window)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	const char *dir = server_dir("rotate_otlp");
	int port = start_server(dir, "--requests 1000 --deadline 300");
	char args[256];
	snprintf(args, sizeof(args),
	         "-F 499 --rotate 0.7 --otlp http://127.0.0.1:%d --app rot --label env=ci", port);
	int rc = 0;
	char *out = record_rotating(dir, args, "2.5", &rc);
	CHECK_EQ(rc, 0);
	check_window_pushes(dir, out, 0);
	free(out);
}

/* Off-CPU time of spool @p path, nanoseconds: every interval (and those
 * merged into it); *samples gets its on-CPU samples. -1 when it does not
 * open. */
static long long spool_offcpu_ns(const char *path, long long *samples)
{
	stackpulse_spool *sp = NULL;
	if (stackpulse_spool_open(path, NULL, &sp) != 0)
		return -1;
	*samples = (long long)stackpulse_spool_meta(sp)->samples;
	stackpulse_offcpu_iter *it = NULL;
	REQUIRE_OK(stackpulse_offcpu_iter_new(sp, &it));
	const struct stackpulse_offcpu *iv;
	long long ns = 0;
	while (stackpulse_offcpu_iter_next(it, &iv) == 1)
		ns += (long long)(iv->duration_ns + iv->merged_ns);
	stackpulse_offcpu_iter_free(it);
	stackpulse_spool_close(sp);
	return ns;
}

/* `record --off-cpu --rotate --otlp` of a process that mostly sleeps: the
 * windows after its start-up hold off-CPU intervals only, and each is
 * pushed in wall-clock time, holding every interval's time. */
SP_TEST(record_rotate_pushes_offcpu_only_windows)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	if (geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	const char *py = "/usr/bin/python3.11";
	if (access(py, X_OK) != 0)
		sp_test_skip("/usr/bin/python3.11 is not installed (Debian python3.11)");
	const char *dir = server_dir("rotate_offcpu");
	int port = start_server(dir, "--requests 1000 --deadline 300");
	char cmd[4096], path[700];
	snprintf(cmd, sizeof(cmd),
	         "%s/record --off-cpu --rotate 0.5 --otlp http://127.0.0.1:%d --app nap "
	         "-o %s/w.spool -- %s -c 'import time\ndef napper():\n"
	         "    for _ in range(25): time.sleep(0.1)\nnapper()' >%s/record.out 2>&1",
	         bindir, port, dir, py, dir);
	int rc = sp_test_run(cmd);
	snprintf(path, sizeof(path), "%s/stop", dir);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "%s/record.out", dir);
	char *out = sp_test_read_file(path, NULL);
	REQUIRE(out != NULL);
	fprintf(stderr, "%s", out);
	CHECK_EQ(rc, 0);
	int windows = 0, pushed = 0, offcpu_only = 0;
	for (int i = 1; i < 100; i++) {
		long long samples = 0;
		snprintf(path, sizeof(path), "%s/w.spool.%04d", dir, i);
		long long ns = spool_offcpu_ns(path, &samples);
		if (ns < 0)
			break;
		windows++;
		if (samples == 0 && ns == 0)
			continue; /* Nothing to push. */
		char sp[600];
		snprintf(sp, sizeof(sp), "%s/summary-%d", dir, pushed);
		char *s = sp_test_read_file(sp, NULL);
		if (!s) {
			sp_test_fail(__FILE__, __LINE__,
			             "window %d (%lld samples, %lld ns off-CPU): "
			             "no push %d",
			             i, samples, ns, pushed);
			break;
		}
		pushed++;
		CHECK(strncmp(s, "error ", 6) != 0 && strstr(s, "\nerror ") == NULL);
		CHECK_LINE(s, "sample_type wall/nanoseconds");
		CHECK_LINE(s, "attr service.name nap");
		if (samples == 0) {
			/* Wall-clock time of intervals only: all of their time. */
			offcpu_only++;
			CHECK_EQ(line_value(s, "total "), ns);
			CHECK(line_value(s, "incl napper ") > 0);
		}
		free(s);
	}
	fprintf(stderr, "    %d windows, %d pushed, %d of them off-CPU only\n", windows, pushed,
	        offcpu_only);
	CHECK(windows >= 4);
	CHECK(offcpu_only >= 2); /* 2.5 s asleep in 0.5 s windows. */
	char want[64];
	snprintf(want, sizeof(want), "%d pushed, 0 failed", pushed);
	CHECK(strstr(out, want) != NULL);
	free(out);
}

/* A backend that refuses every push (400) or is not there: each window's
 * push fails with a message, recording goes on to the end, every window
 * file stays complete, and record exits 1. */
SP_TEST(record_rotate_keeps_windows_when_pushes_fail)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	const char *dir = server_dir("rotate_400");
	int port = start_server(dir, "--script 400 --requests 1000 --deadline 120");
	char args[256], path[700];
	snprintf(args, sizeof(args), "-F 499 --rotate 0.5 --otlp http://127.0.0.1:%d", port);
	int rc = 0;
	char *out = record_rotating(dir, args, "2", &rc);
	CHECK_EQ(rc, 1);
	int windows = 0, nonempty = 0;
	long long total = 0;
	for (int i = 1; i < 100; i++) {
		snprintf(path, sizeof(path), "%s/w.spool.%04d", dir, i);
		long long n = spool_samples(path);
		if (n < 0)
			break;
		windows++;
		nonempty += n > 0;
		total += n;
		char want[128];
		snprintf(want, sizeof(want), "push of window %d (%s kept)", i, path);
		if (n > 0 && strstr(out, want) == NULL)
			sp_test_fail(__FILE__, __LINE__, "no failed push of window %d", i);
	}
	CHECK(windows >= 3);
	CHECK(total >= 100);
	CHECK(strstr(out, "HTTP 400") != NULL);
	char want[64];
	snprintf(want, sizeof(want), "0 pushed, %d failed", nonempty);
	CHECK(strstr(out, want) != NULL);
	/* Recording went on for the whole run: the summary counts every window. */
	snprintf(want, sizeof(want), "-> %d windows", windows);
	CHECK(strstr(out, want) != NULL);
	free(out);
}
#endif
