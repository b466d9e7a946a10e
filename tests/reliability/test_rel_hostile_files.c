/* Targets that attack the recorder through the files they map (issue 17):
 * FIFOs and character devices at the path of a deleted library without a
 * build-id, as nobody and as root, spawned and attached with stop; a
 * library swapped for an absolute symlink to a FIFO inside a private
 * mount namespace after map_files was made to fail; and a libpython copy
 * truncated and restored in a loop. Each run must end within its bound
 * (`timeout -s KILL` ends a hung one, which fails), with samples, and the
 * target must run to its end (never left stopped). */
#include <errno.h>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#include "rel_util.h"
#include "io/file.h"
#include "record/python.h"
#include "symbolize/dbgmod.h"
#include "unwind/unwind_internal.h"
#include "../record/rec_driver.h"
#include "../symbolize/sym_fixture.h"

/* CPU seconds the target spins: the same samples however loaded the
 * machine is, and well inside BOUND_SECONDS of wall time at a load of 20. */
#define ATTACK_SECONDS "1"
#define BOUND_SECONDS  25.0
#define LIBPYTHON      "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"

/* tests/reliability/targets/hotlib.c as a shared library, built once. */
static const char *hotlib(void)
{
	static char path[600];
	if (!path[0]) {
		snprintf(path, sizeof(path), "%s/hotlib.so", sp_test_tmpdir());
		char cmd[2048];
		snprintf(cmd, sizeof(cmd),
		         "gcc -O2 -g -shared -fPIC -o '%s' '%s/tests/reliability/targets/hotlib.c'",
		         path, sp_test_source_root());
		REQUIRE(system(cmd) == 0);
	}
	return path;
}

static uint64_t field(const char *out, const char *name)
{
	const char *p = strstr(out, name);
	return p ? strtoull(p + strlen(name), NULL, 10) : 0;
}

typedef struct attack {
	const char *mode;   /* Target mode (see targets/hostile_files.c). */
	const char *driver; /* spawn | attach */
	int as_nobody;
	int strip;        /* Remove the build-id note of the copy. */
	const char *name; /* File name of the copy. */
	int trace;        /* Run the recorder under strace: nothing but regular
	                   * files may be opened at the library's path. */
} attack;

/* Lines of the strace log @p log in which the recorder (not the target
 * @p target nor its descendants, found from the clone lines) really opened
 * (not O_PATH) a path ending in "/@p name" or "/@p name (deleted)", and
 * got a descriptor. */
static int real_opens(const char *log, const char *name, int target)
{
	FILE *f = fopen(log, "r");
	if (!f)
		return -1;
	char line[8192], q1[300], q2[300];
	snprintf(q1, sizeof(q1), "/%s\"", name);
	snprintf(q2, sizeof(q2), "/%s (deleted)\"", name);
	int theirs[256], ntheirs = 0, n = 0;
	theirs[ntheirs++] = target;
	while (fgets(line, sizeof(line), f)) {
		int pid = atoi(line), mine = 1;
		for (int i = 0; i < ntheirs; i++)
			mine &= theirs[i] != pid;
		const char *eq = strrchr(line, '=');
		int ok = eq && eq[1] == ' ' && eq[2] >= '0' && eq[2] <= '9';
		if (!mine) {
			if ((strstr(line, "clone") || strstr(line, "fork")) && ok && ntheirs < 256)
				theirs[ntheirs++] = atoi(eq + 2);
			continue;
		}
		if (!strstr(line, "open") || strstr(line, "O_PATH") ||
		    (!strstr(line, q1) && !strstr(line, q2)))
			continue;
		if (ok) {
			printf("    really opened: %s", line);
			n++;
		}
	}
	fclose(f);
	return n;
}

