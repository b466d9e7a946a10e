/* The example programs (zig-out/bin/record and report, from SP_BIN_DIR)
 * and the workloads they are tried on, for the end-to-end tests. */
#ifndef SP_TEST_PROFILE_EXAMPLE_TOOLS_H
#define SP_TEST_PROFILE_EXAMPLE_TOOLS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Paths of record and report, or a skip. */
static inline void tools(char *record, char *report, size_t n)
{
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	snprintf(record, n, "%s/record", bin);
	snprintf(report, n, "%s/report", bin);
	if (access(record, X_OK) != 0 || access(report, X_OK) != 0)
		sp_test_skip("record/report are not built (zig build examples)");
}

/* Compiles examples/workloads/NAME.c at -O2 (no frame pointers) into tmp. */
static inline void build_workload(const char *name, char *exe, size_t n)
{
	char cmd[2048];
	if (sp_test_run("command -v cc >/dev/null 2>&1") != 0)
		sp_test_skip("no C compiler (cc) to build the workload");
	snprintf(exe, n, "%s/%s", sp_test_tmpdir(), name);
	snprintf(cmd, sizeof(cmd),
	         "cc -O2 -g -fomit-frame-pointer -pthread -o %s %s/examples/workloads/%s.c", exe,
	         sp_test_source_root(), name);
	REQUIRE_EQ(sp_test_run(cmd), 0);
}

/* Records @p args into @p spool; skips when this machine cannot sample. */
static inline void record_cmd(const char *record, const char *spool, const char *args)
{
	char cmd[4096], log[512];
	snprintf(log, sizeof(log), "%s.record.log", spool);
	snprintf(cmd, sizeof(cmd), "%s -F 499 --kernel=off -o %s -- %s >%s 2>&1", record, spool,
	         args, log);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(log, NULL);
	if (rc != 0) {
		fprintf(stderr, "    record failed (%d): %s\n", rc, text ? text : "");
		if (text && (strstr(text, "perf_event_paranoid") || strstr(text, "not permitted") ||
		             strstr(text, "Permission denied"))) {
			free(text);
			sp_test_skip("perf events are not allowed here");
		}
	}
	free(text);
	REQUIRE_EQ(rc, 0);
}

#endif
