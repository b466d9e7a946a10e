/* The reader's tables: each one's first growth (and each sort) survives an
 * allocation failure whatever record kind causes it, and the table memory
 * budget holds against a file whose embedded symbol table outgrows it. */
#include <errno.h>
#include <stdio.h>

#include "common/alloc.h"
#include "format/spool_keys.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"

/* Opens @p m with the n-th allocation failing, for every n: -ENOMEM or the
 * same spool as without failures. Returns the failures seen. */
static long sweep_open(const memsink *m)
{
	stackpulse_spool *ref;
	REQUIRE_OK(sp_spool_open_memory(m->data, m->len, 0, &ref));
	long failures = 0;
	for (long n = 0; n < 10000; n++) {
		stackpulse_spool *s = NULL;
		sp_alloc_fail_after(n);
		int rc = sp_spool_open_memory(m->data, m->len, 0, &s);
		sp_alloc_fail_after(-1);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			failures++;
			continue;
		}
		CHECK_EQ(stackpulse_spool_event_count(s), stackpulse_spool_event_count(ref));
		CHECK_EQ(stackpulse_spool_stack_count(s), stackpulse_spool_stack_count(ref));
		CHECK_EQ(stackpulse_spool_meta(s)->lost, stackpulse_spool_meta(ref)->lost);
		stackpulse_spool_close(s);
		break;
	}
	stackpulse_spool_close(ref);
	return failures;
}

/* A process, a thread and a module, then the records of case @p k, each
 * kind first of its table. */
static int write_case(sp_writer *w, int k)
{
	uint32_t p, t, mod, f1, f2, st;
	int rc;
	struct stackpulse_raw_frame f = { STACKPULSE_FRAME_KERNEL, 0, 0x10, 0, 0 };
	if ((rc = sp_writer_process(w, 5, UINT32_MAX, 1, "p", "p", &p)) ||
	    (rc = sp_writer_thread(w, p, 5, 1, "t", &t)) ||
	    (rc = sp_writer_module(w, "/m", NULL, 0, &mod)))
		return rc;
	switch (k) {
	case 0: return sp_writer_process_exec(w, p, 9, "e", "e");
	case 1: return sp_writer_thread_name(w, t, 9, "c");
	case 2: return sp_writer_exit(w, p, t, 9);
	case 3: return sp_writer_fork(w, p, p, 9);
	case 4:
		if ((rc = sp_writer_lost(w, t, 2, 9)))
			return rc;
		return sp_writer_lost(w, UINT32_MAX, 3, 8); /* Sorted after. */
	case 5: return sp_writer_mapping(w, p, mod, 0x1000, 0x2000, 0, 9);
	case 6:
		if ((rc = sp_writer_jitsym(w, p, 0x9000, 16, "j2")))
			return rc;
		return sp_writer_jitsym(w, p, 0x8000, 16, "j1");
	case 7:
		if ((rc = sp_writer_ksym(w, 0x9000, "k2", "")))
			return rc;
		return sp_writer_ksym(w, 0x8000, "k1", "");
	case 8:
		if ((rc = sp_writer_stat(w, 9, 1)))
			return rc;
		return sp_writer_stat(w, 2, 1);
	case 9: return sp_writer_symtab(w, mod, (const uint8_t *)"tab", 3);
	case 10: return sp_writer_pycode(w, "q", "q.py", 1, NULL);
	default:
		/* Stack nodes past the table's first size. */
		if ((rc = sp_writer_frame(w, &f, &f1)))
			return rc;
		f.offset = 0x20;
		if ((rc = sp_writer_frame(w, &f, &f2)))
			return rc;
		st = 0;
		for (int i = 0; i < 12; i++)
			if ((rc = sp_writer_stack(w, st, i % 2 ? f1 : f2, &st)))
				return rc;
		return sp_writer_sample(w, 10, t, st, 1, 0);
	}
}

SP_TEST(first_growth_of_every_table_survives_allocation_failure)
{
	for (int k = 0; k <= 11; k++) {
		memsink m = { 0 };
		sp_writer *w;
		REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
		REQUIRE_OK(write_case(w, k));
		REQUIRE_OK(sp_writer_finish(w));
		sp_writer_free(w);
		long failures = sweep_open(&m);
		CHECK(failures >= 4);
		printf("    case %2d: %ld failures\n", k, failures);
		memsink_free(&m);
	}
}