static void run_attack(const attack *a)
{
	const char *dir = a->as_nobody ? rec_public_dir() : sp_test_tmpdir();
	const char *target = rel_target("hostile_files");
	char lib[700], spool[700], pidfile[700], extra[700] = "", env[4096], out[1024];
	char sub[700];
	snprintf(sub, sizeof(sub), "%s/%s_%s_%d", dir, a->mode, a->driver, a->as_nobody);
	fx_sh("rm -rf '%s' && mkdir -p '%s' && chmod 0777 '%s'", sub, sub, sub);
	snprintf(lib, sizeof(lib), "%s/%s", sub, a->name);
	snprintf(spool, sizeof(spool), "%s/out.spool", sub);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", sub);
	if (strncmp(a->mode, "swap", 4) == 0) {
		/* The target mounts a tmpfs on ns/ and copies the library there;
		 * the FIFO its symlink points at is outside, in our view too. */
		char nsdir[760], fifo[760];
		snprintf(nsdir, sizeof(nsdir), "%s/ns", sub);
		snprintf(fifo, sizeof(fifo), "%s/hostfifo", sub);
		REQUIRE(mkdir(nsdir, 0755) == 0);
		REQUIRE(mkfifo(fifo, 0666) == 0);
		snprintf(lib, sizeof(lib), "%s/%s", nsdir, a->name);
		/* The copy made inside, without its build-id note (else the
		 * kernel hands it over in the mmap record). */
		char stripped[760];
		snprintf(stripped, sizeof(stripped), "%s/stripped.so", sub);
		fx_sh("cp '%s' '%s' && objcopy --remove-section .note.gnu.build-id '%s'", hotlib(),
		      stripped, stripped);
		snprintf(extra, sizeof(extra), ":%s", stripped);
	} else if (strcmp(a->mode, "trunc") == 0) {
		fx_sh("cp '%s' '%s' && chmod 0755 '%s'", LIBPYTHON, lib, lib);
	} else {
		fx_sh("cp '%s' '%s' && chmod 0755 '%s'", hotlib(), lib, lib);
		if (a->strip)
			fx_sh("objcopy --remove-section .note.gnu.build-id '%s'", lib);
	}
	char trace[800] = "", log[760];
	snprintf(log, sizeof(log), "%s/strace.log", sub);
	if (a->trace)
		snprintf(trace, sizeof(trace),
		         "strace -f -qq -e trace=open,openat,openat2,clone,clone3,fork,vfork "
		         "-o '%s' ",
		         log);
	snprintf(env, sizeof(env),
	         "SP_REC_DRIVER=%s SP_REC_SPOOL=%s SP_REC_TARGET=%s SP_REC_ARG=%s:%s:%s%s "
	         "SP_REC_PIDFILE=%s %stimeout -s KILL %d",
	         a->driver, spool, target, a->mode, lib, ATTACK_SECONDS, extra, pidfile, trace,
	         (int)BOUND_SECONDS + 5);
	double t0 = rel_now();
	int st = rec_drive(env, a->as_nobody, out, sizeof(out));
	double dt = rel_now() - t0;
	printf("%s %s%s: %.2f s, %s", a->mode, a->driver, a->as_nobody ? " as nobody" : "", dt,
	       out);
	CHECK_EQ(st, 0);
	CHECK(dt < BOUND_SECONDS);
	CHECK(strstr(out, "run=0 finish=0") != NULL);
	/* 499 Hz for 1 s of the target's CPU gives about 500 samples; the
	 * blocked recorder wrote 15 and lost 257 (of 1.5 s). */
	uint64_t samples = field(out, "samples="), lost = field(out, "lost=");
	CHECK(samples >= 30);
	CHECK(lost * 4 < samples);
	/* The target ran to its end: not stopped, not still there. */
	FILE *f = fopen(pidfile, "r");
	int pid = 0;
	if (f) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	CHECK(pid > 0);
	if (pid > 0) {
		char s = rel_proc_state(pid);
		CHECK(s == 0 || s == 'Z');
	}
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	CHECK(stackpulse_spool_meta(sp)->samples >= samples);
	stackpulse_spool_close(sp);
	if (a->trace)
		CHECK_EQ(real_opens(log, a->name, pid), 0);
	fx_sh("rm -rf '%s'", sub);
}

