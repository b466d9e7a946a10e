/* The public recorder API: option checks, attach/spawn orchestration,
 * stats and finish; the event loop (waiting, liveness, the time-ordered
 * drain) is loop.c's, the rings and perf events are event_set.c's. Records in the caller's thread;
 * only the stop-enable-resume attach runs on a short-lived thread of its
 * own (stop_enable_resume, joined before attach returns).
 *
 * Memory use (docs/recording.md, "Memory use"):
 *  - one perf ring per CPU of a power-of-two data size: as root
 *    (CAP_IPC_LOCK) 125 ms of samples at the full rate, grown fourfold at a
 *    time while it falls behind up to the rate-scaled budget of
 *    sp_ring_budget_bytes (2 to 256 MiB, at most 1 GiB in all; the ring
 *    a growth replaces stays until drained), else perf_event_mlock_kb
 *    minus one page rounded down (512 KiB by default), halved until the
 *    kernel accepts it; plus a 64 KiB copy buffer per ring;
 *  - per event an fd and its thread; per thread with loss 16 bytes;
 *  - about 26 KiB of per-sample scratch (1024 pcs, 1537 frame ids, 256
 *    Python frames, 1024 merge slots);
 *  - per process 32 bytes per executable mapping, per thread 16 bytes,
 *    per mapped file about 100 bytes plus its path;
 *  - 8 to 16 bytes per distinct kernel pc seen (at most 1 Mi of them);
 *  - the unwinder's per-binary caches and the writer's intern tables and
 *    current chunk (about chunk_bytes), which grow with the distinct
 *    frames and stacks, not with the number of samples. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/opts.h"
#include "format/spool_format.h"
#include "io/clock.h"
#include "io/file.h"
#include "record/attach.h"
#include "record/kallsyms.h"
#include "record/pause.h"
#include "record/proc_scan.h"
#include "record/python.h"
#include "record/recorder.h"

#define MAX_STACK_SIZE 65528u /* perf's limit: u16 record size minus headers. */
/* Shortest rotation window: each window embeds its symbol tables again. */
#define SP_ROTATE_MIN_NS 100000000ull

/* ---- options ---- */

void stackpulse_recorder_opts_init(stackpulse_recorder_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_RECORDER_OPTS;
}

static int read_opts(const stackpulse_recorder_opts *in, stackpulse_recorder_opts *o)
{
	*o = STACKPULSE_RECORDER_OPTS;
	int rc = sp_opts_copy(o, sizeof(*o), in, "recorder");
	if (rc)
		return rc;
	long max_rate = sp_perf_sysctl("perf_event_max_sample_rate", 100000);
	if (o->frequency == 0 || (long)o->frequency > max_rate)
		return sp_error(-EINVAL,
		                "frequency %u Hz is outside 1..%ld "
		                "(kernel.perf_event_max_sample_rate)",
		                o->frequency, max_rate);
	if (o->stack_size == 0 || o->stack_size > MAX_STACK_SIZE || o->stack_size % 8)
		return sp_error(-EINVAL, "stack_size %u must be a multiple of 8 in 8..%u",
		                o->stack_size, MAX_STACK_SIZE);
	/* Enums arrive from callers as any int: compare as int. */
	if ((int)o->kernel < STACKPULSE_FEATURE_AUTO ||
	    (int)o->kernel > STACKPULSE_FEATURE_REQUIRED)
		return sp_error(-EINVAL, "kernel option %d is not a stackpulse_feature",
		                (int)o->kernel);
	if ((int)o->python < STACKPULSE_FEATURE_AUTO ||
	    (int)o->python > STACKPULSE_FEATURE_REQUIRED)
		return sp_error(-EINVAL, "python option %d is not a stackpulse_feature",
		                (int)o->python);
	if ((int)o->perf_event < STACKPULSE_PERF_EVENT_AUTO ||
	    (int)o->perf_event > STACKPULSE_PERF_EVENT_CPU_CLOCK)
		return sp_error(-EINVAL, "perf_event %d is not a stackpulse_perf_event",
		                (int)o->perf_event);
	if (o->zstd_level < 0 || o->zstd_level > 19)
		return sp_error(-EINVAL, "zstd_level %d is outside 0..19", o->zstd_level);
	if ((int)o->realtime < STACKPULSE_FEATURE_AUTO ||
	    (int)o->realtime > STACKPULSE_FEATURE_REQUIRED)
		return sp_error(-EINVAL, "realtime option %d is not a stackpulse_feature",
		                (int)o->realtime);
	if ((int)o->python_pause < STACKPULSE_FEATURE_AUTO ||
	    (int)o->python_pause > STACKPULSE_FEATURE_REQUIRED)
		return sp_error(-EINVAL, "python_pause option %d is not a stackpulse_feature",
		                (int)o->python_pause);
	if (o->python_pause == STACKPULSE_FEATURE_REQUIRED && o->python == STACKPULSE_FEATURE_OFF)
		return sp_error(-EINVAL, "python_pause is REQUIRED but python is OFF");
	if (o->python_pause == STACKPULSE_FEATURE_REQUIRED && o->off_cpu != STACKPULSE_FEATURE_OFF)
		return sp_error(-EINVAL, "python_pause REQUIRED cannot go with off_cpu: each pause "
		                         "would show as an off-CPU interval");
	if ((int)o->off_cpu < STACKPULSE_FEATURE_AUTO ||
	    (int)o->off_cpu > STACKPULSE_FEATURE_REQUIRED)
		return sp_error(-EINVAL, "off_cpu option %d is not a stackpulse_feature",
		                (int)o->off_cpu);
	if (o->ring_kb > (1u << 20))
		return sp_error(-EINVAL, "ring_kb %u is above 1 GiB", o->ring_kb);
	if (o->rotate_ns && o->rotate_ns < SP_ROTATE_MIN_NS)
		return sp_error(-EINVAL, "rotate_ns %llu is below 100 ms",
		                (unsigned long long)o->rotate_ns);
	return 0;
}

