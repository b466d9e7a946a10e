/* Writer failures at every field: each record is written with a string (or
 * an earlier record) of every length around the buffers' growth points, so
 * an injected allocation failure lands on each field in turn. The failed
 * call must leave nothing behind: retried, it gives a file that reads back.
 * Also the writer's argument edges: NULL index outputs, default options, a
 * sink that returns a positive value, strings over their cap. */
#include <errno.h>
#include <stdio.h>

#include "common/alloc.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"

#define PAD_MAX 300

static char pad_buf[PAD_MAX + 1];

/* A string of @p n letters. */
static const char *pad(size_t n)
{
	memset(pad_buf, 'a', n);
	pad_buf[n] = '\0';
	return pad_buf;
}

struct setup {
	uint32_t proc, thr, mod, frame;
};

/* What every target may refer to; @p name_len pads the chunk buffer. */
static int write_setup(sp_writer *w, size_t name_len, struct setup *d)
{
	int rc;
	char name[PAD_MAX + 1];
	memset(name, 'p', name_len);
	name[name_len] = '\0';
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_KERNEL, 0, 0x1000, 0, 0 };
	if ((rc = sp_writer_process(w, 7, UINT32_MAX, 1, name, "p", &d->proc)) ||
	    (rc = sp_writer_thread(w, d->proc, 7, 1, "t", &d->thr)) ||
	    (rc = sp_writer_module(w, "/m", NULL, 0, &d->mod)) ||
	    (rc = sp_writer_frame(w, &f, &d->frame)))
		return rc;
	return 0;
}

/* One writer call under test, with its first string @p s. */
typedef int (*target_fn)(sp_writer *w, const struct setup *d, const char *s);

static int t_meta(sp_writer *w, const struct setup *d, const char *s)
{
	(void)d;
	sp_meta m = { 1, 2, 99, 8192, s, "x86_64", "6.1", "host", 1, "note" };
	return sp_writer_meta(w, &m);
}

static int t_process(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_process(w, 8, d->proc, 2, s, "cmd line", NULL);
}

static int t_exec(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_process_exec(w, d->proc, 3, s, "new cmd");
}

static int t_thread(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_thread(w, d->proc, 9, 4, s, NULL);
}

static int t_comm(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_thread_name(w, d->thr, 5, s);
}

static int t_exit(sp_writer *w, const struct setup *d, const char *s)
{
	(void)s;
	return sp_writer_exit(w, d->proc, d->thr, 6);
}

static int t_fork(sp_writer *w, const struct setup *d, const char *s)
{
	(void)s;
	return sp_writer_fork(w, d->proc, d->proc, 7);
}

static int t_lost(sp_writer *w, const struct setup *d, const char *s)
{
	(void)s;
	return sp_writer_lost(w, d->thr, 3, 8);
}

static int t_module(sp_writer *w, const struct setup *d, const char *s)
{
	(void)d;
	return sp_writer_module(w, s, rich_build_id, 20, NULL);
}

static int t_mapping(sp_writer *w, const struct setup *d, const char *s)
{
	(void)s;
	return sp_writer_mapping(w, d->proc, d->mod, 0x1000, 0x2000, 0, 9);
}

static int t_pycode(sp_writer *w, const struct setup *d, const char *s)
{
	(void)d;
	return sp_writer_pycode(w, s, "/app.py", 12, NULL);
}

static int t_frame(sp_writer *w, const struct setup *d, const char *s)
{
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, d->mod, strlen(s), 0, 0 };
	uint32_t id;
	return sp_writer_frame(w, &f, &id);
}

static int t_stack(sp_writer *w, const struct setup *d, const char *s)
{
	uint32_t frames[2] = { d->frame, d->frame }, id;
	(void)s;
	return sp_writer_stack_frames(w, frames, 2, &id);
}

static int t_sample(sp_writer *w, const struct setup *d, const char *s)
{
	(void)s;
	return sp_writer_sample(w, 10, d->thr, 0, 1, 2);
}

