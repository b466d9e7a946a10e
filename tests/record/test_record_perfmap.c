/* Perf maps: anonymous code named by /tmp/perf-PID.map (here CPython 3.12's
 * -X perf trampolines) keeps its names after the map file is gone. */
#include <errno.h>

#include "format/spool_reader.h"
#include "rec_util.h"
#include "rec_stats.h"

typedef struct find {
	const char *needle;
	int hits;
	int jit_kind;
} find;

static int look(const stackpulse_frame *f, void *ctx)
{
	find *x = ctx;
	if (strstr(stackpulse_frame_func_name(f), x->needle)) {
		x->hits++;
		x->jit_kind += stackpulse_frame_kind(f) == STACKPULSE_FRAME_JIT;
		return 1;
	}
	return 0;
}

SP_TEST(perf_map_names_survive_the_map_file)
{
	const char *py = "/root/.pyenv/versions/3.12.1/bin/python3.12";
	if (access(py, X_OK) != 0)
		sp_test_skip("no CPython 3.12 (needed for -X perf)");
	char script[600], spool[600];
	snprintf(script, sizeof(script), "%s/jit.py", sp_test_tmpdir());
	FILE *f = fopen(script, "w");
	REQUIRE(f);
	fputs("import time\n"
	      "def hot_perfmap_fn(n):\n"
	      "    s = 0\n"
	      "    for i in range(n):\n"
	      "        s += i * i\n"
	      "    return s\n"
	      "end = time.time() + 1.5\n"
	      "while time.time() < end:\n"
	      "    hot_perfmap_fn(20000)\n",
	      f);
	fclose(f);
	snprintf(spool, sizeof(spool), "%s/jit.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.python = STACKPULSE_FEATURE_OFF; /* Names must come from the map alone. */
	char *argv[] = { (char *)py, "-X", "perf", script, NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 30));
	REQUIRE_OK(rec_finish(rec));
	int status = 0;
	waitpid(pid, &status, 0);
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	CHECK(unlink(map) == 0);

	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, NULL, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	find x = { "hot_perfmap_fn", 0, 0 };
	uint32_t samples = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		samples++;
		int rc = stackpulse_symbolizer_for_each_frame(sym, s, look, &x);
		CHECK(rc >= 0);
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
	fprintf(stderr, "    %d of %u samples name hot_perfmap_fn through the perf map\n", x.hits,
	        samples);
	CHECK(samples >= 20);
	CHECK(x.hits * 2 >= (int)samples);
	CHECK_EQ(x.jit_kind, x.hits);
}

SP_TEST(planted_perf_map_is_not_trusted)
{
	/* A map owned by another user must not name a root process's code. */
	const char *bin = rec_target("ladder", NULL);
	char spool[600], map[64];
	snprintf(spool, sizeof(spool), "%s/planted.spool", sp_test_tmpdir());
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	char *argv[] = { (char *)bin, "0.5", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	FILE *f = fopen(map, "w");
	REQUIRE(f);
	fputs("0 ffffffffffff planted_name\n", f);
	fclose(f);
	REQUIRE(chown(map, 65534, 65534) == 0);
	CHECK_OK(rec_run(rec, 30));
	REQUIRE_OK(rec_finish(rec));
	int status = 0;
	waitpid(pid, &status, 0);
	unlink(map);
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const char *name = NULL;
	uint64_t start = 0;
	CHECK(sp_spool_jitsym_lookup(sp, 0, 0x1000, &name, &start) != 0);
	stackpulse_spool_close(sp);
}