/* ---- setup and teardown ---- */

/* Ends pausing (opts.python_pause): the events stop raising traps first. */
static void pause_end(stackpulse_recorder *rec)
{
	if (!rec->pause)
		return;
	for (size_t i = 0; i < rec->nfds; i++)
		ioctl(rec->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	sp_pause_stop(rec);
}

/* Releases everything @p rec holds but the struct itself (its counters
 * and notes). Once only: recorder_free or finish. */
static void recorder_release(stackpulse_recorder *rec)
{
	pause_end(rec);
	pthread_mutex_destroy(&rec->mu);
	for (size_t i = 0; i < rec->nfds; i++)
		close(rec->fds[i]);
	for (int c = 0; rec->rings && c < 2 * rec->ncpu; c++)
		sp_ring_unmap(&rec->rings[c]);
	if (rec->epfd >= 0)
		close(rec->epfd);
	if (rec->pidfd >= 0)
		close(rec->pidfd);
	sp_ptable_free(&rec->pt);
	sp_writer_free(rec->w);
	sp_unwinder_free(rec->u);
	if (rec->sink.fd >= 0)
		sp_file_sink_close(&rec->sink);
	sp_free(rec->rings);
	sp_free(rec->ring_state);
	sp_free(rec->fds);
	sp_free(rec->fdtids);
	sp_free(rec->tloss);
	sp_free(rec->ids);
	sp_free(rec->direct);
	sp_free(rec->kaddrs);
	sp_free(rec->refused.v);
	sp_free(rec->pcs);
	sp_free(rec->frames);
	sp_free(rec->pyframes);
	sp_recorder_python_early_free(rec);
	sp_recorder_exec_free(rec);
	sp_free(rec->pymerge);
	sp_offcpu_unpriv_free(rec);
	sp_free(rec->native);
	sp_recorder_embed_release(rec);
	sp_free(rec->cache_dir);
	sp_free(rec->base_path);
}

static void recorder_free(stackpulse_recorder *rec)
{
	if (!rec)
		return;
	if (!rec->finished)
		recorder_release(rec);
	sp_free(rec);
}

/* Creates the recorder: options, spool file, writer, unwinder, scratch. */
static int recorder_new(const stackpulse_recorder_opts *opts, const char *path,
                        stackpulse_recorder **out)
{
	stackpulse_recorder_opts o;
	int rc = read_opts(opts, &o);
	if (rc)
		return rc;
	if (!path || !path[0])
		return sp_error(-EINVAL, "no spool path");
	stackpulse_recorder *rec = sp_calloc(1, sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	rec->opts = o;
	pthread_mutex_init(&rec->mu, NULL);
	rec->copy_size = o.stack_size;
	rec->sink.fd = rec->epfd = rec->pidfd = -1;
	if (o.cache_dir) {
		rec->opts.cache_dir = rec->cache_dir = sp_strdup(o.cache_dir);
		if (!rec->cache_dir) {
			sp_free(rec);
			return -ENOMEM;
		}
	}
	rec->last_flush_ns = sp_clock_ns(CLOCK_MONOTONIC);
	/* Under a temporary name until recording has started (start_output),
	 * or with rotation until its window is complete. */
	char *first = NULL;
	if (o.rotate_ns && (rc = sp_recorder_rotate_init(rec, path, &first)) != 0) {
		rec->sink.fd = -1;
		goto fail;
	}
	rc = sp_file_sink_open(&rec->sink, first ? first : path, SP_FILE_MODE_PRIVATE);
	sp_free(first);
	if (rc) {
		rc = sp_error_context(rc, "cannot create the spool file");
		rec->sink.fd = -1;
		goto fail;
	}
	rec->pcs = sp_calloc(SP_MAX_USER_FRAMES, sizeof(uint64_t));
	rec->frames = sp_calloc(SP_MAX_USER_FRAMES + SP_MAX_KERNEL_FRAMES + 1, sizeof(uint32_t));
	rec->pyframes = sp_calloc(SP_MAX_PY_FRAMES, sizeof(sp_py_frame));
	rec->pymerge = sp_calloc(SP_MAX_USER_FRAMES, sizeof(sp_py_merge_item));
	if (!rec->pcs || !rec->frames || !rec->pyframes || !rec->pymerge) {
		rc = -ENOMEM;
		goto fail;
	}
	sp_writer_opts wo = { o.zstd_level, o.chunk_bytes };
	if ((rc = sp_writer_new(&wo, sp_file_sink_write, &rec->sink, &rec->w)) != 0)
		goto fail;
	if (o.rotate_ns && (rc = sp_writer_keep_defs(rec->w)) != 0)
		goto fail;
	if ((rc = sp_unwinder_new(&rec->u)) != 0)
		goto fail;
	sp_ptable_init(&rec->pt, rec->w, rec->u);
	long n = sysconf(_SC_NPROCESSORS_CONF);
	rec->ncpu = n > 0 && n < 4096 ? (int)n : 1;
	rec->rings = sp_calloc(2 * (size_t)rec->ncpu, sizeof(sp_ring));
	rec->ring_state = sp_calloc((size_t)rec->ncpu, 1);
	if (!rec->rings || !rec->ring_state) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int c = 0; c < 2 * rec->ncpu; c++)
		rec->rings[c].fd = -1;
	rec->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (rec->epfd < 0) {
		rc = sp_error(-errno, "epoll_create1 failed");
		goto fail;
	}
	*out = rec;
	return 0;
fail:
	recorder_free(rec);
	return rc;
}

/* Recording has really started (target attached or spawned, events
 * enabled): only now does the spool replace whatever was at its path. A
 * failure before this leaves that untouched and no file behind. */
static int start_output(stackpulse_recorder *rec)
{
	if (rec->py_wakeups)
		rec->py_watch_until_ns = sp_clock_ns(CLOCK_MONOTONIC) + SP_PY_WATCH_NS;
	if (rec->opts.rotate_ns)
		return 0; /* Each window is renamed onto its name once complete. */
	int rc = sp_file_sink_commit(&rec->sink);
	return rc ? sp_error_context(rc, "cannot create the spool file") : 0;
}

/* Starts pausing @p pid at its samples when opts.python_pause asks
 * (pause.h): AUTO when a CPython target is expected (py_wakeups), taking
 * a refusal as "not paused", with the reason in pause_note. */
static int pause_begin(stackpulse_recorder *rec, pid_t pid, int pre_exec)
{
	enum stackpulse_feature f = rec->opts.python_pause;
	if (f == STACKPULSE_FEATURE_OFF || rec->opts.python == STACKPULSE_FEATURE_OFF)
		return 0;
	/* AUTO: not without a CPython expected (nothing to gain from stopping
	 * the target), nor with off-CPU intervals (each pause would be one). */
	if (f == STACKPULSE_FEATURE_AUTO &&
	    (!rec->py_wakeups || rec->opts.off_cpu != STACKPULSE_FEATURE_OFF))
		return 0;
	int rc = sp_pause_start(rec, pid, pre_exec);
	if (rc == 0) {
		rec->paused = 1;
		return 0;
	}
	if (f == STACKPULSE_FEATURE_REQUIRED || rc == -ENOMEM)
		return rc;
	snprintf(rec->pause_note, sizeof(rec->pause_note), "pid %d not paused: %s", (int)pid,
	         stackpulse_last_error());
	sp_error_clear();
	return 0;
}

static void kptr_check(stackpulse_recorder *rec)
{
	char buf[128];
	long n = sp_proc_read_small("/proc/kallsyms", buf, sizeof(buf));
	if (n <= 0)
		rec->kptr_zeroed = 2; /* Unreadable or empty: no names either. */
	else if (strncmp(buf, "0000000000000000 ", 17) == 0)
		rec->kptr_zeroed = 1;
}

int sp_recorder_write_meta(stackpulse_recorder *rec, uint64_t wall_ns, uint64_t mono_ns,
                           int next_file)
{
	struct utsname u;
	if (uname(&u) != 0)
		memset(&u, 0, sizeof(u));
	const char *note = rec->setup.kernel_note;
	if (rec->setup.kernel_frames && rec->kptr_zeroed == 1)
		note = "kallsyms addresses are hidden (kernel.kptr_restrict); kernel frames stay "
		       "unnamed";
	else if (rec->setup.kernel_frames && rec->kptr_zeroed == 2)
		note = "/proc/kallsyms is unreadable or empty; kernel frames stay unnamed";
	snprintf(rec->kernel_note, sizeof(rec->kernel_note), "%s", note);
	sp_meta m = {
		.start_time_ns = wall_ns,
		.start_mono_ns = mono_ns,
		.frequency = rec->opts.frequency,
		.stack_size = rec->opts.stack_size,
		.event = rec->setup.event == STACKPULSE_PERF_EVENT_CYCLES ? "cycles" : "cpu-clock",
		.machine = u.machine,
		.kernel_release = u.release,
		.hostname = u.nodename,
		.kernel_frames = rec->setup.kernel_frames,
		.kernel_note = rec->kernel_note,
	};
	sp_writer_set_offcpu_method(rec->w, rec->offcpu);
	if (next_file)
		return sp_writer_next_file(rec->w, &m);
	/* Written before any event is enabled: every sample is later, so the
	 * first window starts here. */
	if (rec->opts.rotate_ns)
		sp_recorder_rotate_start(rec, mono_ns);
	return sp_writer_meta(rec->w, &m);
}

static int write_meta(stackpulse_recorder *rec)
{
	return sp_recorder_write_meta(rec, sp_clock_ns(CLOCK_REALTIME),
	                              sp_clock_ns(CLOCK_MONOTONIC), 0);
}

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	long fd = syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? -1 : (int)fd;
#else
	(void)pid;
	return -1;
#endif
}

