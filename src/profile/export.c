/* Exporter entry points, the buffered output and text escaping. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/opts.h"
#include "io/file.h"
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

int sp_export_check_labels(const char *const *labels, size_t n)
{
	if (n && !labels)
		return sp_error(-EINVAL, "export: %zu labels but no label array", n);
	for (size_t i = 0; i < n; i++) {
		const char *eq = labels[i] ? strchr(labels[i], '=') : NULL;
		if (!eq || eq == labels[i])
			return sp_error(-EINVAL, "label '%s' is not key=value",
			                labels[i] ? labels[i] : "(null)");
		if ((size_t)(eq - labels[i]) > 255)
			return sp_error(-EINVAL, "label key of %zu bytes is too long",
			                (size_t)(eq - labels[i]));
	}
	return 0;
}

void stackpulse_export_opts_init(stackpulse_export_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_EXPORT_OPTS;
}

/* Exports @p p, with Firefox samples from @p st when not NULL. */
static int export_with(const stackpulse_profile *p, sp_sample_stream *st,
                       enum stackpulse_export_format format, const stackpulse_export_opts *opts,
                       stackpulse_write_fn fn, void *ctx)
{
	if (!p || !fn)
		return sp_error(-EINVAL, "export: profile or write function is NULL");
	stackpulse_export_opts o = STACKPULSE_EXPORT_OPTS;
	int rc = sp_opts_copy(&o, sizeof(o), opts, "export");
	if (rc)
		return rc;
	if (o.flags & ~0xfu)
		return sp_error(-EINVAL, "export: unknown flags 0x%x", o.flags);
	rc = sp_export_check_labels(o.labels, o.nlabels);
	if (rc)
		return rc;
	sp_out *out = sp_malloc(sizeof(*out));
	if (!out)
		return sp_error(-ENOMEM, "export buffer");
	out->fn = fn;
	out->ctx = ctx;
	out->err = 0;
	out->len = 0;
	out->total = 0;
	out->limit = format == STACKPULSE_EXPORT_SVG ? SP_SVG_MAX_BYTES : SP_EXPORT_MAX_BYTES;
	if (o.max_bytes && o.max_bytes < out->limit)
		out->limit = o.max_bytes;
	switch (format) {
	case STACKPULSE_EXPORT_FOLDED: rc = sp_export_folded(p, &o, out); break;
	case STACKPULSE_EXPORT_PPROF: rc = sp_export_pprof(p, &o, out); break;
	case STACKPULSE_EXPORT_FIREFOX: rc = sp_export_firefox_stream(p, st, &o, out); break;
	case STACKPULSE_EXPORT_SVG: rc = sp_export_svg(p, &o, out); break;
	case STACKPULSE_EXPORT_OTLP: rc = sp_export_otlp(p, &o, out); break;
	case STACKPULSE_EXPORT_SYSCAP: rc = sp_export_syscap(p, &o, out); break;
	default: rc = sp_error(-EINVAL, "export: unknown format %d", (int)format); break;
	}
	if (!rc)
		rc = out->err;
	if (!rc)
		rc = sp_out_flush(out);
	sp_free(out);
	return rc;
}

int stackpulse_export(const stackpulse_profile *p, enum stackpulse_export_format format,
                      const stackpulse_export_opts *opts, stackpulse_write_fn fn, void *ctx)
{
	SP_API_ENTRY();
	return export_with(p, NULL, format, opts, fn, ctx);
}

