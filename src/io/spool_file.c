/* stackpulse_spool_open: the spool decoder over a pread-based file source, or
 * over a caller's buffer. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/opts.h"
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
	int orc = sp_opts_copy(&o, sizeof(o), opts, "spool_open");
	if (orc)
		return orc;
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

/* ------------------------------------------------------------------ */
/* Tailing a spool that a recorder is still writing. */

struct stackpulse_spool_tail {
	stackpulse_spool *spool;
	int fd; /* Owned by the spool's source; used here for size and lock. */
};

void stackpulse_spool_tail_opts_init(stackpulse_spool_tail_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_SPOOL_TAIL_OPTS;
}

int stackpulse_spool_tail_open(const char *path, const stackpulse_spool_tail_opts *opts,
                               stackpulse_spool_tail **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	if (!path)
		return sp_error(-EINVAL, "no spool path to tail");
	stackpulse_spool_tail_opts o = STACKPULSE_SPOOL_TAIL_OPTS;
	int orc = sp_opts_copy(&o, sizeof(o), opts, "spool_tail_open");
	if (orc)
		return orc;
	if (o.flags & ~(unsigned)STACKPULSE_SPOOL_STRICT)
		return sp_error(-EINVAL, "unknown spool tail flags 0x%x", o.flags);
	stackpulse_spool_tail *t = sp_calloc(1, sizeof(*t));
	if (!t)
		return sp_error(-ENOMEM, "cannot allocate a spool tail");
	int fd = -1;
	uint64_t size = 0;
	int rc = sp_file_open_regular(path, 0, 0, &fd, &size);
	if (rc) {
		sp_free(t);
		return rc;
	}
	struct fd_source *f = sp_malloc(sizeof(*f));
	if (!f) {
		close(fd);
		sp_free(t);
		return sp_error(-ENOMEM, "cannot allocate a file source");
	}
	f->fd = fd;
	/* Size 0: the first poll sets the size it reads up to. */
	sp_source src = { fd_read_at, fd_close, f, 0 };
	if ((rc = sp_spool_tail_new(&src, o.flags, &t->spool))) {
		sp_free(t);
		return sp_error_context(rc, "%s", path);
	}
	t->fd = fd;
	*out = t;
	return 0;
}

int stackpulse_spool_tail_poll(stackpulse_spool_tail *t, stackpulse_sample_fn fn, void *ctx,
                               enum stackpulse_tail_state *state)
{
	SP_API_ENTRY();
	enum stackpulse_tail_state st_dummy;
	if (!state)
		state = &st_dummy;
	if (!t)
		return sp_error(-EINVAL, "no spool tail");
	/* The lock first, the size second: when the writer was already gone,
	 * the size is the last one. */
	int alive = sp_file_writer_alive(t->fd);
	if (alive < 0)
		return sp_error(alive, "flock on the spool: %s", stackpulse_strerror(alive));
	struct stat st;
	if (fstat(t->fd, &st) != 0) {
		int e = -errno;
		return sp_error(e, "fstat on the spool: %s", stackpulse_strerror(e));
	}
	return sp_spool_tail_step(t->spool, (uint64_t)st.st_size, !alive, fn, ctx, state);
}

const stackpulse_spool *stackpulse_spool_tail_spool(const stackpulse_spool_tail *t)
{
	SP_API_ENTRY();
	return t ? t->spool : NULL;
}

void stackpulse_spool_tail_close(stackpulse_spool_tail *t)
{
	SP_API_ENTRY();
	if (!t)
		return;
	stackpulse_spool_close(t->spool);
	sp_free(t);
}
