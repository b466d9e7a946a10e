/* The symbolizer on a real recording: a workload built here with -O2 -g is
 * recorded by the recorder, and its samples must symbolize to the workload's
 * own functions, callers and source file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sym_fixture.h"

static const char work_src[] =
        "#include <stdio.h>\n"
        "volatile double sink;\n"
        "static inline __attribute__((always_inline)) double step(double x)\n"
        "{\n"
        "\treturn x * 1.0000001 + 0.5; /* STEP */\n"
        "}\n"
        "__attribute__((noinline)) double hot_loop(long n)\n"
        "{\n"
        "\tdouble s = 0;\n"
        "\tfor (long i = 0; i < n; i++) {\n"
        "\t\ts = step(s);\n"
        "\t\tsink = s;\n"
        "\t}\n"
        "\treturn s;\n"
        "}\n"
        "__attribute__((noinline)) double driver(void)\n"
        "{\n"
        "\tdouble t = 0;\n"
        "\tfor (int k = 0; k < 30; k++)\n"
        "\t\tt += hot_loop(10000000);\n"
        "\treturn t;\n"
        "}\n"
        "int main(void) { printf(\"%f\\n\", driver()); return 0; }\n";

typedef struct tally {
	int frames;
	int has_hot, has_driver, has_main, hot_file_ok, leaf_is_workload;
} tally;

static int count_cb(const stackpulse_frame *f, void *ctx)
{
	tally *t = ctx;
	const char *name = stackpulse_frame_func_name(f);
	const char *file = stackpulse_frame_file(f);
	if (t->frames == 0)
		t->leaf_is_workload = strcmp(name, "hot_loop") == 0 || strcmp(name, "step") == 0;
	if (strcmp(name, "hot_loop") == 0) {
		t->has_hot = 1;
		t->hot_file_ok = file && fx_ends_with(file, "work.c");
	}
	if (strcmp(name, "driver") == 0)
		t->has_driver = 1;
	if (strcmp(name, "main") == 0)
		t->has_main = 1;
	t->frames++;
	return 0;
}

SP_TEST(recorded_workload_symbolizes_to_its_functions)
{
	if (!fx_have("gcc"))
		sp_test_skip("gcc not installed");
	char src[512], bin[512], spool_path[512];
	fx_path(src, sizeof(src), "work.c");
	fx_path(bin, sizeof(bin), "work");
	fx_path(spool_path, sizeof(spool_path), "work.spool");
	fx_write_file(src, work_src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", bin, src);

	fx_record(bin, spool_path);

	stackpulse_spool *spool;
	REQUIRE_OK(stackpulse_spool_open(spool_path, NULL, &spool));
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_NO_CACHE;
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(spool, &so, &sym));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(spool, &it));
	const struct stackpulse_sample *s;
	int rc, samples = 0, hot = 0, full_chain = 0, leaf_ok = 0;
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		tally t;
		memset(&t, 0, sizeof(t));
		REQUIRE_OK(stackpulse_symbolizer_for_each_frame(sym, s, count_cb, &t));
		samples++;
		if (t.has_hot && t.hot_file_ok)
			hot++;
		if (t.has_hot && t.has_driver && t.has_main)
			full_chain++;
		leaf_ok += t.leaf_is_workload;
	}
	CHECK_EQ(rc, 0);
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	fprintf(stderr,
	        "    %d samples, %d in hot_loop, %d with hot_loop<-driver<-main, %d leaf in it\n",
	        samples, hot, full_chain, leaf_ok);
	REQUIRE(samples >= 10);
	/* The workload spends nearly all its time in hot_loop. */
	CHECK(hot * 10 >= samples * 8);
	CHECK(full_chain * 10 >= samples * 8);
	CHECK(leaf_ok * 10 >= samples * 8);
}
