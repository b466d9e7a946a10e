/* Spool round trips: every record kind written by the encoder reads back
 * through the public API with the same values; re-encoding is canonical. */
#include <errno.h>

#include "spool_copy.h"
#include "spool_fixture.h"
#include "format/spool_format.h"
#include "format/spool_reader.h"
#include "spool_peek.h"

static memsink rich_file(rich_ids *ids, const sp_writer_opts *opts)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	REQUIRE_OK(sp_writer_new(opts, memsink_write, &m, &w));
	int rc = write_rich(w, ids, 1);
	sp_writer_free(w);
	REQUIRE_OK(rc);
	return m;
}

SP_TEST(every_record_kind_round_trips)
{
	rich_ids ids;
	memsink m = rich_file(&ids, NULL);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));

	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
	CHECK_EQ(meta->format_version, 1);
	CHECK_EQ(meta->start_time_ns, 1700000000123456789ull);
	CHECK_EQ(stackpulse_spool_meta(s)->start_clock_ns, 5000);
	CHECK_EQ(meta->frequency, 99);
	CHECK_EQ(meta->stack_size, 32768);
	CHECK_STR(meta->event, "cpu-clock");
	CHECK_STR(meta->machine, "x86_64");
	CHECK_STR(meta->kernel_release, "6.1.0-test");
	CHECK_STR(meta->hostname, "host");
	CHECK_EQ(meta->kernel_frames, 1);
	CHECK_STR(meta->kernel_note, "");
	CHECK_EQ(meta->truncated, 0);
	CHECK_EQ(meta->samples, 5);
	CHECK_EQ(meta->lost, 10);
	CHECK_EQ(meta->chunks, 2);
	CHECK_EQ(meta->duration_ns, 3000 - 990);

	REQUIRE_EQ(stackpulse_spool_process_count(s), 2);
	const struct stackpulse_process *p = stackpulse_spool_process(s, ids.proc1);
	REQUIRE(p != NULL);
	CHECK_EQ(p->index, 1);
	CHECK_EQ(p->pid, 200);
	CHECK_EQ(p->parent, ids.proc0);
	CHECK_STR(p->name, "python3");
	CHECK_STR(p->cmdline, "python3 app.py");
	CHECK_EQ(p->start_ns, 20);
	CHECK_EQ(p->end_ns, 3200);
	p = stackpulse_spool_process(s, ids.proc0);
	CHECK_EQ(p->parent, UINT32_MAX);
	CHECK_EQ(p->end_ns, 0);
	CHECK_STR(p->cmdline, "init --flag");
	CHECK(stackpulse_spool_process(s, 2) == NULL);

	REQUIRE_EQ(stackpulse_spool_thread_count(s), 3);
	CHECK_STR(stackpulse_spool_thread(s, ids.thr1)->name, "renamed");
	CHECK_EQ(stackpulse_spool_thread(s, ids.thr1)->tid, 101);
	CHECK_EQ(stackpulse_spool_thread(s, ids.thr2)->process, ids.proc1);
	CHECK(stackpulse_spool_thread(s, 3) == NULL);

	REQUIRE_EQ(stackpulse_spool_module_count(s), 2);
	const struct stackpulse_module *mod = stackpulse_spool_module(s, ids.mod_exe);
	CHECK_STR(mod->path, "/usr/bin/app");
	REQUIRE_EQ(mod->build_id_len, 20);
	CHECK(memcmp(mod->build_id, rich_build_id, 20) == 0);
	CHECK_EQ(mod->has_symbols, 1);
	mod = stackpulse_spool_module(s, ids.mod_libc);
	CHECK(mod->build_id == NULL);
	CHECK_EQ(mod->build_id_len, 0);
	CHECK_EQ(mod->has_symbols, 0);
	const uint8_t *tab;
	size_t tab_len;
	REQUIRE_OK(sp_spool_module_symtab(s, ids.mod_exe, &tab, &tab_len));
	CHECK_EQ(tab_len, sizeof(rich_symtab));
	CHECK(memcmp(tab, rich_symtab, tab_len) == 0);
	CHECK_EQ(sp_spool_module_symtab(s, ids.mod_libc, &tab, &tab_len), STACKPULSE_ENOTFOUND);

	REQUIRE_EQ(sp_spool_mapping_count(s), 1);
	const struct sp_mapping *map = sp_spool_mapping(s, 0);
	CHECK_EQ(map->start, 0x400000);
	CHECK_EQ(map->end, 0x401000);
	CHECK_EQ(map->module, ids.mod_exe);
	CHECK_EQ(map->time_ns, 12);

	REQUIRE_EQ(stackpulse_spool_pycode_count(s), 1);
	CHECK_STR(stackpulse_spool_pycode(s, 0)->qualname, "App.run");
	CHECK_STR(stackpulse_spool_pycode(s, 0)->filename, "/srv/app.py");
	CHECK_EQ(stackpulse_spool_pycode(s, 0)->first_line, 42);

	REQUIRE_EQ(stackpulse_spool_frame_count(s), 7);
	const struct stackpulse_raw_frame *f = stackpulse_spool_frame(s, ids.f_native);
	CHECK_EQ(f->kind, STACKPULSE_FRAME_NATIVE);
	CHECK_EQ(f->module, ids.mod_exe);
	CHECK_EQ(f->offset, 0x1234);
	CHECK_EQ(f->pycode, UINT32_MAX);
	f = stackpulse_spool_frame(s, ids.f_kernel);
	CHECK_EQ(f->kind, STACKPULSE_FRAME_KERNEL);
	CHECK_EQ(f->offset, 0xffffffff81000100ull);
	CHECK_EQ(f->module, UINT32_MAX);
	f = stackpulse_spool_frame(s, ids.f_python);
	CHECK_EQ(f->kind, STACKPULSE_FRAME_PYTHON);
	CHECK_EQ(f->pycode, ids.py0);
	CHECK_EQ(f->offset, 16);
	CHECK_EQ(f->line, 44);
	CHECK_EQ(stackpulse_spool_frame(s, ids.f_jit)->kind, STACKPULSE_FRAME_JIT);
	CHECK_EQ(stackpulse_spool_frame(s, ids.f_unknown)->offset, 0xdead);
	CHECK_EQ(stackpulse_spool_frame(s, ids.f_trunc)->kind, STACKPULSE_FRAME_TRUNCATED);
	CHECK(stackpulse_spool_frame(s, 7) == NULL);

	/* Stacks: 4 nodes for the native chain (shared prefix), 3 for Python. */
	CHECK_EQ(stackpulse_spool_stack_count(s), 8);
	CHECK_EQ(stackpulse_spool_stack_depth(s, ids.s_leaf), 4);
	CHECK_EQ(stackpulse_spool_stack_depth(s, ids.s_mid), 2);
	CHECK_EQ(stackpulse_spool_stack_depth(s, 0), 0);
	CHECK_EQ(stackpulse_spool_stack_depth(s, 999), 0);
	uint32_t frames[8];
	CHECK_EQ(stackpulse_spool_stack_frames(s, ids.s_leaf, frames, 8), 4);
	CHECK_EQ(frames[0], ids.f_kernel);
	CHECK_EQ(frames[1], ids.f_libc);
	CHECK_EQ(frames[2], ids.f_native);
	CHECK_EQ(frames[3], ids.f_trunc);
	frames[1] = 77;
	CHECK_EQ(stackpulse_spool_stack_frames(s, ids.s_leaf, frames, 1), 4);
	CHECK_EQ(frames[1], 77);
	uint32_t leaf, parent;
	REQUIRE_OK(stackpulse_spool_stack_node(s, ids.s_leaf, &leaf, &parent));
	CHECK_EQ(leaf, ids.f_kernel);
	CHECK_EQ(stackpulse_spool_stack_depth(s, parent), 3);
	CHECK_EQ(stackpulse_spool_stack_node(s, 0, &leaf, &parent), STACKPULSE_ENOTFOUND);
	CHECK_EQ(stackpulse_spool_stack_node(s, 8, &leaf, &parent), STACKPULSE_ENOTFOUND);

	/* Events come sorted by time. */
	REQUIRE_EQ(stackpulse_spool_event_count(s), 7);
	static const int kinds[] = { STACKPULSE_SPOOL_EVENT_FORK, STACKPULSE_SPOOL_EVENT_EXEC,
		                     STACKPULSE_SPOOL_EVENT_COMM, STACKPULSE_SPOOL_EVENT_LOST,
		                     STACKPULSE_SPOOL_EVENT_LOST, STACKPULSE_SPOOL_EVENT_EXIT,
		                     STACKPULSE_SPOOL_EVENT_EXIT };
	uint64_t prev = 0;
	for (uint32_t i = 0; i < 7; i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(s, i);
		CHECK_EQ(e->kind, kinds[i]);
		CHECK(e->time_ns >= prev);
		prev = e->time_ns;
	}
	const struct stackpulse_spool_event *e = stackpulse_spool_event(s, 0);
	CHECK_EQ(e->process, ids.proc0);
	CHECK_EQ(e->other, ids.proc1);
	e = stackpulse_spool_event(s, 3);
	CHECK_EQ(e->count, 7);
	CHECK_EQ(e->thread, ids.thr1);
	CHECK_EQ(e->process, ids.proc0);
	e = stackpulse_spool_event(s, 4);
	CHECK_EQ(e->thread, UINT32_MAX);
	CHECK_EQ(e->process, UINT32_MAX);
	e = stackpulse_spool_event(s, 5);
	CHECK_EQ(e->thread, ids.thr2);
	CHECK(stackpulse_spool_event(s, 7) == NULL);

	/* Kernel symbols. */
	CHECK_EQ(stackpulse_spool_ksym_count(s), 3);
	const char *name, *kmod;
	uint64_t start;
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0xffffffff81000100ull, &name, &start, &kmod));
	CHECK_STR(name, "_stext");
	CHECK_EQ(start, 0xffffffff81000000ull);
	CHECK_STR(kmod, "");
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0xffffffff81000200ull, &name, NULL, NULL));
	CHECK_STR(name, "do_syscall_64");
	REQUIRE_OK(stackpulse_spool_ksym_lookup(s, 0xffffffffc0001000ull, &name, NULL, &kmod));
	CHECK_STR(name, "ext4_read");
	CHECK_STR(kmod, "ext4");
	CHECK_EQ(stackpulse_spool_ksym_lookup(s, 0x1000, &name, NULL, NULL), STACKPULSE_ENOTFOUND);

	/* JIT symbols. */
	REQUIRE_OK(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f00000010ffull, &name, &start));
	CHECK_STR(name, "jit_fn");
	CHECK_EQ(start, 0x7f0000001000ull);
	CHECK_EQ(sp_spool_jitsym_lookup(s, ids.proc1, 0x7f0000001100ull, &name, &start),
	         STACKPULSE_ENOTFOUND);
	CHECK_EQ(sp_spool_jitsym_lookup(s, ids.proc0, 0x7f0000001000ull, &name, &start),
	         STACKPULSE_ENOTFOUND);

	uint64_t v;
	REQUIRE_OK(stackpulse_spool_stat(s, STACKPULSE_STAT_TRUNCATED_STACKS, &v));
	CHECK_EQ(v, 5);
	CHECK_EQ(stackpulse_spool_stat(s, STACKPULSE_STAT_UNWIND_ERRORS, &v), STACKPULSE_ENOTFOUND);
	CHECK_EQ(stackpulse_spool_stat(s, STACKPULSE_STAT_LOST, NULL), -EINVAL);
	/* Per-thread STATS (third field): the thread's lost samples, not a global
	 * counter. */
	CHECK_EQ(stackpulse_spool_thread(s, ids.thr1)->lost, 7);
	CHECK_EQ(stackpulse_spool_thread(s, ids.thr0)->lost, 0);
	CHECK_EQ(sp_spool_stat(s, SP_STAT_LOST, &v), STACKPULSE_ENOTFOUND);

	/* Samples in file order, with times restored from signed deltas. */
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *x;
	static const uint64_t times[] = { 1000, 990, 2000, 2500, 3000 };
	uint32_t n = 0;
	int rc;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		if (n < 5)
			CHECK_EQ(x->time_ns, times[n]);
		if (n == 1) {
			CHECK_EQ(x->weight, 2);
			CHECK_EQ(x->cpu, 1);
			CHECK_EQ(x->tid, 101);
			CHECK_EQ(x->pid, 100);
			CHECK_EQ(x->stack, ids.s_mid);
		}
		if (n == 2) {
			CHECK_EQ(x->process, ids.proc1);
			CHECK_EQ(x->pid, 200);
		}
		if (n == 3)
			CHECK_EQ(x->stack, 0);
		n++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, 5);
	CHECK_EQ(stackpulse_sample_iter_next(it, &x), 0);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* OFFCPU records and the META method read back in file order, each chunk
 * with its own start-time chain; the copy is canonical; spools of writers
 * that never record off-CPU time read as none. */
