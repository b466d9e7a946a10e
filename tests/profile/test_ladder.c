/* End to end with the example programs: build a workload with cc, record it
 * with zig-out/bin/record (SP_BIN_DIR), and check report's outputs: the
 * folded stacks of the ladder are exact, `go tool pprof` agrees with our top
 * table, the SVG and the Firefox JSON parse, and named threads root their
 * stacks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "example_tools.h"
#include "fields.h"
#include "harness.h"
#include "stackpulse.h"

SP_TEST(ladder_folded_exact_stacks)
{
	char record[512], report[512], exe[512], spool[512], out[512], cmd[4096];
	tools(record, report, sizeof(record));
	build_workload("ladder", exe, sizeof(exe));
	snprintf(spool, sizeof(spool), "%s/ladder.spool", sp_test_tmpdir());
	snprintf(out, sizeof(out), "%s/ladder.folded", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s 3", exe);
	record_cmd(record, spool, cmd);
	snprintf(cmd, sizeof(cmd), "%s %s --folded >%s", report, spool, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);

	static const char *const tails[3] = { ";main;ladder_run;work_a", ";main;ladder_run;work_b",
		                              ";main;ladder_run;work_c" };
	long long count[3] = { 0, 0, 0 }, in_run = 0, all = 0;
	char prefix[3][1024] = { "", "", "" };
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		REQUIRE(sp != NULL);
		*sp = '\0';
		long long n = strtoll(sp + 1, NULL, 10);
		CHECK(n > 0);
		all += n;
		CHECK(strncmp(line, "ladder;", 7) == 0); /* Rooted at the process name. */
		if (!strstr(line, ";ladder_run"))
			continue;
		in_run += n;
		size_t len = strlen(line);
		for (int k = 0; k < 3; k++) {
			size_t tl = strlen(tails[k]);
			if (len >= tl && strcmp(line + len - tl, tails[k]) == 0) {
				count[k] += n;
				/* Each leaf has exactly one stack: the same path every time. */
				CHECK(prefix[k][0] == '\0');
				snprintf(prefix[k], sizeof(prefix[k]), "%.*s", (int)(len - tl),
				         line);
			} else if (strstr(line, tails[k])) {
				fprintf(stderr, "    unexpected stack: %s\n", line);
				CHECK(0);
			}
		}
	}
	long long exact = count[0] + count[1] + count[2];
	fprintf(stderr, "    %lld samples, %lld in ladder_run: a=%lld b=%lld c=%lld\n", all, in_run,
	        count[0], count[1], count[2]);
	/* A loaded machine gives the target little CPU; shares need ~50. */
	if (in_run < 50)
		free(text);
	REQUIRE(in_run >= 50);
	CHECK(exact * 100 >= in_run * 97); /* Nearly all are the three exact stacks. */
	CHECK(in_run * 100 >= all * 90);   /* And the run dominates the process. */
	CHECK(strcmp(prefix[0], prefix[1]) == 0 && strcmp(prefix[1], prefix[2]) == 0);
	double a = (double)count[0] / (double)exact, b = (double)count[1] / (double)exact,
	       c = (double)count[2] / (double)exact;
	CHECK(a > 0.40 && a < 0.60);
	CHECK(b > 0.20 && b < 0.40);
	CHECK(c > 0.10 && c < 0.30);
	free(text);

	/* --pid and --tid name the root "ladder-PID/TID". */
	snprintf(cmd, sizeof(cmd), "%s %s --folded --pid --tid >%s", report, spool, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	int pid = 0, tid = 0;
	if (strncmp(text, "ladder-", 7) == 0) {
		char *slash = NULL, *semi = NULL;
		pid = (int)strtol(text + 7, &slash, 10);
		if (slash && *slash == '/')
			tid = (int)strtol(slash + 1, &semi, 10);
		CHECK(semi && *semi == ';');
	}
	CHECK(pid > 0 && pid == tid);
	free(text);
}

