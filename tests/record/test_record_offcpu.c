/* Off-CPU recording with the context-switch event (root here) and with
 * the unprivileged method (as nobody, perf_event_paranoid 2): a target
 * that sleeps in nanosleep and blocks in read() on a pipe, recorded through
 * the public API; its intervals add up to the time it measured itself, and
 * their stacks end in the blocking call, user side (and kernel side when
 * kernel frames are allowed). */
#include <errno.h>

#include "format/spool_format.h"
#include "format/spool_reader.h"
#include "rec_driver.h"
#include "record/perf_events.h"
#include "rec_stats.h"

typedef struct phases_truth {
	double spin, sleep, read; /* Seconds, as the target measured them. */
} phases_truth;

/* Reads the report `phases` wrote to @p path. */
static void read_truth(const char *path, phases_truth *truth)
{
	char *text = sp_test_read_file(path, NULL);
	REQUIRE(text != NULL);
	unsigned long long a = 0, b = 0, c = 0;
	REQUIRE_EQ(sscanf(text, "spin %llu sleep %llu read %llu", &a, &b, &c), 3);
	free(text);
	truth->spin = (double)a / 1e9;
	truth->sleep = (double)b / 1e9;
	truth->read = (double)c / 1e9;
}

/* Records `phases ROUNDS ROUND_MS` (its report to @p truth_path). */
static void record_phases(const char *tag, const stackpulse_recorder_opts *opts, char *spool,
                          size_t cap, struct rec_stats *st, phases_truth *truth)
{
	const char *exe = rec_target("phases", "-lpthread");
	char truth_path[512], cmd[1024];
	snprintf(spool, cap, "%s/%s.spool", sp_test_tmpdir(), tag);
	snprintf(truth_path, sizeof(truth_path), "%s/%s.truth", sp_test_tmpdir(), tag);
	snprintf(cmd, sizeof(cmd), "exec '%s' 10 100 >'%s'", exe, truth_path);
	char *const argv[] = { "/bin/sh", "-c", cmd, NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, opts, &rec, &pid));
	CHECK_OK(rec_run(rec, 60));
	CHECK_OK(rec_stats_get(rec, st));
	REQUIRE_OK(rec_finish(rec));
	int status;
	waitpid(pid, &status, 0);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_truth(truth_path, truth);
}

typedef struct names {
	char v[64][128];
	int kind[64]; /* stackpulse_frame_kind */
	int n;
} names;

static int collect(const stackpulse_frame *f, void *ctx)
{
	names *nm = ctx;
	if (nm->n < 64) {
		const char *s = stackpulse_frame_func_name(f);
		snprintf(nm->v[nm->n], sizeof(nm->v[0]), "%s", s ? s : "");
		nm->kind[nm->n] = (int)stackpulse_frame_kind(f);
		nm->n++;
	}
	return 0;
}

static int has(const names *nm, const char *fn)
{
	for (int i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i], fn) == 0)
			return 1;
	return 0;
}

/* The first user (non-kernel) frame from the leaf, or "". */
static const char *user_leaf(const names *nm)
{
	for (int i = 0; i < nm->n; i++)
		if (nm->kind[i] != STACKPULSE_FRAME_KERNEL)
			return nm->v[i];
	return "";
}

/* The intervals of a `phases 10 100` spool: the blocked ones in
 * sleep_phase and read_phase add up to the time those took, and every one
 * ends in the blocking call and reaches main, with kernel frames when
 * @p kernel (none otherwise). Unprivileged, a blocked thread's stack is
 * read only if the recorder gets a CPU while the thread still waits (on
 * a loaded machine some waits end first, docs/recording.md): a block
 * without a stack may be any phase's, and at most half of them are. */