SP_TEST(offcpu_intervals_round_trip)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	int rc = write_offcpu(w, 1);
	sp_writer_free(w);
	REQUIRE_OK(rc);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s));
	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
	CHECK_EQ(meta->off_cpu_method, STACKPULSE_OFFCPU_SWITCH_EVENT);
	CHECK_EQ(meta->offcpu_intervals, 4);
	CHECK_EQ(meta->offcpu_merged, 3);
	CHECK_EQ(meta->samples, 2);
	CHECK_EQ(meta->chunks, 2);
	struct {
		uint64_t start, dur;
		pid_t tid;
		int has_stack;
		enum stackpulse_offcpu_state state;
		uint64_t merged, merged_ns;
	} want[4] = {
		{ 5000, 40000000, 300, 1, STACKPULSE_OFFCPU_BLOCKED, 0, 0 },
		{ 4000, 1500, 301, 1, STACKPULSE_OFFCPU_PREEMPTED, 0, 0 },
		{ 9000, 7, 301, 0, STACKPULSE_OFFCPU_BLOCKED, 0, 0 },
		{ 50000000, 30000000000ull, 300, 1, STACKPULSE_OFFCPU_BLOCKED, 3, 4500 },
	};
	stackpulse_offcpu_iter *it = NULL;
	REQUIRE_OK(stackpulse_offcpu_iter_new(s, &it));
	const struct stackpulse_offcpu *iv;
	int n = 0;
	while ((rc = stackpulse_offcpu_iter_next(it, &iv)) == 1) {
		REQUIRE(n < 4);
		CHECK_EQ(iv->start_ns, want[n].start);
		CHECK_EQ(iv->duration_ns, want[n].dur);
		CHECK_EQ(iv->tid, want[n].tid);
		CHECK_EQ(iv->pid, 300);
		CHECK_EQ(iv->process, 0);
		CHECK_EQ(iv->stack != 0, want[n].has_stack);
		CHECK_EQ(iv->state, want[n].state);
		CHECK_EQ(iv->merged, want[n].merged);
		CHECK_EQ(iv->merged_ns, want[n].merged_ns);
		if (want[n].has_stack)
			CHECK(stackpulse_spool_stack_depth(s, iv->stack) >= 1);
		n++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, 4);
	stackpulse_offcpu_iter_free(it);
	/* Samples are not mixed with intervals. */
	stackpulse_sample_iter *si = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &si));
	const struct stackpulse_sample *x;
	n = 0;
	while (stackpulse_sample_iter_next(si, &x) == 1)
		n++;
	CHECK_EQ(n, 2);
	stackpulse_sample_iter_free(si);
	uint64_t v = 0;
	CHECK_OK(sp_spool_stat(s, SP_STAT_OFFCPU_NO_STACK, &v));
	CHECK_EQ(v, 1);
	CHECK_OK(sp_spool_stat(s, SP_STAT_OFFCPU_MERGED, &v));
	CHECK_EQ(v, 3);

	/* Copy: equal contents, the same bytes on a second copy. */
	memsink c1 = { 0 }, c2 = { 0 };
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c1, &w));
	REQUIRE_OK(sp_spool_copy(s, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *b = NULL;
	REQUIRE_OK(sp_spool_open_memory(c1.data, c1.len, STACKPULSE_SPOOL_STRICT, &b));
	char why[256];
	CHECK_EQ(sp_spool_equal(s, b, why, sizeof(why)), 1);
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c2, &w));
	REQUIRE_OK(sp_spool_copy(b, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	CHECK(c1.len == c2.len && memcmp(c1.data, c2.data, c1.len) == 0);
	stackpulse_spool_close(b);
	stackpulse_spool_close(s);

	/* A spool without off-CPU data: no method, no interval. */
	rich_ids ids;
	memsink r = rich_file(&ids, NULL);
	REQUIRE_OK(sp_spool_open_memory(r.data, r.len, STACKPULSE_SPOOL_STRICT, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->off_cpu_method, STACKPULSE_OFFCPU_NONE);
	CHECK_EQ(stackpulse_spool_meta(s)->offcpu_intervals, 0);
	REQUIRE_OK(stackpulse_offcpu_iter_new(s, &it));
	CHECK_EQ(stackpulse_offcpu_iter_next(it, &iv), 0);
	stackpulse_offcpu_iter_free(it);
	stackpulse_spool_close(s);
	memsink_free(&r);
	memsink_free(&m);
	memsink_free(&c1);
	memsink_free(&c2);
}

SP_TEST(interning_returns_the_same_ids)
{
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	uint32_t a, b, f1, f2, s1, s2;
	REQUIRE_OK(sp_writer_module(w, "/bin/x", rich_build_id, 4, &a));
	REQUIRE_OK(sp_writer_module(w, "/bin/x", rich_build_id, 4, &b));
	CHECK_EQ(a, b);
	REQUIRE_OK(sp_writer_module(w, "/bin/x", rich_build_id, 5, &b));
	CHECK(a != b);
	/* Fields a kind does not use do not split frames. */
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_KERNEL, 3, 0x10, 9, 9 };
	REQUIRE_OK(sp_writer_frame(w, &f, &f1));
	f.module = 7;
	REQUIRE_OK(sp_writer_frame(w, &f, &f2));
	CHECK_EQ(f1, f2);
	REQUIRE_OK(sp_writer_stack(w, 0, f1, &s1));
	REQUIRE_OK(sp_writer_stack(w, 0, f1, &s2));
	CHECK_EQ(s1, s2);
	CHECK_EQ(s1, 1);
	sp_writer_counts c;
	sp_writer_get_counts(w, &c);
	CHECK_EQ(c.modules, 2);
	CHECK_EQ(c.frames, 1);
	CHECK_EQ(c.stacks, 2);
	/* Bad references are refused before anything is written. */
	CHECK_EQ(sp_writer_stack(w, 5, f1, &s1), -22);
	CHECK_EQ(sp_writer_sample(w, 1, 0, 0, 1, 0), -22);
	f.kind = STACKPULSE_FRAME_INLINE;
	CHECK_EQ(sp_writer_frame(w, &f, &f1), -22);
	f = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_NATIVE, 9, 0, 0, 0 };
	CHECK_EQ(sp_writer_frame(w, &f, &f1), -22);
	REQUIRE_OK(sp_writer_finish(w));
	CHECK_EQ(sp_writer_sample(w, 1, 0, 0, 1, 0), STACKPULSE_ESTATE);
	CHECK_EQ(sp_writer_finish(w), STACKPULSE_ESTATE);
	sp_writer_free(w);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_module_count(s), 2);
	CHECK_EQ(stackpulse_spool_frame_count(s), 1);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

