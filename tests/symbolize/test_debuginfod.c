/* debuginfod end to end: a real debuginfod server on 127.0.0.1 serves the
 * debug file of a stripped binary; with DEBUGINFOD_URLS set the frame
 * resolves through the download into STACKPULSE_DEBUGINFOD_CACHE_DIR, and
 * without it nothing goes to the network. libdebuginfod is loaded by the
 * first query; this binary run again (/proc/self/exe) on the probe test
 * with an unloadable libdebuginfod.so.1 first in LD_LIBRARY_PATH makes no
 * query and leaves the frame unresolved. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sym_fixture.h"

static const char src[] __attribute__((unused)) =
        "volatile int sink;\n"
        "static inline __attribute__((always_inline)) void inl(int x)\n"
        "{\n"
        "\tsink = x * 5; /* INL */\n"
        "}\n"
        "__attribute__((noinline)) void served_fn(int x)\n"
        "{\n"
        "\tsink = 1;\n"
        "\tinl(x);       /* CALL_INL */\n"
        "\tsink = 2;\n"
        "}\n"
        "int main(int argc, char **argv) { (void)argv; served_fn(argc); return 0; }\n";

#ifdef SP_HAVE_DEBUGINFOD
static pid_t start_server(const char *dir, const char *db, const char *log, int port)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		FILE *f = freopen(log, "w", stdout);
		(void)f;
		dup2(1, 2);
		char portbuf[16];
		snprintf(portbuf, sizeof(portbuf), "%d", port);
		execlp("debuginfod", "debuginfod", "-F", dir, "-p", portbuf, "-d", db, "-t", "0",
		       "-g", "0", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void stop_server(pid_t pid)
{
	kill(pid, SIGTERM);
	int st;
	for (int i = 0; i < 50; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

static void resolve_served(const char *bin, uint64_t off, fx_frames *c,
                           struct stackpulse_symbolizer_stats *k)
{
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	uint32_t f = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, off);
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_NO_CACHE;
	o.debug_dirs = "/nonexistent-debug-root";
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	c->n = 0;
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f, fx_collect, c));
	k->sz = sizeof(*k);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, k));
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

/* 1 when libdebuginfod is loaded in this process. */
static int debuginfod_loaded(void)
{
	void *h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h != NULL;
}

/* Runs this binary on the probe with the environment prefix @p env and
 * reads what it wrote to @p out: "queries debug_files loaded name". */
