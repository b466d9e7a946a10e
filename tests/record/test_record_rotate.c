/* Rotation: a real recording cut into window spools (opts.rotate_ns). Every
 * sample lands in exactly one window, the one its time falls in; the
 * windows add up to the recording's own count; each window opens strictly
 * and symbolizes alone, after the binary is gone; only complete windows
 * appear. Also `record --rotate` end to end. */
#include <dirent.h>
#include <errno.h>

#include "format/spool_format.h"
#include "format/spool_reader.h"
#include "rec_util.h"
#include "rec_stats.h"

#define MAX_WINDOWS 64

typedef struct window_log {
	int n;
	struct {
		char path[600];
		uint32_t index;
		int last;
		uint64_t start_ns, end_ns, samples, lost, bytes, total_samples;
		int existed; /* The file was there, complete, when reported. */
	} w[MAX_WINDOWS];
} window_log;

static void on_window(void *ctx, const struct stackpulse_window *win)
{
	window_log *log = ctx;
	if (log->n >= MAX_WINDOWS)
		return;
	int i = log->n++;
	snprintf(log->w[i].path, sizeof(log->w[i].path), "%s", win->path);
	log->w[i].index = win->index;
	log->w[i].last = win->last;
	log->w[i].start_ns = win->start_ns;
	log->w[i].end_ns = win->end_ns;
	log->w[i].samples = win->samples;
	log->w[i].lost = win->lost;
	log->w[i].bytes = win->bytes;
	log->w[i].total_samples = win->total_samples;
	struct stat st;
	log->w[i].existed = stat(win->path, &st) == 0 && (uint64_t)st.st_size == win->bytes;
}

typedef struct stamp {
	uint64_t time;
	pid_t tid;
} stamp;

static int cmp_stamp(const void *a, const void *b)
{
	const stamp *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

static int first_user_name(const stackpulse_frame *f, void *ctx)
{
	const char **name = ctx;
	if (stackpulse_frame_kind(f) == STACKPULSE_FRAME_KERNEL)
		return 0;
	*name = stackpulse_frame_func_name(f);
	return 1; /* Stop at the first user frame. */
}

/* Opens window @p path strictly, checks its samples against the reported
 * window, appends their stamps; with @p sym_check, symbolizes it offline
 * and counts samples whose first user frame is a ladder function. */
static void check_window(const char *path, uint64_t start_ns, uint64_t end_ns, uint64_t samples,
                         uint64_t lost, stamp *stamps, size_t *nstamps, size_t cap, int *named,
                         int *user, uint64_t *truncated)
{
	stackpulse_spool_open_opts oo = STACKPULSE_SPOOL_OPEN_OPTS;
	oo.flags = STACKPULSE_SPOOL_STRICT;
	stackpulse_spool *sp = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, &oo, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->truncated, 0);
	CHECK_EQ(m->samples, samples);
	CHECK_EQ(m->start_clock_ns, start_ns); /* META starts the window. */
	/* The window's own losses and counters. */
	CHECK_EQ(m->lost, lost);
	uint64_t v = UINT64_MAX;
	CHECK_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_LOST, &v));
	CHECK_EQ(v, lost);
	CHECK_OK(stackpulse_spool_stat(sp, STACKPULSE_STAT_TRUNCATED_STACKS, &v));
	CHECK(v <= samples);
	*truncated += v;
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	so.flags = STACKPULSE_SYM_OFFLINE;
	so.cache_dir = "";
	stackpulse_symbolizer *sym = NULL;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &so, &sym));
	stackpulse_sample_iter *it = NULL;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	uint64_t n = 0, outside = 0, first_out = 0;
	while (stackpulse_sample_iter_next(it, &s) == 1) {
		n++;
		if ((s->time_ns < start_ns || s->time_ns >= end_ns) && !outside++)
			first_out = s->time_ns;
		if (*nstamps < cap)
			stamps[(*nstamps)++] = (stamp){ s->time_ns, s->tid };
		const char *name = NULL;
		/* 1: stopped at the first user frame. */
		REQUIRE(stackpulse_symbolizer_for_each_frame(sym, s, first_user_name, &name) >= 0);
		if (!name)
			continue;
		(*user)++;
		if (strcmp(name, "leaf") == 0 || strcmp(name, "middle") == 0 ||
		    strcmp(name, "entry") == 0 || strcmp(name, "main") == 0)
			(*named)++;
	}
	CHECK_EQ(n, samples);
	if (outside)
		sp_test_fail(__FILE__, __LINE__,
		             "%s: %llu of %llu samples outside [%llu, %llu) (the first at %llu)",
		             path, (unsigned long long)outside, (unsigned long long)n,
		             (unsigned long long)start_ns, (unsigned long long)end_ns,
		             (unsigned long long)first_out);
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
}

