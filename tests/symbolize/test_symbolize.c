/* The symbolizer against real binaries compiled here: names, files, lines
 * and nested inline chains (gcc, gcc -no-pie, clang-14 without
 * .debug_aranges), return-address lookups, C++ demangling, stripped
 * binaries with debug files found by build-id and by .gnu_debuglink, a
 * rebuilt binary (build-id mismatch), and the symbol cache (warm runs skip
 * DWARF) and embedded tables (offline, binary deleted). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym_fixture.h"
#include "symbolize/demangle.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

static const char c_src[] = "#include <stdio.h>\n"
                            "volatile int sink;\n"
                            "static inline __attribute__((always_inline)) void inner(int x)\n"
                            "{\n"
                            "\tsink = x;     /* INNER_A */\n"
                            "\tsink = x * 7; /* INNER_B */\n"
                            "}\n"
                            "static inline __attribute__((always_inline)) void middle(int x)\n"
                            "{\n"
                            "\tsink = 11;    /* MIDDLE_A */\n"
                            "\tinner(x);     /* CALL_INNER */\n"
                            "\tsink = 12;    /* MIDDLE_B */\n"
                            "}\n"
                            "__attribute__((noinline)) void outer(int x)\n"
                            "{\n"
                            "\tsink = 21;\n"
                            "\tmiddle(x);    /* CALL_MIDDLE */\n"
                            "\tsink = 22;\n"
                            "}\n"
                            "__attribute__((noinline)) int compute(int n)\n"
                            "{                /* COMPUTE_OPEN */\n"
                            "\tint s = 0;\n"
                            "\tfor (int i = 0; i < n; i++)\n"
                            "\t\ts += i * sink;\n"
                            "\treturn s;     /* COMPUTE_END */\n"
                            "}\n"
                            "int main(int argc, char **argv)\n"
                            "{\n"
                            "\t(void)argv;\n"
                            "\touter(argc);\n"
                            "\tint r = compute(argc * 100); /* CALL_COMPUTE */\n"
                            "\tprintf(\"%d\\n\", r);\n"
                            "\treturn 0;\n"
                            "}\n";

/* Compiles c_src (or @p src) into the scratch dir; returns the binary path. */
static const char *build(const char *cc, const char *flags, const char *name, const char *src,
                         const char *ext)
{
	static char bin[512];
	char srcpath[512];
	if (!fx_have(cc))
		sp_test_skip("compiler not installed");
	snprintf(srcpath, sizeof(srcpath), "%s/%s.%s", sp_test_tmpdir(), name, ext);
	fx_write_file(srcpath, src);
	snprintf(bin, sizeof(bin), "%s/%s", sp_test_tmpdir(), name);
	fx_sh("%s %s -o '%s' '%s'", cc, flags, bin, srcpath);
	return bin;
}

/* Resolves each offset of [start, start+size) of @p bin as a leaf frame. */
typedef struct scan {
	fx_spool sp;
	stackpulse_symbolizer *sym;
	uint32_t first_frame;
	uint64_t first_off;
	size_t count;
} scan;

static void scan_open(scan *s, const char *bin, uint64_t off, size_t count,
                      const stackpulse_symbolizer_opts *opts)
{
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	REQUIRE(bid_len > 0);
	fx_spool_begin(&s->sp);
	uint32_t mod = fx_module(&s->sp, bin, bid, bid_len);
	for (size_t i = 0; i < count; i++) {
		uint32_t id = fx_frame(&s->sp, STACKPULSE_FRAME_NATIVE, mod, off + i);
		if (i == 0)
			s->first_frame = id;
		REQUIRE(id == s->first_frame + i);
	}
	s->first_off = off;
	s->count = count;
	fx_spool_open(&s->sp);
	REQUIRE_OK(stackpulse_symbolizer_new(s->sp.spool, opts, &s->sym));
}

static void scan_close(scan *s)
{
	stackpulse_symbolizer_free(s->sym);
	fx_spool_free(&s->sp);
}

static void resolve(scan *s, size_t i, fx_frames *out)
{
	out->n = 0;
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(s->sym, s->first_frame + (uint32_t)i,
	                                               fx_collect, out));
	REQUIRE(out->n >= 1);
}

/* Debug roots for check_c_program (NULL: the environment decides). */
static const char *g_debug_dirs = "/nonexistent-debug-root";

static stackpulse_symbolizer_opts no_cache_opts(void)
{
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_NO_CACHE;
	o.debug_dirs = g_debug_dirs;
	return o;
}

static int fx_stop_after_one(const stackpulse_frame *f, void *ctx)
{
	(void)f, (void)ctx;
	return 7;
}

/* The checks shared by every C build of c_src: @p bin is named in the
 * spool, @p symbin (the unstripped build) gives addresses via nm/objdump. */
