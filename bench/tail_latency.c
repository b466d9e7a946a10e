/* Tail reader bench.
 *
 *   tail_latency live SECONDS CHUNK_BYTES WORKLOAD [ARGS...]
 *       records WORKLOAD with the recorder API (999 Hz, kernel frames off)
 *       in a child process and tails the spool from this one, polling every
 *       10 ms; prints samples=N p50_ms=X p99_ms=Y max_ms=Z: the time from a
 *       sample (its perf timestamp, CLOCK_MONOTONIC) to its delivery by
 *       stackpulse_spool_tail_poll.
 *   tail_latency memory MINUTES
 *       writes a synthetic recording of MINUTES minutes (8 threads at 999 Hz,
 *       4,000 frames, ~20,000 stacks) from a child process holding the
 *       writer's lock, as a recorder does, and tails it from
 *       this one every 10 ms; prints the heap in use (mallinfo2, mmapped
 *       blocks included) and the peak RSS after 10% and after 100% of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format/spool_writer.h"
#include "stackpulse.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct lat {
	double *ms;
	size_t n, cap;
};

static int on_sample(const struct stackpulse_sample *s, void *ctx)
{
	struct lat *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->ms = realloc(l->ms, l->cap * sizeof(*l->ms));
		if (!l->ms)
			return -ENOMEM;
	}
	l->ms[l->n++] = (double)(mono_ns() - s->time_ns) / 1e6;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int live(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	double secs = atof(argv[2]);
	uint32_t chunk = (uint32_t)atol(argv[3]);
	char path[] = "/tmp/tail_latency.XXXXXX";
	int tfd = mkstemp(path);
	close(tfd);
	unlink(path);
	pid_t rp = fork();
	if (rp == 0) {
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.frequency = 999;
		o.chunk_bytes = chunk;
		o.kernel = STACKPULSE_FEATURE_OFF;
		stackpulse_recorder *rec = NULL;
		pid_t pid;
		if (stackpulse_recorder_spawn(argv + 4, path, &o, &rec, &pid))
			_exit(2);
		uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);
		while (mono_ns() < end && stackpulse_recorder_process_is_active(rec, 0)) {
			stackpulse_recorder_wait(rec, 50);
			if (stackpulse_recorder_consume_available(rec))
				_exit(3);
		}
		kill(pid, SIGKILL);
		_exit(stackpulse_recorder_finish(rec) ? 4 : 0);
	}
	stackpulse_spool_tail *t = NULL;
	int rc;
	while ((rc = stackpulse_spool_tail_open(path, NULL, &t)) == -ENOENT)
		usleep(10000);
	if (rc) {
		fprintf(stderr, "tail open: %s\n", stackpulse_last_error());
		return 1;
	}
	struct lat l = { 0 };
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	while (!(rc = stackpulse_spool_tail_poll(t, on_sample, &l, &st)) &&
	       st == STACKPULSE_TAIL_GROWING)
		usleep(10000);
	waitpid(rp, NULL, 0);
	stackpulse_spool_tail_close(t);
	unlink(path);
	if (rc || !l.n) {
		fprintf(stderr, "tail: rc %d, %zu samples: %s\n", rc, l.n, stackpulse_last_error());
		return 1;
	}
	qsort(l.ms, l.n, sizeof(*l.ms), cmp_d);
	printf("samples=%zu chunk_bytes=%u p50_ms=%.1f p99_ms=%.1f max_ms=%.1f end=%s\n", l.n,
	       chunk, l.ms[l.n / 2], l.ms[l.n * 99 / 100], l.ms[l.n - 1],
	       st == STACKPULSE_TAIL_COMPLETE ? "complete" : "truncated");
	free(l.ms);
	return 0;
}

/* ------------------------------------------------------------------ */

#define NTHREADS 8u
#define NFRAMES  4000u
#define NSTACKS  20000u

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct filesink {
	int fd;
};

static int sink_write(void *ctx, const void *data, size_t len)
{
	struct filesink *f = ctx;
	return write(f->fd, data, len) == (ssize_t)len ? 0 : -EIO;
}

static long rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* Heap in use, mmapped blocks (large tables) included. */
static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

static int count(const struct stackpulse_sample *s, void *ctx)
{
	(void)s;
	++*(uint64_t *)ctx;
	return 0;
}

