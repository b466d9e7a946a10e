/* The recorder's parsers of outside text and bytes (/proc maps lines, ELF
 * build-id notes, kallsyms) and its process table (fork, exec, exit, pid
 * reuse, overlapping mappings), checked against real files and a real
 * spool written in memory. */
#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "format/spool_writer.h"
#include "rec_util.h"
#include "io/elf.h"
#include "record/kallsyms.h"
#include "record/proc_scan.h"
#include "record/process_table.h"
#include "record/recorder.h"
#include "rec_stats.h"

SP_TEST(maps_line_parser)
{
	sp_proc_map m;
	char l1[] = "7f12a000-7f12b000 r-xp 00001000 fd:01 123456    /usr/lib/x y (deleted)";
	REQUIRE_OK(sp_proc_parse_map_line(l1, &m));
	CHECK_EQ(m.start, 0x7f12a000);
	CHECK_EQ(m.end, 0x7f12b000);
	CHECK_EQ(m.pgoff, 0x1000);
	CHECK_EQ(m.exec, 1);
	CHECK_EQ(m.inode, 123456);
	CHECK_STR(m.path, "/usr/lib/x y (deleted)");
	char l2[] = "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]";
	REQUIRE_OK(sp_proc_parse_map_line(l2, &m));
	CHECK_STR(m.path, "[vsyscall]");
	char l3[] = "7f0-7f1 rw-p 0 00:00 0";
	REQUIRE_OK(sp_proc_parse_map_line(l3, &m));
	CHECK_EQ(m.exec, 0);
	CHECK_STR(m.path, "");
	const char *bad[] = { "",
		              "zz-10 r-xp 0 0:0 0",
		              "10-5 r-xp 0 0:0 0 x",
		              "10-20 r-x 0 0:0 0",
		              "10-20 r-xp 0 00 0",
		              "10-20 r-xp 0 0:0 x",
		              "11112222333344445-20 r-xp 0 0:0 0" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char b[128];
		snprintf(b, sizeof(b), "%s", bad[i]);
		CHECK_EQ(sp_proc_parse_map_line(b, &m), STACKPULSE_EFORMAT);
	}
}

SP_TEST(nspid_parser)
{
	CHECK_EQ(sp_proc_parse_nspid("Name:\tx\nPid:\t4242\nNSpid:\t4242\t17\t3\nPPid:\t1\n"), 3);
	CHECK_EQ(sp_proc_parse_nspid("Name:\tx\nNSpid:\t4242\n"), 4242);
	CHECK_EQ(sp_proc_parse_nspid("Name:\tx\nNSpid:\t4242"), 4242);
	/* Missing, empty, malformed or out of range: 0 (the caller keeps its pid). */
	CHECK_EQ(sp_proc_parse_nspid(""), 0);
	CHECK_EQ(sp_proc_parse_nspid("NSpid:\t5\n"), 0); /* not at a line start */
	CHECK_EQ(sp_proc_parse_nspid("x\nNSpid:\n"), 0);
	CHECK_EQ(sp_proc_parse_nspid("x\nNSpid:\tabc\n"), 0);
	CHECK_EQ(sp_proc_parse_nspid("x\nNSpid:\t0\n"), 0);
	CHECK_EQ(sp_proc_parse_nspid("x\nNSpid:\t99999999999\n"), 0);
	CHECK_EQ(sp_proc_parse_nspid("x\nNSpid:\t12 x 7\n"), 12);
	CHECK_EQ(sp_proc_nspid(getpid()), getpid());
}

SP_TEST(syscall_parser)
{
	sp_proc_syscall sc;
	CHECK_OK(sp_proc_parse_syscall("230 0x0 0x0 0x7ffe47c83730 0x0 0x0 0x7f0ad1c09740 "
	                               "0x7ffe47c83418 0x7f0ad1cdb503\n",
	                               &sc));
	CHECK_EQ(sc.nr, 230);
	CHECK_EQ(sc.sp, 0x7ffe47c83418ull);
	CHECK_EQ(sc.pc, 0x7f0ad1cdb503ull);
	/* Blocked outside a system call (a page fault): only sp and pc. */
	CHECK_OK(sp_proc_parse_syscall("-1 0x7ffd00001000 0x401000\n", &sc));
	CHECK_EQ(sc.nr, -1);
	CHECK_EQ(sc.sp, 0x7ffd00001000ull);
	CHECK_EQ(sc.pc, 0x401000ull);
	CHECK_EQ(sp_proc_parse_syscall("running\n", &sc), -EAGAIN);
	CHECK_EQ(sp_proc_parse_syscall("", &sc), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_proc_parse_syscall("230 0x0 0x0\n", &sc), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_proc_parse_syscall("-2 0x1 0x2\n", &sc), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_proc_parse_syscall("x 0x1 0x2\n", &sc), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_proc_parse_syscall("-1 0x1  0x2\n", &sc), STACKPULSE_EFORMAT);
	CHECK_EQ(sp_proc_parse_syscall("-1 0x1 0xfffffffffffffffff\n", &sc), STACKPULSE_EFORMAT);
}

/* A child blocked in read() on a pipe: its system call, sp and pc, and a
 * switch count that holds while it waits; a spinning child is "running". */
