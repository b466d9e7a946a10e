/* Hostile targets against the recorder's per-process limits: a process
 * that maps code at 70,000 addresses is cut at SP_PTABLE_MAX_MAPS while
 * the recording of it and of another process goes on; a CPython process
 * that churns code objects keeps the code cache under its byte budget
 * while its samples keep their Python frames. */
#include <errno.h>
#include <unistd.h>

#include "rec_util.h"
#include "record/process_table.h"
#include "record/python.h"
#include "record/recorder.h"

/* Samples of @p pid whose leafmost user frame is @p func, and all of its. */
static void count_leaf(const stackpulse_spool *sp, pid_t pid, const char *func, uint64_t after,
                       int *hits, int *total)
{
	stackpulse_sample_iter *it;
	*hits = *total = 0;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		if (s->pid != pid || s->time_ns < after)
			continue;
		(*total)++;
		const char *names[64];
		uint32_t d = rec_stack_names(sp, s->stack, names, 64);
		for (uint32_t i = 0; i < d; i++) {
			if (strncmp(names[i], "[kernel", 7) == 0)
				continue;
			*hits += strcmp(names[i], func) == 0;
			break;
		}
	}
	stackpulse_sample_iter_free(it);
}

SP_TEST(mapping_flood_is_cut_and_recording_goes_on)
{
	const char *bin = rec_target("mapflood", NULL);
	/* Under ASan the recorder is slower and sees fewer of the flooder's
	 * samples: it spins longer after the flood there. */
	char *argv[] = { (char *)bin, "70000", SP_TEST_ASAN ? "3" : "1.5", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	/* Rings that hold the whole flood (70000 MMAP2 records, about 8 MiB,
	 * plus the samples), so that a drain slowed by ASan or a loaded
	 * machine still sees the records to drop; the default rings lost
	 * all but 63 of the dropped ones under ASan. Root may lock that much. */
	if (geteuid() == 0)
		o.ring_kb = 65536;
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/mapflood.spool", sp_test_tmpdir());
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	double t0 = rec_now();
	int rc = rec_run(rec, 60);
	double took = rec_now() - t0;
	struct stackpulse_recorder_stats st = { .sz = sizeof(st) };
	CHECK_OK(stackpulse_recorder_stats(rec, &st));
	/* By index, not by live pid: its EXIT may be drained already. */
	sp_process *p = NULL;
	for (size_t i = 0; i < rec->pt.nprocs; i++)
		if (rec->pt.procs[i]->pid == pid)
			p = rec->pt.procs[i];
	size_t kept = p ? p->nmaps : 0;
	CHECK_OK(stackpulse_recorder_finish(rec));
	int status;
	waitpid(pid, &status, 0);
	printf("70000 code mappings: run rc %d in %.1f s, %llu dropped, %zu kept, %llu lost, "
	       "%llu samples\n",
	       rc, took, (unsigned long long)st.mappings_dropped, kept, (unsigned long long)st.lost,
	       (unsigned long long)st.samples);
	CHECK_EQ(rc, 0); /* Not ELIMIT: the flood does not end the recording. */
	CHECK(took < 30);
	CHECK(p != NULL);
	CHECK(kept <= SP_PTABLE_MAX_MAPS);
	/* MMAP2 records may still be lost in the flood without root's rings,
	 * but far more than the limit arrive. */
	CHECK(st.mappings_dropped > 1000);
	CHECK(st.mappings_dropped <= 70000 - (SP_PTABLE_MAX_MAPS - 16));

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->truncated, 0);
	/* The other process: samples in other_work, through the flood and
	 * after it. The flooding process: its own code (mapped before the
	 * flood) still resolves once it spins in flood_work. */
	pid_t other = 0;
	for (uint32_t i = 0; i < stackpulse_spool_process_count(sp); i++) {
		const struct stackpulse_process *pr = stackpulse_spool_process(sp, i);
		if (pr->pid != pid)
			other = pr->pid;
	}
	REQUIRE(other != 0);
	int hits, total;
	count_leaf(sp, other, "other_work", 0, &hits, &total);
	printf("other process %d: %d samples, %d in other_work\n", (int)other, total, hits);
	CHECK(total > 50);
	CHECK(hits * 100 > total * 90);
	count_leaf(sp, pid, "flood_work", 0, &hits, &total);
	printf("flooding process %d: %d samples, %d in flood_work\n", (int)pid, total, hits);
	/* Under ASan the slower recorder gets fewer of the flooder's samples
	 * (23 of 128 seen in 1.5 s, 10 of 68 and 10 of 104 on a loaded
	 * machine), most of them in its mmap calls. */
	CHECK(hits >= (SP_TEST_ASAN ? 8 : 50));
	stackpulse_spool_close(sp);
}

