/* Driver mode of a recorder test binary: when SP_REC_DRIVER is set, the
 * binary records through the public API instead of running tests, so a
 * test can run the recorder as another user (setpriv) or kill it.
 *   SP_REC_DRIVER = spawn | attach | attach_pid
 *   SP_REC_SPOOL, SP_REC_TARGET, SP_REC_ARG, SP_REC_PID, SP_REC_KERNEL,
 *   SP_REC_CHUNK (chunk_bytes), SP_REC_PIDFILE (writes the target pid),
 *   SP_REC_REALTIME (opts.realtime), SP_REC_RING_KB (opts.ring_kb), SP_REC_OFF_CPU (opts.off_cpu),
 *   SP_REC_NO_PIDFD=1 (pidfd_open fails
 *   with ENOSYS, as on kernels before 5.3 or under valgrind)
 * Prints "rc=N kernel=K ... err=..." and exits 0 on success. */
#ifndef SP_TEST_REC_DRIVER_H
#define SP_TEST_REC_DRIVER_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "rec_util.h"
#include "rec_stats.h"

static inline const char *drv_env(const char *k, const char *d)
{
	const char *v = getenv(k);
	return v ? v : d;
}

/* Makes pidfd_open fail with ENOSYS in this process (seccomp). */
static inline int drv_deny_pidfd(void)
{
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

__attribute__((constructor)) static void rec_driver_main(void)
{
	const char *mode = getenv("SP_REC_DRIVER");
	if (!mode)
		return;
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.kernel = (enum stackpulse_feature)strtol(drv_env("SP_REC_KERNEL", "0"), NULL, 10);
	o.chunk_bytes = (uint32_t)strtoul(drv_env("SP_REC_CHUNK", "0"), NULL, 10);
	o.realtime = (enum stackpulse_feature)strtol(drv_env("SP_REC_REALTIME", "0"), NULL, 10);
	o.ring_kb = (uint32_t)strtoul(drv_env("SP_REC_RING_KB", "0"), NULL, 10);
	o.off_cpu = (enum stackpulse_feature)strtol(drv_env("SP_REC_OFF_CPU", "1"), NULL, 10);
	if (getenv("SP_REC_NO_PIDFD") && drv_deny_pidfd() != 0) {
		printf("rc=-1 err=cannot install the seccomp filter\n");
		fflush(stdout);
		_exit(1);
	}
	if (!o.chunk_bytes)
		o.chunk_bytes = 1u << 20;
	const char *spool = drv_env("SP_REC_SPOOL", "/tmp/driver.spool");
	const char *target = drv_env("SP_REC_TARGET", "/bin/true");
	char *arg = (char *)drv_env("SP_REC_ARG", "1");
	stackpulse_recorder *rec = NULL;
	pid_t pid = 0;
	int rc;
	if (strcmp(mode, "spawn") == 0) {
		char *argv[] = { (char *)target, arg, NULL };
		rc = stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid);
	} else {
		if (strcmp(mode, "attach") == 0) {
			pid = fork();
			if (pid == 0) {
				execl(target, target, arg, (char *)NULL);
				_exit(127);
			}
			usleep(100000);
		} else {
			pid = (pid_t)strtol(drv_env("SP_REC_PID", "1"), NULL, 10);
		}
		rc = stackpulse_recorder_attach(pid, spool, STACKPULSE_ATTACH_STOP_ENABLE_RESUME,
		                                &o, &rec);
	}
	const char *pf = getenv("SP_REC_PIDFILE");
	if (pf && pid > 0) {
		FILE *f = fopen(pf, "w");
		if (f) {
			fprintf(f, "%d\n", (int)pid);
			fclose(f);
		}
	}
	if (rc) {
		printf("rc=%d err=%s\n", rc, stackpulse_last_error());
		fflush(stdout);
		_exit(1);
	}
	struct rec_stats st = { 0 };
	/* One wait first, while the target runs: its policy must stay. */
	int r2 = stackpulse_recorder_wait(rec, 50);
	int target_policy = sched_getscheduler(pid);
	/* And one drain: the caller's policy is back after it too. */
	if (r2 >= 0 && stackpulse_recorder_consume_available(rec) != 0)
		r2 = -1;
	int consume_policy = sched_getscheduler(0);
	r2 = r2 < 0 && r2 != -EINTR ? r2 : rec_run(rec, 60);
	char err[400] = "";
	if (r2)
		snprintf(err, sizeof(err), "%s", stackpulse_last_error());
	rec_stats_get(rec, &st);
	struct rec_stats fin = { 0 };
	int r3 = rec_finish_stats(rec, &fin);
	if (!r2 && r3)
		snprintf(err, sizeof(err), "%s", stackpulse_last_error());
	printf("rc=%d run=%d finish=%d kernel=%d samples=%llu lost=%llu realtime=%d "
	       "policy=%d consume_policy=%d target_policy=%d ring_bytes=%llu off_cpu=%d "
	       "intervals=%llu unfollowed=%u unfollowed_pid=%d unfollowed_error=%d "
	       "copy_resizes=%u err=%s\n",
	       rc, r2, r3, st.kernel_frames, (unsigned long long)st.samples,
	       (unsigned long long)st.lost, st.realtime, sched_getscheduler(0), consume_policy,
	       target_policy, (unsigned long long)st.ring_bytes, (int)st.off_cpu_method,
	       (unsigned long long)st.offcpu_intervals, fin.processes_unfollowed,
	       (int)fin.unfollowed_pid, fin.unfollowed_error, fin.copy_resizes, err);
	fflush(stdout);
	_exit(r2 || r3 ? 1 : 0);
}

/* Runs this test binary in driver mode with @p env (a shell prefix such as
 * "SP_REC_DRIVER=spawn SP_REC_SPOOL=..."), optionally as nobody, and
 * captures the first output line. Returns the exit status. */
static inline int rec_drive(const char *env, int as_nobody, char *out, size_t cap)
{
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s env %s '%s' 2>&1",
	         as_nobody ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "", env, self);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	out[0] = '\0';
	if (!fgets(out, (int)cap, p))
		out[0] = '\0';
	char sink[512];
	while (fgets(sink, sizeof(sink), p))
		;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* rec_drive of a spawn of @p bin with argument @p arg, recorded into
 * @p dir/@p name, with the driver settings @p extra (such as
 * "SP_REC_REALTIME=2"; "" for none). */
static inline int rec_drive_spawn(const char *extra, const char *dir, const char *name,
                                  const char *bin, const char *arg, int as_nobody, char *out,
                                  size_t cap)
{
	char env[2048];
	snprintf(env, sizeof(env),
	         "SP_REC_DRIVER=spawn %s SP_REC_SPOOL=%s/%s SP_REC_TARGET=%s SP_REC_ARG=%s", extra,
	         dir, name, bin, arg);
	return rec_drive(env, as_nobody, out, cap);
}

/* A directory anyone may write, for spools of a driver run as nobody. */
static inline const char *rec_public_dir(void)
{
	static char dir[512];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/public", sp_test_tmpdir());
		mkdir(dir, 0777);
		chmod(dir, 0777);
		chmod(sp_test_tmpdir(), 0755);
	}
	return dir;
}

#endif
