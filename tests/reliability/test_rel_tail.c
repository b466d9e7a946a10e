/* The tail reader: reads a spool while a real recorder writes it and sees
 * samples before the recording ends; a SIGKILLed recorder ends the tail as
 * truncated; a torn or half-written chunk is waited for, never misread; a
 * long spool of the same code is tailed in flat memory. */
#include <malloc.h>
#include <sys/file.h>

#include "../format/spool_fixture.h"
#include "../profile/example_tools.h"
#include "common/alloc.h"
#include "rel_util.h"
#include "rec_stats.h"

enum {
	MSG_PID = 1
};

struct tally {
	uint64_t samples;
	uint64_t last_time;
	int out_of_order;
	uint32_t hot_stack; /* The stack sampled most often so far. */
	/* Sample counts of the first 64 stacks seen. The latest
	 * sample alone may fall in the loop's clock read or the exit path. */
	uint32_t ids[64];
	uint64_t counts[64];
	uint32_t nids;
};

static int count_sample(const struct stackpulse_sample *s, void *ctx)
{
	struct tally *t = ctx;
	if (s->time_ns < t->last_time)
		t->out_of_order++;
	t->last_time = s->time_ns;
	t->samples++;
	uint32_t k = 0;
	while (k < t->nids && t->ids[k] != s->stack)
		k++;
	if (k == t->nids && t->nids < 64) {
		t->ids[k] = s->stack;
		t->counts[k] = 0;
		t->nids++;
	}
	if (k < t->nids) {
		t->counts[k]++;
		uint32_t h = 0;
		while (h < t->nids && t->ids[h] != t->hot_stack)
			h++;
		if (h == t->nids || t->counts[k] > t->counts[h])
			t->hot_stack = s->stack;
	}
	return 0;
}

/* The recorder child: spawns `spin 1 SECS` and records it with small
 * chunks. Finishes normally unless killed. Never returns. */
static void recorder_child(int fd, const char *target, const char *spool, const char *secs)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 999;
	o.chunk_bytes = 2048;
	o.kernel = STACKPULSE_FEATURE_OFF;
	char *argv[] = { (char *)target, "1", (char *)secs, NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	if (stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid) != 0)
		_exit(2);
	rel_send(fd, MSG_PID, pid, 0, 0, 0);
	if (rel_run(rec, 60) != 0)
		_exit(3);
	_exit(rec_finish(rec) == 0 ? 0 : 4);
}

static pid_t start_recorder(const char *spool, const char *secs, int *msg_fd)
{
	const char *target = rel_target("spin");
	unlink(spool);
	int p[2];
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	pid_t rp = fork();
	REQUIRE(rp >= 0);
	if (rp == 0) {
		close(p[0]);
		recorder_child(p[1], target, spool, secs);
	}
	close(p[1]);
	*msg_fd = p[0];
	return rp;
}

/* The recorder gives the spool its name once recording has started. */
static stackpulse_spool_tail *open_tail(const char *spool)
{
	stackpulse_spool_tail *t = NULL;
	for (int i = 0; i < 500; i++) {
		int rc = stackpulse_spool_tail_open(spool, NULL, &t);
		if (rc == 0)
			return t;
		REQUIRE_EQ(rc, -ENOENT);
		rel_sleep_ms(10);
	}
	sp_test_fail(__FILE__, __LINE__, "%s never appeared", spool);
	sp_test_abort();
	return NULL;
}

static uint64_t samples_of(const char *path, int *truncated)
{
	stackpulse_spool *s = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	uint64_t n = stackpulse_spool_meta(s)->samples;
	if (truncated)
		*truncated = stackpulse_spool_meta(s)->truncated;
	stackpulse_spool_close(s);
	return n;
}

static int find_name(const stackpulse_frame *f, void *ctx)
{
	const char *n = stackpulse_frame_func_name(f);
	if (n && strcmp(n, (const char *)ctx) == 0)
		return 1;
	return 0;
}

