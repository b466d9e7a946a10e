/* The unwinder against real samples: a target built with -O2 and no frame
 * pointers is sampled with perf_event_open (user regs + stack copy), and
 * every unwound frame is checked against the binaries' symbol tables. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "stackpulse.h"
#include "perf_sampler.c"
#include "unwind/unwind.h"
#include "unwind/unwind_internal.h"

#include <elfutils/libdwelf.h>

#define MAX_FRAMES 128

typedef struct capture {
	ps_procmap *maps;
	int nmaps;
	ps_samples samples;
	sp_unwinder *u;
	sp_unwind_space *space;
	ps_symtab tabs[2];
	char exe[512];
} capture;

static const char *target_dir(void)
{
	const char *dir = ps_target_dir(sp_test_source_root(), sp_test_tmpdir());
	if (!dir)
		sp_test_skip("cannot build the target with gcc");
	return dir;
}

static void capture_free(capture *c)
{
	ps_samples_free(&c->samples);
	free(c->maps);
	sp_unwind_space_free(c->space);
	sp_unwinder_free(c->u);
	ps_symtab_free(&c->tabs[0]);
	ps_symtab_free(&c->tabs[1]);
	memset(c, 0, sizeof(*c));
}

/* Starts the target in @p mode, feeds its mappings to a fresh unwinder,
 * samples it for @p ms and stops it. With @p deleted, the executable is a
 * private copy unlinked right after start. Skips when perf is refused. */
static void capture_start(capture *c, const char *mode, const char *arg, int deleted,
                          uint32_t stack_size, unsigned ms, const char *ns_dir, int widen,
                          const char *exe_name);

static void capture_run(capture *c, const char *mode, const char *arg, int deleted,
                        uint32_t stack_size, unsigned ms)
{
	capture_start(c, mode, arg, deleted, stack_size, ms, NULL, 0, "sptarget");
}

/* With @p ns_dir, the target runs in a private mount namespace from a copy
 * on a tmpfs mounted at @p ns_dir there (empty in ours). With @p widen,
 * mappings are fed one page longer so map_files cannot serve them and the
 * target's /proc/PID/root must. */
static void capture_start(capture *c, const char *mode, const char *arg, int deleted,
                          uint32_t stack_size, unsigned ms, const char *ns_dir, int widen,
                          const char *exe_name)
{
	memset(c, 0, sizeof(*c));
	const char *dir = target_dir();
	snprintf(c->exe, sizeof(c->exe), "%s/%s", dir, exe_name);
	if (deleted) {
		char cmd[1200];
		snprintf(c->exe, sizeof(c->exe), "%s/sptarget_deleted", dir);
		snprintf(cmd, sizeof(cmd), "cp %s/sptarget %s", dir, c->exe);
		REQUIRE(system(cmd) == 0);
	}
	char lib[512];
	snprintf(lib, sizeof(lib), "%s/libsptarget.so", dir);
	REQUIRE(ps_symtab_load(&c->tabs[0], c->exe) == 0);
	REQUIRE(ps_symtab_load(&c->tabs[1], lib) == 0);
	char *args[] = { c->exe, (char *)mode, (char *)arg, NULL };
	char script[2048];
	char *ns_args[] = { "unshare", "-m", "--propagation", "private", "sh", "-c", script, NULL };
	if (ns_dir) {
		snprintf(script, sizeof(script),
		         "mount -t tmpfs none %s && cp %s %s/sptarget && exec %s/sptarget %s %s",
		         ns_dir, c->exe, ns_dir, ns_dir, mode, arg);
		snprintf(c->tabs[0].path, sizeof(c->tabs[0].path), "%s/sptarget", ns_dir);
	}
	pid_t pid = ns_dir ? ps_start_target("/usr/bin/unshare", ns_args)
	                   : ps_start_target(c->exe, args);
	if (ns_dir && pid <= 0)
		sp_test_skip("unshare -m failed (needs root)");
	REQUIRE(pid > 0);
	if (deleted)
		CHECK(unlink(c->exe) == 0);
	c->nmaps = ps_read_maps(pid, &c->maps);
	int rc = c->nmaps > 0 ? 0 : -1;
	if (rc == 0)
		rc = sp_unwinder_new(&c->u);
	if (rc == 0)
		rc = sp_unwind_space_new(c->u, pid, &c->space);
	for (int i = 0; widen && i < c->nmaps; i++)
		c->maps[i].end += 4096;
	if (rc == 0)
		rc = ps_feed_maps(c->space, c->maps, c->nmaps);
	int prc = rc == 0 ? ps_sample_process(pid, 1000, stack_size, ms, &c->samples) : 0;
	ps_stop_target(pid);
	REQUIRE_OK(rc);
	if (prc == -EACCES || prc == -EPERM || prc == -ENOENT || prc == -ENOSYS)
		sp_test_skip("perf_event_open refused");
	REQUIRE_EQ(prc, 0);
	REQUIRE(c->samples.n > 50);
}