SP_TEST(copy_is_canonical)
{
	rich_ids ids;
	sp_writer_opts small = { 1, 64 }; /* Tiny chunks: many chunk boundaries. */
	memsink a = rich_file(&ids, &small);
	stackpulse_spool *sa, *sb, *sc;
	REQUIRE_OK(sp_spool_open_memory(a.data, a.len, 0, &sa));
	CHECK(stackpulse_spool_meta(sa)->chunks > 5);
	memsink b = { 0 }, c = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &b, &w));
	REQUIRE_OK(sp_spool_copy(sa, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	REQUIRE_OK(sp_spool_open_memory(b.data, b.len, 0, &sb));
	char why[128];
	CHECK_EQ(sp_spool_equal(sa, sb, why, sizeof(why)), 1);
	if (why[0])
		fprintf(stderr, "    %s\n", why);
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c, &w));
	REQUIRE_OK(sp_spool_copy(sb, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	REQUIRE_EQ(b.len, c.len);
	CHECK(memcmp(b.data, c.data, b.len) == 0);
	REQUIRE_OK(sp_spool_open_memory(c.data, c.len, 0, &sc));
	CHECK_EQ(sp_spool_equal(sb, sc, why, sizeof(why)), 1);
	/* A change is noticed. */
	sp_spool_equal(sa, sc, why, sizeof(why));
	stackpulse_spool_close(sa);
	stackpulse_spool_close(sb);
	stackpulse_spool_close(sc);
	memsink_free(&a);
	memsink_free(&b);
	memsink_free(&c);
}

SP_TEST(equal_notices_differences)
{
	rich_ids ids;
	memsink a = rich_file(&ids, NULL);
	memsink b = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &b, &w));
	REQUIRE_OK(write_rich(w, &ids, 0));
	REQUIRE_OK(sp_writer_sample(w, 4000, ids.thr0, ids.s_leaf, 1, 0));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *sa, *sb;
	REQUIRE_OK(sp_spool_open_memory(a.data, a.len, 0, &sa));
	REQUIRE_OK(sp_spool_open_memory(b.data, b.len, 0, &sb));
	char why[128];
	CHECK_EQ(sp_spool_equal(sa, sb, why, sizeof(why)), 0);
	CHECK(why[0] != '\0');
	stackpulse_spool_close(sa);
	stackpulse_spool_close(sb);
	memsink_free(&a);
	memsink_free(&b);
}

