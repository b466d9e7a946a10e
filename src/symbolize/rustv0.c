/* A bounded demangler for Rust v0 symbols ("_R...", RFC 2603): paths,
 * generic arguments, impls, basic and compound types and simple consts.
 * Recursion is depth-limited, backrefs must point backwards, total work and
 * output are capped; anything it does not understand makes it fail so the
 * caller keeps the raw name. Crate disambiguators are not printed. */
#include "demangle.h"

#include <string.h>

#include "stackpulse.h"

#define V0_MAX_DEPTH 64
#define V0_MAX_STEPS 20000

typedef struct v0 {
	const char *s; /* Symbol after "_R". */
	size_t len, pos;
	char *out;
	size_t cap, n;
	int depth, steps, quiet, err;
} v0;

static void put(v0 *d, const char *s, size_t n)
{
	if (d->quiet || d->err)
		return;
	if (n >= d->cap - d->n) {
		d->err = 1;
		return;
	}
	memcpy(d->out + d->n, s, n);
	d->n += n;
	d->out[d->n] = '\0';
}

static void puts_(v0 *d, const char *s)
{
	put(d, s, strlen(s));
}

static int peek(const v0 *d)
{
	return d->pos < d->len ? (unsigned char)d->s[d->pos] : 0;
}

static int eat(v0 *d, int c)
{
	if (peek(d) == c) {
		d->pos++;
		return 1;
	}
	return 0;
}

static int enter(v0 *d)
{
	if (d->err || ++d->depth > V0_MAX_DEPTH || ++d->steps > V0_MAX_STEPS) {
		d->err = 1;
		return 0;
	}
	return 1;
}

static uint64_t base62(v0 *d)
{
	if (eat(d, '_'))
		return 0;
	uint64_t v = 0;
	for (;;) {
		int c = peek(d);
		unsigned digit;
		if (c >= '0' && c <= '9')
			digit = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'z')
			digit = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'Z')
			digit = (unsigned)(c - 'A' + 36);
		else if (c == '_') {
			d->pos++;
			if (v == UINT64_MAX)
				d->err = 1;
			return v + 1;
		} else {
			d->err = 1;
			return 0;
		}
		if (v > (UINT64_MAX - digit) / 62) {
			d->err = 1;
			return 0;
		}
		v = v * 62 + digit;
		d->pos++;
	}
}

static uint64_t decimal(v0 *d)
{
	int c = peek(d);
	if (c < '0' || c > '9') {
		d->err = 1;
		return 0;
	}
	if (c == '0') {
		d->pos++;
		return 0;
	}
	uint64_t v = 0;
	while ((c = peek(d)) >= '0' && c <= '9') {
		if (v > (UINT64_MAX - 9) / 10) {
			d->err = 1;
			return 0;
		}
		v = v * 10 + (uint64_t)(c - '0');
		d->pos++;
	}
	return v;
}

/* Parses an identifier; returns its bytes (not printed). */
static void ident(v0 *d, const char **name, size_t *nlen, uint64_t *dis)
{
	*dis = 0;
	if (eat(d, 's'))
		*dis = base62(d) + 1;
	int puny = eat(d, 'u');
	uint64_t n = decimal(d);
	eat(d, '_');
	if (d->err || n > d->len - d->pos) {
		d->err = 1;
		*name = "";
		*nlen = 0;
		return;
	}
	*name = d->s + d->pos;
	*nlen = (size_t)n;
	d->pos += (size_t)n;
	if (puny)
		d->err = 1; /* Punycode: keep the raw symbol instead. */
}

static void path(v0 *d, int in_value);
static void type(v0 *d);

/* Follows a backref: parse at an earlier position, then come back. */
static void backref(v0 *d, void (*fn)(v0 *, int), int arg)
{
	size_t at = d->pos - 1;
	uint64_t target = base62(d);
	if (d->err || target >= at) {
		d->err = 1;
		return;
	}
	size_t saved = d->pos;
	d->pos = (size_t)target;
	fn(d, arg);
	d->pos = saved;
}

static void type_adapter(v0 *d, int unused)
{
	(void)unused;
	type(d);
}

static void lifetime(v0 *d)
{
	base62(d);
	puts_(d, "'_");
}

static void cnst(v0 *d);

static void cnst_adapter(v0 *d, int unused)
{
	(void)unused;
	cnst(d);
}

