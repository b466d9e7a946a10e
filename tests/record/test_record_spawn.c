/* Recording spawned targets end to end: real programs built with -O2
 * -fomit-frame-pointer, sampled with perf, unwound online, read back from
 * the spool and named with their own ELF symbol tables. */
#include <errno.h>
#include <sys/resource.h>

#include "rec_driver.h"
#include "rec_stats.h"

typedef struct run {
	char spool[512];
	pid_t pid;
	struct rec_stats stats;
	double cpu_per_sample_us;
	stackpulse_spool *sp;
} run;

/* Spawns @p argv, records to the end and opens the spool. */
static void record_spawn(run *r, char *const argv[], const char *tag,
                         const stackpulse_recorder_opts *opts)
{
	snprintf(r->spool, sizeof(r->spool), "%s/%s.spool", sp_test_tmpdir(), tag);
	stackpulse_recorder *rec;
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	REQUIRE_OK(stackpulse_recorder_spawn(argv, r->spool, opts, &rec, &r->pid));
	CHECK(r->pid > 0);
	CHECK_OK(rec_run(rec, 30));
	CHECK_OK(rec_stats_get(rec, &r->stats));
	REQUIRE_OK(rec_finish(rec));
	getrusage(RUSAGE_SELF, &ru1);
	/* The recorder's own CPU per sample (attach, unwind, encode, finish). */
	double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
	             (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
	             (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
	             (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
	r->cpu_per_sample_us = r->stats.samples ? cpu * 1e6 / (double)r->stats.samples : 0;
	printf("%s: recorder CPU %.3f s, %.1f us per sample\n", tag, cpu, r->cpu_per_sample_us);
	int status;
	waitpid(r->pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	REQUIRE_OK(stackpulse_spool_open(r->spool, NULL, &r->sp));
}

static stackpulse_recorder_opts fast_opts(void)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	return o;
}

/* Counts samples of @p pid (0: all) whose leaf-end user frames start with
 * @p seq[0] and those that contain the whole sequence. */
static void count_seq(const stackpulse_spool *sp, pid_t pid, const char *const *seq, int nseq,
                      int *leafs, int *full, int *total)
{
	stackpulse_sample_iter *it;
	*leafs = *full = *total = 0;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		if (pid && s->pid != pid)
			continue;
		(*total)++;
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		uint32_t u = 0;
		while (u < d) {
			const struct stackpulse_raw_frame *f;
			uint32_t ids[256];
			stackpulse_spool_stack_frames(sp, s->stack, ids, 256);
			f = stackpulse_spool_frame(sp, ids[u]);
			if (f->kind != STACKPULSE_FRAME_KERNEL)
				break;
			u++;
		}
		if (u < d && strcmp(names[u], seq[0]) == 0) {
			(*leafs)++;
			if (rec_has_seq(names + u, d - u, seq, nseq))
				(*full)++;
		}
	}
	stackpulse_sample_iter_free(it);
}

SP_TEST(spawn_call_ladder_in_order)
{
	const char *bin = rec_target("ladder", NULL);
	char *argv[] = { (char *)bin, "1.5", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "ladder", &o);
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(r.sp);
	CHECK(m->samples > 100);              /* CPU time share varies on a loaded VM. */
	CHECK(m->samples >= r.stats.samples); /* finish drains the rest. */
	CHECK_STR(m->event, "cpu-clock");
	CHECK_EQ(m->frequency, 999);
	CHECK_EQ(m->truncated, 0);
	if (!sp_test_under_valgrind()) /* a recorder 30x slower loses some */
		CHECK_EQ(r.stats.lost, 0);
	const char *seq[] = { "leaf", "middle", "entry", "main" };
	int leafs, full, total;
	count_seq(r.sp, r.pid, seq, 4, &leafs, &full, &total);
	printf("ladder: %d samples, %d in leaf, %d full ladders\n", total, leafs, full);
	CHECK(leafs * 2 > total);
	CHECK(full * 100 > leafs * 95);
	/* The process and its binary. */
	REQUIRE(stackpulse_spool_process_count(r.sp) == 1);
	const struct stackpulse_process *p = stackpulse_spool_process(r.sp, 0);
	CHECK_EQ(p->pid, r.pid);
	CHECK_STR(p->name, "ladder");
	CHECK(strstr(p->cmdline, "ladder 1.5") != NULL);
	int found = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(r.sp); i++) {
		const struct stackpulse_module *mod = stackpulse_spool_module(r.sp, i);
		if (strcmp(mod->path, bin) == 0) {
			found = 1;
			CHECK_EQ(mod->build_id_len, 20);
		}
	}
	CHECK(found);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_recursion)
{
	const char *bin = rec_target("recursion", NULL);
	char *argv[] = { (char *)bin, "1", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "recursion", &o);
	const char *seq[15];
	seq[0] = "bottom";
	for (int i = 1; i <= 13; i++)
		seq[i] = "recurse";
	seq[14] = "main";
	int leafs, full, total;
	count_seq(r.sp, r.pid, seq, 15, &leafs, &full, &total);
	printf("recursion: %d samples, %d in bottom, %d full\n", total, leafs, full);
	CHECK(leafs * 2 > total);
	CHECK(full * 100 > leafs * 95);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_shared_library)
{
	char lib[600], extra[1400];
	snprintf(lib, sizeof(lib), "%s/libwork.so", sp_test_tmpdir());
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -fomit-frame-pointer -shared -fPIC -o '%s' "
	         "'%s/tests/record/targets/libwork.c'",
	         lib, sp_test_source_root());
	REQUIRE(system(cmd) == 0);
	snprintf(extra, sizeof(extra), "-L'%s' -lwork -Wl,-rpath,'%s'", sp_test_tmpdir(),
	         sp_test_tmpdir());
	const char *bin = rec_target("shlib_main", extra);
	char *argv[] = { (char *)bin, "1", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "shlib", &o);
	const char *seq[] = { "lib_inner", "lib_outer", "app_call", "main" };
	int leafs, full, total;
	count_seq(r.sp, r.pid, seq, 4, &leafs, &full, &total);
	printf("shlib: %d samples, %d in lib_inner, %d full\n", total, leafs, full);
	CHECK(leafs * 2 > total);
	CHECK(full * 100 > leafs * 95);
	int found = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(r.sp); i++)
		found |= strcmp(stackpulse_spool_module(r.sp, i)->path, lib) == 0;
	CHECK(found);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_four_named_threads)
{
	const char *bin = rec_target("threads", "-pthread");
	char *argv[] = { (char *)bin, "1.5", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "threads", &o);
	const char *tnames[4] = { "t-alpha", "t-beta", "t-gamma", "t-delta" };
	const char *fns[4] = { "work_alpha", "work_beta", "work_gamma", "work_delta" };
	int per[4] = { 0 }, right[4] = { 0 };
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(r.sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		const struct stackpulse_thread *t = stackpulse_spool_thread(r.sp, s->thread);
		REQUIRE(t != NULL);
		CHECK_EQ(t->tid, s->tid);
		for (int k = 0; k < 4; k++) {
			if (strcmp(t->name, tnames[k]) != 0)
				continue;
			per[k]++;
			const char *names[256];
			uint32_t d = rec_stack_names(r.sp, s->stack, names, 256);
			for (uint32_t i = 0; i < d; i++)
				if (strcmp(names[i], fns[k]) == 0) {
					right[k]++;
					break;
				}
		}
	}
	stackpulse_sample_iter_free(it);
	for (int k = 0; k < 4; k++) {
		printf("%s: %d samples, %d in %s\n", tnames[k], per[k], right[k], fns[k]);
		CHECK(per[k] > 30);
		CHECK(right[k] * 100 > per[k] * 95);
	}
	/* A busy 4-thread target at 999 Hz on this machine loses nothing, and
	 * the recorder stays cheap per sample (32 KiB stack copies). */
	if (!sp_test_under_valgrind()) {
		CHECK_EQ(r.stats.lost, 0);
		CHECK(r.cpu_per_sample_us < 1000);
	}
	CHECK(r.stats.threads >= 5);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_fork_and_exec_children)
{
	const char *ladder = rec_target("ladder", NULL);
	const char *bin = rec_target("forker", NULL);
	char *argv[] = { (char *)bin, "1.5", (char *)ladder, "1.5", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	const struct stackpulse_process *kid = NULL, *exe = NULL, *parent = NULL;
	uint32_t np = 0;
	/* The fork child renames itself with prctl: its COMM record, not a
	 * racy /proc read at fork time, must name the process. */
	record_spawn(&r, argv, "forker", &o);
	np = stackpulse_spool_process_count(r.sp);
	for (uint32_t i = 0; i < np; i++) {
		const struct stackpulse_process *p = stackpulse_spool_process(r.sp, i);
		printf("process %u pid %d parent %u name '%s'\n", i, (int)p->pid, p->parent,
		       p->name);
		if (p->pid == r.pid)
			parent = p;
		else if (strcmp(p->name, "forked-kid") == 0)
			kid = p;
		else if (strcmp(p->name, "ladder") == 0)
			exe = p;
	}
	CHECK(np >= 3);
	REQUIRE(parent && kid && exe);
	CHECK_EQ(kid->parent, parent->index);
	CHECK_EQ(exe->parent, parent->index);
	CHECK(kid->pid != parent->pid && exe->pid != parent->pid && kid->pid != exe->pid);
	CHECK(strstr(exe->cmdline, "ladder 1.5") != NULL);
	const char *kseq[] = { "child_work", "main" };
	const char *pseq[] = { "parent_work", "main" };
	const char *eseq[] = { "leaf", "middle", "entry", "main" };
	int leafs, full, total;
	count_seq(r.sp, kid->pid, kseq, 2, &leafs, &full, &total);
	printf("fork child %d: %d samples, %d in child_work, %d full\n", kid->pid, total, leafs,
	       full);
	CHECK(total > 30 && full * 100 > total * 90);
	count_seq(r.sp, parent->pid, pseq, 2, &leafs, &full, &total);
	printf("parent: %d samples, %d full\n", total, full);
	CHECK(total > 30 && full * 100 > total * 90);
	count_seq(r.sp, exe->pid, eseq, 4, &leafs, &full, &total);
	printf("exec child %d: %d samples, %d in leaf, %d full\n", exe->pid, total, leafs, full);
	CHECK(leafs * 2 > total && full * 100 > leafs * 95);
	/* Fork and exec events are recorded. */
	int forks = 0, execs = 0;
	for (uint32_t i = 0; i < stackpulse_spool_event_count(r.sp); i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(r.sp, i);
		forks += e->kind == STACKPULSE_SPOOL_EVENT_FORK;
		execs += e->kind == STACKPULSE_SPOOL_EVENT_EXEC && e->process == exe->index;
	}
	CHECK(forks >= 2);
	CHECK(execs >= 1);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_without_children_records_only_the_target)
{
	const char *bin = rec_target("forker", NULL);
	char *argv[] = { (char *)bin, "0.5", NULL };
	stackpulse_recorder_opts o = fast_opts();
	o.children = false;
	run r;
	record_spawn(&r, argv, "forker_nochildren", &o);
	CHECK_EQ(stackpulse_spool_process_count(r.sp), 1);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(r.sp, &it));
	const struct stackpulse_sample *s;
	int n = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		CHECK_EQ(s->pid, r.pid);
		n++;
	}
	CHECK(n > 50);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(r.sp);
}

