/* Debug file search. Order: <root>/.build-id/xx/rest.debug under each
 * debug root; then .gnu_debuglink (next to the binary, in its .debug/
 * folder, and under each root) with its CRC checked; then debuginfod, only
 * when built in and DEBUGINFOD_URLS is set (libdebuginfod is loaded by the
 * first query, see dif_ready). Every candidate is opened as a
 * regular file only, and one whose build-id differs is never used. libdwfl
 * falls back to the binary itself when this finds nothing. */
#include "dbgmod.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SP_HAVE_DEBUGINFOD
#include <elfutils/debuginfod.h>
#include <pthread.h>
#include <time.h>

#include "io/dynload.h"

/* Longest debuginfod query (a lower DEBUGINFOD_MAXTIME wins). */
#define SP_DEBUGINFOD_MAX_SECONDS 60
/* Default cap of one download; DEBUGINFOD_MAXSIZE (bytes) can lower it. */
#define SP_DEBUGINFOD_MAX_BYTES (2ll << 30)

static void debuginfod_env_once(const char *cache);
#endif

#include "common/alloc.h"
#include "common/error.h"
#include "symbolize/dbgcache.h"
#include "io/elf.h"

#define DEFAULT_ROOT "/usr/lib/debug"
#define MAX_ROOTS    32

int sp_dbg_config_init(sp_dbg_config *cfg, const char *debug_dirs, int allow_network,
                       sp_symbolize_counters *counters)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->counters = counters;
	if (!debug_dirs)
		debug_dirs = secure_getenv("STACKPULSE_DEBUG_DIRS");
	if (!debug_dirs)
		debug_dirs = DEFAULT_ROOT;
	cfg->roots = sp_calloc(MAX_ROOTS, sizeof(char *));
	if (!cfg->roots)
		return sp_error(-ENOMEM, "symbolizer: out of memory");
	const char *p = debug_dirs;
	while (*p && cfg->nroots < MAX_ROOTS) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		/* Relative roots would depend on the cwd: ignore them. */
		if (n > 0 && p[0] == '/' && n < 4096) {
			cfg->roots[cfg->nroots] = sp_strndup(p, n);
			if (!cfg->roots[cfg->nroots]) {
				sp_dbg_config_free(cfg);
				return sp_error(-ENOMEM, "symbolizer: out of memory");
			}
			cfg->nroots++;
		}
		if (!e)
			break;
		p = e + 1;
	}
#ifdef SP_HAVE_DEBUGINFOD
	/* secure_getenv: in a setuid or file-capability program the caller's
	 * environment picks no debug roots, servers or cache directories. */
	const char *urls = secure_getenv("DEBUGINFOD_URLS");
	cfg->debuginfod = allow_network && urls && *urls;
	cfg->debuginfod_cache = secure_getenv("STACKPULSE_DEBUGINFOD_CACHE_DIR");
	if (cfg->debuginfod)
		debuginfod_env_once(cfg->debuginfod_cache);
#else
	(void)allow_network;
#endif
	return 0;
}

void sp_dbg_config_free(sp_dbg_config *cfg)
{
	if (cfg->roots) {
		for (size_t i = 0; i < cfg->nroots; i++)
			sp_free(cfg->roots[i]);
		sp_free(cfg->roots);
	}
	cfg->roots = NULL;
	cfg->nroots = 0;
}

static int same_build_id(const sp_elf_info *info, const uint8_t *bid, uint32_t bid_len)
{
	return info->build_id_len == bid_len && memcmp(info->build_id, bid, bid_len) == 0;
}

/* Opens a candidate; returns the fd when it is a regular ELF file whose
 * build-id matches (and whose CRC matches when @p want_crc). */
static int try_candidate(const sp_dbg_config *cfg, const char *path, const uint8_t *bid,
                         uint32_t bid_len, int want_crc, uint32_t crc)
{
	uint64_t size;
	int fd = sp_elf_open_regular(path, &size);
	if (fd < 0)
		return -1;
	sp_elf_info info;
	if (sp_elf_read_info(fd, size, &info) != 0)
		goto reject;
	/* A debuglink target without a build-id is accepted on its CRC alone. */
	if (bid_len && (info.build_id_len || !want_crc) && !same_build_id(&info, bid, bid_len))
		goto reject;
	if (want_crc) {
		uint32_t got;
		if (sp_elf_file_crc32(fd, size, &got) != 0 || got != crc)
			goto reject;
	}
	if (cfg->counters)
		cfg->counters->debug_files++;
	return fd;
reject:
	close(fd);
	return -1;
}

static int found(int fd, const char *path, char **out)
{
	/* libdwfl frees this name with free(). */
	*out = strdup(path);
	return fd;
}

