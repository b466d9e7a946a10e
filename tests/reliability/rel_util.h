/* Helpers shared by the reliability tests: build the targets in
 * tests/reliability/targets, read /proc state, RSS and descriptor counts,
 * pass small records through pipes, and a seeded random source.
 * Header-only: each test file is its own executable. */
#ifndef SP_TEST_REL_UTIL_H
#define SP_TEST_REL_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "stackpulse.h"

#define REL_UNUSED __attribute__((unused))

static REL_UNUSED double rel_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SP_SOAK=1 selects the long versions. */
static REL_UNUSED int rel_soak(void)
{
	const char *v = getenv("SP_SOAK");
	return v && v[0] == '1';
}

/* Nonzero under valgrind (its preload library is in LD_PRELOAD): timing
 * tests then run fewer trials or skip. */
static REL_UNUSED int rel_under_valgrind(void)
{
	const char *v = getenv("LD_PRELOAD");
	return v && strstr(v, "vgpreload") != NULL;
}

/* Compiles tests/reliability/targets/NAME.c once per binary. */
static REL_UNUSED const char *rel_target(const char *name)
{
	static char paths[8][512];
	static int n;
	char out[512];
	snprintf(out, sizeof(out), "%s/%s", sp_test_tmpdir(), name);
	for (int i = 0; i < n; i++)
		if (strcmp(paths[i], out) == 0)
			return paths[i];
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -g -pthread -o '%s' '%s/tests/reliability/targets/%s.c'", out,
	         sp_test_source_root(), name);
	if (system(cmd) != 0) {
		sp_test_fail(__FILE__, __LINE__, "cannot build: %s", cmd);
		sp_test_abort();
	}
	chmod(out, 0755);
	if (n == 8)
		sp_test_abort();
	snprintf(paths[n], sizeof(paths[0]), "%s", out);
	return paths[n++];
}

/* Scheduler state letter of @p pid from /proc/PID/stat, or 0 when gone. */
static REL_UNUSED char rel_proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Nonzero when any thread of @p pid is stopped ('T' or 't'). */
static REL_UNUSED int rel_any_thread_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	int stopped = 0;
	while ((e = readdir(d)) != NULL) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0)
			continue;
		char p2[96], buf[512];
		snprintf(p2, sizeof(p2), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
		FILE *f = fopen(p2, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't'))
			stopped = 1;
	}
	closedir(d);
	return stopped;
}

/* Resident set of this process in KiB. */
static REL_UNUSED long rel_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = strtol(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

/* Memory this process holds in KiB: the resident set, or under
 * AddressSanitizer the live heap, since ASan's quarantine keeps freed
 * blocks resident (up to 256 MiB) and its RSS grows with churn alone. */
#if SP_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif
static REL_UNUSED long rel_mem_kb(void)
{
#if SP_TEST_ASAN
	return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
#else
	return rel_rss_kb();
#endif
}

/* Open descriptors of this process. */
static REL_UNUSED int rel_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* The DIR's own descriptor. */
}

/* A fixed-size message through a pipe (atomic below PIPE_BUF). */
typedef struct rel_msg {
	int64_t kind;
	int64_t a, b, c, d;
} rel_msg;

static REL_UNUSED void rel_send(int fd, int64_t kind, int64_t a, int64_t b, int64_t c, int64_t d)
{
	rel_msg m = { kind, a, b, c, d };
	ssize_t r = write(fd, &m, sizeof(m));
	(void)r;
}

/* Seeded xorshift; SP_REL_SEED reproduces a run. */
static uint64_t rel_rng_state;
static REL_UNUSED void rel_seed(const char *what)
{
	const char *s = getenv("SP_REL_SEED");
	rel_rng_state =
	        s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)getpid();
	if (!rel_rng_state)
		rel_rng_state = 1;
	printf("%s: SP_REL_SEED=%llu\n", what, (unsigned long long)rel_rng_state);
}
static REL_UNUSED uint32_t rel_rand(uint32_t below)
{
	rel_rng_state ^= rel_rng_state << 13;
	rel_rng_state ^= rel_rng_state >> 7;
	rel_rng_state ^= rel_rng_state << 17;
	return below ? (uint32_t)((rel_rng_state >> 16) % below) : 0;
}

static REL_UNUSED void rel_sleep_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
		               (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Records until every followed process exited (or @p max_s passed). */
static REL_UNUSED int rel_run(stackpulse_recorder *rec, double max_s)
{
	double end = rel_now() + max_s;
	while (rel_now() < end) {
		int rc = stackpulse_recorder_wait(rec, 100);
		if (rc < 0 && rc != -EINTR)
			return rc;
		rc = stackpulse_recorder_consume_available(rec);
		if (rc)
			return rc;
		if (!stackpulse_recorder_process_is_active(rec, 0))
			return 0;
	}
	return -ETIMEDOUT;
}

/* Opens @p path and reads every sample; returns the open code and fills
 * @p samples (iterated) and @p iter_rc (0 on a clean end). Only the numeric
 * fields of @p meta stay valid: the spool is closed on return. */
static REL_UNUSED int rel_read_back(const char *path, struct stackpulse_spool_meta *meta,
                                    uint64_t *samples, int *iter_rc)
{
	stackpulse_spool *sp = NULL;
	int rc = stackpulse_spool_open(path, NULL, &sp);
	*samples = 0;
	*iter_rc = 0;
	if (rc)
		return rc;
	*meta = *stackpulse_spool_meta(sp);
	stackpulse_sample_iter *it = NULL;
	rc = stackpulse_sample_iter_new(sp, &it);
	if (rc) {
		stackpulse_spool_close(sp);
		*iter_rc = rc;
		return 0;
	}
	const struct stackpulse_sample *s;
	int r;
	while ((r = stackpulse_sample_iter_next(it, &s)) == 1)
		(*samples)++;
	*iter_rc = r;
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	return 0;
}

#endif
