/* One streaming pass over kallsyms (the kernel formats the whole file on
 * every read, so a read is costly): each text symbol competes only for the
 * gap of sorted addresses just above it, keeping a copy of the best line;
 * a prefix scan then gives every address its closest symbol at or below.
 * Memory stays proportional to the addresses seen, not to kallsyms. */
#include "record/kallsyms.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/search.h"
#include "io/file.h"

#define LINE_MAX_BYTES 1024 /* KSYM_NAME_LEN is 512, plus address and module. */

typedef struct ksym_line {
	uint64_t addr;
	char type;
	char *name;
	const char *module; /* "" for vmlinux. */
} ksym_line;

typedef int (*line_fn)(void *ctx, uint32_t lineno, ksym_line *l);

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses "ADDR TYPE NAME [MODULE]" in place, by hand: the file has over a
 * hundred thousand lines. Returns 0 or -1. */
static int parse_line(char *s, ksym_line *l)
{
	if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
		return -1;
	uint64_t a = 0;
	int digits = 0, v;
	while ((v = hexval(*s)) >= 0) {
		if (++digits > 16)
			return -1;
		a = (a << 4) | (uint64_t)v;
		s++;
	}
	if (*s != ' ')
		return -1;
	l->addr = a;
	s++;
	if (!*s || s[1] != ' ')
		return -1;
	l->type = s[0];
	s += 2;
	l->name = s;
	l->module = "";
	if (*s == '\0' || *s == ' ' || *s == '\t')
		return -1;
	return 0;
}

/* Splits the name from the module; only for lines that matter. */
static void split_name(char *s, ksym_line *l)
{
	char *sep = strpbrk(s, " \t");
	if (!sep)
		return;
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

typedef struct line_pass {
	const char *path;
	uint32_t lineno;
	line_fn fn;
	void *ctx;
} line_pass;

static int one_line(void *ctx, char *line, size_t len)
{
	line_pass *lp = ctx;
	(void)len;
	if (++lp->lineno > SP_KALLSYMS_MAX_LINES)
		return sp_error(STACKPULSE_ELIMIT, "%s: more than %u lines", lp->path,
		                SP_KALLSYMS_MAX_LINES);
	ksym_line l;
	return parse_line(line, &l) == 0 ? lp->fn(lp->ctx, lp->lineno, &l) : 0;
}

static int for_each_line(const char *path, line_fn fn, void *ctx)
{
	line_pass lp = { path, 0, fn, ctx };
	int rc = sp_file_for_each_line(path, LINE_MAX_BYTES, one_line, &lp, NULL);
	if (rc < 0 && rc > -4096 && lp.lineno == 0)
		return sp_error(rc, "cannot read %s", path);
	return rc;
}

static int is_text(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

/* Gap i holds the symbol starts in (addrs[i-1], addrs[i]]; the best is
 * the highest start, first line among equals. */
typedef struct gap {
	uint64_t start;
	uint32_t line; /* 0: no symbol yet. */
	uint32_t cap;
	char *text; /* name '\0' module '\0' */
	size_t name_len;
} gap;

typedef struct pass {
	const uint64_t *addrs;
	size_t n;
	gap *gaps;
	int nonzero;
	sp_ksym_fn each;
	void *each_ctx;
} pass;

static int pass_fn(void *ctx, uint32_t lineno, ksym_line *l)
{
	pass *p = ctx;
	if (l->addr != 0)
		p->nonzero = 1;
	/* arm64 lists _etext as data ('D'); the per-boot table needs it. */
	if (p->each && l->addr != 0 && (is_text(l->type) || strcmp(l->name, "_etext") == 0)) {
		split_name(l->name, l);
		int rc = p->each(p->each_ctx, l->addr, l->name, l->module);
		if (rc)
			return rc;
	}
	if (p->n == 0 || !is_text(l->type) || l->addr == 0 || l->addr > p->addrs[p->n - 1])
		return 0;
	/* First address >= this symbol's start. */
	size_t lo;
	SP_PARTITION_POINT(lo, p->n, mid, p->addrs[mid] < l->addr);
	gap *g = &p->gaps[lo];
	if (g->line && g->start >= l->addr)
		return 0;
	split_name(l->name, l);
	size_t nl = strlen(l->name), ml = strlen(l->module);
	if (nl + ml + 2 > g->cap) {
		uint32_t ncap = (uint32_t)(nl + ml + 2 < 64 ? 64 : nl + ml + 2);
		char *t = sp_malloc(ncap);
		if (!t)
			return -ENOMEM;
		sp_free(g->text);
		g->text = t;
		g->cap = ncap;
	}
	memcpy(g->text, l->name, nl + 1);
	memcpy(g->text + nl + 1, l->module, ml + 1);
	g->name_len = nl;
	g->start = l->addr;
	g->line = lineno;
	return 0;
}

typedef struct pick {
	uint32_t line;
	size_t gap;
} pick;

static int by_line(const void *a, const void *b)
{
	const pick *x = a, *y = b;
	return (x->line > y->line) - (x->line < y->line);
}

static int emit(pass *p, sp_ksym_fn fn, void *ctx)
{
	/* Each address takes the last gap at or below it that has a symbol. */
	pick *used = sp_calloc(p->n, sizeof(*used));
	if (!used)
		return -ENOMEM;
	size_t m = 0, cur = SIZE_MAX;
	for (size_t i = 0; i < p->n; i++) {
		if (p->gaps[i].line)
			cur = i;
		if (cur != SIZE_MAX && (m == 0 || used[m - 1].gap != cur)) {
			used[m].line = p->gaps[cur].line;
			used[m++].gap = cur;
		}
	}
	/* Distinct lines (gaps are distinct symbols), in file order. */
	qsort(used, m, sizeof(*used), by_line);
	int rc = 0;
	for (size_t i = 0; i < m && rc == 0; i++) {
		const gap *g = &p->gaps[used[i].gap];
		rc = fn(ctx, g->start, g->text, g->text + g->name_len + 1);
	}
	sp_free(used);
	return rc;
}

int sp_kallsyms_resolve(const char *path, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx,
                        int *zeroed)
{
	return sp_kallsyms_scan(path, addrs, n, fn, ctx, zeroed, NULL, NULL);
}

int sp_kallsyms_scan(const char *path, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx,
                     int *zeroed, sp_ksym_fn each, void *each_ctx)
{
	*zeroed = 0;
	if (n == 0 && !each)
		return 0;
	pass p = { addrs, n, sp_calloc(n ? n : 1, sizeof(gap)), 0, each, each_ctx };
	if (!p.gaps)
		return -ENOMEM;
	int rc = for_each_line(path, pass_fn, &p);
	if (rc == 0 && !p.nonzero)
		*zeroed = 1;
	if (rc == 0 && !*zeroed && n > 0)
		rc = emit(&p, fn, ctx);
	for (size_t i = 0; i < n; i++)
		sp_free(p.gaps[i].text);
	sp_free(p.gaps);
	return rc;
}