SP_TEST(unfinished_writer_reads_as_truncated)
{
	rich_ids ids;
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_rich(w, &ids, 0));
	REQUIRE_OK(sp_writer_flush(w));
	sp_writer_free(w);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 5);
	CHECK_EQ(stackpulse_spool_meta(s)->chunks, 2);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

SP_TEST(symtab_split_into_parts)
{
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 1, 0 };
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	uint32_t mod;
	REQUIRE_OK(sp_writer_module(w, "/big", NULL, 0, &mod));
	size_t len = 2 * SP_SYMTAB_PART_MAX + 12345;
	uint8_t *tab = malloc(len);
	REQUIRE(tab != NULL);
	uint64_t seed = 1;
	for (size_t i = 0; i < len; i++)
		tab[i] = (uint8_t)fixture_rand(&seed);
	REQUIRE_OK(sp_writer_symtab(w, mod, tab, len));
	CHECK_EQ(sp_writer_symtab(w, mod, tab, len), STACKPULSE_ESTATE);
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	const uint8_t *got;
	size_t got_len;
	REQUIRE_OK(sp_spool_module_symtab(s, mod, &got, &got_len));
	CHECK_EQ(got_len, len);
	CHECK(memcmp(got, tab, len) == 0);
	/* Random bytes do not compress: chunks fall back to stored. */
	CHECK(stackpulse_spool_meta(s)->chunks >= 3);
	stackpulse_spool_close(s);
	/* Cut inside the second part: the half table is dropped, not kept. */
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len - SP_SYMTAB_PART_MAX, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	CHECK_EQ(stackpulse_spool_module(s, mod)->has_symbols, 0);
	CHECK_EQ(sp_spool_module_symtab(s, mod, &got, &got_len), STACKPULSE_ENOTFOUND);
	stackpulse_spool_close(s);
	free(tab);
	memsink_free(&m);
}