/* The writer: a child process holding the spool's lock, as a recorder does. */
static void write_synthetic(int fd, uint64_t total)
{
	struct filesink fs = { fd };
	sp_writer_opts wo = { 3, 0 };
	sp_writer *w = NULL;
	if (sp_writer_new(&wo, sink_write, &fs, &w))
		_exit(1);
	uint32_t proc, thr[NTHREADS], mods[3], *frames = malloc(NFRAMES * sizeof(*frames));
	uint32_t *stacks = malloc(NSTACKS * sizeof(*stacks));
	sp_writer_process(w, 1000, UINT32_MAX, 0, "synth", "synth", &proc);
	for (uint32_t i = 0; i < NTHREADS; i++)
		sp_writer_thread(w, proc, (pid_t)(1000 + i), 0, "synth", &thr[i]);
	static const uint8_t bid[20] = { 1 };
	for (uint32_t i = 0; i < 3; i++)
		sp_writer_module(w,
		                 i == 0   ? "/usr/bin/a"
		                 : i == 1 ? "/usr/lib/b.so"
		                          : "/usr/lib/c.so",
		                 bid, 20, &mods[i]);
	for (uint32_t i = 0; i < NFRAMES; i++) {
		struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, mods[i % 3],
			                          0x1000 + (uint64_t)i * 0x40, UINT32_MAX, 0 };
		sp_writer_frame(w, &f, &frames[i]);
	}
	for (uint32_t i = 0; i < NSTACKS; i++) {
		uint32_t depth = 6 + (uint32_t)(next_rand() % 35), fr[40];
		for (uint32_t d = 0; d < depth; d++)
			fr[d] = frames[next_rand() % NFRAMES];
		sp_writer_stack_frames(w, fr, depth, &stacks[i]);
	}
	uint64_t t0 = 1000000000ull;
	for (uint64_t n = 0; n < total; n++) {
		uint64_t r = next_rand();
		uint32_t s = (r & 3) ? (uint32_t)((r >> 2) % 64) : (uint32_t)((r >> 2) % NSTACKS);
		if (sp_writer_sample(w, t0 + n * (1001001ull / NTHREADS), thr[n % NTHREADS],
		                     stacks[s], 1, 0))
			_exit(1);
	}
	_exit(sp_writer_finish(w) ? 1 : 0);
}

static int memory(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	double minutes = atof(argv[2]);
	uint64_t total = (uint64_t)(minutes * 60 * 999 * NTHREADS);
	char path[] = "/tmp/tail_memory.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || flock(fd, LOCK_EX))
		return 1;
	pid_t wp = fork();
	if (wp == 0)
		write_synthetic(fd, total);
	close(fd); /* The child's descriptor keeps the lock. */
	stackpulse_spool_tail *t = NULL;
	if (stackpulse_spool_tail_open(path, NULL, &t))
		return 1;
	enum stackpulse_tail_state st = STACKPULSE_TAIL_GROWING;
	uint64_t seen = 0;
	size_t heap10 = 0;
	long rss10 = 0;
	int polls = 0;
	while (st == STACKPULSE_TAIL_GROWING) {
		if (stackpulse_spool_tail_poll(t, count, &seen, &st))
			return 1;
		polls++;
		if (!heap10 && seen >= total / 10) {
			heap10 = heap_bytes();
			rss10 = rss_kb();
		}
		usleep(10000);
	}
	waitpid(wp, NULL, 0);
	const struct stackpulse_spool_meta *m =
	        stackpulse_spool_meta(stackpulse_spool_tail_spool(t));
	struct stat sb;
	stat(path, &sb);
	printf("minutes=%.0f samples=%" PRIu64 " delivered=%" PRIu64 " spool_bytes=%lld chunks=%u "
	       "polls=%d heap10_kib=%zu heap100_kib=%zu rss10_kib=%ld rss100_kib=%ld end=%s\n",
	       minutes, m->samples, seen, (long long)sb.st_size, m->chunks, polls, heap10 / 1024,
	       heap_bytes() / 1024, rss10, rss_kb(),
	       st == STACKPULSE_TAIL_COMPLETE ? "complete" : "other");
	stackpulse_spool_tail_close(t);
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "live") == 0)
		return live(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "memory") == 0)
		return memory(argc, argv);
	fprintf(stderr, "usage: tail_latency live SECONDS CHUNK_BYTES CMD... | memory MINUTES\n");
	return 2;
}
