/* The symbolizer with hostile or unusual inputs: modules naming devices,
 * FIFOs, /proc/self/mem, directories, missing, non-ELF and corrupt files;
 * kernel frames from the spool's own symbols; Python, JIT, truncated and
 * unknown frames; demangling of C++ and Rust (legacy and v0). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym_fixture.h"
#include "symbolize/cacheio.h"
#include "symbolize/dbgmod.h"
#include "symbolize/demangle.h"
#include "symbolize/strpool.h"

/* Deterministic xorshift: reproducible noise without rnd(). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static int rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (int)(rng_state >> 33);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "    hung: alarm fired\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(3);
}

SP_TEST(hostile_module_paths_fail_per_frame_without_hanging)
{
	char fifo[512], dir[512], text[512], trunc[512], missing[512];
	fx_path(fifo, sizeof(fifo), "a_fifo");
	fx_path(dir, sizeof(dir), "a_dir");
	fx_path(text, sizeof(text), "a_text");
	fx_path(trunc, sizeof(trunc), "a_trunc");
	fx_path(missing, sizeof(missing), "no_such_file");
	unlink(fifo);
	REQUIRE(mkfifo(fifo, 0600) == 0);
	mkdir(dir, 0700);
	fx_write_file(text, "#!/bin/sh\necho not an elf file at all, but long enough to parse\n");
	/* The first 200 bytes of a real ELF: headers point past the end. */
	fx_sh("head -c 200 /bin/true > '%s'", trunc);
	const char *paths[] = { "/dev/zero", fifo,  "/proc/self/mem", missing, dir,
		                text,        trunc, "/dev/null",      "",      "relative/path" };
	const char *bases[] = { "zero",    "a_fifo", "mem", "no_such_file", "a_dir", "a_text",
		                "a_trunc", "null",   "",    "path" };
	size_t n = sizeof(paths) / sizeof(paths[0]);
	static const uint8_t bid[20] = { 1, 2, 3 };
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t frames[16];
	for (size_t i = 0; i < n; i++) {
		uint32_t mod = fx_module(&sp, paths[i], bid, i % 2 ? 20 : 0);
		frames[i] = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, 0x10 + i);
	}
	uint32_t stack = fx_stack(&sp, frames, n);
	fx_spool_open(&sp);
	signal(SIGALRM, on_alarm);
	alarm(60);
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_NO_CACHE;
	o.debug_dirs = "/nonexistent-debug-root";
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	alarm(0);
	/* Every frame is reported, in order, as base+offset. */
	REQUIRE_EQ(c.n, (int)n);
	for (size_t i = 0; i < n; i++) {
		char want[128];
		snprintf(want, sizeof(want), "%s+0x%zx", bases[i], 0x10 + i);
		CHECK_STR(c.f[i].name, want);
		CHECK_STR(c.f[i].module, paths[i]);
		CHECK_EQ(c.f[i].kind, STACKPULSE_FRAME_NATIVE);
		CHECK(!c.f[i].has_file);
		CHECK_EQ(c.f[i].raw_id, frames[i]);
	}
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
	CHECK_EQ(k.binaries_opened, 0);
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
	unlink(fifo);
}

SP_TEST(safe_open_refuses_non_regular_files)
{
	uint64_t size;
	CHECK_EQ(sp_elf_open_regular("/dev/zero", &size), STACKPULSE_EUNSUPPORTED);
	CHECK_EQ(sp_elf_open_regular("/dev/null", &size), STACKPULSE_EUNSUPPORTED);
	CHECK_EQ(sp_elf_open_regular("/proc/self/mem", &size), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_elf_open_regular("/", &size), STACKPULSE_EUNSUPPORTED);
	CHECK_EQ(sp_elf_open_regular("/nonexistent/x", &size), -ENOENT);
	int fd = sp_elf_open_regular("/bin/true", &size);
	CHECK(fd >= 0);
	if (fd >= 0) {
		sp_elf_info info;
		CHECK_OK(sp_elf_read_info(fd, size, &info));
		CHECK(info.build_id_len == 20);
		CHECK(info.nloads >= 2);
		close(fd);
	}
}