SP_TEST(tail_sees_samples_while_a_recorder_writes)
{
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/live.spool", sp_test_tmpdir());
	int msg;
	pid_t rp = start_recorder(spool, "3", &msg);
	stackpulse_spool_tail *t = open_tail(spool);
	const stackpulse_spool *sp = stackpulse_spool_tail_spool(t);
	/* Made before any module is known: it must pick them up later. */
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_NO_CACHE;
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	struct tally tl = { 0 };
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	uint64_t seen_while_running = 0;
	int polls_growing = 0;
	double t0 = rel_now();
	while (st == STACKPULSE_TAIL_GROWING && rel_now() - t0 < 30) {
		REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
		if (st == STACKPULSE_TAIL_GROWING) {
			polls_growing++;
			int ws;
			if (waitpid(rp, &ws, WNOHANG) == 0 && tl.samples > seen_while_running)
				seen_while_running = tl.samples;
		}
		rel_sleep_ms(50);
	}
	int ws;
	REQUIRE(waitpid(rp, &ws, 0) == rp);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	close(msg);
	CHECK_EQ(st, STACKPULSE_TAIL_COMPLETE);
	/* About 3 s at 999 Hz; samples came while the recorder was at work. */
	CHECK(seen_while_running > 100);
	CHECK(polls_growing > 10);
	CHECK_EQ(tl.out_of_order, 0);
	int trunc = -1;
	CHECK_EQ(tl.samples, samples_of(spool, &trunc));
	CHECK_EQ(trunc, 0);
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->samples, tl.samples);
	CHECK_EQ(m->truncated, 0);
	CHECK(stackpulse_spool_module_count(sp) > 0);
	/* The symbolizer made at the start names the spinning function. */
	CHECK_EQ(stackpulse_symbolizer_for_each_stack_frame(sym, tl.hot_stack, find_name,
	                                                    (void *)"spin_leaf"),
	         1);
	/* Polling after the end reads nothing and says the same. */
	uint64_t before = tl.samples;
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_COMPLETE);
	CHECK_EQ(tl.samples, before);
	stackpulse_sample_iter *it = NULL;
	CHECK_EQ(stackpulse_sample_iter_new(sp, &it), -EINVAL);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_tail_close(t);
}

SP_TEST(killed_recorder_ends_the_tail_as_truncated)
{
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/killed-tail.spool", sp_test_tmpdir());
	int msg;
	pid_t rp = start_recorder(spool, "30", &msg);
	stackpulse_spool_tail *t = open_tail(spool);
	struct tally tl = { 0 };
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	double t0 = rel_now();
	while (tl.samples < 200 && rel_now() - t0 < 20) {
		REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
		REQUIRE_EQ(st, STACKPULSE_TAIL_GROWING);
		rel_sleep_ms(20);
	}
	REQUIRE(tl.samples >= 200);
	kill(rp, SIGKILL);
	int ws;
	REQUIRE(waitpid(rp, &ws, 0) == rp);
	CHECK(WIFSIGNALED(ws));
	rel_msg m;
	while (read(msg, &m, sizeof(m)) == (ssize_t)sizeof(m))
		if (m.kind == MSG_PID && m.a > 0) {
			kill((pid_t)m.a, SIGKILL);
			waitpid((pid_t)m.a, NULL, 0);
		}
	close(msg);
	/* The next poll sees the writer gone and ends. */
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_TRUNCATED);
	int trunc = 0;
	CHECK_EQ(tl.samples, samples_of(spool, &trunc));
	CHECK_EQ(trunc, 1);
	CHECK_EQ(stackpulse_spool_meta(stackpulse_spool_tail_spool(t))->truncated, 1);
	CHECK_EQ(stackpulse_spool_meta(stackpulse_spool_tail_spool(t))->damaged, 0);
	stackpulse_spool_tail_close(t);
}

/* A synthetic spool of @p nsamples, @p chunk_bytes per chunk, in memory. */
static memsink synth(uint64_t nsamples, uint32_t chunk_bytes)
{
	memsink ms = { 0 };
	sp_writer_opts wo = { 3, chunk_bytes };
	sp_writer *w = NULL;
	REQUIRE_OK(sp_writer_new(&wo, memsink_write, &ms, &w));
	REQUIRE_OK(write_steady(w, nsamples, 64, 4));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	return ms;
}

/* Offsets of the chunk headers of @p f. */
static uint32_t chunk_offsets(const memsink *f, size_t *offs, uint32_t max)
{
	uint32_t n = 0;
	size_t off = SP_FILE_HEADER_LEN;
	while (off + SP_CHUNK_HEADER_LEN <= f->len && sp_le32(f->data + off) == SP_CHUNK_MAGIC &&
	       n < max) {
		offs[n++] = off;
		off += SP_CHUNK_HEADER_LEN + sp_le32(f->data + off + 12);
	}
	return n;
}

/* A file written by hand, with the writer's lock held by us. */
static int writer_file(const char *path)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(flock(fd, LOCK_EX) == 0);
	return fd;
}

static void put(int fd, const memsink *f, size_t from, size_t to)
{
	REQUIRE(pwrite(fd, f->data + from, to - from, (off_t)from) == (ssize_t)(to - from));
}

