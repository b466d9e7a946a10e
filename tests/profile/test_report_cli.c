/* The report and record examples as a user meets them: exit codes and
 * messages on spools with no readable sample, each report flag's effect on
 * each output (table, --top, --threads, --folded, --svg, --pprof), flag
 * combinations that are refused, unnamed code of a stripped binary summed
 * per binary, the main binary as pprof's first mapping (`go tool pprof`),
 * the kernel note in the header, and messages for an unsupported CPython
 * and for an output that is not a regular file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "example_tools.h"
#include "fields.h"
#include "harness.h"
#include "many_samples.h"

static char record_bin[512], report_bin[512];

/* The threads workload (crunch-0..2 and main), recorded once per run. */
static const char *threads_spool(void)
{
	static char spool[512];
	tools(record_bin, report_bin, sizeof(record_bin));
	if (spool[0])
		return spool;
	char exe[512], cmd[1024];
	build_workload("threads", exe, sizeof(exe));
	snprintf(spool, sizeof(spool), "%s/threads.spool", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s 1.5", exe);
	record_cmd(record_bin, spool, cmd);
	return spool;
}

/* Runs report with @p args on @p spool: its exit status; stdout and stderr
 * are read into *out and *err (malloc'd). */
static int report(const char *spool, const char *args, char **out, char **err)
{
	char cmd[4096], o[600], e[600];
	snprintf(o, sizeof(o), "%s/report.out", sp_test_tmpdir());
	snprintf(e, sizeof(e), "%s/report.err", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "cd %s && %s %s %s >%s 2>%s", sp_test_tmpdir(), report_bin,
	         spool, args, o, e);
	int rc = sp_test_run(cmd);
	*out = sp_test_read_file(o, NULL);
	*err = sp_test_read_file(e, NULL);
	REQUIRE(*out && *err);
	return rc;
}

static int count_of(const char *text, const char *s)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, s)) != NULL; p += strlen(s))
		n++;
	return n;
}

/* Writes the first @p len bytes (0: all) of @p from (with byte @p flip inverted
 * when >= 0) to tmp/NAME; returns the path. */
static const char *variant(const char *from, const char *name, size_t len, long flip)
{
	static char path[600];
	size_t n = 0;
	char *data = sp_test_read_file(from, &n);
	REQUIRE(data != NULL);
	if (len == 0)
		len = n;
	REQUIRE(n >= len);
	if (flip >= 0 && (size_t)flip < len)
		data[flip] = (char)~data[flip];
	snprintf(path, sizeof(path), "%s/%s", sp_test_tmpdir(), name);
	FILE *f = fopen(path, "wb");
	REQUIRE(f != NULL);
	REQUIRE(fwrite(data, 1, len, f) == len);
	REQUIRE(fclose(f) == 0);
	free(data);
	return path;
}

SP_TEST(no_readable_sample_fails_with_a_reason)
{
	const char *spool = threads_spool();
	char *out, *err;
	/* A 16-byte stub: the header of a recording that never started. */
	const char *stub = variant(spool, "stub.spool", 16, -1);
	CHECK_EQ(report(stub, "", &out, &err), 1);
	CHECK(strstr(err, "no readable sample") != NULL);
	CHECK(strstr(err, "cut short before its first complete chunk") != NULL);
	CHECK_EQ(out[0], '\0'); /* No "0 samples" table. */
	free(out);
	free(err);
	/* Cut inside chunk 0. */
	const char *cut = variant(spool, "cut_60.spool", 60, -1);
	CHECK_EQ(report(cut, "--top 5", &out, &err), 1);
	CHECK(strstr(err, "no readable sample") != NULL);
	free(out);
	free(err);
	/* Chunk 0 damaged (a byte of its body flipped). */
	const char *bad = variant(spool, "damaged.spool", 0, 100);
	CHECK_EQ(report(bad, "--folded", &out, &err), 1);
	CHECK(strstr(err, "no readable sample: chunk 0") != NULL);
	CHECK_EQ(out[0], '\0');
	free(out);
	free(err);
	/* Cut inside the header: the path is said once. */
	const char *cut10 = variant(spool, "cut_10.spool", 10, -1);
	CHECK_EQ(report(cut10, "", &out, &err), 1);
	printf("    %s", err);
	CHECK(strstr(err, "input is truncated (file of 10 bytes") != NULL);
	CHECK_EQ(count_of(err, "cut_10.spool"), 1);
	free(out);
	free(err);
	/* The whole spool still reports. */
	CHECK_EQ(report(spool, "--top 3", &out, &err), 0);
	free(out);
	free(err);
}