static void check_phases_spool(const char *spool, const phases_truth *truth, int method, int kernel)
{
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->off_cpu_method, method);
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, NULL, &sym));
	stackpulse_offcpu_iter *it;
	REQUIRE_OK(stackpulse_offcpu_iter_new(sp, &it));
	const struct stackpulse_offcpu *iv;
	double sleep = 0, rd = 0, no_stack = 0;
	int nsleep = 0, nread = 0, sleep_leaf = 0, read_leaf = 0, sleep_kernel = 0, read_kernel = 0;
	int with_main = 0, long_blocked = 0, long_no_stack = 0, kernel_any = 0;
	uint64_t n = 0;
	int rc;
	while ((rc = stackpulse_offcpu_iter_next(it, &iv)) == 1) {
		n++;
		names nm;
		nm.n = 0;
		if (iv->stack)
			CHECK_OK(stackpulse_symbolizer_for_each_stack_frame(sym, iv->stack, collect,
			                                                    &nm));
		for (int i = 0; i < nm.n; i++)
			kernel_any += nm.kind[i] == STACKPULSE_FRAME_KERNEL;
		if (iv->state != STACKPULSE_OFFCPU_BLOCKED)
			continue;
		/* Every block of the target is 30 ms or more: all must have
		 * their stack. */
		if (iv->duration_ns >= 20000000) {
			long_blocked++;
			long_no_stack += iv->stack == 0;
			no_stack += iv->stack == 0 ? (double)iv->duration_ns / 1e9 : 0;
		}
		const char *leaf = user_leaf(&nm);
		int kern = nm.n > 0 && nm.kind[0] == STACKPULSE_FRAME_KERNEL;
		if (has(&nm, "sleep_phase")) {
			sleep += (double)iv->duration_ns / 1e9;
			nsleep++;
			sleep_leaf += strstr(leaf, "clock_nanosleep") != NULL;
			sleep_kernel += kern;
			with_main += has(&nm, "main");
		} else if (has(&nm, "read_phase")) {
			rd += (double)iv->duration_ns / 1e9;
			nread++;
			read_leaf += strstr(leaf, "read") != NULL;
			read_kernel += kern;
			with_main += has(&nm, "main");
		}
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, m->offcpu_intervals);
	stackpulse_offcpu_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
	printf("    off-CPU: sleep_phase %.3fs in %d, read_phase %.3fs in %d; %d blocks of 20 ms "
	       "or more, %d without a stack\n",
	       sleep, nsleep, rd, nread, long_blocked, long_no_stack);
	int unpriv = method == STACKPULSE_OFFCPU_UNPRIVILEGED;
	if (!unpriv)
		no_stack = 0; /* The kernel's stacks: a block without one is a loss. */
	CHECK(nsleep + (unpriv ? long_no_stack : 0) >= 10 &&
	      nread + (unpriv ? long_no_stack : 0) >= 10);
	CHECK(long_blocked >= 40); /* 10 rounds: sleep and read, filler's nap and wait */
	if (unpriv)
		CHECK(long_no_stack * 2 <= long_blocked);
	else
		CHECK_EQ(long_no_stack, 0);
	/* Every sleep and read ends in the blocking call and reaches main. */
	CHECK_EQ(sleep_leaf, nsleep);
	CHECK_EQ(read_leaf, nread);
	CHECK_EQ(with_main, nsleep + nread);
	if (kernel) {
		CHECK_EQ(sleep_kernel, nsleep);
		CHECK_EQ(read_kernel, nread);
	} else {
		CHECK_EQ(kernel_any, 0);
	}
	/* The blocked time is the time the calls took, less their CPU part. */
	CHECK(sleep + no_stack > truth->sleep * 0.95 && sleep <= truth->sleep * 1.01);
	CHECK(rd + no_stack > truth->read * 0.95 && rd <= truth->read * 1.01);
}

SP_TEST(offcpu_intervals_of_blocking_calls)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.off_cpu = STACKPULSE_FEATURE_REQUIRED;
	char spool[512];
	struct rec_stats st = { 0 };
	phases_truth truth;
	record_phases("offcpu", &o, spool, sizeof(spool), &st, &truth);
	printf("    truth: spin %.3fs sleep %.3fs read %.3fs\n", truth.spin, truth.sleep,
	       truth.read);
	printf("    stats: %llu intervals, %llu without a stack, %llu dropped, %llu samples\n",
	       (unsigned long long)st.offcpu_intervals, (unsigned long long)st.offcpu_no_stack,
	       (unsigned long long)st.offcpu_dropped, (unsigned long long)st.samples);
	CHECK_EQ(st.off_cpu_method, STACKPULSE_OFFCPU_SWITCH_EVENT);
	CHECK(st.offcpu_no_stack * 20 <= st.offcpu_intervals);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	/* finish() writes the threads still off CPU after the stats were taken
	 * (the filler's last wait can be one of them). */
	CHECK(m->offcpu_intervals >= st.offcpu_intervals);
	/* Per round at least a sleep and a read of the main thread and of the filler. */
	CHECK(m->offcpu_intervals + m->offcpu_merged >= 40);
	stackpulse_spool_close(sp);
	check_phases_spool(spool, &truth, STACKPULSE_OFFCPU_SWITCH_EVENT, 1);
}

/* The same as nobody at perf_event_paranoid 2: the context-switch event
 * is refused, so the intervals come from the switch records and the stacks
 * from the blocked threads' saved user state (no kernel frames). */
