/* record: sample a command or a running process into a spool file.
 *
 *   record [-F HZ] [-s STACK_BYTES] [-d SECONDS] [--kernel=auto|off|on]
 *          [--python=auto|off|on] [--python-pause=auto|off|on]
 *          [--realtime=auto|off|on] [--no-children] [--off-cpu] [--attach=stop|live] [--rotate SECS [--push URL | --otlp URL]
 *          [--app NAME] [--label KEY=VALUE]...] -o FILE (-p PID | -- COMMAND [ARG...])
 *
 * Records until the duration ends or every followed process has exited.
 * With --rotate the recording is cut into windows FILE.0001, FILE.0002,
 * ..., each a spool of its own; with --push or --otlp each window is sent
 * to a Pyroscope server or an OpenTelemetry collector as it closes, from a
 * thread of its own so that recording goes on meanwhile (a minimal
 * continuous-profiling agent). A failed push is printed and the window
 * file stays; the exit code is then 1.
 * SIGINT (Ctrl-C) or SIGTERM finish the spool cleanly. On a terminal a
 * one-line progress shows samples, lost samples and file size; a one-line
 * summary ends the run. Exit codes: 0 recorded, 1 failed, 2 bad usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spool_profile.h"
#include "stackpulse.h"

#define MAX_LABELS 32
/* Windows waiting for the push thread at most; past it the oldest is left
 * unpushed (its file stays): a backend that is down does not grow the
 * backlog without end. */