static int t_ksym(sp_writer *w, const struct setup *d, const char *s)
{
	(void)d;
	return sp_writer_ksym(w, 0xffffffff81000000ull, s, "ext4");
}

static int t_jitsym(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_jitsym(w, d->proc, 0x7000, 0x10, s);
}

static int t_symtab(sp_writer *w, const struct setup *d, const char *s)
{
	return sp_writer_symtab(w, d->mod, (const uint8_t *)s, strlen(s) + 1);
}

static int t_stat(sp_writer *w, const struct setup *d, const char *s)
{
	(void)d;
	return sp_writer_stat(w, SP_STAT_UNWIND_ERRORS, strlen(s));
}

/* Runs @p fn on fresh writers: the setup padded by @p setup_pad, the call's
 * string padded by @p call_pad, failing each allocation of the call in
 * turn. Returns the number of failures injected. */
static long sweep_one(target_fn fn, size_t setup_pad, size_t call_pad)
{
	long failures = 0;
	for (long n = 0; n < 64; n++) {
		memsink m = { 0 };
		sp_writer *w = NULL;
		sp_writer_opts opts = { 1, SP_CHUNK_BYTES_MAX };
		struct setup d;
		REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
		REQUIRE_OK(write_setup(w, setup_pad, &d));
		sp_alloc_fail_after(n);
		int rc = fn(w, &d, pad(call_pad));
		sp_alloc_fail_after(-1);
		if (rc == 0) {
			/* No allocation left to fail. */
			sp_writer_free(w);
			memsink_free(&m);
			break;
		}
		CHECK_EQ(rc, -ENOMEM);
		failures++;
		/* Nothing was left behind: the retry gives a valid file. */
		CHECK_OK(fn(w, &d, pad(call_pad)));
		CHECK_OK(sp_writer_finish(w));
		stackpulse_spool *s = NULL;
		CHECK_OK(sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s));
		stackpulse_spool_close(s);
		sp_writer_free(w);
		memsink_free(&m);
	}
	return failures;
}

SP_TEST(allocation_failure_at_every_field_of_every_record)
{
	static const struct {
		const char *name;
		target_fn fn;
	} targets[] = {
		{ "meta", t_meta },       { "process", t_process }, { "exec", t_exec },
		{ "thread", t_thread },   { "comm", t_comm },       { "exit", t_exit },
		{ "fork", t_fork },       { "lost", t_lost },       { "module", t_module },
		{ "mapping", t_mapping }, { "pycode", t_pycode },   { "frame", t_frame },
		{ "stack", t_stack },     { "sample", t_sample },   { "ksym", t_ksym },
		{ "jitsym", t_jitsym },   { "symtab", t_symtab },   { "stat", t_stat },
	};
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		long failures = 0;
		for (size_t len = 0; len <= PAD_MAX; len++) {
			failures += sweep_one(targets[i].fn, len, 1);
			failures += sweep_one(targets[i].fn, 1, len);
		}
		CHECK(failures > 0);
		printf("    %-8s %ld injected failures\n", targets[i].name, failures);
	}
}

static int positive_sink(void *ctx, const void *p, size_t n)
{
	memsink *m = ctx;
	if (m->fail_at && m->len + n > m->fail_at)
		return 1; /* Not an errno: the writer reports -EIO. */
	return memsink_write(ctx, p, n);
}