static void check_c_program2(const char *bin, const char *symbin)
{
	uint32_t l_inner_a = fx_line_of(c_src, "INNER_A"), l_inner_b = fx_line_of(c_src, "INNER_B");
	uint32_t l_mid_a = fx_line_of(c_src, "MIDDLE_A"), l_mid_b = fx_line_of(c_src, "MIDDLE_B");
	uint32_t l_call_inner = fx_line_of(c_src, "CALL_INNER");
	uint32_t l_call_middle = fx_line_of(c_src, "CALL_MIDDLE");
	uint32_t l_compute_open = fx_line_of(c_src, "COMPUTE_OPEN");
	uint32_t l_compute_end = fx_line_of(c_src, "COMPUTE_END");
	uint32_t l_call_compute = fx_line_of(c_src, "CALL_COMPUTE");
	stackpulse_symbolizer_opts o = no_cache_opts();

	/* 1. Every instruction byte of outer(): physical frame outer, and any
	 * inline chain is exactly inner → middle → outer with call sites. */
	uint64_t addr, size;
	fx_symbol(symbin, "outer", &addr, &size);
	REQUIRE(size > 0 && size < 4096);
	scan s;
	scan_open(&s, bin, fx_offset(symbin, addr), (size_t)size, &o);
	int saw_nested = 0;
	for (size_t i = 0; i < s.count; i++) {
		fx_frames c;
		resolve(&s, i, &c);
		fx_frame_rec *phys = &c.f[c.n - 1];
		CHECK_STR(phys->name, "outer");
		CHECK_EQ(phys->kind, STACKPULSE_FRAME_NATIVE);
		CHECK_EQ(phys->depth, 0);
		CHECK(fx_ends_with(phys->file, "prog_c.c") || !phys->has_file);
		if (c.n == 3) {
			saw_nested = 1;
			CHECK_STR(c.f[0].name, "inner");
			CHECK(c.f[0].line == l_inner_a || c.f[0].line == l_inner_b);
			CHECK_EQ(c.f[0].kind, STACKPULSE_FRAME_INLINE);
			CHECK_EQ(c.f[0].depth, 2);
			CHECK_STR(c.f[1].name, "middle");
			CHECK_EQ(c.f[1].line, l_call_inner);
			CHECK_EQ(c.f[1].depth, 1);
			CHECK_EQ(c.f[1].kind, STACKPULSE_FRAME_INLINE);
			CHECK_EQ(phys->line, l_call_middle);
		} else if (c.n == 2) {
			CHECK_STR(c.f[0].name, "middle");
			CHECK(c.f[0].line >= l_mid_a && c.f[0].line <= l_mid_b);
			CHECK_EQ(phys->line, l_call_middle);
		} else {
			CHECK_EQ(c.n, 1);
		}
		if (c.n > 3 || (c.n == 3 && strcmp(c.f[0].name, "inner") != 0))
			fx_dump(&c);
	}
	CHECK(saw_nested);
	/* NO_INLINE keeps only the physical frame. */
	stackpulse_symbolizer_free(s.sym);
	o.flags |= STACKPULSE_SYM_NO_INLINE;
	REQUIRE_OK(stackpulse_symbolizer_new(s.sp.spool, &o, &s.sym));
	for (size_t i = 0; i < s.count; i++) {
		fx_frames c;
		resolve(&s, i, &c);
		CHECK_EQ(c.n, 1);
		CHECK_STR(c.f[0].name, "outer");
	}
	o.flags &= ~(uint32_t)STACKPULSE_SYM_NO_INLINE;
	scan_close(&s);

	/* 2. A leaf at compute's first byte, and main's return address as the
	 * caller: the caller resolves to the call line (offset - 1). */
	fx_symbol(symbin, "compute", &addr, &size);
	uint64_t ret = fx_return_address(symbin, "main", "compute");
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	uint32_t frames[2] = { fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, fx_offset(symbin, addr)),
		               fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod,
		                        fx_offset(symbin, ret)) };
	uint32_t stack = fx_stack(&sp, frames, 2);
	fx_spool_open(&sp);
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	REQUIRE_EQ(c.n, 2);
	CHECK_STR(c.f[0].name, "compute");
	CHECK(c.f[0].line >= l_compute_open - 1 && c.f[0].line <= l_compute_end);
	CHECK(fx_ends_with(c.f[0].file, "prog_c.c"));
	CHECK_STR(c.f[0].module, bin);
	CHECK_EQ(c.f[0].offset, fx_offset(symbin, addr));
	CHECK_EQ(c.f[0].raw_id, frames[0]);
	CHECK_STR(c.f[1].name, "main");
	CHECK_EQ(c.f[1].line, l_call_compute);
	CHECK_EQ(c.f[1].offset, fx_offset(symbin, ret));
	/* Walking again is answered from the result cache. */
	struct stackpulse_symbolizer_stats k1, k2;
	k1.sz = sizeof(k1);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k1));
	c.n = 0;
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	k2.sz = sizeof(k2);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k2));
	CHECK_EQ(k2.dwarf_lookups, k1.dwarf_lookups);
	CHECK_EQ(k2.result_hits, k1.result_hits + 2);
	/* A nonzero callback value stops the walk and is returned. */
	CHECK_EQ(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_stop_after_one, NULL),
	         7);
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

static void check_c_program(const char *bin)
{
	check_c_program2(bin, bin);
}

