/* Bounded /proc readers. Every line and file is length-capped so a hostile
 * or huge /proc entry cannot exhaust memory. */
#include "record/proc_scan.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/grow.h"
#include "io/file.h"

#define MAP_LINE_MAX 8192 /* Longer maps lines (absurd paths) are skipped. */

long sp_proc_read_small(const char *path, char *buf, size_t cap)
{
	if (cap == 0)
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (long)len;
}

int sp_proc_state(pid_t pid, char *state, uid_t *uid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	long n = sp_proc_read_small(path, buf, sizeof(buf));
	if (n < 0)
		return -ESRCH;
	/* comm may contain ')' and spaces: the state follows the last ')'. */
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || rp[2] == '\0')
		return -ESRCH;
	*state = rp[2];
	if (uid) {
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		*uid = stat(path, &st) == 0 ? st.st_uid : (uid_t)-1;
	}
	return 0;
}

int sp_proc_ppid(pid_t pid, pid_t *ppid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) < 0)
		return -ESRCH;
	/* "pid (comm) S ppid ...": the comm ends at the last ')'. */
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ')
		return -ESRCH;
	char *end;
	long v = strtol(rp + 4, &end, 10);
	if (end == rp + 4 || v < 0 || v > INT_MAX)
		return -ESRCH;
	*ppid = (pid_t)v;
	return 0;
}

int sp_proc_children(pid_t pid, sp_proc_child_fn fn, void *ctx)
{
	pid_t *tids;
	size_t nt;
	if (sp_proc_tasks(pid, &tids, &nt) != 0)
		return -ESRCH;
	int rc = 0;
	for (size_t k = 0; k < nt && rc == 0; k++) {
		char path[96], buf[1024];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)tids[k]);
		if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
			continue;
		for (char *q = buf, *end; *q && rc == 0; q = end) {
			long c = strtol(q, &end, 10);
			if (end == q)
				break;
			if (c > 0 && c <= INT_MAX)
				rc = fn(ctx, (pid_t)c);
		}
	}
	sp_free(tids);
	return rc;
}

int sp_pid_list_add(sp_pid_list *l, pid_t pid, uint32_t max)
{
	int rc = SP_GROW(l->v, l->cap, l->n + 1, max, "processes");
	if (rc == 0)
		l->v[l->n++] = pid;
	return rc;
}

typedef struct descend_ctx {
	sp_pid_list *l;
	uint32_t max;
	pid_t self;
	int rc;
} descend_ctx;

/* sp_proc_children callback: adds a pid not listed yet; 1 stops the walk. */
static int add_child(void *ctx, pid_t pid)
{
	descend_ctx *d = ctx;
	if (pid == d->self)
		return 0;
	for (uint32_t i = 0; i < d->l->n; i++)
		if (d->l->v[i] == pid)
			return 0;
	d->rc = sp_pid_list_add(d->l, pid, d->max);
	return d->rc != 0;
}

int sp_proc_descendants(sp_pid_list *l, uint32_t max)
{
	descend_ctx d = { l, max, getpid(), 0 };
	for (uint32_t i = 0; i < l->n && d.rc == 0; i++)
		sp_proc_children(l->v[i], add_child, &d);
	if (d.rc == STACKPULSE_ELIMIT)
		sp_error_clear(); /* Full: the tree is cut there. */
	return d.rc == -ENOMEM ? d.rc : 0;
}

pid_t sp_proc_parse_nspid(const char *status)
{
	const char *p = strstr(status, "\nNSpid:");
	if (!p)
		return 0;
	p += 7;
	long last = 0;
	while (*p && *p != '\n') {
		while (*p == ' ' || *p == '\t')
			p++;
		long v = 0;
		int digits = 0;
		while (*p >= '0' && *p <= '9') {
			if (++digits > 10)
				return 0; /* Not a pid. */
			v = v * 10 + (*p++ - '0');
		}
		if (!digits)
			break;
		last = v;
	}
	return last > 0 && last <= INT_MAX ? (pid_t)last : 0;
}

pid_t sp_proc_nspid(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
		return pid;
	pid_t ns = sp_proc_parse_nspid(buf);
	return ns ? ns : pid;
}

int sp_proc_parse_syscall(const char *text, sp_proc_syscall *out)
{
	if (strncmp(text, "running", 7) == 0)
		return -EAGAIN;
	char *end;
	errno = 0;
	long long nr = strtoll(text, &end, 10);
	if (end == text || errno || nr < -1 || nr > INT_MAX)
		return STACKPULSE_EFORMAT;
	/* "NR A1 .. A6 SP PC", or "-1 SP PC" outside a system call. */
	uint64_t v[8];
	int want = nr >= 0 ? 8 : 2;
	const char *p = end;
	for (int i = 0; i < want; i++) {
		/* One space, then digits (strtoull would skip more blanks and
		 * take a sign). */
		if (*p != ' ' || !isxdigit((unsigned char)p[1]))
			return STACKPULSE_EFORMAT;
		errno = 0;
		unsigned long long x = strtoull(p + 1, &end, 16);
		if (end == p + 1 || errno)
			return STACKPULSE_EFORMAT;
		v[i] = x;
		p = end;
	}
	out->nr = (long)nr;
	out->sp = v[want - 2];
	out->pc = v[want - 1];
	return 0;
}

int sp_proc_thread_syscall(pid_t pid, pid_t tid, sp_proc_syscall *out)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	long n = sp_proc_read_small(path, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	return sp_proc_parse_syscall(buf, out);
}

