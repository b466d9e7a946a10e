/* Hostile targets against the recorder's per-process limits: a process
 * that maps code at 70,000 addresses is cut at SP_PTABLE_MAX_MAPS while
 * the recording of it and of another process goes on; a CPython process
 * that churns code objects keeps the code cache under its byte budget
 * while its samples keep their Python frames. */
#include <errno.h>

#include "rec_util.h"
#include "record/process_table.h"
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
	char *argv[] = { (char *)bin, "70000", "1.5", NULL };
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
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
	sp_process *p = sp_ptable_find(&rec->pt, pid);
	size_t kept = p ? p->nmaps : 0;
	CHECK_OK(stackpulse_recorder_finish(rec));
	int status;
	waitpid(pid, &status, 0);
	printf("70000 code mappings: run rc %d in %.1f s, %llu dropped, %zu kept, %llu lost, "
	       "%llu samples\n",
	       rc, took, (unsigned long long)st.mappings_dropped, kept,
	       (unsigned long long)st.lost, (unsigned long long)st.samples);
	CHECK_EQ(rc, 0); /* Not ELIMIT: the flood does not end the recording. */
	CHECK(took < 30);
	CHECK(p != NULL);
	CHECK(kept <= SP_PTABLE_MAX_MAPS);
	/* MMAP2 records may be lost in the flood (a loaded machine drains
	 * late), but far more than the limit arrive. */
	CHECK(st.mappings_dropped > 1000);
	CHECK(st.mappings_dropped <= 70000 - (SP_PTABLE_MAX_MAPS - 16));

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, &sp));
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
	CHECK(total > 100);
	CHECK(hits * 100 > total * 90);
	count_leaf(sp, pid, "flood_work", 0, &hits, &total);
	printf("flooding process %d: %d samples, %d in flood_work\n", (int)pid, total, hits);
	CHECK(hits > 50);
	stackpulse_spool_close(sp);
}