SP_TEST(gcc_o2_names_lines_nested_inlines)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	check_c_program(bin);
	/* Binaries and debug files are closed with the symbolizer: a second
	 * round leaves the descriptor count where it was. */
	int fds = fx_fd_count();
	check_c_program(bin);
	CHECK(fds > 0);
	CHECK_EQ(fx_fd_count(), fds);
}

SP_TEST(gcc_no_pie_offsets_differ_from_addresses)
{
	const char *bin = build("gcc", "-O2 -g -no-pie", "prog_c", c_src, "c");
	uint64_t addr, size;
	fx_symbol(bin, "outer", &addr, &size);
	REQUIRE(fx_offset(bin, addr) != addr);
	check_c_program(bin);
}

SP_TEST(clang14_without_aranges_walks_cus)
{
	const char *bin = build("clang-14", "-O2 -g", "prog_c", c_src, "c");
	check_c_program(bin);
}

static const char cxx_src[] = "volatile int sink;\n"
                              "namespace app {\n"
                              "namespace detail {\n"
                              "template <typename T>\n"
                              "__attribute__((always_inline)) inline void helper(T v)\n"
                              "{\n"
                              "\tsink = (int)v;     // HELPER_A\n"
                              "\tsink = (int)v * 3; // HELPER_B\n"
                              "}\n"
                              "} // namespace detail\n"
                              "template <typename T>\n"
                              "struct Worker {\n"
                              "\t__attribute__((noinline, noipa)) void run(T v)\n"
                              "\t{\n"
                              "\t\tsink = 1;\n"
                              "\t\tdetail::helper<T>(v); // CALL_HELPER\n"
                              "\t\tsink = 2;\n"
                              "\t}\n"
                              "};\n"
                              "} // namespace app\n"
                              "int main(int argc, char **)\n"
                              "{\n"
                              "\tapp::Worker<long> w;\n"
                              "\tw.run(argc);\n"
                              "\treturn 0;\n"
                              "}\n";

SP_TEST(cxx_namespaces_templates_always_inline)
{
	if (!sp_demangle_cxx_available())
		sp_test_skip("libstdc++.so.6 (__cxa_demangle) cannot be loaded");
	const char *bin = build("g++", "-O2 -g", "prog_cxx", cxx_src, "cc");
	uint32_t l_helper_a = fx_line_of(cxx_src, "HELPER_A"),
	         l_helper_b = fx_line_of(cxx_src, "HELPER_B");
	uint32_t l_call = fx_line_of(cxx_src, "CALL_HELPER");
	uint64_t addr, size;
	fx_symbol(bin, "_ZN3app6WorkerIlE3runEl", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	scan s;
	scan_open(&s, bin, fx_offset(bin, addr), (size_t)size, &o);
	int saw_inline = 0;
	for (size_t i = 0; i < s.count; i++) {
		fx_frames c;
		resolve(&s, i, &c);
		CHECK_STR(c.f[c.n - 1].name, "app::Worker<long>::run(long)");
		if (c.n == 2) {
			saw_inline = 1;
			CHECK(strstr(c.f[0].name, "app::detail::helper<long>(long)") != NULL);
			CHECK(c.f[0].line == l_helper_a || c.f[0].line == l_helper_b);
			CHECK(fx_ends_with(c.f[0].file, "prog_cxx.cc"));
			CHECK_EQ(c.f[0].kind, STACKPULSE_FRAME_INLINE);
			CHECK_EQ(c.f[1].line, l_call);
			CHECK(fx_ends_with(c.f[1].file, "prog_cxx.cc"));
		} else {
			CHECK_EQ(c.n, 1);
		}
	}
	CHECK(saw_inline);
	/* RAW_NAMES keeps the mangled names. */
	stackpulse_symbolizer_free(s.sym);
	o.flags |= STACKPULSE_SYM_RAW_NAMES;
	REQUIRE_OK(stackpulse_symbolizer_new(s.sp.spool, &o, &s.sym));
	fx_frames c;
	resolve(&s, 0, &c);
	CHECK_STR(c.f[c.n - 1].name, "_ZN3app6WorkerIlE3runEl");
	scan_close(&s);
}

/* Builds c_src, then a stripped copy and its debug file. */
static void build_stripped(char *full, char *stripped, char *debug, size_t cap)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	if (!fx_have("objcopy") || !fx_have("strip"))
		sp_test_skip("binutils not installed");
	snprintf(full, cap, "%s", bin);
	snprintf(stripped, cap, "%s/prog_s", sp_test_tmpdir());
	snprintf(debug, cap, "%s/prog_c.debug", sp_test_tmpdir());
	fx_sh("objcopy --only-keep-debug '%s' '%s'", full, debug);
	fx_sh("strip --strip-all -o '%s' '%s'", stripped, full);
}

