/* Pushing a profile to a continuous-profiling backend: Grafana Pyroscope's
 * ingest API (gzip'd pprof) or an OTLP/HTTP collector (profiles
 * v1development). The HTTP client is libcurl, built in unless -Dcurl=false
 * and loaded on the first push (see curl_ready); retries with exponential backoff on 5xx and 429 only, since a 4xx, a
 * refused connection or a timeout will not get better by asking again. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/opts.h"
#include "profile/export_internal.h"

#if defined(SP_HAVE_CURL) && SP_HAVE_CURL
#include <curl/curl.h>

#include "io/dynload.h"
#endif

enum {
	DEFAULT_TIMEOUT_MS = 10000,
	DEFAULT_BACKOFF_MS = 500,
	MAX_ANSWER = 512, /* Bytes of a failed answer kept for the message. */
};

static int push_opts(const stackpulse_push_opts *in, stackpulse_push_opts *o)
{
	*o = STACKPULSE_PUSH_OPTS;
	if (!in)
		return sp_error(-EINVAL, "push: opts is NULL (a URL is needed)");
	int rc = sp_opts_copy(o, sizeof(*o), in, "push");
	if (rc)
		return rc;
	if (o->protocol != STACKPULSE_PUSH_PYROSCOPE && o->protocol != STACKPULSE_PUSH_OTLP)
		return sp_error(-EINVAL, "push: unknown protocol %d", (int)o->protocol);
	if (!o->url || (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0))
		return sp_error(-EINVAL, "push: URL '%s' is not http:// or https://",
		                o->url ? o->url : "(null)");
	if (!o->app || !*o->app)
		o->app = "stackpulse";
	for (const char *c = o->app; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'))
			return sp_error(-EINVAL,
			                "push: app name '%s' may only have letters, digits, "
			                "'.', '-' and '_'",
			                o->app);
	if (!o->timeout_ms)
		o->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (!o->backoff_ms)
		o->backoff_ms = DEFAULT_BACKOFF_MS;
	if (o->retries > 10)
		return sp_error(-EINVAL, "push: %u retries (at most 10)", o->retries);
	return sp_export_check_labels(o->labels, o->nlabels);
}

void stackpulse_push_opts_init(stackpulse_push_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_PUSH_OPTS;
}

#if defined(SP_HAVE_CURL) && SP_HAVE_CURL

/* libcurl comes by dlopen on the first push, not as a link dependency:
 * loading it and the ~30 libraries it needs (TLS, SSH, LDAP, Kerberos, ...)
 * took about 5 ms of CPU and 5 MiB of RSS at every start of every program
 * linked with the library, pushing or not. */
#define CURL_SONAME "libcurl.so.4" /* libcurl's ABI since 7.16 (2006). */

static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cu;

static const sp_dynsym curl_syms[] = {
	SP_DYNSYM(cu.global_init, "curl_global_init"),
	SP_DYNSYM(cu.easy_init, "curl_easy_init"),
	SP_DYNSYM(cu.easy_setopt, "curl_easy_setopt"),
	SP_DYNSYM(cu.easy_perform, "curl_easy_perform"),
	SP_DYNSYM(cu.easy_getinfo, "curl_easy_getinfo"),
	SP_DYNSYM(cu.easy_cleanup, "curl_easy_cleanup"),
	SP_DYNSYM(cu.easy_strerror, "curl_easy_strerror"),
	SP_DYNSYM(cu.easy_escape, "curl_easy_escape"),
	SP_DYNSYM(cu.free, "curl_free"),
	SP_DYNSYM(cu.slist_append, "curl_slist_append"),
	SP_DYNSYM(cu.slist_free_all, "curl_slist_free_all"),
};

static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_global(void)
{
	curl_init_rc = cu.global_init(CURL_GLOBAL_DEFAULT);
}

static sp_dynlib curl_lib = SP_DYNLIB(CURL_SONAME, curl_syms, curl_global);

/* 0 once libcurl is loaded and initialised, else the error. */
static int curl_ready(void)
{
	if (sp_dynlib_load(&curl_lib) != 0)
		return sp_error(STACKPULSE_EUNSUPPORTED, "push: cannot load libcurl: %s",
		                curl_lib.why);
	if (curl_init_rc != CURLE_OK)
		return sp_error(-EIO, "push: libcurl did not initialise: %s",
		                cu.easy_strerror(curl_init_rc));
	return 0;
}

static int buf_sink(void *ctx, const void *data, size_t len)
{
	return sp_buf_append(ctx, data, len);
}

typedef struct answer {
	char text[MAX_ANSWER];
	size_t len;
} answer;

static size_t keep_answer(char *data, size_t size, size_t n, void *ctx)
{
	answer *a = ctx;
	size_t total = size * n;
	size_t room = sizeof(a->text) - 1 - a->len;
	size_t k = total < room ? total : room;
	memcpy(a->text + a->len, data, k);
	a->len += k;
	a->text[a->len] = '\0';
	return total;
}

/* The answer, made printable, for an error message. */
static const char *printable(answer *a)
{
	for (size_t i = 0; i < a->len; i++)
		if ((unsigned char)a->text[i] < 0x20 || (unsigned char)a->text[i] > 0x7e)
			a->text[i] = ' ';
	return a->text;
}

/* Appends the Pyroscope ingest query to @p url: name=APP.cpu{k=v,...}
 * escaped, and the time range in whole seconds. */
static int pyroscope_url(CURL *c, const stackpulse_profile *p, const stackpulse_push_opts *o,
                         sp_buf *url)
{
	sp_buf name;
	sp_buf_init(&name);
	int rc = sp_buf_append(&name, o->app, strlen(o->app));
	if (!rc)
		rc = sp_buf_append(&name, ".cpu", 4);
	if (!rc && o->nlabels) {
		rc = sp_buf_append(&name, "{", 1);
		for (size_t i = 0; i < o->nlabels && !rc; i++) {
			if (i)
				rc = sp_buf_append(&name, ",", 1);
			if (!rc)
				rc = sp_buf_append(&name, o->labels[i], strlen(o->labels[i]));
		}
		if (!rc)
			rc = sp_buf_append(&name, "}", 1);
	}
	char *esc = NULL;
	if (!rc) {
		esc = cu.easy_escape(c, (const char *)name.data, (int)name.len);
		if (!esc)
			rc = sp_error(-ENOMEM, "push: escaping the application name");
	}
	uint64_t dur = p->last_ns > p->first_ns ? p->last_ns - p->first_ns : 0;
	uint64_t start = p->start_wall_ns;
	if (!start) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		start = t > dur ? t - dur : 0;
	}
	uint64_t from = start / 1000000000ull;
	uint64_t until = (start + dur + 999999999ull) / 1000000000ull;
	if (until <= from)
		until = from + 1;
	char q[128];
	snprintf(q, sizeof(q), "&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof&sampleRate=%u",
	         from, until, p->frequency ? p->frequency : 100);
	if (!rc)
		rc = sp_buf_append(url, "/ingest?name=", 13);
	if (!rc && esc)
		rc = sp_buf_append(url, esc, strlen(esc));
	if (!rc)
		rc = sp_buf_append(url, q, strlen(q));
	cu.free(esc);
	sp_buf_free(&name);
	return rc;
}