static void need_root(void)
{
	if (geteuid() != 0)
		sp_test_skip("needs root");
}

static void need_nobody(void)
{
	need_root();
	if (system("command -v setpriv >/dev/null") != 0)
		sp_test_skip("setpriv missing");
}

/* The case confirmed by running it: the recorder blocked in open(). */
SP_TEST(fifo_at_deleted_library_path_as_nobody_spawn)
{
	need_nobody();
	attack a = { "fifo", "spawn", 1, 1, "lib.so", 0 };
	run_attack(&a);
}

SP_TEST(fifo_at_deleted_library_path_as_nobody_attach_stop)
{
	need_nobody();
	attack a = { "fifo", "attach", 1, 1, "lib.so", 0 };
	run_attack(&a);
}

SP_TEST(fifo_at_deleted_library_path_as_root)
{
	need_root();
	attack s = { "fifo", "spawn", 0, 1, "lib.so", 0 };
	run_attack(&s);
	attack t = { "fifo", "attach", 0, 1, "lib.so", 0 };
	run_attack(&t);
}

/* Symlinks to /dev/zero (nobody cannot mknod; as root, map_files reaches
 * the mapped file itself: see device_swapped_in_after_map_files_fails).
 * strace cannot follow the target of an attach, so only spawn is traced. */
SP_TEST(device_at_deleted_library_path)
{
	need_nobody();
	attack a = { "dev", "spawn", 1, 1, "lib.so", 1 };
	run_attack(&a);
	attack b = { "dev", "attach", 1, 1, "lib.so", 0 };
	run_attack(&b);
}

SP_TEST(symlink_swap_to_host_fifo_in_private_mount_namespace)
{
	need_root();
	attack a = { "swap", "spawn", 0, 0, "lib.so", 0 };
	run_attack(&a);
}

SP_TEST(device_swapped_in_after_map_files_fails)
{
	need_root();
	attack a = { "swapdev", "spawn", 0, 0, "lib.so", 1 };
	run_attack(&a);
}

SP_TEST(truncating_target_does_not_crash_the_recorder)
{
	need_root();
	REQUIRE(access(LIBPYTHON, R_OK) == 0);
	/* A libpython copy, so the CPython probe parses its symbol tables. */
	attack a = { "trunc", "spawn", 0, 0, "libpython3.11.so.1.0", 0 };
	run_attack(&a);
	attack b = { "trunc", "attach", 0, 0, "libpython3.11.so.1.0", 0 };
	run_attack(&b);
}

/* The readers themselves, in a child (so SIGBUS shows as a failure), on a
 * libpython copy that a thread truncates to one page and restores in a
 * loop: the CPython probe's ELF scan and the symbolizer's libdwfl module
 * (both read with pread; an mmap of the file would fault). */
typedef struct truncer {
	char path[700];
	uint8_t *img;
	size_t size;
	volatile int stop;
	unsigned rounds;
} truncer;

