/* The CPython interpreters the Python tests run against: every pyenv build
 * of 3.10+ (under $PYENV_ROOT, else /root/.pyenv) and /usr/bin/python3.1x,
 * each executable path once. */
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
	int slow = sp_test_under_valgrind();
	if (slow && v->n > 1)
		v->n = 1;
	return slow;
}

#endif
