/* The recorder's parsers of outside text and bytes (/proc maps lines, ELF
 * build-id notes, kallsyms) and its process table (fork, exec, exit, pid
 * reuse, overlapping mappings), checked against real files and a real
 * spool written in memory. */
#include <errno.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "format/spool_writer.h"
#include "rec_util.h"
#include "record/build_id.h"
#include "record/kallsyms.h"
#include "record/proc_scan.h"
#include "record/process_table.h"

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
	char comm[64], self[512];
	sp_proc_comm(0, getpid(), comm, sizeof(comm));
	ssize_t sn = readlink("/proc/self/exe", self, sizeof(self) - 1);
	REQUIRE(sn > 0);
	self[sn] = '\0';
	const char *base = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
	CHECK(strlen(comm) == 15 || strlen(comm) == strlen(base));
	CHECK(strncmp(comm, base, strlen(comm)) == 0); /* comm keeps 15 bytes. */
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
		int rc = sp_build_id_read_fd(fd, got, &len);
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
			int rc = sp_build_id_for_mapping(getpid(), m.start, m.end, m.path, got,
			                                 &len);
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
		int rc = sp_build_id_read_fd(fd, out, &len);
		close(fd);
		CHECK(rc < 0);
	}
	/* Every truncation of the real file fails cleanly or succeeds. */
	for (size_t cut = 0; cut < 2048; cut += 7) {
		REQUIRE(write_file(path, img, cut) == 0);
		int fd = open(path, O_RDONLY);
		int rc = sp_build_id_read_fd(fd, out, &len);
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
	CHECK_EQ(sp_ptable_live(&t), 2);
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	sp_ptable_free(&t);
	sp_unwinder_free(u);

	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open_memory(buf.data, buf.len, &sp));
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
