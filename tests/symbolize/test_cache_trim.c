/* The symbol cache's size bound (src/symbolize/cachetrim.c): which files a
 * trim removes, in which order, and that the cache's writers trim. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "harness.h"
#include "symbolize/cacheio.h"
#include "symbolize/cachetrim.h"
#include "symcache/symcache.h"

/* The library trims a directory sp_cacheio_dir_open accepted. */
static int trim(const char *path, const char *fresh, const char *stale_prefix, uint64_t max)
{
	int fd = sp_cacheio_dir_open(path, 0);
	REQUIRE(fd >= 0);
	int n = sp_cache_trim_at(fd, fresh, stale_prefix, max);
	close(fd);
	return n;
}

static char dir[512];

static void fresh_dir(const char *name)
{
	snprintf(dir, sizeof(dir), "%s/%s", sp_test_tmpdir(), name);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	REQUIRE_EQ(system(cmd), 0);
}

/* A file of @p kib KiB, used (atime) and modified (mtime) @p age_s ago. */
static void put(const char *name, int kib, int age_s)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	char block[1024];
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < kib; i++)
		REQUIRE_EQ(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age_s;
	ts[1] = ts[0];
	REQUIRE_EQ(futimens(fd, ts), 0);
	close(fd);
}

static int exists(const char *name)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

SP_TEST(trim_removes_least_recently_used_until_three_quarters)
{
	fresh_dir("lru");
	put("aa.spsym", 100, 500); /* oldest */
	put("bb.debug", 100, 400);
	put("cc.spsym", 100, 300);
	put("dd.debug", 100, 200);
	put("ee.spsym", 100, 100);  /* the fresh one, oldest use aside */
	put("notes.txt", 900, 900); /* not ours: never touched, never counted */
	put("AA.spsym", 900, 900);  /* not a name the cache writes */
	/* 500 KiB of cache files against a 400 KiB bound: down to 300 KiB. */
	int n = trim(dir, "ee.spsym", NULL, 400 << 10);
	CHECK_EQ(n, 2);
	CHECK(!exists("aa.spsym"));
	CHECK(!exists("bb.debug"));
	CHECK(exists("cc.spsym"));
	CHECK(exists("dd.debug"));
	CHECK(exists("ee.spsym"));
	CHECK(exists("notes.txt"));
	CHECK(exists("AA.spsym"));
	/* Within the bound: nothing more goes. */
	CHECK_EQ(trim(dir, NULL, NULL, 400 << 10), 0);
	/* No bound: nothing goes either. */
	CHECK_EQ(trim(dir, NULL, NULL, 0), 0);
}

SP_TEST(touch_moves_a_file_to_the_back_of_the_queue)
{
	fresh_dir("touch");
	put("01.spsym", 100, 500);
	put("02.spsym", 100, 400);
	put("03.spsym", 100, 300);
	char path[700];
	snprintf(path, sizeof(path), "%s/01.spsym", dir);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	sp_cache_touch(fd);
	close(fd);
	CHECK_EQ(trim(dir, NULL, NULL, 250 << 10), 2);
	CHECK(exists("01.spsym"));
	CHECK(!exists("02.spsym"));
	CHECK(!exists("03.spsym"));
}