/* Mutated copies of a real ELF: the bounded reader and the build-id gate
 * never crash, and a changed build-id is always refused. */
SP_TEST(mutated_elf_headers_are_handled)
{
	char path[512];
	fx_path(path, sizeof(path), "mutated");
	FILE *f = fopen("/bin/true", "rb");
	REQUIRE(f);
	static uint8_t orig[1 << 16];
	size_t len = fread(orig, 1, sizeof(orig), f);
	fclose(f);
	REQUIRE(len > 4096);
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id("/bin/true", bid, &bid_len);
	sp_symbolize_counters counters = { 0 };
	sp_dbg_config cfg;
	REQUIRE_OK(sp_dbg_config_init(&cfg, "/nonexistent-debug-root", 0, &counters));
	static uint8_t buf[1 << 16];
	for (int iter = 0; iter < 400; iter++) {
		memcpy(buf, orig, len);
		int flips = 1 + rnd() % 8;
		for (int k = 0; k < flips; k++) {
			/* Mostly headers and notes, sometimes anywhere. */
			size_t at = rnd() % 4 ? (size_t)(rnd() % 1024) : (size_t)rnd() % len;
			buf[at] = (uint8_t)rnd();
		}
		size_t cut = rnd() % 5 == 0 ? (size_t)rnd() % len : len;
		FILE *o = fopen(path, "wb");
		REQUIRE(o);
		fwrite(buf, 1, cut, o);
		fclose(o);
		uint64_t size;
		int fd = sp_elf_open_regular(path, &size);
		if (fd >= 0) {
			sp_elf_info info;
			if (sp_elf_read_info(fd, size, &info) == 0) {
				CHECK(info.build_id_len <= 64);
				CHECK(info.nloads <= SP_ELF_MAX_LOADS);
			}
			close(fd);
		}
		/* Only an intact build-id gets past the gate to libdw. */
		sp_dbgmod *m = NULL;
		int rc = sp_dbgmod_open(path, bid, bid_len, &cfg, &m);
		if (rc == 0) {
			uint8_t got[64];
			uint32_t got_len;
			fx_build_id(path, got, &got_len);
			CHECK(got_len == bid_len && memcmp(got, bid, bid_len) == 0);
			sp_dbgmod_free(m);
		}
	}
	sp_dbg_config_free(&cfg);
}

