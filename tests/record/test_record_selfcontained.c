/* Self-contained spools: symbol tables embedded at finish give every name,
 * file and line after the recorded binary is deleted or rebuilt. */
#include <errno.h>

#include "rec_util.h"
#include "rec_stats.h"

typedef struct walk {
	const char *names[64];
	const char *files[64];
	uint32_t lines[64];
	int kinds[64];
	uint32_t n;
} walk;

static int collect(const stackpulse_frame *f, void *ctx)
{
	walk *w = ctx;
	if (w->n < 64) {
		w->names[w->n] = stackpulse_frame_func_name(f);
		w->files[w->n] = stackpulse_frame_file(f);
		w->lines[w->n] = stackpulse_frame_line(f);
		w->kinds[w->n] = (int)stackpulse_frame_kind(f);
		w->n++;
	}
	return 0;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);
	return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Records the ladder target built with -g at @p bin into @p spool, with
 * the symbol cache in @p cache_dir (NULL: the default). */
static void record_ladder_cached(const char *bin, const char *spool, const char *cache_dir)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.cache_dir = cache_dir;
	REQUIRE(o.self_contained == 1);
	char *argv[] = { (char *)bin, "1.5", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 30));
	REQUIRE_OK(rec_finish(rec));
	int status = 0;
	waitpid(pid, &status, 0);
}

static void record_ladder(const char *bin, const char *spool)
{
	record_ladder_cached(bin, spool, NULL);
}

/* Symbolizes @p spool and checks the ladder with files and lines. */
static void check_ladder(const char *spool, uint32_t flags)
{
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	int embedded = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(sp); i++)
		embedded += stackpulse_spool_module(sp, i)->has_symbols;
	CHECK(embedded >= 1);

	char cache[600];
	snprintf(cache, sizeof(cache), "%s/cache-%u", sp_test_tmpdir(), flags);
	mkdir(cache, 0700);
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = flags;
	so.cache_dir = cache;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int leaf_samples = 0, good = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		walk w = { 0 };
		REQUIRE_OK(stackpulse_symbolizer_for_each_frame(sym, s, collect, &w));
		uint32_t u = 0;
		while (u < w.n && w.kinds[u] == STACKPULSE_FRAME_KERNEL)
			u++;
		if (u + 3 >= w.n || strcmp(w.names[u], "leaf") != 0)
			continue;
		leaf_samples++;
		if (strcmp(w.names[u + 1], "middle") == 0 && strcmp(w.names[u + 2], "entry") == 0 &&
		    strcmp(w.names[u + 3], "main") == 0 &&
		    ends_with(w.files[u], "targets/ladder.c") && w.lines[u] >= 14 &&
		    w.lines[u] <= 22 && w.lines[u + 1] == 26 && w.lines[u + 2] == 33 &&
		    w.lines[u + 3] == 44)
			good++;
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
	fprintf(stderr, "    %d of %d leaf samples resolved with files and lines\n", good,
	        leaf_samples);
	CHECK(leaf_samples >= 20);
	CHECK(good * 100 >= leaf_samples * 95);
}

SP_TEST(deleted_binary_symbolizes_offline)
{
	const char *bin = rec_target("ladder", "-g");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/deleted.spool", sp_test_tmpdir());
	record_ladder(bin, spool);
	REQUIRE(unlink(bin) == 0);
	check_ladder(spool, STACKPULSE_SYM_OFFLINE);
}

SP_TEST(rebuilt_binary_still_gives_recorded_names)
{
	char bin[600], cmd[2048], spool[600];
	snprintf(bin, sizeof(bin), "%s/ladder-rebuilt", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -g -fomit-frame-pointer -o '%s' '%s/tests/record/targets/ladder.c'", bin,
	         sp_test_source_root());
	REQUIRE(system(cmd) == 0);
	snprintf(spool, sizeof(spool), "%s/rebuilt.spool", sp_test_tmpdir());
	record_ladder(bin, spool);
	/* Same path, different code and build-id. */
	snprintf(cmd, sizeof(cmd),
	         "printf 'int pad1(void){return 1;}\\nint pad2(void){return 2;}\\nint "
	         "main(void){return pad1()+pad2();}\\n' "
	         "| gcc -O0 -g -x c -o '%s' -",
	         bin);
	REQUIRE(system(cmd) == 0);
	check_ladder(spool, 0);
}

static int count_files(const char *dir, const char *prefix, const char *suffix)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null | grep '^%s.*%s$' | wc -l", dir, prefix,
	         suffix);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* opts.cache_dir: the tables built at finish land there; "" keeps
 * the recorder away from any cache. */
