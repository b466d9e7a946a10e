/* The file layer: spools written through sp_file_sink and read back with
 * stackpulse_spool_open, refusal of non-regular files, write errors, files
 * that change under an open spool, and a writer killed mid-recording. */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "io/file.h"
#include "../format/spool_fixture.h"
#include "format/spool_reader.h"

static const char *tmp_path(const char *name)
{
	static char buf[8][512];
	static int next;
	char *p = buf[next++ % 8];
	snprintf(p, 512, "%s/%s", sp_test_tmpdir(), name);
	return p;
}

static void write_rich_file(const char *path, uint32_t chunk_bytes)
{
	sp_file_sink sink;
	REQUIRE_OK(sp_file_sink_open(&sink, path, SP_FILE_MODE_PRIVATE));
	REQUIRE_OK(sp_file_sink_commit(&sink));
	sp_writer *w;
	sp_writer_opts opts = { 1, chunk_bytes };
	REQUIRE_OK(sp_writer_new(&opts, sp_file_sink_write, &sink, &w));
	rich_ids ids;
	REQUIRE_OK(write_rich(w, &ids, 1));
	sp_writer_counts c;
	sp_writer_get_counts(w, &c);
	CHECK_EQ(c.bytes, sink.written);
	sp_writer_free(w);
	REQUIRE_OK(sp_file_sink_sync(&sink));
	REQUIRE_OK(sp_file_sink_close(&sink));
}

static uint64_t count_samples(stackpulse_spool *s, int *rc_out)
{
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *x;
	uint64_t n = 0;
	int rc;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1)
		n++;
	stackpulse_sample_iter_free(it);
	*rc_out = rc;
	return n;
}

SP_TEST(file_round_trip)
{
	const char *path = tmp_path("rich.spool");
	write_rich_file(path, 0);
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->samples, 5);
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 0);
	CHECK_STR(stackpulse_spool_process(s, 1)->name, "python3");
	int rc;
	CHECK_EQ(count_samples(s, &rc), 5);
	CHECK_EQ(rc, 0);
	stackpulse_spool_close(s);
	/* Through a symlink: reading follows links. */
	const char *link = tmp_path("link.spool");
	REQUIRE(symlink(path, link) == 0);
	REQUIRE_OK(stackpulse_spool_open(link, NULL, &s));
	stackpulse_spool_close(s);
	/* The same bytes, read whole, open from memory. */
	static uint8_t data[1 << 16];
	FILE *f = fopen(path, "rb");
	REQUIRE(f != NULL);
	size_t len = fread(data, 1, sizeof(data), f);
	fclose(f);
	REQUIRE(len > 0 && len < sizeof(data));
	REQUIRE_OK(sp_spool_open_memory(data, len, 0, &s));
	CHECK_EQ(count_samples(s, &rc), 5);
	stackpulse_spool_close(s);
}

SP_TEST(open_refuses_what_is_not_a_regular_file)
{
	stackpulse_spool *s = (stackpulse_spool *)1;
	CHECK_EQ(stackpulse_spool_open(tmp_path("missing"), NULL, &s), -ENOENT);
	CHECK(s == NULL);
	CHECK(strstr(stackpulse_last_error(), "missing") != NULL);
	CHECK_EQ(stackpulse_spool_open(sp_test_tmpdir(), NULL, &s), -EISDIR);
	CHECK_EQ(stackpulse_spool_open("/dev/null", NULL, &s), -EINVAL);
	CHECK_EQ(stackpulse_spool_open("", NULL, &s), -EINVAL);
	/* A FIFO with no writer would block a plain open(); we must not. */
	const char *fifo = tmp_path("fifo");
	REQUIRE(mkfifo(fifo, 0600) == 0);
	CHECK_EQ(stackpulse_spool_open(fifo, NULL, &s), -EINVAL);
	/* An empty file is a clean error. */
	const char *empty = tmp_path("empty");
	int fd = open(empty, O_CREAT | O_WRONLY, 0600);
	REQUIRE(fd >= 0);
	close(fd);
	CHECK_EQ(stackpulse_spool_open(empty, NULL, &s), STACKPULSE_ETRUNCATED);
}

static void write_bytes(const char *path, const char *text)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static off_t size_of(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? st.st_size : -1;
}