/* By default a cut or damaged spool reports the chunks before the cut or
 * damage, with a warning; --strict refuses it (exit 1, saying why) and
 * reads a whole one as usual. */
SP_TEST(strict_refuses_cut_and_damaged_spools)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char whole[600];
	snprintf(whole, sizeof(whole), "%s/strict.spool", sp_test_tmpdir());
	REQUIRE_OK(many_samples_spool(whole, 40000, 3, 4096));
	size_t n = 0;
	char *data = sp_test_read_file(whole, &n);
	REQUIRE(data != NULL);
	free(data);
	char *out, *err;
	CHECK_EQ(report(whole, "--strict --top 3", &out, &err), 0);
	CHECK_EQ(err[0], '\0');
	free(out);
	free(err);

	const char *cut = variant(whole, "strict_cut.spool", n / 2, -1);
	CHECK_EQ(report(cut, "--top 3", &out, &err), 0);
	CHECK(strstr(err, "was cut short; reading its") != NULL);
	free(out);
	free(err);
	CHECK_EQ(report(cut, "--strict --top 3", &out, &err), 1);
	printf("    %s", err);
	CHECK(strstr(err, "was cut short") != NULL && strstr(err, "--strict refuses it") != NULL);
	CHECK_EQ(out[0], '\0');
	free(out);
	free(err);

	const char *bad = variant(whole, "strict_bad.spool", 0, (long)(n * 3 / 5));
	CHECK_EQ(report(bad, "--folded", &out, &err), 0);
	CHECK(strstr(err, "is damaged (chunk ") != NULL);
	free(out);
	free(err);
	CHECK_EQ(report(bad, "--strict --folded", &out, &err), 1);
	printf("    %s", err);
	CHECK(strstr(err, "strict_bad.spool") != NULL && strstr(err, "chunk ") != NULL);
	CHECK(strstr(err, "--strict refuses a damaged spool") != NULL);
	CHECK_EQ(out[0], '\0');
	free(out);
	free(err);

	CHECK_EQ(report(whole, "--strict --follow", &out, &err), 2);
	free(out);
	free(err);
}

/* --pid/--tid/--thread-names split the table's stacks and functions and
 * --top's rows; without them nothing is split. */
SP_TEST(split_flags_apply_to_table_and_top)
{
	const char *spool = threads_spool();
	char *out, *err;
	CHECK_EQ(report(spool, "", &out, &err), 0);
	CHECK(strstr(out, "thread/process") == NULL);
	CHECK(strstr(out, "    [threads") == NULL);
	CHECK(strstr(out, "no kernel frames: kernel frames switched off") != NULL);
	free(out);
	free(err);

	CHECK_EQ(report(spool, "--pid --tid", &out, &err), 0);
	CHECK(strstr(out, "thread/process") != NULL);
	/* Each stack ends at its root label, "[threads-PID/TID]". */
	CHECK(count_of(out, "    [threads-") >= 4);
	CHECK(strstr(out, "/") != NULL);
	free(out);
	free(err);

	CHECK_EQ(report(spool, "--top 40 --thread-names", &out, &err), 0);
	int crunch[3] = { 0, 0, 0 };
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[5], *name;
		long long self;
		if (split_fields(line, f, 5, &name) != 0 || to_ll(f[0], &self) != 0)
			continue;
		for (int k = 0; k < 3; k++) {
			char label[16], fn[16];
			snprintf(label, sizeof(label), "crunch-%d", k);
			snprintf(fn, sizeof(fn), "crunch_%d", k);
			if (strcmp(f[4], label) == 0 && strcmp(name, fn) == 0)
				crunch[k]++;
			/* A thread's row never carries another thread's function. */
			for (int j = 0; j < 3; j++) {
				char other[16];
				snprintf(other, sizeof(other), "crunch_%d", j);
				if (j != k && strcmp(f[4], label) == 0)
					CHECK(strcmp(name, other) != 0);
			}
		}
	}
	CHECK(crunch[0] == 1 && crunch[1] == 1 && crunch[2] == 1);
	free(out);
	free(err);
}

