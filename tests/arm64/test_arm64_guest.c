/* Recording, unwinding and symbolizing on aarch64, run inside the guest of
 * `zig build test-arm64-vm` (.ci/arm64-vm). The workloads are
 * tests/arm64/targets/tree.c built for aarch64 three ways (SP_BIN_DIR):
 * tree-cfi (-O2, no frame pointers: CFI), tree-fp (frame pointers, no CFI
 * at all: the frame-pointer fallback), tree-pac (-mbranch-protection=
 * standard: return addresses signed with pointer authentication).
 * SP_ARM64_SECS scales every workload (TCG is slow); spools worth checking
 * on the host go to SP_ARM64_OUT. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../record/rec_util.h"
#include "arm64_util.h"
#include "rec_stats.h"

extern char **environ;

static const char *bin_dir(void)
{
	const char *d = getenv("SP_BIN_DIR");
	return d && *d ? d : ".";
}

static const char *secs(void)
{
	const char *s = getenv("SP_ARM64_SECS");
	return s && *s ? s : "1.5";
}

/* Where a spool of @p name goes: SP_ARM64_OUT when set (kept for the
 * host check), else the scratch directory. */
static void spool_path(char *buf, size_t cap, const char *name)
{
	const char *out = getenv("SP_ARM64_OUT");
	snprintf(buf, cap, "%s/%s.spool", out && *out ? out : sp_test_tmpdir(), name);
}

static stackpulse_recorder_opts opts(void)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 249;
	o.cache_dir = "";
	return o;
}

/* Spawns BIN_DIR/@p variant (or @p argv0 when absolute) with @p mode and
 * records it into @p spool. */
static void record_spawn(const char *variant, const char *mode, const char *spool,
                         stackpulse_recorder_opts *o)
{
	char bin[512];
	snprintf(bin, sizeof(bin), "%s/%s", bin_dir(), variant);
	char *argv[] = { bin, (char *)mode, (char *)secs(), NULL };
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, o, &rec, &pid));
	CHECK_OK(rec_run(rec, 120));
	struct rec_stats st = { 0 };
	CHECK_OK(rec_stats_get(rec, &st));
	REQUIRE_OK(rec_finish(rec));
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);
	fprintf(stderr, "    %s %s: %llu samples, %llu truncated, kernel frames %d\n", variant,
	        mode, (unsigned long long)st.samples, (unsigned long long)st.truncated_stacks,
	        st.kernel_frames);
}

/* @p part of @p whole samples, at least @p floor and @p pct percent; the
 * first lines of @p f are shown when not. */
static void check_share(const a64_folded *f, size_t part, size_t whole, size_t floor, size_t pct)
{
	CHECK(part >= floor);
	CHECK(part * 100 >= whole * pct);
	if (part < floor || part * 100 < whole * pct)
		a64_dump(f, 15);
}

/* The leaf chain must be whole in nearly every leaf sample. TCG on a loaded
 * machine spends much of a short run in exec and the loader, so 10 leaf
 * samples is the floor. */
static void check_chain(const a64_folded *f, const char *chain)
{
	size_t in_leaf = 0;
	size_t good = a64_leaf(f, "leaf_spin", chain, &in_leaf);
	CHECK(in_leaf >= 10);
	check_share(f, good, in_leaf, 0, 95);
}

static const char *const full_chain = "main;outer;middle;leaf_spin";

SP_TEST(guest_is_aarch64)
{
	struct utsname u;
	REQUIRE(uname(&u) == 0);
	CHECK_STR(u.machine, "aarch64");
}

/* -O2 without frame pointers: only CFI gets past middle(), and samples in
 * the leaf need x30, which holds the return address there. */
SP_TEST(spawn_cfi_leaf_in_x30)
{
	char spool[600];
	spool_path(spool, sizeof(spool), "cfi");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-cfi", "spin", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	check_chain(&f, full_chain);
	a64_free(&f);
}

/* Frame pointers and no CFI anywhere in the binary (.eh_frame without
 * these functions, no .debug_frame): the frame-pointer fallback walks the
 * frame records, and the frameless leaf is joined to its caller by x30. */
SP_TEST(spawn_frame_pointer_fallback)
{
	char bin[512], spool[600];
	snprintf(bin, sizeof(bin), "%s/tree-fp", bin_dir());
	size_t len = 0;
	char *data = sp_test_read_file(bin, &len);
	REQUIRE(data != NULL);
	CHECK(memmem(data, len, ".debug_frame", 12) == NULL);
	free(data);
	spool_path(spool, sizeof(spool), "fp");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-fp", "spin", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	check_chain(&f, full_chain);
	a64_free(&f);
}