SP_TEST(syscall_of_a_blocked_thread)
{
	int fds[2];
	REQUIRE_EQ(pipe(fds), 0);
	pid_t blocked = fork();
	if (blocked == 0) {
		char c;
		_exit(read(fds[0], &c, 1) == 1 ? 0 : 1);
	}
	pid_t spinner = fork();
	if (spinner == 0) {
		for (volatile unsigned long i = 0;; i++)
			;
	}
	usleep(100000);
	sp_proc_syscall sc;
	uint64_t a = 0, b = 0;
	CHECK_OK(sp_proc_thread_switches(blocked, blocked, &a));
	CHECK_OK(sp_proc_thread_syscall(blocked, blocked, &sc));
	CHECK_EQ(sc.nr, (long)SYS_read);
	CHECK(sc.sp != 0 && sc.pc != 0);
	usleep(20000);
	CHECK_OK(sp_proc_thread_switches(blocked, blocked, &b));
	CHECK_EQ(a, b);
	CHECK(a > 0);
	CHECK_EQ(sp_proc_thread_syscall(spinner, spinner, &sc), -EAGAIN);
	CHECK_EQ(sp_proc_thread_syscall(999999999, 999999999, &sc), -ESRCH);
	kill(spinner, SIGKILL);
	CHECK_EQ(write(fds[1], "x", 1), 1);
	int st;
	waitpid(blocked, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	waitpid(spinner, &st, 0);
	CHECK_OK(sp_proc_thread_switches(getpid(), getpid(), &b));
	close(fds[0]);
	close(fds[1]);
}

/* A process in a PID namespace of its own is pid 1 there: the perf map it
 * writes is /tmp/perf-1.map in its root. */
SP_TEST(nspid_of_a_process_in_a_new_pid_namespace)
{
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid_t mid = fork();
	REQUIRE(mid >= 0);
	if (mid == 0) {
		close(p[0]);
		pid_t gc = -1;
		if (unshare(CLONE_NEWPID) == 0) {
			gc = fork();
			if (gc == 0) {
				close(p[1]);
				pause();
				_exit(0);
			}
		}
		int e = gc < 0 ? errno : 0;
		int msg[2] = { (int)gc, e };
		(void)!write(p[1], msg, sizeof(msg));
		if (gc > 0)
			waitpid(gc, NULL, 0);
		_exit(0);
	}
	close(p[1]);
	int msg[2] = { -1, 0 };
	ssize_t n = read(p[0], msg, sizeof(msg));
	close(p[0]);
	if (n != (ssize_t)sizeof(msg) || msg[0] <= 0) {
		waitpid(mid, NULL, 0);
		if (msg[1] == EPERM)
			sp_test_skip("unshare(CLONE_NEWPID) needs CAP_SYS_ADMIN");
		sp_test_fail(__FILE__, __LINE__, "namespaced child: %s", strerror(msg[1]));
		sp_test_abort();
	}
	pid_t gc = (pid_t)msg[0];
	CHECK_EQ(sp_proc_nspid(gc), 1);
	kill(gc, SIGKILL);
	waitpid(mid, NULL, 0);
	/* Gone: the pid itself. */
	CHECK_EQ(sp_proc_nspid(gc), gc);
}

static int count_map(void *ctx, const sp_proc_map *m)
{
	int *n = ctx;
	if (m->exec && strstr(m->path, "test_record_parsers"))
		n[0]++;
	n[1]++;
	return 0;
}

SP_TEST(proc_scan_of_ourselves)
{
	int n[2] = { 0, 0 };
	REQUIRE_OK(sp_proc_maps(getpid(), count_map, n));
	CHECK(n[0] >= 1); /* Our own text. */
	CHECK(n[1] >= 3);
	pid_t *tids;
	size_t cnt;
	REQUIRE_OK(sp_proc_tasks(getpid(), &tids, &cnt));
	CHECK(cnt >= 1 && tids[0] == getpid());
	sp_free(tids);
	/* The kernel's own view (not the exe's name: under valgrind that is
	 * the test, while comm is valgrind's tool). */
	char comm[64];
	sp_proc_comm(0, getpid(), comm, sizeof(comm));
	char *want = sp_test_read_file("/proc/self/comm", NULL);
	REQUIRE(want != NULL);
	want[strcspn(want, "\n")] = '\0';
	CHECK(comm[0] != '\0' && strlen(comm) <= 15);
	CHECK_STR(comm, want);
	free(want);
	char *cmd;
	REQUIRE_OK(sp_proc_cmdline(getpid(), &cmd));
	CHECK(strstr(cmd, "test_record_parsers") != NULL);
	sp_free(cmd);
	char st;
	CHECK_OK(sp_proc_state(getpid(), &st, NULL));
	CHECK_EQ(sp_proc_tasks(999999999, &tids, &cnt), -ESRCH);
	CHECK_EQ(sp_proc_maps(999999999, count_map, n), -ESRCH);
}

/* readelf's view of the build-id of @p path, as bytes. */
static int readelf_build_id(const char *path, uint8_t *out)
{
	char cmd[700], line[512];
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | sed -n 's/.*Build ID: //p'", path);
	FILE *p = popen(cmd, "r");
	int n = 0;
	if (p && fgets(line, sizeof(line), p))
		for (char *c = line; c[0] && c[1] && n < 64; c += 2) {
			char hex[3] = { c[0], c[1], 0 }, *end;
			unsigned long v = strtoul(hex, &end, 16);
			if (*end)
				break;
			out[n++] = (uint8_t)v;
		}
	if (p)
		pclose(p);
	return n;
}

SP_TEST(build_id_matches_readelf)
{
	const char *bin = rec_target("ladder", NULL);
	const char *files[] = { bin, "/bin/sh", "/lib/x86_64-linux-gnu/libc.so.6" };
	for (size_t i = 0; i < 3; i++) {
		if (access(files[i], R_OK) != 0)
			continue;
		uint8_t want[64], got[64];
		int wn = readelf_build_id(files[i], want);
		int fd = open(files[i], O_RDONLY);
		REQUIRE(fd >= 0);
		uint32_t len = 0;
		int rc = sp_elf_build_id_fd(fd, got, &len);
		close(fd);
		if (wn == 0) {
			CHECK_EQ(rc, STACKPULSE_ENOTFOUND);
			continue;
		}
		REQUIRE_OK(rc);
		CHECK_EQ(len, wn);
		CHECK(memcmp(got, want, len) == 0);
	}
	/* Through /proc/PID/map_files, as for a target. */
	uint8_t got[64];
	uint32_t len = 0;
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	REQUIRE(n > 0);
	self[n] = '\0';
	uint8_t want[64];
	int wn = readelf_build_id(self, want);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int checked = 0;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		sp_proc_map m;
		if (sp_proc_parse_map_line(line, &m) == 0 && m.exec && strcmp(m.path, self) == 0) {
			int rc = sp_elf_build_id_mapped(getpid(), m.start, m.end, m.path, m.inode,
			                                got, &len);
			if (wn) {
				CHECK_OK(rc);
				CHECK(len == (uint32_t)wn && memcmp(got, want, len) == 0);
			}
			checked = 1;
		}
	}
	if (f)
		fclose(f);
	CHECK(checked);
}

