/* The per-boot cache of core kernel text symbols answers exactly as the
 * full /proc/kallsyms read does, is private, is really used when present,
 * and falls back to the full read for damaged files and addresses outside
 * the core text. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "harness.h"
#include "record/kallsyms.h"
#include "symbolize/cacheio.h"
#include "symcache/symcache.h"

typedef struct answers {
	uint64_t start[8192];
	char name[8192][64];
	char module[8192][32];
	size_t n;
} answers;

static int on_sym(void *ctx, uint64_t start, const char *name, const char *module)
{
	answers *a = ctx;
	if (a->n == sizeof(a->start) / sizeof(a->start[0]))
		return -E2BIG;
	a->start[a->n] = start;
	snprintf(a->name[a->n], sizeof(a->name[0]), "%s", name);
	snprintf(a->module[a->n], sizeof(a->module[0]), "%s", module);
	a->n++;
	return 0;
}

/* Answers in address order: the two paths may emit in different orders. */
static int same(const answers *x, const answers *y)
{
	if (x->n != y->n)
		return 0;
	for (size_t i = 0; i < x->n; i++) {
		size_t j = 0;
		while (j < y->n && y->start[j] != x->start[i])
			j++;
		if (j == y->n || strcmp(x->name[i], y->name[j]) != 0 ||
		    strcmp(x->module[i], y->module[j]) != 0)
			return 0;
	}
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Sorted, distinct addresses inside the core text: symbol starts, one past
 * them, and the byte before the next symbol. */
static size_t core_addresses(uint64_t *out, size_t cap, uint64_t *etext)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		return 0;
	char line[1024];
	uint64_t stext = 0, prev = 0;
	size_t n = 0, seen = 0;
	*etext = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t a;
		char type, name[512];
		if (sscanf(line, "%" SCNx64 " %c %511s", &a, &type, name) != 3)
			continue;
		if (strcmp(name, "_stext") == 0)
			stext = a;
		if (strcmp(name, "_etext") == 0)
			*etext = a;
		if (!stext || *etext || a == 0 || (type != 't' && type != 'T'))
			continue;
		/* Every 97th symbol spreads the picks over the whole text. */
		if (++seen % 97 == 0 && n + 3 < cap && a > prev + 2) {
			out[n++] = prev ? a - 1 : a;
			out[n++] = a;
			out[n++] = a + 1;
		}
		prev = a;
	}
	fclose(f);
	qsort(out, n, sizeof(*out), cmp_u64);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (m == 0 || out[m - 1] != out[i])
			out[m++] = out[i];
	return stext && *etext ? m : 0;
}

static uint64_t addrs[6000];
static answers want, got;

static void resolve_cached(const char *dir, const uint64_t *a, size_t n, answers *out)
{
	int zeroed = 0;
	out->n = 0;
	REQUIRE_OK(sp_kallsyms_resolve_cached(dir, a, n, on_sym, out, &zeroed));
	CHECK_EQ(zeroed, 0);
}

static void cache_file(char *path, size_t cap, const char *dir)
{
	/* The key is "ksym" and the boot id, in hex. */
	char boot[64] = { 0 };
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	REQUIRE(f != NULL);
	REQUIRE(fgets(boot, sizeof(boot), f) != NULL);
	fclose(f);
	char hex[64];
	size_t k = 0;
	for (size_t i = 0; boot[i] && boot[i] != '\n' && k + 1 < sizeof(hex); i++)
		if (boot[i] != '-')
			hex[k++] = boot[i];
	hex[k] = '\0';
	snprintf(path, cap, "%s/6b73796d%s.spsym", dir, hex);
}