SP_TEST(offcpu_unprivileged_intervals_of_blocking_calls)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	long paranoid = sp_perf_sysctl("perf_event_paranoid", 2);
	if (paranoid > 2)
		sp_test_skip("perf_event_paranoid above 2: nobody may not sample at all");
	/* At 1 or below nobody gets the context-switch event and kernel frames. */
	int method =
	        paranoid <= 1 ? STACKPULSE_OFFCPU_SWITCH_EVENT : STACKPULSE_OFFCPU_UNPRIVILEGED;
	const char *exe = rec_target("phases", "-lpthread");
	char script[600], truth_path[600], spool[600], env[2048], out[1024];
	snprintf(script, sizeof(script), "%s/phases.sh", rec_public_dir());
	snprintf(truth_path, sizeof(truth_path), "%s/phases.truth", rec_public_dir());
	snprintf(spool, sizeof(spool), "%s/phases.spool", rec_public_dir());
	FILE *f = fopen(script, "w");
	REQUIRE(f != NULL);
	fprintf(f, "#!/bin/sh\nexec '%s' 10 100 >'%s'\n", exe, truth_path);
	fclose(f);
	chmod(script, 0755);
	/* REQUIRED and AUTO alike take the unprivileged method. */
	for (int req = 0; req < 2; req++) {
		snprintf(env, sizeof(env),
		         "SP_REC_DRIVER=spawn SP_REC_OFF_CPU=%d SP_REC_SPOOL=%s SP_REC_TARGET=%s",
		         req ? STACKPULSE_FEATURE_REQUIRED : STACKPULSE_FEATURE_AUTO, spool,
		         script);
		int st = rec_drive(env, 1, out, sizeof(out));
		printf("    nobody off_cpu=%s: %s", req ? "REQUIRED" : "AUTO", out);
		REQUIRE_EQ(st, 0);
		char want[32];
		snprintf(want, sizeof(want), "off_cpu=%d ", method);
		CHECK(strstr(out, want) != NULL);
		phases_truth truth;
		read_truth(truth_path, &truth);
		printf("    truth: spin %.3fs sleep %.3fs read %.3fs\n", truth.spin, truth.sleep,
		       truth.read);
		check_phases_spool(spool, &truth, method, paranoid <= 1);
	}
}

SP_TEST(offcpu_is_off_by_default)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	char spool[512];
	struct rec_stats st = { 0 };
	phases_truth truth;
	record_phases("oncpu", &o, spool, sizeof(spool), &st, &truth);
	CHECK_EQ(st.off_cpu_method, STACKPULSE_OFFCPU_NONE);
	CHECK_EQ(st.offcpu_intervals, 0);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	CHECK_EQ(stackpulse_spool_meta(sp)->off_cpu_method, STACKPULSE_OFFCPU_NONE);
	CHECK_EQ(stackpulse_spool_meta(sp)->offcpu_intervals, 0);
	CHECK(stackpulse_spool_meta(sp)->samples > 0);
	stackpulse_spool_close(sp);
	/* A bad value is refused. */
	o.off_cpu = (enum stackpulse_feature)7;
	stackpulse_recorder *rec = NULL;
	char *const argv[] = { "/bin/true", NULL };
	CHECK_EQ(stackpulse_recorder_spawn(argv, spool, &o, &rec, NULL), -EINVAL);
}

/* A switch storm (two threads passing a byte over pipes as fast as they
 * can), recorded with @p ring_kb rings (0: the default). Every switch-out
 * of the target's threads is accounted for: against the kernel's own count
 * of their context switches (the target reports it), the intervals seen
 * (rows plus merged) plus the ring records lost cover them all, and never
 * exceed them. What the stats said before finish and what the spool says
 * agree: finish only writes the intervals still waiting for a row. */
