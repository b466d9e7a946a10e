/* Allocation failure injected at every allocation call, one at a time, in
 * each operation of the format, symcache, symbolize (embedded tables) and
 * profile layers: sp_alloc_fail_after(n) for n = 0, 1, ... until the
 * operation succeeds. Every injected failure must give an error (or, where
 * a failure is tolerated, the same result), nothing may crash, and nothing
 * may leak: run it under `zig build sanitize` (LeakSanitizer) or
 * `zig build valgrind`, which fail on any leak.
 * Prints "alloc-sweep OP: N calls ..." lines counted for docs/reliability.md. */
#include "common/alloc.h"
#include "format/spool_reader.h"
#include "format/spool_writer.h"
#include "rel_util.h"
#include "symcache/symcache.h"

/* A sink outside sp_malloc, so injected failures hit only the library. */
typedef struct mem {
	uint8_t *p;
	size_t len, cap;
} mem;

static int mem_sink(void *ctx, const void *data, size_t len)
{
	mem *m = ctx;
	if (m->len + len > m->cap) {
		size_t cap = (m->len + len) * 2;
		uint8_t *q = realloc(m->p, cap);
		if (!q)
			return -ENOMEM;
		m->p = q;
		m->cap = cap;
	}
	memcpy(m->p + m->len, data, len);
	m->len += len;
	return 0;
}