static int write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(p, 1, n, f);
	fclose(f);
	return 0;
}

SP_TEST(build_id_rejects_bad_elf)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/bad.elf", sp_test_tmpdir());
	/* Take a real binary and break it in several ways. */
	const char *bin = rec_target("ladder", NULL);
	FILE *f = fopen(bin, "rb");
	REQUIRE(f);
	static uint8_t img[1 << 20];
	size_t n = fread(img, 1, sizeof(img), f);
	fclose(f);
	REQUIRE(n > 4096);
	static uint8_t mod[1 << 20];
	uint8_t out[64];
	uint32_t len;
	struct {
		size_t off;
		uint8_t byte;
		size_t cut;
	} cases[] = {
		{ 0, 'X', 0 },    /* Not ELF. */
		{ 4, 9, 0 },      /* Bad class. */
		{ 5, 9, 0 },      /* Bad data encoding. */
		{ 0, 0x7f, 40 },  /* Cut inside the header. */
		{ 0, 0x7f, 100 }, /* Program headers beyond the end. */
		{ 32, 0xff, 0 },  /* phoff huge. */
		{ 54, 1, 0 },     /* phentsize too small. */
		{ 57, 0xff, 0 },  /* phnum huge. */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(mod, img, n);
		mod[cases[i].off] = cases[i].byte;
		if (cases[i].off == 32)
			memset(mod + 32, 0xff, 8);
		size_t len_file = cases[i].cut ? cases[i].cut : n;
		REQUIRE(write_file(path, mod, len_file) == 0);
		int fd = open(path, O_RDONLY);
		int rc = sp_elf_build_id_fd(fd, out, &len);
		close(fd);
		/* Broken program headers: the note section still has the id. */
		CHECK(rc < 0 || ((cases[i].off == 54 || cases[i].off == 57) && len == 20));
	}
	/* Every truncation of the real file fails cleanly or succeeds. */
	for (size_t cut = 0; cut < 2048; cut += 7) {
		REQUIRE(write_file(path, img, cut) == 0);
		int fd = open(path, O_RDONLY);
		int rc = sp_elf_build_id_fd(fd, out, &len);
		close(fd);
		CHECK(rc == 0 || rc == STACKPULSE_EFORMAT || rc == STACKPULSE_ENOTFOUND ||
		      rc == STACKPULSE_ETRUNCATED);
		if (rc == 0)
			CHECK(len == 20);
	}
}

typedef struct ksyms_seen {
	int n;
	char names[16][64];
	uint64_t starts[16];
	char mods[16][32];
} ksyms_seen;

static int on_ksym(void *ctx, uint64_t start, const char *name, const char *module)
{
	ksyms_seen *k = ctx;
	if (k->n < 16) {
		snprintf(k->names[k->n], 64, "%s", name);
		snprintf(k->mods[k->n], 32, "%s", module);
		k->starts[k->n++] = start;
	}
	return 0;
}

SP_TEST(kallsyms_synthetic)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/kallsyms", sp_test_tmpdir());
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fprintf(f, "ffffffff81000000 T _stext\n");
	fprintf(f, "ffffffff81000100 t helper\n");
	fprintf(f, "ffffffff81000200 D some_data\n");
	fprintf(f, "ffffffff81000300 T do_sys_open\n");
	for (int i = 0; i < 3000; i++)
		fputc('x', f); /* An over-long line is skipped. */
	fputc('\n', f);
	fprintf(f, "garbage line\n");
	fprintf(f, "ffffffffc0000000 t mod_fn\t[mymod]\n");
	fprintf(f, "ffffffff81000050 T alias_late\n"); /* Out of order, like modules. */
	fclose(f);
	uint64_t addrs[] = { 0xffffffff81000010ull, 0xffffffff81000060ull, 0xffffffff81000150ull,
		             0xffffffff81000250ull, 0xffffffff81000400ull, 0xffffffffc0000010ull };
	ksyms_seen k;
	memset(&k, 0, sizeof(k));
	int zeroed = 1;
	REQUIRE_OK(sp_kallsyms_resolve(path, addrs, 6, on_ksym, &k, &zeroed));
	CHECK_EQ(zeroed, 0);
	/* _stext, alias_late, helper (twice: 0x150 and 0x250, data skipped),
	 * do_sys_open, mod_fn: five distinct symbols in file order. */
	REQUIRE_EQ(k.n, 5);
	CHECK_STR(k.names[0], "_stext");
	CHECK_STR(k.names[1], "helper");
	CHECK_STR(k.names[2], "do_sys_open");
	CHECK_STR(k.names[3], "mod_fn");
	CHECK_STR(k.mods[3], "mymod");
	CHECK_STR(k.names[4], "alias_late");
	CHECK_STR(k.mods[0], "");

	f = fopen(path, "w");
	REQUIRE(f);
	fprintf(f, "0000000000000000 T _stext\n0000000000000000 t helper [m]\n");
	fclose(f);
	memset(&k, 0, sizeof(k));
	REQUIRE_OK(sp_kallsyms_resolve(path, addrs, 6, on_ksym, &k, &zeroed));
	CHECK_EQ(zeroed, 1);
	CHECK_EQ(k.n, 0);
	CHECK(sp_kallsyms_resolve("/nonexistent/kallsyms", addrs, 6, on_ksym, &k, &zeroed) ==
	      -ENOENT);
}

