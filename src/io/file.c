#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"

int sp_file_open_regular(const char *path, unsigned flags, uint64_t max_size, int *fd_out,
                         uint64_t *size)
{
	*fd_out = -1;
	if (!path || !*path)
		return sp_error(-EINVAL, "empty path");
	if (!max_size)
		max_size = SP_FILE_SIZE_DEFAULT_MAX;
	int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
	if (flags & SP_FILE_NOFOLLOW)
		oflags |= O_NOFOLLOW;
	int fd = open(path, oflags);
	if (fd < 0) {
		int e = errno;
		return sp_error(-e, "open %s: %s", path, stackpulse_strerror(-e));
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return sp_error(-e, "stat %s: %s", path, stackpulse_strerror(-e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return sp_error(-e, "%s is not a regular file", path);
	}
	if (st.st_size < 0 || (uint64_t)st.st_size > max_size) {
		close(fd);
		return sp_error(STACKPULSE_ELIMIT, "%s: %lld bytes exceeds the %llu-byte cap", path,
		                (long long)st.st_size, (unsigned long long)max_size);
	}
	/* Regular files never block; drop O_NONBLOCK so reads behave normally. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	*fd_out = fd;
	*size = (uint64_t)st.st_size;
	return 0;
}

int sp_file_pread_full(int fd, uint64_t off, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		if (off > (uint64_t)INT64_MAX)
			return sp_error(-EOVERFLOW, "offset %llu too large",
			                (unsigned long long)off);
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			return sp_error(-e, "read at offset %llu: %s", (unsigned long long)off,
			                stackpulse_strerror(-e));
		}
		if (n == 0)
			return sp_error(
			        STACKPULSE_ETRUNCATED,
			        "file ends at offset %llu, %zu bytes short (changed on disk?)",
			        (unsigned long long)off, len);
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int sp_file_read_all(const char *path, uint64_t max_size, uint8_t **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	int fd = -1;
	uint64_t size = 0;
	int rc = sp_file_open_regular(path, 0, max_size, &fd, &size);
	if (rc)
		return rc;
	if (size >= SIZE_MAX) {
		close(fd);
		return sp_error(STACKPULSE_ELIMIT, "%s too large", path);
	}
	uint8_t *buf = sp_malloc((size_t)size + 1);
	if (!buf) {
		close(fd);
		return sp_error(-ENOMEM, "cannot allocate %llu bytes for %s",
		                (unsigned long long)size, path);
	}
	rc = sp_file_pread_full(fd, 0, buf, (size_t)size);
	close(fd);
	if (rc) {
		sp_free(buf);
		return rc;
	}
	buf[size] = 0;
	*data = buf;
	*len = (size_t)size;
	return 0;
}

/* Rejects a final path that a rename must not replace: a directory or a
 * special file. A missing path, a regular file and a symlink are fine. */
static int output_path_check(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		int e = errno;
		return sp_error(-e, "%s: %s", path, stackpulse_strerror(-e));
	}
	if (S_ISDIR(st.st_mode))
		return sp_error(-EISDIR, "%s is a directory", path);
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return sp_error(-EINVAL, "%s is not a regular file", path);
	return 0;
}

/* Creates "DIR/.BASE.XXXXXXXX" with O_EXCL; fills *tmp_out (sp_free it). */
static int output_create_tmp(const char *path, unsigned mode, char **tmp_out, int *fd_out)
{
	static _Atomic unsigned counter;
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	int dirlen = slash ? (int)(slash - path + 1) : 0;
	if (!*base)
		return sp_error(-EISDIR, "%s names a directory", path);
	size_t blen = strlen(base);
	int keep = blen > 200 ? 200 : (int)blen; /* Stay under NAME_MAX. */
	size_t cap = (size_t)dirlen + (size_t)keep + 16;
	char *tmp = sp_malloc(cap);
	if (!tmp)
		return sp_error(-ENOMEM, "temporary name for %s", path);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint32_t seed = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 12);
	for (int attempt = 0; attempt < 64; attempt++) {
		uint32_t r = (seed + (uint32_t)counter++ * 0x9e3779b9u) * 0x85ebca6bu;
		snprintf(tmp, cap, "%.*s.%.*s.%08x", dirlen, path, keep, base, r);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
		              (mode_t)mode);
		if (fd >= 0) {
			*tmp_out = tmp;
			*fd_out = fd;
			return 0;
		}
		if (errno != EEXIST) {
			int e = errno;
			sp_free(tmp);
			return sp_error(-e, "create a file next to %s: %s", path,
			                stackpulse_strerror(-e));
		}
	}
	sp_free(tmp);
	return sp_error(-EEXIST, "no free temporary name next to %s", path);
}

