/* Round trip of the symcache builder: the input describes entries (gap,
 * length, frame count, names and lines from a small dictionary); they are
 * built into a table that must validate, answer every lookup with exactly
 * the frames added, and rebuild (merge into a fresh builder) to the same
 * bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stackpulse.h"
#include "common/alloc.h"
#include "symcache/symcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 256

static const char *const dict[] = { "main", "foo", "ns::bar<int>(int)",         "a.c", "/src/b.cc",
	                            "",     "x",   "std::vector<T>::push_back", "z.h", "[inl]" };
#define NDICT (sizeof(dict) / sizeof(dict[0]))

typedef struct ent {
	uint64_t start;
	uint32_t len, n;
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
} ent;

static ent ents[MAX_ENTRIES];

static int str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0, count = 0;
	uint64_t at = 0;
	uint8_t bid[20];
	for (size_t i = 0; i < sizeof(bid); i++)
		bid[i] = (uint8_t)(i < size ? data[i] : i);
	uint32_t bid_len = size ? data[0] % 21 : 0;
#define NEXT() (pos < size ? data[pos++] : 0)
	while (pos + 3 <= size && count < MAX_ENTRIES) {
		ent *e = &ents[count];
		uint8_t gap = NEXT(), len = NEXT(), n = NEXT();
		e->start = at + gap;
		e->len = (uint32_t)len % 64 + 1;
		if (gap == 255)
			e->start = UINT64_MAX - e->len - (uint64_t)(NEXT() % 4); /* Near the top. */
		if (e->start < at || e->start > UINT64_MAX - e->len)
			break;
		e->n = (uint32_t)n % 8 + 1;
		if (n >= 250)
			e->n = SP_SYMCACHE_MAX_FRAMES - (uint32_t)(n - 250);
		for (uint32_t k = 0; k < e->n; k++) {
			uint8_t x = NEXT(), y = NEXT(), z = NEXT();
			e->fr[k].name = dict[x % NDICT];
			if (k + 1 == e->n && x >= 200)
				e->fr[k].name = NULL; /* An unresolved physical frame. */
			e->fr[k].file = y >= 200 ? NULL : dict[y % NDICT];
			e->fr[k].line = z;
		}
		at = e->start + e->len;
		count++;
	}
	sp_symcache_builder *b;
	if (sp_symcache_builder_new(bid, bid_len, &b) != 0)
		__builtin_trap();
	for (size_t i = 0; i < count; i++)
		if (sp_symcache_builder_add(b, ents[i].start, ents[i].len, ents[i].fr, ents[i].n) !=
		    0)
			__builtin_trap();
	uint8_t *bytes;
	size_t len;
	if (sp_symcache_builder_finish(b, &bytes, &len) != 0)
		__builtin_trap();
	sp_symcache_builder_free(b);
	sp_symcache t;
	if (sp_symcache_validate(bytes, len, &t) != 0)
		__builtin_trap();
	if (t.build_id_len != bid_len || memcmp(t.build_id, bid, bid_len) != 0)
		__builtin_trap();
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
	for (size_t i = 0; i < count; i++) {
		const ent *e = &ents[i];
		uint64_t probes[2] = { e->start, e->start + e->len - 1 };
		for (int p = 0; p < 2; p++) {
			uint32_t n = sp_symcache_lookup(&t, probes[p], fr, SP_SYMCACHE_MAX_FRAMES,
			                                NULL, NULL);
			if (n != e->n)
				__builtin_trap();
			for (uint32_t k = 0; k < n; k++)
				if (!str_eq(fr[k].name, e->fr[k].name) ||
				    !str_eq(fr[k].file, e->fr[k].file) ||
				    fr[k].line != e->fr[k].line)
					__builtin_trap();
		}
		/* Gaps between entries stay unknown. */
		if (e->start > 0 && (i == 0 || ents[i - 1].start + ents[i - 1].len < e->start) &&
		    sp_symcache_lookup(&t, e->start - 1, fr, SP_SYMCACHE_MAX_FRAMES, NULL, NULL) !=
		            0)
			__builtin_trap();
	}
	/* Rebuilding from the table gives the same bytes. */
	sp_symcache_builder *b2;
	uint8_t *bytes2;
	size_t len2;
	if (sp_symcache_builder_new(bid, bid_len, &b2) != 0 ||
	    sp_symcache_builder_merge(b2, &t) != 0 ||
	    sp_symcache_builder_finish(b2, &bytes2, &len2) != 0)
		__builtin_trap();
	sp_symcache_builder_free(b2);
	if (len2 != len || memcmp(bytes, bytes2, len) != 0)
		__builtin_trap();
	sp_free(bytes2);
	sp_free(bytes);
	return 0;
}
