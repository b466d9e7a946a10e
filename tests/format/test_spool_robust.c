/* Robustness of the spool format: a cut at every byte offset, every single
 * bit flipped, allocation failures at every point, and memory that stays
 * flat as the number of samples grows. */
#include <malloc.h>

#include "common/alloc.h"
#include "spool_copy.h"
#include "spool_fixture.h"
#include "format/spool_reader.h"

#if defined(__SANITIZE_ADDRESS__)
#define SP_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SP_UNDER_ASAN 1
#endif
#endif

static memsink small_spool(uint32_t chunk_bytes)
{
	memsink m = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 1, chunk_bytes };
	rich_ids ids;
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
	int rc = write_rich(w, &ids, 1);
	sp_writer_free(w);
	REQUIRE_OK(rc);
	return m;
}

/* Opens @p len bytes and walks everything; returns the open result. */
static int open_and_walk(const uint8_t *p, size_t len, uint64_t *samples_seen)
{
	stackpulse_spool *s;
	int rc = sp_spool_open_memory(p, len, 0, &s);
	*samples_seen = 0;
	if (rc)
		return rc;
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *x;
	uint32_t frames[SP_STACK_DEPTH_MAX];
	int r;
	while ((r = stackpulse_sample_iter_next(it, &x)) == 1) {
		(*samples_seen)++;
		uint32_t depth =
		        stackpulse_spool_stack_frames(s, x->stack, frames, SP_STACK_DEPTH_MAX);
		CHECK(depth == stackpulse_spool_stack_depth(s, x->stack));
		for (uint32_t i = 0; i < depth; i++)
			CHECK(stackpulse_spool_frame(s, frames[i]) != NULL);
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(*samples_seen, stackpulse_spool_meta(s)->samples);
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);
	return 0;
}

SP_TEST(cut_at_every_byte_offset)
{
	memsink m = small_spool(64);
	/* Chunk ends and their cumulative sample counts, from the full file. */
	stackpulse_spool *full;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &full));
	uint32_t nchunks = stackpulse_spool_meta(full)->chunks;
	REQUIRE(nchunks >= 5);
	stackpulse_spool_close(full);
	size_t ends[64];
	REQUIRE(nchunks < 64);
	size_t off = SP_FILE_HEADER_LEN;
	for (uint32_t i = 0; i < nchunks; i++) {
		off += SP_CHUNK_HEADER_LEN + sp_le32(m.data + off + 12);
		ends[i] = off;
	}
	REQUIRE_EQ(off + SP_FOOTER_LEN, m.len);
	printf("    %zu bytes, %u chunks\n", m.len, nchunks);
	for (size_t len = 0; len <= m.len; len++) {
		stackpulse_spool *s = NULL;
		int rc = sp_spool_open_memory(m.data, len, 0, &s);
		if (len < SP_FILE_HEADER_LEN) {
			CHECK_EQ(rc, STACKPULSE_ETRUNCATED);
			continue;
		}
		if (rc) {
			fprintf(stderr, "    cut at %zu: %d %s\n", len, rc,
			        stackpulse_last_error());
			CHECK_OK(rc);
			continue;
		}
		uint32_t complete = 0;
		while (complete < nchunks && ends[complete] <= len)
			complete++;
		const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
		CHECK_EQ(meta->truncated, len != m.len);
		CHECK_EQ(meta->chunks, complete);
		stackpulse_spool_close(s);
		uint64_t seen;
		CHECK_OK(open_and_walk(m.data, len, &seen));
	}
	memsink_free(&m);
}

/* Each flipped bit must give an error or a spool that walks cleanly. A
 * strict open refuses nearly all of them; the default open keeps the chunks
 * before the damage (test_spool_damage.c checks which) unless the file
 * header itself is hit. */
SP_TEST(every_bit_flip_is_handled)
{
	memsink m = small_spool(256);
	uint64_t accepted = 0, rejected = 0, damaged = 0;
	for (size_t i = 0; i < m.len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			m.data[i] ^= (uint8_t)(1u << bit);
			stackpulse_spool *s = NULL;
			int rc = sp_spool_open_memory(m.data, m.len, STACKPULSE_SPOOL_STRICT, &s);
			if (rc) {
				CHECK(rc < 0);
				CHECK(stackpulse_last_error()[0] != '\0');
				rejected++;
			} else {
				accepted++;
			}
			stackpulse_spool_close(s);
			uint64_t seen;
			rc = open_and_walk(m.data, m.len, &seen);
			if (i < SP_FILE_HEADER_LEN) {
				CHECK(rc < 0);
			} else {
				CHECK_OK(rc);
				REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
				damaged += (uint64_t)stackpulse_spool_meta(s)->damaged;
				stackpulse_spool_close(s);
			}
			m.data[i] ^= (uint8_t)(1u << bit);
		}
	}
	printf("    %zu bytes: %llu flips rejected (strict), %llu accepted, %llu damaged\n", m.len,
	       (unsigned long long)rejected, (unsigned long long)accepted,
	       (unsigned long long)damaged);
	/* CRC-32C catches every single-bit error inside a chunk. */
	CHECK(rejected > accepted * 20);
	CHECK_EQ(damaged + 8 * SP_FILE_HEADER_LEN, rejected);
	memsink_free(&m);
}