SP_TEST(deep_stacks_are_capped)
{
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	uint32_t frames[SP_STACK_DEPTH_MAX + 1];
	for (uint32_t i = 0; i <= SP_STACK_DEPTH_MAX; i++) {
		struct stackpulse_raw_frame f = { STACKPULSE_FRAME_KERNEL, 0, i, 0, 0 };
		REQUIRE_OK(sp_writer_frame(w, &f, &frames[i]));
	}
	uint32_t id;
	REQUIRE_OK(sp_writer_stack_frames(w, frames, SP_STACK_DEPTH_MAX, &id));
	CHECK_EQ(sp_writer_stack_frames(w, frames, SP_STACK_DEPTH_MAX + 1, &id), STACKPULSE_ELIMIT);
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	uint32_t top = stackpulse_spool_stack_count(s) - 1;
	CHECK_EQ(stackpulse_spool_stack_depth(s, top), SP_STACK_DEPTH_MAX);
	uint32_t got[SP_STACK_DEPTH_MAX];
	CHECK_EQ(stackpulse_spool_stack_frames(s, top, got, SP_STACK_DEPTH_MAX),
	         SP_STACK_DEPTH_MAX);
	CHECK_EQ(got[0], frames[0]);
	CHECK_EQ(got[SP_STACK_DEPTH_MAX - 1], frames[SP_STACK_DEPTH_MAX - 1]);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* The compactness goal: a steady workload costs ~2 bytes per sample. */
SP_TEST(steady_workload_is_compact)
{
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_steady(w, 100000, 50, 4));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	double per = (double)m.len / 100000.0;
	printf("    100000 samples, 50 stacks, 4 threads: %zu bytes, %.2f bytes/sample\n", m.len,
	       per);
	CHECK(per < 3.0);
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 100000);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