SP_TEST(kallsyms_real)
{
	/* Our own syscall entry must be found in the running kernel. */
	FILE *f = fopen("/proc/kallsyms", "r");
	REQUIRE(f);
	char line[512];
	unsigned long long a = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *end;
		a = strtoull(line, &end, 16);
		if (end[0] == ' ' && end[1] && strcmp(end + 2, " ksys_write") == 0)
			break;
		a = 0;
	}
	fclose(f);
	if (a == 0)
		sp_test_skip("kallsyms hidden or ksys_write absent");
	uint64_t addr = a + 4;
	ksyms_seen k;
	memset(&k, 0, sizeof(k));
	int zeroed;
	REQUIRE_OK(sp_kallsyms_resolve("/proc/kallsyms", &addr, 1, on_ksym, &k, &zeroed));
	REQUIRE_EQ(k.n, 1);
	CHECK_STR(k.names[0], "ksys_write");
	CHECK_EQ(k.starts[0], a);
}

static int mem_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append(ctx, data, len);
}

/* One process past SP_PTABLE_MAX_MAPS executable mappings: the extra ones
 * are dropped and counted, the process keeps the ones it has, another
 * process is unaffected, and a dropped mapping over a kept one makes that
 * range unknown instead of leaving the old module there. Files are found
 * again by (path, inode) among thousands. */
SP_TEST(process_table_mapping_limit)
{
	sp_buf buf;
	sp_buf_init(&buf);
	sp_writer *w;
	sp_writer_opts wo = { 1, 0 };
	REQUIRE_OK(sp_writer_new(&wo, mem_sink, &buf, &w));
	sp_unwinder *u;
	REQUIRE_OK(sp_unwinder_new(&u));
	sp_ptable t;
	sp_ptable_init(&t, w, u);
	sp_process *p, *q;
	REQUIRE_OK(sp_ptable_add(&t, 100, SP_NONE, 1, "hostile", "hostile", &p));
	REQUIRE_OK(sp_ptable_add(&t, 101, SP_NONE, 1, "other", "other", &q));
	REQUIRE_OK(sp_ptable_mmap(&t, q, 0x400000, 0x1000, 0, "/bin/other", NULL, 0, 9, 1));
	/* Top-down, as mmap places them: each one lands in front. */
	uint32_t total = SP_PTABLE_MAX_MAPS + 100;
	char path[64];
	for (uint32_t i = 0; i < total; i++) {
		uint64_t at = 0x7f0000000000ull - (uint64_t)i * 0x2000;
		snprintf(path, sizeof(path), "/lib/f%u.so", i % 3000);
		REQUIRE_OK(sp_ptable_mmap(&t, p, at, 0x1000, 0x1000, path, NULL, 0, i % 3000, 2));
	}
	CHECK_EQ(p->nmaps, SP_PTABLE_MAX_MAPS);
	CHECK_EQ(p->maps_dropped, 100u);
	CHECK_EQ(t.maps_dropped, 100u);
	CHECK_EQ(t.nmodcache, 3001u); /* and /bin/other */
	for (size_t i = 1; i < p->nmaps; i++)
		CHECK(p->maps[i - 1].end <= p->maps[i].start);
	struct stackpulse_raw_frame f;
	sp_ptable_frame(p, 0x7f0000000000ull + 0x10, &f); /* The first one, kept. */
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	CHECK_EQ(f.offset, 0x1010);
	const char *mpath;
	const uint8_t *bid;
	uint32_t bid_len;
	REQUIRE_OK(sp_ptable_module_info(&t, f.module, &mpath, &bid, &bid_len));
	CHECK_STR(mpath, "/lib/f0.so");
	uint64_t last = 0x7f0000000000ull - (uint64_t)(total - 1) * 0x2000;
	sp_ptable_frame(p, last + 0x10, &f); /* Dropped: never seen. */
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN);
	/* A dropped mapping over a kept one: that entry turns unknown. */
	REQUIRE_OK(
	        sp_ptable_mmap(&t, p, 0x7f0000000000ull, 0x800, 0, "/lib/new.so", NULL, 0, 1, 3));
	CHECK_EQ(p->maps_dropped, 101u);
	sp_ptable_frame(p, 0x7f0000000000ull + 0x10, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN);
	/* The other process is untouched and still takes new mappings. */
	REQUIRE_OK(sp_ptable_mmap(&t, q, 0x500000, 0x1000, 0, "/lib/f7.so", NULL, 0, 7, 4));
	sp_ptable_frame(q, 0x500010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	REQUIRE_OK(sp_ptable_module_info(&t, f.module, &mpath, &bid, &bid_len));
	CHECK_STR(mpath, "/lib/f7.so");
	CHECK_EQ(q->maps_dropped, 0u);
	CHECK_EQ(sp_ptable_module_info(&t, 999999, &mpath, &bid, &bid_len), STACKPULSE_ENOTFOUND);
	sp_ptable_free(&t);
	sp_writer_free(w);
	sp_unwinder_free(u);
	sp_buf_free(&buf);
}

/* The process table through fork, exec, exit and pid reuse, read back
 * from a real spool. */
