/* perf map files (/tmp/perf-PID.map): "START SIZE name" per line, written by
 * JIT runtimes and by CPython 3.12+ with -X perf. See perfmap.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/file.h"
#include "record/perfmap.h"
#include "record/proc_scan.h"

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

/* A map names code only when the target's own user wrote it: a regular
 * file owned by the live process's uid, or by ours once it has exited. */
static int trusted_map(int fd, pid_t pid)
{
	struct stat st;
	char state;
	uid_t uid;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (sp_proc_state(pid, &state, &uid) == 0 && uid != (uid_t)-1)
		return st.st_uid == uid;
	return st.st_uid == geteuid();
}

int sp_perfmap_read(pid_t pid, uint64_t *offset, sp_perfmap_fn fn, void *ctx)
{
	char path[128];
	/* /tmp is world-writable: the one safe open (no FIFO or device, no
	 * blocking), the file itself not a symlink, resolved inside the
	 * target's root; our own /tmp only once the target is gone. */
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)sp_proc_nspid(pid));
	int fd = -1;
	uint64_t size;
	int rc = sp_file_open_in_root(pid, path, SP_FILE_NOFOLLOW, 0, NULL, &fd, &size);
	if (rc == -ESRCH) {
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