static void watch_pidfd(stackpulse_recorder *rec)
{
	rec->pidfd = open_pidfd(rec->target);
	if (rec->pidfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
		if (epoll_ctl(rec->epfd, EPOLL_CTL_ADD, rec->pidfd, &ev) != 0) {
			close(rec->pidfd);
			rec->pidfd = -1;
		}
	}
}

/* With python REQUIRED, an attach target must be a CPython we can read.
 * (A spawned program is only known after exec: there REQUIRED acts as
 * AUTO.) */
static int python_required(stackpulse_recorder *rec, sp_process *p)
{
	if (rec->opts.python != STACKPULSE_FEATURE_REQUIRED || !p)
		return 0;
	p->py_probed = 1;
	int rc = sp_python_probe(p->pid, &p->py);
	if (rc == STACKPULSE_ENOTFOUND)
		return sp_error(rc, "python frames were required but pid %d runs no CPython",
		                (int)p->pid);
	if (rc)
		return sp_error_context(rc, "python frames were required");
	rec->python_found = 1;
	return 0;
}

/* A candidate CPython file among the executable mappings (sp_proc_maps). */
static int python_mapping(void *ctx, const sp_proc_map *m)
{
	(void)ctx;
	return sp_python_candidate(m->path);
}

/* Whether the sampling events wake the reader at every sample: when
 * Python frames are wanted and the target looks like CPython before its
 * events are opened (REQUIRED, a python* program to spawn, or a mapped
 * python* / libpython3 file). Its stacks are then read tens of
 * microseconds after each sample rather than at the next 200 us poll, while
 * the frames a sample saw are still there; other targets keep the
 * watermark wakeups (a wakeup per sample would cost them CPU for nothing). */
