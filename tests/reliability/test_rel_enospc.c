/* The disk fills up: recording into a small tmpfs (in a private mount
 * namespace, so nothing leaks to the host). The recorder reports -ENOSPC
 * through its API without crashing, the target keeps running and is never
 * left stopped, and the spool reads back up to its last complete chunk. */
#include <sched.h>
#include <sys/mount.h>

#include "rel_util.h"
#include "rec_stats.h"

enum {
	M_SKIP = 1, /* a: errno of the namespace/mount step */
	M_SPAWN,    /* a: spawn rc, b: target pid */
	M_ERROR,    /* a: consume rc, b: chunks, c: samples, d: seconds to the error */
	M_AFTER,    /* a: target state, b: any thread stopped, c: alive */
	M_AGAIN,    /* a: second consume rc */
	M_FINISH,   /* a: finish rc, b: state after, c: any stopped, d: alive */
	M_READ,     /* a: open rc, b: truncated, c: chunks, d: samples */
	M_ITER,     /* a: iterator rc, b: samples iterated */
	M_CHILDREN, /* a: children of the recorder process left over */
};

/* Mounts a 256 KiB tmpfs at @p dir in a private mount namespace and fills
 * it so that only @p free_kb remain. Returns 0 or -errno. */
static int small_disk(const char *dir, long free_kb)
{
	if (unshare(CLONE_NEWNS) != 0)
		return -errno;
	if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0)
		return -errno;
	mkdir(dir, 0755);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=256k") != 0)
		return -errno;
	char filler[600];
	snprintf(filler, sizeof(filler), "%s/filler", dir);
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	static char block[4096];
	off_t size = 0;
	for (;;) {
		ssize_t n = write(fd, block, sizeof(block));
		if (n <= 0)
			break;
		size += n;
	}
	off_t keep = size - free_kb * 1024;
	if (ftruncate(fd, keep > 0 ? keep : 0) != 0) {
		close(fd);
		return -errno;
	}
	close(fd);
	return 0;
}