static uint64_t samples_before(const memsink *f, size_t end)
{
	stackpulse_spool *s = NULL;
	REQUIRE_OK(sp_test_open_memory(f->data, end, &s));
	uint64_t n = stackpulse_spool_meta(s)->samples;
	stackpulse_spool_close(s);
	return n;
}

SP_TEST(torn_chunk_is_waited_for_never_misread)
{
	memsink f = synth(20000, 4096);
	size_t offs[4096];
	uint32_t nchunks = chunk_offsets(&f, offs, 4096);
	REQUIRE(nchunks > 8);
	char path[600];
	snprintf(path, sizeof(path), "%s/torn.spool", sp_test_tmpdir());
	int wfd = writer_file(path);
	stackpulse_spool_tail *t = NULL;
	REQUIRE_OK(stackpulse_spool_tail_open(path, NULL, &t));
	struct tally tl = { 0 };
	enum stackpulse_tail_state st;
	/* Empty file, then half a header. */
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	put(wfd, &f, 0, 7);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	CHECK_EQ(tl.samples, 0);
	/* Chunks 0..3, then half of chunk 4's header, then half its payload. */
	size_t c4 = offs[4], c5 = offs[5];
	put(wfd, &f, 7, c4 + 10);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	uint64_t upto4 = samples_before(&f, c4);
	CHECK_EQ(tl.samples, upto4);
	put(wfd, &f, c4 + 10, c4 + (c5 - c4) / 2);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(tl.samples, upto4);
	/* All of chunk 4's length is there but a payload byte is not yet
	 * right (a write in progress): not read, not damage. */
	put(wfd, &f, c4 + (c5 - c4) / 2, c5);
	uint8_t wrong = (uint8_t)(f.data[c5 - 3] ^ 0x5a);
	REQUIRE(pwrite(wfd, &wrong, 1, (off_t)(c5 - 3)) == 1);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	CHECK_EQ(tl.samples, upto4);
	/* The write completes: chunk 4 is read. */
	put(wfd, &f, c5 - 3, c5 - 2);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	CHECK_EQ(tl.samples, samples_before(&f, c5));
	/* The rest and the footer; the writer closes: complete, everything. */
	put(wfd, &f, c5, f.len);
	close(wfd);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_COMPLETE);
	CHECK_EQ(tl.samples, 20000);
	CHECK_EQ(tl.out_of_order, 0);
	stackpulse_spool_tail_close(t);

	/* A bad byte that stays bad over two polls is damage: the tail ends
	 * truncated and damaged, with the chunks before it. */
	wfd = writer_file(path);
	REQUIRE_OK(stackpulse_spool_tail_open(path, NULL, &t));
	memset(&tl, 0, sizeof(tl));
	put(wfd, &f, 0, c5);
	REQUIRE(pwrite(wfd, &wrong, 1, (off_t)(c5 - 3)) == 1);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_GROWING);
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_TRUNCATED);
	CHECK_EQ(tl.samples, upto4);
	const struct stackpulse_spool_meta *m =
	        stackpulse_spool_meta(stackpulse_spool_tail_spool(t));
	CHECK_EQ(m->damaged, 1);
	CHECK_EQ(m->damaged_chunk, 4);
	CHECK_EQ(m->damaged_offset, c4);
	CHECK_EQ(m->damaged_code, STACKPULSE_ECHECKSUM);
	stackpulse_spool_tail_close(t);
	close(wfd);

	/* A copy cut in the middle of a chunk, with no writer: read up to the
	 * cut, ends truncated, nothing misread. */
	wfd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	REQUIRE(wfd >= 0);
	put(wfd, &f, 0, c4 + (c5 - c4) / 2);
	close(wfd);
	REQUIRE_OK(stackpulse_spool_tail_open(path, NULL, &t));
	memset(&tl, 0, sizeof(tl));
	REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
	CHECK_EQ(st, STACKPULSE_TAIL_TRUNCATED);
	CHECK_EQ(tl.samples, upto4);
	CHECK_EQ(stackpulse_spool_meta(stackpulse_spool_tail_spool(t))->damaged, 0);
	stackpulse_spool_tail_close(t);
	memsink_free(&f);
}