SP_TEST(cached_answers_equal_the_full_read)
{
	uint64_t etext;
	size_t n = core_addresses(addrs, sizeof(addrs) / sizeof(addrs[0]), &etext);
	if (n < 100)
		sp_test_skip("kernel addresses are hidden (not root or kptr_restrict)");
	int zeroed = 0;
	want.n = 0;
	REQUIRE_OK(sp_kallsyms_resolve("/proc/kallsyms", addrs, n, on_sym, &want, &zeroed));
	REQUIRE(want.n > 30);
	char dir[512], file[700];
	snprintf(dir, sizeof(dir), "%s/kcache", sp_test_tmpdir());
	cache_file(file, sizeof(file), dir);

	resolve_cached(dir, addrs, n, &got); /* Cold: full read, writes the table. */
	CHECK(same(&want, &got));
	struct stat st;
	REQUIRE(stat(file, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0600);

	resolve_cached(dir, addrs, n, &got); /* Warm: from the table. */
	CHECK(same(&want, &got));
	printf("    %zu addresses, %zu symbols, cache file %lld bytes\n", n, want.n,
	       (long long)st.st_size);

	/* An address past the core text takes the full read. */
	uint64_t mixed[3] = { addrs[0], addrs[n / 2], etext + 0x1000 };
	answers *full = calloc(1, sizeof(*full));
	REQUIRE(full != NULL);
	REQUIRE_OK(sp_kallsyms_resolve("/proc/kallsyms", mixed, 3, on_sym, full, &zeroed));
	resolve_cached(dir, mixed, 3, &got);
	CHECK(same(full, &got));
	free(full);
}

/* Rewrites the cached table with every range starting at or above
 * @p from renamed "planted_N". */
static void plant(const char *dir, const char *file, uint64_t from)
{
	uint8_t key[20] = { 'k', 's', 'y', 'm' };
	const char *hex = strrchr(file, '/') + 1 + 8;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		REQUIRE(sscanf(hex + 2 * i, "%2x", &v) == 1);
		key[4 + i] = (uint8_t)v;
	}
	uint8_t *old;
	sp_symcache t;
	REQUIRE_OK(sp_cacheio_read(dir, key, 20, &old, &t));
	sp_symcache_builder *b;
	REQUIRE_OK(sp_symcache_builder_new(key, 20, &b));
	sp_symcache_builder_keep_starts(b); /* As the library builds it. */
	for (uint32_t i = 0; i < t.range_count; i++) {
		sp_symcache_frame f;
		uint64_t start;
		uint32_t len;
		REQUIRE_EQ(sp_symcache_range(&t, i, &f, 1, &start, &len), 1);
		char name[32]; /* Distinct names: the builder joins equal neighbours. */
		snprintf(name, sizeof(name), "planted_%u", i);
		if (start >= from)
			f.name = name;
		REQUIRE_OK(sp_symcache_builder_add(b, start, len, &f, 1));
	}
	uint8_t *data;
	size_t len;
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	sp_free(old);
	REQUIRE_OK(sp_cacheio_write(dir, key, 20, data, len));
	sp_free(data);
}

SP_TEST(present_table_is_used)
{
	uint64_t etext;
	size_t n = core_addresses(addrs, sizeof(addrs) / sizeof(addrs[0]), &etext);
	if (n < 100)
		sp_test_skip("kernel addresses are hidden (not root or kptr_restrict)");
	char dir[512], file[700];
	snprintf(dir, sizeof(dir), "%s/kused", sp_test_tmpdir());
	cache_file(file, sizeof(file), dir);
	resolve_cached(dir, addrs, n, &got);
	/* Rename the table's symbols past the middle pick: the answers must
	 * now come from it, so the warm path reads no more than the head of
	 * kallsyms (which it checks against the table). */
	uint64_t mid = addrs[n / 2];
	plant(dir, file, mid);
	resolve_cached(dir, addrs, n, &got);
	size_t planted = 0;
	for (size_t i = 0; i < got.n; i++) {
		int is_planted = strncmp(got.name[i], "planted_", 8) == 0;
		CHECK_EQ(is_planted, got.start[i] >= mid);
		planted += (size_t)is_planted;
	}
	CHECK(planted > 10);

	/* A table that disagrees with the head of the file (another view of
	 * kallsyms, a bind mount) is not used. */
	plant(dir, file, 0);
	int zeroed = 0;
	want.n = 0;
	REQUIRE_OK(sp_kallsyms_resolve("/proc/kallsyms", addrs, n, on_sym, &want, &zeroed));
	resolve_cached(dir, addrs, n, &got);
	CHECK(same(&want, &got));

	/* A damaged table is ignored: the full read answers and rewrites it. */
	FILE *w = fopen(file, "r+b");
	REQUIRE(w != NULL);
	fseek(w, 40, SEEK_SET);
	fputs("garbage", w);
	fclose(w);
	resolve_cached(dir, addrs, n, &got);
	CHECK(same(&want, &got));
	resolve_cached(dir, addrs, n, &got);
	CHECK(same(&want, &got));
}

SP_TEST(no_cache_dir_reads_kallsyms)
{
	uint64_t etext;
	size_t n = core_addresses(addrs, sizeof(addrs) / sizeof(addrs[0]), &etext);
	if (n < 100)
		sp_test_skip("kernel addresses are hidden (not root or kptr_restrict)");
	int zeroed = 0;
	want.n = 0;
	REQUIRE_OK(sp_kallsyms_resolve("/proc/kallsyms", addrs, n, on_sym, &want, &zeroed));
	resolve_cached(NULL, addrs, n, &got);
	CHECK(same(&want, &got));
	CHECK_EQ(sp_kallsyms_resolve_cached(NULL, addrs, 0, on_sym, &got, &zeroed), 0);
}
