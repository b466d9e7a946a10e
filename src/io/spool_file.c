/* stackpulse_spool_open and _open_ex: the spool decoder over a pread-based file source. */
#include <errno.h>
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

int stackpulse_spool_open(const char *path, stackpulse_spool **out)
{
	return stackpulse_spool_open_ex(path, 0, out);
}

int stackpulse_spool_open_ex(const char *path, unsigned flags, stackpulse_spool **out)
{
	sp_error_clear();
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	if (flags & ~(unsigned)STACKPULSE_SPOOL_STRICT)
		return sp_error(-EINVAL, "unknown spool open flags 0x%x", flags);
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