SP_TEST(stripped_binary_debug_file_in_build_id_tree)
{
	char full[512], stripped[512], debug[512], root[512];
	build_stripped(full, stripped, debug, sizeof(full));
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(stripped, bid, &bid_len);
	REQUIRE(bid_len >= 2);
	char hex[129];
	sp_hex(bid, bid_len, hex);
	fx_path(root, sizeof(root), "dbgroot");
	fx_sh("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s/.build-id/%.2s/%s.debug'", root, hex,
	      debug, root, hex, hex + 2);

	/* Without the root: no DWARF, no .symtab: module+offset, never a guess. */
	uint64_t addr, size;
	fx_symbol(full, "outer", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	scan s;
	scan_open(&s, stripped, fx_offset(full, addr), 1, &o);
	fx_frames c;
	resolve(&s, 0, &c);
	char want[128];
	snprintf(want, sizeof(want), "prog_s+0x%llx", (unsigned long long)fx_offset(full, addr));
	CHECK_EQ(c.n, 1);
	CHECK_STR(c.f[0].name, want);
	CHECK(!c.f[0].has_file);
	scan_close(&s);

	/* With STACKPULSE_DEBUG_DIRS naming the root (after a relative entry,
	 * which is ignored): everything resolves. */
	char env[1200];
	snprintf(env, sizeof(env), "relative/dir:%s", root);
	setenv("STACKPULSE_DEBUG_DIRS", env, 1);
	g_debug_dirs = NULL;
	check_c_program2(stripped, full);
	/* opts.debug_dirs replaces the variable. */
	o.debug_dirs = "/nonexistent-debug-root";
	scan_open(&s, stripped, fx_offset(full, addr), 1, &o);
	resolve(&s, 0, &c);
	CHECK_STR(c.f[0].name, want);
	scan_close(&s);
	o.debug_dirs = root;
	scan_open(&s, stripped, fx_offset(full, addr), 1, &o);
	resolve(&s, 0, &c);
	CHECK_STR(c.f[c.n - 1].name, "outer");
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK_EQ(k.debug_files, 1);
	scan_close(&s);
	unsetenv("STACKPULSE_DEBUG_DIRS");
	g_debug_dirs = "/nonexistent-debug-root";
}

SP_TEST(stripped_binary_gnu_debuglink_with_crc)
{
	char full[512], stripped[512], debug[512], linked[512];
	build_stripped(full, stripped, debug, sizeof(full));
	fx_path(linked, sizeof(linked), "prog_l");
	fx_sh("cd '%s' && objcopy --add-gnu-debuglink=prog_c.debug prog_s prog_l",
	      sp_test_tmpdir());
	uint64_t addr, size;
	fx_symbol(full, "outer", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	scan s;
	fx_frames c;
	/* The debug file next to the binary, CRC matching. */
	scan_open(&s, linked, fx_offset(full, addr), 1, &o);
	resolve(&s, 0, &c);
	CHECK_STR(c.f[c.n - 1].name, "outer");
	CHECK(fx_ends_with(c.f[c.n - 1].file, "prog_c.c"));
	scan_close(&s);
	/* In .debug/ beside it. */
	fx_sh("cd '%s' && mkdir -p .debug && mv prog_c.debug .debug/", sp_test_tmpdir());
	scan_open(&s, linked, fx_offset(full, addr), 1, &o);
	resolve(&s, 0, &c);
	CHECK_STR(c.f[c.n - 1].name, "outer");
	scan_close(&s);
	/* A changed debug file (CRC mismatch) is not used. */
	fx_sh("cd '%s' && printf x >> .debug/prog_c.debug", sp_test_tmpdir());
	scan_open(&s, linked, fx_offset(full, addr), 1, &o);
	resolve(&s, 0, &c);
	CHECK(strncmp(c.f[c.n - 1].name, "prog_l+0x", 9) == 0);
	scan_close(&s);
	fx_sh("cd '%s' && rm -rf .debug", sp_test_tmpdir());
}

SP_TEST(rebuilt_binary_build_id_mismatch_gives_no_wrong_names)
{
	const char *bin = build("gcc", "-O2 -g", "prog_mm", c_src, "c");
	char path[512];
	snprintf(path, sizeof(path), "%s", bin);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(path, bid, &bid_len);
	uint64_t addr, size;
	fx_symbol(path, "outer", &addr, &size);
	uint64_t off = fx_offset(path, addr);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, path, bid, bid_len);
	uint32_t f = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, off);
	fx_spool_open(&sp);
	/* Rebuild at the same path with different code. */
	static const char other[] = "volatile int v;\n"
	                            "__attribute__((noinline)) void wrong_a(void) { v = 1; }\n"
	                            "__attribute__((noinline)) void wrong_b(void) { v = 2; }\n"
	                            "int main(void) { wrong_a(); wrong_b(); return v; }\n";
	build("gcc", "-O2 -g", "prog_mm", other, "c");
	uint8_t bid2[64];
	uint32_t bid2_len;
	fx_build_id(path, bid2, &bid2_len);
	REQUIRE(bid2_len != bid_len || memcmp(bid, bid2, bid_len) != 0);
	stackpulse_symbolizer_opts o = no_cache_opts();
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f, fx_collect, &c));
	REQUIRE_EQ(c.n, 1);
	char want[128];
	snprintf(want, sizeof(want), "prog_mm+0x%llx", (unsigned long long)off);
	CHECK_STR(c.f[0].name, want);
	CHECK(!c.f[0].has_file);
	CHECK_EQ(c.f[0].line, 0);
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
	CHECK_EQ(k.build_id_mismatch, 1);
	CHECK_EQ(stackpulse_symbolizer_stats(NULL, &k), -EINVAL);
	k.sz = 0;
	CHECK_EQ(stackpulse_symbolizer_stats(sym, &k), -EINVAL);
	k.sz = sizeof(k);
	CHECK_EQ(k.binaries_opened, 0);
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