SP_TEST(long_spool_is_tailed_in_flat_memory)
{
	/* Many chunks of the same 64 stacks, landing in slices that cut
	 * chunks anywhere. */
	memsink f = synth(1500000, 4096);
	char path[600];
	snprintf(path, sizeof(path), "%s/long.spool", sp_test_tmpdir());
	int wfd = writer_file(path);
	stackpulse_spool_tail *t = NULL;
	REQUIRE_OK(stackpulse_spool_tail_open(path, NULL, &t));
	struct tally tl = { 0 };
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	size_t slice = 10007, at = 0;
	size_t heap_early = 0, heap_late = 0;
	uint64_t allocs_late = 0, polls_late = 0;
	uint32_t frames_early = 0;
	int i = 0;
	while (at < f.len) {
		size_t to = at + slice < f.len ? at + slice : f.len;
		put(wfd, &f, at, to);
		at = to;
		if (at == f.len)
			close(wfd);
		sp_alloc_reset_count();
		REQUIRE_OK(stackpulse_spool_tail_poll(t, count_sample, &tl, &st));
		uint64_t allocs = sp_alloc_count();
		if (++i == 20) {
			heap_early = mallinfo2().uordblks;
			frames_early = stackpulse_spool_frame_count(stackpulse_spool_tail_spool(t));
		}
		if (i > 20) {
			allocs_late += allocs;
			polls_late++;
		}
	}
	heap_late = mallinfo2().uordblks;
	CHECK_EQ(st, STACKPULSE_TAIL_COMPLETE);
	CHECK_EQ(tl.samples, 1500000);
	const stackpulse_spool *sp = stackpulse_spool_tail_spool(t);
	CHECK_EQ(stackpulse_spool_meta(sp)->samples, 1500000);
	CHECK(stackpulse_spool_meta(sp)->chunks > 500);
	CHECK_EQ(stackpulse_spool_frame_count(sp), frames_early);
	/* Nothing per chunk or per sample is kept: the heap after hundreds
	 * more chunks is within 64 KiB of what it was after 20 slices, and
	 * the polls after warm-up allocate nothing (no table grows). */
	CHECK(heap_late < heap_early + 65536);
	CHECK(polls_late > 50);
	CHECK_EQ(allocs_late, 0);
	stackpulse_spool_tail_close(t);
	memsink_free(&f);
}

/* Sum of the sample weights of a finished spool. */
static uint64_t weight_of(const char *path)
{
	stackpulse_spool *s = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *smp;
	uint64_t w = 0;
	while (stackpulse_sample_iter_next(it, &smp) == 1)
		w += smp->weight;
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);
	return w;
}

/* Runs `record spin 1 3` in the background and `report SPOOL ARGS` on the
 * spool it writes; returns report's output. */
static char *follow_cli(const char *name, const char *args)
{
	char record[512], report[512], spool[600], out[700], cmd[4096];
	tools(record, report, sizeof(record));
	const char *spin = rel_target("spin");
	snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), name);
	snprintf(out, sizeof(out), "%s.out", spool);
	unlink(spool);
	snprintf(cmd, sizeof(cmd),
	         "%s -F 499 --kernel=off -o %s -- %s 1 3 >%s.log 2>&1 & "
	         "%s %s --follow %s >%s 2>&1; rc=$?; wait; exit $rc",
	         record, spool, spin, spool, report, spool, args, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	return text;
}

SP_TEST(report_follow_redraws_then_prints_the_final_table)
{
	char *text = follow_cli("follow-table", "");
	int live = 0;
	for (const char *p = text; (p = strstr(p, "(following;")); p++)
		live++;
	/* About 3 s of recording: live tables every second before the end. */
	CHECK(live >= 2);
	const char *first = strstr(text, "(following;");
	const char *final = strstr(text, "Hottest functions:");
	CHECK(first && final && first < final);
	CHECK(first && strstr(first, "spin_leaf") && strstr(first, "spin_leaf") < final);
	CHECK(final && strstr(final, "spin_leaf"));
	free(text);
}

SP_TEST(report_follow_folded_writes_one_window_per_second)
{
	char *text = follow_cli("follow-folded", "--folded");
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/follow-folded.spool", sp_test_tmpdir());
	int windows = 0, lines = 0, bad = 0;
	uint64_t sum = 0;
	for (char *p = text; *p;) {
		char *nl = strchr(p, '\n');
		REQUIRE(nl != NULL); /* Every line and window is ended. */
		*nl = 0;
		if (!*p) {
			windows += lines > 0;
			lines = 0;
		} else {
			const char *sp = strrchr(p, ' ');
			if (!sp || !strstr(p, ";main;"))
				bad++;
			else
				sum += strtoull(sp + 1, NULL, 10);
			lines++;
		}
		p = nl + 1;
	}
	free(text);
	CHECK_EQ(bad, 0);
	CHECK_EQ(lines, 0); /* The last window is ended too. */
	/* About 3 s: a window per second. */
	CHECK(windows >= 2);
	/* Every sample lands in exactly one window. */
	CHECK_EQ(sum, weight_of(spool));
}
