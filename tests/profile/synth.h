/* A synthetic spool with a known call tree, written with the internal
 * encoder, for the profile and exporter tests.
 *
 * Process "ladder" (pid 100), threads 100 "ladder" and 101 "worker".
 * Native frames need no symbolizer: they read "ladder+0xOFF".
 *   thread 100: main > run > work_a           x5 (t = 0..4)
 *               main > run > work_b           x3 (t = 5..7)
 *               main > run > work_c           x2 (t = 8..9)
 *               main > run > work_c > entry_SYSCALL_64 [k] > do_syscall_64 [k]
 *                                             x1 (t = 10)
 *   thread 101: python3+0x500 > <module>:10 > fib:5 > fib:3   (Python)
 *                                             x4 (t = 11..14), weight 1
 * Times are BASE + t * 10 ms. */
#ifndef SP_TEST_PROFILE_SYNTH_H
#define SP_TEST_PROFILE_SYNTH_H

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "format/spool_writer.h"
#include "harness.h"
#include "stackpulse.h"
#include "format/spool_reader.h"

#define SYN_BASE 1000000000ull
#define SYN_STEP 10000000ull

static int syn_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append((sp_buf *)ctx, data, len);
}

/* Builds the spool into @p mem (caller frees with sp_buf_free) and opens it.
 * @p pname overrides the process name when not NULL. */
static inline stackpulse_spool *syn_spool(sp_buf *mem, const char *pname)
{
	sp_buf_init(mem);
	sp_writer *w = NULL;
	sp_writer_opts wo = { 0, 4096 };
	REQUIRE_OK(sp_writer_new(&wo, syn_sink, mem, &w));
	sp_meta meta = { 1700000000000000000ull,
		         SYN_BASE,
		         100,
		         8192,
		         "cpu-clock",
		         "x86_64",
		         "6.1.0",
		         "testhost",
		         1,
		         "" };
	REQUIRE_OK(sp_writer_meta(w, &meta));
	uint32_t proc, t0, t1, mod, pymod;
	REQUIRE_OK(sp_writer_process(w, 100, UINT32_MAX, SYN_BASE, pname ? pname : "ladder",
	                             "ladder --run", &proc));
	REQUIRE_OK(sp_writer_thread(w, proc, 100, SYN_BASE, "ladder", &t0));
	REQUIRE_OK(sp_writer_thread(w, proc, 101, SYN_BASE, "worker", &t1));
	const uint8_t bid[4] = { 0xde, 0xad, 0xbe, 0xef };
	REQUIRE_OK(sp_writer_module(w, "/usr/bin/ladder", bid, 4, &mod));
	REQUIRE_OK(sp_writer_module(w, "/usr/bin/python3", NULL, 0, &pymod));
	REQUIRE_OK(sp_writer_ksym(w, 0xffffffff81000000ull, "do_syscall_64", NULL));
	REQUIRE_OK(sp_writer_ksym(w, 0xffffffff81000100ull, "entry_SYSCALL_64", NULL));
	uint32_t code_mod, code_fib;
	REQUIRE_OK(sp_writer_pycode(w, "<module>", "/tmp/app.py", 1, &code_mod));
	REQUIRE_OK(sp_writer_pycode(w, "fib", "/tmp/app.py", 2, &code_fib));

	struct stackpulse_raw_frame rf;
	uint32_t f_main, f_run, f_a, f_b, f_c, f_k1, f_k2, f_py, f_pm, f_fib5, f_fib3;
#define NATIVE(off, id)                                                                            \
	do {                                                                                       \
		memset(&rf, 0, sizeof(rf));                                                        \
		rf.kind = STACKPULSE_FRAME_NATIVE;                                                 \
		rf.module = mod;                                                                   \
		rf.offset = (off);                                                                 \
		rf.pycode = UINT32_MAX;                                                            \
		REQUIRE_OK(sp_writer_frame(w, &rf, &(id)));                                        \
	} while (0)
	NATIVE(0x1000, f_main);
	NATIVE(0x1100, f_run);
	NATIVE(0x1200, f_a);
	NATIVE(0x1300, f_b);
	NATIVE(0x1400, f_c);
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_KERNEL;
	rf.module = UINT32_MAX;
	rf.pycode = UINT32_MAX;
	rf.offset = 0xffffffff81000110ull;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_k1)); /* entry_SYSCALL_64 */
	rf.offset = 0xffffffff81000010ull;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_k2)); /* do_syscall_64 */
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_NATIVE;
	rf.module = pymod;
	rf.offset = 0x500;
	rf.pycode = UINT32_MAX;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_py));
	memset(&rf, 0, sizeof(rf));
	rf.kind = STACKPULSE_FRAME_PYTHON;
	rf.module = UINT32_MAX;
	rf.pycode = code_mod;
	rf.offset = 20;
	rf.line = 10;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_pm));
	rf.pycode = code_fib;
	rf.offset = 8;
	rf.line = 5;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_fib5));
	rf.offset = 4;
	rf.line = 3;
	REQUIRE_OK(sp_writer_frame(w, &rf, &f_fib3));