static void python_wakeups(stackpulse_recorder *rec, pid_t pid, const char *prog)
{
	if (rec->opts.python == STACKPULSE_FEATURE_OFF)
		return;
	rec->py_wakeups = rec->opts.python == STACKPULSE_FEATURE_REQUIRED ||
	                  (prog && sp_python_candidate(prog)) ||
	                  (pid > 0 && sp_proc_maps(pid, python_mapping, NULL) == 1);
}

/* The /proc snapshot of an attach: the target (into *target, its errors
 * fail the attach) and, with children followed, every process descended
 * from it, parents first, as a spawned target's children would be known
 * from their FORK records. A descendant that is gone or refused is kept
 * without its mappings, one whose snapshot fails is given up alone
 * (sp_recorder_process). */
static int scan_tree(stackpulse_recorder *rec, sp_process **target)
{
	uint64_t now = sp_clock_ns(CLOCK_MONOTONIC);
	int rc = sp_ptable_scan(&rec->pt, rec->target, SP_NONE, now, target);
	if (rc || !rec->opts.children)
		return rc;
	sp_pid_list tree = { 0 };
	rc = sp_pid_list_add(&tree, rec->target, SP_TREE_MAX);
	if (rc == 0)
		rc = sp_proc_descendants(&tree, SP_TREE_MAX);
	for (uint32_t i = 1; i < tree.n && rc == 0; i++) {
		sp_process *p;
		rc = sp_recorder_process(rec, tree.v[i], now, &p);
		if (rc && !sp_recorder_fatal(rec, rc)) {
			sp_error_clear(); /* Not even added (a table full): left out. */
			rc = 0;
			continue;
		}
		/* Its events were refused (sp_recorder_open_all_threads). */
		for (uint32_t k = 0; rc == 0 && k < rec->refused.n; k++)
			if (rec->refused.v[k] == tree.v[i])
				sp_recorder_unfollow(rec, p, -EACCES);
	}
	sp_free(tree.v);
	return rc;
}

/* ---- public: attach and spawn ---- */

/* The stop-enable-resume attach, on a thread of its own. */
typedef struct stop_job {
	stackpulse_recorder *rec;
	pid_t pid;
	int rc;
	char err[512];
} stop_job;

static void *stop_job_run(void *arg)
{
	stop_job *j = arg;
	stackpulse_recorder *rec = j->rec;
	sp_stopped st;
	memset(&st, 0, sizeof(st));
	int rc = sp_attach_stop(j->pid, rec->opts.children ? SP_TREE_MAX : 1, &st);
	if (rc == 0)
		rc = sp_recorder_open_all_threads(rec, 0);
	if (rc == 0)
		rc = write_meta(rec);
	sp_process *p = NULL;
	if (rc == 0)
		rc = scan_tree(rec, &p);
	if (rc == 0)
		rc = python_required(rec, p);
	if (rc == 0)
		rc = sp_recorder_enable_all(rec);
	sp_attach_resume(&st); /* On every path: the target never stays stopped. */
	j->rc = rc;
	if (rc)
		snprintf(j->err, sizeof(j->err), "%s", stackpulse_last_error());
	return NULL;
}