/* Children of this process still present (zombie or not). */
static int leftover_children(void)
{
	char path[96], buf[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	int count = 0;
	for (char *p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
		count++;
	return count;
}

static void disk_child(int fd, const char *target, const char *dir, long free_kb)
{
	int rc = small_disk(dir, free_kb);
	if (rc) {
		rel_send(fd, M_SKIP, rc, 0, 0, 0);
		_exit(0);
	}
	char spool[700];
	snprintf(spool, sizeof(spool), "%s/rec.spool", dir);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 1999;
	o.chunk_bytes = 4096;
	o.kernel = STACKPULSE_FEATURE_OFF;
	char *argv[] = { (char *)target, "2", "40", NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	rc = stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid);
	rel_send(fd, M_SPAWN, rc, pid, 0, 0);
	if (rc) {
		rel_sleep_ms(100);
		rel_send(fd, M_CHILDREN, leftover_children(), 0, 0, 0);
		_exit(0);
	}
	double t0 = rel_now();
	struct rec_stats st = { 0 };
	rc = 0;
	while (rel_now() - t0 < 25 && rc == 0) {
		stackpulse_recorder_wait(rec, 50);
		rc = stackpulse_recorder_consume_available(rec);
		if (rc == 0)
			rec_stats_get(rec, &st);
	}
	rel_send(fd, M_ERROR, rc, (int64_t)st.chunks, (int64_t)st.samples,
	         (int64_t)((rel_now() - t0) * 1000));
	rel_sleep_ms(200);
	rel_send(fd, M_AFTER, rel_proc_state(pid), rel_any_thread_stopped(pid), kill(pid, 0) == 0,
	         0);
	rel_send(fd, M_AGAIN, stackpulse_recorder_consume_available(rec), 0, 0, 0);
	rc = rec_finish(rec);
	rel_sleep_ms(200);
	rel_send(fd, M_FINISH, rc, rel_proc_state(pid), rel_any_thread_stopped(pid),
	         kill(pid, 0) == 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	struct stackpulse_spool_meta meta = { 0 };
	uint64_t n = 0;
	int irc = 0;
	rc = rel_read_back(spool, &meta, &n, &irc);
	rel_send(fd, M_READ, rc, meta.truncated, meta.chunks, (int64_t)meta.samples);
	rel_send(fd, M_ITER, irc, (int64_t)n, 0, 0);
	_exit(0);
}

/* Runs one disk-full scenario and collects its messages into @p m. */
static int run_scenario(long free_kb, rel_msg m[16])
{
	const char *target = rel_target("spin");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/small", sp_test_tmpdir());
	memset(m, 0, 16 * sizeof(rel_msg));
	int p[2];
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		close(p[0]);
		disk_child(p[1], target, dir, free_kb);
	}
	close(p[1]);
	rel_msg x;
	while (read(p[0], &x, sizeof(x)) == (ssize_t)sizeof(x))
		if (x.kind > 0 && x.kind < 16)
			m[x.kind] = x;
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	/* The recorder process itself must not have crashed. */
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (m[M_SKIP].kind)
		sp_test_skip("cannot make a private tmpfs (needs root / CAP_SYS_ADMIN)");
	return 0;
}

SP_TEST(disk_full_while_recording)
{
	rel_msg m[16];
	run_scenario(12, m);
	REQUIRE_EQ(m[M_SPAWN].a, 0);
	printf("disk full: consume = %lld (%s) after %lld ms, %lld chunks / %lld samples before; "
	       "finish = %lld; read back: open %lld, truncated %lld, %lld chunks, %lld samples\n",
	       (long long)m[M_ERROR].a, stackpulse_strerror((int)m[M_ERROR].a),
	       (long long)m[M_ERROR].d, (long long)m[M_ERROR].b, (long long)m[M_ERROR].c,
	       (long long)m[M_FINISH].a, (long long)m[M_READ].a, (long long)m[M_READ].b,
	       (long long)m[M_READ].c, (long long)m[M_READ].d);
	CHECK_EQ(m[M_ERROR].a, -ENOSPC);
	/* The target runs on, unstopped, after the error and after finish. */
	CHECK_EQ(m[M_AFTER].c, 1);
	CHECK(m[M_AFTER].a != 'T' && m[M_AFTER].a != 't' && m[M_AFTER].a != 0);
	CHECK_EQ(m[M_AFTER].b, 0);
	CHECK(m[M_AGAIN].a < 0); /* The error is sticky, not a crash. */
	CHECK(m[M_FINISH].a < 0);
	CHECK_EQ(m[M_FINISH].d, 1);
	CHECK(m[M_FINISH].b != 'T' && m[M_FINISH].b != 't' && m[M_FINISH].b != 0);
	CHECK_EQ(m[M_FINISH].c, 0);
	/* Everything before the last complete chunk reads back. */
	CHECK_EQ(m[M_READ].a, 0);
	CHECK_EQ(m[M_READ].b, 1);
	CHECK(m[M_READ].c >= m[M_ERROR].b);
	CHECK(m[M_READ].c >= 1);
	CHECK_EQ(m[M_ITER].a, 0);
	CHECK_EQ(m[M_ITER].b, m[M_READ].d);
	CHECK(m[M_READ].d > 0);
}

SP_TEST(disk_already_full_at_start)
{
	rel_msg m[16];
	run_scenario(0, m);
	printf("full disk at start: spawn = %lld (%s), children left %lld\n",
	       (long long)m[M_SPAWN].a, stackpulse_strerror((int)m[M_SPAWN].a),
	       (long long)m[M_CHILDREN].a);
	/* Either spawn refuses (-ENOSPC) and leaves no child behind, or the
	 * header fit in the last page and the first chunk fails later. */
	if (m[M_SPAWN].a != 0) {
		CHECK_EQ(m[M_SPAWN].a, -ENOSPC);
		CHECK_EQ(m[M_CHILDREN].a, 0);
	} else {
		CHECK_EQ(m[M_ERROR].a, -ENOSPC);
		CHECK_EQ(m[M_FINISH].d, 1);
		CHECK_EQ(m[M_READ].a, 0);
	}
}