static void *truncate_loop(void *arg)
{
	truncer *t = arg;
	int fd = open(t->path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	while (!t->stop) {
		if (ftruncate(fd, 4096) != 0)
			break;
		sched_yield();
		if (pwrite(fd, t->img + 4096, t->size - 4096, 4096) != (ssize_t)(t->size - 4096))
			break;
		t->rounds++;
		sched_yield();
	}
	close(fd);
	return NULL;
}

static int read_while_truncated(truncer *t, int which, double secs)
{
	pthread_t th;
	if (pthread_create(&th, NULL, truncate_loop, t) != 0)
		return -1;
	sp_dbg_config cfg;
	if (sp_dbg_config_init(&cfg, "/nonexistent-debug-root", 0, NULL) != 0)
		return -1;
	sp_strpool pool;
	sp_strpool_init(&pool);
	unsigned reads = 0, opened = 0;
	double end = rel_now() + secs;
	while (rel_now() < end) {
		reads++;
		if (which == 0) {
			sp_python *py = NULL;
			if (sp_python_probe_file(getpid(), t->path, 0x10000000, 0, 0, 0, &py) == 0)
				sp_python_free(py);
			continue;
		}
		sp_dbgmod *m = NULL;
		if (sp_dbgmod_open(t->path, NULL, 0, &cfg, &m) != 0)
			continue;
		opened++;
		sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
		for (uint64_t off = 0x1000; off < t->size; off += t->size / 64)
			(void)sp_dbgmod_resolve(m, off, &pool, 0, fr, SP_SYMCACHE_MAX_FRAMES);
		sp_dbgmod_free(m);
	}
	t->stop = 1;
	pthread_join(th, NULL);
	sp_strpool_free(&pool);
	sp_dbg_config_free(&cfg);
	printf("%s: %u reads (%u opened), %u truncations\n", which ? "dbgmod" : "probe", reads,
	       opened, t->rounds);
	return reads > 0 && t->rounds > 0 && (which == 0 || opened > 0) ? 0 : 1;
}

SP_TEST(readers_survive_a_file_truncated_in_a_loop)
{
	REQUIRE(access(LIBPYTHON, R_OK) == 0);
	for (int which = 0; which < 2; which++) {
		truncer t;
		memset(&t, 0, sizeof(t));
		snprintf(t.path, sizeof(t.path), "%s/libpython3.11.so.1.0", sp_test_tmpdir());
		fx_sh("cp '%s' '%s'", LIBPYTHON, t.path);
		FILE *f = fopen(t.path, "rb");
		REQUIRE(f);
		REQUIRE(fseek(f, 0, SEEK_END) == 0);
		t.size = (size_t)ftell(f);
		rewind(f);
		t.img = malloc(t.size);
		REQUIRE(t.img && fread(t.img, 1, t.size, f) == t.size);
		fclose(f);
		fflush(stdout);
		pid_t c = fork();
		REQUIRE(c >= 0);
		if (c == 0) {
			alarm(60);
			_exit(read_while_truncated(&t, which, 2.0));
		}
		int st = 0;
		REQUIRE(waitpid(c, &st, 0) == c);
		if (WIFSIGNALED(st))
			printf("%s reader died of signal %d\n", which ? "dbgmod" : "probe",
			       WTERMSIG(st));
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		free(t.img);
	}
}

/* The one safe open itself: a target's absolute symlink resolves inside
 * the target's root (never to the same path in ours), ".." cannot climb
 * out of it, FIFOs and devices are refused at once, and a file that is not
 * the one expected (inode) is refused; resolved by openat2 and by the walk
 * that stands in for it on kernels before 5.6 alike. */
SP_TEST(safe_open_keeps_target_paths_inside_their_root)
{
	char root[600], host[700], cmd[2048];
	snprintf(root, sizeof(root), "%s/fakeroot", sp_test_tmpdir());
	snprintf(host, sizeof(host), "%s/host_only", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "rm -rf '%s' && mkdir -p '%s/lib' && echo host > '%s' && echo inside > "
	         "'%s/lib/real' && ln -s /lib/real '%s/lib/abs_ok' && ln -s '%s' '%s/lib/abs_out' "
	         "&& ln -s ../../host_only '%s/lib/dotdot' && mkfifo '%s/lib/fifo' && "
	         "ln -s /dev/zero '%s/lib/dev' && ln -s lib '%s/libdir' && ln -s ../libdir/real "
	         "'%s/lib/link1' && ln -s link1 '%s/lib/chain' && ln -s loop '%s/lib/loop'",
	         root, root, host, root, root, host, root, root, root, root, root, root, root,
	         root);
	REQUIRE(system(cmd) == 0);
	int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	REQUIRE(dfd >= 0);
	int fd = -1;
	uint64_t size = 0;
	/* openat2, and the walk taken where the kernel has none. */
	for (unsigned walk = 0; walk <= SP_FILE_WALK; walk += SP_FILE_WALK) {
		unsigned in = SP_FILE_IN_ROOT | walk;
		/* Followed inside the root, also through a symlinked directory
		 * and a chain of links. */
		const char *ok[] = { "/lib/abs_ok", "libdir/real", "/lib/chain",
			             "lib/../lib/./real", "../../lib/real" };
		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			int rc = sp_file_open_at(dfd, ok[i], in, 0, NULL, &fd, &size);
			if (rc != 0 || size != 7)
				sp_test_fail(__FILE__, __LINE__, "%s (%s): %d, %llu bytes", ok[i],
				             walk ? "walk" : "openat2", rc,
				             (unsigned long long)size);
			if (fd >= 0)
				close(fd);
		}
		/* host_only exists in our root only: not reachable from inside. */
		CHECK_EQ(sp_file_open_at(dfd, "/lib/abs_out", in, 0, NULL, &fd, &size), -ENOENT);
		CHECK_EQ(sp_file_open_at(dfd, "/lib/dotdot", in, 0, NULL, &fd, &size), -ENOENT);
		CHECK_EQ(sp_file_open_at(dfd, "/lib/loop", in, 0, NULL, &fd, &size), -ELOOP);
		CHECK_EQ(sp_file_open_at(dfd, "/lib/real/x", in, 0, NULL, &fd, &size), -ENOTDIR);
		/* A final symlink with NOFOLLOW is the link, not a regular file. */
		CHECK_EQ(sp_file_open_at(dfd, "/lib/abs_ok", in | SP_FILE_NOFOLLOW, 0, NULL, &fd,
		                         &size),
		         -EINVAL);
		/* /dev/zero of the root (there is none), not ours. */
		CHECK_EQ(sp_file_open_at(dfd, "/lib/dev", in, 0, NULL, &fd, &size), -ENOENT);
		CHECK_EQ(sp_file_open_at(dfd, "/lib/fifo", in, 0, NULL, &fd, &size), -EINVAL);
		CHECK_EQ(fd, -1);
	}
	/* Without IN_ROOT the same symlink does reach it (the attack). */
	char abs_out[700];
	snprintf(abs_out, sizeof(abs_out), "%s/lib/abs_out", root);
	CHECK_OK(sp_file_open_regular(abs_out, 0, 0, &fd, &size));
	if (fd >= 0)
		close(fd);
	CHECK_EQ(sp_file_open_regular(abs_out, SP_FILE_NOFOLLOW, 0, &fd, &size), -EINVAL);
	/* No blocking, no device. */
	double t0 = rel_now();
	CHECK_EQ(sp_file_open_at(dfd, "/lib/fifo", SP_FILE_IN_ROOT, 0, NULL, &fd, &size), -EINVAL);
	if (geteuid() == 0) {
		char chr[700];
		snprintf(chr, sizeof(chr), "%s/lib/chr", root);
		REQUIRE(mknod(chr, S_IFCHR | 0666, makedev(1, 5)) == 0);
		CHECK_EQ(sp_file_open_at(dfd, "/lib/chr", SP_FILE_IN_ROOT, 0, NULL, &fd, &size),
		         -EINVAL);
	}
	CHECK_EQ(sp_file_open_regular("/dev/zero", 0, 0, &fd, &size), -EINVAL);
	CHECK(rel_now() - t0 < 1.0);
	CHECK_EQ(fd, -1);
	/* Identity: the inode the mapping reported, or nothing. */
	struct stat st;
	char real[700];
	snprintf(real, sizeof(real), "%s/lib/real", root);
	REQUIRE(stat(real, &st) == 0);
	sp_file_id want = { 0, (uint64_t)st.st_ino };
	CHECK_OK(sp_file_open_at(dfd, "/lib/real", SP_FILE_IN_ROOT, 0, &want, &fd, &size));
	if (fd >= 0)
		close(fd);
	want.ino++;
	CHECK_EQ(sp_file_open_at(dfd, "/lib/real", SP_FILE_IN_ROOT, 0, &want, &fd, &size), -ESTALE);
	/* The size cap. */
	CHECK_EQ(sp_file_open_at(dfd, "/lib/real", SP_FILE_IN_ROOT, 3, NULL, &fd, &size),
	         STACKPULSE_ELIMIT);
	/* A mapping of ours, as a target's: map_files, else the path in our root
	 * through /proc/self/root; a "(deleted)" path is never opened by name. */
	CHECK_EQ(sp_file_open_mapped(getpid(), 0, 0, "/nonexistent (deleted)", NULL, 0, &fd, &size),
	         -ENOENT);
	CHECK_OK(sp_file_open_mapped(getpid(), 0, 0, real, NULL, 0, &fd, &size));
	if (fd >= 0)
		close(fd);
	close(dfd);
}