/* ptrace ties a tracee to the thread that seized it, and when that thread
 * exits the kernel detaches whatever it still traces and drops their
 * pending interrupt. A thread that never reached its stop (uninterruptible
 * sleep past the timeout) is thus released when this job's thread ends,
 * instead of stopping when it wakes and staying stopped for as long as the
 * caller's thread lives. Signals stay blocked in the job (inherited). */
static int stop_enable_resume(stackpulse_recorder *rec, pid_t pid)
{
	stop_job j = { rec, pid, 0, "" };
	pthread_t t;
	int e = pthread_create(&t, NULL, stop_job_run, &j);
	if (e)
		return sp_error(-e, "cannot start the attach thread");
	pthread_join(t, NULL);
	if (j.rc)
		sp_error(j.rc, "%s", j.err);
	return j.rc;
}

int stackpulse_recorder_attach(pid_t pid, const char *path, enum stackpulse_attach_mode mode,
                               const stackpulse_recorder_opts *opts, stackpulse_recorder **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "out is NULL");
	*out = NULL;
	if (mode != STACKPULSE_ATTACH_STOP_ENABLE_RESUME && mode != STACKPULSE_ATTACH_LIVE)
		return sp_error(-EINVAL, "attach mode %d is unknown", (int)mode);
	stackpulse_recorder_opts o;
	int rc = read_opts(opts, &o);
	if (rc)
		return rc;
	if ((rc = sp_attach_check_pid(pid)) != 0)
		return rc;
	if (mode == STACKPULSE_ATTACH_STOP_ENABLE_RESUME && pid == getpid())
		return sp_error(-EINVAL,
		                "a process cannot stop itself: attach to pid %d with "
		                "STACKPULSE_ATTACH_LIVE",
		                (int)pid);
	stackpulse_recorder *rec = NULL;
	if ((rc = recorder_new(opts, path, &rec)) != 0 || !rec)
		return rc ? rc : STACKPULSE_EINTERNAL;
	rec->target = pid;
	watch_pidfd(rec);
	kptr_check(rec);
	python_wakeups(rec, pid, NULL);
	if ((rc = sp_recorder_open_rings(rec)) != 0)
		goto fail;

	sigset_t old;
	sp_attach_block_signals(&old);
	if (mode == STACKPULSE_ATTACH_STOP_ENABLE_RESUME) {
		rc = stop_enable_resume(rec, pid);
	} else {
		rc = sp_recorder_open_all_threads(rec, 1);
		if (rc == 0)
			rc = write_meta(rec);
		/* Enable before the snapshot: an mmap in between then shows up
		 * twice (harmless) instead of never. */
		if (rc == 0)
			rc = sp_recorder_enable_all(rec);
		sp_process *p = NULL;
		if (rc == 0)
			rc = scan_tree(rec, &p);
		if (rc == 0)
			rc = python_required(rec, p);
		if (rc == 0)
			rc = sp_recorder_open_all_threads(rec, 1);
		if (rc == 0)
			rc = sp_recorder_enable_all(rec);
	}
	sp_attach_restore_signals(&old);
	if (rc == 0)
		rc = pause_begin(rec, pid, 0);
	sp_recorder_lock(rec);
	if (rc == 0)
		rc = start_output(rec);
	sp_recorder_unlock(rec);
	if (rc)
		goto fail;
	*out = rec;
	return 0;
fail:
	recorder_free(rec);
	return rc;
}

int stackpulse_recorder_spawn(char *const argv[], const char *path,
                              const stackpulse_recorder_opts *opts, stackpulse_recorder **out,
                              pid_t *pid_out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "out is NULL");
	*out = NULL;
	if (!argv || !argv[0] || !argv[0][0])
		return sp_error(-EINVAL, "argv is empty");
	const char *prog = argv[0];
	stackpulse_recorder *rec = NULL;
	int rc = recorder_new(opts, path, &rec);
	if (rc || !rec)
		return rc ? rc : STACKPULSE_EINTERNAL;
	rec->spawned = 1;
	kptr_check(rec);
	python_wakeups(rec, 0, prog);
	if ((rc = sp_recorder_open_rings(rec)) != 0)
		goto fail;
	sigset_t mask;
	sigprocmask(SIG_SETMASK, NULL, &mask);
	pid_t child;
	int go, status_fd;
	if ((rc = sp_spawn_prepare(argv, &mask, &child, &go, &status_fd)) != 0)
		goto fail;
	rec->target = child;
	watch_pidfd(rec);
	rc = sp_recorder_open_all_threads(rec, 0);
	if (rc == 0)
		rc = write_meta(rec);
	sp_process *p;
	if (rc == 0) {
		char *cmd = NULL;
		size_t len = 1;
		for (size_t i = 0; argv[i] && len < SP_PROC_CMDLINE_MAX; i++)
			len += strlen(argv[i]) + 1;
		cmd = sp_malloc(len);
		if (!cmd) {
			rc = -ENOMEM;
		} else {
			cmd[0] = '\0';
			size_t at = 0;
			for (size_t i = 0; argv[i] && at + strlen(argv[i]) + 2 <= len; i++)
				at += (size_t)snprintf(cmd + at, len - at, "%s%s", i ? " " : "",
				                       argv[i]);
			const char *base = strrchr(prog, '/');
			char name[16];
			snprintf(name, sizeof(name), "%s", base ? base + 1 : prog);
			rc = sp_ptable_add(&rec->pt, child, SP_NONE, sp_clock_ns(CLOCK_MONOTONIC),
			                   name, cmd, &p);
			sp_thread *th;
			if (rc == 0)
				rc = sp_ptable_thread(&rec->pt, p, child,
				                      sp_clock_ns(CLOCK_MONOTONIC), name, &th);
			sp_free(cmd);
		}
	}
	/* Paused, the events that stop it come at the exec stop. */
	if (rc == 0)
		rc = pause_begin(rec, child, 1);
	if (rc) {
		pause_end(rec);
		sp_spawn_abort(child, go, status_fd);
		goto fail;
	}
	/* enable_on_exec starts sampling at the exec itself. */
	if ((rc = sp_spawn_release(child, go, status_fd, prog)) != 0)
		goto fail;
	sp_recorder_lock(rec);
	rc = start_output(rec);
	sp_recorder_unlock(rec);
	if (rc) {
		pause_end(rec);
		kill(child, SIGKILL); /* Ours, and not recorded: do not leave it running. */
		waitpid(child, NULL, 0);
		goto fail;
	}
	if (pid_out)
		*pid_out = child;
	*out = rec;
	return 0;