static void run_probe(const char *env, const char *bin, uint64_t off, const char *out, char *line,
                      size_t cap)
{
	char cmd[2048];
	unlink(out);
	snprintf(cmd, sizeof(cmd),
	         "%s SP_DIF_PROBE_BIN='%s' SP_DIF_PROBE_OFF=%llu SP_DIF_PROBE_OUT='%s' "
	         "\"$(readlink /proc/%d/exe)\" probe_debuginfod_query",
	         env, bin, (unsigned long long)off, out, (int)getpid());
	CHECK_EQ(sp_test_run(cmd), 0);
	line[0] = '\0';
	FILE *f = fopen(out, "r");
	REQUIRE(f != NULL);
	if (!fgets(line, (int)cap, f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
}
#endif

/* Acts only when run by debuginfod_server_resolves_stripped_binary: one
 * resolution through this process's environment, written for it to check. */
SP_TEST(probe_debuginfod_query)
{
#ifdef SP_HAVE_DEBUGINFOD
	const char *bin = getenv("SP_DIF_PROBE_BIN");
	const char *off = getenv("SP_DIF_PROBE_OFF");
	const char *out = getenv("SP_DIF_PROBE_OUT");
	if (!bin || !off || !out)
		return;
	fx_frames c;
	struct stackpulse_symbolizer_stats k;
	resolve_served(bin, strtoull(off, NULL, 10), &c, &k);
	FILE *f = fopen(out, "w");
	REQUIRE(f != NULL);
	fprintf(f, "%llu %llu %d %s\n", (unsigned long long)k.debuginfod_queries,
	        (unsigned long long)k.debug_files, debuginfod_loaded(), c.f[c.n - 1].name);
	fclose(f);
#endif
}

SP_TEST(debuginfod_server_resolves_stripped_binary)
{
#ifndef SP_HAVE_DEBUGINFOD
	sp_test_skip("built without debuginfod support (-Ddebuginfod=false)");
#else
	if (!fx_have("debuginfod") || !fx_have("gcc") || !fx_have("objcopy") ||
	    !fx_have("debuginfod-find"))
		sp_test_skip("debuginfod, debuginfod-find, gcc or objcopy not installed");
	const char *tmp = sp_test_tmpdir();
	char full[512], stripped[512], srv[512], db[512], log[512], cache[512], probe[512];
	snprintf(full, sizeof(full), "%s/served", tmp);
	snprintf(stripped, sizeof(stripped), "%s/served_s", tmp);
	snprintf(srv, sizeof(srv), "%s/srv", tmp);
	snprintf(db, sizeof(db), "%s/debuginfod.sqlite", tmp);
	snprintf(log, sizeof(log), "%s/debuginfod.log", tmp);
	snprintf(cache, sizeof(cache), "%s/dcache", tmp);
	snprintf(probe, sizeof(probe), "%s/probecache", tmp);
	char srcpath[600];
	snprintf(srcpath, sizeof(srcpath), "%s/served.c", tmp);
	fx_write_file(srcpath, src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", full, srcpath);
	fx_sh("mkdir -p '%s' && objcopy --only-keep-debug '%s' '%s/served.debug'", srv, full, srv);
	fx_sh("strip --strip-all -o '%s' '%s'", stripped, full);
	uint8_t bid[64];
	uint32_t bid_len;
	char hex[129];
	fx_build_id(stripped, bid, &bid_len);
	sp_hex(bid, bid_len, hex);
	uint64_t addr, size;
	fx_symbol(full, "served_fn", &addr, &size);

	/* Without DEBUGINFOD_URLS: no query, unresolved, and libdebuginfod is
	 * not even loaded (it is no link dependency: the first query loads it). */
	unsetenv("DEBUGINFOD_URLS");
	CHECK(!debuginfod_loaded());
	fx_frames c;
	struct stackpulse_symbolizer_stats k;
	resolve_served(stripped, fx_offset(full, addr), &c, &k);
	CHECK_EQ(k.debuginfod_queries, 0);
	CHECK(strncmp(c.f[c.n - 1].name, "served_s+0x", 11) == 0);
	CHECK(!debuginfod_loaded());

	int port = 20000 + (int)(getpid() % 20000);
	pid_t server = start_server(srv, db, log, port);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	/* Wait until the server has scanned the file (up to 60 s). */
	int ready = 0;
	for (int i = 0; i < 120 && !ready; i++) {
		char cmd[1400];
		snprintf(cmd, sizeof(cmd),
		         /* A fresh cache each try: the client caches misses. */
		         "rm -rf '%s'; DEBUGINFOD_URLS=%s DEBUGINFOD_CACHE_PATH='%s' "
		         "DEBUGINFOD_TIMEOUT=5 "
		         "debuginfod-find debuginfo %s >/dev/null 2>&1",
		         probe, url, probe, hex);
		ready = system(cmd) == 0;
		if (!ready)
			usleep(500000);
	}
	if (!ready) {
		stop_server(server);
		sp_test_fail(__FILE__, __LINE__, "debuginfod did not serve %s (log: %s)", hex, log);
		sp_test_abort();
	}

	/* A libdebuginfod.so.1 that does not load (an empty file found first):
	 * no query, the frame unresolved, no crash. The same probe with the
	 * system's library resolves it through the server. */
	if (!sp_test_under_valgrind()) {
		char bogus[600], out[600], env[2048], line[512];
		snprintf(bogus, sizeof(bogus), "%s/nolib", tmp);
		snprintf(out, sizeof(out), "%s/probe.out", tmp);
		fx_sh("mkdir -p '%s' && : > '%s/libdebuginfod.so.1'", bogus, bogus);
		snprintf(env, sizeof(env),
		         "LD_LIBRARY_PATH='%s' DEBUGINFOD_URLS=%s DEBUGINFOD_CACHE_PATH='%s/pc1' "
		         "STACKPULSE_DEBUGINFOD_CACHE_DIR='%s/pc1'",
		         bogus, url, tmp, tmp);
		run_probe(env, stripped, fx_offset(full, addr), out, line, sizeof(line));
		printf("without libdebuginfod: %s\n", line);
		CHECK(strncmp(line, "0 0 0 served_s+0x", 17) == 0);
		snprintf(env, sizeof(env),
		         "DEBUGINFOD_URLS=%s DEBUGINFOD_CACHE_PATH='%s/pc2' "
		         "STACKPULSE_DEBUGINFOD_CACHE_DIR='%s/pc2'",
		         url, tmp, tmp);
		run_probe(env, stripped, fx_offset(full, addr), out, line, sizeof(line));
		printf("with libdebuginfod: %s\n", line);
		CHECK_STR(line, "1 1 1 served_fn");
	}

	setenv("DEBUGINFOD_URLS", url, 1);
	setenv("STACKPULSE_DEBUGINFOD_CACHE_DIR", cache, 1);
	resolve_served(stripped, fx_offset(full, addr), &c, &k);
	CHECK(debuginfod_loaded());
	/* DEBUGINFOD_MAXSIZE caps a download: with the file gone from the
	 * cache and a 64-byte cap, the debug file is not taken and the frame
	 * stays unresolved. Then it is fetched again for the checks below. */
	fx_frames capped;
	struct stackpulse_symbolizer_stats kc;
	fx_sh("rm -rf '%s/%s'", cache, hex);
	setenv("DEBUGINFOD_MAXSIZE", "64", 1);
	resolve_served(stripped, fx_offset(full, addr), &capped, &kc);
	unsetenv("DEBUGINFOD_MAXSIZE");
	CHECK(kc.debuginfod_queries >= 1);
	CHECK_EQ(kc.debug_files, 0);
	CHECK(strncmp(capped.f[capped.n - 1].name, "served_s+0x", 11) == 0);
	fx_frames again;
	struct stackpulse_symbolizer_stats ka;
	fx_sh("rm -rf '%s/%s'", cache, hex);
	resolve_served(stripped, fx_offset(full, addr), &again, &ka);
	CHECK_STR(again.f[again.n - 1].name, "served_fn");
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("STACKPULSE_DEBUGINFOD_CACHE_DIR");
	stop_server(server);
	CHECK_EQ(k.debuginfod_queries, 1);
	CHECK_EQ(k.debug_files, 1);
	CHECK_STR(c.f[c.n - 1].name, "served_fn");
	CHECK(fx_ends_with(c.f[c.n - 1].file, "served.c"));
	/* The download went to our cache directory. The client's variable was
	 * set once, when the first debuginfod-enabled symbolizer was made. */
	char cached[900];
	snprintf(cached, sizeof(cached), "%s/%s/debuginfo", cache, hex);
	struct stat st;
	CHECK(stat(cached, &st) == 0 && st.st_size > 0);
	const char *env_cache = getenv("DEBUGINFOD_CACHE_PATH");
	CHECK(env_cache && strcmp(env_cache, cache) == 0);
	/* Later symbolizers never write the environment again. */
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	setenv("STACKPULSE_DEBUGINFOD_CACHE_DIR", "/nonexistent-other-cache", 1);
	resolve_served(stripped, fx_offset(full, addr), &c, &k);
	env_cache = getenv("DEBUGINFOD_CACHE_PATH");
	CHECK(env_cache && strcmp(env_cache, cache) == 0);
	CHECK_STR(c.f[c.n - 1].name, "served_fn"); /* Still from the first cache. */
	/* An inline frame comes with its call site. */
	uint32_t l_call = fx_line_of(src, "CALL_INL");
	int saw = 0;
	for (uint64_t i = 0; i < size && !saw; i++) {
		setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1); /* Served from the cache now. */
		setenv("STACKPULSE_DEBUGINFOD_CACHE_DIR", cache, 1);
		resolve_served(stripped, fx_offset(full, addr) + i, &c, &k);
		if (c.n == 2) {
			saw = 1;
			CHECK_STR(c.f[0].name, "inl");
			CHECK_EQ(c.f[1].line, l_call);
		}
	}
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("STACKPULSE_DEBUGINFOD_CACHE_DIR");
	CHECK(saw);
#endif
}