static const uint8_t BID[20] = { 0xb1, 0xd0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

/* ---- operations: each returns 0 or a negative code, frees everything ---- */

static int op_symcache_build(void *ctx, mem *out)
{
	(void)ctx;
	sp_symcache_builder *b = NULL;
	int rc = sp_symcache_builder_new(BID, 20, &b);
	sp_symcache_frame chain[] = { { "inl_leaf", "a.h", 3 }, { "outer_fn", "a.c", 20 } };
	for (uint64_t i = 0; !rc && i < 40; i++)
		rc = sp_symcache_builder_add(b, 0x1000 + i * 16, 16, chain + (i % 2),
		                             2 - (uint32_t)(i % 2));
	uint8_t *data = NULL;
	size_t len = 0;
	if (!rc)
		rc = sp_symcache_builder_finish(b, &data, &len);
	if (!rc && out)
		rc = mem_sink(out, data, len);
	sp_free(data);
	sp_symcache_builder_free(b);
	return rc;
}

static mem g_table; /* A built symcache table, for merge and the spool. */

static int op_symcache_merge(void *ctx, mem *out)
{
	(void)ctx;
	(void)out;
	sp_symcache t;
	int rc = sp_symcache_validate(g_table.p, g_table.len, &t);
	if (rc)
		return rc;
	sp_symcache_builder *b = NULL;
	rc = sp_symcache_builder_new(BID, 20, &b);
	if (!rc)
		rc = sp_symcache_builder_merge(b, &t);
	sp_symcache_frame f[] = { { "late", NULL, 0 } };
	if (!rc)
		rc = sp_symcache_builder_add(b, 0x1008, 4, f, 1);
	uint8_t *data = NULL;
	size_t len = 0;
	if (!rc)
		rc = sp_symcache_builder_finish(b, &data, &len);
	sp_free(data);
	sp_symcache_builder_free(b);
	return rc;
}

/* Writes a spool with every record kind over several 512-byte chunks. */
static int op_write_spool(void *ctx, mem *out)
{
	(void)ctx;
	mem scratch = { 0 };
	sp_writer *w = NULL;
	sp_writer_opts wo = { 3, 512 };
	int rc = sp_writer_new(&wo, mem_sink, out ? out : &scratch, &w);
#define T(x)                                                                                       \
	do {                                                                                       \
		if (!rc)                                                                           \
			rc = (x);                                                                  \
	} while (0)
	sp_meta meta = {
		1700000000000000000ull, 1000, 99, 8192, "cpu-clock", "x86_64", "6.1", "host", 1, ""
	};
	T(sp_writer_meta(w, &meta));
	uint32_t pr = 0, ch = 0, th[3] = { 0 }, mod = 0, mod2 = 0, py = 0;
	T(sp_writer_process(w, 100, UINT32_MAX, 1000, "app", "app --run", &pr));
	T(sp_writer_process(w, 101, pr, 1100, "app", "app child", &ch));
	T(sp_writer_fork(w, pr, ch, 1100));
	T(sp_writer_process_exec(w, ch, 1200, "tool", "tool -x"));
	T(sp_writer_thread(w, pr, 100, 1000, "app", &th[0]));
	T(sp_writer_thread(w, pr, 102, 1000, "worker", &th[1]));
	T(sp_writer_thread(w, ch, 101, 1100, "tool", &th[2]));
	T(sp_writer_thread_name(w, th[1], 1300, "worker-2"));
	T(sp_writer_module(w, "/usr/bin/app", BID, 20, &mod));
	T(sp_writer_module(w, "/usr/lib/libz.so", NULL, 0, &mod2));
	T(sp_writer_mapping(w, pr, mod, 0x400000, 0x500000, 0, 1000));
	T(sp_writer_mapping(w, ch, mod2, 0x7f0000000000, 0x7f0000100000, 0x1000, 1100));
	T(sp_writer_pycode(w, "fib", "/tmp/app.py", 3, &py));
	T(sp_writer_ksym(w, 0xffffffff81000000ull, "do_syscall_64", NULL));
	T(sp_writer_ksym(w, 0xffffffff81001000ull, "ext4_write", "ext4"));
	T(sp_writer_jitsym(w, pr, 0x10000, 0x100, "jit_fn"));
	for (uint32_t i = 0; !rc && i < 240; i++) {
		uint32_t fr[4];
		struct stackpulse_raw_frame rf = { STACKPULSE_FRAME_NATIVE, mod,
			                           0x1000 + (i % 40) * 16, UINT32_MAX, 0 };
		T(sp_writer_frame(w, &rf, &fr[0]));
		rf.offset = 0x1000 + ((i / 3) % 40) * 16;
		T(sp_writer_frame(w, &rf, &fr[1]));
		struct stackpulse_raw_frame kf = { STACKPULSE_FRAME_KERNEL, UINT32_MAX,
			                           0xffffffff81000010ull, UINT32_MAX, 0 };
		struct stackpulse_raw_frame pf = { STACKPULSE_FRAME_PYTHON, UINT32_MAX, 8, py, 4 };
		T(sp_writer_frame(w, i % 5 ? &kf : &pf, &fr[2]));
		struct stackpulse_raw_frame jf = { STACKPULSE_FRAME_JIT, UINT32_MAX, 0x10010,
			                           UINT32_MAX, 0 };
		T(sp_writer_frame(w, &jf, &fr[3]));
		uint32_t st = 0;
		T(sp_writer_stack_frames(w, fr, 1 + i % 4, &st));
		T(sp_writer_sample(w, 2000 + i * 1000, th[i % 3], st, 1, i % 2));
		if (i % 60 == 0)
			T(sp_writer_lost(w, th[0], 3, 2000 + i * 1000));
	}
	T(sp_writer_exit(w, ch, UINT32_MAX, 900000));
	T(sp_writer_symtab(w, mod, g_table.p, g_table.len));
	T(sp_writer_stat(w, 1, 7));
	T(sp_writer_finish(w));
#undef T
	sp_writer_free(w);
	free(scratch.p);
	return rc;
}

static mem g_spool;

static int op_read_spool(void *ctx, mem *out)
{
	(void)ctx;
	stackpulse_spool *sp = NULL;
	int rc = sp_spool_open_memory(g_spool.p, g_spool.len, 0, &sp);
	if (rc)
		return rc;
	stackpulse_sample_iter *it = NULL;
	rc = stackpulse_sample_iter_new(sp, &it);
	uint64_t n = 0, depth = 0;
	const struct stackpulse_sample *s;
	int r = 0;
	while (!rc && (r = stackpulse_sample_iter_next(it, &s)) == 1) {
		n++;
		depth += stackpulse_spool_stack_depth(sp, s->stack);
	}
	if (!rc && r < 0)
		rc = r;
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	if (!rc && out) {
		uint64_t v[2] = { n, depth };
		rc = mem_sink(out, v, sizeof(v));
	}
	return rc;
}

/* Opens the spool outside the sweep; the operation under test follows. */
static stackpulse_spool *g_open;

static int count_frame(const stackpulse_frame *frame, void *ctx)
{
	(void)frame;
	(*(uint64_t *)ctx)++;
	return 0;
}

static int op_symbolize_offline(void *ctx, mem *out)
{
	(void)ctx;
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_OFFLINE | STACKPULSE_SYM_NO_CACHE;
	stackpulse_symbolizer *sym = NULL;
	int rc = stackpulse_symbolizer_new(g_open, &o, &sym);
	if (rc)
		return rc;
	uint32_t nstacks = stackpulse_spool_stack_count(g_open);
	uint64_t frames = 0;
	for (uint32_t s = 1; !rc && s < nstacks; s++)
		rc = stackpulse_symbolizer_for_each_stack_frame(sym, s, count_frame, &frames);
	if (!rc && out)
		rc = mem_sink(out, &frames, sizeof(frames));
	stackpulse_symbolizer_free(sym);
	return rc;
}

static int write_cb(void *ctx, const void *data, size_t len)
{
	return mem_sink(ctx, data, len);
}

static int op_profile(void *ctx, mem *out)
{
	/* @p ctx: a symbolizer made outside the failure window, or NULL. */
	stackpulse_symbolizer *sym = ctx;
	stackpulse_profile *p = NULL;
	int rc = stackpulse_profile_build(g_open, sym, NULL, &p);
	if (!rc && out)
		rc = stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, NULL, write_cb, out);
	stackpulse_profile_free(p);
	return rc;
}