/* Frames of every offset of outer() as one list, for comparing runs. */
static void collect_all(scan *s, fx_frames *all)
{
	all->n = 0;
	for (size_t i = 0; i < s->count; i++)
		REQUIRE_OK(stackpulse_symbolizer_resolve_frame(s->sym, s->first_frame + (uint32_t)i,
		                                               fx_collect, all));
}

static int same_frames(const fx_frames *a, const fx_frames *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->f[i].name, b->f[i].name) != 0 ||
		    strcmp(a->f[i].file, b->f[i].file) != 0 || a->f[i].line != b->f[i].line ||
		    a->f[i].kind != b->f[i].kind || a->f[i].depth != b->f[i].depth)
			return 0;
	return 1;
}

SP_TEST(symbol_cache_warm_run_skips_dwarf)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	char cache[512];
	fx_path(cache, sizeof(cache), "symcache/nested");
	uint64_t addr, size;
	fx_symbol(bin, "outer", &addr, &size);
	size_t half = (size_t)size / 2;
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.debug_dirs = "/nonexistent-debug-root";
	o.cache_dir = cache;
	static fx_frames cold, warm, full1, full2;
	scan s;
	struct stackpulse_symbolizer_stats k;

	/* Cold: the first half of outer() goes through DWARF. */
	scan_open(&s, bin, fx_offset(bin, addr), half, &o);
	collect_all(&s, &cold);
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK_EQ(k.binaries_opened, 1);
	CHECK_EQ(k.dwarf_lookups, half);
	scan_close(&s);
	uint8_t bid[64];
	uint32_t bid_len;
	char hex[129], file[1024];
	fx_build_id(bin, bid, &bid_len);
	sp_hex(bid, bid_len, hex);
	snprintf(file, sizeof(file), "%s/%s.spsym", cache, hex);
	struct stat st;
	REQUIRE(stat(file, &st) == 0);

	/* Warm: the same offsets open no binary and touch no DWARF. */
	scan_open(&s, bin, fx_offset(bin, addr), half, &o);
	collect_all(&s, &warm);
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK_EQ(k.binaries_opened, 0);
	CHECK_EQ(k.dwarf_loads, 0);
	CHECK_EQ(k.dwarf_lookups, 0);
	CHECK_EQ(k.cache_hits, half);
	CHECK_EQ(k.cache_writes, 0);
	scan_close(&s);
	CHECK(same_frames(&cold, &warm));

	/* All of outer(): at most the new half needs DWARF (a cached answer
	 * covers its whole line row, which may reach past the half); then the
	 * merged table answers everything. */
	scan_open(&s, bin, fx_offset(bin, addr), (size_t)size, &o);
	collect_all(&s, &full1);
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK(k.dwarf_lookups <= size - half);
	CHECK(k.cache_hits >= half);
	CHECK_EQ(k.dwarf_lookups + k.cache_hits, size);
	scan_close(&s);
	/* Range answers equal exact ones at every offset. */
	static fx_frames ref;
	stackpulse_symbolizer_opts nc = o;
	nc.flags = STACKPULSE_SYM_NO_CACHE;
	scan_open(&s, bin, fx_offset(bin, addr), (size_t)size, &nc);
	collect_all(&s, &ref);
	scan_close(&s);
	CHECK(same_frames(&full1, &ref));
	scan_open(&s, bin, fx_offset(bin, addr), (size_t)size, &o);
	collect_all(&s, &full2);
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK_EQ(k.binaries_opened, 0);
	CHECK_EQ(k.dwarf_lookups, 0);
	CHECK_EQ(k.cache_hits, size);
	scan_close(&s);
	CHECK(same_frames(&full1, &full2));

	/* A corrupt cache file is ignored (DWARF again), then rewritten. */
	fx_sh("printf garbage > '%s'", file);
	scan_open(&s, bin, fx_offset(bin, addr), half, &o);
	collect_all(&s, &warm);
	struct stackpulse_symbolizer_stats k2;
	k2.sz = sizeof(k2);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k2));
	CHECK_EQ(k2.dwarf_lookups, half);
	scan_close(&s);
	CHECK(same_frames(&cold, &warm));

	/* STACKPULSE_SYMBOL_CACHE_DIR is used when opts.cache_dir is NULL. */
	char cache2[512];
	fx_path(cache2, sizeof(cache2), "symcache-env");
	setenv("STACKPULSE_SYMBOL_CACHE_DIR", cache2, 1);
	o.cache_dir = NULL;
	scan_open(&s, bin, fx_offset(bin, addr), 4, &o);
	collect_all(&s, &warm);
	scan_close(&s);
	unsetenv("STACKPULSE_SYMBOL_CACHE_DIR");
	snprintf(file, sizeof(file), "%s/%s.spsym", cache2, hex);
	CHECK(stat(file, &st) == 0);
}

