/* The spool file a recording creates: it replaces the path only once
 * recording has started, so a failed record (pid 1 as nobody, a missing
 * command, a refused ptrace) leaves an existing spool byte for byte and
 * creates nothing, through the API and through the record example; a
 * symlink or hard link at the path is replaced, never written through; the
 * spool is mode 0600. */
#include <dirent.h>
#include <errno.h>
#include <sys/prctl.h>

#include "rec_driver.h"
#include "rec_stats.h"

#define KEEP_BYTES 15360 /* The 15 KiB spool of the report. */

/* A fresh directory anyone may write, under the test's directory. */
static const char *fresh_dir(const char *name)
{
	static char dirs[8][600];
	static int next;
	char *d = dirs[next++ % 8];
	snprintf(d, 600, "%s/%s", rec_public_dir(), name);
	REQUIRE(mkdir(d, 0777) == 0);
	REQUIRE(chmod(d, 0777) == 0);
	return d;
}

static void keep_bytes(uint8_t *buf)
{
	for (uint32_t i = 0; i < KEEP_BYTES; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 24);
}

/* An existing "spool" owned by nobody, as a user's earlier recording. */
static void write_keep(const char *path)
{
	uint8_t buf[KEEP_BYTES];
	keep_bytes(buf);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	close(fd);
	REQUIRE(chown(path, 65534, 65534) == 0);
}

static int keep_intact(const char *path)
{
	uint8_t want[KEEP_BYTES], got[KEEP_BYTES + 1];
	keep_bytes(want);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, got, sizeof(got));
	close(fd);
	return n == KEEP_BYTES && memcmp(want, got, KEEP_BYTES) == 0;
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	REQUIRE(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			printf("    %s/%s\n", dir, e->d_name);
			n++;
		}
	closedir(d);
	return n;
}

/* A process of nobody that nobody may not trace (not dumpable). */
static pid_t undumpable_target(void)
{
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0 ||
		    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(2);
		close(p[1]);
		for (int i = 0; i < 600; i++)
			usleep(100000);
		_exit(0);
	}
	close(p[1]);
	char c;
	REQUIRE(read(p[0], &c, 1) == 1);
	close(p[0]);
	return pid;
}

static void need_nobody(void)
{
	if (geteuid() != 0)
		sp_test_skip("needs root to switch to nobody");
	if (system("command -v setpriv >/dev/null") != 0)
		sp_test_skip("setpriv missing");
}

typedef struct failing {
	const char *name;
	int as_nobody;
	char env[512];  /* driver settings besides the spool */
	char args[512]; /* record example arguments besides -o */
} failing;

/* The three failures of the report, each before recording starts. */
static int failures(failing *f, pid_t undumpable)
{
	f[0] = (failing){ "pid1", 1, "SP_REC_DRIVER=attach_pid SP_REC_PID=1", "-p 1" };
	f[1] = (failing){ "missing", 0, "SP_REC_DRIVER=spawn SP_REC_TARGET=./no-such-cmd",
		          "-- ./no-such-cmd" };
	f[2] = (failing){ "ptrace", 1, "", "" };
	snprintf(f[2].env, sizeof(f[2].env), "SP_REC_DRIVER=attach_pid SP_REC_PID=%d",
	         (int)undumpable);
	snprintf(f[2].args, sizeof(f[2].args), "-p %d", (int)undumpable);
	return 3;
}

static void check_failed_run(const char *dir, const char *what)
{
	char keep[700], fresh[700];
	snprintf(keep, sizeof(keep), "%s/keep.spool", dir);
	snprintf(fresh, sizeof(fresh), "%s/new.spool", dir);
	CHECK(keep_intact(keep));
	CHECK_EQ(access(fresh, F_OK), -1);
	int n = entries(dir); /* keep.spool only: no temporary file left */
	if (n != 1)
		sp_test_fail(__FILE__, __LINE__, "%s: %d entries in %s", what, n, dir);
}

SP_TEST(failed_record_through_the_api_keeps_the_old_spool)
{
	need_nobody();
	pid_t undumpable = undumpable_target();
	failing f[3];
	int nf = failures(f, undumpable);
	for (int i = 0; i < nf; i++) {
		const char *dir = fresh_dir(f[i].name);
		char keep[700], env[2048], out[1024];
		snprintf(keep, sizeof(keep), "%s/keep.spool", dir);
		write_keep(keep);
		for (int fresh = 0; fresh < 2; fresh++) {
			snprintf(env, sizeof(env), "%s SP_REC_SPOOL=%s/%s", f[i].env, dir,
			         fresh ? "new.spool" : "keep.spool");
			int st = rec_drive(env, f[i].as_nobody, out, sizeof(out));
			printf("api %s: %s", f[i].name, out);
			CHECK_EQ(st, 1);
			CHECK(strncmp(out, "rc=-", 4) == 0);
			check_failed_run(dir, f[i].name);
		}
	}
	CHECK(!rec_any_stopped(undumpable));
	kill(undumpable, SIGKILL);
	waitpid(undumpable, NULL, 0);
}

