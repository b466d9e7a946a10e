/* Permissions degrade to partial results with a reason:
 *  - an unreadable or zeroed /proc/kallsyms (bind-mounted over, in a private
 *    mount namespace): recording works, kernel frames stay unnamed, and the
 *    spool says why (kernel_note) -- against a control run that names them;
 *  - an unreadable binary (mode 000, symbolized as nobody): its frames read
 *    module+offset, while root (control) resolves the same spool.
 * Unprivileged recording and a denied ptrace are covered by
 * tests/record/test_record_unpriv.c and test_record_errors.c. */
#include <sched.h>
#include <grp.h>
#include <sys/mount.h>

#include "rel_util.h"
#include "rec_stats.h"

typedef struct ksym_result {
	int setup, finish, kernel_frames;
	uint64_t samples;
	uint32_t ksyms, kframes, knamed;
	char note[200];
} ksym_result;

/* Records dd (many syscalls) with kernel frames on AUTO, after replacing
 * /proc/kallsyms by @p fake (NULL: leave it). Runs in a child so the mount
 * namespace dies with it. */
static ksym_result record_with_kallsyms(const char *fake)
{
	ksym_result r;
	memset(&r, 0, sizeof(r));
	char spool[600];
	snprintf(spool, sizeof(spool), "%s/ksym.spool", sp_test_tmpdir());
	int p[2];
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		close(p[0]);
		if (fake) {
			if (unshare(CLONE_NEWNS) != 0 ||
			    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
			    mount(fake, "/proc/kallsyms", "none", MS_BIND, NULL) != 0) {
				r.setup = -errno;
				ssize_t w = write(p[1], &r, sizeof(r));
				(void)w;
				_exit(0);
			}
		}
		stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
		o.frequency = 999;
		o.self_contained = 0;
		char *argv[] = { "dd",   "if=/dev/zero", "of=/dev/null",
			         "bs=1", "count=400000", "status=none",
			         NULL };
		stackpulse_recorder *rec;
		pid_t pid;
		int rc = stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid);
		if (rc == 0) {
			rel_run(rec, 30);
			rc = rec_finish(rec);
			waitpid(pid, NULL, 0);
		}
		r.finish = rc;
		stackpulse_spool *sp;
		if (rc == 0 && stackpulse_spool_open(spool, NULL, &sp) == 0) {
			const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
			r.samples = m->samples;
			r.kernel_frames = m->kernel_frames;
			snprintf(r.note, sizeof(r.note), "%s",
			         m->kernel_note ? m->kernel_note : "");
			r.ksyms = stackpulse_spool_ksym_count(sp);
			for (uint32_t i = 0; i < stackpulse_spool_frame_count(sp); i++) {
				const struct stackpulse_raw_frame *f =
				        stackpulse_spool_frame(sp, i);
				if (f->kind != STACKPULSE_FRAME_KERNEL)
					continue;
				r.kframes++;
				const char *name;
				if (stackpulse_spool_ksym_lookup(sp, f->offset, &name, NULL,
				                                 NULL) == 0)
					r.knamed++;
			}
			stackpulse_spool_close(sp);
		}
		ssize_t w = write(p[1], &r, sizeof(r));
		(void)w;
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], &r, sizeof(r));
	close(p[0]);
	waitpid(c, NULL, 0);
	REQUIRE(n == (ssize_t)sizeof(r));
	return r;
}

SP_TEST(unreadable_kallsyms_leaves_kernel_frames_unnamed_with_a_note)
{
	ksym_result ctl = record_with_kallsyms(NULL);
	printf("control: finish %d, %llu samples, kernel_frames %d, %u ksyms, %u/%u kernel frames "
	       "named, note \"%s\"\n",
	       ctl.finish, (unsigned long long)ctl.samples, ctl.kernel_frames, ctl.ksyms,
	       ctl.knamed, ctl.kframes, ctl.note);
	if (!ctl.kernel_frames || ctl.kframes == 0)
		sp_test_skip("no kernel frames here even with a readable kallsyms");
	CHECK(ctl.knamed > 0);

	char empty[600], zeroed[600];
	snprintf(empty, sizeof(empty), "%s/kallsyms_empty", sp_test_tmpdir());
	snprintf(zeroed, sizeof(zeroed), "%s/kallsyms_zeroed", sp_test_tmpdir());
	FILE *f = fopen(empty, "w");
	REQUIRE(f);
	fclose(f);
	/* What kptr_restrict shows: every address 0. */
	char cmd[1400];
	snprintf(cmd, sizeof(cmd),
	         "head -n 20000 /proc/kallsyms | sed 's/^[0-9a-f]*/0000000000000000/' > '%s'",
	         zeroed);
	REQUIRE(system(cmd) == 0);
	const char *fakes[] = { empty, zeroed };
	for (int i = 0; i < 2; i++) {
		ksym_result r = record_with_kallsyms(fakes[i]);
		if (r.setup)
			sp_test_skip("cannot bind-mount over /proc/kallsyms here");
		printf("%s kallsyms: finish %d, %llu samples, kernel_frames %d, %u ksyms, %u/%u "
		       "kernel "
		       "frames named, note \"%s\"\n",
		       i ? "zeroed" : "empty", r.finish, (unsigned long long)r.samples,
		       r.kernel_frames, r.ksyms, r.knamed, r.kframes, r.note);
		CHECK_EQ(r.finish, 0);
		CHECK(r.samples > 0);
		CHECK_EQ(r.knamed, 0);
		CHECK(r.note[0] != '\0'); /* The reason is in the spool. */
	}
}