SP_TEST(embedded_tables_symbolize_offline_without_the_binary)
{
	const char *built = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	char bin[512], symbin[512];
	snprintf(symbin, sizeof(symbin), "%s", built);
	fx_path(bin, sizeof(bin), "emb_prog");
	fx_sh("cp '%s' '%s'", symbin, bin);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	uint64_t addr, size, caddr, csize;
	fx_symbol(symbin, "outer", &addr, &size);
	fx_symbol(symbin, "compute", &caddr, &csize);
	uint64_t ret = fx_return_address(symbin, "main", "compute");

	/* The reference answers, from the binary itself. */
	stackpulse_symbolizer_opts o = no_cache_opts();
	static fx_frames want, got;
	scan s;
	scan_open(&s, bin, fx_offset(bin, addr), (size_t)size, &o);
	collect_all(&s, &want);
	scan_close(&s);

	/* A self-contained spool: same frames plus a compute ← main stack. */
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	uint64_t *offs = calloc((size_t)size + 2, sizeof(uint64_t));
	uint32_t first = 0;
	for (size_t i = 0; i < size; i++) {
		offs[i] = fx_offset(bin, addr) + i;
		uint32_t id = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, offs[i]);
		if (i == 0)
			first = id;
	}
	offs[size] = fx_offset(bin, caddr);
	offs[size + 1] = fx_offset(bin, ret);
	uint32_t st2[2] = { fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, offs[size]),
		            fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, offs[size + 1]) };
	uint32_t stack = fx_stack(&sp, st2, 2);
	sp_symtab_request req = { mod, bin, bid, bid_len, offs, (size_t)size + 2, 0, -1, 0 };
	uint32_t embedded, skipped;
	sp_symbolize_counters kb;
	memset(&kb, 0, sizeof(kb));
	REQUIRE_OK(sp_symbolize_build_symtab_cached(sp.w, &req, 1, "/nonexistent-debug-root", NULL,
	                                            &embedded, &skipped, &kb));
	CHECK_EQ(embedded, 1);
	CHECK_EQ(skipped, 0);
	CHECK(kb.dwarf_lookups > 0);
	fx_spool_open(&sp);
	free(offs);
	CHECK_EQ(stackpulse_spool_module(sp.spool, mod)->has_symbols, 1);
	REQUIRE(unlink(bin) == 0);

	/* Offline: everything from the table, no file opened. */
	o.flags |= STACKPULSE_SYM_OFFLINE;
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	got.n = 0;
	for (size_t i = 0; i < size; i++)
		REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, first + (uint32_t)i, fx_collect,
		                                               &got));
	CHECK(same_frames(&want, &got));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	REQUIRE_EQ(c.n, 2);
	CHECK_STR(c.f[0].name, "compute");
	CHECK_STR(c.f[1].name, "main");
	CHECK_EQ(c.f[1].line, fx_line_of(c_src, "CALL_COMPUTE"));
	struct stackpulse_symbolizer_stats k = { .sz = sizeof(k) };
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
	CHECK_EQ(k.binaries_opened, 0);
	CHECK_EQ(k.dwarf_lookups, 0);
	CHECK(k.embedded_hits > 0);
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

SP_TEST(offline_without_tables_opens_nothing)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	uint64_t addr, size;
	fx_symbol(bin, "outer", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	o.flags |= STACKPULSE_SYM_OFFLINE;
	scan s;
	scan_open(&s, bin, fx_offset(bin, addr), 1, &o);
	fx_frames c;
	resolve(&s, 0, &c);
	char want[128];
	snprintf(want, sizeof(want), "prog_c+0x%llx", (unsigned long long)fx_offset(bin, addr));
	CHECK_STR(c.f[0].name, want);
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(s.sym, &k));
	CHECK_EQ(k.binaries_opened, 0);
	CHECK_EQ(k.debug_files, 0);
	scan_close(&s);
}

/* A stripped binary carrying MiniDebugInfo (.gnu_debugdata: an xz'd
 * symbol table, as Fedora ships): names without lines. */