/* --lines adds source lines in the table, --top and --folded. */
SP_TEST(lines_apply_to_every_text_output)
{
	const char *spool = threads_spool();
	char *out, *err;
	CHECK_EQ(report(spool, "--top 5", &out, &err), 0);
	CHECK(strstr(out, "spin_until:") == NULL);
	free(out);
	free(err);
	CHECK_EQ(report(spool, "--top 5 --lines", &out, &err), 0);
	CHECK(strstr(out, "spin_until:") != NULL);
	free(out);
	free(err);
	CHECK_EQ(report(spool, "--lines", &out, &err), 0);
	CHECK(strstr(out, "threads.c:") != NULL);  /* Stacks: (file:line). */
	CHECK(strstr(out, "spin_until:") != NULL); /* Functions: name:line. */
	free(out);
	free(err);
	CHECK_EQ(report(spool, "--folded --lines", &out, &err), 0);
	CHECK(strstr(out, ";spin_until:") != NULL);
	free(out);
	free(err);
	CHECK_EQ(report(spool, "--svg lines.svg --lines --thread-names", &out, &err), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/lines.svg", sp_test_tmpdir());
	char *svg = sp_test_read_file(path, NULL);
	REQUIRE(svg != NULL);
	CHECK(strstr(svg, "crunch-1") != NULL);
	CHECK(strstr(svg, "spin_until:") != NULL);
	free(svg);
	free(out);
	free(err);
}

/* --threads: one row per thread, with its hottest function. */
SP_TEST(threads_breakdown)
{
	const char *spool = threads_spool();
	char *out, *err;
	CHECK_EQ(report(spool, "--threads", &out, &err), 0);
	printf("%s", out);
	long long sum = 0;
	int rows = 0, crunch = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[6], *rest;
		long long n;
		if (split_fields(line, f, 6, &rest) != 0 || to_ll(f[0], &n) != 0)
			continue;
		rows++;
		sum += n;
		CHECK_STR(f[4], "threads");
		if (strncmp(f[5], "crunch-", 7) == 0) {
			crunch++;
			CHECK(strncmp(rest, "spin_until (", 12) == 0);
		}
	}
	CHECK_EQ(rows, 4);
	CHECK_EQ(crunch, 3);
	free(out);
	free(err);
	/* The rows add up to every sample of the spool. */
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &s));
	CHECK_EQ(sum, (long long)stackpulse_spool_meta(s)->samples);
	stackpulse_spool_close(s);
}

SP_TEST(meaningless_combinations_are_refused)
{
	const char *spool = threads_spool();
	static const char *const args[] = { "--threads --pid",          "--firefox x.json --tid",
		                            "--firefox x.json --lines", "--pprof x.pb.gz --lines",
		                            "--top 3 --folded",         "--threads --svg x.svg" };
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		char *out, *err;
		CHECK_EQ(report(spool, args[i], &out, &err), 2);
		printf("    %s: %s", args[i], err);
		CHECK(strstr(err, "no meaning") != NULL || strstr(err, "choose one of") != NULL);
		free(out);
		free(err);
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/x.json", sp_test_tmpdir());
	CHECK(access(path, F_OK) != 0); /* Refused before anything was written. */
}