static int get_name(const stackpulse_frame *fr, void *ctx)
{
	if (stackpulse_frame_inline_depth(fr) == 0)
		snprintf(ctx, 256, "%s", stackpulse_frame_func_name(fr));
	return 0;
}

/* Symbolizes @p spool's hottest frames as uid/gid @p uid in a child; returns
 * how many frames were resolved to "spin_leaf" and how many read
 * "spin_copy+0x...". */
static void symbolize_as(const char *spool, uid_t uid, int *named, int *raw)
{
	int p[2];
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		close(p[0]);
		int res[2] = { -1, -1 };
		if (uid && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		            setresuid(uid, uid, uid) != 0))
			goto out;
		stackpulse_spool *sp;
		if (stackpulse_spool_open(spool, NULL, &sp) != 0)
			goto out;
		stackpulse_symbolizer_opts o = STACKPULSE_SYMBOLIZER_OPTS;
		o.flags = STACKPULSE_SYM_NO_CACHE;
		o.debug_dirs = "/nonexistent";
		stackpulse_symbolizer *sym;
		if (stackpulse_symbolizer_new(sp, &o, &sym) != 0)
			goto out;
		res[0] = res[1] = 0;
		for (uint32_t i = 0; i < stackpulse_spool_frame_count(sp); i++) {
			const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, i);
			if (f->kind != STACKPULSE_FRAME_NATIVE)
				continue;
			const struct stackpulse_module *m = stackpulse_spool_module(sp, f->module);
			if (!m || !strstr(m->path, "spin_copy"))
				continue;
			char name[256] = "";
			stackpulse_symbolizer_resolve_frame(sym, i, get_name, name);
			res[0] += strcmp(name, "spin_leaf") == 0 || strcmp(name, "spin_mid") == 0;
			res[1] += strncmp(name, "spin_copy+0x", 12) == 0;
		}
		stackpulse_symbolizer_free(sym);
		stackpulse_spool_close(sp);
out:;
		ssize_t w = write(p[1], res, sizeof(res));
		(void)w;
		_exit(0);
	}
	close(p[1]);
	int res[2] = { -1, -1 };
	ssize_t n = read(p[0], res, sizeof(res));
	close(p[0]);
	waitpid(c, NULL, 0);
	REQUIRE(n == (ssize_t)sizeof(res));
	*named = res[0];
	*raw = res[1];
}

SP_TEST(unreadable_binary_gives_module_plus_offset)
{
	const char *spin = rel_target("spin");
	char dir[600], copy[700], spool[700];
	snprintf(dir, sizeof(dir), "%s/perm", sp_test_tmpdir());
	mkdir(dir, 0755);
	chmod(sp_test_tmpdir(), 0755);
	snprintf(copy, sizeof(copy), "%s/spin_copy", dir);
	snprintf(spool, sizeof(spool), "%s/perm.spool", dir);
	char cmd[2000];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 755 '%s'", spin, copy, copy);
	REQUIRE(system(cmd) == 0);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.kernel = STACKPULSE_FEATURE_OFF;
	o.self_contained = 0; /* Symbols must come from the binary itself. */
	char *argv[] = { copy, "1", "1", NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	REQUIRE_OK(stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid));
	CHECK_OK(rel_run(rec, 30));
	CHECK_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
	chmod(spool, 0644);
	int named, raw;
	symbolize_as(spool, 65534, &named, &raw); /* Readable: control. */
	printf("readable binary as nobody: %d named, %d module+offset\n", named, raw);
	CHECK(named > 0);
	chmod(copy, 0);
	symbolize_as(spool, 65534, &named, &raw);
	printf("mode 000 binary as nobody: %d named, %d module+offset\n", named, raw);
	CHECK_EQ(named, 0);
	CHECK(raw > 0);
	symbolize_as(spool, 0, &named, &raw); /* Root reads it anyway. */
	CHECK(named > 0);
}

/* The record example run as nobody on a target it starts itself: user
 * frames are recorded, kernel frames are not, and the spool says why. */
SP_TEST(record_example_as_nobody_gives_partial_results_with_a_reason)
{
	const char *bin_dir = getenv("SP_BIN_DIR");
	char record[700];
	snprintf(record, sizeof(record), "%s/record", bin_dir ? bin_dir : "zig-out/bin");
	if (access(record, X_OK) != 0)
		sp_test_skip("record example not built (zig build examples)");
	if (system("command -v setpriv >/dev/null 2>&1") != 0)
		sp_test_skip("setpriv not installed");
	const char *spin = rel_target("spin");
	char dir[600], spool[700], cmd[3000];
	snprintf(dir, sizeof(dir), "%s/nobody", sp_test_tmpdir());
	mkdir(dir, 0777);
	chmod(dir, 0777);
	chmod(sp_test_tmpdir(), 0755);
	snprintf(spool, sizeof(spool), "%s/nobody.spool", dir);
	snprintf(cmd, sizeof(cmd),
	         "cd '%s' && timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups "
	         "'%s' -F 499 -o '%s' -- '%s' 1 1 >/dev/null 2>&1",
	         dir, record, spool, spin);
	int rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	printf("record as nobody: %llu samples, kernel_frames %d, note \"%s\"\n",
	       (unsigned long long)m->samples, m->kernel_frames, m->kernel_note);
	CHECK(m->samples > 0);
	CHECK_EQ(m->truncated, 0);
	int paranoid = 2;
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	if (f) {
		if (fscanf(f, "%d", &paranoid) != 1)
			paranoid = 2;
		fclose(f);
	}
	if (paranoid >= 2) {
		CHECK_EQ(m->kernel_frames, 0);
		CHECK(m->kernel_note && m->kernel_note[0] != '\0');
	}
	stackpulse_spool_close(sp);
}