typedef struct unwound {
	uint64_t pcs[MAX_FRAMES];
	const char *names[MAX_FRAMES];
	sp_unwind_result r;
} unwound;

static void unwind_one(capture *c, const ps_sample *s, size_t stack_len, unwound *w)
{
	memset(w, 0, sizeof(*w));
	CHECK_OK(sp_unwind(c->space, &s->regs, s->stack, stack_len, s->sp, w->pcs, MAX_FRAMES,
	                   &w->r));
	for (uint32_t i = 0; i < w->r.count; i++)
		w->names[i] = ps_symbolize(c->maps, c->nmaps, c->tabs, 2, w->pcs[i], i == 0);
}

static int name_is(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

/* Checks that samples whose leaf frame is @p chain[0] unwind through the
 * whole @p chain in order in more than 95% of cases. Returns how many of
 * those used the frame-pointer fallback. */
static size_t check_chain(capture *c, const char *const *chain, int len)
{
	size_t hits = 0, good = 0, natural = 0, fp = 0;
	unwound w;
	for (size_t i = 0; i < c->samples.n; i++) {
		unwind_one(c, &c->samples.v[i], c->samples.v[i].stack_len, &w);
		if (!name_is(w.names[0], chain[0]))
			continue;
		hits++;
		int ok = w.r.count >= (uint32_t)len;
		for (int k = 1; ok && k < len; k++)
			ok = name_is(w.names[k], chain[k]);
		good += (size_t)ok;
		natural += ok && !w.r.truncated;
		fp += (size_t)w.r.used_fp;
	}
	printf("    %s: %zu samples, %zu in %s, %zu full chains, %zu reached the end\n", chain[0],
	       c->samples.n, hits, chain[0], good, natural);
	REQUIRE(hits >= 20);
	CHECK(good * 100 > hits * 95);
	CHECK(natural * 100 > hits * 95);
	return fp;
}

SP_TEST(ladder_unwinds_through_callers)
{
	capture c;
	capture_run(&c, "ladder", "", 0, 16384, 300);
	const char *chain[] = { "leaf", "middle", "entry", "main" };
	check_chain(&c, chain, 4);
	capture_free(&c);
}

/* No CFI for the program's own code, but frame pointers: the fallback
 * walks it, and CFI takes over again in libc. */
SP_TEST(frame_pointer_fallback_without_cfi)
{
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/sptarget_fp", target_dir());
	if (access(exe, X_OK) != 0)
		sp_test_skip("no clang to build the frame-pointer target");
	capture c;
	capture_start(&c, "ladder", "", 0, 16384, 300, NULL, 0, "sptarget_fp");
	const char *chain[] = { "leaf", "middle", "entry", "main" };
	size_t fp = check_chain(&c, chain, 4);
	CHECK(fp > 20);
	capture_free(&c);
}

/* The program's CFI is only in .debug_frame; no frame pointers either. */
SP_TEST(debug_frame_only_binary)
{
	capture c;
	capture_start(&c, "ladder", "", 0, 16384, 300, NULL, 0, "sptarget_dbgframe");
	const char *chain[] = { "leaf", "middle", "entry", "main" };
	size_t fp = check_chain(&c, chain, 4);
	CHECK_EQ(fp, 0);
	capture_free(&c);
}

/* clock_gettime runs in the vDSO: its CFI comes from our own vDSO image. */
SP_TEST(vdso_frames_unwind)
{
	capture c;
	capture_run(&c, "vdso", "", 0, 16384, 300);
	uint64_t vs = 0, ve = 0;
	for (int i = 0; i < c.nmaps; i++) {
		if (strcmp(c.maps[i].path, "[vdso]") == 0) {
			vs = c.maps[i].start;
			ve = c.maps[i].end;
		}
	}
	REQUIRE(ve > vs);
	size_t in_vdso = 0, good = 0, fp = 0;
	unwound w;
	for (size_t i = 0; i < c.samples.n; i++) {
		unwind_one(&c, &c.samples.v[i], c.samples.v[i].stack_len, &w);
		if (w.pcs[0] < vs || w.pcs[0] >= ve)
			continue;
		in_vdso++;
		uint32_t k = 1;
		while (k < w.r.count && !name_is(w.names[k], "vdso_entry"))
			k++;
		good += k + 1 < w.r.count && name_is(w.names[k + 1], "main") && !w.r.truncated;
		fp += (size_t)w.r.used_fp;
	}
	printf("    %zu of %zu samples in the vDSO, %zu unwound to main, %zu by frame pointers\n",
	       in_vdso, c.samples.n, good, fp);
	if (in_vdso < 20)
		sp_test_skip(
		        "too few samples in the vDSO (clock_gettime falls back to a syscall?)");
	CHECK(good * 100 > in_vdso * 95);
	/* The vDSO's own CFI was used (our process's copy: valgrind maps
	 * none, and the unwinder then falls back to frame pointers). */
	if (!sp_test_under_valgrind())
		CHECK(fp == 0);
	capture_free(&c);
}

SP_TEST(recursion_depth_matches)
{
	capture c;
	capture_run(&c, "recurse", "12", 0, 16384, 300);
	size_t hits = 0, good = 0;
	unwound w;
	for (size_t i = 0; i < c.samples.n; i++) {
		unwind_one(&c, &c.samples.v[i], c.samples.v[i].stack_len, &w);
		if (!name_is(w.names[0], "rec_leaf"))
			continue;
		hits++;
		uint32_t k = 1;
		while (k < w.r.count && name_is(w.names[k], "recurse"))
			k++;
		good += k - 1 == 13 && k < w.r.count && name_is(w.names[k], "main");
	}
	printf("    rec_leaf: %zu samples, %zu with 13 recurse frames then main\n", hits, good);
	REQUIRE(hits >= 20);
	CHECK(good * 100 > hits * 95);
	capture_free(&c);
}

SP_TEST(shared_library_frames)
{
	capture c;
	capture_run(&c, "shlib", "", 0, 16384, 300);
	const char *chain[] = { "sp_lib_inner", "sp_lib_outer", "shlib_entry", "main" };
	check_chain(&c, chain, 4);
	capture_free(&c);
}

/* A leaf in a PLT stub: its CFI computes the CFA from rip (a DWARF
 * expression on the sampled IP). */
SP_TEST(plt_stub_leaf_unwinds)
{
	capture c;
	capture_run(&c, "plt", "", 0, 16384, 300);
	const char *chain[] = { "[plt]", "plt_entry", "main" };
	check_chain(&c, chain, 3);
	capture_free(&c);
}

SP_TEST(deleted_executable_still_unwinds)
{
	capture c;
	capture_run(&c, "ladder", "", 1, 16384, 300);
	int saw_deleted = 0;
	for (int i = 0; i < c.nmaps; i++)
		saw_deleted |= strstr(c.maps[i].path, "sptarget_deleted (deleted)") != NULL;
	CHECK(saw_deleted);
	const char *chain[] = { "leaf", "middle", "entry", "main" };
	check_chain(&c, chain, 4);
	capture_free(&c);
}

/* A signal handler interrupting sig_middle: the walk goes through the
 * sigreturn trampoline back into the interrupted frames. */
SP_TEST(signal_frames_unwind)
{
	capture c;
	capture_run(&c, "signal", "", 0, 16384, 300);
	size_t hits = 0, good = 0;
	unwound w;
	for (size_t i = 0; i < c.samples.n; i++) {
		unwind_one(&c, &c.samples.v[i], c.samples.v[i].stack_len, &w);
		if (!name_is(w.names[0], "sig_leaf"))
			continue;
		hits++;
		int ok = w.r.count > 3 && name_is(w.names[1], "on_signal");
		uint32_t k = 2;
		while (ok && k < w.r.count && !name_is(w.names[k], "sig_middle"))
			k++;
		ok = ok && k + 1 < w.r.count && name_is(w.names[k + 1], "main");
		good += (size_t)ok;
	}
	printf("    sig_leaf: %zu samples, %zu through the signal frame to main\n", hits, good);
	REQUIRE(hits >= 20);
	CHECK(good * 100 > hits * 90);
	capture_free(&c);
}

/* Cutting the stack copy short must give a prefix of the full unwind,
 * flagged as truncated, never other addresses. */
SP_TEST(short_stack_copy_truncates_cleanly)
{
	capture c;
	capture_run(&c, "recurse", "30", 0, 16384, 300);
	static const size_t cuts[] = { 0, 8, 24, 64, 200, 512, 1000 };
	size_t checked = 0, truncated = 0;
	unwound full, cut;
	for (size_t i = 0; i < c.samples.n; i++) {
		const ps_sample *s = &c.samples.v[i];
		unwind_one(&c, s, s->stack_len, &full);
		if (full.r.truncated || full.r.count < 10)
			continue;
		for (size_t j = 0; j < sizeof(cuts) / sizeof(cuts[0]); j++) {
			if (cuts[j] >= s->stack_len)
				continue;
			unwind_one(&c, s, cuts[j], &cut);
			/* A cut above every saved return address loses nothing. */
			CHECK(cut.r.count >= 1 && cut.r.count <= full.r.count);
			CHECK(cut.r.truncated == (cut.r.count < full.r.count));
			truncated += (size_t)cut.r.truncated;
			for (uint32_t k = 0; k < cut.r.count && k < full.r.count; k++)
				CHECK(cut.pcs[k] == full.pcs[k]);
			checked++;
		}
	}
	REQUIRE(checked > 50);
	CHECK(truncated * 10 > checked * 8);
	capture_free(&c);
}

/* A really tiny sample_stack_user: deep stacks come back truncated and
 * every emitted frame is a real function of the target. */
SP_TEST(tiny_stack_size_truncates)
{
	capture c;
	capture_run(&c, "recurse", "40", 0, 512, 300);
	size_t hits = 0, bad = 0;
	unwound w;
	for (size_t i = 0; i < c.samples.n; i++) {
		unwind_one(&c, &c.samples.v[i], c.samples.v[i].stack_len, &w);
		if (!name_is(w.names[0], "rec_leaf"))
			continue;
		hits++;
		CHECK(w.r.truncated);
		CHECK(w.r.count > 2);
		for (uint32_t k = 1; k < w.r.count; k++)
			bad += !name_is(w.names[k], "recurse");
	}
	REQUIRE(hits >= 20);
	CHECK_EQ(bad, 0);
	capture_free(&c);
}

/* fork copies the mappings; exec (clear) drops them in one space without
 * touching the other. */
SP_TEST(fork_and_clear_spaces)
{
	capture c;
	capture_run(&c, "shlib", "", 0, 16384, 300);
	sp_unwind_space *child = NULL;
	REQUIRE_OK(sp_unwind_space_fork(c.space, 4242, &child));
	size_t compared = 0;
	unwound a, b;
	for (size_t i = 0; i < c.samples.n; i++) {
		const ps_sample *s = &c.samples.v[i];
		unwind_one(&c, s, s->stack_len, &a);
		sp_unwind_space *parent = c.space;
		c.space = child;
		unwind_one(&c, s, s->stack_len, &b);
		c.space = parent;
		CHECK_EQ(a.r.count, b.r.count);
		CHECK(memcmp(a.pcs, b.pcs, a.r.count * sizeof(uint64_t)) == 0);
		compared++;
	}
	REQUIRE(compared > 0);

	/* exec: nothing is mapped, so only the sampled IP comes back. */
	sp_unwind_space_clear(child);
	for (size_t i = 0; i < c.samples.n; i++) {
		const ps_sample *s = &c.samples.v[i];
		sp_unwind_result r;
		uint64_t pcs[MAX_FRAMES];
		CHECK_OK(sp_unwind(child, &s->regs, s->stack, s->stack_len, s->sp, pcs, MAX_FRAMES,
		                   &r));
		CHECK_EQ(r.count, 1);
	}
	/* The parent keeps its mappings. */
	unwind_one(&c, &c.samples.v[0], c.samples.v[0].stack_len, &a);
	CHECK(a.r.count > 1);
	sp_unwind_space_free(child);
	capture_free(&c);
}

/* A target in another mount namespace, whose executable does not exist in
 * ours: opened through map_files, and through /proc/PID/root. */
SP_TEST(private_mount_namespace_target)
{
	char ns_dir[400];
	snprintf(ns_dir, sizeof(ns_dir), "%s/ns", sp_test_tmpdir());
	char cmd[500];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", ns_dir);
	REQUIRE(system(cmd) == 0);
	const char *chain[] = { "leaf", "middle", "entry", "main" };
	for (int widen = 0; widen < 2; widen++) {
		capture c;
		capture_start(&c, "ladder", "", 0, 16384, 300, ns_dir, widen, "sptarget");
		char exe[512];
		snprintf(exe, sizeof(exe), "%s/sptarget", ns_dir);
		CHECK(access(exe, F_OK) != 0); /* Not visible from here. */
		int seen = 0;
		for (int i = 0; i < c.nmaps; i++)
			seen |= strcmp(c.maps[i].path, exe) == 0;
		CHECK(seen);
		check_chain(&c, chain, 4);
		capture_free(&c);
	}
}

/* Build-ids: a known one reuses the cached binary without opening a file,
 * a wrong one refuses the file (its frames fall back to frame pointers,
 * which this target lacks), and a second space shares the binaries. */
SP_TEST(build_ids_and_shared_binaries)
{
	capture c;
	capture_run(&c, "ladder", "", 0, 16384, 300);
	size_t cached = c.u->nbins;
	CHECK(cached >= 3); /* sptarget, libsptarget.so, libc, ld.so, vdso */

	Elf *elf = NULL;
	int fd = open(c.exe, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	REQUIRE(elf);
	const void *id = NULL;
	ssize_t idlen = dwelf_elf_gnu_build_id(elf, &id);
	REQUIRE(idlen > 0 && idlen <= 64);
	uint8_t good[64], bad[64];
	memcpy(good, id, (size_t)idlen);
	memcpy(bad, id, (size_t)idlen);
	bad[0] ^= 0xff;
	elf_end(elf);
	close(fd);

	for (int wrong = 0; wrong < 2; wrong++) {
		sp_unwind_space *s2 = NULL;
		REQUIRE_OK(sp_unwind_space_new(c.u, 99999999, &s2)); /* No such pid. */
		for (int i = 0; i < c.nmaps; i++) {
			const ps_procmap *m = &c.maps[i];
			int is_exe = strcmp(m->path, c.exe) == 0;
			CHECK_OK(sp_unwind_space_map(s2, m->start, m->end, m->pgoff,
			                             m->path[0] ? m->path : "//anon",
			                             is_exe ? (wrong ? bad : good) : NULL,
			                             is_exe ? (uint32_t)idlen : 0));
		}
		size_t hits = 0, full = 0;
		unwound w;
		sp_unwind_space *orig = c.space;
		c.space = s2;
		for (size_t i = 0; i < c.samples.n; i++) {
			unwind_one(&c, &c.samples.v[i], c.samples.v[i].stack_len, &w);
			if (!name_is(w.names[0], "leaf"))
				continue;
			hits++;
			full += w.r.count >= 4 && name_is(w.names[1], "middle") &&
			        name_is(w.names[2], "entry") && name_is(w.names[3], "main");
		}
		c.space = orig;
		sp_unwind_space_free(s2);
		REQUIRE(hits >= 20);
		if (wrong)
			CHECK_EQ(full, 0);
		else
			CHECK(full * 100 > hits * 95);
	}
	/* The second space (pid gone) found everything in the cache. */
	CHECK_EQ(c.u->nbins, cached);
	capture_free(&c);
}