SP_TEST(kernel_python_jit_truncated_unknown_frames)
{
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t proc, thr, py;
	REQUIRE_OK(sp_writer_process(sp.w, 4242, UINT32_MAX, 1, "app", "app --x", &proc));
	REQUIRE_OK(sp_writer_thread(sp.w, proc, 4242, 1, "app", &thr));
	/* Names that exist in no real kallsyms: they must come from the spool. */
	REQUIRE_OK(sp_writer_ksym(sp.w, 0xffffffff81000000ull, "sp_fake_entry", NULL));
	REQUIRE_OK(sp_writer_ksym(sp.w, 0xffffffff81000100ull, "sp_fake_syscall", NULL));
	REQUIRE_OK(sp_writer_ksym(sp.w, 0xffffffffc0000000ull, "sp_fake_modfn", "sp_fake_mod"));
	REQUIRE_OK(sp_writer_pycode(sp.w, "Klass.method", "/app/mod.py", 10, &py));
	REQUIRE_OK(sp_writer_jitsym(sp.w, proc, 0x7f0000001000ull, 0x100, "jitted_fn"));
	struct stackpulse_raw_frame kf1 = { STACKPULSE_FRAME_KERNEL, UINT32_MAX,
		                            0xffffffff81000123ull, UINT32_MAX, 0 };
	struct stackpulse_raw_frame kf2 = { STACKPULSE_FRAME_KERNEL, UINT32_MAX,
		                            0xffffffffc0000010ull, UINT32_MAX, 0 };
	struct stackpulse_raw_frame pf = { STACKPULSE_FRAME_PYTHON, UINT32_MAX, 8, py, 17 };
	struct stackpulse_raw_frame jf = { STACKPULSE_FRAME_JIT, UINT32_MAX, 0x7f0000001010ull,
		                           UINT32_MAX, 0 };
	struct stackpulse_raw_frame jf2 = { STACKPULSE_FRAME_JIT, UINT32_MAX, 0x7f0000009000ull,
		                            UINT32_MAX, 0 };
	struct stackpulse_raw_frame uf = { STACKPULSE_FRAME_UNKNOWN, UINT32_MAX, 0x1234, UINT32_MAX,
		                           0 };
	struct stackpulse_raw_frame tf = { STACKPULSE_FRAME_TRUNCATED, UINT32_MAX, 0, UINT32_MAX,
		                           0 };
	uint32_t ids[7];
	REQUIRE_OK(sp_writer_frame(sp.w, &kf1, &ids[0]));
	REQUIRE_OK(sp_writer_frame(sp.w, &kf2, &ids[1]));
	REQUIRE_OK(sp_writer_frame(sp.w, &jf, &ids[2]));
	REQUIRE_OK(sp_writer_frame(sp.w, &jf2, &ids[3]));
	REQUIRE_OK(sp_writer_frame(sp.w, &pf, &ids[4]));
	REQUIRE_OK(sp_writer_frame(sp.w, &uf, &ids[5]));
	REQUIRE_OK(sp_writer_frame(sp.w, &tf, &ids[6]));
	uint32_t stack = fx_stack(&sp, ids, 7);
	REQUIRE_OK(sp_writer_sample(sp.w, 100, thr, stack, 1, 0));
	fx_spool_open(&sp);

	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_NO_CACHE;
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp.spool, &it));
	const struct stackpulse_sample *sample;
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &sample), 1);
	fx_frames c = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_for_each_frame(sym, sample, fx_collect, &c));
	stackpulse_sample_iter_free(it);
	REQUIRE_EQ(c.n, 7);
	CHECK_STR(c.f[0].name, "sp_fake_syscall");
	CHECK_STR(c.f[0].module, "[kernel.kallsyms]");
	CHECK_EQ(c.f[0].kind, STACKPULSE_FRAME_KERNEL);
	CHECK_EQ(c.f[0].offset, 0xffffffff81000123ull);
	CHECK_STR(c.f[1].name, "sp_fake_modfn");
	CHECK_STR(c.f[1].module, "[sp_fake_mod]");
	CHECK_STR(c.f[2].name, "jitted_fn");
	CHECK_EQ(c.f[2].kind, STACKPULSE_FRAME_JIT);
	CHECK_STR(c.f[3].name, "[unknown]");
	CHECK_EQ(c.f[3].kind, STACKPULSE_FRAME_JIT);
	CHECK_STR(c.f[4].name, "Klass.method");
	CHECK_STR(c.f[4].file, "/app/mod.py");
	CHECK_EQ(c.f[4].line, 17);
	CHECK_EQ(c.f[4].kind, STACKPULSE_FRAME_PYTHON);
	CHECK_STR(c.f[5].name, "[unknown]");
	CHECK_EQ(c.f[5].kind, STACKPULSE_FRAME_UNKNOWN);
	CHECK_STR(c.f[6].name, "[truncated]");
	CHECK_EQ(c.f[6].kind, STACKPULSE_FRAME_TRUNCATED);
	for (int i = 0; i < 7; i++)
		CHECK_EQ(c.f[i].raw_id, ids[i]);
	/* By stack id (no process known), the JIT map still names the frame. */
	c.n = 0;
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, stack, fx_collect, &c));
	REQUIRE_EQ(c.n, 7);
	CHECK_STR(c.f[2].name, "jitted_fn");
	/* Bad ids are errors, not crashes. */
	CHECK_EQ(stackpulse_symbolizer_resolve_frame(sym, 999999, fx_collect, &c),
	         STACKPULSE_ENOTFOUND);
	CHECK(stackpulse_symbolizer_for_each_stack_frame(sym, 999999, fx_collect, &c) != 0);
	CHECK_OK(stackpulse_symbolizer_for_each_stack_frame(sym, 0, fx_collect, &c));
	stackpulse_symbolizer_free(sym);
	stackpulse_symbolizer_free(NULL);
	fx_spool_free(&sp);
}

