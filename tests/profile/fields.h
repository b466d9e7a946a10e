/* Splitting tool output (pprof -top, report --top) into checked fields. */
#ifndef SP_TEST_PROFILE_FIELDS_H
#define SP_TEST_PROFILE_FIELDS_H

#include <errno.h>
#include <stdlib.h>

/* Cuts the first @p n space-separated fields of @p line into @p f (in
 * place); *rest points past them. Returns 0 when all were present. */
static inline int split_fields(char *line, char **f, int n, char **rest)
{
	char *p = line;
	for (int i = 0; i < n; i++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -1;
		f[i] = p;
		while (*p && *p != ' ')
			p++;
		if (*p)
			*p++ = '\0';
	}
	while (*p == ' ')
		p++;
	*rest = p;
	return 0;
}

/* A whole decimal integer, or -1. */
static inline int to_ll(const char *s, long long *v)
{
	char *end;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno || end == s || *end ? -1 : 0;
}

#endif