SP_TEST(sink_errors_stop_the_writer)
{
	memsink m = { 0 };
	m.fail_at = 200;
	sp_writer *w;
	sp_writer_opts opts = { 1, 64 };
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	rich_ids ids;
	CHECK_EQ(write_rich(w, &ids, 1), -28);
	CHECK_EQ(sp_writer_sample(w, 1, 0, 0, 1, 0), STACKPULSE_ESTATE);
	sp_writer_free(w);
	/* What reached the sink reads back, flagged truncated. */
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	stackpulse_spool_close(s);
	memsink_free(&m);
	/* A sink failing on the file header fails the constructor. */
	m.fail_at = 1;
	CHECK_EQ(sp_writer_new(NULL, memsink_write, &m, &w), -28);
	CHECK(w == NULL);
	memsink_free(&m);
}

SP_TEST(leader_rename_renames_the_process)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	uint32_t proc, leader, worker;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_process(w, 300, UINT32_MAX, 1, "forker", "forker 1", &proc));
	REQUIRE_OK(sp_writer_thread(w, proc, 300, 1, "forker", &leader));
	REQUIRE_OK(sp_writer_thread(w, proc, 301, 2, "forker", &worker));
	REQUIRE_OK(sp_writer_thread_name(w, leader, 3, "forked-kid"));
	REQUIRE_OK(sp_writer_thread_name(w, worker, 4, "worker"));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_STR(stackpulse_spool_process(s, proc)->name, "forked-kid");
	CHECK_STR(stackpulse_spool_process(s, proc)->cmdline, "forker 1");
	CHECK_STR(stackpulse_spool_thread(s, worker)->name, "worker");
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* Renames keep their history: the first names stay on the process and
 * thread, each EXEC and COMM event carries the name it set, and the latest
 * rename by time wins even when the records arrive out of order (events from
 * several CPUs are not sorted). A copy keeps all of it. */
