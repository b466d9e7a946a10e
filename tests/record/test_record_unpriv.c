/* The recorder run as an unprivileged user (nobody, perf_event_paranoid
 * 2) on targets it owns: recording works, kernel frames are reported as
 * unavailable, and requiring them fails with the reason. */
#include <errno.h>

#include "rec_driver.h"

static void open_check(const char *spool, int want_samples)
{
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->kernel_frames, 0);
	CHECK(strstr(m->kernel_note, "perf_event_paranoid") != NULL);
	printf("note: %s; %llu samples\n", m->kernel_note, (unsigned long long)m->samples);
	CHECK(m->samples >= (uint64_t)want_samples);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int total = 0, full = 0, kernel = 0;
	const char *seq[] = { "leaf", "middle", "entry", "main" };
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		total++;
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		full += rec_has_seq(names, d, seq, 4);
		uint32_t ids[4];
		if (stackpulse_spool_stack_frames(sp, s->stack, ids, 1) > 0)
			kernel +=
			        stackpulse_spool_frame(sp, ids[0])->kind == STACKPULSE_FRAME_KERNEL;
	}
	stackpulse_sample_iter_free(it);
	CHECK_EQ(kernel, 0);
	CHECK(full * 100 > total * 90);
	stackpulse_spool_close(sp);
}

static void need_nobody(void)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	if (system("command -v setpriv >/dev/null") != 0)
		sp_test_skip("setpriv missing");
}

SP_TEST(unprivileged_spawn)
{
	need_nobody();
	const char *bin = rec_target("ladder", NULL);
	char env[2048], out[1024], spool[600];
	snprintf(spool, sizeof(spool), "%s/spawn.spool", rec_public_dir());
	snprintf(env, sizeof(env),
	         "SP_REC_DRIVER=spawn SP_REC_SPOOL=%s SP_REC_TARGET=%s SP_REC_ARG=1", spool, bin);
	int st = rec_drive(env, 1, out, sizeof(out));
	printf("nobody spawn: %s", out);
	REQUIRE_EQ(st, 0);
	CHECK(strstr(out, "kernel=0") != NULL);
	open_check(spool, 20);
}

SP_TEST(unprivileged_attach_to_own_target)
{
	need_nobody();
	const char *bin = rec_target("ladder", NULL);
	char env[2048], out[1024], spool[600];
	snprintf(spool, sizeof(spool), "%s/attach.spool", rec_public_dir());
	snprintf(env, sizeof(env),
	         "SP_REC_DRIVER=attach SP_REC_SPOOL=%s SP_REC_TARGET=%s SP_REC_ARG=1.2", spool,
	         bin);
	int st = rec_drive(env, 1, out, sizeof(out));
	printf("nobody attach: %s", out);
	REQUIRE_EQ(st, 0);
	open_check(spool, 20);
}

SP_TEST(unprivileged_kernel_required_is_refused)
{
	need_nobody();
	const char *bin = rec_target("ladder", NULL);
	char out[1024];
	int st = rec_drive_spawn("SP_REC_KERNEL=2", rec_public_dir(), "req.spool", bin, "0.2", 1,
	                         out, sizeof(out));
	printf("nobody kernel=REQUIRED: %s", out);
	CHECK_EQ(st, 1);
	CHECK(strstr(out, "rc=-13") != NULL);
	CHECK(strstr(out, "kernel frames were required") != NULL);
}

SP_TEST(unprivileged_realtime_required_is_refused)
{
	need_nobody();
	const char *bin = rec_target("ladder", NULL);
	char out[1024];
	int st = rec_drive_spawn("SP_REC_REALTIME=2", rec_public_dir(), "rt.spool", bin, "0.2", 1,
	                         out, sizeof(out));
	printf("nobody realtime=REQUIRED: %s", out);
	CHECK_EQ(st, 1);
	CHECK(strstr(out, "run=-1 ") != NULL); /* -EPERM */
	CHECK(strstr(out, "realtime=-1 ") != NULL);
	CHECK(strstr(out, "SCHED_FIFO was refused") != NULL);
}

SP_TEST(unprivileged_realtime_auto_records_without_it)
{
	need_nobody();
	const char *bin = rec_target("ladder", NULL);
	char out[1024];
	int st = rec_drive_spawn("SP_REC_REALTIME=0", rec_public_dir(), "rt0.spool", bin, "0.3", 1,
	                         out, sizeof(out));
	printf("nobody realtime=AUTO: %s", out);
	CHECK_EQ(st, 0);
	/* Not a CPython target: AUTO does not even try. */
	CHECK(strstr(out, "realtime=0 ") != NULL);
}

