/* Two streaming passes over kallsyms: the first finds, per address, the
 * line of the closest symbol at or below it; the second emits those lines.
 * Memory stays proportional to the addresses seen, not to kallsyms. */
#include "record/kallsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"

#define LINE_MAX_BYTES 1024 /* KSYM_NAME_LEN is 512, plus address and module. */
#define READ_BYTES     65536

typedef struct ksym_line {
	uint64_t addr;
	char type;
	const char *name;
	const char *module; /* "" for vmlinux. */
} ksym_line;

typedef int (*line_fn)(void *ctx, uint32_t lineno, const ksym_line *l);

/* Parses "ADDR TYPE NAME [MODULE]" in place. Returns 0 or -1. */
static int parse_line(char *s, ksym_line *l)
{
	char *end;
	if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
		return -1;
	unsigned long long a = strtoull(s, &end, 16);
	if (end == s || *end != ' ' || end - s > 16)
		return -1;
	l->addr = a;
	s = end + 1;
	if (!*s || s[1] != ' ')
		return -1;
	l->type = s[0];
	s += 2;
	l->name = s;
	char *sep = strpbrk(s, " \t");
	l->module = "";
	if (sep) {
		*sep = '\0';
		char *m = sep + 1;
		while (*m == ' ' || *m == '\t')
			m++;
		if (*m == '[') {
			char *close = strchr(m, ']');
			if (close) {
				*close = '\0';
				l->module = m + 1;
			}
		}
	}
	return *l->name ? 0 : -1;
}

static int for_each_line(const char *path, line_fn fn, void *ctx)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sp_error(-errno, "cannot open %s", path);
	char *buf = sp_malloc(READ_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t len = 0;
	uint32_t lineno = 0;
	int rc = 0, skipping = 0, eof = 0;
	while (!eof && rc == 0) {
		ssize_t n = read(fd, buf + len, READ_BYTES - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0) {
			eof = 1;
			if (len == 0)
				break;
			buf[len++] = '\n';
		}
		len += (size_t)n;
		size_t pos = 0;
		char *nl;
		while (rc == 0 && (nl = memchr(buf + pos, '\n', len - pos)) != NULL) {
			*nl = '\0';
			if (++lineno > SP_KALLSYMS_MAX_LINES) {
				rc = sp_error(STACKPULSE_ELIMIT, "%s: more than %u lines", path,
				              SP_KALLSYMS_MAX_LINES);
				break;
			}
			ksym_line l;
			size_t ll = (size_t)(nl - (buf + pos));
			if (!skipping && ll < LINE_MAX_BYTES && parse_line(buf + pos, &l) == 0)
				rc = fn(ctx, lineno, &l);
			skipping = 0;
			pos = (size_t)(nl - buf) + 1;
		}
		memmove(buf, buf + pos, len - pos);
		len -= pos;
		if (len == READ_BYTES) {
			skipping = 1; /* Over-long line: drop it. */
			len = 0;
		}
	}
	sp_free(buf);
	close(fd);
	return rc;
}

static int is_text(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

typedef struct pass1 {
	const uint64_t *addrs;
	size_t n;
	uint64_t *best_start; /* Per address; valid when best_line != 0. */
	uint32_t *best_line;
	int nonzero;
} pass1;

static int pass1_fn(void *ctx, uint32_t lineno, const ksym_line *l)
{
	pass1 *p = ctx;
	if (l->addr != 0)
		p->nonzero = 1;
	if (!is_text(l->type) || l->addr == 0)
		return 0;
	/* First address >= this symbol's start. */
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->addrs[mid] < l->addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Best starts grow with the address, so the symbol wins a prefix. */
	for (size_t i = lo; i < p->n; i++) {
		if (p->best_line[i] && p->best_start[i] >= l->addr)
			break;
		p->best_start[i] = l->addr;
		p->best_line[i] = lineno;
	}
	return 0;
}

typedef struct pass2 {
	const uint32_t *lines; /* Sorted, distinct. */
	size_t n, next;
	sp_ksym_fn fn;
	void *ctx;
} pass2;

static int pass2_fn(void *ctx, uint32_t lineno, const ksym_line *l)
{
	pass2 *p = ctx;
	if (p->next >= p->n || p->lines[p->next] != lineno)
		return 0;
	p->next++;
	return p->fn(p->ctx, l->addr, l->name, l->module);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

int sp_kallsyms_resolve(const char *path, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx,
                        int *zeroed)
{
	*zeroed = 0;
	if (n == 0)
		return 0;
	pass1 p1 = { addrs, n, sp_calloc(n, sizeof(uint64_t)), sp_calloc(n, sizeof(uint32_t)), 0 };
	if (!p1.best_start || !p1.best_line) {
		sp_free(p1.best_start);
		sp_free(p1.best_line);
		return -ENOMEM;
	}
	int rc = for_each_line(path, pass1_fn, &p1);
	sp_free(p1.best_start);
	if (rc == 0 && !p1.nonzero)
		*zeroed = 1;
	if (rc || *zeroed) {
		sp_free(p1.best_line);
		return rc;
	}
	/* Distinct needed lines, in file order. */
	qsort(p1.best_line, n, sizeof(uint32_t), cmp_u32);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (p1.best_line[i] && (m == 0 || p1.best_line[m - 1] != p1.best_line[i]))
			p1.best_line[m++] = p1.best_line[i];
	pass2 p2 = { p1.best_line, m, 0, fn, ctx };
	if (m)
		rc = for_each_line(path, pass2_fn, &p2);
	sp_free(p1.best_line);
	return rc;
}