int sp_proc_thread_switches(pid_t pid, pid_t tid, uint64_t *count)
{
	char path[96], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	char *end;
	if (sp_proc_read_small(path, buf, sizeof(buf)) > 0) {
		/* "run_ns wait_ns timeslices" */
		const char *p = buf;
		unsigned long long v = 0;
		for (int i = 0; i < 3; i++) {
			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno)
				return STACKPULSE_EFORMAT;
			p = end;
		}
		*count = v;
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	static const char *const key[2] = { "\nvoluntary_ctxt_switches:",
		                            "\nnonvoluntary_ctxt_switches:" };
	uint64_t sum = 0;
	for (int i = 0; i < 2; i++) {
		const char *p = strstr(buf, key[i]);
		if (!p)
			return STACKPULSE_EFORMAT;
		p += strlen(key[i]);
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p || errno)
			return STACKPULSE_EFORMAT;
		sum += v;
	}
	*count = sum;
	return 0;
}

void sp_proc_comm(pid_t pid, pid_t tid, char *buf, size_t cap)
{
	char path[96];
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
	long n = sp_proc_read_small(path, buf, cap);
	if (n < 0) {
		if (cap)
			buf[0] = '\0';
		return;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
}

int sp_proc_cmdline(pid_t pid, char **out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	char *buf = sp_malloc(SP_PROC_CMDLINE_MAX + 1);
	if (!buf)
		return -ENOMEM;
	long n = sp_proc_read_small(path, buf, SP_PROC_CMDLINE_MAX + 1);
	if (n < 0) {
		sp_free(buf);
		return -ESRCH;
	}
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (long i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	*out = buf;
	return 0;
}

static int parse_hex(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	int digits = 0;
	for (;; p++) {
		int d;
		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		if (++digits > 16)
			return -1; /* More than 64 bits. */
		x = (x << 4) | (uint64_t)d;
	}
	if (digits == 0)
		return -1;
	*v = x;
	*s = p;
	return 0;
}

static int parse_dec(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	int digits = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
		digits++;
	}
	if (digits == 0)
		return -1;
	*v = x;
	*s = p;
	return 0;
}

/* "start-end perms offset dev inode   path" */
int sp_proc_parse_map_line(char *line, sp_proc_map *m)
{
	const char *p = line;
	uint64_t dummy;
	if (parse_hex(&p, &m->start) || *p++ != '-' || parse_hex(&p, &m->end) || *p++ != ' ')
		return sp_error(STACKPULSE_EFORMAT, "maps: bad address range");
	if (m->end < m->start)
		return sp_error(STACKPULSE_EFORMAT, "maps: end before start");
	if (strlen(p) < 5 || p[4] != ' ')
		return sp_error(STACKPULSE_EFORMAT, "maps: bad permissions");
	m->exec = p[2] == 'x';
	p += 5;
	if (parse_hex(&p, &m->pgoff) || *p++ != ' ')
		return sp_error(STACKPULSE_EFORMAT, "maps: bad offset");
	if (parse_hex(&p, &dummy) || *p++ != ':' || parse_hex(&p, &dummy) || *p++ != ' ')
		return sp_error(STACKPULSE_EFORMAT, "maps: bad device");
	if (parse_dec(&p, &m->inode))
		return sp_error(STACKPULSE_EFORMAT, "maps: bad inode");
	while (*p == ' ')
		p++;
	m->path = p;
	return 0;
}

typedef struct maps_pass {
	pid_t pid;
	unsigned seen; /* Executable mappings. */
	sp_proc_map_fn fn;
	void *ctx;
} maps_pass;

static int maps_line(void *ctx, char *line, size_t len)
{
	maps_pass *mp = ctx;
	(void)len;
	sp_proc_map m;
	memset(&m, 0, sizeof(m));
	if (sp_proc_parse_map_line(line, &m) != 0 || !m.exec)
		return 0;
	if (++mp->seen > SP_PROC_MAX_MAPS)
		return sp_error(STACKPULSE_ELIMIT, "pid %d: more than %u executable mappings",
		                (int)mp->pid, SP_PROC_MAX_MAPS);
	return mp->fn(mp->ctx, &m);
}

/* Reads the maps file @p path; *lines counts its lines. */
static int maps_file(const char *path, pid_t pid, sp_proc_map_fn fn, void *ctx, uint64_t *lines)
{
	maps_pass mp = { pid, 0, fn, ctx };
	int rc = sp_file_for_each_line(path, MAP_LINE_MAX, maps_line, &mp, lines);
	return rc == -ENOENT ? -ESRCH : rc;
}

int sp_proc_maps(pid_t pid, sp_proc_map_fn fn, void *ctx)
{
	char path[96];
	uint64_t lines = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int rc = maps_file(path, pid, fn, ctx, &lines);
	if (rc || lines)
		return rc;
	/* Empty: a leader that left with pthread_exit has no memory of its
	 * own any more; its threads still show the process's. */
	pid_t *tids;
	size_t n;
	if (sp_proc_tasks(pid, &tids, &n) != 0)
		return 0;
	for (size_t i = 0; i < n && rc == 0 && lines == 0; i++) {
		if (tids[i] == pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/maps", (int)pid, (int)tids[i]);
		rc = maps_file(path, pid, fn, ctx, &lines);
		if (rc == -ESRCH)
			rc = 0; /* that thread is gone too: try the next */
	}
	sp_free(tids);
	return rc;
}