SP_TEST(cache_dir_option_holds_the_finish_tables)
{
	char bin[600], cmd[2048], dir[600], off[600], spool[700];
	/* Its own build: another test deletes the shared one. */
	snprintf(bin, sizeof(bin), "%s/ladder-cachedir", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -g -fomit-frame-pointer -o '%s' '%s/tests/record/targets/ladder.c'", bin,
	         sp_test_source_root());
	REQUIRE(system(cmd) == 0);
	snprintf(dir, sizeof(dir), "%s/reccache", sp_test_tmpdir());
	snprintf(spool, sizeof(spool), "%s/cached.spool", sp_test_tmpdir());
	record_ladder_cached(bin, spool, dir);
	int tables = count_files(dir, "", "\\.spsym");
	printf("    %d tables in %s\n", tables, dir);
	CHECK(tables >= 1);
	/* The kernel table appears only when samples had kernel frames;
	 * test_kallsyms_cache.c covers it. */
	check_ladder(spool, STACKPULSE_SYM_OFFLINE);

	snprintf(off, sizeof(off), "%s/nocache-cwd", sp_test_tmpdir());
	snprintf(spool, sizeof(spool), "%s/uncached.spool", sp_test_tmpdir());
	REQUIRE(mkdir(off, 0700) == 0);
	char old_cache[700];
	const char *env = getenv("STACKPULSE_SYMBOL_CACHE_DIR");
	snprintf(old_cache, sizeof(old_cache), "%s", env ? env : "");
	setenv("STACKPULSE_SYMBOL_CACHE_DIR", off, 1); /* Would be used if "" were ignored. */
	record_ladder_cached(bin, spool, "");
	if (env)
		setenv("STACKPULSE_SYMBOL_CACHE_DIR", old_cache, 1);
	else
		unsetenv("STACKPULSE_SYMBOL_CACHE_DIR");
	CHECK_EQ(count_files(off, "", ""), 0);
	check_ladder(spool, STACKPULSE_SYM_OFFLINE);
}

/* Resolves every sample of @p spool with a symbolizer whose cache_dir is
 * @p cache_dir (its new cache entries are written when it is freed). */
static void symbolize_all(const char *spool, const char *cache_dir)
{
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	stackpulse_symbolizer_opts so;
	stackpulse_symbolizer_opts_init(&so);
	so.cache_dir = cache_dir;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int leaves = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		walk w = { 0 };
		CHECK_OK(stackpulse_symbolizer_for_each_frame(sym, s, collect, &w));
		for (uint32_t i = 0; i < w.n; i++)
			leaves += strcmp(w.names[i], "leaf") == 0;
	}
	CHECK(leaves > 0); /* the binary was read */
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
}

/* cache_dir and STACKPULSE_NO_SYMBOL_CACHE mean the same in the recorder
 * and the symbolizer: "" is no cache (not the default directory), and the
 * variable turns the cache off even over an explicit directory. */
SP_TEST(cache_dir_rule_is_the_same_for_recorder_and_symbolizer)
{
	char bin[600], cmd[1400], envdir[600], dir[600], spool[700], plain[700];
	snprintf(bin, sizeof(bin), "%s/ladder-cacherule", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -g -fomit-frame-pointer -o '%s' '%s/tests/record/targets/ladder.c'", bin,
	         sp_test_source_root());
	REQUIRE(system(cmd) == 0);
	snprintf(envdir, sizeof(envdir), "%s/rule-env", sp_test_tmpdir());
	snprintf(dir, sizeof(dir), "%s/rule-explicit", sp_test_tmpdir());
	REQUIRE(mkdir(envdir, 0700) == 0);
	REQUIRE(mkdir(dir, 0700) == 0);
	char old_env[700], old_off[64];
	const char *e = getenv("STACKPULSE_SYMBOL_CACHE_DIR");
	const char *off = getenv("STACKPULSE_NO_SYMBOL_CACHE");
	snprintf(old_env, sizeof(old_env), "%s", e ? e : "");
	snprintf(old_off, sizeof(old_off), "%s", off ? off : "");
	int had_env = e != NULL, had_off = off != NULL;
	/* Where NULL would go: "" must not land here. */
	setenv("STACKPULSE_SYMBOL_CACHE_DIR", envdir, 1);
	unsetenv("STACKPULSE_NO_SYMBOL_CACHE");

	/* Recorder: the variable wins over an explicit directory. */
	snprintf(spool, sizeof(spool), "%s/rule-rec.spool", sp_test_tmpdir());
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	record_ladder_cached(bin, spool, dir);
	unsetenv("STACKPULSE_NO_SYMBOL_CACHE");
	CHECK_EQ(count_files(dir, "", ""), 0);
	CHECK_EQ(count_files(envdir, "", ""), 0);

	/* A spool without embedded tables, so the symbolizer reads the binary
	 * and has new cache entries to write. */
	snprintf(plain, sizeof(plain), "%s/rule-plain.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o;
	stackpulse_recorder_opts_init(&o);
	o.frequency = 999;
	o.self_contained = false;
	o.cache_dir = "";
	char *argv[] = { bin, "1.0", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, plain, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 30));
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	CHECK_EQ(count_files(envdir, "", ""), 0); /* recorder: "" is no cache */

	symbolize_all(plain, ""); /* symbolizer: "" is no cache either */
	CHECK_EQ(count_files(envdir, "", ""), 0);
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	symbolize_all(plain, dir);
	unsetenv("STACKPULSE_NO_SYMBOL_CACHE");
	CHECK_EQ(count_files(dir, "", ""), 0);
	/* The same call with the cache allowed writes there: the checks above
	 * can fail. */
	symbolize_all(plain, dir);
	int written = count_files(dir, "", "\\.spsym");
	printf("    %d tables written when the cache is on\n", written);
	CHECK(written >= 1);

	if (had_env)
		setenv("STACKPULSE_SYMBOL_CACHE_DIR", old_env, 1);
	else
		unsetenv("STACKPULSE_SYMBOL_CACHE_DIR");
	if (had_off)
		setenv("STACKPULSE_NO_SYMBOL_CACHE", old_off, 1);
}