static int file_has_u32(const char *path, uint32_t insn)
{
	size_t len = 0;
	char *data = sp_test_read_file(path, &len);
	int found = 0;
	for (size_t i = 0; data && i + 4 <= len && !found; i += 4) {
		uint32_t v;
		memcpy(&v, data + i, 4);
		found = v == insn;
	}
	free(data);
	return found;
}

/* -mbranch-protection=standard: middle() and outer() sign x30 (paciasp)
 * before saving it, so the saved return addresses carry a PAC in their top
 * bits; -cpu max implements it, so they must be stripped before lookup. */
SP_TEST(spawn_pointer_authentication)
{
	char bin[512], spool[600];
	snprintf(bin, sizeof(bin), "%s/tree-pac", bin_dir());
	REQUIRE(file_has_u32(bin, 0xd503233fu)); /* paciasp */
	char *cpuinfo = sp_test_read_file("/proc/cpuinfo", NULL);
	REQUIRE(cpuinfo != NULL);
	CHECK(strstr(cpuinfo, " paca") != NULL);
	free(cpuinfo);
	spool_path(spool, sizeof(spool), "pac");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-pac", "spin", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	check_chain(&f, full_chain);
	a64_free(&f);
}

SP_TEST(threads_each_unwound)
{
	char spool[600];
	spool_path(spool, sizeof(spool), "threads");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-cfi", "threads", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	pid_t tids[8];
	size_t ntids = 0, in_thread = 0;
	for (size_t i = 0; i < f.n; i++) {
		if (!strstr(f.lines[i], "thread_main;outer;middle;leaf_spin") &&
		    !strstr(f.lines[i], "main;outer;middle;leaf_spin"))
			continue;
		in_thread += strstr(f.lines[i], "thread_main;outer") != NULL;
		size_t k = 0;
		while (k < ntids && tids[k] != f.tids[i])
			k++;
		if (k == ntids && ntids < 8)
			tids[ntids++] = f.tids[i];
	}
	fprintf(stderr, "    %zu threads with whole stacks, %zu samples in thread_main\n", ntids,
	        in_thread);
	CHECK(ntids == 3);
	CHECK(in_thread >= 20);
	a64_free(&f);
}

/* A forked child execs the same binary: its samples come from another pid
 * with a whole stack in the new image. */
SP_TEST(fork_and_exec_children)
{
	char spool[600];
	spool_path(spool, sizeof(spool), "forkexec");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-cfi", "forkexec", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	pid_t pids[4];
	size_t npids = 0;
	for (size_t i = 0; i < f.n; i++) {
		if (!strstr(f.lines[i], full_chain))
			continue;
		size_t k = 0;
		while (k < npids && pids[k] != f.pids[i])
			k++;
		if (k == npids && npids < 4)
			pids[npids++] = f.pids[i];
	}
	fprintf(stderr, "    %zu processes with whole stacks\n", npids);
	CHECK(npids == 2);
	a64_free(&f);
}

/* Attaches to a running tree-cfi in @p mode. */
static void attach_mode(enum stackpulse_attach_mode mode, const char *name)
{
	char bin[512], spool[600], longer[32];
	snprintf(bin, sizeof(bin), "%s/tree-cfi", bin_dir());
	snprintf(longer, sizeof(longer), "%.2f", atof(secs()) + 1.0);
	char *argv[] = { bin, "spin", longer, NULL };
	pid_t pid = 0;
	REQUIRE(posix_spawn(&pid, bin, NULL, NULL, argv, environ) == 0);
	usleep(500 * 1000);
	spool_path(spool, sizeof(spool), name);
	stackpulse_recorder_opts o = opts();
	stackpulse_recorder *rec = NULL;
	int rc = stackpulse_recorder_attach(pid, spool, mode, &o, &rec);
	CHECK_OK(rc);
	if (rc == 0) {
		CHECK_OK(rec_run(rec, 120));
		CHECK_OK(rec_finish(rec));
	}
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);
	if (rc)
		return;
	a64_folded f;
	a64_fold(spool, 0, &f);
	check_chain(&f, full_chain);
	a64_free(&f);
}

SP_TEST(attach_stop_enable_resume)
{
	attach_mode(STACKPULSE_ATTACH_STOP_ENABLE_RESUME, "attach-stop");
}

SP_TEST(attach_live)
{
	attach_mode(STACKPULSE_ATTACH_LIVE, "attach-live");
}

/* clock_gettime runs in the vDSO (glibc tail-calls it): the walk goes
 * through the vDSO's frames, by the CFI of our own vDSO image (same kernel),
 * to main, and the frames are named from that image's symbols, embedded at
 * finish (__kernel_clock_gettime, as perf names it). */