SP_TEST(renames_keep_their_history_in_time_order)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	uint32_t proc, leader, worker;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_process(w, 400, UINT32_MAX, 1, "bash", "bash -c run", &proc));
	REQUIRE_OK(sp_writer_thread(w, proc, 400, 1, "bash", &leader));
	REQUIRE_OK(sp_writer_thread(w, proc, 401, 2, "bash", &worker));
	REQUIRE_OK(sp_writer_process_exec(w, proc, 50, "python3", "python3 app.py"));
	REQUIRE_OK(sp_writer_thread_name(w, leader, 60, "app-main"));
	REQUIRE_OK(sp_writer_thread_name(w, worker, 70, "pool-1"));
	/* Written last, but earlier in time: it does not win. */
	REQUIRE_OK(sp_writer_process_exec(w, proc, 40, "env", "env python3 app.py"));
	REQUIRE_OK(sp_writer_thread_name(w, worker, 45, "early"));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	const struct stackpulse_process *p = stackpulse_spool_process(s, proc);
	CHECK_STR(p->initial_name, "bash");
	CHECK_STR(p->initial_cmdline, "bash -c run");
	CHECK_STR(p->name, "app-main");
	CHECK_STR(p->cmdline, "python3 app.py");
	CHECK_STR(stackpulse_spool_thread(s, leader)->initial_name, "bash");
	CHECK_STR(stackpulse_spool_thread(s, leader)->name, "app-main");
	CHECK_STR(stackpulse_spool_thread(s, worker)->name, "pool-1");
	/* The history, in time order. */
	static const struct {
		int kind;
		uint64_t time;
		const char *name, *cmdline;
	} want[] = {
		{ STACKPULSE_SPOOL_EVENT_EXEC, 40, "env", "env python3 app.py" },
		{ STACKPULSE_SPOOL_EVENT_COMM, 45, "early", "" },
		{ STACKPULSE_SPOOL_EVENT_EXEC, 50, "python3", "python3 app.py" },
		{ STACKPULSE_SPOOL_EVENT_COMM, 60, "app-main", "" },
		{ STACKPULSE_SPOOL_EVENT_COMM, 70, "pool-1", "" },
	};
	REQUIRE_EQ(stackpulse_spool_event_count(s), 5);
	for (uint32_t i = 0; i < 5; i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(s, i);
		CHECK_EQ(e->kind, want[i].kind);
		CHECK_EQ(e->time_ns, want[i].time);
		CHECK_STR(e->name, want[i].name);
		CHECK_STR(e->cmdline, want[i].cmdline);
		CHECK_EQ(e->process, proc);
	}
	/* A copy writes the events in time order and reads back the same. */
	memsink c = { 0 };
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c, &w));
	REQUIRE_OK(sp_spool_copy(s, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s2 = NULL;
	REQUIRE_OK(sp_spool_open_memory(c.data, c.len, 0, &s2));
	char why[128] = "";
	CHECK(sp_spool_equal(s, s2, why, sizeof(why)) == 1);
	CHECK_STR(why, "");
	CHECK_STR(stackpulse_spool_process(s2, proc)->initial_name, "bash");
	stackpulse_spool_close(s2);
	stackpulse_spool_close(s);
	memsink_free(&c);
	memsink_free(&m);
}

/* A thread's runtime name (RTNAME): the latest by time, whatever the file
 * order; a runtime the reader does not know is kept as its number; the
 * OS name stays beside it and is what a thread without one is shown by;
 * a copy and a rotated next file keep them. */
SP_TEST(runtime_thread_names_round_trip)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	uint32_t proc, lead, a, b;
	sp_writer_opts small = { 1, 64 };
	REQUIRE_OK(sp_writer_new(&small, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_keep_defs(w));
	REQUIRE_OK(sp_writer_process(w, 500, UINT32_MAX, 1, "python3", "python3 app.py", &proc));
	REQUIRE_OK(sp_writer_thread(w, proc, 500, 1, "python3", &lead));
	REQUIRE_OK(sp_writer_thread(w, proc, 501, 2, "python3", &a));
	REQUIRE_OK(sp_writer_thread(w, proc, 502, 3, "python3", &b));
	REQUIRE_OK(sp_writer_thread_runtime_name(w, lead, 60, SP_RUNTIME_CPYTHON, "MainThread"));
	REQUIRE_OK(sp_writer_thread_runtime_name(w, a, 70, SP_RUNTIME_CPYTHON, "renamed"));
	REQUIRE_OK(sp_writer_thread_runtime_name(w, a, 65, SP_RUNTIME_CPYTHON, "Thread-1"));
	REQUIRE_OK(sp_writer_thread_runtime_name(w, a, 66, 9, "of another runtime"));
	CHECK_EQ(sp_writer_thread_runtime_name(w, 7, 1, 1, "x"), -EINVAL);
	REQUIRE_OK(sp_writer_sample(w, 80, a, 0, 1, 0));
	REQUIRE_OK(sp_writer_finish(w));
	size_t first_len = m.len;
	sp_meta meta = { 1700000010000000000ull, 10000,  99, 32768, "cpu-clock", "x86_64",
		         "6.1.0-test",           "host", 1,  "" };
	REQUIRE_OK(sp_writer_next_file(w, &meta));
	REQUIRE_OK(sp_writer_sample(w, 90, b, 0, 1, 0));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);

	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, first_len, 0, &s));
	CHECK_STR(stackpulse_spool_thread_runtime_name(s, lead), "MainThread");
	CHECK_STR(stackpulse_spool_thread_runtime_name(s, a), "renamed");
	CHECK(stackpulse_spool_thread_runtime_name(s, b) == NULL);
	CHECK(stackpulse_spool_thread_runtime_name(s, 3) == NULL);
	CHECK_STR(stackpulse_spool_thread(s, a)->name, "python3");
	CHECK_STR(stackpulse_spool_thread_display_name(s, a), "renamed");
	CHECK_STR(stackpulse_spool_thread_display_name(s, b), "python3");
	CHECK(stackpulse_spool_thread_display_name(s, 3) == NULL);
	/* In time order, the unknown runtime kept. */
	REQUIRE_EQ(sp_spool_rtname_count(s), 4);
	CHECK_EQ(sp_spool_rtname(s, 0)->time_ns, 60);
	CHECK_EQ(sp_spool_rtname(s, 1)->time_ns, 65);
	CHECK_EQ(sp_spool_rtname(s, 2)->runtime, 9);
	CHECK_STR(sp_spool_rtname(s, 3)->name, "renamed");
	/* No event: they are not lifecycle events. */
	CHECK_EQ(stackpulse_spool_event_count(s), 0);
	memsink c = { 0 };
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &c, &w));
	REQUIRE_OK(sp_spool_copy(s, w));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s2 = NULL;
	REQUIRE_OK(sp_spool_open_memory(c.data, c.len, 0, &s2));
	char why[128] = "";
	CHECK(sp_spool_equal(s, s2, why, sizeof(why)) == 1);
	CHECK_STR(why, "");
	stackpulse_spool_close(s2);
	stackpulse_spool_close(s);
	/* The next file replays them with the threads. */
	REQUIRE_OK(sp_spool_open_memory(m.data + first_len, m.len - first_len, 0, &s));
	CHECK_STR(stackpulse_spool_thread_runtime_name(s, a), "renamed");
	CHECK_STR(stackpulse_spool_thread_display_name(s, lead), "MainThread");
	stackpulse_spool_close(s);
	memsink_free(&c);
	memsink_free(&m);
}

SP_TEST(fork_names_the_parent_of_a_child_seen_first)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	uint32_t parent, child, late;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_process(w, 400, UINT32_MAX, 1, "parent", "parent", &parent));
	REQUIRE_OK(sp_writer_process(w, 401, UINT32_MAX, 2, "child", "child", &child));
	REQUIRE_OK(sp_writer_process(w, 402, parent, 3, "late", "late", &late));
	REQUIRE_OK(sp_writer_fork(w, parent, child, 4));
	REQUIRE_OK(sp_writer_fork(w, child, late, 5));  /* Has a parent: kept. */
	REQUIRE_OK(sp_writer_fork(w, late, parent, 6)); /* A later one: ignored. */
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	CHECK_EQ(stackpulse_spool_process(s, child)->parent, parent);
	CHECK_EQ(stackpulse_spool_process(s, late)->parent, parent);
	CHECK_EQ(stackpulse_spool_process(s, parent)->parent, UINT32_MAX);
	CHECK_EQ(stackpulse_spool_event_count(s), 3);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

/* Rotation: after finish, sp_writer_next_file starts a file that stands
 * alone. It replays every definition with the same ids (exits and renames
 * included), carries its own META, samples, losses, symbol tables and
 * footer counts, and later records may refer to what earlier files
 * defined. */