/* Entries of the test directory whose name starts with @p prefix. */
static int count_entries(const char *prefix)
{
	DIR *d = opendir(sp_test_tmpdir());
	REQUIRE(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* A symlink or hard link planted at the output path is replaced by the
 * rename; the file it led to is never opened, truncated or written. */
SP_TEST(sink_replaces_links_never_writes_through)
{
	const char *target = tmp_path("target");
	write_bytes(target, "keep");
	const char *slink = tmp_path("sink-link");
	REQUIRE(symlink(target, slink) == 0);
	sp_file_sink sink;
	REQUIRE_OK(sp_file_sink_open(&sink, slink, SP_FILE_MODE_PRIVATE));
	REQUIRE_OK(sp_file_sink_write(&sink, "new!!", 5));
	CHECK_EQ(size_of(target), 4); /* Nothing reached the link's target. */
	REQUIRE_OK(sp_file_sink_commit(&sink));
	REQUIRE_OK(sp_file_sink_close(&sink));
	struct stat st;
	REQUIRE(lstat(slink, &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_size, 5);
	CHECK_EQ(st.st_mode & 07777, 0600u); /* Spools hold kernel addresses. */
	CHECK_EQ(size_of(target), 4);

	const char *hard = tmp_path("sink-hard");
	REQUIRE(link(target, hard) == 0);
	REQUIRE_OK(sp_file_sink_open(&sink, hard, SP_FILE_MODE_PRIVATE));
	REQUIRE_OK(sp_file_sink_write(&sink, "xy", 2));
	REQUIRE_OK(sp_file_sink_commit(&sink));
	REQUIRE_OK(sp_file_sink_close(&sink));
	CHECK_EQ(size_of(hard), 2);
	REQUIRE(lstat(target, &st) == 0);
	CHECK_EQ(st.st_size, 4);
	CHECK_EQ(st.st_nlink, 1u); /* The hard link was replaced, not written. */
	CHECK_EQ(count_entries(".sink-"), 0);
}

SP_TEST(sink_refuses_special_files_and_discards_uncommitted)
{
	sp_file_sink sink;
	const char *fifo = tmp_path("sink-fifo");
	REQUIRE(mkfifo(fifo, 0600) == 0);
	CHECK_EQ(sp_file_sink_open(&sink, fifo, SP_FILE_MODE_PRIVATE), -EINVAL);
	CHECK_EQ(sp_file_sink_open(&sink, sp_test_tmpdir(), SP_FILE_MODE_PRIVATE), -EISDIR);
	char dir_slash[600];
	snprintf(dir_slash, sizeof(dir_slash), "%s/", sp_test_tmpdir());
	CHECK_EQ(sp_file_sink_open(&sink, dir_slash, SP_FILE_MODE_PRIVATE), -EISDIR);
	CHECK_EQ(sp_file_sink_open(&sink, "/no/such/dir/x.spool", SP_FILE_MODE_PRIVATE), -ENOENT);
	/* Closed before the commit: an existing file stays as it was, a new
	 * one is never created, and no temporary file is left. */
	const char *old = tmp_path("sink-old");
	write_bytes(old, "old bytes");
	REQUIRE_OK(sp_file_sink_open(&sink, old, SP_FILE_MODE_PRIVATE));
	REQUIRE_OK(sp_file_sink_write(&sink, "partial", 7));
	REQUIRE_OK(sp_file_sink_close(&sink));
	CHECK_EQ(size_of(old), 9);
	const char *fresh = tmp_path("sink-fresh");
	REQUIRE_OK(sp_file_sink_open(&sink, fresh, SP_FILE_MODE_PRIVATE));
	REQUIRE_OK(sp_file_sink_close(&sink));
	CHECK_EQ(size_of(fresh), -1);
	CHECK_EQ(count_entries(".sink-"), 0);
	CHECK_EQ(sp_file_sink_write(&sink, "x", 1), -EBADF);
}

/* A full disk, simulated with RLIMIT_FSIZE in a child: the writer reports
 * the error and the file keeps every chunk completed before it. */
SP_TEST(write_errors_are_reported)
{
	const char *path = tmp_path("full.spool");
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = { 3000, 3000 };
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(10);
		sp_file_sink sink;
		if (sp_file_sink_open(&sink, path, SP_FILE_MODE_PRIVATE) != 0 ||
		    sp_file_sink_commit(&sink) != 0)
			_exit(11);
		sp_writer *w;
		sp_writer_opts opts = { 1, 512 };
		if (sp_writer_new(&opts, sp_file_sink_write, &sink, &w) != 0)
			_exit(12);
		int rc = write_steady(w, 5000, 30, 2);
		if (rc == 0)
			rc = sp_writer_finish(w);
		int again = sp_writer_sample(w, 1, 0, 0, 1, 0);
		sp_writer_free(w);
		int crc = sp_file_sink_close(&sink);
		_exit(rc == -EFBIG && again == STACKPULSE_ESTATE && crc == -EFBIG ? 0 : 13);
	}
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	REQUIRE(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	CHECK_EQ(stackpulse_spool_meta(s)->truncated, 1);
	CHECK(stackpulse_spool_meta(s)->chunks > 0);
	int rc;
	CHECK_EQ(count_samples(s, &rc), stackpulse_spool_meta(s)->samples);
	CHECK_EQ(rc, 0);
	stackpulse_spool_close(s);
}

/* A recorder killed at any moment leaves its complete chunks readable. */
SP_TEST(killed_writer_leaves_a_readable_file)
{
	const char *path = tmp_path("killed.spool");
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pipefd[0]);
		sp_file_sink sink;
		sp_writer *w;
		sp_writer_opts opts = { 1, 4096 };
		if (sp_file_sink_open(&sink, path, SP_FILE_MODE_PRIVATE) != 0 ||
		    sp_file_sink_commit(&sink) != 0 ||
		    sp_writer_new(&opts, sp_file_sink_write, &sink, &w) != 0 ||
		    write_steady(w, 20000, 30, 2) != 0)
			_exit(1);
		sp_writer_counts c;
		sp_writer_get_counts(w, &c);
		/* Tell the parent how many samples are safely on disk, then die
		 * with a chunk half built in memory. */
		uint64_t flushed_chunks = c.chunks;
		if (write(pipefd[1], &flushed_chunks, sizeof(flushed_chunks)) < 0)
			_exit(2);
		raise(SIGKILL);
		_exit(3);
	}
	close(pipefd[1]);
	uint64_t chunks = 0;
	CHECK(read(pipefd[0], &chunks, sizeof(chunks)) == (ssize_t)sizeof(chunks));
	close(pipefd[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	CHECK_EQ(m->truncated, 1);
	CHECK_EQ(m->chunks, chunks);
	CHECK(m->samples > 0 && m->samples < 20000);
	int rc;
	CHECK_EQ(count_samples(s, &rc), m->samples);
	CHECK_EQ(rc, 0);
	stackpulse_spool_close(s);
}

/* The iterator re-reads chunks: a file changed on disk gives an error. */
SP_TEST(file_changed_after_open)
{
	const char *path = tmp_path("changing.spool");
	write_rich_file(path, 64);
	stackpulse_spool *s;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	/* Flip a payload byte of the last chunk that holds samples. */
	struct stat st;
	REQUIRE(stat(path, &st) == 0);
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	off_t at = st.st_size - SP_FOOTER_LEN - 2;
	uint8_t byte;
	REQUIRE(pread(fd, &byte, 1, at) == 1);
	byte ^= 0xff;
	REQUIRE(pwrite(fd, &byte, 1, at) == 1);
	int rc;
	count_samples(s, &rc);
	CHECK(rc == STACKPULSE_ECHECKSUM || rc == STACKPULSE_EFORMAT || rc == 0);
	/* Cut it short: chunks past the end can no longer be read. */
	REQUIRE(ftruncate(fd, SP_FILE_HEADER_LEN) == 0);
	close(fd);
	count_samples(s, &rc);
	CHECK(rc < 0);
	CHECK(stackpulse_last_error()[0] != '\0');
	stackpulse_spool_close(s);
}

/* A damaged middle chunk: the default open keeps the chunks before it and
 * says where; the strict open refuses the file with the same detail. */
SP_TEST(damaged_file_opens_lenient_or_strict)
{
	const char *path = tmp_path("damaged.spool");
	write_rich_file(path, 64); /* Small chunks: several of them. */
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	uint8_t head[SP_FILE_HEADER_LEN + SP_CHUNK_HEADER_LEN];
	REQUIRE_EQ(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	REQUIRE_EQ(sp_le32(head + SP_FILE_HEADER_LEN), SP_CHUNK_MAGIC);
	/* The second chunk's payload: past the first chunk, then its header. */
	uint64_t second =
	        SP_FILE_HEADER_LEN + SP_CHUNK_HEADER_LEN + sp_le32(head + SP_FILE_HEADER_LEN + 12);
	uint8_t byte;
	REQUIRE_EQ(pread(fd, &byte, 1, (off_t)(second + SP_CHUNK_HEADER_LEN + 2)), 1);
	byte ^= 0x10;
	REQUIRE_EQ(pwrite(fd, &byte, 1, (off_t)(second + SP_CHUNK_HEADER_LEN + 2)), 1);
	close(fd);

	stackpulse_spool *s = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &s));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	CHECK_EQ(m->damaged, 1);
	CHECK_EQ(m->truncated, 1);
	CHECK_EQ(m->damaged_chunk, 1);
	CHECK_EQ(m->damaged_offset, second);
	CHECK(m->damage && strstr(m->damage, "chunk 1") != NULL);
	CHECK_EQ(m->chunks, 1);
	stackpulse_spool_close(s);

	s = NULL;
	stackpulse_spool_open_opts o;
	stackpulse_spool_open_opts_init(&o);
	o.flags = STACKPULSE_SPOOL_STRICT;
	int rc = stackpulse_spool_open(path, &o, &s);
	CHECK(rc != 0);
	CHECK(s == NULL);
	CHECK(strstr(stackpulse_last_error(), "chunk 1") != NULL);
	CHECK(strstr(stackpulse_last_error(), "damaged.spool") != NULL);
	o.flags = 0x80;
	CHECK_EQ(stackpulse_spool_open(path, &o, &s), -EINVAL);
}

/* The one open: a path or (path NULL) a buffer in the options, never both
 * nor neither; the options' sz is honoured. */
SP_TEST(spool_open_path_or_buffer)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/either.spool", sp_test_tmpdir());
	write_rich_file(path, 1u << 20);
	size_t len = 0;
	char *bytes = sp_test_read_file(path, &len);
	REQUIRE(bytes && len > 0);

	stackpulse_spool_open_opts o = STACKPULSE_SPOOL_OPEN_OPTS;
	stackpulse_spool_open_opts init;
	memset(&init, 0xa5, sizeof(init));
	stackpulse_spool_open_opts_init(&init);
	CHECK(init.sz == o.sz && init.flags == 0 && init.buf == NULL && init.len == 0);

	stackpulse_spool *a = NULL, *b = NULL, *x = NULL;
	REQUIRE_OK(stackpulse_spool_open(path, NULL, &a));
	o.buf = bytes;
	o.len = len;
	REQUIRE_OK(stackpulse_spool_open(NULL, &o, &b));
	CHECK_EQ(stackpulse_spool_meta(a)->samples, stackpulse_spool_meta(b)->samples);
	CHECK(stackpulse_spool_meta(a)->samples > 0);
	CHECK_EQ(stackpulse_spool_process_count(a), stackpulse_spool_process_count(b));

	CHECK_EQ(stackpulse_spool_open(path, &o, &x), -EINVAL); /* both */
	CHECK(strstr(stackpulse_last_error(), "both") != NULL);
	CHECK(x == NULL);
	CHECK_EQ(stackpulse_spool_open(NULL, NULL, &x), -EINVAL); /* neither */
	o.buf = NULL;
	o.len = 10;
	CHECK_EQ(stackpulse_spool_open(NULL, &o, &x), -EINVAL); /* NULL bytes */
	o.len = 0;
	CHECK(stackpulse_spool_open(NULL, &o, &x) < 0); /* empty buffer: no header */
	CHECK(x == NULL);
	/* An older caller's struct ends before buf/len: a path still opens. */
	o.sz = offsetof(stackpulse_spool_open_opts, buf);
	o.buf = bytes; /* beyond sz: not read */
	CHECK_OK(stackpulse_spool_open(path, &o, &x));
	stackpulse_spool_close(x);
	o.sz = 1;
	CHECK_EQ(stackpulse_spool_open(path, &o, &x), -EINVAL);
	CHECK_EQ(stackpulse_spool_open(path, NULL, NULL), -EINVAL);
	stackpulse_spool_close(a);
	stackpulse_spool_close(b);
	free(bytes);
}
