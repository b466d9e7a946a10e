/* A hostile spool names paths as modules: /proc/self/mem, /dev/zero, a
 * FIFO, a 64 GiB sparse file, a symlink loop, and a real binary recorded
 * with a wrong build-id. Reading and symbolizing it never blocks (alarm and
 * `timeout`), never reads from anything but regular files (checked with
 * strace on the report example), and never uses a file whose build-id
 * differs; the same binary with its right build-id does resolve (control). */
#include "../symbolize/sym_fixture.h"
#include "rel_util.h"

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "    hung: alarm fired\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(3);
}

enum {
	N_PATHS = 8
};

typedef struct hostile {
	char spool[600];
	char paths[N_PATHS][600];
	uint32_t frames[N_PATHS];
	uint32_t stack;
} hostile;

static void make_hostile(hostile *h)
{
	const char *victim = rel_target("victim");
	const char *dir = sp_test_tmpdir();
	char *p = h->paths[0];
	snprintf(h->paths[0], 600, "%s", victim);          /* Control: right build-id. */
	snprintf(h->paths[1], 600, "%s/victim_copy", dir); /* Wrong build-id. */
	snprintf(h->paths[2], 600, "/proc/self/mem");
	snprintf(h->paths[3], 600, "/dev/zero");
	snprintf(h->paths[4], 600, "%s/fifo", dir);
	snprintf(h->paths[5], 600, "%s/huge", dir);
	snprintf(h->paths[6], 600, "%s/loop_a", dir);
	snprintf(h->paths[7], 600, "/proc/%d/mem", (int)getppid());
	fx_sh("cp '%s' '%s/victim_copy'", p, dir);
	unlink(h->paths[4]);
	REQUIRE(mkfifo(h->paths[4], 0644) == 0);
	/* A real ELF extended to 64 GiB of holes. */
	fx_sh("cp '%s' '%s' && truncate -s 64G '%s'", p, h->paths[5], h->paths[5]);
	fx_sh("cd '%s' && rm -f loop_a loop_b && ln -s loop_b loop_a && ln -s loop_a loop_b", dir);

	uint8_t bid[64], wrong[64];
	uint32_t bid_len;
	fx_build_id(victim, bid, &bid_len);
	REQUIRE(bid_len >= 8);
	memcpy(wrong, bid, bid_len);
	wrong[0] ^= 0xff;
	uint64_t addr, size;
	fx_symbol(victim, "rel_victim_fn", &addr, &size);
	uint64_t off = fx_offset(victim, addr);

	fx_spool s;
	fx_spool_begin(&s);
	uint32_t proc, th;
	REQUIRE_OK(sp_writer_process(s.w, 4242, UINT32_MAX, 1000, "hostile", "hostile", &proc));
	REQUIRE_OK(sp_writer_thread(s.w, proc, 4242, 1000, "hostile", &th));
	for (int i = 0; i < N_PATHS; i++) {
		/* Every hostile path claims the victim's real build-id, so only
		 * the file type / content checks can keep it out. */
		uint32_t m = fx_module(&s, h->paths[i], i == 1 ? wrong : bid, bid_len);
		h->frames[i] = fx_frame(&s, STACKPULSE_FRAME_NATIVE, m, off + (uint64_t)i);
	}
	/* Make the module paths distinct in frames: offsets differ by i, all
	 * still inside rel_victim_fn (its size is larger than N_PATHS). */
	REQUIRE(size > N_PATHS);
	h->stack = fx_stack(&s, h->frames, N_PATHS);
	REQUIRE_OK(sp_writer_sample(s.w, 2000, th, h->stack, 1, 0));
	REQUIRE_OK(sp_writer_finish(s.w));
	snprintf(h->spool, sizeof(h->spool), "%s/hostile.spool", dir);
	FILE *f = fopen(h->spool, "wb");
	REQUIRE(f);
	REQUIRE(fwrite(s.sink.data, 1, s.sink.len, f) == s.sink.len);
	fclose(f);
	fx_spool_free(&s);
}