SP_TEST(process_table_life_cycle)
{
	sp_buf buf;
	sp_buf_init(&buf);
	sp_writer *w;
	sp_writer_opts wo = { 1, 0 };
	REQUIRE_OK(sp_writer_new(&wo, mem_sink, &buf, &w));
	sp_unwinder *u;
	REQUIRE_OK(sp_unwinder_new(&u));
	sp_ptable t;
	sp_ptable_init(&t, w, u);
	sp_process *p;
	REQUIRE_OK(sp_ptable_add(&t, 100, SP_NONE, 1, "parent", "parent --x", &p));
	sp_thread *th;
	REQUIRE_OK(sp_ptable_thread(&t, p, 100, 1, "parent", &th));
	REQUIRE_OK(sp_ptable_mmap(&t, p, 0x1000, 0x3000, 0, "/bin/app", NULL, 0, 7, 2));
	/* An overlapping mapping splits the old one. */
	REQUIRE_OK(sp_ptable_mmap(&t, p, 0x2000, 0x1000, 0x5000, "/lib/libz.so", NULL, 0, 8, 3));
	struct stackpulse_raw_frame f;
	sp_ptable_frame(p, 0x1800, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	CHECK_EQ(f.offset, 0x800);
	uint32_t app = f.module;
	sp_ptable_frame(p, 0x2010, &f);
	CHECK_EQ(f.offset, 0x5010);
	CHECK(f.module != app);
	sp_ptable_frame(p, 0x3010, &f);
	CHECK_EQ(f.module, app);
	CHECK_EQ(f.offset, 0x2010); /* Right part keeps its file offset. */
	sp_ptable_frame(p, 0x9000, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN);
	REQUIRE_OK(sp_ptable_mmap(&t, p, 0x9000, 0x1000, 0, "//anon", NULL, 0, 0, 3));
	sp_ptable_frame(p, 0x9010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN);
	CHECK_EQ(f.offset, 0x9010);

	/* Fork: the child inherits the mappings. */
	REQUIRE_OK(sp_ptable_fork(&t, 100, 200, 200, 4));
	sp_process *c = sp_ptable_find(&t, 200);
	REQUIRE(c != NULL);
	sp_ptable_frame(c, 0x1800, &f);
	CHECK_EQ(f.module, app);
	uint32_t child_index = c->index;
	/* Exec: mappings are gone. */
	REQUIRE_OK(sp_ptable_exec(&t, 200, 200, "newprog", 5));
	sp_ptable_frame(c, 0x1800, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN);
	sp_ptable_frame(p, 0x1800, &f);
	CHECK_EQ(f.module, app); /* The parent keeps its own. */
	/* Exit, then the pid comes back: a new process. */
	REQUIRE_OK(sp_ptable_exit(&t, 200, 200, 6));
	CHECK(sp_ptable_find(&t, 200) == NULL);
	REQUIRE_OK(sp_ptable_fork(&t, 100, 200, 200, 7));
	c = sp_ptable_find(&t, 200);
	REQUIRE(c != NULL);
	CHECK(c->index != child_index);
	/* A FORK for a pid still live (its exit was lost) also starts anew. */
	uint32_t second = c->index;
	REQUIRE_OK(sp_ptable_fork(&t, 100, 200, 200, 8));
	CHECK(sp_ptable_find(&t, 200)->index != second);
	size_t live = 0;
	for (size_t i = 0; i < t.nprocs; i++)
		live += !t.procs[i]->exited;
	CHECK_EQ(live, 2);
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	sp_ptable_free(&t);
	sp_unwinder_free(u);

	stackpulse_spool *sp;
	REQUIRE_OK(sp_test_open_memory(buf.data, buf.len, &sp));
	REQUIRE_EQ(stackpulse_spool_process_count(sp), 4);
	const struct stackpulse_process *p1 = stackpulse_spool_process(sp, 1);
	CHECK_EQ(p1->pid, 200);
	CHECK_STR(p1->name, "newprog");
	CHECK_EQ(p1->parent, 0);
	CHECK(p1->end_ns != 0);
	CHECK_EQ(stackpulse_spool_process(sp, 2)->pid, 200);
	CHECK_EQ(stackpulse_spool_process(sp, 3)->parent, 0);
	stackpulse_spool_close(sp);
	sp_buf_free(&buf);
}

/* ---- perf ring records fed to the record parser (sample.c) ---- */

/* Pids above PID_MAX_LIMIT (4 Mi): /proc never has them, so the parser
 * sees exactly the records given here. */
#define FAKE_PARENT 2000000001
#define FAKE_CHILD  2000000002

typedef struct perf_rec {
	uint8_t b[2048];
	size_t n;
	uint32_t type;
	uint16_t misc;
} perf_rec;

static void pr_begin(perf_rec *r, uint32_t type, uint16_t misc)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->misc = misc;
	r->n = sizeof(struct perf_event_header);
}

static void pr_u32(perf_rec *r, uint32_t v)
{
	memcpy(r->b + r->n, &v, 4);
	r->n += 4;
}

static void pr_u64(perf_rec *r, uint64_t v)
{
	memcpy(r->b + r->n, &v, 8);
	r->n += 8;
}

/* A NUL-terminated string padded to 8 bytes, as the kernel writes it. */
static void pr_str(perf_rec *r, const char *s)
{
	size_t l = strlen(s) + 1;
	memcpy(r->b + r->n, s, l);
	r->n += (l + 7) & ~(size_t)7;
}

/* The sample_id_all trailer: pid/tid, time, cpu/res, id. */
static void pr_end(perf_rec *r, pid_t pid, pid_t tid, uint64_t time)
{
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)tid);
	pr_u64(r, time);
	pr_u64(r, 0);
	pr_u64(r, 0);
}

static void pr_fork(perf_rec *r, pid_t ppid, pid_t pid, uint64_t time)
{
	pr_begin(r, PERF_RECORD_FORK, 0);
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)ppid);
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)ppid);
	pr_u64(r, time);
	pr_end(r, ppid, ppid, time);
}

