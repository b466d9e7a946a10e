/* Exporter entry points, the buffered output and text escaping. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"

int sp_out_flush(sp_out *o)
{
	if (o->err)
		return o->err;
	if (o->len) {
		int rc = o->fn(o->ctx, o->buf, o->len);
		o->len = 0;
		if (rc) {
			o->err = rc < 0 ? rc : STACKPULSE_EINTERNAL;
			return sp_error(o->err, "export: write callback failed (%d)", rc);
		}
	}
	return 0;
}

int sp_out_write(sp_out *o, const void *p, size_t n)
{
	const uint8_t *s = p;
	if (!o->err && n > o->limit - o->total) {
		o->err = sp_error(STACKPULSE_ELIMIT,
		                  "export: output exceeds the %llu-byte cap for this format",
		                  (unsigned long long)o->limit);
		return o->err;
	}
	o->total += n;
	while (n > 0) {
		if (o->err)
			return o->err;
		size_t room = SP_OUT_BLOCK - o->len;
		size_t k = n < room ? n : room;
		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (o->len == SP_OUT_BLOCK) {
			int rc = sp_out_flush(o);
			if (rc)
				return rc;
		}
	}
	return o->err;
}

int sp_out_str(sp_out *o, const char *s)
{
	return sp_out_write(o, s, strlen(s));
}

int sp_out_printf(sp_out *o, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return sp_error(STACKPULSE_EINTERNAL, "export: format failed");
	/* Callers format numbers and short fixed text only. */
	size_t len = (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1;
	return sp_out_write(o, tmp, len);
}

size_t sp_utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Reject overlong forms, surrogates and values past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

int sp_out_xml(sp_out *o, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		const char *rep = NULL;
		switch (c) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default: break;
		}
		if (rep) {
			sp_out_str(o, rep);
			i++;
			continue;
		}
		if (c < 0x20) {
			sp_out_write(o, "?", 1);
			i++;
			continue;
		}
		size_t n = sp_utf8_seq(s + i, len - i);
		if (!n) {
			sp_out_write(o, "?", 1);
			i++;
			continue;
		}
		sp_out_write(o, s + i, n);
		i += n;
	}
	return o->err;
}

int sp_out_json(sp_out *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	size_t len = strlen((const char *)s), i = 0;
	sp_out_write(o, "\"", 1);
	while (i < len) {
		unsigned char c = s[i];
		if (c == '"' || c == '\\') {
			char esc[2] = { '\\', (char)c };
			sp_out_write(o, esc, 2);
			i++;
		} else if (c < 0x20) {
			sp_out_printf(o, "\\u%04x", c);
			i++;
		} else {
			size_t n = sp_utf8_seq(s + i, len - i);
			if (!n) {
				sp_out_str(o, "\\ufffd");
				i++;
			} else {
				sp_out_write(o, s + i, n);
				i += n;
			}
		}
	}
	return sp_out_write(o, "\"", 1);
}

int stackpulse_export(const stackpulse_profile *p, int format, const stackpulse_export_opts *opts,
                      stackpulse_write_fn fn, void *ctx)
{
	if (!p || !fn)
		return sp_error(-EINVAL, "export: profile or write function is NULL");
	stackpulse_export_opts o = STACKPULSE_EXPORT_OPTS;
	if (opts) {
		if (opts->sz < sizeof(size_t))
			return sp_error(-EINVAL, "export: opts->sz %zu too small", opts->sz);
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
		o.sz = sizeof(o);
	}
	if (o.flags & ~0xfu)
		return sp_error(-EINVAL, "export: unknown flags 0x%x", o.flags);
	sp_out *out = sp_malloc(sizeof(*out));
	if (!out)
		return sp_error(-ENOMEM, "export buffer");
	out->fn = fn;
	out->ctx = ctx;
	out->err = 0;
	out->len = 0;
	out->total = 0;
	out->limit = format == STACKPULSE_EXPORT_SVG ? SP_SVG_MAX_BYTES : SP_EXPORT_MAX_BYTES;
	int rc;
	switch (format) {
	case STACKPULSE_EXPORT_FOLDED: rc = sp_export_folded(p, &o, out); break;
	case STACKPULSE_EXPORT_PPROF: rc = sp_export_pprof(p, &o, out); break;
	case STACKPULSE_EXPORT_FIREFOX: rc = sp_export_firefox(p, &o, out); break;
	case STACKPULSE_EXPORT_SVG: rc = sp_export_svg(p, &o, out); break;
	default: rc = sp_error(-EINVAL, "export: unknown format %d", format); break;
	}
	if (!rc)
		rc = out->err;
	if (!rc)
		rc = sp_out_flush(out);
	sp_free(out);
	return rc;
}

static int fd_write(void *ctx, const void *data, size_t len)
{
	int fd = *(int *)ctx;
	const char *s = data;
	while (len > 0) {
		ssize_t n = write(fd, s, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

int stackpulse_export_to_path(const stackpulse_profile *p, int format,
                              const stackpulse_export_opts *opts, const char *path)
{
	if (!path || !p)
		return sp_error(-EINVAL, "export: path or profile is NULL");
	if (format < STACKPULSE_EXPORT_FOLDED || format > STACKPULSE_EXPORT_SVG)
		return sp_error(-EINVAL, "export: unknown format %d", format);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = -errno;
		return sp_error(e, "export: cannot create %s: %s", path, strerror(-e));
	}
	int rc = stackpulse_export(p, format, opts, fd_write, &fd);
	if (rc && rc != -EINVAL)
		sp_error_context(rc, "export to %s", path);
	if (close(fd) != 0 && !rc) {
		rc = -errno;
		sp_error(rc, "export: closing %s: %s", path, strerror(-rc));
	}
	if (rc)
		unlink(path); /* Never leave a half-written export behind. */
	return rc;
}