static void switch_storm(const char *tag, uint32_t ring_kb)
{
	char exe[512], cmd[2048], spool[512], swfile[512];
	snprintf(exe, sizeof(exe), "%s/pingpong", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -I'%s/bench/workloads' -o '%s' '%s/bench/workloads/pingpong.c' -lpthread",
	         sp_test_source_root(), exe, sp_test_source_root());
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), tag);
	snprintf(swfile, sizeof(swfile), "%s/%s.switches", sp_test_tmpdir(), tag);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.off_cpu = STACKPULSE_FEATURE_REQUIRED;
	o.ring_kb = ring_kb;
	const long rounds = 100000;
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", rounds);
	char *const argv[] = { exe, arg, swfile, NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 120));
	/* Everything the rings still hold, so that the stats are final but
	 * for what finish itself writes. */
	int w;
	while ((w = stackpulse_recorder_wait(rec, 200)) == STACKPULSE_WAIT_READY)
		CHECK_OK(stackpulse_recorder_consume_available(rec));
	CHECK_EQ(w, STACKPULSE_WAIT_EXITED);
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	REQUIRE_OK(rec_finish(rec));
	int status;
	waitpid(pid, &status, 0);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char *text = sp_test_read_file(swfile, NULL);
	REQUIRE(text != NULL);
	char *end;
	uint64_t switches = strtoull(text, &end, 10);
	uint64_t voluntary = strtoull(end, &end, 10);
	uint64_t involuntary = strtoull(end, NULL, 10);
	free(text);
	uint64_t seen = st.offcpu_intervals + st.offcpu_merged;
	printf("    %s: %llu switch-outs (kernel: %llu voluntary, %llu preempted), %llu intervals "
	       "seen: %llu rows (%llu without a "
	       "stack) + %llu merged; %llu dropped, %llu records lost\n",
	       tag, (unsigned long long)switches, (unsigned long long)voluntary,
	       (unsigned long long)involuntary, (unsigned long long)seen,
	       (unsigned long long)st.offcpu_intervals, (unsigned long long)st.offcpu_no_stack,
	       (unsigned long long)st.offcpu_merged, (unsigned long long)st.offcpu_dropped,
	       (unsigned long long)st.lost);
	/* The count is the threads' own: each round switches one of them out
	 * at least once, and blocks each at most once (a voluntary switch;
	 * and the main thread's sleeps after the loop, 10 per CPU).
	 * Preemptions are as many as the machine's load makes, not bounded
	 * here: every one of them is a switch-out the recorder must see,
	 * which the checks below hold it to. */
	CHECK_EQ(voluntary + involuntary, switches);
	CHECK(switches >= (uint64_t)rounds);
	CHECK(voluntary <=
	      (uint64_t)rounds * 2 + 10 * (uint64_t)sysconf(_SC_NPROCESSORS_CONF) + 64);
	/* The kernel's count includes the main thread's switches before exec
	 * and its sleeps after the loop (which let the kernel report a loss
	 * at the end of the loop on every CPU); each thread's last switch-out
	 * (exit, no interval) is outside it: a few either way. A lost switch
	 * record loses at most one interval. */
	CHECK(seen <= switches + 64);
	CHECK(seen + st.lost + 64 >= switches);
	CHECK(st.offcpu_dropped <= st.lost + 4);
	/* A storm: stacks were sampled, the rest merged. */
	CHECK(st.offcpu_merged > 0);
	CHECK(st.offcpu_intervals * 4 < seen);

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->lost, st.lost);
	uint64_t key[4] = { 0, 0, 0, 0 };
	CHECK_OK(sp_spool_stat(sp, SP_STAT_OFFCPU_INTERVALS, &key[0]));
	CHECK_OK(sp_spool_stat(sp, SP_STAT_OFFCPU_NO_STACK, &key[1]));
	CHECK_OK(sp_spool_stat(sp, SP_STAT_OFFCPU_DROPPED, &key[2]));
	CHECK_OK(sp_spool_stat(sp, SP_STAT_OFFCPU_MERGED, &key[3]));
	/* The STATS describe the rows in the file. */
	CHECK_EQ(key[0], m->offcpu_intervals);
	CHECK_EQ(key[3], m->offcpu_merged);
	stackpulse_offcpu_iter *it;
	REQUIRE_OK(stackpulse_offcpu_iter_new(sp, &it));
	const struct stackpulse_offcpu *iv;
	uint64_t rows = 0, no_stack = 0, merged = 0;
	int rc;
	while ((rc = stackpulse_offcpu_iter_next(it, &iv)) == 1) {
		rows++;
		no_stack += iv->stack == 0;
		merged += iv->merged;
		/* Merged intervals are short ones (docs/recording.md). */
		CHECK(iv->merged_ns <= iv->merged * 1000000ull);
	}
	CHECK_EQ(rc, 0);
	stackpulse_offcpu_iter_free(it);
	CHECK_EQ(rows, key[0]);
	CHECK_EQ(no_stack, key[1]);
	CHECK_EQ(merged, key[3]);
	/* The stats before finish: the same intervals seen and dropped;
	 * finish turned waiting ones into rows without a stack. */
	CHECK_EQ(key[0] + key[3], seen);
	CHECK_EQ(key[2], st.offcpu_dropped);
	CHECK(key[0] >= st.offcpu_intervals);
	CHECK_EQ(key[1] - st.offcpu_no_stack, key[0] - st.offcpu_intervals);
	stackpulse_spool_close(sp);
}

/* Default rings: the recorder keeps up (what is lost is counted). */
SP_TEST(offcpu_switch_storm_is_counted)
{
	switch_storm("storm", 0);
}

/* Rings far too small: the kernel drops records rather than block the
 * target, and what the loss broke is counted, not guessed. */
SP_TEST(offcpu_switch_storm_small_rings_is_counted)
{
	switch_storm("storm64k", 64);
}
