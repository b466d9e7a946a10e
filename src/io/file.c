#include "io/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"

#define WALK_MAX_DEPTH 256 /* Directories below the root. */
#define WALK_MAX_LINKS 40  /* Symlinks followed, as the kernel's limit. */

/* RESOLVE_IN_ROOT by hand, for kernels without openat2 (before 5.6): each
 * component is opened O_PATH without following symlinks. A symlink's text
 * replaces it in the rest of the path (an absolute one restarts at the
 * root); ".." returns to the directory the walk came from, checked to be
 * the same inode (a directory moved out meanwhile must not take the walk
 * with it), and stays put at the root. Returns an O_PATH descriptor, or
 * -1 with errno. */
static int walk_in_root(int dirfd, const char *path, int nofollow)
{
	char rest[PATH_MAX], link[PATH_MAX];
	size_t plen = strlen(path);
	if (plen >= sizeof(rest)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(rest, path, plen + 1);
	struct stat st;
	memset(&st, 0, sizeof(st));
	int root = openat(dirfd, ".", O_PATH | O_CLOEXEC | O_DIRECTORY);
	if (root < 0)
		return -1;
	int cur = fcntl(root, F_DUPFD_CLOEXEC, 0), e = 0;
	struct {
		dev_t dev;
		ino_t ino;
	} ids[WALK_MAX_DEPTH];
	unsigned depth = 0, links = 0;
	size_t pos = 0;
	if (cur < 0 || fstat(root, &st) != 0)
		e = errno;
	ids[0].dev = st.st_dev;
	ids[0].ino = st.st_ino;
	while (!e) {
		while (rest[pos] == '/')
			pos++;
		if (!rest[pos]) {
			close(root);
			return cur;
		}
		char comp[NAME_MAX + 1];
		size_t n = strcspn(rest + pos, "/");
		if (n > NAME_MAX) {
			e = ENAMETOOLONG;
			break;
		}
		memcpy(comp, rest + pos, n);
		comp[n] = '\0';
		pos += n;
		int last = rest[pos + strspn(rest + pos, "/")] == '\0';
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			if (depth == 0)
				continue;
			int up = openat(cur, "..", O_PATH | O_CLOEXEC | O_DIRECTORY);
			if (up < 0 || fstat(up, &st) != 0) {
				e = errno;
			} else if (st.st_dev != ids[depth - 1].dev ||
			           st.st_ino != ids[depth - 1].ino) {
				e = EXDEV;
			} else {
				close(cur);
				cur = up;
				depth--;
				continue;
			}
			if (up >= 0)
				close(up);
			break;
		}
		int next = openat(cur, comp, O_PATH | O_CLOEXEC | O_NOFOLLOW);
		if (next < 0 || fstat(next, &st) != 0) {
			e = errno;
			if (next >= 0)
				close(next);
			break;
		}
		if (S_ISLNK(st.st_mode) && !(last && nofollow)) {
			ssize_t len = readlinkat(next, "", link, sizeof(link));
			close(next);
			size_t tail = strlen(rest + pos);
			if (len < 0)
				e = errno;
			else if (++links > WALK_MAX_LINKS)
				e = ELOOP;
			else if ((size_t)len + 1 + tail >= sizeof(rest))
				e = ENAMETOOLONG;
			if (e)
				break;
			memmove(rest + len + 1, rest + pos, tail + 1);
			memcpy(rest, link, (size_t)len);
			rest[len] = '/';
			pos = 0;
			if (link[0] == '/') {
				close(cur);
				cur = fcntl(root, F_DUPFD_CLOEXEC, 0);
				depth = 0;
				if (cur < 0)
					e = errno;
			}
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (depth + 1 >= WALK_MAX_DEPTH) {
				close(next);
				e = ENAMETOOLONG;
				break;
			}
			depth++;
			ids[depth].dev = st.st_dev;
			ids[depth].ino = st.st_ino;
		} else if (!last) {
			close(next);
			e = ENOTDIR;
			break;
		}
		close(cur);
		cur = next;
	}
	if (cur >= 0)
		close(cur);
	close(root);
	errno = e;
	return -1;
}

/* Opens @p path O_PATH with a given resolution; -1 with errno on failure. */
static int open_path(int dirfd, const char *path, unsigned flags)
{
	int nofollow = flags & SP_FILE_NOFOLLOW ? O_NOFOLLOW : 0;
	if (!(flags & SP_FILE_IN_ROOT))
		return openat(dirfd, path, O_PATH | O_CLOEXEC | nofollow);
	if (!(flags & SP_FILE_WALK)) {
		struct open_how how;
		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)(O_PATH | O_CLOEXEC | nofollow);
		how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
		for (int tries = 0; tries < 4; tries++) {
			long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
			if (fd >= 0)
				return (int)fd;
			if (errno != EAGAIN) /* EAGAIN: a rename raced the lookup. */
				break;
		}
		if (errno != ENOSYS)
			return -1;
	}
	return walk_in_root(dirfd, path, nofollow);
}