/* --python-only: only Python frames, and a clear failure without them. */
SP_TEST(python_only_view)
{
	const char *spool = threads_spool();
	char *out, *err;
	CHECK_EQ(report(spool, "--python-only", &out, &err), 1);
	CHECK(strstr(err, "no Python frames") != NULL);
	free(out);
	free(err);
	const char *py = "/usr/bin/python3.11";
	if (access(py, X_OK) != 0)
		sp_test_skip("/usr/bin/python3.11 is not installed");
	char pspool[600], cmd[1024];
	snprintf(pspool, sizeof(pspool), "%s/py.spool", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s %s/examples/workloads/workload.py 1", py,
	         sp_test_source_root());
	record_cmd(record_bin, pspool, cmd);
	CHECK_EQ(report(pspool, "--top 10 --python-only", &out, &err), 0);
	int rows = 0, py_rows = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4], *name;
		long long self;
		if (split_fields(line, f, 4, &name) != 0 || to_ll(f[0], &self) != 0)
			continue;
		rows++;
		py_rows += strstr(name, " [py]") != NULL;
	}
	CHECK(rows > 0);
	CHECK_EQ(py_rows, rows);
	free(out);
	free(err);
	CHECK_EQ(report(pspool, "--folded --python-only", &out, &err), 0);
	CHECK(strstr(out, ";fib (") != NULL);
	CHECK(strstr(out, "PyEval") == NULL && strstr(out, "_PyEval") == NULL);
	free(out);
	free(err);
	CHECK_EQ(report(pspool, "--folded", &out, &err), 0);
	/* The mixed view has the interpreter's native frames (the eval loop's
	 * own only where a chain is cut: paused, hardly ever). */
	CHECK(strstr(out, "Py_RunMain") != NULL);
	free(out);
	free(err);
	/* Debian's python3.11 is stripped: without its debug symbols its static
	 * functions have no names, and they are summed in one row. */
	CHECK_EQ(report(pspool, "--top 1000 --addresses", &out, &err), 0);
	int raw = count_of(out, "  python3.11+0x");
	free(out);
	free(err);
	CHECK_EQ(report(pspool, "--top 1000", &out, &err), 0);
	printf("    %d python3.11+0x rows with --addresses\n", raw);
	CHECK_EQ(count_of(out, "  python3.11+0x"), 0);
	CHECK_EQ(count_of(out, "  python3.11 [unresolved]"), raw > 0 ? 1 : 0);
	CHECK_EQ(count_of(out, "STACKPULSE_DEBUG_DIRS"), raw > 0 ? 1 : 0);
	free(out);
	free(err);
}

/* A stripped binary: its unnamed code is one "BINARY [unresolved]" row
 * with a hint on how to get names; --addresses lists the addresses. */
SP_TEST(stripped_binary_unresolved_code_is_grouped)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char exe[512], cmd[2048], spool[600];
	build_workload("ladder", exe, sizeof(exe));
	snprintf(cmd, sizeof(cmd), "cp %s %s.stripped && strip %s.stripped", exe, exe, exe);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	/* strip keeps the build-id: a symbol cache that met the unstripped
	 * ladder would name it. An empty cache of its own keeps it unnamed. */
	char cache[600];
	snprintf(cache, sizeof(cache), "%s/stripped-cache", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", cache, cache);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	REQUIRE_EQ(setenv("STACKPULSE_SYMBOL_CACHE_DIR", cache, 1), 0);
	snprintf(spool, sizeof(spool), "%s/stripped.spool", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s.stripped 1", exe);
	record_cmd(record_bin, spool, cmd);
	char *out, *err;
	CHECK_EQ(report(spool, "--top 20", &out, &err), 0);
	printf("%s", out);
	CHECK(strstr(out, "ladder.stripped+0x") == NULL);
	CHECK(strstr(out, "ladder.stripped [unresolved]") != NULL);
	CHECK_EQ(count_of(out, "STACKPULSE_DEBUG_DIRS"), 1);
	CHECK(strstr(out, "DEBUGINFOD_URLS") != NULL);
	char *save = NULL;
	long long self = -1;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4], *name;
		long long v;
		if (split_fields(line, f, 4, &name) == 0 && to_ll(f[0], &v) == 0 &&
		    strcmp(name, "ladder.stripped [unresolved]") == 0)
			self = v;
	}
	free(out);
	free(err);
	/* The ladder's work is all in its own (now unnamed) code. */
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &s));
	long long all = (long long)stackpulse_spool_meta(s)->samples;
	stackpulse_spool_close(s);
	CHECK(self * 100 >= all * 90);
	CHECK_EQ(report(spool, "--top 20 --addresses", &out, &err), 0);
	CHECK(count_of(out, "ladder.stripped+0x") >= 3);
	CHECK(strstr(out, "[unresolved]") == NULL);
	free(out);
	free(err);
	/* Folded output groups too; the hint goes to stderr there. */
	CHECK_EQ(report(spool, "--folded", &out, &err), 0);
	CHECK(strstr(out, ";ladder.stripped [unresolved] ") != NULL);
	CHECK(strstr(err, "STACKPULSE_DEBUG_DIRS") != NULL);
	free(out);
	free(err);
	unsetenv("STACKPULSE_SYMBOL_CACHE_DIR");
}