/* An embedded symbol table of 33 MiB in a file of about 200 KiB fits the
 * decompressed budget (256 x the file) but not the table budget (32 MiB):
 * strict reading refuses it, the default keeps the chunks before the part
 * that broke the budget. */
SP_TEST(table_budget_holds_against_a_large_symbol_table)
{
	size_t len = 33u << 20;
	uint8_t *table = calloc(1, len);
	REQUIRE(table != NULL);
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	/* Incompressible names make the file big enough for the budget. */
	char *noise = malloc(50001);
	REQUIRE(noise != NULL);
	uint64_t seed = 7;
	for (int k = 0; k < 4; k++) {
		for (size_t i = 0; i < 50000; i++)
			noise[i] = (char)(1 + fixture_rand(&seed) % 255);
		noise[50000] = '\0';
		REQUIRE_OK(sp_writer_ksym(w, 0x1000u + (uint64_t)k, noise, ""));
	}
	uint32_t mod;
	REQUIRE_OK(sp_writer_module(w, "/big", NULL, 0, &mod));
	REQUIRE_OK(sp_writer_symtab(w, mod, table, len));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	printf("    %zu bytes on disk\n", m.len);
	REQUIRE(m.len > (len >> 8) && m.len < (512u << 10));
	stackpulse_spool *s;
	CHECK_EQ(sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s),
	         STACKPULSE_ELIMIT);
	CHECK(strstr(stackpulse_last_error(), "tables would exceed") != NULL);
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
	CHECK_EQ(meta->damaged, 1);
	CHECK_EQ(meta->damaged_code, STACKPULSE_ELIMIT);
	CHECK(meta->chunks > 0 && meta->chunks < 34);
	CHECK_EQ(stackpulse_spool_module(s, mod)->has_symbols, 0); /* Half a table is dropped. */
	CHECK_EQ(stackpulse_spool_ksym_count(s), 4);
	stackpulse_spool_close(s);
	free(noise);
	free(table);
	memsink_free(&m);
}

/* Interning identity: frames and modules differing in any one field are
 * different values (the tables ask only when 32-bit hashes collide, which
 * tests cannot arrange cheaply, so the comparisons are checked directly). */
SP_TEST(key_equality_checks_every_field)
{
	struct stackpulse_raw_frame a = { STACKPULSE_FRAME_PYTHON, UINT32_MAX, 16, 3, 40 };
	REQUIRE_EQ(sp_frame_canonical(&a), 0);
	struct stackpulse_raw_frame b = a;
	CHECK(sp_frame_equal(&a, &b));
	CHECK_EQ(sp_frame_hash(&a), sp_frame_hash(&b));
	for (int field = 0; field < 5; field++) {
		b = a;
		switch (field) {
		case 0: b.kind = STACKPULSE_FRAME_NATIVE; break;
		case 1: b.module = 1; break;
		case 2: b.offset = 17; break;
		case 3: b.pycode = 4; break;
		default: b.line = 41; break;
		}
		CHECK(!sp_frame_equal(&a, &b));
	}
	b = (struct stackpulse_raw_frame){ STACKPULSE_FRAME_INLINE, 0, 0, 0, 0 };
	CHECK_EQ(sp_frame_canonical(&b), -EINVAL);
	static const uint8_t bid[4] = { 1, 2, 3, 4 }, bid2[4] = { 1, 2, 3, 5 };
	sp_module_key k = { "/lib/x.so", 9, bid, 4 };
	CHECK(sp_module_key_equal(&k, "/lib/x.so", bid, 4));
	CHECK(!sp_module_key_equal(&k, "/lib/x.s", bid, 4));
	CHECK(!sp_module_key_equal(&k, "/lib/y.so", bid, 4));
	CHECK(!sp_module_key_equal(&k, "/lib/x.so", bid, 3));
	CHECK(!sp_module_key_equal(&k, "/lib/x.so", bid2, 4));
	sp_module_key none = { "/a", 2, NULL, 0 };
	CHECK(sp_module_key_equal(&none, "/a", NULL, 0));
	CHECK(sp_stack_hash(1, 2) != sp_stack_hash(2, 1));
}