int stackpulse_export_spool(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                            const stackpulse_profile_opts *popts,
                            enum stackpulse_export_format format,
                            const stackpulse_export_opts *opts, stackpulse_write_fn fn, void *ctx)
{
	SP_API_ENTRY();
	if (!spool || !fn)
		return sp_error(-EINVAL, "export: spool or write function is NULL");
	if ((int)format < STACKPULSE_EXPORT_FOLDED || (int)format > STACKPULSE_EXPORT_SYSCAP)
		return sp_error(-EINVAL, "export: unknown format %d", (int)format);
	stackpulse_profile_opts po = STACKPULSE_PROFILE_OPTS;
	int rc = sp_opts_copy(&po, sizeof(po), popts, "profile_build");
	if (rc)
		return rc;
	stackpulse_profile *p = NULL;
	sp_sample_stream *st = NULL;
	if (format == STACKPULSE_EXPORT_FIREFOX) {
		/* One entry per sample, whatever merge_ns says. */
		rc = sp_profile_build_stream(spool, sym, &po, &p, &st);
		/* Streaming reads the spool once per thread: up to
		 * SP_FIREFOX_IN_MEMORY samples, one more pass building the
		 * unmerged profile costs less, in bounded memory too. */
		if (!rc && p->kept[0] + p->kept[1] <= SP_FIREFOX_IN_MEMORY) {
			sp_sample_stream_free(st);
			stackpulse_profile_free(p);
			st = NULL;
			p = NULL;
			po.merge_ns = 0;
			rc = stackpulse_profile_build(spool, sym, &po, &p);
		}
	} else {
		/* Sysprof writes every sample: merge only when asked to. */
		if (format != STACKPULSE_EXPORT_SYSCAP && !po.merge_ns)
			po.merge_ns = STACKPULSE_MERGE_ALL;
		rc = stackpulse_profile_build(spool, sym, &po, &p);
	}
	if (!rc)
		rc = export_with(p, st, format, opts, fn, ctx);
	sp_sample_stream_free(st);
	stackpulse_profile_free(p);
	return rc;
}

/* What a file export writes: a profile, or a spool's. */
typedef struct path_job {
	const stackpulse_profile *p;
	const stackpulse_spool *spool;
	stackpulse_symbolizer *sym;
	const stackpulse_profile_opts *popts;
} path_job;

static int export_path(const path_job *job, enum stackpulse_export_format format,
                       const stackpulse_export_opts *opts, const char *path)
{
	if (!path || (!job->p && !job->spool))
		return sp_error(-EINVAL, "export: path or profile is NULL");
	if ((int)format < STACKPULSE_EXPORT_FOLDED || (int)format > STACKPULSE_EXPORT_SYSCAP)
		return sp_error(-EINVAL, "export: unknown format %d", (int)format);
	/* Written beside @p path and renamed onto it when complete: a symlink
	 * or hard link planted at @p path is replaced, never written through,
	 * and a failed export leaves the old file as it was. */
	sp_file_sink sink;
	int rc = sp_file_sink_open(&sink, path, SP_FILE_MODE_SHARED | SP_FILE_DEVICE_OK);
	if (rc)
		return sp_error_context(rc, "export: cannot create %s", path);
	if (job->p)
		rc = export_with(job->p, NULL, format, opts, sp_file_sink_write, &sink);
	else
		rc = stackpulse_export_spool(job->spool, job->sym, job->popts, format, opts,
		                             sp_file_sink_write, &sink);
	if (rc && rc != -EINVAL)
		sp_error_context(rc, "export to %s", path);
	if (!rc)
		rc = sp_file_sink_commit(&sink);
	int rc2 = sp_file_sink_close(&sink);
	if (!rc && rc2)
		rc = sp_error_context(rc2, "export: closing %s", path);
	return rc;
}

int stackpulse_export_to_path(const stackpulse_profile *p, enum stackpulse_export_format format,
                              const stackpulse_export_opts *opts, const char *path)
{
	SP_API_ENTRY();
	path_job job = { p, NULL, NULL, NULL };
	if (!p)
		return sp_error(-EINVAL, "export: path or profile is NULL");
	return export_path(&job, format, opts, path);
}

int stackpulse_export_spool_to_path(const stackpulse_spool *spool, stackpulse_symbolizer *sym,
                                    const stackpulse_profile_opts *popts,
                                    enum stackpulse_export_format format,
                                    const stackpulse_export_opts *opts, const char *path)
{
	SP_API_ENTRY();
	path_job job = { NULL, spool, sym, popts };
	if (!spool)
		return sp_error(-EINVAL, "export: path or spool is NULL");
	return export_path(&job, format, opts, path);
}