SP_TEST(hostile_module_paths_never_block_or_mislead)
{
	hostile h;
	make_hostile(&h);
	signal(SIGALRM, on_alarm);
	alarm(30);
	double t0 = rel_now();
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(h.spool, NULL, &sp));
	stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
	o.flags = STACKPULSE_SYM_NO_CACHE;
	o.debug_dirs = "/nonexistent-debug-root";
	stackpulse_symbolizer *sym;
	REQUIRE_OK(stackpulse_symbolizer_new(sp, &o, &sym));
	static fx_frames c;
	c.n = 0;
	REQUIRE_OK(stackpulse_symbolizer_for_each_stack_frame(sym, h.stack, fx_collect, &c));
	alarm(0);
	double took = rel_now() - t0;
	printf("hostile symbolize took %.3f s\n", took);
	CHECK(took < 20);
	REQUIRE_EQ(c.n, N_PATHS);
	/* Control: the right build-id resolves. */
	CHECK_STR(c.f[0].name, "rel_victim_fn");
	for (int i = 1; i < N_PATHS; i++) {
		printf("  %-40s -> %s\n", h.paths[i], c.f[i].name);
		CHECK_STR(c.f[i].module, h.paths[i]);
		if (i == 5)
			continue; /* The huge file is a regular ELF with the right id. */
		CHECK(strcmp(c.f[i].name, "rel_victim_fn") != 0);
		CHECK(strstr(c.f[i].name, "+0x") != NULL);
		CHECK(!c.f[i].has_file);
	}
	struct stackpulse_symbolizer_stats k;
	k.sz = sizeof(k);
	REQUIRE_OK(stackpulse_symbolizer_stats(sym, &k));
	printf("  opened %llu binaries, %llu build-id mismatches\n",
	       (unsigned long long)k.binaries_opened, (unsigned long long)k.build_id_mismatch);
	CHECK(k.build_id_mismatch >= 1);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(sp);
}

/* The report example on the same spool, traced: it ends in time and never
 * reads from the FIFO, a device or a /proc mem file. */
SP_TEST(report_on_hostile_spool_reads_only_regular_files)
{
	if (system("command -v strace >/dev/null 2>&1") != 0)
		sp_test_skip("strace not installed");
	const char *bin_dir = getenv("SP_BIN_DIR");
	char report[700];
	snprintf(report, sizeof(report), "%s/report", bin_dir ? bin_dir : "zig-out/bin");
	if (access(report, X_OK) != 0)
		sp_test_skip("report example not built (zig build examples)");
	hostile h;
	make_hostile(&h);
	char trace[700], cmd[4096];
	snprintf(trace, sizeof(trace), "%s/report.strace", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "STACKPULSE_SYMBOL_CACHE_DIR='%s/cache' STACKPULSE_DEBUG_DIRS=/nonexistent "
	         "timeout 60 strace -f -qq -y -o '%s' -e "
	         "trace=openat,read,pread64,readv,preadv,mmap "
	         "'%s' '%s' >/dev/null 2>&1",
	         sp_test_tmpdir(), trace, report, h.spool);
	int rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) != 124);
	FILE *f = fopen(trace, "r");
	REQUIRE(f);
	char line[4096];
	int bad = 0, lines = 0, saw_victim = 0;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		int is_read = strstr(line, "read(") || strstr(line, "read64(") ||
		              strstr(line, "readv(") || strstr(line, "mmap(");
		if (strstr(line, "victim"))
			saw_victim = 1;
		if (!is_read)
			continue;
		if (strstr(line, "/fifo>") || strstr(line, "</dev/zero>") ||
		    strstr(line, "/mem>") || strstr(line, "<pipe:")) {
			printf("  forbidden read: %s", line);
			bad++;
		}
	}
	fclose(f);
	if (lines <= 10 || !saw_victim) {
		/* Show what ran, to tell a broken environment from a bug. */
		printf("  report exit %d; trace:\n", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
		snprintf(cmd, sizeof(cmd), "head -n 30 '%s' | sed 's/^/    /'", trace);
		if (system(cmd) != 0)
			printf("    (no trace)\n");
	}
	CHECK(lines > 10);
	CHECK(saw_victim); /* The trace did cover module lookups. */
	CHECK_EQ(bad, 0);
}
