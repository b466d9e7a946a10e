/* stackpulse_spool_open: the spool decoder over a pread-based file source, or
 * over a caller's buffer. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "format/spool_reader.h"
#include "io/file.h"

struct fd_source {
	int fd;
};

static int fd_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct fd_source *f = ctx;
	return sp_file_pread_full(f->fd, off, buf, len);
}

static void fd_close(void *ctx)
{
	struct fd_source *f = ctx;
	close(f->fd);
	sp_free(f);
}

int stackpulse_spool_open(const char *path, const stackpulse_spool_open_opts *opts,
                          stackpulse_spool **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	stackpulse_spool_open_opts o = STACKPULSE_SPOOL_OPEN_OPTS;
	if (opts) {
		if (opts->sz < sizeof(size_t))
			return sp_error(-EINVAL, "spool open opts.sz is %zu", opts->sz);
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	}
	unsigned flags = o.flags;
	if (flags & ~(unsigned)STACKPULSE_SPOOL_STRICT)
		return sp_error(-EINVAL, "unknown spool open flags 0x%x", flags);
	if (!path) {
		if (!o.buf && !o.len && !opts)
			return sp_error(-EINVAL, "no path and no buffer to open");
		return sp_spool_open_memory(o.buf, o.len, flags, out);
	}
	if (o.buf)
		return sp_error(-EINVAL, "both a path (%s) and a buffer to open", path);
	int fd = -1;
	uint64_t size = 0;
	int rc = sp_file_open_regular(path, 0, 0, &fd, &size);
	if (rc)
		return rc;
	struct fd_source *f = sp_malloc(sizeof(*f));
	if (!f) {
		close(fd);
		return sp_error(-ENOMEM, "cannot allocate a file source");
	}
	f->fd = fd;
	sp_source src = { fd_read_at, fd_close, f, size };
	rc = sp_spool_open_source_ex(&src, flags, out);
	if (rc)
		return sp_error_context(rc, "%s", path);
	return 0;
}