int sp_file_open_at(int dirfd, const char *path, unsigned flags, uint64_t max_size,
                    const sp_file_id *want, int *fd_out, uint64_t *size)
{
	*fd_out = -1;
	*size = 0;
	if (!path || !*path)
		return sp_error(-EINVAL, "empty path");
	if (!max_size)
		max_size = SP_FILE_SIZE_DEFAULT_MAX;
	int pfd = open_path(dirfd, path, flags);
	if (pfd < 0) {
		int e = errno;
		return sp_error(-e, "open %s: %s", path, stackpulse_strerror(-e));
	}
	struct stat st;
	if (fstat(pfd, &st) != 0) {
		int e = errno;
		close(pfd);
		return sp_error(-e, "stat %s: %s", path, stackpulse_strerror(-e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return sp_error(-e, "%s is not a regular file", path);
	}
	if ((want && want->ino && want->ino != (uint64_t)st.st_ino) ||
	    (want && want->dev && want->dev != (uint64_t)st.st_dev)) {
		close(pfd);
		return sp_error(-ESTALE,
		                "%s is not the file that was mapped (inode %llu, not %llu)", path,
		                (unsigned long long)st.st_ino, (unsigned long long)want->ino);
	}
	if (st.st_size < 0 || (uint64_t)st.st_size > max_size) {
		close(pfd);
		return sp_error(STACKPULSE_ELIMIT, "%s: %lld bytes exceeds the %llu-byte cap", path,
		                (long long)st.st_size, (unsigned long long)max_size);
	}
	/* Reopen the very inode we checked. O_NONBLOCK in case /proc is not
	 * there and the fallback below meets a FIFO swapped in meanwhile. */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
	int fd = open(self, oflags);
	if (fd < 0 && errno == ENOENT && !(flags & SP_FILE_IN_ROOT))
		fd = openat(dirfd, path, oflags | (flags & SP_FILE_NOFOLLOW ? O_NOFOLLOW : 0));
	int e = errno;
	close(pfd);
	if (fd < 0)
		return sp_error(-e, "open %s: %s", path, stackpulse_strerror(-e));
	struct stat st2;
	if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode) || st2.st_dev != st.st_dev ||
	    st2.st_ino != st.st_ino) {
		close(fd);
		return sp_error(-ESTALE, "%s changed while it was opened", path);
	}
	/* Regular files never block; drop O_NONBLOCK so reads behave normally. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	*fd_out = fd;
	*size = (uint64_t)st2.st_size;
	return 0;
}

int sp_file_open_regular(const char *path, unsigned flags, uint64_t max_size, int *fd_out,
                         uint64_t *size)
{
	return sp_file_open_at(AT_FDCWD, path, flags, max_size, NULL, fd_out, size);
}

static const char deleted_mark[] = " (deleted)";

int sp_file_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path,
                        const sp_file_id *want, uint64_t max_size, int *fd, uint64_t *size)
{
	char p[96];
	int rc = -ENOENT;
	*fd = -1;
	if (end > start) {
		/* The mapped file itself: needs CAP_SYS_ADMIN or CHECKPOINT_RESTORE. */
		snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid,
		         (unsigned long long)start, (unsigned long long)end);
		rc = sp_file_open_at(AT_FDCWD, p, 0, max_size, want, fd, size);
		if (rc == 0 || rc == STACKPULSE_ELIMIT)
			return rc;
	}
	size_t n = path ? strlen(path) : 0, k = sizeof(deleted_mark) - 1;
	if (n == 0 || path[0] != '/')
		return sp_error(rc, "%s: no file as process %d sees it", path ? path : "(null)",
		                (int)pid);
	if (n > k && strcmp(path + n - k, deleted_mark) == 0)
		return sp_error(-ENOENT, "%s: deleted, and map_files is closed to us", path);
	return sp_file_open_in_root(pid, path, 0, max_size, want, fd, size);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

int sp_proc_tasks(pid_t pid, pid_t **tids, size_t *count)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	*tids = NULL;
	*count = 0;
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long t = strtol(de->d_name, &end, 10);
		if (*end != '\0' || end == de->d_name || t <= 0 || t > INT_MAX)
			continue;
		if (n == SP_PROC_MAX_TASKS) {
			rc = sp_error(STACKPULSE_ELIMIT, "pid %d has more than %u threads",
			              (int)pid, SP_PROC_MAX_TASKS);
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			pid_t *nv = sp_realloc_array(v, nc, sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = (pid_t)t;
	}
	closedir(d);
	if (rc < 0) {
		sp_free(v);
		return rc;
	}
	if (n == 0) {
		sp_free(v);
		return -ESRCH;
	}
	qsort(v, n, sizeof(*v), cmp_pid);
	*tids = v;
	*count = n;
	return 0;
}

/* The root directory of process @p pid as an O_PATH descriptor: its
 * /proc/PID/root, else that of one of its live threads (a leader that left
 * with pthread_exit has none, its threads still have the process's). -1
 * with errno set when neither opens; *p names the path last tried. */
