/* Push cost per rotation window.
 *
 *   push_cost SECONDS WINDOW_SECONDS HZ WORKLOAD [ARGS...]
 *
 * Records WORKLOAD with the recorder API, rotating every WINDOW_SECONDS,
 * and pushes each window as `record --rotate --push` does: read back,
 * symbolized, profile built, then stackpulse_push, from a thread of its
 * own, to a loopback sink in this process that counts the request bodies
 * and answers 200. Each window is pushed twice, as Pyroscope and as OTLP.
 * One line per window:
 *   window=I samples=N file_bytes=B close_ms=C prep_ms=P prep_cpu_ms=P'
 *   pyroscope_ms=X pyroscope_cpu_ms=X' pyroscope_bytes=Y
 *   otlp_ms=Z otlp_cpu_ms=Z' otlp_bytes=W
 * close_ms: from the start of the consume (or finish) call that closed
 * the window to the window's callback (drain, seal, embedded symbols,
 * rename); prep: spool open + symbolizer + profile build; *_ms
 * wall and *_cpu_ms CPU of the pushing thread (CLOCK_THREAD_CPUTIME_ID)
 * for stackpulse_push alone; *_bytes: the body the sink received.
 * Needs libstackpulse built with its HTTP client (not -Dcurl=false). */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stackpulse.h"

static double clock_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the loopback sink ---- */

static int sink_fd;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t sink_last_body;

static void *sink_run(void *arg)
{
	(void)arg;
	static char buf[1 << 16];
	for (;;) {
		int c = accept(sink_fd, NULL, NULL);
		if (c < 0)
			return NULL;
		/* One request per connection is enough: libcurl reuses nothing
		 * across stackpulse_push calls. Keep-alive requests are read in a
		 * loop all the same. */
		for (;;) {
			size_t have = 0;
			char *end = NULL;
			while (!end && have < sizeof(buf) - 1) {
				ssize_t n = read(c, buf + have, sizeof(buf) - 1 - have);
				if (n <= 0)
					break;
				have += (size_t)n;
				buf[have] = 0;
				end = strstr(buf, "\r\n\r\n");
			}
			if (!end)
				break;
			uint64_t len = 0;
			for (char *p = buf; p < end; p++)
				if ((p == buf || p[-1] == '\n') &&
				    strncasecmp(p, "content-length:", 15) == 0)
					len = strtoull(p + 15, NULL, 10);
			uint64_t got = have - (size_t)(end + 4 - buf);
			while (got < len) {
				ssize_t n = read(c, buf, sizeof(buf));
				if (n <= 0)
					break;
				got += (uint64_t)n;
			}
			pthread_mutex_lock(&sink_lock);
			sink_last_body = got;
			pthread_mutex_unlock(&sink_lock);
			static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
			if (write(c, ok, sizeof(ok) - 1) < 0)
				break;
		}
		close(c);
	}
}

/* ---- windows and pushes ---- */

struct item {
	struct item *next;
	uint32_t index;
	double close_ms;
	char path[4096];
};

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_more = PTHREAD_COND_INITIALIZER;
static struct item *q_head, **q_tail = &q_head;
static int q_done;
static uint32_t closed;
static char url[64];
static double call_t0; /* Start of the recorder call under way (main thread). */

static void on_window(void *ctx, const struct stackpulse_window *w)
{
	(void)ctx;
	struct item *it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->index = w->index;
	it->close_ms = clock_ms(CLOCK_MONOTONIC) - call_t0;
	snprintf(it->path, sizeof(it->path), "%s", w->path);
	pthread_mutex_lock(&q_lock);
	closed++;
	*q_tail = it;
	q_tail = &it->next;
	pthread_cond_signal(&q_more);
	pthread_mutex_unlock(&q_lock);
}

static int push_as(const stackpulse_profile *p, enum stackpulse_push_protocol proto, double *ms,
                   double *cpu, uint64_t *bytes)
{
	stackpulse_push_opts o = STACKPULSE_PUSH_OPTS;
	o.protocol = proto;
	o.url = url;
	o.app = "bench";
	double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
	int rc = stackpulse_push(p, &o);
	*ms = clock_ms(CLOCK_MONOTONIC) - t0;
	*cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
	pthread_mutex_lock(&sink_lock);
	*bytes = sink_last_body;
	pthread_mutex_unlock(&sink_lock);
	if (rc)
		fprintf(stderr, "push: %s\n", stackpulse_last_error());
	return rc;
}