/* Maps a transfer error (no HTTP answer) to a code and a message. */
static int transfer_error(CURLcode cc, const char *url, const char *detail)
{
	const char *what = detail && *detail ? detail : cu.easy_strerror(cc);
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		return sp_error(-ECONNREFUSED, "push: cannot connect to %s: %s", url, what);
	case CURLE_OPERATION_TIMEDOUT:
		return sp_error(-ETIMEDOUT, "push: %s did not answer in time: %s", url, what);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return sp_error(-EHOSTUNREACH, "push: cannot resolve the host of %s: %s", url,
		                what);
	case CURLE_OUT_OF_MEMORY: return sp_error(-ENOMEM, "push: %s", what);
	default: return sp_error(-EIO, "push: sending to %s failed: %s", url, what);
	}
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
		               .tv_nsec = (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static int post(const stackpulse_push_opts *o, const char *url, const sp_buf *body,
                const char *content_type)
{
	int rc = curl_ready();
	if (rc)
		return rc;
	CURL *c = cu.easy_init();
	if (!c)
		return sp_error(-ENOMEM, "push: curl_easy_init failed");
	char ctype[64];
	snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
	struct curl_slist *hdr = cu.slist_append(NULL, ctype);
	struct curl_slist *h2 = hdr ? cu.slist_append(hdr, "Expect:") : NULL;
	if (!h2) {
		cu.slist_free_all(hdr);
		cu.easy_cleanup(c);
		return sp_error(-ENOMEM, "push: HTTP headers");
	}
	hdr = h2;
	answer a;
	char errbuf[CURL_ERROR_SIZE];
	cu.easy_setopt(c, CURLOPT_URL, url);
	cu.easy_setopt(c, CURLOPT_POST, 1L);
	cu.easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)body->data);
	cu.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
	cu.easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	cu.easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
	cu.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)o->timeout_ms);
	cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* A library must not touch signals. */
	cu.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(c, CURLOPT_USERAGENT, "stackpulse");
	cu.easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
	cu.easy_setopt(c, CURLOPT_WRITEDATA, &a);
	cu.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	uint64_t wait = o->backoff_ms;
	for (uint32_t attempt = 0;; attempt++) {
		a.len = 0;
		a.text[0] = '\0';
		errbuf[0] = '\0';
		CURLcode cc = cu.easy_perform(c);
		if (cc != CURLE_OK) {
			rc = transfer_error(cc, url, errbuf);
			break;
		}
		long status = 0;
		cu.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status < 300) {
			rc = 0;
			break;
		}
		int retryable = status >= 500 || status == 429;
		if (!retryable || attempt >= o->retries) {
			rc = sp_error(-EPROTO, "push: HTTP %ld from %s%s: %s", status, url,
			              retryable ? " after every retry" : "", printable(&a));
			break;
		}
		sleep_ms(wait);
		wait *= 2;
	}
	cu.slist_free_all(hdr);
	cu.easy_cleanup(c);
	return rc;
}