#ifdef SP_HAVE_DEBUGINFOD
/* libdebuginfod takes its cache directory only from DEBUGINFOD_CACHE_PATH,
 * and setenv is not thread-safe. So the environment is written at most
 * once per process: when the first configuration with debuginfod enabled is
 * made, which is before any client of ours exists, under a lock, and never
 * restored. Later configurations never write it, whatever their cache. */
static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static int env_decided;

static void debuginfod_env_once(const char *cache)
{
	pthread_mutex_lock(&env_lock);
	if (!env_decided) {
		env_decided = 1;
		if (cache && *cache) {
			const char *cur = secure_getenv("DEBUGINFOD_CACHE_PATH");
			if (!cur || strcmp(cur, cache) != 0)
				setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
		}
	}
	pthread_mutex_unlock(&env_lock);
}

/* libdebuginfod comes by dlopen at the first query, not as a link
 * dependency: it needs libcurl, and with it ~30 libraries (TLS, SSH, LDAP,
 * Kerberos, ...) that cost every program linked with ours ~5 ms of CPU and
 * ~5 MiB of RSS at start, symbolizing or not. */
#define DEBUGINFOD_SONAME "libdebuginfod.so.1"

static struct {
	debuginfod_client *(*begin)(void);
	void (*set_user_data)(debuginfod_client *, void *);
	void *(*get_user_data)(debuginfod_client *);
	void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*end)(debuginfod_client *);
} dif;

static const sp_dynsym dif_syms[] = {
	SP_DYNSYM(dif.begin, "debuginfod_begin"),
	SP_DYNSYM(dif.set_user_data, "debuginfod_set_user_data"),
	SP_DYNSYM(dif.get_user_data, "debuginfod_get_user_data"),
	SP_DYNSYM(dif.set_progressfn, "debuginfod_set_progressfn"),
	SP_DYNSYM(dif.find_debuginfo, "debuginfod_find_debuginfo"),
	SP_DYNSYM(dif.end, "debuginfod_end"),
};

static sp_dynlib dif_lib = SP_DYNLIB(DEBUGINFOD_SONAME, dif_syms, NULL);

/* Time limit of one query, without touching the environment: the client
 * calls the progress function about once a second while it waits, and a
 * nonzero return cancels the transfer. */
typedef struct query_clock {
	struct timespec start;
	long max_s;
	long long max_bytes;
} query_clock;

static int query_progress(debuginfod_client *c, long a, long b)
{
	const query_clock *k = dif.get_user_data(c);
	struct timespec now;
	if (!k)
		return 0;
	/* a: bytes received so far, b: the announced size (or 0). */
	if ((long long)a > k->max_bytes || (long long)b > k->max_bytes)
		return 1;
	if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
		return 0;
	return now.tv_sec - k->start.tv_sec >= k->max_s;
}

static int query_debuginfod(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len,
                            char **out)
{
	/* Without the library the search goes on as in a build without
	 * debuginfod: no query is made (nor counted). */
	if (sp_dynlib_load(&dif_lib) != 0)
		return -1;
	if (cfg->counters)
		cfg->counters->debuginfod_queries++;
	query_clock k = { { 0, 0 }, SP_DEBUGINFOD_MAX_SECONDS, SP_DEBUGINFOD_MAX_BYTES };
	const char *mt = secure_getenv("DEBUGINFOD_MAXTIME");
	if (mt && *mt) {
		long v = strtol(mt, NULL, 10);
		if (v > 0 && v < k.max_s)
			k.max_s = v;
	}
	/* The client sends DEBUGINFOD_MAXSIZE to the server itself; the
	 * progress callback enforces it (and our default) on what arrives. */
	const char *ms = secure_getenv("DEBUGINFOD_MAXSIZE");
	if (ms && *ms) {
		long long v = strtoll(ms, NULL, 10);
		if (v > 0 && v < k.max_bytes)
			k.max_bytes = v;
	}
	clock_gettime(CLOCK_MONOTONIC, &k.start);
	int fd = -1;
	char *path = NULL;
	debuginfod_client *c = dif.begin();
	if (c) {
		dif.set_user_data(c, &k);
		dif.set_progressfn(c, query_progress);
		fd = dif.find_debuginfo(c, bid, (int)bid_len, &path);
		dif.end(c);
	}
	if (fd < 0) {
		free(path);
		return -1;
	}
	close(fd);
	/* Reopen through the same checks as any other candidate. */
	int vfd = path ? try_candidate(cfg, path, bid, bid_len, 0, 0) : -1;
	if (vfd >= 0) {
		*out = path;
		return vfd;
	}
	free(path);
	return -1;
}
#endif