static void *pusher(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&q_lock);
		while (!q_head && !q_done)
			pthread_cond_wait(&q_more, &q_lock);
		struct item *it = q_head;
		if (it && !(q_head = it->next))
			q_tail = &q_head;
		pthread_mutex_unlock(&q_lock);
		if (!it)
			return NULL;
		double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
		stackpulse_spool *sp = NULL;
		stackpulse_symbolizer *sym = NULL;
		stackpulse_profile *p = NULL;
		if (stackpulse_spool_open(it->path, NULL, &sp) == 0) {
			if (stackpulse_symbolizer_new(sp, NULL, &sym) != 0)
				sym = NULL;
			stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
			po.flags = STACKPULSE_PROFILE_GROUP_UNRESOLVED;
			if (stackpulse_profile_build(sp, sym, &po, &p) != 0)
				p = NULL;
		}
		double prep = clock_ms(CLOCK_MONOTONIC) - t0,
		       prep_cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		uint64_t samples = sp ? stackpulse_spool_meta(sp)->samples : 0;
		stackpulse_symbolizer_free(sym);
		stackpulse_spool_close(sp);
		FILE *f = fopen(it->path, "rb");
		long fbytes = -1;
		if (f && fseek(f, 0, SEEK_END) == 0)
			fbytes = ftell(f);
		if (f)
			fclose(f);
		double pm = 0, pc = 0, om = 0, oc = 0;
		uint64_t pb = 0, ob = 0;
		if (p && samples && push_as(p, STACKPULSE_PUSH_PYROSCOPE, &pm, &pc, &pb) == 0 &&
		    push_as(p, STACKPULSE_PUSH_OTLP, &om, &oc, &ob) == 0) {
			printf("window=%u samples=%" PRIu64
			       " file_bytes=%ld close_ms=%.2f prep_ms=%.2f "
			       "prep_cpu_ms=%.2f pyroscope_ms=%.2f pyroscope_cpu_ms=%.2f "
			       "pyroscope_bytes=%" PRIu64 " otlp_ms=%.2f otlp_cpu_ms=%.2f "
			       "otlp_bytes=%" PRIu64 "\n",
			       it->index, samples, fbytes, it->close_ms, prep, prep_cpu, pm, pc, pb,
			       om, oc, ob);
			fflush(stdout);
		}
		stackpulse_profile_free(p);
		free(it);
	}
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: push_cost SECONDS WINDOW_SECONDS HZ WORKLOAD [ARGS...]\n");
		return 2;
	}
	double secs = strtod(argv[1], NULL), win = strtod(argv[2], NULL);
	sink_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof(a);
	if (sink_fd < 0 || bind(sink_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(sink_fd, 8) != 0 || getsockname(sink_fd, (struct sockaddr *)&a, &alen) != 0) {
		perror("sink");
		return 1;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	pthread_t st, pt;
	pthread_create(&st, NULL, sink_run, NULL);
	pthread_create(&pt, NULL, pusher, NULL);

	char spool[] = "/tmp/push_cost.XXXXXX";
	int tfd = mkstemp(spool);
	close(tfd);
	unlink(spool);
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = (uint32_t)strtoul(argv[3], NULL, 10);
	o.rotate_ns = (uint64_t)(win * 1e9);
	o.on_window = on_window;
	stackpulse_recorder *rec = NULL;
	pid_t child = 0;
	int rc = stackpulse_recorder_spawn(argv + 4, spool, &o, &rec, &child);
	if (rc) {
		fprintf(stderr, "spawn: %s\n", stackpulse_last_error());
		return 1;
	}
	double end = clock_ms(CLOCK_MONOTONIC) + secs * 1e3;
	while (clock_ms(CLOCK_MONOTONIC) < end && stackpulse_recorder_process_is_active(rec, 0)) {
		if (stackpulse_recorder_wait(rec, 100) < 0)
			break;
		call_t0 = clock_ms(CLOCK_MONOTONIC);
		if (stackpulse_recorder_consume_available(rec) != 0)
			break;
	}
	call_t0 = clock_ms(CLOCK_MONOTONIC);
	rc = stackpulse_recorder_finish(rec);
	stackpulse_recorder_free(rec);
	pthread_mutex_lock(&q_lock);
	q_done = 1;
	pthread_cond_signal(&q_more);
	pthread_mutex_unlock(&q_lock);
	pthread_join(pt, NULL);
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	for (uint32_t i = 1; i <= closed; i++) {
		char p[64];
		snprintf(p, sizeof(p), "%s.%04u", spool, i);
		unlink(p);
	}
	return rc ? 1 : 0;
}