fail:
	recorder_free(rec);
	return rc;
}

/* Counter @p key of a live recorder; its lock is held, @p wc are its
 * writer's counts. -ENOENT for a key the recorder does not count. */
static int live_stat(const stackpulse_recorder *rec, const sp_writer_counts *wc, int key,
                     uint64_t *v)
{
	const sp_python_stats *ps = &rec->python_stats;
	switch (key) {
	case STACKPULSE_STAT_TRUNCATED_STACKS: *v = rec->truncated; return 0;
	case STACKPULSE_STAT_PYTHON_SAMPLES: *v = rec->python_samples; return 0;
	case STACKPULSE_STAT_PERF_EVENT: *v = (uint64_t)rec->setup.event; return 0;
	case STACKPULSE_STAT_PYTHON_FRAMES: *v = rec->python_found != 0; return 0;
	case STACKPULSE_STAT_LOST: *v = rec->lost; return 0;
	case STACKPULSE_STAT_RING_BYTES: *v = rec->ring_bytes; return 0;
	case STACKPULSE_STAT_STACK_COPY: *v = rec->copy_size; return 0;
	case STACKPULSE_STAT_COPY_RESIZES: *v = rec->copy_resizes; return 0;
	case STACKPULSE_STAT_OFFCPU_INTERVALS: *v = rec->offcpu_intervals; return 0;
	case STACKPULSE_STAT_OFFCPU_NO_STACK: *v = rec->offcpu_no_stack; return 0;
	case STACKPULSE_STAT_OFFCPU_DROPPED: *v = rec->offcpu_dropped; return 0;
	case STACKPULSE_STAT_OFFCPU_MERGED: *v = rec->offcpu_merged; return 0;
	case STACKPULSE_STAT_FAILED_RECORDS: *v = rec->failed; return 0;
	case STACKPULSE_STAT_PROCESSES_UNFOLLOWED: *v = rec->unfollowed; return 0;
	case STACKPULSE_STAT_SAMPLES: *v = wc->samples; return 0;
	case STACKPULSE_STAT_BYTES_WRITTEN: *v = wc->bytes; return 0;
	case STACKPULSE_STAT_CHUNKS: *v = wc->chunks; return 0;
	case STACKPULSE_STAT_PROCESSES: *v = wc->processes; return 0;
	case STACKPULSE_STAT_THREADS: *v = wc->threads; return 0;
	case STACKPULSE_STAT_MODULES: *v = wc->modules; return 0;
	case STACKPULSE_STAT_UNIQUE_STACKS: *v = wc->stacks; return 0;
	case STACKPULSE_STAT_KERNEL_FRAMES: *v = rec->setup.kernel_frames != 0; return 0;
	case STACKPULSE_STAT_REALTIME:
		*v = rec->realtime > 0   ? STACKPULSE_REALTIME_ON
		     : rec->realtime < 0 ? STACKPULSE_REALTIME_REFUSED
		                         : STACKPULSE_REALTIME_NOT_TRIED;
		return 0;
	case STACKPULSE_STAT_MAPPINGS_DROPPED: *v = rec->pt.maps_dropped; return 0;
	case STACKPULSE_STAT_DROPPED_SAMPLES: *v = rec->dropped; return 0;
	case STACKPULSE_STAT_MALFORMED_RECORDS:
		*v = rec->corrupt;
		for (int i = 0; rec->rings && i < 2 * rec->ncpu; i++)
			*v += rec->rings[i].corrupt;
		return 0;
	case STACKPULSE_STAT_LOST_PER_THREAD: *v = rec->setup.lost_format != 0; return 0;
	case STACKPULSE_STAT_LOST_THREADS:
		*v = 0;
		for (size_t i = 0; i < rec->ntloss; i++)
			*v += rec->tloss[i].lost > 0;
		return 0;
	case STACKPULSE_STAT_OFFCPU_METHOD: *v = (uint64_t)rec->offcpu; return 0;
	case STACKPULSE_STAT_UNFOLLOWED_PID: *v = (uint64_t)rec->unfollowed_pid; return 0;
	case STACKPULSE_STAT_UNFOLLOWED_ERROR:
		*v = (uint64_t)(-(int64_t)rec->unfollowed_error);
		return 0;
	case STACKPULSE_STAT_PYTHON_READS: *v = ps->stacks; return 0;
	case STACKPULSE_STAT_PYTHON_READ_FAILED: *v = ps->failed; return 0;
	case STACKPULSE_STAT_PYTHON_TRUNCATED: *v = ps->truncated; return 0;
	case STACKPULSE_STAT_PYTHON_TORN: *v = ps->torn; return 0;
	case STACKPULSE_STAT_PYTHON_READ_NS: *v = ps->ns; return 0;
	case STACKPULSE_STAT_PYTHON_READ_CALLS: *v = ps->read_calls; return 0;
	case STACKPULSE_STAT_PYTHON_DELAY_NS: *v = ps->delay_ns; return 0;
	case STACKPULSE_STAT_PYTHON_DELAY_MAX_NS: *v = ps->delay_max_ns; return 0;
	case STACKPULSE_STAT_PYTHON_EARLY_READS: *v = rec->python_early; return 0;
	case STACKPULSE_STAT_PYTHON_UNREADABLE: *v = rec->python_unreadable; return 0;
	case STACKPULSE_STAT_PYTHON_PAUSES: *v = rec->pauses; return 0;
	case STACKPULSE_STAT_PYTHON_PAUSE_NS: *v = rec->pause_ns; return 0;
	case STACKPULSE_STAT_PYTHON_PAUSED: *v = rec->paused != 0; return 0;
	default: return -ENOENT; /* STACKPULSE_STAT_UNWIND_ERRORS: spools only. */
	}
}