#undef NATIVE

	uint32_t s_a, s_b, s_c, s_k, s_py;
	uint32_t fa[] = { f_a, f_run, f_main };
	uint32_t fb[] = { f_b, f_run, f_main };
	uint32_t fc[] = { f_c, f_run, f_main };
	uint32_t fk[] = { f_k2, f_k1, f_c, f_run, f_main };
	uint32_t fp[] = { f_fib3, f_fib5, f_pm, f_py };
	REQUIRE_OK(sp_writer_stack_frames(w, fa, 3, &s_a));
	REQUIRE_OK(sp_writer_stack_frames(w, fb, 3, &s_b));
	REQUIRE_OK(sp_writer_stack_frames(w, fc, 3, &s_c));
	REQUIRE_OK(sp_writer_stack_frames(w, fk, 5, &s_k));
	REQUIRE_OK(sp_writer_stack_frames(w, fp, 4, &s_py));
	uint64_t t = 0;
	for (int i = 0; i < 5; i++)
		REQUIRE_OK(sp_writer_sample(w, SYN_BASE + (t++) * SYN_STEP, t0, s_a, 1, 0));
	for (int i = 0; i < 3; i++)
		REQUIRE_OK(sp_writer_sample(w, SYN_BASE + (t++) * SYN_STEP, t0, s_b, 1, 0));
	for (int i = 0; i < 2; i++)
		REQUIRE_OK(sp_writer_sample(w, SYN_BASE + (t++) * SYN_STEP, t0, s_c, 1, 1));
	REQUIRE_OK(sp_writer_sample(w, SYN_BASE + (t++) * SYN_STEP, t0, s_k, 1, 1));
	for (int i = 0; i < 4; i++)
		REQUIRE_OK(sp_writer_sample(w, SYN_BASE + (t++) * SYN_STEP, t1, s_py, 1, 0));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *spool = NULL;
	REQUIRE_OK(sp_spool_open_memory(mem->data, mem->len, 0, &spool));
	return spool;
}

/* Collects an export into a NUL-terminated heap string. */
static int syn_collect(void *ctx, const void *data, size_t len)
{
	return sp_buf_append((sp_buf *)ctx, data, len);
}

static inline char *syn_export(const stackpulse_profile *p, int format, uint32_t flags,
                               size_t *len_out)
{
	sp_buf b;
	sp_buf_init(&b);
	stackpulse_export_opts o = STACKPULSE_EXPORT_OPTS;
	o.flags = flags;
	REQUIRE_OK(
	        stackpulse_export(p, (enum stackpulse_export_format)format, &o, syn_collect, &b));
	REQUIRE_OK(sp_buf_u8(&b, 0));
	if (len_out)
		*len_out = b.len - 1;
	return (char *)b.data; /* sp_buf memory comes from sp_malloc: free with sp_free. */
}

static inline stackpulse_profile *syn_profile(stackpulse_spool *spool, uint32_t flags, int view)
{
	stackpulse_profile_opts o = STACKPULSE_PROFILE_OPTS;
	o.flags = flags;
	o.view = (enum stackpulse_view)view;
	stackpulse_profile *p = NULL;
	REQUIRE_OK(stackpulse_profile_build(spool, NULL, &o, &p));
	return p;
}

#endif