int sp_file_sink_open(sp_file_sink *sink, const char *path, unsigned mode)
{
	sink->fd = -1;
	sink->written = 0;
	sink->error = 0;
	sink->path = sink->tmp = NULL;
	if (!path || !*path)
		return sp_error(-EINVAL, "empty path");
	int rc = output_path_check(path);
	if (rc)
		return rc;
	sink->path = sp_strdup(path);
	if (!sink->path)
		return sp_error(-ENOMEM, "output path");
	int fd = -1;
	rc = output_create_tmp(path, mode, &sink->tmp, &fd);
	if (rc) {
		sp_free(sink->path);
		sink->path = NULL;
		return rc;
	}
	sink->fd = fd;
	/* Created by us with O_EXCL: a regular file with one link, unless
	 * someone raced a link to it in; then do not write to it. */
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		sp_file_sink_close(sink);
		return sp_error(-EINVAL, "%s: the new file changed under us", path);
	}
	return 0;
}

int sp_file_sink_commit(sp_file_sink *sink)
{
	if (sink->fd < 0 || !sink->path)
		return sp_error(-EBADF, "output file is closed");
	if (!sink->tmp)
		return 0;
	if (rename(sink->tmp, sink->path) != 0) {
		int e = errno;
		return sp_error(-e, "rename onto %s: %s", sink->path, stackpulse_strerror(-e));
	}
	sp_free(sink->tmp);
	sink->tmp = NULL;
	return 0;
}

int sp_file_sink_write(void *ctx, const void *data, size_t len)
{
	sp_file_sink *sink = ctx;
	if (sink->error)
		return sp_error(sink->error, "spool file had an earlier write error");
	if (sink->fd < 0)
		return sp_error(-EBADF, "spool file is closed");
	const uint8_t *p = data;
	while (len) {
		ssize_t n = write(sink->fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			sink->error = -errno;
			return sp_error(sink->error, "write to spool file: %s",
			                stackpulse_strerror(sink->error));
		}
		if (n == 0) {
			sink->error = -EIO;
			return sp_error(-EIO, "write to spool file made no progress");
		}
		p += n;
		len -= (size_t)n;
		sink->written += (uint64_t)n;
	}
	return 0;
}

int sp_file_sink_sync(sp_file_sink *sink)
{
	if (sink->fd < 0)
		return sp_error(-EBADF, "spool file is closed");
	while (fsync(sink->fd) != 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		if (e == EINVAL || e == EROFS)
			return 0; /* Not syncable (pipe-like or special fs); nothing to flush. */
		return sp_error(-e, "fsync spool file: %s", stackpulse_strerror(-e));
	}
	return 0;
}

int sp_file_sink_close(sp_file_sink *sink)
{
	int rc = sink->error;
	if (sink->fd >= 0) {
		if (close(sink->fd) != 0 && !rc && errno != EINTR)
			rc = -errno;
		sink->fd = -1;
	}
	if (sink->tmp) {
		(void)unlink(sink->tmp); /* Never committed: leave no file behind. */
		sp_free(sink->tmp);
		sink->tmp = NULL;
	}
	sp_free(sink->path);
	sink->path = NULL;
	if (rc)
		return sp_error(rc, "spool file: %s", stackpulse_strerror(rc));
	return 0;
}