static void check_demangle(const char *raw, const char *want)
{
	sp_strpool pool;
	sp_strpool_init(&pool);
	const char *got = sp_demangle(&pool, raw, 0);
	CHECK_STR(got, want);
	CHECK_STR(sp_demangle(&pool, raw, 1), raw);
	sp_strpool_free(&pool);
}

SP_TEST(demangle_cxx_and_rust)
{
	if (!sp_demangle_cxx_available())
		sp_test_skip("libstdc++.so.6 (__cxa_demangle) cannot be loaded");
	check_demangle("_ZN2ns3fooIiEEvT_", "void ns::foo<int>(int)");
	/* Clone suffixes: libstdc++ and libc++abi word them differently. */
	sp_strpool pool;
	sp_strpool_init(&pool);
	const char *cold = sp_demangle(&pool, "_Z3barv.cold", 0);
	CHECK(strcmp(cold, "bar() [clone .cold]") == 0 || strcmp(cold, "bar() (.cold)") == 0);
	sp_strpool_free(&pool);
	check_demangle("plain_c_name", "plain_c_name");
	check_demangle("_Znot_valid", "_Znot_valid");
	/* Rust legacy: hash suffix dropped, $-escapes decoded. */
	check_demangle("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write");
	check_demangle("_ZN66_$LT$alloc..vec..Vec$LT$T$GT$$u20$as$u20$core..ops..drop..Drop$GT$"
	               "4drop17h0123456789abcdefE",
	               "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop");
	/* Output cap: f(a, a, ...) with the type named once and referenced
	 * 100 times (S_): 100-letter names give 10 KiB and demangle; 500-letter
	 * ones would give 50 KiB from 707 bytes of input and stay raw. */
	static char blowup[1024];
	for (int w = 100; w <= 500; w += 400) {
		int len = snprintf(blowup, sizeof(blowup), "_Z1f%d", w);
		memset(blowup + len, 'a', (size_t)w);
		len += w;
		for (int i = 0; i < 100; i++)
			len += snprintf(blowup + len, sizeof(blowup) - (size_t)len, "S_");
		sp_strpool_init(&pool);
		const char *got = sp_demangle(&pool, blowup, 0);
		REQUIRE(got);
		if (w == 100)
			CHECK(strncmp(got, "f(aaaa", 6) == 0 && strlen(got) > 10000);
		else
			CHECK_STR(got, blowup);
		sp_strpool_free(&pool);
	}
}

SP_TEST(demangle_rust_v0)
{
	check_demangle("plain_c_name", "plain_c_name");
	check_demangle("_RNvCs1234_7mycrate3foo", "mycrate::foo");
	check_demangle("_RNvNtCs1234_7mycrate3bar3baz", "mycrate::bar::baz");
	check_demangle("_RNvC6_123foo3bar", "123foo::bar");
	check_demangle("_RINvNtC3std3mem8align_ofjdE", "std::mem::align_of::<usize, f64>");
	check_demangle("_RNvNvMCs4fqI2P2rA04_13const_genericINtB4_3FooKpE3foo3FOO",
	               "<const_generic::Foo<_>>::foo::FOO");
	check_demangle("_RMCs4fqI2P2rA04_13const_genericINtB0_8UnsignedKhb_E",
	               "<const_generic::Unsigned<11>>");
	check_demangle("_RMCs4fqI2P2rA04_13const_genericINtB0_6SignedKanb_E",
	               "<const_generic::Signed<-11>>");
	check_demangle("_RMCs4fqI2P2rA04_13const_genericINtB0_4BoolKb0_E",
	               "<const_generic::Bool<false>>");
	check_demangle("_RNCNvCs1_4test4main0", "test::main::{closure#0}");
	check_demangle("_RNvXCs1_5cratemNtB2_5Trait4call", "<u32 as crate::Trait>::call");
	check_demangle("_RNvCs1234_7mycrate3foo.llvm.123", "mycrate::foo");
	/* Malformed or hostile v0 stays raw: forward/self backrefs, deep
	 * nesting, bad lengths. */
	check_demangle("_RNvB0_3foo", "_RNvB0_3foo");
	check_demangle("_RNvCs1234_7myc", "_RNvCs1234_7myc");
	/* Nesting deeper than the limit. */
	char deep[600] = "_RINvC1a1b";
	for (int i = 0; i < 150; i++)
		strcat(deep, "R");
	strcat(deep, "uE");
	check_demangle(deep, deep);
	/* Within the limit it works. */
	check_demangle("_RINvC1a1bRRuE", "a::b::<&&()>");
	/* Output that does not fit fails instead of overflowing. */
	char out[16];
	CHECK_EQ(sp_rust_v0_demangle("_RNvNtCs1234_7mycrate3bar3baz", out, sizeof(out)),
	         STACKPULSE_EFORMAT);
}

