/* Self-contained spools for binaries the recorder cannot reach by path at
 * finish: a program deleted while it runs, and (as root) a program that
 * exists only in a private mount namespace. The recorder must grab the file
 * while the process lives, and the spool must name its functions offline
 * after the file is gone. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sym_fixture.h"
#include "rec_stats.h"

static const char work_src[] = "volatile double sink;\n"
                               "__attribute__((noinline)) double hot_loop(long n)\n"
                               "{\n"
                               "\tdouble s = 0;\n"
                               "\tfor (long i = 0; i < n; i++) {\n"
                               "\t\ts = s * 1.0000001 + 0.5;\n"
                               "\t\tsink = s;\n"
                               "\t}\n"
                               "\treturn s;\n"
                               "}\n"
                               "__attribute__((noinline)) double driver(void)\n"
                               "{\n"
                               "\treturn hot_loop(1000000);\n"
                               "}\n"
                               "int main(void) { for (;;) sink += driver(); }\n";

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Builds the workload with -O2 -g into @p bin. */
static void build_work(char *bin, size_t cap)
{
	if (!fx_have("gcc"))
		sp_test_skip("gcc not installed");
	char src[512];
	fx_path(src, sizeof(src), "work.c");
	fx_path(bin, cap, "work.build");
	fx_write_file(src, work_src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", bin, src);
}

/* Starts /bin/sh -c @p cmd and waits until its process runs @p exe_name
 * (the comm after exec). Returns the pid, or -1 when it never got there. */
static pid_t start_until(const char *cmd, const char *comm)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		if (f) {
			int ok =
			        fgets(buf, sizeof(buf), f) && strncmp(buf, comm, strlen(comm)) == 0;
			fclose(f);
			if (ok)
				return pid;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Attaches to @p pid and records about one second into @p spool_path;
 * @p unlink_midway (or NULL) is deleted half-way through. */
static void record_for_a_second_unlinking(pid_t pid, const char *spool_path,
                                          const char *unlink_midway)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.kernel = STACKPULSE_FEATURE_OFF;
	o.python = STACKPULSE_FEATURE_OFF;
	stackpulse_recorder *rec;
	int rc = stackpulse_recorder_attach(pid, spool_path, STACKPULSE_ATTACH_STOP_ENABLE_RESUME,
	                                    &o, &rec);
	if (rc == -EPERM || rc == -EACCES || rc == -ENOSYS || rc == -ENOENT) {
		stop(pid);
		sp_test_skip("perf events not available here");
	}
	REQUIRE_OK(rc);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		rc = stackpulse_recorder_wait(rec, 100);
		REQUIRE(rc >= 0 || rc == -EINTR);
		REQUIRE_OK(stackpulse_recorder_consume_available(rec));
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (unlink_midway && ms >= 500) {
			REQUIRE_EQ(unlink(unlink_midway), 0);
			unlink_midway = NULL;
		}
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
	REQUIRE_OK(rec_finish(rec));
}

static void record_for_a_second(pid_t pid, const char *spool_path)
{
	record_for_a_second_unlinking(pid, spool_path, NULL);
}

typedef struct tally {
	int frames, hot, hot_file, main;
} tally;

static int tally_cb(const stackpulse_frame *f, void *ctx)
{
	tally *t = ctx;
	const char *name = stackpulse_frame_func_name(f);
	const char *file = stackpulse_frame_file(f);
	if (strcmp(name, "hot_loop") == 0) {
		t->hot = 1;
		t->hot_file = file && fx_ends_with(file, "work.c");
	}
	t->main |= strcmp(name, "main") == 0;
	t->frames++;
	return 0;
}

/* The spool names the workload offline: its module has an embedded table,
 * and most samples resolve to hot_loop (with its source file) under main
 * (driver tail-calls hot_loop, so it is not on the stack). */
static void check_offline_names(const char *spool_path, const char *module_path)
{
	stackpulse_spool *spool;
	REQUIRE_OK(stackpulse_spool_open(spool_path, NULL, &spool));
	int found = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(spool); i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(spool, i);
		if (m && m->path && strncmp(m->path, module_path, strlen(module_path)) == 0) {
			found = 1;
			CHECK_EQ(m->has_symbols, 1);
		}
	}
	CHECK(found);
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_OFFLINE;
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(spool, &so, &sym));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(spool, &it));
	const struct stackpulse_sample *s;
	int rc, samples = 0, named = 0;
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		tally t = { 0, 0, 0, 0 };
		REQUIRE_OK(stackpulse_symbolizer_for_each_frame(sym, s, tally_cb, &t));
		samples++;
		named += t.hot && t.hot_file && t.main;
	}
	CHECK_EQ(rc, 0);
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	fprintf(stderr, "    %d samples, %d named hot_loop <- main offline\n", samples, named);
	REQUIRE(samples >= 20);
	CHECK(named * 10 >= samples * 8);
}