SP_TEST(trim_drops_older_generations_and_abandoned_temporaries)
{
	fresh_dir("stale");
	put("6b73796d0001.spsym", 10, 50);          /* kernel table, another boot */
	put("6b73796d0002.spsym", 10, 10);          /* this boot's: the fresh one */
	put("6b73796e0003.spsym", 10, 50);          /* other prefix: kept */
	put("ab.spsym.tmp.123.0", 10, 2 * 60 * 60); /* abandoned */
	put("cd.debug.tmp.456.1", 10, 5);           /* another writer's, in progress */
	put("ef.spsym.tmpx", 10, 2 * 60 * 60);      /* not ours */
	CHECK_EQ(trim(dir, "6b73796d0002.spsym", "6b73796d", 0), 2);
	CHECK(!exists("6b73796d0001.spsym"));
	CHECK(exists("6b73796d0002.spsym"));
	CHECK(exists("6b73796e0003.spsym"));
	CHECK(!exists("ab.spsym.tmp.123.0"));
	CHECK(exists("cd.debug.tmp.456.1"));
	CHECK(exists("ef.spsym.tmpx"));
	/* Symlinks are never followed nor removed. */
	char path[700], target[700];
	snprintf(target, sizeof(target), "%s/victim", dir);
	put("victim", 1, 0);
	snprintf(path, sizeof(path), "%s/6b73796d0009.spsym", dir);
	REQUIRE_EQ(symlink(target, path), 0);
	CHECK_EQ(trim(dir, NULL, "6b73796d", 0), 1); /* 0002 only */
	CHECK(exists("victim"));
	CHECK_EQ(access(path, F_OK), 0);
}

SP_TEST(max_bytes_comes_from_the_environment)
{
	unsetenv("STACKPULSE_SYMBOL_CACHE_MAX_MB");
	CHECK_EQ(sp_cache_max_bytes(), (uint64_t)SP_CACHE_DEFAULT_MAX_MB << 20);
	setenv("STACKPULSE_SYMBOL_CACHE_MAX_MB", "3", 1);
	CHECK_EQ(sp_cache_max_bytes(), 3ull << 20);
	setenv("STACKPULSE_SYMBOL_CACHE_MAX_MB", "0", 1);
	CHECK_EQ(sp_cache_max_bytes(), 0);
	setenv("STACKPULSE_SYMBOL_CACHE_MAX_MB", "lots", 1);
	CHECK_EQ(sp_cache_max_bytes(), (uint64_t)SP_CACHE_DEFAULT_MAX_MB << 20);
	unsetenv("STACKPULSE_SYMBOL_CACHE_MAX_MB");
}

/* A real table, written through the cache's writer. */
static void write_table(uint8_t tag, size_t *len_out)
{
	uint8_t bid[20];
	memset(bid, tag, sizeof(bid));
	sp_symcache_builder *b;
	REQUIRE_OK(sp_symcache_builder_new(bid, sizeof(bid), &b));
	char name[64];
	for (uint64_t a = 0; a < 20000; a++) {
		snprintf(name, sizeof(name), "function_%u_%llu", tag, (unsigned long long)a);
		sp_symcache_frame f;
		memset(&f, 0, sizeof(f));
		f.name = name;
		REQUIRE_OK(sp_symcache_builder_add(b, a * 16, 16, &f, 1));
	}
	uint8_t *data;
	size_t len;
	REQUIRE_OK(sp_symcache_builder_finish(b, &data, &len));
	sp_symcache_builder_free(b);
	REQUIRE_OK(sp_cacheio_write(dir, bid, sizeof(bid), data, len));
	sp_free(data);
	*len_out = len;
}

SP_TEST(the_cache_writer_keeps_the_directory_within_its_bound)
{
	fresh_dir("writer");
	size_t len = 0;
	write_table(1, &len);
	printf("one table: %zu bytes\n", len);
	REQUIRE(len > 1024);
	/* Room for about two and a half tables. */
	char mb[32];
	snprintf(mb, sizeof(mb), "%zu", (len * 5 / 2 + (1u << 20) - 1) >> 20);
	if (len * 5 / 2 < (1u << 20))
		sp_test_skip_env("tables too small to exceed a 1 MiB bound in a few writes");
	setenv("STACKPULSE_SYMBOL_CACHE_MAX_MB", mb, 1);
	struct timespec pause = { 0, 20000000 };
	for (uint8_t t = 2; t <= 5; t++) {
		nanosleep(&pause, NULL);
		write_table(t, &len);
	}
	unsetenv("STACKPULSE_SYMBOL_CACHE_MAX_MB");
	CHECK(!exists("0101010101010101010101010101010101010101.spsym"));
	CHECK(exists("0505050505050505050505050505050505050505.spsym"));
}
