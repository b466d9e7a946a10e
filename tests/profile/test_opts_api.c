/* Every public function that takes an options struct refuses one from a
 * newer header whose unknown tail is not zero (docs/abi.md), and accepts it
 * when the tail is zero. */
#include "harness.h"
#include "synth.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* An options struct of type T from a "newer header": T, then 16 more bytes. */
#define BIGGER(T)                                                                                  \
	struct {                                                                                   \
		T known;                                                                           \
		unsigned char tail[16];                                                            \
	}

/* Sets byte 5 of the tail, and checks the refusal names its offset. */
static void check_refused(int rc, size_t known_size)
{
	CHECK_EQ(rc, -EINVAL);
	char want[48];
	snprintf(want, sizeof(want), "offset %zu ", known_size + 5);
	if (!strstr(stackpulse_last_error(), want))
		sp_test_fail(__FILE__, __LINE__, "'%s' does not name %s", stackpulse_last_error(),
		             want);
}

static int null_sink(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

SP_TEST(recorder_attach_and_spawn_refuse_an_unknown_tail)
{
	BIGGER(stackpulse_recorder_opts) o;
	memset(&o, 0, sizeof(o));
	o.known = STACKPULSE_RECORDER_OPTS;
	o.known.sz = sizeof(o);
	o.tail[5] = 1;
	stackpulse_recorder *rec = NULL;
	check_refused(stackpulse_recorder_attach(getpid(), "/nonexistent/x.spool",
	                                         STACKPULSE_ATTACH_LIVE, &o.known, &rec),
	              sizeof(o.known));
	char *argv[] = { (char *)"true", NULL };
	check_refused(stackpulse_recorder_spawn(argv, "/nonexistent/x.spool", &o.known, &rec, NULL),
	              sizeof(o.known));
	CHECK(rec == NULL);
	/* A zero tail passes the options check (and fails later, on the path). */
	o.tail[5] = 0;
	int rc = stackpulse_recorder_spawn(argv, "/nonexistent/x.spool", &o.known, &rec, NULL);
	CHECK(rc != 0 && strstr(stackpulse_last_error(), "offset") == NULL);
}

SP_TEST(spool_open_and_tail_refuse_an_unknown_tail)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);
	stackpulse_spool_close(s);
	BIGGER(stackpulse_spool_open_opts) o;
	memset(&o, 0, sizeof(o));
	o.known = STACKPULSE_SPOOL_OPEN_OPTS;
	o.known.sz = sizeof(o);
	o.known.buf = mem.data;
	o.known.len = mem.len;
	o.tail[5] = 0x80;
	s = NULL;
	check_refused(stackpulse_spool_open(NULL, &o.known, &s), sizeof(o.known));
	CHECK(s == NULL);
	o.tail[5] = 0;
	CHECK_OK(stackpulse_spool_open(NULL, &o.known, &s));
	stackpulse_spool_close(s);

	BIGGER(stackpulse_spool_tail_opts) t;
	memset(&t, 0, sizeof(t));
	t.known = STACKPULSE_SPOOL_TAIL_OPTS;
	t.known.sz = sizeof(t);
	t.tail[5] = 2;
	stackpulse_spool_tail *tail = NULL;
	check_refused(stackpulse_spool_tail_open("/nonexistent/x.spool", &t.known, &tail),
	              sizeof(t.known));
	CHECK(tail == NULL);
	sp_buf_free(&mem);
}

SP_TEST(symbolizer_profile_export_push_refuse_an_unknown_tail)
{
	sp_buf mem;
	stackpulse_spool *s = syn_spool(&mem, NULL);

	BIGGER(stackpulse_symbolizer_opts) y;
	memset(&y, 0, sizeof(y));
	y.known = STACKPULSE_SYMBOLIZER_OPTS;
	y.known.sz = sizeof(y);
	y.known.flags = STACKPULSE_SYM_OFFLINE;
	y.tail[5] = 3;
	stackpulse_symbolizer *sym = NULL;
	check_refused(stackpulse_symbolizer_new(s, &y.known, &sym), sizeof(y.known));
	CHECK(sym == NULL);
	y.tail[5] = 0;
	CHECK_OK(stackpulse_symbolizer_new(s, &y.known, &sym));
	stackpulse_symbolizer_free(sym);

	BIGGER(stackpulse_profile_opts) po;
	memset(&po, 0, sizeof(po));
	po.known = STACKPULSE_PROFILE_OPTS;
	po.known.sz = sizeof(po);
	po.tail[5] = 4;
	stackpulse_profile *p = NULL;
	check_refused(stackpulse_profile_build(s, NULL, &po.known, &p), sizeof(po.known));
	CHECK(p == NULL);
	po.tail[5] = 0;
	CHECK_OK(stackpulse_profile_build(s, NULL, &po.known, &p));

	BIGGER(stackpulse_export_opts) eo;
	memset(&eo, 0, sizeof(eo));
	eo.known = STACKPULSE_EXPORT_OPTS;
	eo.known.sz = sizeof(eo);
	eo.tail[5] = 5;
	check_refused(stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, &eo.known, null_sink, NULL),
	              sizeof(eo.known));
	check_refused(
	        stackpulse_export_to_path(p, STACKPULSE_EXPORT_FOLDED, &eo.known, "/dev/null"),
	        sizeof(eo.known));
	check_refused(stackpulse_export_spool(s, NULL, NULL, STACKPULSE_EXPORT_FOLDED, &eo.known,
	                                      null_sink, NULL),
	              sizeof(eo.known));
	eo.tail[5] = 0;
	CHECK_OK(stackpulse_export(p, STACKPULSE_EXPORT_FOLDED, &eo.known, null_sink, NULL));
	po.tail[5] = 4;
	check_refused(stackpulse_export_spool(s, NULL, &po.known, STACKPULSE_EXPORT_FOLDED, NULL,
	                                      null_sink, NULL),
	              sizeof(po.known));
	check_refused(stackpulse_export_spool(s, NULL, &po.known, STACKPULSE_EXPORT_FIREFOX, NULL,
	                                      null_sink, NULL),
	              sizeof(po.known));

	BIGGER(stackpulse_push_opts) pu;
	memset(&pu, 0, sizeof(pu));
	pu.known = STACKPULSE_PUSH_OPTS;
	pu.known.sz = sizeof(pu);
	pu.known.url = "http://127.0.0.1:9";
	pu.tail[5] = 6;
	check_refused(stackpulse_push(p, &pu.known), sizeof(pu.known));

	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}