SP_TEST(spawn_syscalls_have_named_kernel_frames)
{
	if (geteuid() != 0 && access("/proc/sys/kernel/perf_event_paranoid", R_OK) == 0)
		sp_test_skip("kernel frames need root here");
	const char *bin = rec_target("syscalls", NULL);
	char *argv[] = { (char *)bin, "1", NULL };
	stackpulse_recorder_opts o = fast_opts();
	o.kernel = STACKPULSE_FEATURE_REQUIRED;
	run r;
	record_spawn(&r, argv, "syscalls", &o);
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(r.sp);
	CHECK_EQ(m->kernel_frames, 1);
	CHECK_EQ(r.stats.kernel_frames, 1);
	CHECK(stackpulse_spool_ksym_count(r.sp) > 0);
	int with_kernel = 0, named = 0, reaches_user = 0, total = 0;
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(r.sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		total++;
		uint32_t ids[256];
		uint32_t d = stackpulse_spool_stack_frames(r.sp, s->stack, ids, 256);
		if (d == 0)
			continue;
		const struct stackpulse_raw_frame *f = stackpulse_spool_frame(r.sp, ids[0]);
		if (f->kind != STACKPULSE_FRAME_KERNEL)
			continue;
		with_kernel++;
		const char *name;
		if (stackpulse_spool_ksym_lookup(r.sp, f->offset, &name, NULL, NULL) == 0 &&
		    name[0])
			named++;
		const char *names[256];
		d = rec_stack_names(r.sp, s->stack, names, 256);
		for (uint32_t i = 0; i < d; i++)
			if (strcmp(names[i], "sys_loop") == 0) {
				reaches_user++;
				break;
			}
	}
	stackpulse_sample_iter_free(it);
	printf("syscalls: %d samples, %d with kernel frames, %d named, %d reach sys_loop\n", total,
	       with_kernel, named, reaches_user);
	CHECK(with_kernel * 2 > total);
	CHECK(named * 100 >= with_kernel * 99);
	CHECK(reaches_user * 10 > with_kernel * 9);
	stackpulse_spool_close(r.sp);
}

