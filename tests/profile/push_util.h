/* The loopback push server (push_server.py) as the tests run it: a fresh
 * directory per server, started in the background, and the summary of the
 * body it decoded. */
#ifndef SP_TEST_PROFILE_PUSH_UTIL_H
#define SP_TEST_PROFILE_PUSH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

/* A fresh directory for one server. */
static inline const char *server_dir(const char *name)
{
	static char dir[512];
	snprintf(dir, sizeof(dir), "%s/%s", sp_test_tmpdir(), name);
	char cmd[1100];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	return dir;
}

/* Starts push_server.py in the background; returns its port. */
static inline int start_server(const char *dir, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "python3 '%s/tests/profile/push_server.py' '%s' %s >'%s/server.out' 2>&1 &",
	         sp_test_source_root(), dir, args, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/port", dir);
	for (int i = 0; i < 200; i++) {
		char *port = sp_test_read_file(path, NULL);
		if (port) {
			int p = atoi(port);
			free(port);
			REQUIRE(p > 0);
			return p;
		}
		usleep(50000);
	}
	snprintf(path, sizeof(path), "%s/server.out", dir);
	char *out = sp_test_read_file(path, NULL);
	sp_test_fail(__FILE__, __LINE__, "push server did not start: %s", out ? out : "");
	free(out);
	sp_test_abort();
}

/* The server's summary of the last decoded body (waits for it). */
static inline char *summary(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/summary", dir);
	for (int i = 0; i < 1200; i++) {
		char *s = sp_test_read_file(path, NULL);
		if (s)
			return s;
		usleep(50000);
	}
	sp_test_fail(__FILE__, __LINE__, "no summary in %s", dir);
	sp_test_abort();
}

#endif
