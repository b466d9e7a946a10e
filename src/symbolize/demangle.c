#include "demangle.h"

#include <stdlib.h>
#include <string.h>

#include "io/dynload.h"

#define MAX_NAME 4096
/* __cxa_demangle's time and output grow with its input (and back
 * references can multiply the output): longer mangled names, and names
 * whose demangled form would be longer, stay raw. */
#define MAX_CXX_MANGLED   8192u
#define MAX_CXX_DEMANGLED 16384u

/* __cxa_demangle of the system's libstdc++, loaded at the first C++ name
 * (io/dynload.h) rather than linked: a linked libstdc++ would be loaded
 * into every program that uses the library, C++ names or not. Its result
 * is malloc'd. A program that cannot load it (a static one without a
 * dynamic loader, a system without libstdc++) keeps C++ names raw. */
static char *(*cxa_demangle)(const char *mangled, char *buf, size_t *len, int *status);
static const sp_dynsym cxx_syms[] = { SP_DYNSYM(cxa_demangle, "__cxa_demangle") };
static sp_dynlib cxx_lib = SP_DYNLIB("libstdc++.so.6", cxx_syms, NULL);

int sp_demangle_cxx_available(void)
{
	return sp_dynlib_load(&cxx_lib) == 0;
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Length of @p s without a trailing Rust legacy "::h<16 hex>", or 0 when
 * there is no such suffix. */
static size_t rust_hash_cut(const char *s, size_t n)
{
	if (n < 19 || memcmp(s + n - 19, "::h", 3) != 0)
		return 0;
	for (size_t i = n - 16; i < n; i++)
		if (!is_hex(s[i]))
			return 0;
	return n - 19;
}

/* Decodes Rust legacy $-escapes and ".." in place. */
static size_t rust_unescape(char *s, size_t n)
{
	static const struct {
		const char *esc;
		char c;
	} map[] = { { "$SP$", '@' },  { "$BP$", '*' },  { "$RF$", '&' },   { "$LT$", '<' },
		    { "$GT$", '>' },  { "$LP$", '(' },  { "$RP$", ')' },   { "$C$", ',' },
		    { "$u7e$", '~' }, { "$u20$", ' ' }, { "$u27$", '\'' }, { "$u5b$", '[' },
		    { "$u5d$", ']' }, { "$u7b$", '{' }, { "$u7d$", '}' },  { "$u3b$", ';' },
		    { "$u2b$", '+' }, { "$u22$", '"' } };
	size_t r = 0, w = 0;
	while (r < n) {
		/* rustc prefixes components that start with an escape with '_'. */
		if (s[r] == '_' && r + 1 < n && s[r + 1] == '$' &&
		    (r == 0 || (r >= 2 && s[r - 1] == ':' && s[r - 2] == ':'))) {
			r++;
			continue;
		}
		if (s[r] == '$') {
			size_t k;
			for (k = 0; k < sizeof(map) / sizeof(map[0]); k++) {
				size_t el = strlen(map[k].esc);
				if (n - r >= el && memcmp(s + r, map[k].esc, el) == 0) {
					s[w++] = map[k].c;
					r += el;
					break;
				}
			}
			if (k < sizeof(map) / sizeof(map[0]))
				continue;
		} else if (s[r] == '.' && r + 1 < n && s[r + 1] == '.') {
			s[w++] = ':';
			s[w++] = ':';
			r += 2;
			continue;
		}
		s[w++] = s[r++];
	}
	return w;
}

const char *sp_demangle(sp_strpool *pool, const char *raw, int keep_raw)
{
	if (keep_raw)
		return sp_strpool_intern(pool, raw);
	if (strncmp(raw, "_R", 2) == 0) {
		char out[MAX_NAME];
		if (sp_rust_v0_demangle(raw, out, sizeof(out)) == 0)
			return sp_strpool_intern(pool, out);
		return sp_strpool_intern(pool, raw);
	}
	if (strncmp(raw, "_Z", 2) != 0 || !sp_demangle_cxx_available() ||
	    strnlen(raw, MAX_CXX_MANGLED + 1) > MAX_CXX_MANGLED)
		return sp_strpool_intern(pool, raw);
	int status = 0;
	char *dm = cxa_demangle(raw, NULL, NULL, &status);
	size_t n = dm && status == 0 ? strnlen(dm, MAX_CXX_DEMANGLED + 1) : 0;
	if (!dm || status != 0 || n > MAX_CXX_DEMANGLED) {
		free(dm);
		return sp_strpool_intern(pool, raw);
	}
	size_t cut = rust_hash_cut(dm, n);
	if (cut)
		n = rust_unescape(dm, cut);
	const char *r = sp_strpool_intern_n(pool, dm, n);
	free(dm); /* Allocated by libstdc++, not through sp_malloc. */
	return r;
}