SP_TEST(minidebuginfo_names_stripped_binary)
{
	const char *built = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	if (!fx_have("xz") || !fx_have("objcopy"))
		sp_test_skip("xz or objcopy not installed");
	char full[512], mini[512];
	snprintf(full, sizeof(full), "%s", built);
	fx_path(mini, sizeof(mini), "prog_mini");
	fx_sh("cd '%s' && nm -D prog_c --format=posix --defined-only | awk '{print $1}' | sort > "
	      "dynsyms && "
	      "nm prog_c --format=posix --defined-only | awk '$2 ~ /[Tt]/ {print $1}' | sort > "
	      "funcsyms && "
	      "comm -13 dynsyms funcsyms > keep && objcopy --only-keep-debug prog_c mini.dbg && "
	      "objcopy -S --remove-section .gdb_index --remove-section .comment "
	      "--keep-symbols=keep "
	      "mini.dbg mini.syms && rm -f mini.syms.xz && xz mini.syms && "
	      "strip --strip-all -R .comment -o prog_mini prog_c && "
	      "objcopy --add-section .gnu_debugdata=mini.syms.xz prog_mini",
	      sp_test_tmpdir());
	uint64_t addr, size;
	fx_symbol(full, "outer", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	scan s;
	scan_open(&s, mini, fx_offset(full, addr), (size_t)size, &o);
	for (size_t i = 0; i < s.count; i++) {
		fx_frames c;
		resolve(&s, i, &c);
		CHECK_EQ(c.n, 1);
		CHECK_STR(c.f[0].name, "outer");
		CHECK(!c.f[0].has_file);
	}
	scan_close(&s);
}

/* The kernel names unlinked mappings "PATH (deleted)": the file at PATH is
 * used when (and only when) its build-id matches. */
SP_TEST(deleted_mark_in_module_path)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	uint64_t addr, size;
	fx_symbol(bin, "outer", &addr, &size);
	char marked[600];
	snprintf(marked, sizeof(marked), "%s (deleted)", bin);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t good = fx_module(&sp, marked, bid, bid_len);
	uint8_t other[20] = { 9, 9, 9 };
	uint32_t bad = fx_module(&sp, marked, other, sizeof(other));
	uint32_t f1 = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, good, fx_offset(bin, addr));
	uint32_t f2 = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, bad, fx_offset(bin, addr));
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts o = no_cache_opts();
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f1, fx_collect, &c));
	CHECK_STR(c.f[c.n - 1].name, "outer");
	c.n = 0;
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f2, fx_collect, &c));
	CHECK(strncmp(c.f[0].name, "prog_c (deleted)+0x", 19) == 0);
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

/* PLT stubs have no symbols: they are named "callee@plt", as perf names
 * them, not after the symbol before them (_init). objdump finds the stub. */
SP_TEST(plt_stubs_are_named_after_their_callee)
{
	static const char src[] = "#include <stdio.h>\n#include <string.h>\n"
	                          "int main(int argc, char **argv)\n"
	                          "{ puts(argv[0]); return (int)strlen(argv[0]) + argc; }\n";
	const char *bin = build("gcc", "-O2 -g", "prog_plt", src, "c");
	if (!fx_have("objdump"))
		sp_test_skip("objdump not installed");
	char out[600], cmd[1400];
	fx_path(out, sizeof(out), "plt_addr");
	snprintf(cmd, sizeof(cmd),
	         "objdump -d -j .plt -j .plt.sec '%s' | awk '/<puts@plt>:/ {print $1}' | tail -1 "
	         ">'%s'",
	         bin, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	uint64_t stub = strtoull(text, NULL, 16);
	free(text);
	REQUIRE(stub != 0);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	uint32_t f = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, fx_offset(bin, stub + 4));
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts o = no_cache_opts();
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f, fx_collect, &c));
	REQUIRE(c.n >= 1);
	CHECK_STR(c.f[0].name, "puts@plt");
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

/* More binaries than the symbolizer keeps open: descriptors stay bounded
 * and every frame still resolves (closed binaries reopen on demand). */
SP_TEST(many_modules_keep_descriptors_bounded)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	enum {
		N = 150
	};
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	uint64_t addr, size;
	fx_symbol(bin, "outer", &addr, &size);
	fx_sh("mkdir -p '%s/many' && for i in $(seq 0 %d); do cp '%s' '%s/many/p'$i; done",
	      sp_test_tmpdir(), N - 1, bin, sp_test_tmpdir());
	fx_spool sp;
	fx_spool_begin(&sp);
	static uint32_t frames[N], frames2[N];
	for (int i = 0; i < N; i++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/many/p%d", sp_test_tmpdir(), i);
		uint32_t mod = fx_module(&sp, path, bid, bid_len);
		frames[i] = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, fx_offset(bin, addr));
		frames2[i] = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, fx_offset(bin, addr) + 1);
	}
	fx_spool_open(&sp);
	int fds = fx_fd_count();
	stackpulse_symbolizer_opts o = no_cache_opts();
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			fx_frames c = { .n = 0 };
			/* Round two needs new lookups: closed binaries reopen. */
			uint32_t f = round == 0 ? frames[i] : frames2[i];
			REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, f, fx_collect, &c));
			CHECK_STR(c.f[c.n - 1].name, "outer");
		}
		/* At most 128 binaries (and nothing else of ours) are open. */
		CHECK(fx_fd_count() - fds <= 128);
	}
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
	CHECK(k.binaries_opened > N);
	stackpulse_symbolizer_free(sym);
	CHECK_EQ(fx_fd_count(), fds);
	fx_spool_free(&sp);
}

static const char dwz_common[] =
        "volatile int sink;\n"
        "struct big { int a, b, c, d; double e; };\n"
        "static inline __attribute__((always_inline)) void shared_inner(struct big *x)\n"
        "{\n"
        "\tsink = x->a;\n"
        "\tsink = x->b * 3;\n"
        "}\n"
        "static inline __attribute__((always_inline)) void shared_outer(struct big *x)\n"
        "{\n"
        "\tsink = 1;\n"
        "\tshared_inner(x);\n"
        "\tsink = 2;\n"
        "}\n";