/* The names in @p dir: only the windows, none under a temporary name, and
 * nothing at the base path itself. */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	REQUIRE(d != NULL);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || strcmp(e->d_name, "..") == 0))
			continue;
		if (strncmp(e->d_name, "w.spool.", 8) != 0 || strlen(e->d_name) != 12)
			sp_test_fail(__FILE__, __LINE__, "unexpected file %s in %s", e->d_name,
			             dir);
		n++;
	}
	closedir(d);
	return n;
}

SP_TEST(rotation_puts_every_sample_in_exactly_one_window)
{
	/* A copy of its own: it is deleted below. */
	char bin[600], cmd[1400];
	snprintf(bin, sizeof(bin), "%s/rot_ladder", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", rec_target("ladder", "-g"), bin);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char dir[512], base[600];
	snprintf(dir, sizeof(dir), "%s/rot", sp_test_tmpdir());
	mkdir(dir, 0700);
	snprintf(base, sizeof(base), "%s/w.spool", dir);
	static window_log log;
	memset(&log, 0, sizeof(log));
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.cache_dir = "";
	o.rotate_ns = 400000000ull;
	o.on_window = on_window;
	o.window_ctx = &log;
	char *argv[] = { bin, "2.5", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, base, &o, &rec, &pid));
	struct stat st;
	CHECK(stat(base, &st) != 0); /* Windows only. */
	CHECK_OK(rec_run(rec, 60));
	struct rec_stats rs = { 0 };
	REQUIRE_OK(rec_stats_get(rec, &rs));
	int closed_before_finish = log.n;
	REQUIRE_OK(rec_finish(rec));
	int status = 0;
	waitpid(pid, &status, 0);

	/* 2.5 s in 0.4 s windows: 6 or 7 windows, the last from finish. */
	fprintf(stderr, "    %d windows (%d before finish), %llu samples\n", log.n,
	        closed_before_finish, (unsigned long long)rs.samples);
	REQUIRE(log.n >= 5 && log.n < MAX_WINDOWS);
	/* Windows close while recording, not all at finish: 5-6 of them;
	 * under valgrind the recorder lags (3 seen), so 1 proves it there. */
	CHECK(closed_before_finish >= (sp_test_under_valgrind() ? 1 : 4));
	CHECK_EQ(dir_entries(dir), log.n);

	/* Gone: each window must symbolize from its own embedded tables. */
	REQUIRE(unlink(bin) == 0);
	static stamp stamps[200000];
	size_t nstamps = 0;
	uint64_t sum = 0;
	int named = 0, user = 0;
	uint64_t truncated = 0;
	for (int i = 0; i < log.n; i++) {
		char want[700];
		snprintf(want, sizeof(want), "%s.%04d", base, i + 1);
		CHECK_STR(log.w[i].path, want);
		CHECK_EQ(log.w[i].index, (uint32_t)(i + 1));
		CHECK_EQ(log.w[i].last, i == log.n - 1);
		CHECK(log.w[i].existed);
		CHECK(log.w[i].end_ns > log.w[i].start_ns);
		/* Windows follow each other on the grid of the first; a stall of
		 * the caller longer than a window (a loaded machine) skips the
		 * empty stretch instead of writing empty files. */
		if (i > 0) {
			CHECK(log.w[i].start_ns >= log.w[i - 1].end_ns);
			CHECK_EQ((log.w[i].start_ns - log.w[0].start_ns) % o.rotate_ns, 0);
		}
		if (!log.w[i].last)
			CHECK_EQ(log.w[i].end_ns - log.w[i].start_ns, o.rotate_ns);
		check_window(log.w[i].path, log.w[i].start_ns, log.w[i].end_ns, log.w[i].samples,
		             log.w[i].lost, stamps, &nstamps, sizeof(stamps) / sizeof(stamps[0]),
		             &named, &user, &truncated);
		sum += log.w[i].samples;
		CHECK_EQ(log.w[i].total_samples, sum);
	}
	/* The windows add up to the recording: nothing lost at a boundary, and
	 * the count of the recorder before finish is a lower bound. */
	CHECK(sum >= rs.samples);
	CHECK(truncated >= rs.truncated_stacks); /* Per window, adding up. */
	CHECK_EQ(sum, log.w[log.n - 1].total_samples);
	/* Enough to cross every boundary many times (an ASan build samples
	 * less of a loaded machine). */
	CHECK(sum >= (SP_TEST_ASAN ? 40 : 150));
	/* Nothing twice: no (time, thread) in two windows or twice in one. */
	REQUIRE_EQ(nstamps, (size_t)sum);
	qsort(stamps, nstamps, sizeof(stamps[0]), cmp_stamp);
	size_t dup = 0;
	for (size_t i = 1; i < nstamps; i++)
		dup += stamps[i].time == stamps[i - 1].time && stamps[i].tid == stamps[i - 1].tid;
	CHECK_EQ(dup, (size_t)0);
	fprintf(stderr, "    %d of %d user stacks named offline from each window alone\n", named,
	        user);
	CHECK(user >= (SP_TEST_ASAN ? 40 : 150));
	CHECK(named * 100 >= user * 95);
}

