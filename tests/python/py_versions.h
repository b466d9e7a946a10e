/* The CPython interpreters the Python tests run against: every pyenv build
 * of 3.10+ (under $PYENV_ROOT, else /root/.pyenv) and /usr/bin/python3.1x,
 * each executable path once; and the setup and recording of a script on
 * each of them. */
#ifndef SP_TEST_PY_VERSIONS_H
#define SP_TEST_PY_VERSIONS_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define PY_MAX_VERSIONS 16

typedef struct py_versions {
	int n;
	char path[PY_MAX_VERSIONS][256];
} py_versions;

static inline void py_versions_add(py_versions *v, const char *p)
{
	char real[PATH_MAX]; /* realpath's buffer must hold PATH_MAX. */
	if (v->n >= PY_MAX_VERSIONS || access(p, X_OK) != 0 || !realpath(p, real))
		return;
	for (int i = 0; i < v->n; i++)
		if (strcmp(v->path[i], p) == 0)
			return;
	snprintf(v->path[v->n++], sizeof(v->path[0]), "%s", p);
}

static inline void py_versions_find(py_versions *v)
{
	char root[200];
	const char *env = getenv("PYENV_ROOT");
	v->n = 0;
	snprintf(root, sizeof(root), "%s/versions", env ? env : "/root/.pyenv");
	DIR *d = opendir(root);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			int major, minor;
			if (sscanf(e->d_name, "%d.%d", &major, &minor) != 2 || major != 3 ||
			    minor < 10)
				continue;
			char p[256];
			snprintf(p, sizeof(p), "%s/%s/bin/python%d.%d", root, e->d_name, major,
			         minor);
			py_versions_add(v, p);
		}
		closedir(d);
	}
	for (int minor = 10; minor <= 14; minor++) {
		char p[64];
		snprintf(p, sizeof(p), "/usr/bin/python3.%d", minor);
		py_versions_add(v, p);
	}
}

/* The setup of a test that records @p script on every interpreter: finds
 * them into @p v (skips when there is none), writes the script to
 * @p name in the test's directory (its path into @p path), and keeps one
 * interpreter under valgrind (memory errors only). Returns 1 under
 * valgrind. */
static inline int py_script_setup(py_versions *v, const char *name, const char *script, char *path,
                                  size_t cap)
{
	py_versions_find(v);
	if (v->n == 0)
		sp_test_skip("no CPython 3.10+ here (pyenv or /usr/bin/python3.1x)");
	snprintf(path, cap, "%s/%s", sp_test_tmpdir(), name);
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(script, f);
	fclose(f);
	/* Valgrind, or the aarch64 guest (tests/arm64/guest.sh sets
	 * SP_ARM64_OUT), whose TCG emulation reads a stack in ~2 ms: bounds
	 * set for native speed do not hold there. */
	int slow = sp_test_under_valgrind() || getenv("SP_ARM64_OUT") != NULL;
	if (slow && v->n > 1)
		v->n = 1;
	return slow;
}

/* Records @p cmd (a target's command line) at @p hz with the record
 * example into @p tag's spool in the test directory, and returns the text
 * of report --folded (with @p report_args) of it, to free. */
/* Records @p cmd with the record example at @p hz Hz, its options
 * --python=on and @p record_args, and returns report --folded's output
 * (with @p report_args); fails the test when either fails. */
static inline char *py_record_folded_with(const char *tag, int hz, const char *record_args,
                                          const char *cmd, const char *report_args)
{
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	char spool[600], out[700], err[720], line[4096];
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), tag);
	snprintf(out, sizeof(out), "%s.folded", spool);
	snprintf(err, sizeof(err), "%s.stderr", spool);
	snprintf(line, sizeof(line),
	         "%s/record -F %d --python=on %s -o %s -- %s 2>%s && "
	         "%s/report %s --folded %s >%s 2>>%s",
	         bin, hz, record_args, spool, cmd, err, bin, spool, report_args, out, err);
	int rc = sp_test_run(line);
	if (rc != 0) {
		/* What record or report said, to tell why. */
		char *text = sp_test_read_file(err, NULL);
		fprintf(stderr, "    %s failed (%d): %.3000s\n", tag, rc, text ? text : "");
		free(text);
	}
	REQUIRE_EQ(rc, 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	return text;
}

static inline char *py_record_folded(const char *tag, int hz, const char *cmd,
                                     const char *report_args)
{
	return py_record_folded_with(tag, hz, "", cmd, report_args);
}

#endif