/* `go tool pprof -top` names the first mapping as the profile's file: it
 * is the threaded program, not libc. */
SP_TEST(pprof_main_binary_first)
{
	const char *spool = threads_spool();
	if (sp_test_run("command -v go >/dev/null 2>&1") != 0)
		sp_test_skip("go is not installed (Debian golang-go)");
	char *out, *err;
	CHECK_EQ(report(spool, "--pprof t.pb.gz", &out, &err), 0);
	free(out);
	free(err);
	const char *tmp = sp_test_tmpdir();
	char cmd[2048], path[600];
	snprintf(cmd, sizeof(cmd),
	         "cd %s && mkdir -p home gocache && HOME=%s/home GOCACHE=%s/gocache "
	         "GOPATH=%s/home/go GOTOOLCHAIN=local go tool pprof -top t.pb.gz >t.top 2>&1",
	         tmp, tmp, tmp, tmp);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(path, sizeof(path), "%s/t.top", tmp);
	char *top = sp_test_read_file(path, NULL);
	REQUIRE(top != NULL);
	printf("%.200s\n", top);
	CHECK(strncmp(top, "File: threads\n", 14) == 0);
	free(top);
}

/* record: an output that is not a regular file is said so; report's
 * exporters leave a device they failed to write alone. */
SP_TEST(output_not_a_regular_file)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char cmd[1024], log[600];
	snprintf(log, sizeof(log), "%s/devnull.log", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s -o /dev/null -- true 2>%s", record_bin, log);
	CHECK_EQ(sp_test_run(cmd), 1);
	char *text = sp_test_read_file(log, NULL);
	REQUIRE(text != NULL);
	printf("    %s", text);
	CHECK(strstr(text, "/dev/null is not a regular file") != NULL);
	CHECK(strstr(text, "invalid argument") == NULL);
	free(text);
	struct stat st;
	REQUIRE_EQ(stat("/dev/null", &st), 0);
	CHECK(S_ISCHR(st.st_mode));
	if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
		const char *spool = threads_spool();
		char *out, *err;
		CHECK_EQ(report(spool, "--pprof /dev/full", &out, &err), 1);
		CHECK(strstr(err, "no space left on device") != NULL);
		REQUIRE_EQ(stat("/dev/full", &st), 0);
		CHECK(S_ISCHR(st.st_mode)); /* Still the device. */
		free(out);
		free(err);
	}
}

/* An unsupported CPython (pyenv's 3.9 when installed) is recorded without
 * Python frames, with a warning that names 3.9 and the supported range. */
SP_TEST(unsupported_python_is_warned_about)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char py[600] = "", cmd[2048], log[600], spool[600];
	FILE *f = popen("ls -d \"$(pyenv root 2>/dev/null)\"/versions/3.9*/bin/python3.9 "
	                "2>/dev/null | head -n 1",
	                "r");
	if (f) {
		if (!fgets(py, sizeof(py), f))
			py[0] = '\0';
		pclose(f);
	}
	py[strcspn(py, "\n")] = '\0';
	if (!py[0] || access(py, X_OK) != 0)
		sp_test_skip("no CPython 3.9 here (pyenv install 3.9)");
	snprintf(spool, sizeof(spool), "%s/py39.spool", sp_test_tmpdir());
	snprintf(log, sizeof(log), "%s/py39.log", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "%s -F 499 -o %s -- %s -c 'import time\nt = time.time()\n"
	         "while time.time() - t < 0.5: sum(range(1000))' 2>%s",
	         record_bin, spool, py, log);
	CHECK_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(log, NULL);
	REQUIRE(text != NULL);
	printf("    %s", text);
	CHECK(strstr(text, "warning: recorded without Python frames") != NULL);
	CHECK(strstr(text, "CPython 3.9 is not supported (stackpulse reads CPython 3.10 to "
	                   "3.14)") != NULL);
	CHECK(strstr(text, "0x309") == NULL);
	free(text);
}

