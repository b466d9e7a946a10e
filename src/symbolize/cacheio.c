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
#include "io/elf.h"
#include "io/file.h"

char *sp_cacheio_dir(const char *opt)
{
	/* Turning the cache off is never a risk: plain getenv. */
	const char *off = getenv("STACKPULSE_NO_SYMBOL_CACHE");
	if (off && *off && strcmp(off, "0") != 0)
		return NULL;
	if (opt)
		return *opt ? sp_strdup(opt) : NULL;
	/* secure_getenv: a setuid or file-capability program must not let its
	 * caller's environment choose where it reads or writes. */
	const char *e = secure_getenv("STACKPULSE_SYMBOL_CACHE_DIR");
	if (e && *e)
		return sp_strdup(e);
	char buf[4096];
	int n;
	e = secure_getenv("XDG_CACHE_HOME");
	if (e && e[0] == '/') {
		n = snprintf(buf, sizeof(buf), "%s/stackpulse", e);
	} else {
		e = secure_getenv("HOME");
		if (!e || e[0] != '/')
			return NULL;
		n = snprintf(buf, sizeof(buf), "%s/.cache/stackpulse", e);
	}
	if (n <= 0 || (size_t)n >= sizeof(buf))
		return NULL;
	return sp_strdup(buf);
}

/* "<hex build-id>.spsym", a name inside the cache directory. */
static int table_name(char *buf, size_t cap, const uint8_t *bid, uint32_t bid_len)
{
	char hex[129];
	if (bid_len == 0 || bid_len > 64)
		return sp_error(-EINVAL, "symbol cache: no build-id");
	sp_hex(bid, bid_len, hex);
	int n = snprintf(buf, cap, "%s.spsym", hex);
	if (n <= 0 || (size_t)n >= cap)
		return sp_error(-ENAMETOOLONG, "symbol cache: name too long");
	return 0;
}

int sp_cacheio_read(const char *dir, const uint8_t *bid, uint32_t bid_len, uint8_t **data,
                    sp_symcache *table)
{
	char path[160];
	int rc = table_name(path, sizeof(path), bid, bid_len);
	if (rc)
		return rc;
	/* Everything relative to the checked directory's descriptor: nobody
	 * can swap a component of the path meanwhile. */
	int dfd = sp_cacheio_dir_open(dir, 0);
	if (dfd < 0)
		return dfd;
	int fd = -1;
	uint64_t size = 0;
	rc = sp_file_open_at(dfd, path, SP_FILE_NOFOLLOW, SP_SYMCACHE_MAX_FILE, NULL, &fd, &size);
	close(dfd);
	if (rc == -ENOENT)
		return STACKPULSE_ENOTFOUND;
	if (rc)
		return rc;
	if (size == 0) {
		close(fd);
		return sp_error(STACKPULSE_EFORMAT, "%s: empty cache file", path);
	}
	size_t len = (size_t)size;
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

int sp_cacheio_dir_open(const char *dir, int create)
{
	if (!dir || dir[0] != '/')
		return sp_error(-EINVAL, "symbol cache directory must be an absolute path");
	if (create) {
		int rc = make_dirs(dir);
		if (rc)
			return sp_error(rc, "%s: cannot create the symbol cache directory", dir);
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			return STACKPULSE_ENOTFOUND;
		if (e == ELOOP || e == ENOTDIR)
			return sp_error(-ENOTDIR,
			                "%s: symbol cache is not a directory (a symlink?)", dir);
		return sp_error(-e, "%s: cannot open", dir);
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return sp_error(-EPERM,
		                "%s: symbol cache must be owned by uid %u and not writable by "
		                "group or others (owner %u, mode %o): not used",
		                dir, (unsigned)geteuid(), (unsigned)st.st_uid,
		                (unsigned)(st.st_mode & 07777));
	}
	return fd;
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
	char name[160], tmp[240];
	int rc = table_name(name, sizeof(name), bid, bid_len);
	if (rc)
		return rc;
	int dfd = sp_cacheio_dir_open(dir, 1);
	if (dfd < 0)
		return dfd;
	unsigned k = counter++;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%u", name, (long)getpid(), k);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	                (mode_t)mode);
	if (fd < 0) {
		rc = sp_error(-errno, "%s/%s: cannot create", dir, tmp);
		close(dfd);
		return rc;
	}
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = sp_error(n < 0 ? -errno : -EIO, "%s/%s: write failed", dir, tmp);
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) != 0 && !rc)
		rc = sp_error(-errno, "%s/%s: close failed", dir, tmp);
	if (!rc && renameat(dfd, tmp, dfd, name) != 0)
		rc = sp_error(-errno, "%s/%s: rename failed", dir, name);
	if (rc) {
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return rc;
	}
	char prefix[129];
	if (replaces > bid_len)
		replaces = bid_len;
	sp_hex(bid, replaces, prefix);
	(void)sp_cache_trim_at(dfd, name, replaces ? prefix : NULL, sp_cache_max_bytes());
	close(dfd);
	return 0;
}
