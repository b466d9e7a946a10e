/* Size bound of the symbol cache directory (see cachetrim.h). Least
 * recently used goes first: readers stamp a file's access time when they
 * use it (sp_cache_touch), so relatime mounts do not blur the order. */
#include "cachetrim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"

#define MAX_ENTRIES 65536     /* Files looked at per trim. */
#define TMP_STALE_S (60 * 60) /* A temporary this old was abandoned. */

typedef struct entry {
	char *name;
	uint64_t size;
	int64_t used; /* atime, ns */
} entry;

uint64_t sp_cache_max_bytes(void)
{
	const char *e = secure_getenv("STACKPULSE_SYMBOL_CACHE_MAX_MB");
	if (e && *e) {
		char *end;
		unsigned long long mb = strtoull(e, &end, 10);
		if (*end == '\0' && mb <= (UINT64_MAX >> 20))
			return (uint64_t)mb << 20;
	}
	return (uint64_t)SP_CACHE_DEFAULT_MAX_MB << 20;
}

void sp_cache_touch(int fd)
{
	const struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_OMIT } };
	(void)futimens(fd, ts);
}

/* 1: a cache file (<hex>.spsym, <hex>.debug), 2: one of their
 * temporaries (<that>.tmp.<pid>.<n>), 0: not ours. */
static int kind(const char *name)
{
	size_t h = strspn(name, "0123456789abcdef");
	if (h == 0)
		return 0;
	const char *rest = name + h;
	size_t ext = strncmp(rest, ".spsym", 6) == 0 ? 6 : strncmp(rest, ".debug", 6) == 0 ? 6 : 0;
	if (!ext)
		return 0;
	rest += ext;
	if (*rest == '\0')
		return 1;
	return strncmp(rest, ".tmp.", 5) == 0 ? 2 : 0;
}

static int by_use(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	return x->used < y->used ? -1 : x->used > y->used;
}

int sp_cache_trim_at(int dir_fd, const char *fresh, const char *stale_prefix, uint64_t max)
{
	int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	int dfd = dirfd(d), removed = 0;
	(void)lseek(dfd, 0, SEEK_SET); /* The duplicate shares the position. */
	size_t plen = stale_prefix ? strlen(stale_prefix) : 0;
	entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		int k = kind(de->d_name);
		struct stat st;
		if (!k || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (fresh && strcmp(de->d_name, fresh) == 0) {
			total += (uint64_t)st.st_size; /* counted, never removed */
			continue;
		}
		int stale = k == 2 ? now - st.st_mtime > TMP_STALE_S
		                   : plen && strncmp(de->d_name, stale_prefix, plen) == 0;
		if (stale) {
			removed += unlinkat(dfd, de->d_name, 0) == 0;
			continue;
		}
		if (k == 2)
			continue; /* another writer's, in progress */
		total += (uint64_t)st.st_size;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			entry *nv = nc <= MAX_ENTRIES ? sp_realloc_array(v, nc, sizeof(*nv)) : NULL;
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		v[n].name = sp_strdup(de->d_name);
		if (!v[n].name)
			break;
		v[n].size = (uint64_t)st.st_size;
		v[n].used = (int64_t)st.st_atim.tv_sec * 1000000000 + st.st_atim.tv_nsec;
		n++;
	}
	if (max && total > max && n > 0) {
		qsort(v, n, sizeof(*v), by_use);
		uint64_t goal = max / 4 * 3;
		for (size_t i = 0; i < n && total > goal; i++) {
			if (unlinkat(dfd, v[i].name, 0) != 0)
				continue;
			total -= v[i].size;
			removed++;
		}
	}
	for (size_t i = 0; i < n; i++)
		sp_free(v[i].name);
	sp_free(v);
	closedir(d);
	return removed;
}