/* dwz moves shared DWARF into a supplementary file named by
 * .gnu_debugaltlink: it must be found by its own build-id or path, and its
 * absence must not produce wrong names. */
SP_TEST(dwz_supplementary_file)
{
	if (!fx_have("dwz") || !fx_have("gcc"))
		sp_test_skip("dwz or gcc not installed (apt-get install dwz)");
	const char *tmp = sp_test_tmpdir();
	char path[600], common[600], bin_a[600];
	snprintf(path, sizeof(path), "%s/common.h", tmp);
	fx_write_file(path, dwz_common);
	for (int i = 0; i < 2; i++) {
		char src[2048];
		snprintf(src, sizeof(src),
		         "#include \"common.h\"\n"
		         "__attribute__((noinline)) void entry_%c(struct big *x)\n"
		         "{\n\tsink = 5;\n\tshared_outer(x);\n\tsink = 6;\n}\n"
		         "int main(void) { struct big x = {1, 2, 3, 4, 5.0}; entry_%c(&x); return "
		         "0; }\n",
		         'a' + i, 'a' + i);
		snprintf(path, sizeof(path), "%s/dwz_%c.c", tmp, 'a' + i);
		fx_write_file(path, src);
		fx_sh("cd '%s' && gcc -O2 -g -o dwz_%c dwz_%c.c", tmp, 'a' + i, 'a' + i);
	}
	snprintf(common, sizeof(common), "%s/common.debug", tmp);
	snprintf(bin_a, sizeof(bin_a), "%s/dwz_a", tmp);
	fx_sh("cd '%s' && dwz -m '%s' -M '%s' dwz_a dwz_b", tmp, common, common);
	fx_sh("readelf -S '%s' | grep -q gnu_debugaltlink", bin_a);
	uint64_t addr, size;
	fx_symbol(bin_a, "entry_a", &addr, &size);
	stackpulse_symbolizer_opts o = no_cache_opts();
	int phases = 2;
#if defined(__SANITIZE_ADDRESS__)
	/* libdw 0.188 leaks 32 bytes per line-table read that fails for lack
	 * of the supplementary file, which LeakSanitizer would report. */
	phases = 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	phases = 1;
#endif
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
	if (RUNNING_ON_VALGRIND)
		phases = 1; /* The same leak, as valgrind --leak-check sees it. */
#endif
#endif
	for (int missing = 0; missing < phases; missing++) {
		if (missing)
			fx_sh("mv '%s' '%s.gone'", common, common);
		scan s;
		scan_open(&s, bin_a, fx_offset(bin_a, addr), (size_t)size, &o);
		int saw_chain = 0;
		for (size_t i = 0; i < s.count; i++) {
			fx_frames c;
			resolve(&s, i, &c);
			CHECK_STR(c.f[c.n - 1].name, "entry_a");
			for (int k = 0; k + 1 < c.n; k++)
				CHECK(strcmp(c.f[k].name, "shared_inner") == 0 ||
				      strcmp(c.f[k].name, "shared_outer") == 0 ||
				      strcmp(c.f[k].name, "[unknown]") == 0);
			if (c.n == 3 && strcmp(c.f[0].name, "shared_inner") == 0 &&
			    strcmp(c.f[1].name, "shared_outer") == 0)
				saw_chain = 1;
		}
		/* With the supplementary file the full chain resolves. */
		if (!missing)
			CHECK(saw_chain);
		scan_close(&s);
	}
}

/* The sampled user IP sits below any kernel frames and is looked up as is;
 * every later native frame is a return address (looked up at offset - 1).
 * compute's first byte shows the difference: minus one is not in it. */
SP_TEST(leaf_is_first_user_frame_below_kernel_frames)
{
	const char *bin = build("gcc", "-O2 -g", "prog_c", c_src, "c");
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(bin, bid, &bid_len);
	uint64_t addr, size;
	fx_symbol(bin, "compute", &addr, &size);
	fx_spool sp;
	fx_spool_begin(&sp);
	REQUIRE_OK(sp_writer_ksym(sp.w, 0xffffffff81000000ull, "sp_fake_irq", NULL));
	uint32_t mod = fx_module(&sp, bin, bid, bid_len);
	struct stackpulse_raw_frame kf = { STACKPULSE_FRAME_KERNEL, UINT32_MAX,
		                           0xffffffff81000010ull, UINT32_MAX, 0 };
	uint32_t kid;
	REQUIRE_OK(sp_writer_frame(sp.w, &kf, &kid));
	uint32_t entry = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, fx_offset(bin, addr));
	uint32_t with_kernel[3] = { kid, entry, entry };
	uint32_t stack = fx_stack(&sp, with_kernel, 3);
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts o = no_cache_opts();
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	REQUIRE(c.n >= 3);
	CHECK_STR(c.f[0].name, "sp_fake_irq");
	CHECK_STR(c.f[1].name, "compute");
	CHECK(strcmp(c.f[c.n - 1].name, "compute") != 0);
	/* Both report the frame's own offset, whatever was looked up. */
	CHECK_EQ(c.f[1].offset, fx_offset(bin, addr));
	CHECK_EQ(c.f[c.n - 1].offset, fx_offset(bin, addr));
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}
