/* A stripped binary recorded while its debug file was nowhere to be found:
 * the spool's embedded table has entries but no names. Once the debug file
 * sits in a debug root's .build-id tree, the symbolizer must still name the
 * frames (the embedded answer is not final when it has no name), and an
 * unnamed answer in the on-disk cache must not block it either. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sym_fixture.h"

static const char work_src[] = "#include <stdio.h>\n"
                               "volatile double sink;\n"
                               "__attribute__((noinline)) double hot_loop(long n)\n"
                               "{\n"
                               "\tdouble s = 0;\n"
                               "\tfor (long i = 0; i < n; i++) {\n"
                               "\t\ts = s * 1.0000001 + 0.5;\n"
                               "\t\tsink = s;\n"
                               "\t}\n"
                               "\treturn s;\n"
                               "}\n"
                               "int main(void)\n"
                               "{\n"
                               "\tdouble t = 0;\n"
                               "\tfor (int k = 0; k < 25; k++)\n"
                               "\t\tt += hot_loop(10000000);\n"
                               "\tprintf(\"%f\\n\", t);\n"
                               "\treturn 0;\n"
                               "}\n";

typedef struct tally {
	int samples, named, unnamed_work;
} tally;

typedef struct one {
	int hot, hot_file, work_plus;
} one;

static int frame_cb(const stackpulse_frame *f, void *ctx)
{
	one *o = ctx;
	const char *name = stackpulse_frame_func_name(f);
	const char *file = stackpulse_frame_file(f);
	if (strcmp(name, "hot_loop") == 0) {
		o->hot = 1;
		o->hot_file = file && fx_ends_with(file, "work.c");
	}
	o->work_plus |= strncmp(name, "work+0x", 7) == 0;
	return 0;
}

/* Symbolizes every sample of @p spool_path with @p opts. */
static tally symbolize_all(const char *spool_path, const stackpulse_symbolizer_opts *opts,
                           struct stackpulse_symbolizer_stats *counters)
{
	tally t = { 0, 0, 0 };
	stackpulse_spool *spool;
	REQUIRE_OK(stackpulse_spool_open(spool_path, NULL, &spool));
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(spool, opts, &sym));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(spool, &it));
	const struct stackpulse_sample *s;
	int rc;
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		one o = { 0, 0, 0 };
		REQUIRE_OK(stackpulse_symbolizer_for_each_frame(sym, s, frame_cb, &o));
		t.samples++;
		t.named += o.hot && o.hot_file;
		t.unnamed_work += o.work_plus;
	}
	CHECK_EQ(rc, 0);
	if (counters) {
		counters->sz = sizeof(*counters);
		REQUIRE_OK(stackpulse_symbolizer_stats(sym, counters));
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	return t;
}