static int open_root(pid_t pid, char *p, size_t cap)
{
	snprintf(p, cap, "/proc/%d/root", (int)pid);
	int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0 || errno != ENOENT)
		return root;
	pid_t *tids;
	size_t n;
	if (sp_proc_tasks(pid, &tids, &n) != 0) {
		errno = ENOENT;
		return -1;
	}
	for (size_t i = 0; i < n && root < 0; i++) {
		if (tids[i] == pid)
			continue;
		char t[80];
		snprintf(t, sizeof(t), "/proc/%d/task/%d/root", (int)pid, (int)tids[i]);
		root = open(t, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	sp_free(tids);
	if (root < 0)
		errno = ENOENT;
	return root;
}

int sp_file_open_in_root(pid_t pid, const char *path, unsigned flags, uint64_t max_size,
                         const sp_file_id *want, int *fd, uint64_t *size)
{
	char p[64];
	*fd = -1;
	*size = 0;
	int root = open_root(pid, p, sizeof(p));
	if (root < 0) {
		int e = errno;
		return sp_error(e == ENOENT ? -ESRCH : -e, "%s: %s", p, stackpulse_strerror(-e));
	}
	int rc = sp_file_open_at(root, path, flags | SP_FILE_IN_ROOT, max_size, want, fd, size);
	close(root);
	return rc;
}

int sp_file_same_root(pid_t pid)
{
	char p[64];
	struct stat a, b;
	snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
	return stat(p, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int sp_file_trusted(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return 0;
	return (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

#define LINE_READ_BYTES 65536u

int sp_file_for_each_line(const char *path, size_t line_max, sp_file_line_fn fn, void *ctx,
                          uint64_t *lines)
{
	uint64_t count = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	size_t cap = line_max > LINE_READ_BYTES ? line_max : LINE_READ_BYTES;
	char *buf = sp_malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t len = 0;   /* Bytes in buf. */
	int skipping = 0; /* Inside a line longer than the buffer. */
	int rc = 0, eof = 0;
	while (!eof && rc == 0) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (n == 0) {
			eof = 1;
			if (len == 0)
				break;
			buf[len++] = '\n'; /* Last line without newline; room reserved by +1. */
		}
		len += (size_t)n;
		size_t pos = 0;
		char *nl;
		while (rc == 0 && (nl = memchr(buf + pos, '\n', len - pos)) != NULL) {
			*nl = '\0';
			count++;
			size_t ll = (size_t)(nl - (buf + pos));
			if (!skipping && ll < line_max)
				rc = fn(ctx, buf + pos, ll);
			skipping = 0;
			pos = (size_t)(nl - buf) + 1;
		}
		memmove(buf, buf + pos, len - pos);
		len -= pos;
		if (len == cap) {
			skipping = 1; /* A line longer than the buffer: drop it. */
			len = 0;
		}
	}
	sp_free(buf);
	close(fd);
	if (lines)
		*lines = count;
	return rc;
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

/* Creates "DIR/.BASE.<8 random characters>" with O_EXCL; fills *tmp_out (sp_free it). */
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

/* Opens an existing character device or FIFO for writing in place: no
 * temporary name, nothing to rename, nothing to remove on failure. */
static int sink_open_device(sp_file_sink *sink, const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		return sp_error(-e, "%s: %s", path, stackpulse_strerror(-e));
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
		close(fd);
		return sp_error(-EINVAL, "%s changed while it was opened", path);
	}
	sink->path = sp_strdup(path);
	if (!sink->path) {
		close(fd);
		return sp_error(-ENOMEM, "output path");
	}
	sink->fd = fd;
	return 0;
}

int sp_file_sink_open(sp_file_sink *sink, const char *path, unsigned mode)
{
	sink->fd = -1;
	sink->written = 0;
	sink->error = 0;
	sink->path = sink->tmp = NULL;
	if (!path || !*path)
		return sp_error(-EINVAL, "empty path");
	struct stat dev;
	if ((mode & SP_FILE_DEVICE_OK) && stat(path, &dev) == 0 &&
	    (S_ISCHR(dev.st_mode) || S_ISFIFO(dev.st_mode)))
		return sink_open_device(sink, path);
	mode &= 07777u;
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
	/* Held until the descriptor closes (the kernel drops it when the
	 * writer dies): a tail reader tells a live writer from a dead one by
	 * it. Nobody else has the new file open, so it cannot fail but for
	 * lack of kernel memory, and then the writer only looks dead early. */
	(void)flock(fd, LOCK_EX | LOCK_NB);
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
			return sp_error(sink->error, "write to %s: %s",
			                sink->path ? sink->path : "output file",
			                stackpulse_strerror(sink->error));
		}
		if (n == 0) {
			sink->error = -EIO;
			return sp_error(-EIO, "write to %s made no progress",
			                sink->path ? sink->path : "output file");
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

int sp_file_writer_alive(int fd)
{
	if (flock(fd, LOCK_SH | LOCK_NB) != 0)
		return errno == EWOULDBLOCK ? 1 : -errno;
	(void)flock(fd, LOCK_UN);
	return 0;
}
