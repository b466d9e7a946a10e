#include "strpool.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/hash.h"

#define CHUNK_BYTES (64u << 10)

struct sp_strchunk {
	struct sp_strchunk *next;
	size_t used, cap;
	char data[];
};

void sp_strpool_init(sp_strpool *p)
{
	memset(p, 0, sizeof(*p));
}

void sp_strpool_free(sp_strpool *p)
{
	struct sp_strchunk *c = p->chunks;
	while (c) {
		struct sp_strchunk *n = c->next;
		sp_free(c);
		c = n;
	}
	sp_free(p->slots);
	memset(p, 0, sizeof(*p));
}

static char *alloc_bytes(sp_strpool *p, size_t n)
{
	struct sp_strchunk *c = p->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
		c = sp_malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = p->chunks;
		p->chunks = c;
	}
	char *r = c->data + c->used;
	c->used += n;
	return r;
}

static int grow(sp_strpool *p)
{
	size_t ncap = p->cap ? p->cap * 2 : 1024;
	const char **ns = sp_calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < p->cap; i++) {
		const char *s = p->slots[i];
		if (!s)
			continue;
		size_t j = (size_t)sp_hash_bytes(s, strlen(s)) & (ncap - 1);
		while (ns[j])
			j = (j + 1) & (ncap - 1);
		ns[j] = s;
	}
	sp_free(p->slots);
	p->slots = ns;
	p->cap = ncap;
	return 0;
}

const char *sp_strpool_intern_n(sp_strpool *p, const char *s, size_t n)
{
	if ((p->used + 1) * 2 > p->cap && grow(p) != 0) {
		sp_error(-ENOMEM, "string pool: out of memory");
		return NULL;
	}
	size_t mask = p->cap - 1;
	size_t i = (size_t)sp_hash_bytes(s, n) & mask;
	while (p->slots[i]) {
		const char *t = p->slots[i];
		if (strncmp(t, s, n) == 0 && t[n] == '\0')
			return t;
		i = (i + 1) & mask;
	}
	char *copy = n < SIZE_MAX ? alloc_bytes(p, n + 1) : NULL;
	if (!copy) {
		sp_error(-ENOMEM, "string pool: out of memory");
		return NULL;
	}
	memcpy(copy, s, n);
	copy[n] = '\0';
	p->slots[i] = copy;
	p->used++;
	p->bytes += n + 1;
	return copy;
}

const char *sp_strpool_intern(sp_strpool *p, const char *s)
{
	return sp_strpool_intern_n(p, s, strlen(s));
}
