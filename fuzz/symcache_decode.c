/* Fuzzes the symcache decoder over untrusted bytes: validate must never read
 * out of bounds, and when it accepts a table every range must be readable,
 * every lookup must land inside it, and chains must stay within the depth
 * limit with strings inside the table. Each input is also tried with its
 * size field and checksum fixed up, so the structural checks behind the
 * checksum get explored too. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stackpulse.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "symcache/symcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const sp_symcache *t, const char *s)
{
	if (!s)
		return;
	if (s < t->strings || s >= t->strings + t->strings_size)
		__builtin_trap();
	if (strlen(s) >= (size_t)(t->strings + t->strings_size - s))
		__builtin_trap();
}

static void check_table(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_table(data, size);
	static uint8_t copy[1 << 16];
	if (size >= SP_SYMCACHE_HEADER_SIZE + 4 && size <= sizeof(copy)) {
		memcpy(copy, data, size);
		sp_put_le32(copy + 8, (uint32_t)size);
		sp_put_le32(copy + size - 4, sp_crc32c(0, copy, size - 4));
		check_table(copy, size);
	}
	return 0;
}

static void check_table(const uint8_t *data, size_t size)
{
	sp_symcache t;
	if (sp_symcache_validate(data, size, &t) != 0)
		return;
	sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES];
	uint32_t limit = t.range_count < 4096 ? t.range_count : 4096;
	for (uint32_t i = 0; i < limit; i++) {
		uint64_t start;
		uint32_t len;
		uint32_t n = sp_symcache_range(&t, i, fr, SP_SYMCACHE_MAX_FRAMES, &start, &len);
		if (n == 0 || n > SP_SYMCACHE_MAX_FRAMES)
			__builtin_trap();
		for (uint32_t k = 0; k < n; k++) {
			check_str(&t, fr[k].name);
			check_str(&t, fr[k].file);
			if (k + 1 < n && !fr[k].name)
				__builtin_trap();
		}
		/* Both ends of the range find this range. */
		uint64_t s2;
		if (sp_symcache_lookup(&t, start, fr, SP_SYMCACHE_MAX_FRAMES, &s2, NULL) != n ||
		    s2 != start)
			__builtin_trap();
		if (sp_symcache_lookup(&t, start + len - 1, fr, SP_SYMCACHE_MAX_FRAMES, &s2,
		                       NULL) != n ||
		    s2 != start)
			__builtin_trap();
		/* A small output buffer truncates, never overflows. */
		if (sp_symcache_range(&t, i, fr, 2, NULL, NULL) > 2)
			__builtin_trap();
	}
}