/* Every counter of @p rec into final_stats, before finish releases what
 * they are read from. */
static void snapshot_stats(stackpulse_recorder *rec)
{
	sp_writer_counts wc;
	sp_recorder_lock(rec);
	sp_writer_get_counts(rec->w, &wc);
	for (int k = 1; k < SP_RECORDER_STAT_COUNT; k++)
		if (live_stat(rec, &wc, k, &rec->final_stats[k]))
			rec->final_stats[k] = 0;
	sp_recorder_unlock(rec);
}

int stackpulse_recorder_stat(const stackpulse_recorder *rec, stackpulse_stat key, uint64_t *value)
{
	SP_API_ENTRY();
	if (!rec || !value) {
		sp_error(-EINVAL, "NULL argument");
		return -EINVAL;
	}
	int k = (int)key;
	if (k <= 0)
		return sp_error(-EINVAL, "stat key %d is not a counter", k);
	if (k >= SP_RECORDER_STAT_COUNT)
		return sp_error(-ENOENT, "stat key %d is not counted by this library (%d.%d)", k,
		                STACKPULSE_VERSION_MAJOR, STACKPULSE_VERSION_MINOR);
	if (k == STACKPULSE_STAT_UNWIND_ERRORS)
		return sp_error(-ENOENT, "stat key %d is counted by spools only", k);
	if (rec->finished) {
		*value = rec->final_stats[k];
		return 0;
	}
	stackpulse_recorder *mrec = (stackpulse_recorder *)(uintptr_t)rec; /* mu only */
	sp_writer_counts wc;
	sp_recorder_lock(mrec);
	sp_writer_get_counts(rec->w, &wc);
	int rc = live_stat(rec, &wc, k, value);
	sp_recorder_unlock(mrec);
	return rc ? sp_error(rc, "stat key %d is not counted by the recorder", k) : 0;
}

const char *stackpulse_recorder_python_note(const stackpulse_recorder *rec)
{
	SP_API_ENTRY();
	if (!rec)
		return "";
	return rec->python_note[0] ? rec->python_note : rec->pause_note;
}

/* The STATS records (docs/spool-format.md): recording counters, and the
 * samples lost per thread; with rotation, the counts of the window. */
