#include "cacheio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "symbolize/cachetrim.h"
#include "symbolize/elfid.h"

char *sp_cacheio_dir(const char *opt)
{
	const char *off = getenv("STACKPULSE_NO_SYMBOL_CACHE");
	if (off && *off && strcmp(off, "0") != 0)
		return NULL;
	if (opt)
		return *opt ? sp_strdup(opt) : NULL;
	const char *e = getenv("STACKPULSE_SYMBOL_CACHE_DIR");
	if (e && *e)
		return sp_strdup(e);
	char buf[4096];
	int n;
	e = getenv("XDG_CACHE_HOME");
	if (e && e[0] == '/') {
		n = snprintf(buf, sizeof(buf), "%s/stackpulse", e);
	} else {
		e = getenv("HOME");
		if (!e || e[0] != '/')
			return NULL;
		n = snprintf(buf, sizeof(buf), "%s/.cache/stackpulse", e);
	}
	if (n <= 0 || (size_t)n >= sizeof(buf))
		return NULL;
	return sp_strdup(buf);
}

static int table_path(char *buf, size_t cap, const char *dir, const uint8_t *bid, uint32_t bid_len)
{
	char hex[129];
	if (bid_len == 0 || bid_len > 64)
		return sp_error(-EINVAL, "symbol cache: no build-id");
	sp_hex(bid, bid_len, hex);
	int n = snprintf(buf, cap, "%s/%s.spsym", dir, hex);
	if (n <= 0 || (size_t)n >= cap)
		return sp_error(-ENAMETOOLONG, "symbol cache: path too long");
	return 0;
}

int sp_cacheio_read(const char *dir, const uint8_t *bid, uint32_t bid_len, uint8_t **data,
                    sp_symcache *table)
{
	char path[4096];
	int rc = table_path(path, sizeof(path), dir, bid, bid_len);
	if (rc)
		return rc;
	struct stat st;
	if (stat(path, &st) != 0)
		return errno == ENOENT ? STACKPULSE_ENOTFOUND : sp_error(-errno, "%s", path);
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > SP_SYMCACHE_MAX_FILE)
		return sp_error(STACKPULSE_EFORMAT, "%s: not a usable cache file", path);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sp_error(-errno, "%s: cannot open", path);
	struct stat st2;
	if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode) || st2.st_size != st.st_size) {
		close(fd);
		return sp_error(STACKPULSE_EFORMAT, "%s: changed while opening", path);
	}
	size_t len = (size_t)st.st_size;
	uint8_t *buf = sp_malloc(len);
	if (!buf) {
		close(fd);
		return sp_error(-ENOMEM, "symbol cache: out of memory");
	}
	sp_cache_touch(fd);
	size_t done = 0;
	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	if (done != len) {
		sp_free(buf);
		return sp_error(-EIO, "%s: short read", path);
	}
	rc = sp_symcache_validate(buf, len, table);
	if (!rc && (table->build_id_len != bid_len || memcmp(table->build_id, bid, bid_len) != 0))
		rc = sp_error(STACKPULSE_EBUILDID, "%s: table is for another build-id", path);
	if (rc) {
		sp_free(buf);
		return sp_error_context(rc, "%s", path);
	}
	*data = buf;
	return 0;
}

/* mkdir -p with mode 0700 for the parts we create. */
static int make_dirs(const char *dir)
{
	char buf[4096];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -errno;
		buf[i] = c;
	}
	return 0;
}

int sp_cacheio_write(const char *dir, const uint8_t *bid, uint32_t bid_len, const uint8_t *data,
                     size_t len)
{
	return sp_cacheio_write_mode(dir, bid, bid_len, data, len, 0644, 0);
}

int sp_cacheio_write_mode(const char *dir, const uint8_t *bid, uint32_t bid_len,
                          const uint8_t *data, size_t len, unsigned mode, uint32_t replaces)
{
	static _Atomic unsigned counter;
	char path[4096], tmp[4200];
	int rc = table_path(path, sizeof(path), dir, bid, bid_len);
	if (rc)
		return rc;
	rc = make_dirs(dir);
	if (rc)
		return sp_error(rc, "%s: cannot create the symbol cache directory", dir);
	unsigned k = counter++;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%u", path, (long)getpid(), k);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
	if (fd < 0)
		return sp_error(-errno, "%s: cannot create", tmp);
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = sp_error(n < 0 ? -errno : -EIO, "%s: write failed", tmp);
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) != 0 && !rc)
		rc = sp_error(-errno, "%s: close failed", tmp);
	if (!rc && rename(tmp, path) != 0)
		rc = sp_error(-errno, "%s: rename failed", path);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	char prefix[129];
	if (replaces > bid_len)
		replaces = bid_len;
	sp_hex(bid, replaces, prefix);
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	(void)sp_cache_trim(dir, name, replaces ? prefix : NULL, sp_cache_max_bytes());
	return 0;
}