/* Random bytes after "_R" never crash the v0 demangler. */
SP_TEST(rust_v0_demangler_survives_noise)
{
	static const char alphabet[] = "_RNvCMXYIBKLGDFTSAPOQUEsuph0123456789abcdefxyzjmlt";
	char sym[128], out[512];
	for (int iter = 0; iter < 200000; iter++) {
		size_t n = 2 + (size_t)(rnd() % 60);
		sym[0] = '_';
		sym[1] = 'R';
		for (size_t i = 2; i < n; i++)
			sym[i] = alphabet[rnd() % (int)(sizeof(alphabet) - 1)];
		sym[n] = '\0';
		int rc = sp_rust_v0_demangle(sym, out, sizeof(out));
		if (rc == 0)
			CHECK(strlen(out) < sizeof(out));
	}
}

/* Build-id impostors (issue 17, cache poisoning): a library claiming the
 * build-id of another one, with other symbols, must not fill the shared
 * on-disk symbol cache that the real library is later answered from. Files
 * nobody else could have written (owned by root or us, not group/world
 * writable) of our own mount namespace feed the cache; an impostor owned by
 * another user, or one taken from a container (foreign), does not. */
static const char impostor_bid[] = "0x5eed0123456789abcdef0123456789abcdef0123";

static void build_lib(const char *name, const char *fn, char *out, size_t cap)
{
	char src[600];
	fx_path(src, sizeof(src), name);
	fx_path(out, cap, name);
	snprintf(src + strlen(src), sizeof(src) - strlen(src), ".c");
	snprintf(out + strlen(out), cap - strlen(out), ".so");
	FILE *f = fopen(src, "w");
	REQUIRE(f);
	fprintf(f,
	        "__attribute__((noinline)) int %s(int x) { return x * 7 + 3; }\n"
	        "int %s_caller(int x) { return %s(x) + 1; }\n",
	        fn, fn, fn);
	fclose(f);
	fx_sh("gcc -O1 -g -shared -fPIC -Wl,--build-id=%s -o '%s' '%s'", impostor_bid, out, src);
}

/* Embeds the symbols of @p lib at the offset of @p fn through the cache in
 * @p cache; returns the name the embedded table gives that offset. */
static void embed_through_cache(const char *lib, const char *fn, int foreign, const char *cache,
                                char *name, size_t cap)
{
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(lib, bid, &bid_len);
	uint64_t addr, size;
	fx_symbol(lib, fn, &addr, &size);
	uint64_t off = fx_offset(lib, addr);
	fx_spool sp;
	fx_spool_begin(&sp);
	uint32_t mod = fx_module(&sp, lib, bid, bid_len);
	uint32_t frame = fx_frame(&sp, STACKPULSE_FRAME_NATIVE, mod, off);
	/* A container's file comes as a descriptor grabbed through the target. */
	int fd = foreign ? open(lib, O_RDONLY | O_CLOEXEC) : -1;
	REQUIRE(!foreign || fd >= 0);
	sp_symtab_request req = { mod, lib, bid, bid_len, &off, 1, foreign, fd, foreign };
	uint32_t embedded = 0, skipped = 0;
	REQUIRE_OK(sp_symbolize_build_symtab_cached(sp.w, &req, 1, "/nonexistent-debug-root", cache,
	                                            &embedded, &skipped, NULL));
	if (fd >= 0)
		close(fd);
	fx_spool_open(&sp);
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags |= STACKPULSE_SYM_OFFLINE;
	o.cache_dir = "";
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp.spool, &o, &sym));
	fx_frames got = { .n = 0 };
	REQUIRE_OK(stackpulse_symbolizer_resolve_frame(sym, frame, fx_collect, &got));
	snprintf(name, cap, "%s", got.n ? got.f[0].name : "");
	stackpulse_symbolizer_free(sym);
	fx_spool_free(&sp);
}