SP_TEST(deleted_while_running_is_embedded)
{
	/* No cache: the table must come from the grabbed file itself. */
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	char bin[512], dir[512], run[600], spool_path[512], cmd[2048];
	build_work(bin, sizeof(bin));
	fx_path(dir, sizeof(dir), "rundir");
	fx_sh("mkdir -p '%s'", dir);
	snprintf(run, sizeof(run), "%s/work", dir);
	fx_sh("cp '%s' '%s'", bin, run);
	unlink(bin);
	snprintf(cmd, sizeof(cmd), "exec '%s'", run);
	pid_t pid = start_until(cmd, "work");
	REQUIRE(pid > 0);
	/* Gone before the recorder even starts: maps say "(deleted)". */
	REQUIRE_EQ(unlink(run), 0);
	fx_path(spool_path, sizeof(spool_path), "deleted.spool");
	record_for_a_second(pid, spool_path);
	stop(pid);
	REQUIRE(access(run, F_OK) != 0);
	check_offline_names(spool_path, run);
}

SP_TEST(private_mount_namespace_is_embedded)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to create a mount namespace and mount a tmpfs");
	if (!fx_have("unshare"))
		sp_test_skip("unshare (util-linux) not installed");
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	char bin[512], dir[512], inside[600], spool_path[512], cmd[2048];
	build_work(bin, sizeof(bin));
	fx_path(dir, sizeof(dir), "nsdir");
	fx_sh("mkdir -p '%s'", dir);
	snprintf(inside, sizeof(inside), "%s/work", dir);
	/* The tmpfs, and the binary on it, exist only inside the namespace. */
	snprintf(cmd, sizeof(cmd),
	         "exec unshare -m --propagation private sh -c "
	         "\"mount -t tmpfs none '%s' && cp '%s' '%s' && exec '%s'\"",
	         dir, bin, inside, inside);
	pid_t pid = start_until(cmd, "work");
	if (pid < 0)
		sp_test_skip("cannot create a private mount namespace here");
	unlink(bin);
	REQUIRE(access(inside, F_OK) != 0);
	fx_path(spool_path, sizeof(spool_path), "mntns.spool");
	record_for_a_second(pid, spool_path);
	stop(pid);
	check_offline_names(spool_path, inside);
}

/* Reachable by its path when first sampled, deleted before finish while
 * the process still runs: finish opens it through the process again. */
SP_TEST(deleted_during_recording_is_embedded)
{
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	char bin[512], dir[512], run[600], spool_path[512], cmd[2048];
	build_work(bin, sizeof(bin));
	fx_path(dir, sizeof(dir), "rundir2");
	fx_sh("mkdir -p '%s'", dir);
	snprintf(run, sizeof(run), "%s/work", dir);
	fx_sh("cp '%s' '%s'", bin, run);
	unlink(bin);
	snprintf(cmd, sizeof(cmd), "exec '%s'", run);
	pid_t pid = start_until(cmd, "work");
	REQUIRE(pid > 0);
	fx_path(spool_path, sizeof(spool_path), "midway.spool");
	record_for_a_second_unlinking(pid, spool_path, run);
	stop(pid);
	REQUIRE(access(run, F_OK) != 0);
	check_offline_names(spool_path, run);
}