static void cnst(v0 *d)
{
	if (!enter(d))
		return;
	if (eat(d, 'p')) {
		puts_(d, "_");
	} else if (eat(d, 'B')) {
		backref(d, cnst_adapter, 0);
	} else {
		int t = peek(d);
		d->pos++;
		int neg = eat(d, 'n');
		uint64_t v = 0;
		int digits = 0;
		int c;
		while ((c = peek(d)) != '_') {
			unsigned h;
			if (c >= '0' && c <= '9')
				h = (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				h = (unsigned)(c - 'a' + 10);
			else {
				d->err = 1;
				break;
			}
			if (++digits > 16) {
				d->err = 1;
				break;
			}
			v = (v << 4) | h;
			d->pos++;
		}
		eat(d, '_');
		char buf[32];
		if (t == 'b') {
			puts_(d, v ? "true" : "false");
		} else if (t && strchr("hmytjabilnosx", t)) {
			size_t k = sizeof(buf);
			buf[--k] = '\0';
			do {
				buf[--k] = (char)('0' + v % 10);
				v /= 10;
			} while (v);
			if (neg)
				buf[--k] = '-';
			puts_(d, buf + k);
		} else if (t == 'c' && v >= 0x20 && v < 0x7f) {
			buf[0] = '\'';
			buf[1] = (char)v;
			buf[2] = '\'';
			put(d, buf, 3);
		} else {
			d->err = 1;
		}
	}
	d->depth--;
}

static const char *basic(int c)
{
	switch (c) {
	case 'a': return "i8";
	case 'b': return "bool";
	case 'c': return "char";
	case 'd': return "f64";
	case 'e': return "str";
	case 'f': return "f32";
	case 'h': return "u8";
	case 'i': return "isize";
	case 'j': return "usize";
	case 'l': return "i32";
	case 'm': return "u32";
	case 'n': return "i128";
	case 'o': return "u128";
	case 's': return "i16";
	case 't': return "u16";
	case 'u': return "()";
	case 'v': return "...";
	case 'x': return "i64";
	case 'y': return "u64";
	case 'z': return "!";
	case 'p': return "_";
	default: return NULL;
	}
}

static void generic_arg(v0 *d)
{
	if (eat(d, 'L'))
		lifetime(d);
	else if (eat(d, 'K'))
		cnst(d);
	else
		type(d);
}

static void fn_sig(v0 *d)
{
	if (eat(d, 'G'))
		base62(d);
	if (eat(d, 'U'))
		puts_(d, "unsafe ");
	if (eat(d, 'K')) {
		if (eat(d, 'C')) {
			puts_(d, "extern \"C\" ");
		} else {
			const char *n;
			size_t nl;
			uint64_t dis;
			ident(d, &n, &nl, &dis);
			puts_(d, "extern \"");
			put(d, n, nl);
			puts_(d, "\" ");
		}
	}
	puts_(d, "fn(");
	for (int i = 0; !d->err && !eat(d, 'E'); i++) {
		if (d->pos >= d->len) {
			d->err = 1;
			break;
		}
		if (i)
			puts_(d, ", ");
		type(d);
	}
	puts_(d, ")");
	if (eat(d, 'u'))
		return;
	puts_(d, " -> ");
	type(d);
}

static void type(v0 *d)
{
	if (!enter(d))
		return;
	int c = peek(d);
	const char *b = basic(c);
	if (b) {
		d->pos++;
		puts_(d, b);
	} else if (c == 'R' || c == 'Q') {
		d->pos++;
		puts_(d, c == 'R' ? "&" : "&mut ");
		if (eat(d, 'L')) {
			uint64_t lt = base62(d);
			if (lt)
				puts_(d, "'_ ");
		}
		type(d);
	} else if (c == 'P' || c == 'O') {
		d->pos++;
		puts_(d, c == 'P' ? "*const " : "*mut ");
		type(d);
	} else if (c == 'A' || c == 'S') {
		d->pos++;
		puts_(d, "[");
		type(d);
		if (c == 'A') {
			puts_(d, "; ");
			cnst(d);
		}
		puts_(d, "]");
	} else if (c == 'T') {
		d->pos++;
		puts_(d, "(");
		int i = 0;
		for (; !d->err && !eat(d, 'E'); i++) {
			if (d->pos >= d->len) {
				d->err = 1;
				break;
			}
			if (i)
				puts_(d, ", ");
			type(d);
		}
		if (i == 1)
			puts_(d, ",");
		puts_(d, ")");
	} else if (c == 'F') {
		d->pos++;
		fn_sig(d);
	} else if (c == 'D') {
		d->pos++;
		if (eat(d, 'G'))
			base62(d);
		puts_(d, "dyn ");
		for (int i = 0; !d->err && !eat(d, 'E'); i++) {
			if (d->pos >= d->len) {
				d->err = 1;
				break;
			}
			if (i)
				puts_(d, " + ");
			path(d, 0);
			int open = 0;
			while (!d->err && eat(d, 'p')) {
				const char *n;
				size_t nl;
				uint64_t dis;
				puts_(d, open ? ", " : "<");
				open = 1;
				ident(d, &n, &nl, &dis);
				put(d, n, nl);
				puts_(d, " = ");
				type(d);
			}
			if (open)
				puts_(d, ">");
		}
		if (eat(d, 'L'))
			base62(d);
		else
			d->err = 1;
	} else if (c == 'B') {
		d->pos++;
		backref(d, type_adapter, 0);
	} else {
		path(d, 0);
	}
	d->depth--;
}

static void path(v0 *d, int in_value)
{
	if (!enter(d))
		return;
	int c = peek(d);
	d->pos++;
	const char *n;
	size_t nl;
	uint64_t dis;
	switch (c) {
	case 'C':
		ident(d, &n, &nl, &dis);
		put(d, n, nl);
		break;
	case 'N': {
		int ns = peek(d);
		d->pos++;
		if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) {
			d->err = 1;
			break;
		}
		path(d, in_value);
		ident(d, &n, &nl, &dis);
		if (ns >= 'A' && ns <= 'Z') {
			char buf[48];
			puts_(d, "::{");
			puts_(d, ns == 'C' ? "closure" : ns == 'S' ? "shim" : "?");
			if (nl) {
				puts_(d, ":");
				put(d, n, nl);
			}
			size_t k = sizeof(buf);
			buf[--k] = '\0';
			do {
				buf[--k] = (char)('0' + dis % 10);
				dis /= 10;
			} while (dis);
			buf[--k] = '#';
			puts_(d, buf + k);
			puts_(d, "}");
		} else if (nl) {
			puts_(d, "::");
			put(d, n, nl);
		}
		break;
	}
	case 'M':
	case 'X': {
		if (eat(d, 's'))
			base62(d);
		d->quiet++;
		path(d, 0);
		d->quiet--;
		puts_(d, "<");
		type(d);
		if (c == 'X') {
			puts_(d, " as ");
			path(d, 0);
		}
		puts_(d, ">");
		break;
	}
	case 'Y':
		puts_(d, "<");
		type(d);
		puts_(d, " as ");
		path(d, 0);
		puts_(d, ">");
		break;
	case 'I':
		path(d, in_value);
		if (in_value)
			puts_(d, "::");
		puts_(d, "<");
		for (int i = 0; !d->err && !eat(d, 'E'); i++) {
			if (d->pos >= d->len) {
				d->err = 1;
				break;
			}
			if (i)
				puts_(d, ", ");
			generic_arg(d);
		}
		puts_(d, ">");
		break;
	case 'B': backref(d, path, in_value); break;
	default: d->err = 1; break;
	}
	d->depth--;
}

int sp_rust_v0_demangle(const char *sym, char *out, size_t cap)
{
	if (!sym || !out || cap < 2 || strncmp(sym, "_R", 2) != 0)
		return STACKPULSE_EFORMAT;
	v0 d;
	memset(&d, 0, sizeof(d));
	d.s = sym + 2;
	d.len = strlen(d.s);
	/* Drop a ".llvm.NNN"-style suffix from the parse. */
	const char *dot = memchr(d.s, '.', d.len);
	if (dot)
		d.len = (size_t)(dot - d.s);
	d.out = out;
	d.cap = cap;
	out[0] = '\0';
	int c = peek(&d);
	if (c >= '0' && c <= '9')
		return STACKPULSE_EFORMAT; /* An encoding version we do not know. */
	if (!(c >= 'A' && c <= 'Z'))
		return STACKPULSE_EFORMAT;
	path(&d, 1);
	/* What follows is the optional instantiating crate: not printed. */
	return d.err || d.n == 0 ? STACKPULSE_EFORMAT : 0;
}
