#include "alloc.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local long fail_after = -1;
static _Thread_local uint64_t alloc_count;
static _Thread_local uint64_t alloc_bytes;

void sp_alloc_fail_after(long n)
{
	fail_after = n;
}

uint64_t sp_alloc_count(void)
{
	return alloc_count;
}

uint64_t sp_alloc_bytes(void)
{
	return alloc_bytes;
}

void sp_alloc_reset_count(void)
{
	alloc_count = 0;
	alloc_bytes = 0;
}

static int injected_failure(void)
{
	alloc_count++;
	if (fail_after < 0)
		return 0;
	if (fail_after == 0)
		return 1;
	fail_after--;
	return 0;
}

void *sp_malloc(size_t size)
{
	if (injected_failure())
		return NULL;
	alloc_bytes += size;
	return malloc(size ? size : 1);
}

void *sp_calloc(size_t count, size_t size)
{
	if (injected_failure())
		return NULL;
	if (count == 0 || size == 0)
		return calloc(1, 1);
	if (count <= SIZE_MAX / size)
		alloc_bytes += count * size;
	return calloc(count, size);
}

void *sp_realloc_array(void *ptr, size_t count, size_t size)
{
	/* Catch size_t overflow. */
	if (size != 0 && count > SIZE_MAX / size)
		return NULL;
	if (injected_failure())
		return NULL;
	size_t bytes = count * size;
	alloc_bytes += bytes;
	return realloc(ptr, bytes ? bytes : 1);
}

void sp_free(void *ptr)
{
	free(ptr);
}

char *sp_strndup(const char *s, size_t len)
{
	if (len == SIZE_MAX)
		return NULL;
	char *copy = sp_malloc(len + 1);
	if (!copy)
		return NULL;
	if (len)
		memcpy(copy, s, len);
	copy[len] = '\0';
	return copy;
}

char *sp_strdup(const char *s)
{
	return sp_strndup(s, strlen(s));
}