/* The unwinder's per-recording binaries: a library in another mount
 * namespace claiming the build-id of one of ours (with other code and CFI)
 * must not be reused to unwind our processes. */
static const char twin_bid[] = "0x7a11ed0123456789abcdef0123456789abcdef01";

static void build_twin(const char *name, const char *fn, char *out, size_t cap)
{
	char src[700];
	snprintf(src, sizeof(src), "%s/%s.c", sp_test_tmpdir(), name);
	snprintf(out, cap, "%s/%s.so", sp_test_tmpdir(), name);
	FILE *f = fopen(src, "w");
	REQUIRE(f);
	fprintf(f, "int %s(int x) { return x * 5 + 1; }\n", fn);
	fclose(f);
	fx_sh("gcc -O1 -shared -fPIC -Wl,--build-id=%s -o '%s' '%s'", twin_bid, out, src);
}

/* Maps @p path executable; returns its [start, end). */
static void *map_exec(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0);
	*len = (size_t)st.st_size;
	void *p = mmap(NULL, *len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	REQUIRE(p != MAP_FAILED);
	return p;
}

SP_TEST(unwinder_does_not_reuse_a_foreign_build_id_twin)
{
	need_root();
	char real[700], fake[700];
	build_twin("twin_real", "real_fn", real, sizeof(real));
	build_twin("twin_fake", "fake_fn_with_a_longer_name_and_other_code", fake, sizeof(fake));
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(real, bid, &bid_len);
	int go[2], ready[2];
	REQUIRE(pipe(go) == 0 && pipe(ready) == 0);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		/* A container of sorts: its own mount namespace, the twin mapped. */
		if (unshare(CLONE_NEWNS) != 0)
			_exit(2);
		size_t len;
		void *p = map_exec(fake, &len);
		uint64_t msg[2] = { (uint64_t)(uintptr_t)p, len };
		if (write(ready[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(3);
		char b;
		if (read(go[0], &b, 1) < 0)
			_exit(4);
		_exit(0);
	}
	uint64_t msg[2] = { 0, 0 };
	REQUIRE(read(ready[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	size_t len;
	void *mine = map_exec(real, &len);
	sp_unwinder *u;
	REQUIRE_OK(sp_unwinder_new(&u));
	uint64_t fs = msg[0], fe = msg[0] + ((msg[1] + 4095) & ~(uint64_t)4095);
	uint64_t ms = (uint64_t)(uintptr_t)mine, me = ms + ((len + 4095) & ~(uint64_t)4095);
	sp_unwind_binary *theirs = sp_unwind_binary_get(u, c, fs, fe, fake, bid, bid_len);
	sp_unwind_binary *ours = sp_unwind_binary_get(u, getpid(), ms, me, real, bid, bid_len);
	struct stat st;
	REQUIRE(stat(real, &st) == 0);
	CHECK(theirs != NULL);
	CHECK(ours != NULL);
	CHECK(ours != theirs);
	if (ours)
		CHECK_EQ(ours->ino, (uint64_t)st.st_ino);
	/* Inside one namespace the build-id alone still finds it. */
	CHECK(sp_unwind_binary_get(u, getpid(), ms, me, real, bid, bid_len) == ours);
	sp_unwinder_free(u);
	munmap(mine, len);
	REQUIRE(write(go[1], "x", 1) == 1);
	int wst;
	REQUIRE(waitpid(c, &wst, 0) == c);
	CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
}