static stackpulse_profile *g_profile;

static int op_export(void *ctx, mem *out)
{
	enum stackpulse_export_format fmt = (enum stackpulse_export_format)(intptr_t)ctx;
	mem sink = { 0 };
	int rc = stackpulse_export(g_profile, fmt, NULL, write_cb, out ? out : &sink);
	free(sink.p);
	return rc;
}

/* ---- the sweep ---- */

typedef int (*op_fn)(void *ctx, mem *out);

typedef struct sweep_result {
	uint64_t calls; /* Allocation calls of one successful run. */
	long points;    /* Failure points injected. */
	long errors;    /* Of those, runs that returned an error. */
	long tolerated; /* Runs that succeeded with the same result anyway. */
} sweep_result;

static sweep_result sweep(const char *name, op_fn op, void *ctx)
{
	sweep_result r = { 0 };
	mem ref = { 0 };
	/* Warm-up: lazily created library state (error strings, zstd tables)
	 * must not count as a leak of the first injected run. */
	sp_alloc_fail_after(-1);
	REQUIRE_OK(op(ctx, NULL));
	sp_alloc_fail_after(0);
	(void)op(ctx, NULL);
	sp_alloc_fail_after(-1);
	sp_alloc_reset_count();
	REQUIRE_OK(op(ctx, &ref));
	r.calls = sp_alloc_count();
	for (long n = 0; n < (long)r.calls + 1; n++) {
		mem out = { 0 };
		sp_alloc_fail_after(n);
		int rc = op(ctx, &out);
		sp_alloc_fail_after(-1);
		if (n == (long)r.calls) {
			CHECK_OK(rc); /* No failure injected any more. */
		} else {
			r.points++;
			if (rc < 0) {
				r.errors++;
				if (rc != -ENOMEM)
					printf("  %s: failure at call %ld gave %d (%s)\n", name, n,
					       rc, stackpulse_strerror(rc));
				CHECK(rc == -ENOMEM || rc == STACKPULSE_ECOMPRESS);
			} else {
				/* A tolerated failure must not change the result. */
				r.tolerated++;
				CHECK(out.len == ref.len &&
				      (!out.len || memcmp(out.p, ref.p, out.len) == 0));
			}
		}
		free(out.p);
	}
	printf("alloc-sweep %-28s %4llu calls, %4ld failure points: %4ld errors, %ld tolerated\n",
	       name, (unsigned long long)r.calls, r.points, r.errors, r.tolerated);
	free(ref.p);
	return r;
}

SP_TEST(allocation_failure_at_every_site)
{
	sp_alloc_fail_after(-1);
	REQUIRE_OK(op_symcache_build(NULL, &g_table));
	REQUIRE_OK(op_write_spool(NULL, &g_spool));
	uint64_t total = 0;
	long points = 0;
	sweep_result r;
	r = sweep("symcache build+serialise", op_symcache_build, NULL);
	total += r.calls, points += r.points;
	r = sweep("symcache merge", op_symcache_merge, NULL);
	total += r.calls, points += r.points;
	r = sweep("format write spool", op_write_spool, NULL);
	total += r.calls, points += r.points;
	r = sweep("format open+iterate spool", op_read_spool, NULL);
	total += r.calls, points += r.points;

	REQUIRE_OK(sp_spool_open_memory(g_spool.p, g_spool.len, 0, &g_open));
	CHECK(stackpulse_spool_meta(g_open)->samples == 240);
	r = sweep("symbolize offline (embedded)", op_symbolize_offline, NULL);
	total += r.calls, points += r.points;
	r = sweep("profile build (no symbolizer)", op_profile, NULL);
	total += r.calls, points += r.points;
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_OFFLINE | STACKPULSE_SYM_NO_CACHE;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(g_open, &so, &sym));
	r = sweep("profile build (symbolizer)", op_profile, sym);
	total += r.calls, points += r.points;
	REQUIRE_OK(stackpulse_profile_build(g_open, sym, NULL, &g_profile));
	static const char *names[] = { "", "export folded", "export pprof", "export firefox",
		                       "export svg" };
	for (int f = STACKPULSE_EXPORT_FOLDED; f <= STACKPULSE_EXPORT_SVG; f++) {
		r = sweep(names[f], op_export, (void *)(intptr_t)f);
		total += r.calls, points += r.points;
	}
	r = sweep("export syscap", op_export, (void *)(intptr_t)STACKPULSE_EXPORT_SYSCAP);
	total += r.calls, points += r.points;
	stackpulse_profile_free(g_profile);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(g_open);
	printf("alloc-sweep total: %llu allocation calls, %ld failure points\n",
	       (unsigned long long)total, points);
	free(g_table.p);
	free(g_spool.p);
}