/* A tiny ring, the largest stack copy, a high rate and a consumer that
 * dawdles: the kernel drops samples, and the loss is counted in the stats,
 * the metadata and as LOST events. */
SP_TEST(lost_samples_are_counted)
{
	const char *bin = rec_target("threads", "-pthread");
	char *argv[] = { (char *)bin, "1", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 20000;
	o.stack_size = 65528;
	o.ring_kb = 256; /* Room for three samples of 64 KiB. */
	char spool[512];
	snprintf(spool, sizeof(spool), "%s/lost.spool", sp_test_tmpdir());
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	while (stackpulse_recorder_process_is_active(rec, 0)) {
		usleep(100000);
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	}
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	printf("lost %llu, kept %llu\n", (unsigned long long)st.lost,
	       (unsigned long long)st.samples);
	CHECK(st.lost > 0);
	CHECK(st.samples > 0);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	CHECK(stackpulse_spool_meta(sp)->lost >= st.lost);
	uint64_t in_events = 0;
	for (uint32_t i = 0; i < stackpulse_spool_event_count(sp); i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(sp, i);
		if (e->kind == STACKPULSE_SPOOL_EVENT_LOST)
			in_events += e->count;
	}
	CHECK_EQ(in_events, stackpulse_spool_meta(sp)->lost);
	stackpulse_spool_close(sp);
}

/* A CPython target: Python frames are merged into the native stack. */
SP_TEST(spawn_python_frames)
{
	if (system("command -v python3 >/dev/null") != 0)
		sp_test_skip("no python3");
	char script[600];
	snprintf(script, sizeof(script), "%s/tests/record/targets/pyladder.py",
	         sp_test_source_root());
	/* The interpreter itself, not a wrapper (pyenv shims are shell scripts
	 * whose own processes would dilute the samples). */
	char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
	char *argv[] = { python, script, "1.5", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "python", &o);
	printf("python: %llu samples, %llu with Python frames, found %d\n",
	       (unsigned long long)r.stats.samples, (unsigned long long)r.stats.python_samples,
	       r.stats.python_frames);
	if (!r.stats.python_frames) {
		stackpulse_spool_close(r.sp);
		sp_test_skip("this python3 is not readable (see the Python tests)");
	}
	CHECK(r.stats.python_samples * 2 > r.stats.samples);
	int total = 0, ordered = 0;
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(r.sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		uint32_t ids[256];
		uint32_t d = stackpulse_spool_stack_frames(r.sp, s->stack, ids, 256);
		const char *py[256];
		uint32_t k = 0;
		for (uint32_t i = 0; i < d && i < 256; i++) {
			const struct stackpulse_raw_frame *f = stackpulse_spool_frame(r.sp, ids[i]);
			if (f->kind != STACKPULSE_FRAME_PYTHON)
				continue;
			const struct stackpulse_pycode *c =
			        stackpulse_spool_pycode(r.sp, f->pycode);
			py[k++] = c ? c->qualname : "?";
		}
		if (k == 0 || strcmp(py[0], "py_leaf") != 0)
			continue;
		total++;
		const char *seq[] = { "py_leaf", "py_middle", "py_entry", "<module>" };
		ordered += rec_has_seq(py, k, seq, 4);
	}
	stackpulse_sample_iter_free(it);
	printf("python: %d samples in py_leaf, %d with the whole ladder\n", total, ordered);
	CHECK(total > 30);
	CHECK(ordered * 100 > total * 95);
	stackpulse_spool_close(r.sp);
}

/* The leader thread exits first; the process lives on in its worker and
 * stays one process in the spool, ending when the worker ends. */
SP_TEST(spawn_leader_exits_before_its_thread)
{
	const char *bin = rec_target("leader_exit", "-pthread");
	char *argv[] = { (char *)bin, "1", NULL };
	stackpulse_recorder_opts o = fast_opts();
	run r;
	record_spawn(&r, argv, "leader_exit", &o);
	CHECK_EQ(stackpulse_spool_process_count(r.sp), 1);
	const struct stackpulse_process *p = stackpulse_spool_process(r.sp, 0);
	REQUIRE(p != NULL);
	const char *seq[] = { "orphan_work" };
	int leafs, full, total;
	count_seq(r.sp, r.pid, seq, 1, &leafs, &full, &total);
	printf("leader_exit: %d samples, %d in orphan_work, %llu lost\n", total, leafs,
	       (unsigned long long)r.stats.lost);
	/* Under valgrind the ring overflows and may lose the EXIT record. */
	if (!sp_test_under_valgrind() || r.stats.lost == 0) {
		CHECK(p->end_ns != 0);
		CHECK(total > 30);
	}
	CHECK(leafs * 100 > total * 90);
	stackpulse_spool_close(r.sp);
}

SP_TEST(realtime_required_is_held_only_inside_wait_and_consume)
{
	if (geteuid() != 0)
		sp_test_skip("SCHED_FIFO needs root (CAP_SYS_NICE) here");
	const char *bin = rec_target("ladder", NULL);
	char out[1024];
	int st = rec_drive_spawn("SP_REC_REALTIME=2", sp_test_tmpdir(), "rt.spool", bin, "0.3", 0,
	                         out, sizeof(out));
	printf("realtime=REQUIRED: %s", out);
	if (st != 0 && strstr(out, "SCHED_FIFO was refused"))
		sp_test_skip_env(
		        "real-time scheduling is refused here (cgroup without RT runtime?)");
	REQUIRE_EQ(st, 0);
	CHECK(strstr(out, "realtime=1 ") != NULL);
	/* Back to SCHED_OTHER (0) after each wait and consume; the target
	 * never had it. */
	CHECK(strstr(out, " policy=0 ") != NULL);
	CHECK(strstr(out, " consume_policy=0 ") != NULL);
	CHECK(strstr(out, "target_policy=0 ") != NULL);
}

/* Without pidfds (kernels before 5.3, seccomp, valgrind) the target's
 * liveness comes from /proc: a leader that exited first is a zombie while
 * its worker runs, and the recording must go on until the worker ends. */
SP_TEST(leader_exit_without_pidfd_records_to_the_end)
{
	const char *bin = rec_target("leader_exit", "-pthread");
	char out[1024];
	int st = rec_drive_spawn("SP_REC_NO_PIDFD=1", sp_test_tmpdir(), "nopidfd.spool", bin, "1",
	                         0, out, sizeof(out));
	printf("no pidfd: %s", out);
	if (st != 0 && strstr(out, "cannot install the seccomp filter"))
		sp_test_skip("seccomp filters are not available here");
	REQUIRE_EQ(st, 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/nopidfd.spool", sp_test_tmpdir());
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	printf("no pidfd: %llu samples\n", (unsigned long long)m->samples);
	/* The leader exits at once; the worker spins for 1 s at 499 Hz. */
	CHECK(m->samples > 100);
	CHECK_EQ(stackpulse_spool_process_count(sp), 1);
	const struct stackpulse_process *p = stackpulse_spool_process(sp, 0);
	REQUIRE(p != NULL);
	CHECK(p->end_ns != 0);
	stackpulse_spool_close(sp);
}