static void pr_comm(perf_rec *r, pid_t pid, const char *comm, int exec, uint64_t time)
{
	pr_begin(r, PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)pid);
	pr_str(r, comm);
	pr_end(r, pid, pid, time);
}

static void pr_mmap2(perf_rec *r, pid_t pid, uint64_t addr, uint64_t len, const char *path,
                     const uint8_t *bid, uint64_t time)
{
	pr_begin(r, PERF_RECORD_MMAP2, bid ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0);
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)pid);
	pr_u64(r, addr);
	pr_u64(r, len);
	pr_u64(r, 0); /* pgoff */
	if (bid) {
		uint8_t b[24] = { 20 };
		memcpy(b + 4, bid, 20);
		memcpy(r->b + r->n, b, 24);
		r->n += 24;
	} else {
		pr_u32(r, 8);    /* maj */
		pr_u32(r, 1);    /* min */
		pr_u64(r, 4242); /* ino */
		pr_u64(r, 0);    /* ino_generation */
	}
	pr_u32(r, 5); /* prot: r-x */
	pr_u32(r, 2); /* flags */
	pr_str(r, path);
	pr_end(r, pid, pid, time);
}

/* A sample without user registers: kernel callchain only. */
static void pr_sample(perf_rec *r, pid_t pid, uint64_t time, const uint64_t *chain, uint64_t nr)
{
	pr_begin(r, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
	pr_u64(r, 0); /* identifier */
	pr_u64(r, chain && nr > 1 ? chain[1] : 0);
	pr_u32(r, (uint32_t)pid);
	pr_u32(r, (uint32_t)pid);
	pr_u64(r, time);
	pr_u64(r, 1); /* cpu 1, res 0 */
	pr_u64(r, nr);
	for (uint64_t i = 0; i < nr; i++)
		pr_u64(r, chain[i]);
	pr_u64(r, 0); /* regs abi: none */
	pr_u64(r, 0); /* stack size */
}

static void pr_lost(perf_rec *r, uint64_t lost, uint64_t time)
{
	pr_begin(r, PERF_RECORD_LOST, 0);
	pr_u64(r, 7); /* id */
	pr_u64(r, lost);
	pr_end(r, FAKE_PARENT, FAKE_PARENT, time);
}

/* Hands the first @p len bytes of @p r to the parser, with the header's
 * size saying @p len (as the ring does). */
static int pr_feed_len(stackpulse_recorder *rec, const perf_rec *r, size_t len)
{
	uint8_t copy[2048];
	struct perf_event_header h = { r->type, r->misc, (uint16_t)len };
	memcpy(copy, r->b, r->n);
	if (len >= sizeof(h))
		memcpy(copy, &h, sizeof(h));
	return sp_recorder_record(rec, &h, copy, len);
}

static int pr_feed(stackpulse_recorder *rec, const perf_rec *r)
{
	return pr_feed_len(rec, r, r->n);
}

/* A recorder with only what the record parser uses, writing to memory. */
static stackpulse_recorder *fake_recorder(sp_buf *buf)
{
	stackpulse_recorder *rec = sp_calloc(1, sizeof(*rec));
	REQUIRE(rec != NULL);
	rec->opts = STACKPULSE_RECORDER_OPTS;
	rec->opts.python = STACKPULSE_FEATURE_OFF;
	rec->opts.self_contained = false;
	rec->target = FAKE_PARENT;
	rec->sink.fd = rec->epfd = rec->pidfd = -1;
	sp_writer_opts wo = { 1, 0 };
	REQUIRE_OK(sp_writer_new(&wo, mem_sink, buf, &rec->w));
	REQUIRE_OK(sp_unwinder_new(&rec->u));
	sp_ptable_init(&rec->pt, rec->w, rec->u);
	rec->pcs = sp_calloc(SP_MAX_USER_FRAMES, sizeof(uint64_t));
	rec->frames = sp_calloc(SP_MAX_USER_FRAMES + SP_MAX_KERNEL_FRAMES + 1, sizeof(uint32_t));
	REQUIRE(rec->pcs && rec->frames);
	return rec;
}

/* Finishes the spool in @p buf and frees @p rec. */
static void fake_finish(stackpulse_recorder *rec)
{
	CHECK_OK(sp_writer_finish(rec->w));
	sp_writer_free(rec->w);
	sp_ptable_free(&rec->pt);
	sp_unwinder_free(rec->u);
	sp_free(rec->pcs);
	sp_free(rec->frames);
	sp_free(rec->kaddrs);
	sp_free(rec->native);
	sp_free(rec);
}

static const uint64_t kchain[] = { (uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000010ull,
	                           0xffffffff81000020ull };

SP_TEST(perf_records_parse)
{
	sp_buf buf;
	sp_buf_init(&buf);
	stackpulse_recorder *rec = fake_recorder(&buf);
	static const uint8_t bid[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
		                         7,    8,    9,    10,   11, 12, 13, 14, 15, 16 };
	perf_rec r;
	pr_comm(&r, FAKE_PARENT, "main-thread", 0, 10);
	CHECK_OK(pr_feed(rec, &r));
	pr_mmap2(&r, FAKE_PARENT, 0x400000, 0x1000, "/fake/app", NULL, 11);
	CHECK_OK(pr_feed(rec, &r));
	pr_mmap2(&r, FAKE_PARENT, 0x700000, 0x2000, "/fake/libx.so", bid, 12);
	CHECK_OK(pr_feed(rec, &r));
	pr_sample(&r, FAKE_PARENT, 13, kchain, 3);
	CHECK_OK(pr_feed(rec, &r));
	pr_lost(&r, 5, 14);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, 0);
	CHECK_EQ(rec->lost, 5);
	sp_process *p = sp_ptable_find(&rec->pt, FAKE_PARENT);
	REQUIRE(p != NULL);
	struct stackpulse_raw_frame f;
	sp_ptable_frame(p, 0x400010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	CHECK_EQ(f.offset, 0x10);
	sp_ptable_frame(p, 0x701000, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	CHECK_EQ(f.offset, 0x1000);
	fake_finish(rec);

	stackpulse_spool *sp;
	REQUIRE_OK(sp_test_open_memory(buf.data, buf.len, &sp));
	REQUIRE_EQ(stackpulse_spool_process_count(sp), 1);
	CHECK_EQ(stackpulse_spool_process(sp, 0)->pid, FAKE_PARENT);
	REQUIRE_EQ(stackpulse_spool_thread_count(sp), 1);
	CHECK_STR(stackpulse_spool_thread(sp, 0)->name, "main-thread");
	int lib_ok = 0;
	for (uint32_t i = 0; i < stackpulse_spool_module_count(sp); i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(sp, i);
		if (strcmp(m->path, "/fake/libx.so") == 0)
			lib_ok = m->build_id_len == 20 && memcmp(m->build_id, bid, 20) == 0;
	}
	CHECK(lib_ok);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &s), 1);
	CHECK_EQ(s->pid, FAKE_PARENT);
	CHECK_EQ(s->cpu, 1);
	uint32_t fr[4];
	REQUIRE_EQ(stackpulse_spool_stack_frames(sp, s->stack, fr, 4), 2);
	CHECK_EQ(stackpulse_spool_frame(sp, fr[0])->kind, STACKPULSE_FRAME_KERNEL);
	CHECK_EQ(stackpulse_spool_frame(sp, fr[0])->offset, 0xffffffff81000010ull);
	CHECK_EQ(stackpulse_spool_frame(sp, fr[1])->offset, 0xffffffff81000020ull);
	CHECK_EQ(stackpulse_sample_iter_next(it, &s), 0);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	sp_buf_free(&buf);
}

/* Every record kind cut at every length, plus lying length fields: each is
 * skipped and counted as corrupt (never an error, never a crash). Records
 * whose cut still parses (text fields have no length) must at least not
 * fail. */
SP_TEST(perf_records_malformed)
{
	sp_buf buf;
	sp_buf_init(&buf);
	stackpulse_recorder *rec = fake_recorder(&buf);
	perf_rec recs[6];
	pr_comm(&recs[0], FAKE_PARENT, "a-rather-long-name", 0, 10);
	pr_mmap2(&recs[1], FAKE_PARENT, 0x400000, 0x1000, "/fake/app", NULL, 11);
	static const uint8_t bid[20] = { 1 };
	pr_mmap2(&recs[2], FAKE_PARENT, 0x500000, 0x1000, "/fake/lib", bid, 12);
	pr_sample(&recs[3], FAKE_PARENT, 13, kchain, 3);
	pr_fork(&recs[4], FAKE_PARENT, FAKE_CHILD, 14);
	pr_lost(&recs[5], 3, 15);
	uint64_t cuts = 0, corrupt_before = rec->corrupt;
	for (size_t k = 0; k < 6; k++)
		for (size_t len = 0; len < recs[k].n; len++) {
			CHECK_OK(pr_feed_len(rec, &recs[k], len));
			cuts++;
		}
	uint64_t corrupt = rec->corrupt - corrupt_before;
	printf("%llu cut records, %llu counted corrupt\n", (unsigned long long)cuts,
	       (unsigned long long)corrupt);
	/* A SAMPLE fails at every cut. The others end in the sample_id
	 * trailer, which is then read from whatever ends the cut record:
	 * FORK fails below header + trailer, LOST below its two counters, COMM
	 * and MMAP2 while their text cannot end before the trailer. (Cuts
	 * shorter than the header itself were read beyond the record by the
	 * old reader.) */
	size_t h = sizeof(struct perf_event_header), trailer = 32;
	size_t comm_min = h + 8 + strlen("a-rather-long-name") + 1 + trailer;
	size_t mmap_min = h + 64 + strlen("/fake/app") + 1 + trailer;
	CHECK_EQ(corrupt, recs[3].n + (h + trailer) + (h + 16) + comm_min + 2 * mmap_min);

	perf_rec r;
	uint64_t c0 = rec->corrupt;
	/* A callchain longer than the record. */
	pr_sample(&r, FAKE_PARENT, 20, kchain, 3);
	uint64_t huge = (uint64_t)1 << 61;
	memcpy(r.b + 8 + 40, &huge, 8);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 1);
	/* User registers announced but missing. */
	rec->setup.attr.sample_regs_user = 0x7;
	pr_sample(&r, FAKE_PARENT, 21, kchain, 3);
	uint64_t abi = 2;
	memcpy(r.b + r.n - 16, &abi, 8);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 2);
	rec->setup.attr.sample_regs_user = 0;
	/* A stack copy larger than the record. */
	pr_sample(&r, FAKE_PARENT, 22, kchain, 3);
	uint64_t ssize = 4096;
	memcpy(r.b + r.n - 8, &ssize, 8);
	pr_u64(&r, 0);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 3);
	/* A stack copy without its dyn_size. */
	pr_sample(&r, FAKE_PARENT, 23, kchain, 3);
	ssize = 8;
	memcpy(r.b + r.n - 8, &ssize, 8);
	pr_u64(&r, 0x1234);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 4);
	/* A path that runs into the sample_id trailer. */
	pr_mmap2(&r, FAKE_PARENT, 0x600000, 0x1000, "/fake/abcdef", NULL, 24);
	memset(r.b + r.n - 32 - 16, 'x', 16);
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 5);
	/* A comm without its NUL. */
	pr_comm(&r, FAKE_PARENT, "1234567", 0, 25);
	r.b[8 + 8 + 7] = 'x';
	CHECK_OK(pr_feed(rec, &r));
	CHECK_EQ(rec->corrupt, c0 + 6);
	/* A header that claims less than itself. */
	CHECK_OK(pr_feed_len(rec, &r, 4));
	CHECK_EQ(rec->corrupt, c0 + 7);
	/* Users see them in the stats, with the samples of a process not
	 * followed. */
	rec->opts.children = false;
	pr_sample(&r, 4242, 26, kchain, 3);
	CHECK_OK(pr_feed(rec, &r));
	struct rec_stats st = { 0 };
	memset(&st, 0, sizeof(st));
	REQUIRE_OK(rec_stats_get(rec, &st));
	CHECK_EQ(st.malformed_records, rec->corrupt);
	CHECK(st.malformed_records >= corrupt + 7);
	CHECK_EQ(st.dropped_samples, 1);
	fake_finish(rec);
	/* What was written still reads back. */
	stackpulse_spool *sp;
	REQUIRE_OK(sp_test_open_memory(buf.data, buf.len, &sp));
	stackpulse_spool_close(sp);
	sp_buf_free(&buf);
}