/* Allocation failure at every point of writing: the call fails cleanly, and
 * whatever reached the sink still opens. */
SP_TEST(writer_survives_allocation_failures)
{
	int done = 0;
	long n;
	for (n = 0; !done && n < 10000; n++) {
		memsink m = { 0 };
		sp_writer *w = NULL;
		sp_writer_opts opts = { 1, 128 };
		rich_ids ids;
		sp_alloc_fail_after(n);
		int rc = sp_writer_new(&opts, memsink_write, &m, &w);
		if (!rc)
			rc = write_rich(w, &ids, 1);
		sp_alloc_fail_after(-1);
		if (rc) {
			CHECK(rc == -12 || rc == STACKPULSE_ELIMIT);
		} else {
			done = 1;
		}
		sp_writer_free(w);
		if (m.len) {
			uint64_t seen;
			int orc = open_and_walk(m.data, m.len, &seen);
			CHECK(orc == 0 || orc == STACKPULSE_ETRUNCATED);
		}
		memsink_free(&m);
	}
	CHECK(done);
	printf("    writer succeeded after %ld injected failures\n", n - 1);
}

/* A failed call leaves no trace: retrying it gives the very same bytes as a
 * run without failures. */
SP_TEST(failed_writer_calls_leave_no_trace)
{
	memsink ref = { 0 };
	sp_writer *w;
	sp_writer_opts opts = { 1, 300 };
	REQUIRE_OK(sp_writer_new(&opts, memsink_write, &ref, &w));
	REQUIRE_OK(write_steady(w, 2000, 20, 2));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	for (long k = 0; k < 40; k++) {
		memsink m = { 0 };
		REQUIRE_OK(sp_writer_new(&opts, memsink_write, &m, &w));
		/* Fail every k-th allocation once, then retry the same call. */
		uint32_t proc, thr, mod, stack = 0;
		int rc;
		long failures = 0;
#define RETRY(call)                                                                                \
	do {                                                                                       \
		sp_alloc_fail_after(k);                                                            \
		rc = (call);                                                                       \
		sp_alloc_fail_after(-1);                                                           \
		if (rc == -12) {                                                                   \
			failures++;                                                                \
			rc = (call);                                                               \
		}                                                                                  \
		REQUIRE_OK(rc);                                                                    \
	} while (0)
		RETRY(sp_writer_process(w, 1, UINT32_MAX, 0, "p", "p", &proc));
		RETRY(sp_writer_thread(w, proc, 1, 0, "t", &thr));
		RETRY(sp_writer_module(w, "/m", NULL, 0, &mod));
		for (uint32_t i = 0; i < 500; i++) {
			uint32_t frames[3], id;
			for (uint32_t d = 0; d < 3; d++) {
				struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, mod,
					                          (i % 37) * 16 + d, 0, 0 };
				RETRY(sp_writer_frame(w, &f, &frames[d]));
			}
			RETRY(sp_writer_stack_frames(w, frames, 3, &id));
			RETRY(sp_writer_sample(w, 1000 + i * 7, thr, id, 1, i % 3));
			stack = id;
		}
		(void)stack;
		RETRY(sp_writer_finish(w));
#undef RETRY
		sp_writer_free(w);
		/* Same calls without failures, for the reference bytes. */
		memsink r2 = { 0 };
		REQUIRE_OK(sp_writer_new(&opts, memsink_write, &r2, &w));
		REQUIRE_OK(sp_writer_process(w, 1, UINT32_MAX, 0, "p", "p", &proc));
		REQUIRE_OK(sp_writer_thread(w, proc, 1, 0, "t", &thr));
		REQUIRE_OK(sp_writer_module(w, "/m", NULL, 0, &mod));
		for (uint32_t i = 0; i < 500; i++) {
			uint32_t frames[3], id;
			for (uint32_t d = 0; d < 3; d++) {
				struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, mod,
					                          (i % 37) * 16 + d, 0, 0 };
				REQUIRE_OK(sp_writer_frame(w, &f, &frames[d]));
			}
			REQUIRE_OK(sp_writer_stack_frames(w, frames, 3, &id));
			REQUIRE_OK(sp_writer_sample(w, 1000 + i * 7, thr, id, 1, i % 3));
		}
		REQUIRE_OK(sp_writer_finish(w));
		sp_writer_free(w);
		REQUIRE_EQ(m.len, r2.len);
		CHECK(memcmp(m.data, r2.data, m.len) == 0);
		if (k == 3)
			printf("    k=3: %ld failed calls retried\n", failures);
		memsink_free(&m);
		memsink_free(&r2);
	}
	memsink_free(&ref);
}