SP_TEST(embedded_table_without_names_falls_back_to_debug_dirs)
{
	if (!fx_have("gcc") || !fx_have("objcopy"))
		sp_test_skip("gcc or objcopy not installed");
	char src[512], full[512], bin[512], dbg[512], empty[512], root[512], cache[512];
	char spool_path[512], bidpath[1024], hex[129];
	fx_path(src, sizeof(src), "work.c");
	fx_path(full, sizeof(full), "work.full");
	fx_path(bin, sizeof(bin), "work");
	fx_path(dbg, sizeof(dbg), "work.debug");
	fx_path(empty, sizeof(empty), "no-debug-here");
	fx_path(root, sizeof(root), "debugroot");
	fx_path(cache, sizeof(cache), "symcache");
	fx_path(spool_path, sizeof(spool_path), "work.spool");
	fx_write_file(src, work_src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", full, src);
	fx_sh("objcopy --only-keep-debug '%s' '%s'", full, dbg);
	fx_sh("objcopy --strip-all '%s' '%s'", full, bin);
	fx_sh("mkdir -p '%s'", empty);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	REQUIRE(bid_len >= 2);
	sp_hex(bid, bid_len, hex);

	/* Record with no debug file reachable and no symbol cache. The
	 * variable turns the symbolizer's cache off too: unset it for the
	 * symbolizers below, which use their own cache directory. */
	setenv("STACKPULSE_DEBUG_DIRS", empty, 1);
	setenv("STACKPULSE_NO_SYMBOL_CACHE", "1", 1);
	fx_record(bin, spool_path);
	unsetenv("STACKPULSE_DEBUG_DIRS");
	unsetenv("STACKPULSE_NO_SYMBOL_CACHE");

	/* The embedded table exists but cannot name the workload. */
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_OFFLINE;
	tally t = symbolize_all(spool_path, &so, NULL);
	fprintf(stderr, "    offline: %d samples, %d named, %d work+0x...\n", t.samples, t.named,
	        t.unnamed_work);
	REQUIRE(t.samples >= 20);
	CHECK_EQ(t.named, 0);
	CHECK(t.unnamed_work * 10 >= t.samples * 8);

	/* Cache the unnamed answers: no debug root knows the file yet. */
	so.flags = 0;
	so.debug_dirs = empty;
	so.cache_dir = cache;
	t = symbolize_all(spool_path, &so, NULL);
	CHECK_EQ(t.named, 0);

	/* The debug file appears in a .build-id tree. */
	snprintf(bidpath, sizeof(bidpath), "%s/.build-id/%.2s", root, hex);
	fx_sh("mkdir -p '%s'", bidpath);
	snprintf(bidpath, sizeof(bidpath), "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2);
	fx_sh("cp '%s' '%s'", dbg, bidpath);
	so.debug_dirs = root;
	struct stackpulse_symbolizer_stats c;
	t = symbolize_all(spool_path, &so, &c);
	fprintf(stderr, "    with the debug root: %d samples, %d named (debug files %llu)\n",
	        t.samples, t.named, (unsigned long long)c.debug_files);
	CHECK(c.debug_files >= 1);
	CHECK(t.named * 10 >= t.samples * 8);

	/* The cache now holds the names: they win over its old unnamed entries. */
	so.debug_dirs = empty;
	t = symbolize_all(spool_path, &so, &c);
	fprintf(stderr, "    from the cache alone: %d named, %llu cache hits, %llu debug files\n",
	        t.named, (unsigned long long)c.cache_hits, (unsigned long long)c.debug_files);
	CHECK(t.named * 10 >= t.samples * 8);
	CHECK_EQ(c.debug_files, 0);
}

/* A debug file with compressed DWARF (as distributions ship them) found
 * once through a debug root is kept decompressed in the cache directory,
 * and the next symbolizer reads that copy, with the same answers. */
SP_TEST(compressed_debug_file_gets_a_plain_copy_in_the_cache)
{
	if (!fx_have("gcc") || !fx_have("objcopy") || !fx_have("readelf"))
		sp_test_skip("gcc, objcopy or readelf not installed");
	char src[512], full[512], bin[512], root[512], cache[512], bidpath[1024], hex[129];
	char copy[1024];
	fx_path(src, sizeof(src), "gz.c");
	fx_path(full, sizeof(full), "gz.full");
	fx_path(bin, sizeof(bin), "gz");
	fx_path(root, sizeof(root), "gzroot");
	fx_path(cache, sizeof(cache), "gzcache");
	fx_write_file(src, work_src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", full, src);
	fx_sh("objcopy --strip-all '%s' '%s'", full, bin);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	REQUIRE(bid_len >= 2);
	sp_hex(bid, bid_len, hex);
	snprintf(bidpath, sizeof(bidpath), "%s/.build-id/%.2s", root, hex);
	fx_sh("mkdir -p '%s'", bidpath);
	snprintf(bidpath, sizeof(bidpath), "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2);
	fx_sh("objcopy --only-keep-debug --compress-debug-sections=zlib '%s' '%s'", full, bidpath);
	/* The debug file really is compressed. */
	fx_sh("readelf -SW '%s' 2>/dev/null | grep -q '\\.debug_info .* C '", bidpath);

	uint64_t addr, size;
	fx_symbol(full, "hot_loop", &addr, &size);
	uint64_t off = fx_offset(full, addr);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	uint32_t first = 0;
	for (uint64_t i = 0; i < size; i++) {
		uint32_t id = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, off + i);
		if (i == 0)
			first = id;
	}
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.debug_dirs = root;
	so.cache_dir = cache;
	static fx_frames a, b;
	for (int round = 0; round < 2; round++) {
		fx_frames *c = round == 0 ? &a : &b;
		/* The second round must not need the debug root at all. */
		so.debug_dirs = round == 0 ? root : "/nonexistent-debug-root";
		stackpulse_symbolizer *sym;
		REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &so, &sym));
		c->n = 0;
		for (uint64_t i = 0; i < size; i++)
			REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, first + (uint32_t)i,
			                                               fx_collect, c));
		struct stackpulse_symbolizer_stats k;
		k.sz = sizeof(k);
		REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
		stackpulse_symbolizer_free(sym);
		CHECK_EQ(k.debug_files, 1);
		if (round == 0) {
			snprintf(copy, sizeof(copy), "%s/%s.debug", cache, hex);
			REQUIRE(access(copy, R_OK) == 0);
			fx_sh("readelf -SW '%s' 2>/dev/null | grep -q '\\.debug_info '", copy);
			fx_sh("! readelf -SW '%s' 2>/dev/null | grep -q '\\.debug_info .* C '",
			      copy);
			/* The symbol cache would answer round 2 by itself: remove it
			 * so the copy is what gets read. */
			fx_sh("rm -f '%s'/*.spsym", cache);
		}
	}
	fx_spool_free(&sp);
	REQUIRE(a.n > 0);
	CHECK_EQ(a.n, b.n);
	int named = 0;
	for (int i = 0; i < a.n && i < b.n; i++) {
		CHECK_STR(a.f[i].name, b.f[i].name);
		CHECK_STR(a.f[i].file, b.f[i].file);
		CHECK_EQ(a.f[i].line, b.f[i].line);
		named += strcmp(a.f[i].name, "hot_loop") == 0 && fx_ends_with(a.f[i].file, "gz.c");
	}
	CHECK(named * 10 >= a.n * 9);
}
