/* Error paths of the spool writer, copier and comparer: calls after finish
 * or after a sink error, argument validation, allocation failure at every
 * step, and a difference in every table noticed by sp_spool_equal. */
#include <errno.h>
#include <stdio.h>

#include "common/alloc.h"
#include "spool_copy.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"
#include "spool_peek.h"

/* Opens @p m as a spool or returns NULL. */
static stackpulse_spool *open_sink(const memsink *m)
{
	stackpulse_spool *s = NULL;
	if (sp_spool_open_memory(m->data, m->len, 0, &s))
		return NULL;
	return s;
}

SP_TEST(writer_new_rejects_bad_options)
{
	memsink m = { 0 };
	sp_writer *w = (sp_writer *)&m;
	CHECK_EQ(sp_writer_new(NULL, NULL, &m, &w), -EINVAL);
	CHECK(w == NULL);
	sp_writer_opts o = { 20, 0 };
	CHECK_EQ(sp_writer_new(&o, memsink_write, &m, &w), -EINVAL);
	o.zstd_level = -1;
	CHECK_EQ(sp_writer_new(&o, memsink_write, &m, &w), -EINVAL);
	CHECK_EQ(m.len, 0);
	/* An oversized chunk size is clamped, not refused. */
	o = (sp_writer_opts){ 1, UINT32_MAX };
	REQUIRE_OK(sp_writer_new(&o, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = open_sink(&m);
	CHECK(s != NULL);
	stackpulse_spool_close(s);
	memsink_free(&m);
	/* A sink that fails on the header. */
	m.fail_at = 1;
	CHECK_EQ(sp_writer_new(NULL, memsink_write, &m, &w), -ENOSPC);
	CHECK(w == NULL);
	memsink_free(&m);
}

SP_TEST(writer_validates_every_argument)
{
	memsink m = { 0 };
	sp_writer *w;
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_rich(w, &ids, 0));
	sp_writer_counts before, after;
	sp_writer_get_counts(w, &before);
	uint32_t id = 77, bad = 1000;
	sp_meta meta = { 0 };
	CHECK_EQ(sp_writer_meta(w, &meta), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_process(w, -1, UINT32_MAX, 0, "x", "x", &id), -EINVAL);
	CHECK_EQ(sp_writer_process(w, 5, bad, 0, "x", "x", &id), -EINVAL);
	CHECK_EQ(sp_writer_process_exec(w, bad, 0, "x", "x"), -EINVAL);
	CHECK_EQ(sp_writer_thread(w, bad, 5, 0, "x", &id), -EINVAL);
	CHECK_EQ(sp_writer_thread(w, ids.proc0, -5, 0, "x", &id), -EINVAL);
	CHECK_EQ(sp_writer_thread_name(w, bad, 0, "x"), -EINVAL);
	CHECK_EQ(sp_writer_exit(w, bad, UINT32_MAX, 0), -EINVAL);
	CHECK_EQ(sp_writer_exit(w, ids.proc0, bad, 0), -EINVAL);
	CHECK_EQ(sp_writer_fork(w, bad, ids.proc0, 0), -EINVAL);
	CHECK_EQ(sp_writer_fork(w, ids.proc0, bad, 0), -EINVAL);
	CHECK_EQ(sp_writer_lost(w, bad, 1, 0), -EINVAL);
	CHECK_EQ(sp_writer_thread_stat(w, SP_STAT_LOST, 1, bad), -EINVAL);
	CHECK_EQ(sp_writer_thread_stat(w, SP_STAT_LOST, 1, UINT32_MAX), -EINVAL);
	uint8_t big[SP_BUILD_ID_MAX + 1] = { 0 };
	CHECK_EQ(sp_writer_module(w, "/big", big, SP_BUILD_ID_MAX + 1, &id), -EINVAL);
	CHECK_EQ(sp_writer_module(w, "/nobid", NULL, 4, &id), -EINVAL);
	CHECK_EQ(sp_writer_mapping(w, bad, ids.mod_exe, 0, 1, 0, 0), -EINVAL);
	CHECK_EQ(sp_writer_mapping(w, ids.proc0, bad, 0, 1, 0, 0), -EINVAL);
	CHECK_EQ(sp_writer_mapping(w, ids.proc0, ids.mod_exe, 5, 5, 0, 0), -EINVAL);
	struct stackpulse_raw_frame f = { (enum stackpulse_frame_kind)99, 0, 0, 0, 0 };
	CHECK_EQ(sp_writer_frame(w, &f, &id), -EINVAL);
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_NATIVE, bad, 1, 0, 0 };
	CHECK_EQ(sp_writer_frame(w, &f, &id), -EINVAL);
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_PYTHON, 0, 1, bad, 1 };
	CHECK_EQ(sp_writer_frame(w, &f, &id), -EINVAL);
	CHECK_EQ(sp_writer_stack(w, bad, ids.f_native, &id), -EINVAL);
	CHECK_EQ(sp_writer_stack(w, 0, bad, &id), -EINVAL);
	uint32_t frames[2] = { ids.f_native, bad };
	CHECK_EQ(sp_writer_stack_frames(w, frames, 2, &id), -EINVAL);
	CHECK_EQ(sp_writer_sample(w, 1, bad, 0, 1, 0), -EINVAL);
	CHECK_EQ(sp_writer_sample(w, 1, ids.thr0, bad, 1, 0), -EINVAL);
	CHECK_EQ(sp_writer_jitsym(w, bad, 1, 1, "j"), -EINVAL);
	CHECK_EQ(sp_writer_jitsym(w, ids.proc0, 1, 0, "j"), -EINVAL);
	CHECK_EQ(sp_writer_jitsym(w, ids.proc0, UINT64_MAX, 2, "j"), -EINVAL);
	CHECK_EQ(sp_writer_symtab(w, bad, rich_symtab, 4), -EINVAL);
	CHECK_EQ(sp_writer_symtab(w, ids.mod_exe, rich_symtab, 4), STACKPULSE_ESTATE);
	CHECK(sp_writer_symtab(w, ids.mod_libc, rich_symtab, 0) < 0);
	CHECK_EQ(id, 77);
	sp_writer_get_counts(w, &after);
	CHECK_EQ(after.processes, before.processes);
	CHECK_EQ(after.threads, before.threads);
	CHECK_EQ(after.modules, before.modules);
	CHECK_EQ(after.frames, before.frames);
	CHECK_EQ(after.stacks, before.stacks);
	CHECK_EQ(after.samples, before.samples);
	/* NULL strings are stored as empty ones. */
	REQUIRE_OK(sp_writer_process(w, 300, UINT32_MAX, 0, NULL, NULL, &id));
	uint32_t thr;
	REQUIRE_OK(sp_writer_thread(w, id, 300, 0, NULL, &thr));
	uint32_t mod;
	REQUIRE_OK(sp_writer_module(w, NULL, NULL, 0, &mod));
	uint32_t py;
	REQUIRE_OK(sp_writer_pycode(w, NULL, NULL, 1, &py));
	REQUIRE_OK(sp_writer_ksym(w, 0xffffffff82000000ull, NULL, NULL));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = open_sink(&m);
	REQUIRE(s != NULL);
	CHECK_STR(stackpulse_spool_process(s, id)->name, "");
	CHECK_STR(stackpulse_spool_thread(s, thr)->name, "");
	CHECK_STR(stackpulse_spool_module(s, mod)->path, "");
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* Every writer entry point refuses work once finished or failed. */
static void check_all_refused(sp_writer *w, const rich_ids *ids)
{
	uint32_t id;
	sp_meta meta = { 0 };
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, ids->mod_exe, 0x1234, 0, 0 };
	CHECK_EQ(sp_writer_meta(w, &meta), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_process(w, 1, UINT32_MAX, 0, "a", "a", &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_process_exec(w, ids->proc0, 0, "a", "a"), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_thread(w, ids->proc0, 1, 0, "a", &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_thread_name(w, ids->thr0, 0, "a"), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_exit(w, ids->proc0, UINT32_MAX, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_fork(w, ids->proc0, ids->proc1, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_lost(w, ids->thr0, 1, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_module(w, "/x", NULL, 0, &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_mapping(w, ids->proc0, ids->mod_exe, 0, 1, 0, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_pycode(w, "q", "f", 1, &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_frame(w, &f, &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_stack(w, 0, ids->f_native, &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_stack_frames(w, &ids->f_native, 1, &id), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_sample(w, 1, ids->thr0, 0, 1, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_ksym(w, 1, "k", ""), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_jitsym(w, ids->proc0, 1, 1, "j"), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_symtab(w, ids->mod_libc, rich_symtab, 4), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_stat(w, SP_STAT_PYTHON_SAMPLES, 1), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_thread_stat(w, SP_STAT_LOST, 1, ids->thr0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_flush(w), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_finish(w), STACKPULSE_ESTATE);
}

SP_TEST(writer_refuses_after_finish_and_after_sink_error)
{
	memsink m = { 0 };
	sp_writer *w;
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	size_t len = m.len;
	check_all_refused(w, &ids);
	CHECK_EQ(m.len, len);
	sp_writer_free(w);
	memsink_free(&m);

	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_rich(w, &ids, 0));
	m.fail_at = m.len + 1;
	CHECK_EQ(sp_writer_flush(w), -ENOSPC);
	check_all_refused(w, &ids);
	sp_writer_free(w);
	memsink_free(&m);
}

/* A sink failing at every byte count: the writer reports -ENOSPC, never
 * crashes, and what reached the sink still opens (as a cut spool) once the
 * header is complete. */
SP_TEST(sink_failure_at_every_offset)
{
	memsink full = { 0 };
	sp_writer *w;
	rich_ids ids;
	sp_writer_opts small = { 1, 48 };
	REQUIRE_OK(sp_writer_new(&small, memsink_write, &full, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_free(w);
	size_t fails = 0;
	for (size_t at = 1; at < full.len; at += 7) {
		memsink m = { 0 };
		m.fail_at = at;
		int rc = sp_writer_new(&small, memsink_write, &m, &w);
		if (!rc) {
			rc = write_rich(w, &ids, 1);
			sp_writer_free(w);
		}
		CHECK_EQ(rc, -ENOSPC);
		fails += rc == -ENOSPC;
		CHECK(m.len <= at);
		memsink_free(&m);
	}
	CHECK(fails > 10);
	memsink_free(&full);
}

/* Allocation failure at each count while writing: the error is -ENOMEM and
 * a later full run still succeeds with the same bytes. */
SP_TEST(writer_allocation_failure_at_each_count)
{
	memsink ref = { 0 };
	sp_writer *w;
	rich_ids ids;
	sp_writer_opts small = { 1, 48 };
	REQUIRE_OK(sp_writer_new(&small, memsink_write, &ref, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_free(w);
	int ok = 0;
	for (long n = 0; n < 5000 && !ok; n++) {
		memsink m = { 0 };
		sp_alloc_fail_after(n);
		int rc = sp_writer_new(&small, memsink_write, &m, &w);
		if (!rc) {
			rc = write_rich(w, &ids, 1);
			sp_writer_free(w);
		}
		sp_alloc_fail_after(-1);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
		} else {
			ok = 1;
			CHECK_EQ(m.len, ref.len);
			CHECK(memcmp(m.data, ref.data, ref.len) == 0);
		}
		memsink_free(&m);
	}
	CHECK(ok);
	memsink_free(&ref);
}

/* sp_spool_copy with allocation failure at each count. */
SP_TEST(copy_allocation_failure_at_each_count)
{
	memsink a = { 0 }, ref = { 0 };
	sp_writer *w;
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &a, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_free(w);
	stackpulse_spool *sa = open_sink(&a);
	REQUIRE(sa != NULL);
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &ref, &w));
	REQUIRE_OK(sp_spool_copy(sa, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	int ok = 0;
	for (long n = 0; n < 5000 && !ok; n++) {
		memsink m = { 0 };
		REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
		sp_alloc_fail_after(n);
		int rc = sp_spool_copy(sa, w);
		if (!rc)
			rc = sp_writer_finish(w);
		sp_alloc_fail_after(-1);
		sp_writer_free(w);
		if (rc) {
			CHECK(rc < 0);
		} else {
			ok = 1;
			CHECK_EQ(m.len, ref.len);
			CHECK(memcmp(m.data, ref.data, ref.len) == 0);
		}
		memsink_free(&m);
	}
	CHECK(ok);
	/* Copying into a writer that already failed reports the writer's error. */
	memsink m = { 0 };
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_finish(w));
	CHECK_EQ(sp_spool_copy(sa, w), STACKPULSE_ESTATE);
	sp_writer_free(w);
	memsink_free(&m);
	stackpulse_spool_close(sa);
	memsink_free(&a);
	memsink_free(&ref);
}

/* A small spool; @p v != 0 changes exactly one thing in it. */
static int write_variant(sp_writer *w, int v)
{
	int rc;
	uint32_t p, p2, t, t2, mod, mod2, py, fr, fr2, fp, st, st2;
	sp_meta meta = { 1, 2, 99, 4096, "cpu-clock", "x86_64", "6.1", "host", 1, "" };
	if (v == 1)
		meta.frequency = 100;
	if (v == 2)
		meta.hostname = "other";
	if (v == 3)
		meta.kernel_frames = 0;
	if (v == 4)
		meta.start_mono_ns = 3;
	if (v == 58)
		meta.start_time_ns = 9;
	if (v == 59)
		meta.stack_size = 8192;
	if (v == 60)
		meta.event = "cycles";
	if (v == 61)
		meta.machine = "aarch64";
	if (v == 62)
		meta.kernel_release = "6.2";
	if (v == 63)
		meta.kernel_note = "no kernel frames";
	if (v != 5 && (rc = sp_writer_meta(w, &meta)))
		return rc;
#define TRY(x)                                                                                     \
	do {                                                                                       \
		if ((rc = (x)))                                                                    \
			return rc;                                                                 \
	} while (0)
	/* p2 is renamed by EXEC and t by COMM below: their first names and
	 * each rename are kept too (79..83). */
	TRY(sp_writer_process(w, v == 6 ? 11 : 10, UINT32_MAX, v == 64 ? 1 : 0, v == 9 ? "p2" : "p",
	                      v == 7 ? "p y" : "p x", &p));
	TRY(sp_writer_process(w, 20, v == 8 ? UINT32_MAX : p, 0, v == 79 ? "q2" : "q",
	                      v == 80 ? "q y" : "q", &p2));
	TRY(sp_writer_thread(w, p, v == 10 ? 13 : 12, 0, v == 81 ? "t2" : "t", &t));
	TRY(sp_writer_thread(w, v == 12 ? p : p2, 21, 0, v == 11 ? "u2" : "u", &t2));
	uint8_t bid[20];
	memcpy(bid, rich_build_id, sizeof(bid));
	bid[19] = v == 67 ? 0 : bid[19];
	TRY(sp_writer_module(w, v == 13 ? "/m2" : "/m", bid, v == 14 ? 19 : 20, &mod));
	TRY(sp_writer_module(w, "/n", NULL, 0, &mod2));
	TRY(sp_writer_mapping(w, v == 85 ? p2 : p, v == 15 ? mod2 : mod, v == 70 ? 0x800 : 0x1000,
	                      v == 16 ? 0x3000 : 0x2000, v == 17 ? 1 : 0, v == 71 ? 6 : 5));
	TRY(sp_writer_pycode(w, v == 18 ? "g" : "f", v == 72 ? "b.py" : "a.py", v == 19 ? 2 : 1,
	                     &py));
	uint32_t pyb;
	TRY(sp_writer_pycode(w, "fb", "a.py", 1, &pyb));
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, v == 20 ? mod2 : mod,
		                          v == 21 ? 0x11 : 0x10, 0, 0 };
	TRY(sp_writer_frame(w, &f, &fr));
	f = (struct stackpulse_raw_frame){ v == 22 ? STACKPULSE_FRAME_JIT : STACKPULSE_FRAME_KERNEL,
		                           0, 0xffffffff81000000ull, 0, 0 };
	TRY(sp_writer_frame(w, &f, &fr2));
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_PYTHON, 0, 4, v == 86 ? pyb : py,
		                           v == 23 ? 3 : 2 };
	TRY(sp_writer_frame(w, &f, &fp));
	uint32_t fs[3] = { fr, fr2, fp };
	if (v == 24) {
		fs[0] = fr2;
		fs[1] = fr;
	}
	TRY(sp_writer_stack_frames(w, fs, 3, &st));
	TRY(sp_writer_stack_frames(w, fs + 1, 2, &st2));
	/* Two one-frame stacks, and a node whose parent is one or the other. */
	uint32_t na, nb, nc;
	TRY(sp_writer_stack(w, 0, fr, &na));
	TRY(sp_writer_stack(w, 0, fr2, &nb));
	TRY(sp_writer_stack(w, v == 87 ? nb : na, fp, &nc));
	TRY(sp_writer_sample(w, v == 25 ? 101 : 100, t, st, 1, 0));
	TRY(sp_writer_sample(w, v == 93 ? 201 : 200, v == 26 ? t : t2, st2, 1, 0));
	TRY(sp_writer_sample(w, 300, t, v == 27 ? st2 : st, v == 28 ? 2 : 1, v == 29 ? 1 : 0));
	if (v != 30)
		TRY(sp_writer_sample(w, 400, t, 0, 1, 0));
	/* Variant 8 forks the other way: a FORK would give p2 its parent. */
	int swap = v == 89 || v == 8;
	TRY(sp_writer_fork(w, swap ? p2 : p, swap ? p : v == 90 ? p : p2, v == 31 ? 6 : 5));
	TRY(sp_writer_process_exec(w, p2, 6, v == 82 ? "pre2" : "pre", v == 83 ? "pre2" : "pre"));
	TRY(sp_writer_process_exec(w, p2, 7, v == 32 ? "e2" : "e", "e"));
	TRY(sp_writer_thread_name(w, t, 7, v == 84 ? "r1" : "r0"));
	if (v == 75) {
		TRY(sp_writer_lost(w, t, 3, 8));
		TRY(sp_writer_thread_name(w, t, 8, "r"));
	} else {
		TRY(sp_writer_thread_name(w, t, 8, v == 33 ? "r2" : "r"));
		TRY(sp_writer_lost(w, t, v == 34 || v == 88 ? 4 : 3, 9));
	}
	/* The same total lost, split differently in 88. */
	TRY(sp_writer_lost(w, UINT32_MAX, v == 88 ? 3 : 4, 12));
	TRY(sp_writer_exit(w, p2, v == 35 ? UINT32_MAX : v == 91 ? t : t2, v == 65 ? 11 : 10));
	TRY(sp_writer_ksym(w, v == 36 ? 0xffffffff81000001ull : 0xffffffff81000000ull, "k",
	                   v == 37 ? "mod" : ""));
	if (v != 38)
		TRY(sp_writer_ksym(w, 0xffffffff81000100ull, v == 39 ? "k3" : "k2", ""));
	TRY(sp_writer_jitsym(w, v == 40 ? p2 : p, v == 76 ? 0x5001 : 0x5000, v == 41 ? 0x20 : 0x10,
	                     v == 42 ? "j2" : "j"));
	if (v != 43)
		TRY(sp_writer_jitsym(w, v == 92 ? p2 : p, 0x6000, 0x10, "j3"));
	static const uint8_t tab1[] = "table-one", tab2[] = "table-two";
	TRY(sp_writer_symtab(w, v == 44 ? mod2 : mod, v == 45 ? tab2 : tab1,
	                     v == 69 ? sizeof(tab1) - 1 : sizeof(tab1)));
	if (v == 46)
		TRY(sp_writer_symtab(w, mod2, tab1, sizeof(tab1)));
	TRY(sp_writer_stat(w, v == 47 ? SP_STAT_PYTHON_SAMPLES : SP_STAT_TRUNCATED_STACKS,
	                   v == 48 ? 6 : 5));
	if (v == 49)
		TRY(sp_writer_stat(w, SP_STAT_PYTHON_SAMPLES, 1));
	if (v == 50)
		TRY(sp_writer_process(w, 30, UINT32_MAX, 0, "extra", "extra", &p));
	if (v == 51)
		TRY(sp_writer_thread(w, p, 31, 0, "extra", &t));
	if (v == 52)
		TRY(sp_writer_module(w, "/extra", NULL, 0, &mod));
	if (v == 53)
		TRY(sp_writer_mapping(w, p, mod, 0x9000, 0xa000, 0, 0));
	if (v == 54)
		TRY(sp_writer_pycode(w, "h", "b.py", 1, &py));
	if (v == 55) {
		f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_UNKNOWN, 0, 0x77, 0, 0 };
		TRY(sp_writer_frame(w, &f, &fr));
	}
	if (v == 56)
		TRY(sp_writer_stack(w, st, fr, &st));
	if (v == 57)
		TRY(sp_writer_lost(w, UINT32_MAX, 1, 11));
	if (v == 66)
		TRY(sp_writer_fork(w, p, p2, 5));
	if (v == 68)
		TRY(sp_writer_symtab(w, mod2, tab1, sizeof(tab1)));
	if (v == 73) {
		uint32_t py2;
		TRY(sp_writer_pycode(w, "f2", "a.py", 1, &py2));
	}
	if (v == 74)
		TRY(sp_writer_ksym(w, 0xffffffff81000200ull, "k4", ""));
	if (v == 77)
		TRY(sp_writer_sample(w, 250, t, st, 1, 0));
	if (v == 78)
		TRY(sp_writer_stat(w, SP_STAT_UNWIND_ERRORS, 1));
#undef TRY
	return sp_writer_finish(w);
}
#define VARIANTS 94

static int open_variant(int v, memsink *m, stackpulse_spool **s)
{
	sp_writer *w;
	int rc = sp_writer_new(NULL, memsink_write, m, &w);
	if (rc)
		return rc;
	rc = write_variant(w, v);
	sp_writer_free(w);
	if (rc)
		return rc;
	return sp_spool_open_memory(m->data, m->len, 0, s);
}

SP_TEST(equal_notices_a_difference_in_every_table)
{
	memsink m0 = { 0 };
	stackpulse_spool *s0;
	REQUIRE_OK(open_variant(0, &m0, &s0));
	char why[160];
	/* Same content: equal, also after a canonical copy. */
	memsink again = { 0 };
	stackpulse_spool *s0b;
	REQUIRE_OK(open_variant(0, &again, &s0b));
	CHECK_EQ(sp_spool_equal(s0, s0b, why, sizeof(why)), 1);
	CHECK_STR(why, "");
	CHECK_EQ(sp_spool_equal(s0, s0b, NULL, 0), 1);
	stackpulse_spool_close(s0b);
	memsink_free(&again);
	for (int v = 1; v < VARIANTS; v++) {
		memsink m = { 0 };
		stackpulse_spool *s;
		int rc = open_variant(v, &m, &s);
		CHECK_EQ(rc, 0);
		if (rc) {
			fprintf(stderr, "    variant %d: %d\n", v, rc);
			memsink_free(&m);
			continue;
		}
		why[0] = 'x';
		why[1] = '\0';
		int eq = sp_spool_equal(s0, s, why, sizeof(why));
		CHECK_EQ(eq, 0);
		if (eq != 0)
			fprintf(stderr, "    variant %d compared equal\n", v);
		CHECK(why[0] != '\0' && strcmp(why, "x") != 0);
		if (getenv("SP_COV_WHY"))
			fprintf(stderr, "    %d: %s\n", v, why);
		CHECK_EQ(sp_spool_equal(s, s0, why, sizeof(why)), 0);
		CHECK_EQ(sp_spool_equal(s, s0, NULL, 0), 0);
		/* The copy of a variant equals it. */
		memsink c = { 0 };
		sp_writer *w;
		REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c, &w));
		CHECK_OK(sp_spool_copy(s, w));
		CHECK_OK(sp_writer_finish(w));
		sp_writer_free(w);
		stackpulse_spool *sc = open_sink(&c);
		CHECK(sc != NULL);
		if (sc) {
			CHECK_EQ(sp_spool_equal(s, sc, why, sizeof(why)), 1);
			stackpulse_spool_close(sc);
		}
		memsink_free(&c);
		stackpulse_spool_close(s);
		memsink_free(&m);
	}
	stackpulse_spool_close(s0);
	memsink_free(&m0);
}

/* Comparing spools whose samples cannot be read (the bytes changed after
 * the open, or memory ran out) is an error, not a verdict. */
SP_TEST(equal_reports_iteration_errors)
{
	memsink ma = { 0 }, mb = { 0 };
	stackpulse_spool *a, *b;
	REQUIRE_OK(open_variant(0, &ma, &a));
	REQUIRE_OK(open_variant(0, &mb, &b));
	char why[160];
	CHECK_EQ(sp_spool_equal(a, b, why, sizeof(why)), 1);
	ma.data[SP_FILE_HEADER_LEN + 8] ^= 1; /* Chunk 0's sequence number. */
	CHECK_EQ(sp_spool_equal(a, b, why, sizeof(why)), STACKPULSE_EFORMAT);
	ma.data[SP_FILE_HEADER_LEN + 8] ^= 1;
	mb.data[SP_FILE_HEADER_LEN + 8] ^= 1;
	CHECK_EQ(sp_spool_equal(a, b, why, sizeof(why)), STACKPULSE_EFORMAT);
	mb.data[SP_FILE_HEADER_LEN + 8] ^= 1;
	for (long n = 0; n < 2; n++) {
		sp_alloc_fail_after(n);
		int rc = sp_spool_equal(a, b, why, sizeof(why));
		sp_alloc_fail_after(-1);
		CHECK_EQ(rc, -ENOMEM);
	}
	CHECK_EQ(sp_spool_equal(a, b, why, sizeof(why)), 1);
	stackpulse_spool_close(a);
	stackpulse_spool_close(b);
	memsink_free(&ma);
	memsink_free(&mb);
}

/* A sink failing at every offset while copying into tiny chunks, so every
 * writer call the copy makes sees the failure at some point. */
SP_TEST(copy_sink_failure_at_every_offset)
{
	memsink a = { 0 }, ref = { 0 };
	sp_writer *w;
	rich_ids ids;
	sp_writer_opts tiny = { 1, 1 };
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &a, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_free(w);
	stackpulse_spool *sa = open_sink(&a);
	REQUIRE(sa != NULL);
	REQUIRE_OK(sp_writer_new(&tiny, memsink_write, &ref, &w));
	REQUIRE_OK(sp_spool_copy(sa, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	size_t fails = 0;
	for (size_t at = SP_FILE_HEADER_LEN + 1; at < ref.len; at += 3) {
		memsink m = { 0 };
		m.fail_at = at;
		REQUIRE_OK(sp_writer_new(&tiny, memsink_write, &m, &w));
		int rc = sp_spool_copy(sa, w);
		if (!rc)
			rc = sp_writer_finish(w);
		sp_writer_free(w);
		CHECK_EQ(rc, -ENOSPC);
		fails += rc == -ENOSPC;
		CHECK(m.len <= at);
		memsink_free(&m);
	}
	CHECK(fails > 20);
	/* Allocation failure at each count with tiny chunks too. */
	int ok = 0;
	for (long n = 0; n < 20000 && !ok; n++) {
		memsink m = { 0 };
		REQUIRE_OK(sp_writer_new(&tiny, memsink_write, &m, &w));
		sp_alloc_fail_after(n);
		int rc = sp_spool_copy(sa, w);
		if (!rc)
			rc = sp_writer_finish(w);
		sp_alloc_fail_after(-1);
		sp_writer_free(w);
		if (rc) {
			CHECK(rc == -ENOMEM || rc == STACKPULSE_ECOMPRESS);
		} else {
			ok = 1;
			CHECK_EQ(m.len, ref.len);
		}
		memsink_free(&m);
	}
	CHECK(ok);
	stackpulse_spool_close(sa);
	memsink_free(&a);
	memsink_free(&ref);
}

SP_TEST(accessors_reject_bad_arguments)
{
	memsink m = { 0 };
	sp_writer *w;
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_free(w);
	stackpulse_spool *s = (stackpulse_spool *)&m;
	CHECK_EQ(sp_spool_open_memory(m.data, m.len, 0, NULL), -EINVAL);
	CHECK_EQ(sp_spool_open_memory(NULL, 10, 0, &s), -EINVAL);
	CHECK(s == NULL);
	CHECK(sp_spool_open_memory(NULL, 0, 0, &s) < 0);
	CHECK(s == NULL);
	s = open_sink(&m);
	REQUIRE(s != NULL);
	uint32_t big = 100000;
	CHECK(stackpulse_spool_process(s, big) == NULL);
	CHECK(stackpulse_spool_thread(s, big) == NULL);
	CHECK(stackpulse_spool_module(s, big) == NULL);
	CHECK(stackpulse_spool_pycode(s, big) == NULL);
	CHECK(stackpulse_spool_event(s, big) == NULL);
	CHECK(stackpulse_spool_frame(s, big) == NULL);
	CHECK(sp_spool_mapping(s, big) == NULL);
	CHECK(sp_spool_jitsym(s, big) == NULL);
	uint32_t fr = 9, parent = 9;
	CHECK_EQ(stackpulse_spool_stack_node(s, 0, &fr, &parent), STACKPULSE_ENOTFOUND);
	CHECK_EQ(stackpulse_spool_stack_node(s, big, &fr, &parent), STACKPULSE_ENOTFOUND);
	CHECK_EQ(fr, 9);
	REQUIRE_OK(stackpulse_spool_stack_node(s, ids.s_leaf, NULL, NULL));
	CHECK_EQ(stackpulse_spool_stack_depth(s, big), 0);
	uint32_t frames[8] = { 0 };
	CHECK_EQ(stackpulse_spool_stack_frames(s, big, frames, 8), 0);
	/* A short buffer still reports the whole depth. */
	CHECK_EQ(stackpulse_spool_stack_frames(s, ids.s_leaf, frames, 1), 4);
	CHECK_EQ(frames[0], ids.f_kernel);
	CHECK_EQ(frames[1], 0);
	uint64_t addr = 1, start = 1, value = 1;
	uint32_t key = 0;
	const char *name = NULL, *mod = NULL;
	CHECK_EQ(stackpulse_spool_ksym_lookup(s, 0x1000, &name, &start, &mod),
	         STACKPULSE_ENOTFOUND);
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0xffffffff81000250ull, NULL, NULL, NULL));
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0xffffffff81000250ull, &name, &start, &mod));
	CHECK_STR(name, "do_syscall_64");
	CHECK_EQ(start, 0xffffffff81000200ull);
	CHECK_EQ(sp_spool_ksym_at(s, big, &addr, &name, &mod), STACKPULSE_ENOTFOUND);
	CHECK_EQ(addr, 1);
	const uint8_t *tab = NULL;
	size_t len = 0;
	CHECK_EQ(sp_spool_module_symtab(s, ids.mod_libc, &tab, &len), STACKPULSE_ENOTFOUND);
	CHECK_EQ(sp_spool_module_symtab(s, big, &tab, &len), STACKPULSE_ENOTFOUND);
	CHECK(tab == NULL);
	CHECK_EQ(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f0000000fffull, &name, &start),
	         STACKPULSE_ENOTFOUND);
	CHECK_EQ(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f0000001100ull, &name, &start),
	         STACKPULSE_ENOTFOUND);
	CHECK_EQ(sp_spool_jitsym_lookup(s, ids.proc0, 0x7f0000001010ull, &name, &start),
	         STACKPULSE_ENOTFOUND);
	REQUIRE_OK(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f00000010ffull, NULL, NULL));
	REQUIRE_OK(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f0000001010ull, &name, &start));
	CHECK_STR(name, "jit_fn");
	CHECK_EQ(sp_spool_stat(s, SP_STAT_EVENT, &value), STACKPULSE_ENOTFOUND);
	CHECK_EQ(value, 1);
	CHECK_EQ(sp_spool_stat_at(s, big, &key, &value), STACKPULSE_ENOTFOUND);
	CHECK_EQ(key, 0);
	stackpulse_sample_iter *it = (stackpulse_sample_iter *)&m;
	CHECK_EQ(stackpulse_sample_iter_new(s, NULL), -EINVAL);
	CHECK_EQ(stackpulse_sample_iter_new(NULL, &it), -EINVAL);
	CHECK(it == NULL);
	sp_alloc_fail_after(0);
	CHECK_EQ(stackpulse_sample_iter_new(s, &it), -ENOMEM);
	stackpulse_spool *s2 = s;
	CHECK_EQ(sp_spool_open_memory(m.data, m.len, 0, &s2), -ENOMEM);
	sp_alloc_fail_after(-1);
	CHECK(s2 == NULL);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* An allocation failure in the first record of each kind (the record body is
 * still unallocated) is reported and leaves the writer usable: the retry
 * succeeds and the spool holds the record exactly once. */
SP_TEST(first_record_allocation_failure_is_recoverable)
{
	for (int kind = 0; kind < 6; kind++) {
		memsink m = { 0 };
		sp_writer *w;
		REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
		sp_meta meta = { 1, 2, 99, 4096, "cpu-clock", "x86_64", "6.1", "host", 0, NULL };
		uint32_t id = 0;
		int rc = 0;
		for (int attempt = 0; attempt < 2; attempt++) {
			sp_alloc_fail_after(attempt ? -1 : 0);
			switch (kind) {
			case 0: rc = sp_writer_meta(w, &meta); break;
			case 1: rc = sp_writer_process(w, 7, UINT32_MAX, 0, "p", "p", &id); break;
			case 2: rc = sp_writer_module(w, "/m", NULL, 0, &id); break;
			case 3: rc = sp_writer_pycode(w, "q", "f.py", 3, &id); break;
			case 4: rc = sp_writer_ksym(w, 0xffffffff81000000ull, "k", NULL); break;
			default: rc = sp_writer_stat(w, SP_STAT_PYTHON_SAMPLES, 4); break;
			}
			sp_alloc_fail_after(-1);
			if (attempt == 0)
				CHECK_EQ(rc, -ENOMEM);
			else
				CHECK_OK(rc);
		}
		CHECK_EQ(id, 0);
		REQUIRE_OK(sp_writer_finish(w));
		sp_writer_free(w);
		stackpulse_spool *s = open_sink(&m);
		REQUIRE(s != NULL);
		uint64_t v = 0;
		switch (kind) {
		case 0: CHECK_EQ(stackpulse_spool_meta(s)->frequency, 99); break;
		case 1: CHECK_EQ(stackpulse_spool_process_count(s), 1); break;
		case 2: CHECK_EQ(stackpulse_spool_module_count(s), 1); break;
		case 3: CHECK_EQ(stackpulse_spool_pycode_count(s), 1); break;
		case 4: CHECK_EQ(stackpulse_spool_ksym_count(s), 1); break;
		default:
			CHECK_EQ(sp_spool_stat_count(s), 1);
			CHECK_OK(sp_spool_stat(s, SP_STAT_PYTHON_SAMPLES, &v));
			CHECK_EQ(v, 4);
			break;
		}
		stackpulse_spool_close(s);
		memsink_free(&m);
	}
}