#define MAX_PUSH_BACKLOG 16

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: record [-F HZ] [-s STACK_BYTES] [-d SECONDS] [--kernel=auto|off|on]\n"
	        "              [--python=auto|off|on] [--python-pause=auto|off|on]\n"
	        "              [--realtime=auto|off|on] [--no-children]\n"
	        "              [--attach=stop|live] [--off-cpu] -o FILE\n"
	        "              (-p PID | -- COMMAND [ARG...])\n"
	        "  -F HZ           samples per second per thread (default 99)\n"
	        "  -s BYTES        user stack bytes copied per sample (default 32768, max 65528)\n"
	        "  -d SECONDS      stop after this long (default: until the target exits)\n"
	        "  --kernel=MODE   kernel frames: auto (default), off, on (fail if unavailable)\n"
	        "  --python=MODE   CPython frames: auto (default), off, on\n"
	        "  --python-pause=MODE  hold each sampled thread of a CPython target still\n"
	        "                  until its Python stack is read, as py-spy does: auto\n"
	        "                  (default), off, on (fail if refused)\n"
	        "  --realtime=MODE wait and drain at SCHED_FIFO: auto (default: for CPython\n"
	        "                  targets), off, on (fail if refused)\n"
	        "  --no-children   do not follow forked or executed children\n"
	        "  --attach=MODE   with -p: stop (default: stop every thread while attaching,\n"
	        "                  nothing is missed) or live (never stop the target)\n"
	        "  --off-cpu       off-CPU intervals with their stacks (wall-clock time);\n"
	        "                  needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 1\n"
	        "                  (fails when refused)\n"
	        "  --rotate SECS   write a window spool FILE.0001, FILE.0002, ... every SECS\n"
	        "                  seconds (at least 0.1) instead of one FILE\n"
	        "  --push URL      with --rotate: send each window to a Pyroscope server\n"
	        "  --otlp URL      with --rotate: send each window to an OTLP/HTTP collector\n"
	        "  --app NAME      application name for --push/--otlp\n"
	        "  --label K=V     a label for --push/--otlp (repeatable)\n"
	        "  -o FILE         spool file to write\n"
	        "  -p PID          attach to a running process\n");
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_feature(const char *s, enum stackpulse_feature *out)
{
	if (strcmp(s, "auto") == 0)
		*out = STACKPULSE_FEATURE_AUTO;
	else if (strcmp(s, "off") == 0)
		*out = STACKPULSE_FEATURE_OFF;
	else if (strcmp(s, "on") == 0)
		*out = STACKPULSE_FEATURE_REQUIRED;
	else
		return -1;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void human_size(uint64_t b, char *buf, size_t n)
{
	if (b >= (1u << 20))
		snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
	else if (b >= 1024)
		snprintf(buf, n, "%.1f KiB", (double)b / 1024);
	else
		snprintf(buf, n, "%" PRIu64 " B", b);
}

/* "record: WHAT: ERROR (DETAIL)", with ERROR left out when the detail says
 * it already or when it is the generic "invalid argument". */
/* Counter @p key of @p rec, 0 when it cannot be read. */
static uint64_t stat_of(const stackpulse_recorder *rec, stackpulse_stat key)
{
	uint64_t v = 0;
	return stackpulse_recorder_stat(rec, key, &v) == 0 ? v : 0;
}

static void fail(const char *what, int rc)
{
	const char *detail = stackpulse_last_error(), *err = stackpulse_strerror(rc);
	if (detail && *detail && (rc == -EINVAL || strstr(detail, err)))
		fprintf(stderr, "record: %s: %s\n", what, detail);
	else if (detail && *detail)
		fprintf(stderr, "record: %s: %s (%s)\n", what, err, detail);
	else
		fprintf(stderr, "record: %s: %s\n", what, err);
}

/* ---- rotation windows and their pushes ---- */

struct window_item {
	struct window_item *next;
	uint32_t index;
	char path[];
};

/* The windows closed so far, and the queue the push thread empties. */
struct windows {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct window_item *head, **tail;
	size_t queued; /* Items in the queue. */
	int done;      /* Recording finished: push what is queued, then stop. */
	int push;      /* --push or --otlp given. */
	int off_cpu;   /* --off-cpu: a window may hold intervals only. */
	stackpulse_push_opts pu;
	uint32_t count;   /* Windows closed. */
	uint64_t samples; /* Samples of the whole recording (last window's total). */
	uint64_t lost;    /* Summed over windows. */
	uint64_t bytes;   /* Summed over windows. */
	uint32_t pushed, push_failed;
};

/* Called by the recorder as a window file is complete: counts it, and
 * queues it for the push thread (never pushes here: recording waits). */
static void on_window(void *ctx, const struct stackpulse_window *win)
{
	struct windows *ws = ctx;
	ws->count++;
	ws->samples = win->total_samples;
	ws->lost += win->lost;
	ws->bytes += win->bytes;
	if (!ws->push)
		return;
	if (win->samples == 0 && !ws->off_cpu) { /* Else push_window looks for intervals. */
		fprintf(stderr, "record: window %u (%s) has no samples; not pushed\n", win->index,
		        win->path);
		return;
	}
	size_t n = strlen(win->path) + 1;
	struct window_item *it = malloc(sizeof(*it) + n);
	if (!it) {
		fprintf(stderr, "record: out of memory; window %s is not pushed\n", win->path);
		pthread_mutex_lock(&ws->lock);
		ws->push_failed++;
		pthread_mutex_unlock(&ws->lock);
		return;
	}
	it->next = NULL;
	it->index = win->index;
	memcpy(it->path, win->path, n);
	struct window_item *dropped = NULL;
	pthread_mutex_lock(&ws->lock);
	*ws->tail = it;
	ws->tail = &it->next;
	if (++ws->queued > MAX_PUSH_BACKLOG) {
		dropped = ws->head;
		ws->head = dropped->next;
		ws->queued--;
		ws->push_failed++;
	}
	pthread_cond_signal(&ws->more);
	pthread_mutex_unlock(&ws->lock);
	if (dropped) {
		fprintf(stderr,
		        "record: window %u (%s kept) is not pushed: %d windows wait for the "
		        "backend\n",
		        dropped->index, dropped->path, MAX_PUSH_BACKLOG);
		free(dropped);
	}
}

/* Reads a window spool back, symbolizes it and pushes it, as
 * `report FILE --push URL` does: in wall-clock time when recorded with
 * off-CPU intervals. 0 (@p what says what was pushed), 1 when the window
 * holds nothing to push, or an error (printed). */
static int push_window(const char *path, const stackpulse_push_opts *pu, char *what, size_t n)
{
	stackpulse_spool *spool = NULL;
	int rc = stackpulse_spool_open(path, NULL, &spool);
	if (rc) {
		fail(path, rc);
		return rc;
	}
	if (!spool_has_data(stackpulse_spool_meta(spool))) {
		stackpulse_spool_close(spool);
		return 1;
	}
	stackpulse_symbolizer_opts so = STACKPULSE_SYMBOLIZER_OPTS;
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	po.flags = STACKPULSE_PROFILE_GROUP_UNRESOLVED; /* As report without --addresses. */
	po.time = spool_default_time(stackpulse_spool_meta(spool));
	po.merge_ns = STACKPULSE_MERGE_ALL; /* pprof and OTLP aggregate: bounded memory. */
	stackpulse_profile *prof = NULL;
	rc = spool_profile(spool, &so, &po, fail, &prof);
	if (rc) {
		fail("building the profile", rc);
		return rc;
	}
	profile_holds(prof, what, n);
	rc = stackpulse_push(prof, pu);
	stackpulse_profile_free(prof);
	return rc;
}

static void *push_thread(void *arg)
{
	struct windows *ws = arg;
	for (;;) {
		pthread_mutex_lock(&ws->lock);
		while (!ws->head && !ws->done)
			pthread_cond_wait(&ws->more, &ws->lock);
		struct window_item *it = ws->head;
		if (it) {
			ws->head = it->next;
			ws->queued--;
			if (!ws->head)
				ws->tail = &ws->head;
		}
		pthread_mutex_unlock(&ws->lock);
		if (!it)
			return NULL; /* done, and nothing queued */
		char held[96] = "";
		int rc = push_window(it->path, &ws->pu, held, sizeof(held));
		if (rc < 0) {
			char what[600];
			snprintf(what, sizeof(what), "push of window %u (%s kept)", it->index,
			         it->path);
			fail(what, rc);
		} else if (rc == 1) {
			fprintf(stderr,
			        "record: window %u (%s) has no samples and no off-CPU intervals; "
			        "not pushed\n",
			        it->index, it->path);
		} else {
			fprintf(stderr, "record: pushed window %u (%s) to %s\n", it->index, held,
			        ws->pu.url);
		}
		pthread_mutex_lock(&ws->lock);
		if (rc < 0)
			ws->push_failed++;
		else if (rc == 0)
			ws->pushed++;
		pthread_mutex_unlock(&ws->lock);
		free(it);
	}
}

int main(int argc, char **argv)
{
	stackpulse_recorder_opts opts = STACKPULSE_RECORDER_OPTS;
	const char *out = NULL;
	long pid = 0;
	double duration = 0;
	enum stackpulse_attach_mode attach_mode = STACKPULSE_ATTACH_STOP_ENABLE_RESUME;
	int attach_given = 0;
	double rotate = 0;
	const char *push_url = NULL, *app = NULL, *labels[MAX_LABELS];
	size_t nlabels = 0;
	int npush = 0;
	enum stackpulse_push_protocol protocol = STACKPULSE_PUSH_PYROSCOPE;
	enum {
		OPT_KERNEL = 256,
		OPT_PYTHON,
		OPT_PYTHON_PAUSE,
		OPT_REALTIME,
		OPT_NO_CHILDREN,
		OPT_ATTACH,
		OPT_ROTATE,
		OPT_PUSH,
		OPT_OTLP,
		OPT_APP,
		OPT_LABEL,
		OPT_OFF_CPU,
		OPT_HELP
	};
	static const struct option longopts[] = {
		{ "kernel", required_argument, NULL, OPT_KERNEL },
		{ "python", required_argument, NULL, OPT_PYTHON },
		{ "python-pause", required_argument, NULL, OPT_PYTHON_PAUSE },
		{ "realtime", required_argument, NULL, OPT_REALTIME },
		{ "no-children", no_argument, NULL, OPT_NO_CHILDREN },
		{ "attach", required_argument, NULL, OPT_ATTACH },
		{ "rotate", required_argument, NULL, OPT_ROTATE },
		{ "push", required_argument, NULL, OPT_PUSH },
		{ "otlp", required_argument, NULL, OPT_OTLP },
		{ "app", required_argument, NULL, OPT_APP },
		{ "label", required_argument, NULL, OPT_LABEL },
		{ "off-cpu", no_argument, NULL, OPT_OFF_CPU },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	/* '+' stops at the first non-option, so the command's own flags stay its own. */
	while ((c = getopt_long(argc, argv, "+F:s:d:o:p:h", longopts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'F':
			if (parse_u32(optarg, 1, 100000, &opts.frequency)) {
				fprintf(stderr,
				        "record: -F wants a frequency in Hz (1..100000), not "
				        "'%s'\n",
				        optarg);
				return 2;
			}
			break;
		case 's':
			if (parse_u32(optarg, 8, 65528, &opts.stack_size) || opts.stack_size % 8) {
				fprintf(stderr,
				        "record: -s wants a multiple of 8 in 8..65528, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case 'd':
			errno = 0;
			duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(duration > 0) || duration > 1e7) {
				fprintf(stderr,
				        "record: -d wants a positive number of seconds, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case 'o': out = optarg; break;
		case 'p':
			errno = 0;
			pid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || pid <= 0 || pid > INT_MAX) {
				fprintf(stderr, "record: -p wants a process id, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_KERNEL:
			if (parse_feature(optarg, &opts.kernel)) {
				fprintf(stderr,
				        "record: --kernel wants auto, off or on, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_PYTHON:
			if (parse_feature(optarg, &opts.python)) {
				fprintf(stderr,
				        "record: --python wants auto, off or on, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_PYTHON_PAUSE:
			if (parse_feature(optarg, &opts.python_pause)) {
				fprintf(stderr,
				        "record: --python-pause wants auto, off or on, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_REALTIME:
			if (parse_feature(optarg, &opts.realtime)) {
				fprintf(stderr,
				        "record: --realtime wants auto, off or on, not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_OFF_CPU: opts.off_cpu = STACKPULSE_FEATURE_REQUIRED; break;
		case OPT_NO_CHILDREN: opts.children = false; break;
		case OPT_ATTACH:
			if (strcmp(optarg, "stop") != 0 && strcmp(optarg, "live") != 0) {
				fprintf(stderr, "record: --attach wants stop or live, not '%s'\n",
				        optarg);
				return 2;
			}
			attach_mode = optarg[0] == 'l' ? STACKPULSE_ATTACH_LIVE
			                               : STACKPULSE_ATTACH_STOP_ENABLE_RESUME;
			attach_given = 1;
			break;
		case OPT_ROTATE:
			errno = 0;
			rotate = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(rotate >= 0.1) || rotate > 1e7) {
				fprintf(stderr,
				        "record: --rotate wants seconds (at least 0.1), not '%s'\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_PUSH:
		case OPT_OTLP:
			/* Counted, not tested through push_url: the analyzer would
			 * then take optarg for NULL in later iterations. */
			if (npush++) {
				fprintf(stderr, "record: give one of --push and --otlp\n");
				return 2;
			}
			push_url = optarg;
			protocol = c == OPT_OTLP ? STACKPULSE_PUSH_OTLP : STACKPULSE_PUSH_PYROSCOPE;
			break;
		case OPT_APP: app = optarg; break;
		case OPT_LABEL:
			if (nlabels == MAX_LABELS || !strchr(optarg, '=') || optarg[0] == '=') {
				fprintf(stderr,
				        "record: --label wants KEY=VALUE (at most %d), not '%s'\n",
				        MAX_LABELS, optarg);
				return 2;
			}
			labels[nlabels++] = optarg;
			break;
		case 'h':
		case OPT_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	char **command = argv + optind;
	int ncommand = argc - optind;
	if (!out) {
		fprintf(stderr, "record: -o FILE is required\n");
		usage(stderr);
		return 2;
	}
	if ((pid != 0) == (ncommand > 0)) {
		fprintf(stderr, "record: give either -p PID or -- COMMAND [ARG...]\n");
		usage(stderr);
		return 2;
	}
	if (attach_given && !pid) {
		fprintf(stderr, "record: --attach applies to -p PID only; a COMMAND is recorded "
		                "from its first instruction\n");
		return 2;
	}
	if (push_url && !(rotate > 0)) {
		fprintf(stderr, "record: --push and --otlp send windows: give --rotate SECS too\n");
		return 2;
	}
	if ((app || nlabels) && !push_url) {
		fprintf(stderr, "record: --app and --label go with --push or --otlp\n");
		return 2;
	}

	struct windows ws;
	memset(&ws, 0, sizeof(ws));
	pthread_mutex_init(&ws.lock, NULL);
	pthread_cond_init(&ws.more, NULL);
	ws.tail = &ws.head;
	ws.pu = STACKPULSE_PUSH_OPTS;
	ws.pu.protocol = protocol;
	ws.pu.url = push_url;
	ws.pu.app = app;
	ws.pu.labels = labels;
	ws.pu.nlabels = nlabels;
	ws.push = push_url != NULL;
	ws.off_cpu = opts.off_cpu != STACKPULSE_FEATURE_OFF;
	if (rotate > 0) {
		opts.rotate_ns = (uint64_t)(rotate * 1e9);
		opts.on_window = on_window;
		opts.window_ctx = &ws;
	}
	pthread_t pusher;
	memset(&pusher, 0, sizeof(pusher));
	if (ws.push) {
		/* Before any signal handler: the thread keeps SIGINT/SIGTERM
		 * blocked, so they interrupt the recording loop's wait. */
		sigset_t block, old;
		sigemptyset(&block);
		sigaddset(&block, SIGINT);
		sigaddset(&block, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		int e = pthread_create(&pusher, NULL, push_thread, &ws);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (e) {
			fprintf(stderr, "record: cannot start the push thread: %s\n", strerror(e));
			return 1;
		}
	}

	/* No SA_RESTART: the wait returns -EINTR and the loop sees the flag. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	stackpulse_recorder *rec = NULL;
	pid_t child = 0;
	int rc;
	if (pid) {
		rc = stackpulse_recorder_attach((pid_t)pid, out, attach_mode, &opts, &rec);
		if (rc) {
			fail("attach", rc);
			return 1;
		}
	} else {
		rc = stackpulse_recorder_spawn(command, out, &opts, &rec, &child);
		if (rc) {
			fail("spawn", rc);
			return 1;
		}
	}

	int tty = isatty(STDERR_FILENO);
	double start = now_s(), last_progress = 0;
	int first_error = 0;
	while (!stop_requested) {
		double left = duration > 0 ? start + duration - now_s() : 1e9;
		if (left <= 0)
			break;
		int timeout = left < 0.2 ? (int)(left * 1000) + 1 : 200;
		rc = stackpulse_recorder_wait(rec, timeout);
		if (rc == -EINTR)
			continue;
		if (rc < 0) {
			fail("wait", rc);
			first_error = rc;
			break;
		}
		rc = stackpulse_recorder_consume_available(rec);
		if (rc) {
			fail("consume", rc);
			first_error = rc;
			break;
		}
		if (!stackpulse_recorder_process_is_active(rec, 0))
			break; /* Every followed process has exited. */
		double t = now_s();
		if (tty && t - last_progress >= 0.25) {
			char size[32];
			human_size(stat_of(rec, STACKPULSE_STAT_BYTES_WRITTEN), size, sizeof(size));
			fprintf(stderr,
			        "\rrecording: %.1fs  %" PRIu64 " samples  %" PRIu64 " lost  %s   ",
			        t - start, stat_of(rec, STACKPULSE_STAT_SAMPLES),
			        stat_of(rec, STACKPULSE_STAT_LOST), size);
			fflush(stderr);
			last_progress = t;
		}
	}
	if (tty && last_progress > 0)
		fputc('\n', stderr);

	/* The counts are read after finish (they stay until free): it drains
	 * the last samples and writes the off-CPU intervals of threads still
	 * waiting. */
	rc = stackpulse_recorder_finish(rec);
	if (rc) {
		fail("finish", rc);
		if (!first_error)
			first_error = rc;
	}
	double elapsed = now_s() - start;
	if (ws.push) {
		pthread_mutex_lock(&ws.lock);
		ws.done = 1;
		pthread_cond_signal(&ws.more);
		pthread_mutex_unlock(&ws.lock);
		pthread_join(pusher, NULL);
	}

	/* A spawned command still running at the end is ours to stop. */
	int child_status = -1;
	if (child > 0) {
		pid_t w = waitpid(child, &child_status, WNOHANG);
		if (w == 0) {
			kill(child, SIGTERM);
			w = waitpid(child, &child_status, 0);
		}
		if (w != child)
			child_status = -1;
	}
	{
		uint64_t samples = stat_of(rec, STACKPULSE_STAT_SAMPLES);
		uint64_t lost = stat_of(rec, STACKPULSE_STAT_LOST);
		uint64_t bytes = stat_of(rec, STACKPULSE_STAT_BYTES_WRITTEN);
		uint64_t processes = stat_of(rec, STACKPULSE_STAT_PROCESSES);
		uint64_t threads = stat_of(rec, STACKPULSE_STAT_THREADS);
		uint64_t unfollowed = stat_of(rec, STACKPULSE_STAT_PROCESSES_UNFOLLOWED);
		uint64_t failed = stat_of(rec, STACKPULSE_STAT_FAILED_RECORDS);
		char dest[1200];
		if (rotate > 0) {
			/* The windows' own counts, as their callbacks gave them. */
			samples = ws.samples;
			lost = ws.lost;
			bytes = ws.bytes;
			snprintf(dest, sizeof(dest), "%u window%s %s.0001..%s.%04u", ws.count,
			         ws.count == 1 ? "" : "s", out, out, ws.count);
		} else {
			snprintf(dest, sizeof(dest), "%s", out);
		}
		char size[32];
		human_size(bytes, size, sizeof(size));
		fprintf(stderr,
		        "record: %" PRIu64 " samples (%" PRIu64 " lost) from %" PRIu64
		        " process%s, %" PRIu64 " thread%s in %.1fs%s%s -> %s (%s)",
		        samples, lost, processes, processes == 1 ? "" : "es", threads,
		        threads == 1 ? "" : "s", elapsed,
		        stat_of(rec, STACKPULSE_STAT_KERNEL_FRAMES) ? ", kernel frames" : "",
		        stat_of(rec, STACKPULSE_STAT_PYTHON_FRAMES) ? ", Python frames" : "", dest,
		        size);
		if (ws.push)
			fprintf(stderr, ", %u pushed, %u failed", ws.pushed, ws.push_failed);
		fputc('\n', stderr);
		if (stat_of(rec, STACKPULSE_STAT_OFFCPU_METHOD) != STACKPULSE_OFFCPU_NONE)
			fprintf(stderr,
			        "record: %" PRIu64 " off-CPU intervals (%" PRIu64
			        " without a stack, %" PRIu64 " dropped), %" PRIu64
			        " more merged into them\n",
			        stat_of(rec, STACKPULSE_STAT_OFFCPU_INTERVALS),
			        stat_of(rec, STACKPULSE_STAT_OFFCPU_NO_STACK),
			        stat_of(rec, STACKPULSE_STAT_OFFCPU_DROPPED),
			        stat_of(rec, STACKPULSE_STAT_OFFCPU_MERGED));
		if (unfollowed)
			fprintf(stderr,
			        "record: warning: %" PRIu64
			        " process%s no longer followed after an "
			        "error of its own (the first, pid %d: %s)\n",
			        unfollowed, unfollowed == 1 ? "" : "es",
			        (int)stat_of(rec, STACKPULSE_STAT_UNFOLLOWED_PID),
			        stackpulse_strerror(
			                -(int)stat_of(rec, STACKPULSE_STAT_UNFOLLOWED_ERROR)));
		if (failed)
			fprintf(stderr,
			        "record: warning: %" PRIu64 " record%s left out after an error of "
			        "%s own (docs/recording.md#errors)\n",
			        failed, failed == 1 ? "" : "s", failed == 1 ? "its" : "their");
	}
	const char *python_note = stackpulse_recorder_python_note(rec);
	if (*python_note)
		fprintf(stderr, "record: warning: %s: %s\n",
		        stat_of(rec, STACKPULSE_STAT_PYTHON_UNREADABLE)
		                ? "recorded without Python frames"
		                : "Python stacks read without pausing",
		        python_note);
	stackpulse_recorder_free(rec);
	if (child > 0 && child_status != -1 && WIFEXITED(child_status) && WEXITSTATUS(child_status))
		fprintf(stderr, "record: command exited with status %d\n",
		        WEXITSTATUS(child_status));
	return first_error || ws.push_failed ? 1 : 0;
}