static int write_stats(stackpulse_recorder *rec)
{
	const struct {
		uint32_t key;
		uint64_t value;
	} kv[] = {
		{ SP_STAT_TRUNCATED_STACKS, rec->truncated - rec->win_truncated0 },
		{ SP_STAT_PYTHON_SAMPLES, rec->python_samples - rec->win_python0 },
		{ SP_STAT_EVENT, (uint64_t)rec->setup.event },
		{ SP_STAT_PYTHON_FRAMES, (uint64_t)rec->python_found },
		{ SP_STAT_LOST, rec->lost - rec->win_lost0 },
		{ SP_STAT_RING_BYTES, rec->ring_bytes },
		{ SP_STAT_STACK_COPY, rec->copy_size },
		{ SP_STAT_COPY_RESIZES, rec->copy_resizes },
		{ SP_STAT_OFFCPU_INTERVALS, rec->offcpu_intervals },
		{ SP_STAT_OFFCPU_NO_STACK, rec->offcpu_no_stack },
		{ SP_STAT_OFFCPU_DROPPED, rec->offcpu_dropped },
		{ SP_STAT_OFFCPU_MERGED, rec->offcpu_merged },
		{ SP_STAT_FAILED_RECORDS, rec->failed - rec->win_failed0 },
		{ SP_STAT_UNFOLLOWED, rec->unfollowed },
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		/* Off-CPU keys only when intervals were recorded. */
		if (kv[i].key >= SP_STAT_OFFCPU_INTERVALS && kv[i].key <= SP_STAT_OFFCPU_MERGED &&
		    !rec->offcpu)
			continue;
		int rc = sp_writer_stat(rec->w, kv[i].key, kv[i].value);
		if (rc)
			return rc;
	}
	if (!rec->setup.lost_format)
		return 0;
	for (size_t i = 0; i < rec->ntloss; i++) {
		sp_thread_loss *e = &rec->tloss[i];
		uint64_t now = e->lost + e->live;
		if (now == e->written || e->thread == SP_NONE)
			continue;
		int rc = sp_writer_thread_stat(rec->w, SP_STAT_LOST, now - e->written, e->thread);
		if (rc)
			return rc;
		e->written = now;
	}
	return 0;
}

/* The result of a step of sealing whose own failure only costs names
 * (kernel symbols, symbol tables, JIT names): the spool is sealed without
 * them; the spool's own write errors stay errors. */
static int names_step(const stackpulse_recorder *rec, int rc)
{
	if (rc == 0 || sp_recorder_fatal(rec, rc))
		return rc;
	sp_error_clear();
	return 0;
}

int sp_recorder_seal(stackpulse_recorder *rec)
{
	int rc = write_stats(rec);
	if (rc == 0)
		rc = names_step(rec, sp_recorder_write_ksyms(rec));
	if (rc == 0)
		rc = names_step(rec, sp_recorder_embed_symbols(rec));
	if (rc == 0)
		rc = names_step(rec, sp_recorder_write_perfmaps(rec));
	if (rc == 0)
		rc = sp_writer_finish(rec->w);
	if (rc == 0)
		rc = sp_file_sink_sync(&rec->sink);
	return rc;
}

/* Keeps the first error of finish in *first; 1 while the spool can still
 * be written (its writes have not failed). */
static int finish_step(const stackpulse_recorder *rec, int rc, int *first)
{
	if (rc && !*first)
		*first = rc;
	return !sp_writer_failed(rec->w);
}

/* Finishes @p rec (stackpulse_recorder_finish): seals the spool, keeps
 * the final counters and releases the rest. */
static int finish(stackpulse_recorder *rec)
{
	/* Stop producing, then drain what the rings still hold. */
	for (size_t i = 0; i < rec->nfds; i++)
		ioctl(rec->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	pause_end(rec); /* The drain below needs no tracer. */
	/* After a fatal error of a drain (rec->error) the rest is still
	 * drained and sealed while the spool can be written (memory ran out
	 * once): what was recorded stays readable, with its footer. */
	int rc = 0;
	int ok = finish_step(rec, rec->error, &rc);
	char note[sizeof(rec->error_note)];
	snprintf(note, sizeof(note), "%s", rec->error_note);
	rec->error = 0;
	if (ok)
		ok = finish_step(rec, sp_recorder_consume(rec, 1), &rc);
	if (ok) {
		/* The events' counters are final now: all of it is in lost. */
		for (size_t i = 0; i < rec->ntloss; i++)
			rec->tloss[i].live = 0;
		ok = finish_step(rec, sp_recorder_read_loss(rec, 0, rec->nfds), &rc);
	}
	if (ok)
		ok = finish_step(rec, sp_recorder_python_names_final(rec), &rc);
	if (ok) {
		/* An interval that cannot be written is that interval's loss. */
		int r = sp_offcpu_finish(rec, sp_clock_ns(CLOCK_MONOTONIC));
		if (r && !sp_recorder_fatal(rec, r)) {
			rec->failed++;
			sp_error_clear();
			r = 0;
		}
		ok = finish_step(rec, r, &rc);
	}
	if (ok)
		finish_step(rec,
		            rec->opts.rotate_ns
		                    ? sp_recorder_window_close(rec, sp_clock_ns(CLOCK_MONOTONIC), 1)
		                    : sp_recorder_seal(rec),
		            &rc);
	finish_step(rec, sp_file_sink_close(&rec->sink), &rc);
	rec->sink.fd = -1;
	snapshot_stats(rec);
	recorder_release(rec);
	rec->finished = 1;
	/* The drain's error with its detail, which later steps may have
	 * cleared. */
	return rc && note[0] ? sp_error(rc, "%s", note) : rc;
}

int stackpulse_recorder_finish(stackpulse_recorder *rec)
{
	SP_API_ENTRY();
	if (!rec)
		return sp_error(-EINVAL, "recorder is NULL");
	if (rec->finished)
		return sp_error(STACKPULSE_ESTATE, "the recorder is finished already");
	return finish(rec);
}

void stackpulse_recorder_free(stackpulse_recorder *rec)
{
	if (!rec)
		return;
	if (!rec->finished)
		(void)finish(rec);
	recorder_free(rec);
}
