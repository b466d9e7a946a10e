/* perf map files (/tmp/perf-PID.map): "START SIZE name" per line, written by
 * JIT runtimes and by CPython 3.12+ with -X perf. See perfmap.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/file.h"
#include "record/perfmap.h"

#define READ_CHUNK 65536u

/* Parses a hex number (optional 0x); returns the characters used, 0 if none. */
static size_t parse_hex(const char *s, size_t len, uint64_t *v)
{
	size_t i = 0;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		i = 2;
	size_t start = i;
	uint64_t x = 0;
	for (; i < len && i - start < 17; i++) {
		char c = s[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			break;
		if (x >> 60)
			return 0; /* Over 64 bits. */
		x = x << 4 | d;
	}
	if (i == start || (i < len && s[i] != ' '))
		return 0;
	*v = x;
	return i;
}

/* One line without its newline; returns the callback's value or 0. */
static int parse_line(const char *s, size_t len, sp_perfmap_fn fn, void *ctx)
{
	uint64_t start, size;
	size_t a = parse_hex(s, len, &start);
	if (!a || a >= len)
		return 0;
	size_t b = parse_hex(s + a + 1, len - a - 1, &size);
	if (!b || a + 1 + b >= len || size == 0 || start + size < start)
		return 0;
	const char *name = s + a + 1 + b + 1;
	size_t nlen = len - (a + 1 + b + 1);
	if (nlen == 0 || nlen >= SP_PERFMAP_MAX_LINE || memchr(name, 0, nlen))
		return 0;
	char buf[SP_PERFMAP_MAX_LINE];
	memcpy(buf, name, nlen);
	buf[nlen] = 0;
	return fn(ctx, start, size, buf);
}

long sp_perfmap_parse(const char *data, size_t len, sp_perfmap_fn fn, void *ctx)
{
	size_t pos = 0;
	while (pos < len) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		if (!nl)
			break;
		size_t l = (size_t)(nl - (data + pos));
		if (l < SP_PERFMAP_MAX_LINE) {
			int rc = parse_line(data + pos, l, fn, ctx);
			if (rc)
				return rc < 0 ? rc : -rc;
		}
		pos += l + 1;
	}
	return (long)pos;
}

/* The target's own pid in its PID namespace (last NSpid field). */
static pid_t ns_pid(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pid;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return pid;
	buf[n] = 0;
	char *p = strstr(buf, "\nNSpid:");
	if (!p)
		return pid;
	p += 7;
	long last = pid;
	while (*p && *p != '\n') {
		while (*p == ' ' || *p == '\t')
			p++;
		long v = 0;
		int digits = 0;
		while (*p >= '0' && *p <= '9' && digits < 10) {
			v = v * 10 + (*p++ - '0');
			digits++;
		}
		if (!digits)
			break;
		last = v;
	}
	return last > 0 && last <= 0x7fffffff ? (pid_t)last : pid;
}

/* A map names code only when the target's own user wrote it: a regular
 * file owned by the live process's uid, or by ours once it has exited. */
static int trusted_map(int fd, pid_t pid)
{
	struct stat st, proc;
	char dir[64];
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	if (stat(dir, &proc) == 0)
		return st.st_uid == proc.st_uid;
	return st.st_uid == geteuid();
}

int sp_perfmap_read(pid_t pid, uint64_t *offset, sp_perfmap_fn fn, void *ctx)
{
	char path[128];
	pid_t nspid = ns_pid(pid);
	/* /tmp is world-writable: the one safe open (no FIFO or device, no
	 * blocking), the file itself not a symlink, resolved inside the
	 * target's root; our own /tmp only once the target is gone. */
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	int fd = -1, rc;
	uint64_t size;
	int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0) {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)nspid);
		rc = sp_file_open_at(root, path, SP_FILE_IN_ROOT | SP_FILE_NOFOLLOW, 0, NULL, &fd,
		                     &size);
		close(root);
	} else {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
		rc = sp_file_open_regular(path, SP_FILE_NOFOLLOW, 0, &fd, &size);
	}
	if (rc)
		return rc == -ENOENT ? STACKPULSE_ENOTFOUND : rc;
	if (!trusted_map(fd, pid)) {
		close(fd);
		return sp_error(-EPERM, "%s: not a regular file owned by the target's user", path);
	}
	char *buf = sp_malloc(READ_CHUNK + SP_PERFMAP_MAX_LINE);
	if (!buf) {
		close(fd);
		return sp_error(-ENOMEM, "perf map buffer");
	}
	int skipping = 0;
	size_t have = 0, cap = READ_CHUNK + SP_PERFMAP_MAX_LINE;
	uint64_t off = *offset;
	for (;;) {
		ssize_t n = pread(fd, buf + have, cap - have, (off_t)(off + have));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = sp_error(-errno, "read %s", path);
			break;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		size_t used = 0;
		if (skipping) {
			/* The rest of an over-long line names nothing. */
			const char *nl = memchr(buf, '\n', have);
			used = nl ? (size_t)(nl - buf) + 1 : have;
			skipping = !nl;
		}
		if (!skipping) {
			long u = sp_perfmap_parse(buf + used, have - used, fn, ctx);
			if (u < 0) {
				rc = (int)u;
				break;
			}
			used += (size_t)u;
		}
		off += used;
		memmove(buf, buf + used, have - used);
		have -= used;
		if (have >= SP_PERFMAP_MAX_LINE) {
			/* No newline in a full line's worth of bytes. */
			off += have;
			have = 0;
			skipping = 1;
		}
	}
	*offset = off;
	sp_free(buf);
	close(fd);
	return rc;
}