int sp_dbg_find_altlink(const sp_dbg_config *cfg, const char *dwarf_file, char **out)
{
	*out = NULL;
	if (!dwarf_file)
		return -1;
	uint64_t size;
	int fd = sp_elf_open_regular(dwarf_file, &size);
	if (fd < 0)
		return -1;
	uint8_t link[4096 + 64];
	size_t len = 0;
	int rc = sp_elf_read_section(fd, size, ".gnu_debugaltlink", link, sizeof(link), &len);
	close(fd);
	/* The section is "name\0" then the supplementary file's build-id. */
	const uint8_t *nul = rc == 0 ? memchr(link, 0, len) : NULL;
	if (!nul)
		return -1;
	size_t name_len = (size_t)(nul - link);
	const uint8_t *bid = nul + 1;
	size_t bid_len = len - name_len - 1;
	if (bid_len < 2 || bid_len > 64)
		return -1;
	char path[4096], hex[129];
	sp_hex(bid, bid_len, hex);
	for (size_t i = 0; i < cfg->nroots; i++) {
		int n = snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", cfg->roots[i],
		                 hex, hex + 2);
		if (n <= 0 || (size_t)n >= sizeof(path))
			continue;
		int afd = try_candidate(cfg, path, bid, (uint32_t)bid_len, 0, 0);
		if (afd >= 0)
			return found(afd, path, out);
	}
	const char *name = (const char *)link;
	int n;
	if (name[0] == '/') {
		n = snprintf(path, sizeof(path), "%s", name);
	} else {
		const char *slash = strrchr(dwarf_file, '/');
		int dirlen = slash ? (int)(slash - dwarf_file) : 1;
		n = snprintf(path, sizeof(path), "%.*s/%s", dirlen, slash ? dwarf_file : ".", name);
	}
	if (n > 0 && (size_t)n < sizeof(path)) {
		int afd = try_candidate(cfg, path, bid, (uint32_t)bid_len, 0, 0);
		if (afd >= 0)
			return found(afd, path, out);
	}
	return -1;
}

static int find_debuginfo(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len,
                          const char *binary, const char *debuglink, uint32_t crc, char **out);

int sp_dbg_find_debuginfo(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len,
                          const char *binary, const char *debuglink, uint32_t crc, char **out)
{
	*out = NULL;
	int fd = sp_dbgcache_find(cfg, bid, bid_len, out);
	if (fd >= 0)
		return fd;
	fd = find_debuginfo(cfg, bid, bid_len, binary, debuglink, crc, out);
	/* Found the slow way: keep a decompressed copy for next time. */
	if (fd >= 0 && cfg->cache_dir && bid_len >= 2)
		sp_dbgcache_store(cfg, bid, bid_len, fd);
	return fd;
}

static int find_debuginfo(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len,
                          const char *binary, const char *debuglink, uint32_t crc, char **out)
{
	char path[4096];
	char hex[129];
	*out = NULL;
	if (bid_len >= 2) {
		sp_hex(bid, bid_len, hex);
		for (size_t i = 0; i < cfg->nroots; i++) {
			int n = snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug",
			                 cfg->roots[i], hex, hex + 2);
			if (n <= 0 || (size_t)n >= sizeof(path))
				continue;
			int fd = try_candidate(cfg, path, bid, bid_len, 0, 0);
			if (fd >= 0)
				return found(fd, path, out);
		}
	}
	/* A debuglink is a plain file name: anything with a slash is refused. */
	if (debuglink && *debuglink && !strchr(debuglink, '/') && strcmp(debuglink, "..") != 0 &&
	    binary && binary[0] == '/') {
		const char *slash = strrchr(binary, '/');
		int dirlen = (int)(slash - binary);
		int n;
		n = snprintf(path, sizeof(path), "%.*s/%s", dirlen, binary, debuglink);
		if (n > 0 && (size_t)n < sizeof(path) && strcmp(path, binary) != 0) {
			int fd = try_candidate(cfg, path, bid, bid_len, 1, crc);
			if (fd >= 0)
				return found(fd, path, out);
		}
		n = snprintf(path, sizeof(path), "%.*s/.debug/%s", dirlen, binary, debuglink);
		if (n > 0 && (size_t)n < sizeof(path)) {
			int fd = try_candidate(cfg, path, bid, bid_len, 1, crc);
			if (fd >= 0)
				return found(fd, path, out);
		}
		for (size_t i = 0; i < cfg->nroots; i++) {
			n = snprintf(path, sizeof(path), "%s%.*s/%s", cfg->roots[i], dirlen, binary,
			             debuglink);
			if (n <= 0 || (size_t)n >= sizeof(path))
				continue;
			int fd = try_candidate(cfg, path, bid, bid_len, 1, crc);
			if (fd >= 0)
				return found(fd, path, out);
		}
	}
#ifdef SP_HAVE_DEBUGINFOD
	if (cfg->debuginfod && bid_len > 0)
		return query_debuginfod(cfg, bid, bid_len, out);
#endif
	return -1;
}