/* record --attach=live records a running process; bad uses are refused. */
SP_TEST(record_attach_modes)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char exe[512], cmd[2048], spool[600], log[600];
	build_workload("ladder", exe, sizeof(exe));
	snprintf(log, sizeof(log), "%s/attach.log", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s --attach=sometimes -o x.spool -p 1 2>%s", record_bin, log);
	CHECK_EQ(sp_test_run(cmd), 2);
	snprintf(cmd, sizeof(cmd), "%s --attach=live -o x.spool -- true 2>>%s", record_bin, log);
	CHECK_EQ(sp_test_run(cmd), 2);
	char *text = sp_test_read_file(log, NULL);
	REQUIRE(text != NULL);
	CHECK(strstr(text, "--attach wants stop or live, not 'sometimes'") != NULL);
	CHECK(strstr(text, "--attach applies to -p PID only") != NULL);
	free(text);
	static const char *const modes[] = { "live", "stop" };
	for (int k = 0; k < 2; k++) {
		snprintf(spool, sizeof(spool), "%s/attach-%s.spool", sp_test_tmpdir(), modes[k]);
		snprintf(
		        cmd, sizeof(cmd),
		        "%s 3 >/dev/null & P=$!; sleep 0.3; %s --attach=%s -F 499 -d 1 -o %s -p $P "
		        "2>>%s; rc=$?; { kill $P; wait $P; } 2>/dev/null; exit $rc",
		        exe, record_bin, modes[k], spool, log);
		CHECK_EQ(sp_test_run(cmd), 0);
		stackpulse_spool *s;
		REQUIRE_OK(stackpulse_spool_open(spool, NULL, &s));
		printf("    --attach=%s: %llu samples\n", modes[k],
		       (unsigned long long)stackpulse_spool_meta(s)->samples);
		CHECK(stackpulse_spool_meta(s)->samples >= 20);
		stackpulse_spool_close(s);
	}
}

/* The number before @p what on a "record: N WHAT" line of @p text, or -1. */
static long long record_count(const char *text, const char *what)
{
	for (const char *p = text; (p = strstr(p, "record: ")) != NULL; p++) {
		char *end;
		unsigned long long n = strtoull(p + 8, &end, 10);
		if (end != p + 8 && *end == ' ' && strncmp(end + 1, what, strlen(what)) == 0)
			return (long long)n;
	}
	return -1;
}

/* record's summary gives the counts after finish: the off-CPU interval of
 * a thread still asleep when the recording ends (finish writes it) is
 * among the intervals it prints, which are as many as the spool holds. */
SP_TEST(record_summary_counts_what_finish_wrote)
{
	tools(record_bin, report_bin, sizeof(record_bin));
	char cmd[2048], spool[600], log[600];
	snprintf(spool, sizeof(spool), "%s/summary.spool", sp_test_tmpdir());
	snprintf(log, sizeof(log), "%s/summary.log", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s --off-cpu -d 1 -o %s -- sleep 2 2>%s", record_bin, spool,
	         log);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(log, NULL);
	REQUIRE(text != NULL);
	printf("    %s", text);
	REQUIRE_EQ(rc, 0);
	long long intervals = record_count(text, "off-CPU intervals");
	long long samples = record_count(text, "samples");
	free(text);
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &s));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	stackpulse_offcpu_iter *it;
	REQUIRE_OK(stackpulse_offcpu_iter_new(s, &it));
	const struct stackpulse_offcpu *iv;
	uint64_t longest = 0, rows = 0;
	while (stackpulse_offcpu_iter_next(it, &iv) == 1) {
		rows++;
		if (iv->duration_ns > longest)
			longest = iv->duration_ns;
	}
	stackpulse_offcpu_iter_free(it);
	printf("    spool: %llu intervals (%llu rows), longest %.3f s, %llu samples\n",
	       (unsigned long long)m->offcpu_intervals, (unsigned long long)rows,
	       (double)longest / 1e9, (unsigned long long)m->samples);
	/* The wait in sleep 2, cut by the end of the recording after 1 s. */
	CHECK(longest >= 800000000ull);
	CHECK_EQ(intervals, (long long)m->offcpu_intervals);
	CHECK_EQ(rows, m->offcpu_intervals);
	CHECK_EQ(samples, (long long)m->samples);
	stackpulse_spool_close(s);
}