/* The rings are merged by time with a 2 ms slack, so a FORK written late
 * on one CPU can be consumed after its child's first records from another
 * (and a child whose /proc is gone is then known only from those). The
 * child must stay one process: linked to its parent when the FORK comes,
 * keeping what its own records said (an exec, its mappings), inheriting
 * the parent's mappings when it did not exec. A FORK after the pid's
 * earlier life is still a new process (pid reuse). */
SP_TEST(child_records_before_its_fork)
{
	sp_buf buf;
	sp_buf_init(&buf);
	stackpulse_recorder *rec = fake_recorder(&buf);
	const pid_t c2 = FAKE_CHILD + 1;
	perf_rec r;
	pr_comm(&r, FAKE_PARENT, "parent", 0, 10);
	REQUIRE_OK(pr_feed(rec, &r));
	pr_mmap2(&r, FAKE_PARENT, 0x400000, 0x1000, "/fake/parent", NULL, 11);
	REQUIRE_OK(pr_feed(rec, &r));

	/* Child 1 exec'd: its COMM(exec) and MMAP2 come before the FORK. */
	pr_comm(&r, FAKE_CHILD, "newprog", 1, 30);
	REQUIRE_OK(pr_feed(rec, &r));
	pr_mmap2(&r, FAKE_CHILD, 0x500000, 0x1000, "/fake/newprog", NULL, 31);
	REQUIRE_OK(pr_feed(rec, &r));
	pr_fork(&r, FAKE_PARENT, FAKE_CHILD, 20);
	REQUIRE_OK(pr_feed(rec, &r));
	pr_sample(&r, FAKE_CHILD, 32, kchain, 3);
	REQUIRE_OK(pr_feed(rec, &r));
	sp_process *c = sp_ptable_find(&rec->pt, FAKE_CHILD);
	REQUIRE(c != NULL);
	struct stackpulse_raw_frame f;
	sp_ptable_frame(c, 0x500010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE); /* Its own mapping kept. */
	sp_ptable_frame(c, 0x400010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_UNKNOWN); /* Not the pre-exec image. */

	/* Child 2 did not exec: an MMAP2 (a dlopen) before the FORK. */
	pr_mmap2(&r, c2, 0x600000, 0x1000, "/fake/plugin.so", NULL, 41);
	REQUIRE_OK(pr_feed(rec, &r));
	pr_fork(&r, FAKE_PARENT, c2, 40);
	REQUIRE_OK(pr_feed(rec, &r));
	c = sp_ptable_find(&rec->pt, c2);
	REQUIRE(c != NULL);
	sp_ptable_frame(c, 0x600010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE);
	sp_ptable_frame(c, 0x400010, &f);
	CHECK_EQ(f.kind, STACKPULSE_FRAME_NATIVE); /* Inherited from the parent. */
	CHECK_EQ(f.offset, 0x10);

	/* Pid reuse: a FORK later than everything seen of the live pid. */
	uint32_t before = c->index;
	pr_fork(&r, FAKE_PARENT, c2, 50);
	REQUIRE_OK(pr_feed(rec, &r));
	REQUIRE(sp_ptable_find(&rec->pt, c2) != NULL);
	CHECK(sp_ptable_find(&rec->pt, c2)->index != before);
	CHECK_EQ(rec->corrupt, 0);
	fake_finish(rec);

	stackpulse_spool *sp;
	REQUIRE_OK(sp_test_open_memory(buf.data, buf.len, &sp));
	/* parent, child 1, child 2, child 2 reused: no duplicates. */
	REQUIRE_EQ(stackpulse_spool_process_count(sp), 4);
	const struct stackpulse_process *p1 = stackpulse_spool_process(sp, 1);
	CHECK_EQ(p1->pid, FAKE_CHILD);
	CHECK_STR(p1->name, "newprog");
	CHECK_EQ(p1->end_ns, 0);
	CHECK_EQ(stackpulse_spool_process(sp, 2)->pid, c2);
	CHECK(stackpulse_spool_process(sp, 2)->end_ns != 0); /* Ended by the reuse. */
	int forks = 0;
	for (uint32_t i = 0; i < stackpulse_spool_event_count(sp); i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(sp, i);
		if (e->kind == STACKPULSE_SPOOL_EVENT_FORK) {
			CHECK_EQ(e->process, 0);
			CHECK_EQ(e->other, (uint32_t)forks + 1);
			forks++;
		}
	}
	CHECK_EQ(forks, 3);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	REQUIRE_EQ(stackpulse_sample_iter_next(it, &s), 1);
	CHECK_EQ(s->process, 1);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(sp);
	sp_buf_free(&buf);
}