SP_TEST(next_file_replays_definitions_and_stands_alone)
{
	memsink m = { 0 };
	sp_writer *w = NULL;
	sp_writer_opts small = { 1, 64 }; /* Replayed definitions span chunks. */
	REQUIRE_OK(sp_writer_new(&small, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_keep_defs(w));
	rich_ids ids;
	REQUIRE_OK(write_rich(w, &ids, 1));
	CHECK_EQ(sp_writer_keep_defs(w), STACKPULSE_ESTATE); /* Too late. */
	memsink first = m;
	memset(&m, 0, sizeof(m));

	sp_meta meta = { 1700000010000000000ull, 10000,  99, 32768, "cpu-clock", "x86_64",
		         "6.1.0-test",           "host", 1,  "" };
	REQUIRE_OK(sp_writer_next_file(w, &meta));
	CHECK_EQ(sp_writer_next_file(w, &meta), STACKPULSE_ESTATE); /* Not finished. */
	uint32_t thr3, f_new, s_new;
	REQUIRE_OK(sp_writer_sample(w, 11000, ids.thr2, ids.s_py, 1, 0));
	REQUIRE_OK(sp_writer_thread(w, ids.proc0, 102, 11500, "late", &thr3));
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, ids.mod_libc, 0x77, 0, 0 };
	REQUIRE_OK(sp_writer_frame(w, &f, &f_new));
	REQUIRE_OK(sp_writer_stack(w, ids.s_mid, f_new, &s_new));
	REQUIRE_OK(sp_writer_sample(w, 12000, thr3, s_new, 1, 1));
	REQUIRE_OK(sp_writer_lost(w, thr3, 4, 12100));
	/* Symbol tables are per file: the module may get one again. */
	REQUIRE_OK(sp_writer_symtab(w, ids.mod_exe, rich_symtab, sizeof(rich_symtab)));
	REQUIRE_OK(sp_writer_finish(w));
	memsink second = m;
	memset(&m, 0, sizeof(m));
	/* And a third, from the second's definitions plus its own. */
	REQUIRE_OK(sp_writer_next_file(w, &meta));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_counts c;
	sp_writer_get_counts(w, &c);
	CHECK_EQ(c.samples, 7); /* The writer counts the whole recording. */
	sp_writer_free(w);

	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_spool_open_memory(first.data, first.len, STACKPULSE_SPOOL_STRICT, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 5);
	stackpulse_spool_close(s);

	REQUIRE_OK(sp_spool_open_memory(second.data, second.len, STACKPULSE_SPOOL_STRICT, &s));
	const struct stackpulse_spool_meta *mt = stackpulse_spool_meta(s);
	CHECK_EQ(mt->start_time_ns, 1700000010000000000ull);
	CHECK_EQ(stackpulse_spool_meta(s)->start_clock_ns, 10000);
	CHECK_EQ(mt->samples, 2);
	CHECK_EQ(mt->lost, 4);
	CHECK_EQ(mt->truncated, 0);
	CHECK(mt->chunks > 2);
	CHECK_EQ(stackpulse_spool_process_count(s), 2);
	CHECK_STR(stackpulse_spool_process(s, ids.proc1)->name, "python3");
	CHECK_EQ(stackpulse_spool_process(s, ids.proc1)->end_ns, 3200);
	CHECK_EQ(stackpulse_spool_thread_count(s), 4);
	CHECK_STR(stackpulse_spool_thread(s, ids.thr1)->name, "renamed");
	CHECK_STR(stackpulse_spool_thread(s, thr3)->name, "late");
	CHECK_EQ(stackpulse_spool_module_count(s), 2);
	CHECK_EQ(stackpulse_spool_module(s, ids.mod_exe)->has_symbols, 1);
	CHECK_EQ(stackpulse_spool_module(s, ids.mod_libc)->has_symbols, 0);
	CHECK_EQ(stackpulse_spool_frame_count(s), 8);
	CHECK_EQ(stackpulse_spool_frame(s, ids.f_python)->kind, STACKPULSE_FRAME_PYTHON);
	CHECK_EQ(stackpulse_spool_stack_depth(s, s_new), 3);
	CHECK_EQ(stackpulse_spool_ksym_count(s), 0); /* Kernel symbols are per file. */
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *sm;
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &sm), 1);
	CHECK_EQ(sm->time_ns, 11000);
	CHECK_EQ(sm->thread, ids.thr2);
	CHECK_EQ(sm->stack, ids.s_py);
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &sm), 1);
	CHECK_EQ(sm->time_ns, 12000);
	CHECK_EQ(sm->stack, s_new);
	CHECK_EQ(stackpulse_sample_iter_next(it, &sm), 0);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);

	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 0);
	CHECK_EQ(stackpulse_spool_thread_count(s), 4);
	CHECK_EQ(stackpulse_spool_stack_depth(s, s_new), 3);
	stackpulse_spool_close(s);
	memsink_free(&first);
	memsink_free(&second);
	memsink_free(&m);

	/* A writer that keeps nothing cannot start another file. */
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(sp_writer_finish(w));
	CHECK_EQ(sp_writer_next_file(w, &meta), STACKPULSE_ESTATE);
	sp_writer_free(w);
	memsink_free(&m);
}