typedef struct vdso_walk {
	const char *name[64];
	int vdso[64], kernel[64];
	uint32_t n;
} vdso_walk;

static int vdso_collect(const stackpulse_frame *f, void *ctx)
{
	vdso_walk *w = ctx;
	if (w->n < 64) {
		const char *mod = stackpulse_frame_module(f);
		w->name[w->n] = stackpulse_frame_func_name(f);
		w->vdso[w->n] = mod && strcmp(mod, "[vdso]") == 0;
		w->kernel[w->n] = stackpulse_frame_kind(f) == STACKPULSE_FRAME_KERNEL;
		w->n++;
	}
	return 0;
}

/* clock_gettime in a loop runs in the vDSO, which is no file: its symbols
 * come from the running kernel's image and are embedded at finish, so the
 * spool names the vDSO's frames offline (perf's names: __vdso_* on x86_64,
 * __kernel_* on aarch64), and most samples of the loop land there. */
SP_TEST(vdso_frames_are_named_offline)
{
	const char *bin = rec_target("vdso", NULL);
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/vdso.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.cache_dir = "";
	char *argv[] = { (char *)bin, "1.5", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 30));
	REQUIRE_OK(rec_finish(rec));
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);

	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	int vdso_tables = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(sp); i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(sp, i);
		if (m->path && strcmp(m->path, "[vdso]") == 0)
			vdso_tables += m->has_symbols;
	}
	CHECK(vdso_tables >= 1);
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_OFFLINE;
	so.cache_dir = "";
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int in_loop = 0, in_vdso = 0, named = 0, clock = 0;
	char first_bad[256] = "", first_good[256] = "";
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		vdso_walk w = { 0 };
		CHECK_OK(stackpulse_symbolizer_for_each_frame(sym, s, vdso_collect, &w));
		int loop = 0;
		for (uint32_t i = 0; i < w.n; i++)
			loop |= strcmp(w.name[i], "vdso_loop") == 0;
		if (!loop)
			continue;
		in_loop++;
		uint32_t u = 0; /* The user leaf. */
		while (u < w.n && w.kernel[u])
			u++;
		if (u == w.n || !w.vdso[u])
			continue;
		in_vdso++;
		if (w.name[u][0] != '[') {
			named++;
			clock += strstr(w.name[u], "clock_gettime") != NULL;
			if (!first_good[0])
				snprintf(first_good, sizeof(first_good), "%s", w.name[u]);
		} else if (!first_bad[0]) {
			snprintf(first_bad, sizeof(first_bad), "%s", w.name[u]);
		}
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
	fprintf(stderr,
	        "    %d samples in vdso_loop, %d with a vDSO leaf, %d named (%d clock_gettime, "
	        "e.g. %s)%s%s\n",
	        in_loop, in_vdso, named, clock, first_good, first_bad[0] ? ", unnamed e.g. " : "",
	        first_bad);
	CHECK(in_loop >= 200);
	/* Most of the loop's time is the vDSO call; the rest is the loop. */
	CHECK(in_vdso * 2 >= in_loop);
	CHECK(named * 100 >= in_vdso * 95);
	CHECK(clock * 100 >= named * 90);

	/* The report example's table (the README demo's): the vDSO function
	 * by name, no "[vdso] [unresolved]" row. */
	const char *bin_dir = getenv("SP_BIN_DIR");
	char cmd[1600], line[1024];
	snprintf(cmd, sizeof(cmd), "%s/report '%s' 2>&1", bin_dir ? bin_dir : "zig-out/bin", spool);
	FILE *p = popen(cmd, "r");
	REQUIRE(p);
	int unresolved = 0, by_name = 0;
	while (fgets(line, sizeof(line), p)) {
		unresolved += strstr(line, "[vdso] [unresolved]") != NULL;
		by_name += strstr(line, "clock_gettime") != NULL;
	}
	int st = pclose(p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(unresolved, 0);
	CHECK(by_name >= 1);
}