SP_TEST(rotation_rejects_a_window_below_100_ms)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.rotate_ns = 99999999ull;
	char *argv[] = { "true", NULL };
	stackpulse_recorder *rec = NULL;
	char base[600];
	snprintf(base, sizeof(base), "%s/short.spool", sp_test_tmpdir());
	CHECK_EQ(stackpulse_recorder_spawn(argv, base, &o, &rec, NULL), -EINVAL);
	CHECK(strstr(stackpulse_last_error(), "100 ms") != NULL);
	CHECK(rec == NULL);
}

/* `record --rotate` end to end: windows FILE.0001.., each read alone by
 * report, whose totals add up to what record's summary says. */
SP_TEST(record_example_rotates)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	const char *bin = rec_target("ladder", "-g");
	char dir[512], cmd[4096], path[700];
	snprintf(dir, sizeof(dir), "%s/rot_cli", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(cmd, sizeof(cmd),
	         "%s/record -F 499 --rotate 0.5 -o %s/w.spool -- %s 2 >%s.out 2>&1", bindir, dir,
	         bin, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(path, sizeof(path), "%s.out", dir);
	char *out = sp_test_read_file(path, NULL);
	REQUIRE(out != NULL);
	const char *sum = strstr(out, "record: ");
	REQUIRE(sum != NULL);
	unsigned long long recorded = strtoull(sum + 8, NULL, 10);
	unsigned windows = 0;
	const char *arrow = strstr(sum, "-> ");
	REQUIRE(arrow != NULL);
	windows = (unsigned)strtoul(arrow + 3, NULL, 10);
	fprintf(stderr, "    %s", out);
	free(out);
	REQUIRE(windows >= 3);
	CHECK_EQ(dir_entries(dir), (int)windows);
	unsigned long long total = 0;
	for (unsigned i = 1; i <= windows; i++) {
		/* Folded output: one "stack count" line per stack. */
		snprintf(cmd, sizeof(cmd), "%s/report %s/w.spool.%04u --folded >%s.%u.folded",
		         bindir, dir, i, dir, i);
		int rc = sp_test_run(cmd);
		snprintf(path, sizeof(path), "%s.%u.folded", dir, i);
		char *folded = sp_test_read_file(path, NULL);
		REQUIRE(folded != NULL);
		if (rc != 0 && folded[0] == '\0') {
			free(folded);
			continue; /* A window with no samples: report says so, exit 1. */
		}
		CHECK_EQ(rc, 0);
		CHECK(strstr(folded, "leaf") != NULL);
		for (char *l = strtok(folded, "\n"); l; l = strtok(NULL, "\n")) {
			char *sp = strrchr(l, ' ');
			if (sp)
				total += strtoull(sp + 1, NULL, 10);
		}
		free(folded);
	}
	CHECK_EQ(total, recorded);
	CHECK(total >= 100);
}

/* A recorder killed mid-window: the finished windows are complete, and
 * the window under way is left under its temporary name as a cut spool
 * that opens (its definitions went out when it started). */
SP_TEST(killed_rotation_leaves_complete_windows_and_a_cut_one)
{
	const char *bindir = getenv("SP_BIN_DIR");
	if (!bindir || !*bindir)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	const char *bin = rec_target("ladder", "-g");
	char dir[512], cmd[4096];
	snprintf(dir, sizeof(dir), "%s/rot_kill", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	/* The target outlives the recorder and ends on its own. The kill
	 * comes once two windows are done and the third is under way, under
	 * its temporary name .w.spool.0003.XXXXXXXX (a loaded machine may
	 * take longer than a fixed sleep to get there; at most 60 s). */
	snprintf(cmd, sizeof(cmd),
	         "%s/record -F 499 --rotate 0.3 -o %s/w.spool -- %s 3 >/dev/null 2>&1 & "
	         "rp=$!; i=0; while [ $i -lt 1200 ] && ! { [ -e %s/w.spool.0002 ] && "
	         "ls -a %s | grep -q '^\\.w\\.spool\\.0003\\.'; }; do sleep 0.05; "
	         "i=$((i+1)); done; { kill -9 $rp; wait $rp; } 2>/dev/null; true",
	         bindir, dir, bin, dir, dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	DIR *d = opendir(dir);
	REQUIRE(d != NULL);
	int complete = 0, cut = 0;
	uint32_t last = 0, cut_index = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char path[1100];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		stackpulse_spool_open_opts oo = STACKPULSE_SPOOL_OPEN_OPTS;
		stackpulse_spool *sp = NULL;
		if (strncmp(e->d_name, "w.spool.", 8) == 0) {
			complete++;
			uint32_t idx = (uint32_t)strtoul(e->d_name + 8, NULL, 10);
			last = idx > last ? idx : last;
			oo.flags = STACKPULSE_SPOOL_STRICT;
			CHECK_OK(stackpulse_spool_open(path, &oo, &sp));
			if (sp)
				CHECK_EQ(stackpulse_spool_meta(sp)->truncated, 0);
		} else if (strncmp(e->d_name, ".w.spool.", 9) == 0) {
			cut++;
			cut_index = (uint32_t)strtoul(e->d_name + 9, NULL, 10);
			CHECK_OK(stackpulse_spool_open(path, &oo, &sp));
			if (sp) {
				CHECK_EQ(stackpulse_spool_meta(sp)->truncated, 1);
				CHECK(stackpulse_spool_thread_count(sp) >= 1);
				CHECK(stackpulse_spool_frame_count(sp) >= 1);
			}
		}
		stackpulse_spool_close(sp);
	}
	closedir(d);
	fprintf(stderr, "    %d complete windows, %d cut (window %u)\n", complete, cut, cut_index);
	CHECK(complete >= 2);
	CHECK_EQ((uint32_t)complete, last);
	CHECK_EQ(cut, 1);
	CHECK_EQ(cut_index, last + 1);
}
