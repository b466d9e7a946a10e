/* The core kernel's text symbols, cached per boot. Reading /proc/kallsyms
 * makes the kernel format ~100k lines (tens of ms of CPU at every finish);
 * the core text (_stext.._etext) cannot change until reboot, so a symcache
 * table keyed by the boot id answers later recordings. Anything outside it
 * (modules, BPF, trampolines come and go) still takes the full read. */
#include "record/kallsyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/error.h"
#include "record/proc_scan.h"
#include "symbolize/cacheio.h"
#include "symcache/symcache.h"

#define KEY_LEN     20 /* Tag, then the 16 bytes of the boot id. */
#define MAX_SYMBOLS 4000000u

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The cache key from /proc/sys/kernel/random/boot_id; -ENOENT without one. */
static int boot_key(uint8_t key[KEY_LEN])
{
	char text[64];
	long n = sp_proc_read_small("/proc/sys/kernel/random/boot_id", text, sizeof(text));
	if (n < 32)
		return -ENOENT;
	static const uint8_t tag[4] = { 'k', 's', 'y', 'm' };
	memcpy(key, tag, sizeof(tag));
	int k = 0, hi = -1;
	for (long i = 0; i < n && k < 16; i++) {
		if (text[i] == '-')
			continue;
		int v = hexdigit(text[i]);
		if (v < 0)
			return -ENOENT;
		if (hi < 0) {
			hi = v;
		} else {
			key[4 + k++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	return k == 16 ? 0 : -1;
}

/* ---- answering from a table ---- */

/* 1 when the head of /proc/kallsyms, as this process sees it now, agrees
 * with the table: the table must never name frames that the file itself
 * would not (hidden addresses, another boot's layout, a bind mount). */
static int head_agrees(const sp_symcache *t)
{
	char text[8192];
	long n = sp_proc_read_small("/proc/kallsyms", text, sizeof(text));
	if (n <= 0)
		return 0;
	int agreed = 0;
	uint64_t prev = 0;
	char *line = text, *end = text + n;
	for (char *nl; line < end && (nl = memchr(line, '\n', (size_t)(end - line))) != NULL;
	     line = nl + 1) {
		*nl = '\0';
		char *p;
		uint64_t a = strtoull(line, &p, 16);
		if (p == line || p[0] != ' ' || !p[1] || p[2] != ' ')
			return 0;
		char type = p[1];
		const char *name = p + 3;
		size_t name_len = strcspn(name, " \t");
		if (a == 0 || a == prev ||
		    (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		prev = a;
		sp_symcache_frame f;
		uint64_t start;
		uint32_t len;
		if (sp_symcache_lookup(t, a, &f, 1, &start, &len) == 0)
			continue; /* Outside the core text. */
		if (start != a || !f.name || strlen(f.name) != name_len ||
		    memcmp(f.name, name, name_len) != 0)
			return 0;
		agreed++;
	}
	return agreed > 0;
}

static int covered(const sp_symcache *t, const uint64_t *addrs, size_t n)
{
	sp_symcache_frame f;
	uint64_t start;
	uint32_t len;
	for (size_t i = 0; i < n; i++)
		if (sp_symcache_lookup(t, addrs[i], &f, 1, &start, &len) == 0 || !f.name)
			return 0;
	return 1;
}

static int answer(const sp_symcache *t, const uint64_t *addrs, size_t n, sp_ksym_fn fn, void *ctx)
{
	uint64_t last = 0;
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		sp_symcache_frame f;
		uint64_t start;
		uint32_t len;
		if (sp_symcache_lookup(t, addrs[i], &f, 1, &start, &len) == 0 || !f.name)
			return sp_error(STACKPULSE_EINTERNAL,
			                "kernel address left the cached table");
		if (any && start == last)
			continue;
		int rc = fn(ctx, start, f.name, "");
		if (rc)
			return rc;
		last = start;
		any = 1;
	}
	return 0;
}

/* ---- building a table from the full read ---- */

typedef struct ksym {
	uint64_t addr;
	uint32_t line; /* Ties keep the first line, as the full read does. */
	uint32_t name; /* Offset into the collector's names. */
} ksym;

typedef struct collector {
	ksym *v;
	size_t n, cap;
	sp_buf names;
	uint64_t stext, etext;
	int failed;
} collector;

static int collect(void *ctx, uint64_t start, const char *name, const char *module)
{
	collector *c = ctx;
	if (c->failed || module[0])
		return 0;
	if (strcmp(name, "_stext") == 0)
		c->stext = start;
	else if (strcmp(name, "_etext") == 0)
		c->etext = start;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 65536;
		ksym *nv = nc <= MAX_SYMBOLS ? sp_realloc_array(c->v, nc, sizeof(*nv)) : NULL;
		if (!nv) {
			c->failed = 1; /* No cache this time; the read itself goes on. */
			return 0;
		}
		c->v = nv;
		c->cap = nc;
	}
	ksym *k = &c->v[c->n];
	k->addr = start;
	k->line = (uint32_t)c->n;
	k->name = (uint32_t)c->names.len;
	if (c->names.len > UINT32_MAX / 2 ||
	    sp_buf_append(&c->names, name, strlen(name) + 1) != 0) {
		c->failed = 1;
		return 0;
	}
	c->n++;
	return 0;
}

static int by_addr_line(const void *a, const void *b)
{
	const ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

/* Ranges [symbol, next symbol) over _stext.._etext, serialised. */
static int build_table(collector *c, uint8_t **data, size_t *len, const uint8_t key[KEY_LEN])
{
	if (c->failed || !c->stext || c->etext <= c->stext)
		return STACKPULSE_ENOTFOUND;
	qsort(c->v, c->n, sizeof(*c->v), by_addr_line);
	sp_symcache_builder *b;
	int rc = sp_symcache_builder_new(key, KEY_LEN, &b);
	if (rc)
		return rc;
	/* A symbol's start is part of the answer, and neighbours can share a
	 * name (arm64: gic_handle_irq at _stext and again 0x90 later). */
	sp_symcache_builder_keep_starts(b);
	for (size_t i = 0; i < c->n && rc == 0; i++) {
		const ksym *k = &c->v[i];
		if (k->addr < c->stext || k->addr >= c->etext || (i && c->v[i - 1].addr == k->addr))
			continue;
		size_t j = i + 1;
		while (j < c->n && c->v[j].addr == k->addr)
			j++;
		uint64_t end = j < c->n && c->v[j].addr < c->etext ? c->v[j].addr : c->etext;
		uint64_t span = end - k->addr;
		sp_symcache_frame f = { (const char *)c->names.data + k->name, NULL, 0 };
		rc = sp_symcache_builder_add(
		        b, k->addr, span > UINT32_MAX ? UINT32_MAX : (uint32_t)span, &f, 1);
	}
	if (rc == 0)
		rc = sp_symcache_builder_finish(b, data, len);
	sp_symcache_builder_free(b);
	return rc;
}

int sp_kallsyms_resolve_cached(const char *dir, const uint64_t *addrs, size_t n, sp_ksym_fn fn,
                               void *ctx, int *zeroed)
{
	static const char path[] = "/proc/kallsyms";
	uint8_t key[KEY_LEN];
	*zeroed = 0;
	if (n == 0)
		return 0;
	if (!dir || boot_key(key) != 0)
		return sp_kallsyms_resolve(path, addrs, n, fn, ctx, zeroed);
	uint8_t *data = NULL;
	sp_symcache t;
	int have = sp_cacheio_read(dir, key, KEY_LEN, &data, &t) == 0;
	if (have && covered(&t, addrs, n) && head_agrees(&t)) {
		int rc = answer(&t, addrs, n, fn, ctx);
		sp_free(data);
		return rc;
	}
	if (have) { /* Valid, but some address lies outside the core text. */
		sp_free(data);
		return sp_kallsyms_resolve(path, addrs, n, fn, ctx, zeroed);
	}
	collector c;
	memset(&c, 0, sizeof(c));
	sp_buf_init(&c.names);
	int rc = sp_kallsyms_scan(path, addrs, n, fn, ctx, zeroed, collect, &c);
	size_t len = 0;
	if (rc == 0 && !*zeroed && build_table(&c, &data, &len, key) == 0) {
		/* Private: kernel addresses defeat KASLR for whoever reads them.
		 * The tables of other boots (same "ksym" tag) can never match
		 * again: this one replaces them. */
		(void)sp_cacheio_write_mode(dir, key, KEY_LEN, data, len, 0600, 4);
		sp_free(data);
	}
	sp_free(c.v);
	sp_buf_free(&c.names);
	return rc;
}