/* Off-CPU intervals as nobody: the context-switch event needs kernel mode,
 * so at perf_event_paranoid 2 both REQUIRED and AUTO take the unprivileged
 * method (spawn and attach) (switch records, stacks read from the blocked threads) and say so
 * in the stats and the spool; tests/record/test_record_offcpu.c checks its
 * intervals and stacks. */
SP_TEST(unprivileged_off_cpu)
{
	need_nobody();
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int paranoid = 2;
	if (f) {
		if (fscanf(f, "%d", &paranoid) != 1)
			paranoid = 2;
		fclose(f);
	}
	int method =
	        paranoid <= 1 ? STACKPULSE_OFFCPU_SWITCH_EVENT : STACKPULSE_OFFCPU_UNPRIVILEGED;
	const char *bin = rec_target("ladder", NULL);
	char env[2048], out[1024], spool[600], want[32];
	snprintf(want, sizeof(want), "off_cpu=%d ", method);
	snprintf(spool, sizeof(spool), "%s/offcpu.spool", rec_public_dir());
	/* AUTO and REQUIRED on a spawned target, REQUIRED on an attached one. */
	for (int run = 0; run < 3; run++) {
		int req = run > 0;
		snprintf(env, sizeof(env),
		         "SP_REC_DRIVER=%s SP_REC_OFF_CPU=%d SP_REC_SPOOL=%s SP_REC_TARGET=%s "
		         "SP_REC_ARG=1",
		         run == 2 ? "attach" : "spawn", req ? 2 : 0, spool, bin);
		int st = rec_drive(env, 1, out, sizeof(out));
		printf("nobody %s --off-cpu=%s (paranoid %d): %s", run == 2 ? "attach" : "spawn",
		       req ? "on" : "auto", paranoid, out);
		REQUIRE_EQ(st, 0);
		CHECK(strstr(out, want) != NULL);
		stackpulse_spool *sp;
		REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
		CHECK(stackpulse_spool_meta(sp)->samples > 0);
		CHECK_EQ(stackpulse_spool_meta(sp)->off_cpu_method, method);
		stackpulse_spool_close(sp);
	}
}

/* The pids tree.c wrote to @p path (its children, in KINDS order). */
static int read_kids(const char *path, pid_t *kids, int max)
{
	FILE *f = fopen(path, "r");
	int n = 0, v;
	while (f && n < max && fscanf(f, "%d", &v) == 1)
		kids[n++] = (pid_t)v;
	if (f)
		fclose(f);
	return n;
}

/* Samples of @p pid in @p spool. */
static int samples_of(const char *spool, pid_t pid)
{
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int n = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1)
		n += s->pid == pid;
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	return n;
}

/* One process of the tree that refuses the recorder (not dumpable: nobody
 * may neither trace it, read its maps, nor open perf events on it) is
 * given up alone, counted and named, while the rest of the tree is
 * recorded: at attach (the existing tree; nothing of it can be opened)
 * and in a spawn, where the refusal comes at the first re-open of the
 * events (stack copy sizing), which goes on for the others. */
SP_TEST(unprivileged_refusing_child_is_given_up_alone)
{
	need_nobody();
	const char *bin = rec_target("tree", NULL);
	for (int attach = 0; attach < 2; attach++) {
		char env[2048], out[1024], spool[600], pids[600], want[64];
		snprintf(spool, sizeof(spool), "%s/refusing-%d.spool", rec_public_dir(), attach);
		snprintf(pids, sizeof(pids), "%s/refusing-%d.pids", rec_public_dir(), attach);
		unlink(pids);
		snprintf(env, sizeof(env),
		         "SP_REC_DRIVER=%s TREE_PIDS=%s SP_REC_SPOOL=%s SP_REC_TARGET=%s "
		         "SP_REC_ARG=2:bu",
		         attach ? "attach" : "spawn", pids, spool, bin);
		int st = rec_drive(env, 1, out, sizeof(out));
		printf("nobody %s of a tree with a non-dumpable child: %s",
		       attach ? "attach" : "spawn", out);
		CHECK_EQ(st, 0);
		pid_t kids[2];
		REQUIRE_EQ(read_kids(pids, kids, 2), 2);
		CHECK(strstr(out, "unfollowed=1 ") != NULL);
		snprintf(want, sizeof(want), "unfollowed_pid=%d ", (int)kids[1]);
		CHECK(strstr(out, want) != NULL);
		/* The spawn's re-open went through without the refused child. */
		if (!attach)
			CHECK(strstr(out, "copy_resizes=0 ") == NULL);
		int busy = samples_of(spool, kids[0]);
		printf("    busy child %d: %d samples; refused child %d: %d\n", (int)kids[0], busy,
		       (int)kids[1], samples_of(spool, kids[1]));
		CHECK(busy >= 50);
	}
}