int stackpulse_push(const stackpulse_profile *p, const stackpulse_push_opts *opts)
{
	SP_API_ENTRY();
	if (!p)
		return sp_error(-EINVAL, "push: profile is NULL");
	stackpulse_push_opts o;
	int rc = push_opts(opts, &o);
	if (rc || !o.url) /* push_opts refused a NULL URL already. */
		return rc ? rc : -EINVAL;
	sp_buf body, url;
	sp_buf_init(&body);
	sp_buf_init(&url);
	stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
	eo.app = o.app;
	eo.labels = o.labels;
	eo.nlabels = o.nlabels;
	int pyro = o.protocol == STACKPULSE_PUSH_PYROSCOPE;
	rc = stackpulse_export(p, pyro ? STACKPULSE_EXPORT_PPROF : STACKPULSE_EXPORT_OTLP, &eo,
	                       buf_sink, &body);
	size_t base = strlen(o.url);
	while (base > 0 && o.url[base - 1] == '/')
		base--;
	if (!rc)
		rc = sp_buf_append(&url, o.url, base);
	CURL *c = NULL;
	if (!rc)
		rc = curl_ready();
	if (!rc && pyro) {
		c = cu.easy_init();
		rc = c ? pyroscope_url(c, p, &o, &url) : sp_error(-ENOMEM, "push: curl_easy_init");
		cu.easy_cleanup(c);
	} else if (!rc) {
		rc = sp_buf_append(&url, "/v1development/profiles", 23);
	}
	if (!rc)
		rc = sp_buf_u8(&url, 0);
	if (!rc)
		rc = post(&o, (const char *)url.data, &body,
		          pyro ? "application/octet-stream" : "application/x-protobuf");
	sp_buf_free(&body);
	sp_buf_free(&url);
	return rc;
}

#else

int stackpulse_push(const stackpulse_profile *p, const stackpulse_push_opts *opts)
{
	SP_API_ENTRY();
	if (!p)
		return sp_error(-EINVAL, "push: profile is NULL");
	stackpulse_push_opts o;
	int rc = push_opts(opts, &o);
	if (rc)
		return rc;
	return sp_error(STACKPULSE_EUNSUPPORTED,
	                "push: this build has no HTTP client (it was built with -Dcurl=false)");
}

#endif