SP_TEST(writer_argument_edges)
{
	/* Options present but zero: the defaults. */
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts zero = { 0, 0 };
	REQUIRE_OK(sp_writer_new(&zero, memsink_write, &m, &w));
	/* Outputs are optional. */
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_KERNEL, 0, 0x10, 0, 0 };
	uint32_t frame, node;
	REQUIRE_OK(sp_writer_process(w, 1, UINT32_MAX, 0, "p", "p", NULL));
	REQUIRE_OK(sp_writer_thread(w, 0, 1, 0, "t", NULL));
	REQUIRE_OK(sp_writer_module(w, "/m", NULL, 0, NULL));
	REQUIRE_OK(sp_writer_module(w, "/m", NULL, 0, NULL)); /* Interned. */
	REQUIRE_OK(sp_writer_pycode(w, "f", "f.py", 1, NULL));
	REQUIRE_OK(sp_writer_frame(w, &f, &frame));
	REQUIRE_OK(sp_writer_stack(w, 0, frame, &node));
	/* Strings over their caps are cut to them. */
	size_t big = SP_NAME_MAX + 100;
	char *s = malloc(big + 1);
	REQUIRE(s != NULL);
	memset(s, 'n', big);
	s[big] = '\0';
	REQUIRE_OK(sp_writer_process_exec(w, 0, 1, s, "cmd"));
	REQUIRE_OK(sp_writer_module(w, s, NULL, 0, NULL));
	/* Bad lengths and depths are refused. */
	CHECK_EQ(sp_writer_symtab(w, 0, (const uint8_t *)s, 0), STACKPULSE_ELIMIT);
	CHECK_EQ(sp_writer_symtab(w, 0, (const uint8_t *)s, (size_t)SP_SYMTAB_MAX + 1),
	         STACKPULSE_ELIMIT);
	node = 0;
	for (uint32_t d = 0; d < SP_STACK_DEPTH_MAX; d++)
		REQUIRE_OK(sp_writer_stack(w, node, frame, &node));
	CHECK_EQ(sp_writer_stack(w, node, frame, &node), STACKPULSE_ELIMIT);
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	stackpulse_spool *sp;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &sp));
	CHECK_EQ(strlen(stackpulse_spool_process(sp, 0)->name), SP_NAME_MAX);
	CHECK_STR(stackpulse_spool_process(sp, 0)->initial_name, "p");
	CHECK_EQ(stackpulse_spool_module_count(sp), 2);
	CHECK_EQ(strlen(stackpulse_spool_module(sp, 1)->path), SP_PATH_MAX);
	CHECK_EQ(stackpulse_spool_stack_depth(sp, stackpulse_spool_stack_count(sp) - 1),
	         SP_STACK_DEPTH_MAX);
	stackpulse_spool_close(sp);
	memsink_free(&m);
	free(s);

	/* A sink returning a positive value is an I/O error: on the header,
	 * on a chunk and on the footer. */
	memsink p = { 0 };
	p.fail_at = 1;
	CHECK_EQ(sp_writer_new(NULL, positive_sink, &p, &w), -EIO);
	memsink_free(&p);
	p.fail_at = SP_FILE_HEADER_LEN + 1;
	REQUIRE_OK(sp_writer_new(NULL, positive_sink, &p, &w));
	REQUIRE_OK(sp_writer_process(w, 1, UINT32_MAX, 0, "p", "p", NULL));
	CHECK_EQ(sp_writer_flush(w), -EIO);
	CHECK_EQ(sp_writer_process(w, 2, UINT32_MAX, 0, "q", "q", NULL), STACKPULSE_ESTATE);
	sp_writer_free(w);
	memsink_free(&p);
	p.fail_at = SP_FILE_HEADER_LEN + 1;
	REQUIRE_OK(sp_writer_new(NULL, positive_sink, &p, &w));
	CHECK_EQ(sp_writer_finish(w), -EIO);
	sp_writer_free(w);
	memsink_free(&p);
}

/* A symbol table of several parts whose second part cannot be written: the
 * first part is out, so the writer stops for good. */
SP_TEST(symtab_part_failure_stops_the_writer)
{
	size_t len = SP_SYMTAB_PART_MAX + 100;
	uint8_t *table = calloc(1, len);
	REQUIRE(table != NULL);
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 1, 4096 };
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	uint32_t mod;
	REQUIRE_OK(sp_writer_module(w, "/big", NULL, 0, &mod));
	m.fail_at = m.len + 64; /* The first part's chunk cannot be written. */
	CHECK_EQ(sp_writer_symtab(w, mod, table, len), -ENOSPC);
	CHECK_EQ(sp_writer_stat(w, 1, 1), STACKPULSE_ESTATE);
	sp_writer_free(w);
	memsink_free(&m);
	free(table);
}