/* Our top table (report --top) against `go tool pprof -top` of report --pprof. */
SP_TEST(ladder_pprof_agrees_with_top)
{
	char record[512], report[512], exe[512], spool[512], cmd[4096];
	tools(record, report, sizeof(record));
	if (sp_test_run("command -v go >/dev/null 2>&1") != 0)
		sp_test_skip("go is not installed (Debian golang-go)");
	const char *tmp = sp_test_tmpdir();
	build_workload("ladder", exe, sizeof(exe));
	snprintf(spool, sizeof(spool), "%s/ladder2.spool", tmp);
	snprintf(cmd, sizeof(cmd), "%s 1.5", exe);
	record_cmd(record, spool, cmd);
	snprintf(cmd, sizeof(cmd),
	         "%s %s --top 10 >%s/top.txt && %s %s --pprof %s/l.pb.gz >/dev/null && "
	         "%s %s --svg %s/l.svg >/dev/null && %s %s --firefox %s/l.json >/dev/null",
	         report, spool, tmp, report, spool, tmp, report, spool, tmp, report, spool, tmp);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(cmd, sizeof(cmd),
	         "cd %s && mkdir -p home gocache && HOME=%s/home GOCACHE=%s/gocache "
	         "GOPATH=%s/home/go "
	         "GOTOOLCHAIN=local go tool pprof -top -nodecount=1000 -nodefraction=0 "
	         "-edgefraction=0 l.pb.gz >pprof.txt 2>pprof.err",
	         tmp, tmp, tmp, tmp);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/top.txt", tmp);
	char *ours = sp_test_read_file(path, NULL);
	snprintf(path, sizeof(path), "%s/pprof.txt", tmp);
	char *theirs = sp_test_read_file(path, NULL);
	REQUIRE(ours && theirs);
	/* Each of our rows: "SELF SELF% TOTAL TOTAL%  NAME[ tag]". */
	int rows = 0;
	char *save = NULL;
	for (char *line = strtok_r(ours, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long self, total;
		char *fld[4], *name = NULL;
		if (split_fields(line, fld, 4, &name) != 0 || to_ll(fld[0], &self) != 0 ||
		    to_ll(fld[2], &total) != 0 || !*name)
			continue;
		char *tag = strstr(name, " [");
		if (tag)
			*tag = '\0';
		if (self == 0)
			continue;
		/* Find the pprof row for the same name and compare flat and cum. */
		int found = 0;
		char *copy = strdup(theirs), *save2 = NULL;
		for (char *l2 = strtok_r(copy, "\n", &save2); l2;
		     l2 = strtok_r(NULL, "\n", &save2)) {
			long long flat, cum;
			char *f2[5], *n2 = NULL;
			if (split_fields(l2, f2, 5, &n2) != 0 || to_ll(f2[0], &flat) != 0 ||
			    to_ll(f2[3], &cum) != 0 || !*n2)
				continue;
			char *inl = strstr(n2, " (inline)");
			if (inl)
				*inl = '\0';
			/* Our export keeps the tag in the name ("[vdso] [unresolved]"):
			 * compare without it, as above. */
			char *tag2 = strstr(n2, " [");
			if (tag2)
				*tag2 = '\0';
			if (strcmp(n2, name) == 0) {
				found = 1;
				CHECK_EQ(flat, self);
				CHECK_EQ(cum, total);
			}
		}
		free(copy);
		if (!found)
			fprintf(stderr, "    %s is in our top table but not in pprof's\n", name);
		CHECK(found);
		rows++;
	}
	CHECK(rows >= 3);
	CHECK(strstr(theirs, "work_a") != NULL);
	free(ours);
	free(theirs);
	snprintf(cmd, sizeof(cmd),
	         "python3 -c 'import json,sys,xml.etree.ElementTree as E; E.parse(sys.argv[1]); "
	         "d=json.load(open(sys.argv[2])); assert d[\"threads\"] and "
	         "d[\"meta\"][\"version\"]' "
	         "%s/l.svg %s/l.json",
	         tmp, tmp);
	CHECK_EQ(sp_test_run(cmd), 0);
}

SP_TEST(threads_rooted_at_thread_names)
{
	char record[512], report[512], exe[512], spool[512], out[512], cmd[4096];
	tools(record, report, sizeof(record));
	build_workload("threads", exe, sizeof(exe));
	snprintf(spool, sizeof(spool), "%s/threads.spool", sp_test_tmpdir());
	snprintf(out, sizeof(out), "%s/threads.folded", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s 1.5", exe);
	record_cmd(record, spool, cmd);
	snprintf(cmd, sizeof(cmd), "%s %s --folded --thread-names >%s", report, spool, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	long long per[3] = { 0, 0, 0 };
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			continue;
		long long n = strtoll(sp + 1, NULL, 10);
		*sp = '\0';
		for (int k = 0; k < 3; k++) {
			char root[32], fn[32];
			snprintf(root, sizeof(root), "crunch-%d;", k);
			snprintf(fn, sizeof(fn), ";crunch_%d;", k);
			if (strncmp(line, root, strlen(root)) == 0 && strstr(line, fn))
				per[k] += n;
			/* Never another thread's function under this root. */
			for (int j = 0; j < 3; j++) {
				char other[32];
				snprintf(other, sizeof(other), ";crunch_%d;", j);
				if (j != k && strncmp(line, root, strlen(root)) == 0)
					CHECK(strstr(line, other) == NULL);
			}
		}
	}
	fprintf(stderr, "    crunch-0 %lld, crunch-1 %lld, crunch-2 %lld\n", per[0], per[1],
	        per[2]);
	for (int k = 0; k < 3; k++)
		CHECK(per[k] >= 20);
	free(text);
}

/* A Python script: its functions appear by qualified name, in call order,
 * when the recorder stored Python frames. */
SP_TEST(python_workload_named_frames)
{
	char record[512], report[512], spool[512], out[512], cmd[4096];
	tools(record, report, sizeof(record));
	const char *py = access("/usr/bin/python3.11", X_OK) == 0 ? "/usr/bin/python3.11" : NULL;
	if (!py)
		sp_test_skip("/usr/bin/python3.11 is not installed");
	/* A second recording only absorbs a badly timed load spike. */
	for (int attempt = 1; attempt <= 2; attempt++) {
		snprintf(spool, sizeof(spool), "%s/py%d.spool", sp_test_tmpdir(), attempt);
		snprintf(out, sizeof(out), "%s/py%d.folded", sp_test_tmpdir(), attempt);
		snprintf(cmd, sizeof(cmd), "%s %s/examples/workloads/workload.py 2", py,
		         sp_test_source_root());
		record_cmd(record, spool, cmd);

		stackpulse_spool *s = NULL;
		REQUIRE_OK(stackpulse_spool_open(spool, NULL, &s));
		uint32_t python = 0;
		for (uint32_t i = 0; i < stackpulse_spool_frame_count(s); i++)
			python += stackpulse_spool_frame(s, i)->kind == STACKPULSE_FRAME_PYTHON;
		stackpulse_spool_close(s);
		if (!python)
			sp_test_skip("the recorder stored no Python frames for this interpreter");

		snprintf(cmd, sizeof(cmd), "%s %s --folded >%s", report, spool, out);
		REQUIRE_EQ(sp_test_run(cmd), 0);
		char *text = sp_test_read_file(out, NULL);
		REQUIRE(text != NULL);
		long long fib = 0, matrix = 0, all = 0;
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
			char *sp = strrchr(line, ' ');
			if (!sp)
				continue;
			long long n = strtoll(sp + 1, NULL, 10);
			all += n;
			char *main_at = strstr(line, ";main (");
			char *pf = strstr(line, ";phase_fib (");
			char *pm = strstr(line, ";phase_matrix (");
			if (pf && main_at && main_at < pf && strstr(pf, ";fib ("))
				fib += n;
			if (pm && main_at && main_at < pm && strstr(pm, ";Matrix.multiply ("))
				matrix += n;
		}
		free(text);
		fprintf(stderr,
		        "    attempt %d: %lld samples: phase_fib>fib %lld, "
		        "phase_matrix>Matrix.multiply %lld\n",
		        attempt, all, fib, matrix);
		double share = fib + matrix ? (double)fib / (double)(fib + matrix) : 0.0;
		/* The script splits its time 60/40. */
		if (fib + matrix >= 50 && share > 0.45 && share < 0.75)
			return;
	}
	sp_test_fail(__FILE__, __LINE__, "no recording gave the 60/40 split of the Python phases");
}