/* Checks the Python frames of one sample: the f_ROUND_DEPTH_ frames of
 * codeflood.py, leaf first, must have depths falling by one down to 0,
 * their full names and their own round's file. Rounds may only grow
 * towards the root: a read later than the sample sees the next round's
 * chain in the root part of the data stack (the reader's known limit,
 * docs/python.md), counted in *torn. A chain marked cut may stop short of
 * depth 0 (its frames must still agree with each other). Returns the
 * chain length (0: no flood frame, or a cut one), -1 when the frames
 * contradict each other. */
static int flood_chain(const stackpulse_spool *sp, uint32_t stack, int *round_out, int *torn)
{
	uint32_t ids[512];
	uint32_t d = stackpulse_spool_stack_frames(sp, stack, ids, 512);
	if (d > 512)
		d = 512;
	int n = 0, round = -1, last = -1, cut = 0;
	for (uint32_t i = 0; i < d; i++) {
		const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, ids[i]);
		cut |= f && f->kind == STACKPULSE_FRAME_TRUNCATED;
		if (!f || f->kind != STACKPULSE_FRAME_PYTHON)
			continue;
		const struct stackpulse_pycode *c = stackpulse_spool_pycode(sp, f->pycode);
		int r, dep;
		if (!c || sscanf(c->qualname, "f_%d_%d_", &r, &dep) != 2)
			continue;
		char file[64];
		snprintf(file, sizeof(file), "/flood/%d/", r);
		if (strlen(c->qualname) < 1000 || strlen(c->filename) < 4000 ||
		    strncmp(c->filename, file, strlen(file)) != 0)
			return -1;
		if (n > 0 && (dep != last - 1 || r < round))
			return -1;
		if (n == 0)
			*round_out = r;
		else if (r > round)
			*torn = 1;
		round = r;
		last = dep;
		n++;
	}
	if (n && last != 0)
		return cut ? 0 : -1;
	return n;
}

SP_TEST(python_code_flood_stays_in_budget)
{
	char script[700], spool[600];
	snprintf(script, sizeof(script), "%s/tests/record/targets/codeflood.py",
	         sp_test_source_root());
	snprintf(spool, sizeof(spool), "%s/codeflood.spool", sp_test_tmpdir());
	char *argv[] = { "python3", script, "5", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	int rc = rec_run(rec, 60);
	sp_python_stats ps = rec->python_stats; /* Summed over the recording. */
	struct stackpulse_recorder_stats st = { .sz = sizeof(st) };
	CHECK_OK(stackpulse_recorder_stats(rec, &st));
	CHECK_OK(stackpulse_recorder_finish(rec));
	waitpid(pid, NULL, 0);
	printf("code flood: %llu samples (%llu with Python), code cache peak %llu bytes "
	       "(budget %llu), %llu evicted, %llu refused\n",
	       (unsigned long long)st.samples, (unsigned long long)st.python_samples,
	       (unsigned long long)ps.code_bytes_peak, (unsigned long long)SP_PY_CODE_BUDGET,
	       (unsigned long long)ps.codes_evicted, (unsigned long long)ps.codes_refused);
	CHECK_EQ(rc, 0);
	CHECK(ps.code_bytes_peak <= SP_PY_CODE_BUDGET);
	CHECK(ps.codes_evicted > 0); /* The flood did push it past the budget. */

	stackpulse_spool *sp;
	stackpulse_spool_open_opts oo;
	stackpulse_spool_open_opts_init(&oo);
	oo.flags = STACKPULSE_SPOOL_STRICT;
	REQUIRE_OK(stackpulse_spool_open(spool, &oo, &sp));
	CHECK(stackpulse_spool_meta(sp)->samples >= st.samples); /* finish drained more */
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	static int rounds[100000];
	int chains = 0, late = 0, bad = 0, late_reads = 0, max_round = 0, irc;
	while ((irc = stackpulse_sample_iter_next(it, &s)) == 1) {
		int round = -1, torn = 0, n = flood_chain(sp, s->stack, &round, &torn);
		bad += n < 0;
		late_reads += torn;
		if (n >= 20 && chains < 100000) {
			rounds[chains++] = round;
			if (round > max_round)
				max_round = round;
		}
	}
	CHECK_EQ(irc, 0);
	stackpulse_sample_iter_free(it);
	for (int i = 0; i < chains; i++)
		late += rounds[i] * 3 > max_round * 2; /* Well after the cache filled. */
	printf("code flood: %d samples with whole chains (%d in the last third of the rounds, "
	       "last round %d; %d read late), %d contradicting\n",
	       chains, late, max_round, late_reads, bad);
	CHECK(chains > 100);
	CHECK(late > 20);
	/* No name from an evicted or another code object. Under ASan the
	 * slower reader meets the data-stack race of docs/python.md in a few
	 * samples (3 of 2,149 seen): at most 1% there. */
	if (SP_TEST_ASAN)
		CHECK(bad * 100 <= chains);
	else
		CHECK_EQ(bad, 0);
	stackpulse_spool_close(sp);
}