SP_TEST(vdso_frames)
{
	char spool[600];
	spool_path(spool, sizeof(spool), "vdso");
	stackpulse_recorder_opts o = opts();
	record_spawn("tree-cfi", "vdso", spool, &o);
	a64_folded f;
	a64_fold(spool, STACKPULSE_SYM_OFFLINE, &f);
	size_t in_vdso = a64_count(&f, ";vdso:"), through = a64_count(&f, "main;vdso_loop;vdso:");
	size_t named = a64_count(&f, "main;vdso_loop;vdso:__kernel_clock_gettime");
	fprintf(stderr, "    %zu samples in the vDSO, %zu of them unwound to main, %zu named\n",
	        in_vdso, through, named);
	CHECK(in_vdso >= 10);
	check_share(&f, through, in_vdso, 0, 90);
	check_share(&f, named, in_vdso, 0, 90);
	a64_free(&f);
}

/* getppid in a loop: kernel frames named from /proc/kallsyms (the guest
 * runs as root), under the user stack main;syscall_loop. */
SP_TEST(kernel_frames_and_kallsyms)
{
	char spool[600];
	spool_path(spool, sizeof(spool), "kernel");
	stackpulse_recorder_opts o = opts();
	o.kernel = STACKPULSE_FEATURE_REQUIRED;
	record_spawn("tree-cfi", "syscall", spool, &o);
	a64_folded f;
	a64_fold(spool, 0, &f);
	size_t in_kernel = a64_count(&f, "main;syscall_loop;"), svc = a64_count(&f, "k:el0_svc");
	fprintf(stderr, "    %zu samples under syscall_loop, %zu through k:el0_svc\n", in_kernel,
	        svc);
	CHECK(svc >= 10);
	CHECK(a64_count(&f, "k:invoke_syscall") >= 10);
	if (svc < 10)
		a64_dump(&f, 15);
	a64_free(&f);
}

/* Debian's arm64 /usr/bin/python3.11 running tests/record/targets/pyladder.py:
 * Python frames merged into the native stacks. */
static const char *const py_chain = "py:py_entry;py:py_middle;py:py_leaf";

SP_TEST(cpython_311_frames)
{
	char script[512], spool[600];
	snprintf(script, sizeof(script), "%s/pyladder.py", bin_dir());
	char *argv[] = { "/usr/bin/python3.11", script, (char *)secs(), NULL };
	spool_path(spool, sizeof(spool), "python");
	stackpulse_recorder_opts o = opts();
	o.python = STACKPULSE_FEATURE_REQUIRED;
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rec_run(rec, 120));
	REQUIRE_OK(rec_finish(rec));
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);
	a64_folded f;
	a64_fold(spool, 0, &f);
	/* Most samples fall in the interpreter's start-up under TCG. Of those
	 * that run the script (under _PyRun_SimpleFileObject's PyEval_EvalCode),
	 * nearly all must show Python frames, and nearly all of those in py_leaf
	 * its whole chain. The script's own loop (<module> calling
	 * time.monotonic) takes a share that grows with TCG's slowness, so the
	 * chain is checked on py_leaf's samples, not on all. */
	size_t with_py = 0, running = 0, in_leaf = 0, whole = 0;
	for (size_t i = 0; i < f.n; i++) {
		const char *run = strstr(f.lines[i], "_PyRun_SimpleFileObject;");
		if (!run || !strstr(run, "PyEval_EvalCode;"))
			continue;
		running++;
		with_py += strstr(run, "py:") != NULL;
		if (strstr(run, "py:py_leaf")) {
			in_leaf++;
			whole += strstr(run, py_chain) != NULL;
		}
	}
	fprintf(stderr,
	        "    %zu of %zu samples running the script have Python frames; %zu of %zu in "
	        "py_leaf show %s\n",
	        with_py, running, whole, in_leaf, py_chain);
	check_share(&f, with_py, running, 10, 90);
	check_share(&f, whole, in_leaf, 10, 95);
	a64_free(&f);
}

/* The example programs on PATH in the guest: record, then report. */
SP_TEST(record_and_report_examples)
{
	char cmd[2048];
	const char *d = sp_test_tmpdir();
	snprintf(cmd, sizeof(cmd),
	         "record -F 249 -o '%s/ex.spool' -- '%s/tree-pac' spin %s >'%s/rec.txt' 2>&1 && "
	         "report '%s/ex.spool' --folded >'%s/folded.txt'",
	         d, bin_dir(), secs(), d, d, d);
	CHECK_EQ(sp_test_run(cmd), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/folded.txt", d);
	char *folded = sp_test_read_file(path, NULL);
	REQUIRE(folded != NULL);
	CHECK(strstr(folded, "main;outer;middle;leaf_spin ") != NULL);
	free(folded);
}