static int cache_has(const char *cache, const char *lib)
{
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(lib, bid, &bid_len);
	uint8_t *data = NULL;
	sp_symcache t;
	int rc = sp_cacheio_read(cache, bid, bid_len, &data, &t);
	free(data);
	return rc == 0;
}

SP_TEST(build_id_impostor_does_not_poison_the_symbol_cache)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to give the impostor to another user");
	char real[600], fake[600], cache[600], name[256];
	build_lib("imp_real", "real_answer", real, sizeof(real));
	build_lib("imp_fake", "fake_answer", fake, sizeof(fake));
	fx_path(cache, sizeof(cache), "imp_cache");
	fx_sh("rm -rf '%s'", cache);

	/* The impostor, owned by another user (nobody): its own profile gets
	 * its names, the cache gets nothing. */
	REQUIRE(chown(fake, 65534, 65534) == 0);
	embed_through_cache(fake, "fake_answer", 0, cache, name, sizeof(name));
	CHECK_STR(name, "fake_answer");
	CHECK(!cache_has(cache, fake));
	/* The same file as root's, but taken from another mount namespace. */
	REQUIRE(chown(fake, 0, 0) == 0);
	embed_through_cache(fake, "fake_answer", 1, cache, name, sizeof(name));
	CHECK_STR(name, "fake_answer");
	CHECK(!cache_has(cache, fake));
	/* A group-writable file is no better. */
	REQUIRE(chmod(fake, 0775) == 0);
	embed_through_cache(fake, "fake_answer", 0, cache, name, sizeof(name));
	CHECK(!cache_has(cache, fake));

	/* The real library, trusted: answered by itself, and it fills the
	 * cache (the check above can see a write). */
	embed_through_cache(real, "real_answer", 0, cache, name, sizeof(name));
	CHECK_STR(name, "real_answer");
	CHECK(cache_has(cache, real));
	/* The impostor again, from a container: the cache answers with the
	 * real names (its own problem), and the real entry is untouched. */
	embed_through_cache(fake, "fake_answer", 1, cache, name, sizeof(name));
	embed_through_cache(real, "real_answer", 0, cache, name, sizeof(name));
	CHECK_STR(name, "real_answer");
}

/* sp_cacheio_dir_open's verdict: 0 or its error. */
static int dir_check(const char *dir, int create)
{
	int fd = sp_cacheio_dir_open(dir, create);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* The cache directory is used only when it is ours and nobody else can
 * write to it, and never through a symlink. */
SP_TEST(symbol_cache_directory_must_be_private)
{
	char dir[600], link[600], real[600], name[256];
	build_lib("imp_real", "real_answer", real, sizeof(real));
	fx_path(dir, sizeof(dir), "cache_open");
	fx_sh("rm -rf '%s' && mkdir -m 0777 '%s'", dir, dir);
	REQUIRE(chmod(dir, 0777) == 0);
	CHECK_EQ(dir_check(dir, 0), -EPERM);
	embed_through_cache(real, "real_answer", 0, dir, name, sizeof(name));
	CHECK_STR(name, "real_answer");
	CHECK(!cache_has(dir, real));
	REQUIRE(chmod(dir, 0700) == 0);
	CHECK_EQ(dir_check(dir, 0), 0);
	fx_path(link, sizeof(link), "cache_link");
	fx_sh("rm -f '%s' && ln -s '%s' '%s'", link, dir, link);
	CHECK_EQ(dir_check(link, 0), -ENOTDIR);
	CHECK_EQ(dir_check(link, 1), -ENOTDIR);
	if (geteuid() == 0) {
		REQUIRE(chown(dir, 65534, 65534) == 0);
		CHECK_EQ(dir_check(dir, 0), -EPERM);
	}
}