SP_TEST(failed_record_example_keeps_the_old_spool)
{
	need_nobody();
	const char *bin_dir = getenv("SP_BIN_DIR");
	char record[700];
	snprintf(record, sizeof(record), "%s/record", bin_dir ? bin_dir : "zig-out/bin");
	if (access(record, X_OK) != 0)
		sp_test_fail(__FILE__, __LINE__, "%s is not built (zig build examples install)",
		             record);
	pid_t undumpable = undumpable_target();
	failing f[3];
	int nf = failures(f, undumpable);
	for (int i = 0; i < nf; i++) {
		char name[64];
		snprintf(name, sizeof(name), "ex-%s", f[i].name);
		const char *dir = fresh_dir(name);
		char keep[700], cmd[3000];
		snprintf(keep, sizeof(keep), "%s/keep.spool", dir);
		write_keep(keep);
		for (int fresh = 0; fresh < 2; fresh++) {
			snprintf(cmd, sizeof(cmd),
			         "cd '%s' && timeout 60 %s '%s' -o '%s/%s' %s 2>&1", dir,
			         f[i].as_nobody
			                 ? "setpriv --reuid=65534 --regid=65534 --clear-groups"
			                 : "",
			         record, dir, fresh ? "new.spool" : "keep.spool", f[i].args);
			FILE *p = popen(cmd, "r");
			REQUIRE(p);
			char line[1024] = "";
			if (fgets(line, sizeof(line), p))
				printf("record %s: %s", f[i].name, line);
			while (fgets(line, sizeof(line), p))
				;
			int st = pclose(p);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
			check_failed_run(dir, name);
		}
	}
	CHECK(!rec_any_stopped(undumpable));
	kill(undumpable, SIGKILL);
	waitpid(undumpable, NULL, 0);
}

/* A successful recording replaces a symlink or hard link planted at the
 * spool path (the file behind it keeps its bytes) with a 0600 spool. */
SP_TEST(spool_replaces_planted_links_and_is_private)
{
	const char *dir = fresh_dir("links");
	char victim[700], slink[700], hard[700];
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(slink, sizeof(slink), "%s/sym.spool", dir);
	snprintf(hard, sizeof(hard), "%s/hard.spool", dir);
	write_keep(victim);
	REQUIRE(symlink(victim, slink) == 0);
	REQUIRE(link(victim, hard) == 0);
	const char *paths[2] = { slink, hard };
	const char *bin = rec_target("ladder", NULL);
	for (int i = 0; i < 2; i++) {
		char *argv[] = { (char *)bin, "0.2", NULL };
		stackpulse_recorder *rec;
		REQUIRE_OK(stackpulse_recorder_spawn(argv, paths[i], NULL, &rec, NULL));
		CHECK(keep_intact(victim));
		struct stat st;
		REQUIRE(lstat(paths[i], &st) == 0);
		CHECK(S_ISREG(st.st_mode)); /* Already at its path while recording. */
		CHECK_OK(rec_run(rec, 30));
		CHECK_OK(rec_finish(rec));
		REQUIRE(lstat(paths[i], &st) == 0);
		CHECK(S_ISREG(st.st_mode));
		CHECK_EQ(st.st_mode & 07777, 0600u);
		CHECK_EQ(st.st_nlink, 1u);
		stackpulse_spool *sp;
		REQUIRE_OK(stackpulse_spool_open(paths[i], NULL, &sp));
		CHECK(stackpulse_spool_meta(sp)->samples > 0);
		stackpulse_spool_close(sp);
		CHECK(keep_intact(victim));
	}
	struct stat st;
	REQUIRE(stat(victim, &st) == 0);
	CHECK_EQ(st.st_nlink, 1u);
	CHECK_EQ(entries(dir), 3);
	/* A FIFO or a directory at the path is refused, not replaced. */
	char fifo[700];
	snprintf(fifo, sizeof(fifo), "%s/fifo.spool", dir);
	REQUIRE(mkfifo(fifo, 0600) == 0);
	char *argv[] = { (char *)bin, "0.1", NULL };
	stackpulse_recorder *rec;
	CHECK_EQ(stackpulse_recorder_spawn(argv, fifo, NULL, &rec, NULL), -EINVAL);
	CHECK(strstr(stackpulse_last_error(), "not a regular file") != NULL);
	CHECK_EQ(stackpulse_recorder_spawn(argv, dir, NULL, &rec, NULL), -EISDIR);
	REQUIRE(lstat(fifo, &st) == 0);
	CHECK(S_ISFIFO(st.st_mode));
	CHECK_EQ(entries(dir), 4);
}