/* Allocation failure at every point of reading: an error, never a crash or
 * a leak (checked by ASan/valgrind runs). */
SP_TEST(reader_survives_allocation_failures)
{
	memsink m = small_spool(128);
	int done = 0;
	long n;
	for (n = 0; !done && n < 100000; n++) {
		stackpulse_spool *s = NULL;
		stackpulse_sample_iter *it = NULL;
		sp_alloc_fail_after(n);
		int rc = sp_spool_open_memory(m.data, m.len, 0, &s);
		if (!rc)
			rc = stackpulse_sample_iter_new(s, &it);
		uint64_t count = 0;
		if (!rc) {
			const struct stackpulse_sample *x;
			while ((rc = stackpulse_sample_iter_next(it, &x)) == 1)
				count++;
		}
		sp_alloc_fail_after(-1);
		if (rc) {
			CHECK_EQ(rc, -12);
		} else {
			CHECK_EQ(count, 5);
			done = 1;
		}
		stackpulse_sample_iter_free(it);
		stackpulse_spool_close(s);
	}
	CHECK(done);
	printf("    reader succeeded after %ld injected failures\n", n - 1);
	/* The copy path too. */
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	done = 0;
	for (n = 0; !done && n < 100000; n++) {
		memsink out = { 0 };
		sp_writer *w = NULL;
		sp_alloc_fail_after(n);
		int rc = sp_writer_new(NULL, memsink_write, &out, &w);
		if (!rc)
			rc = sp_spool_copy(s, w);
		if (!rc)
			rc = sp_writer_finish(w);
		sp_alloc_fail_after(-1);
		if (rc)
			CHECK_EQ(rc, -12);
		else
			done = 1;
		sp_writer_free(w);
		memsink_free(&out);
	}
	CHECK(done);
	stackpulse_spool_close(s);
	memsink_free(&m);
}

struct mem_use {
	uint64_t allocs;  /* sp_* allocations during open + iterate. */
	size_t retained;  /* Heap held by the open spool. */
	size_t peak;      /* Peak heap during iteration, above the baseline. */
	uint64_t samples; /* Samples iterated. */
};

static size_t heap_in_use(void)
{
#if !defined(SP_UNDER_ASAN) && defined(__GLIBC__) &&                                               \
        (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	return mallinfo2().uordblks;
#else
	return 0; /* ASan's allocator and old or other libcs do not report it. */
#endif
}

static struct mem_use measure(uint64_t nsamples, size_t *file_len)
{
	memsink m = { 0 };
	sp_writer *w;
	REQUIRE_OK(sp_writer_new(NULL, memsink_write, &m, &w));
	REQUIRE_OK(write_steady(w, nsamples, 50, 4));
	REQUIRE_OK(sp_writer_finish(w));
	sp_writer_free(w);
	*file_len = m.len;
	struct mem_use u = { 0 };
	size_t base = heap_in_use();
	sp_alloc_reset_count();
	stackpulse_spool *s;
	REQUIRE_OK(sp_spool_open_memory(m.data, m.len, 0, &s));
	u.retained = heap_in_use() - base;
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(s, &it));
	const struct stackpulse_sample *x;
	int rc;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		if (++u.samples % 4096 == 0) {
			size_t now = heap_in_use() - base;
			if (now > u.peak)
				u.peak = now;
		}
	}
	CHECK_EQ(rc, 0);
	u.allocs = sp_alloc_count();
	stackpulse_sample_iter_free(it);
	stackpulse_spool_close(s);
	memsink_free(&m);
	return u;
}

SP_TEST(memory_is_flat_in_samples)
{
	size_t len_small, len_big;
	struct mem_use small = measure(50000, &len_small);
	struct mem_use big = measure(500000, &len_big);
	printf("    50k samples (%zu bytes): %llu allocs, %zu retained, %zu peak\n", len_small,
	       (unsigned long long)small.allocs, small.retained, small.peak);
	printf("    500k samples (%zu bytes): %llu allocs, %zu retained, %zu peak\n", len_big,
	       (unsigned long long)big.allocs, big.retained, big.peak);
	CHECK_EQ(small.samples, 50000);
	CHECK_EQ(big.samples, 500000);
	/* Ten times the samples: a handful more allocations (the chunk index
	 * grows), and no more than a chunk's worth of extra memory. */
	CHECK(big.allocs <= small.allocs + 8);
	CHECK(big.retained <= small.retained + 64 * 1024);
	CHECK(big.peak <= small.peak + 2 * SP_CHUNK_RAW_MAX);
	CHECK(big.peak < 24u << 20);
}
