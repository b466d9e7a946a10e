/* OS file access for untrusted paths and for spool output. Everything that
 * touches a descriptor lives here, so the pure layers stay free of syscalls. */
#ifndef SP_IO_FILE_H
#define SP_IO_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Largest file sp_file_open_regular accepts when @p max_size is 0. */
#define SP_FILE_SIZE_DEFAULT_MAX (1ull << 40)

enum sp_file_open_flag {
	SP_FILE_NOFOLLOW = 1u << 0, /* Refuse a symlink as the last component. */
};

/* Opens @p path read-only as a regular file (O_CLOEXEC, O_NONBLOCK so a FIFO
 * or device cannot block the open; the flag is cleared afterwards). Checks
 * with fstat that it is a regular file of at most @p max_size bytes (0: the
 * default cap). Returns 0 with *fd and *size set, or -errno / ELIMIT. */
int sp_file_open_regular(const char *path, unsigned flags, uint64_t max_size, int *fd,
                         uint64_t *size);

/* Reads exactly @p len bytes at @p off, retrying short reads and EINTR.
 * A file that ends early gives STACKPULSE_ETRUNCATED. */
int sp_file_pread_full(int fd, uint64_t off, void *buf, size_t len);

/* Reads a whole regular file of at most @p max_size bytes into a fresh
 * allocation (sp_free it); a NUL is appended, not counted in *len. */
int sp_file_read_all(const char *path, uint64_t max_size, uint8_t **data, size_t *len);

/* An output file (spool or export), written under a temporary name and
 * renamed onto its final path by sp_file_sink_commit. Pass
 * sp_file_sink_write as a writer's sp_sink_fn and the sink as its context.
 *
 * Why: nothing at the final path is opened, truncated or written through.
 * A symlink or a hard link planted there is replaced as a directory entry
 * by the rename (the file it pointed to stays untouched), and an output
 * that fails before the commit leaves whatever was at the path as it was
 * and no file behind. */
typedef struct sp_file_sink {
	int fd;           /* Owned descriptor, -1 when closed. */
	uint64_t written; /* Bytes written. */
	int error;        /* First write error, sticky. */
	char *path;       /* Final path (owned), NULL when closed. */
	char *tmp;        /* Temporary name (owned) until committed, else NULL. */
} sp_file_sink;

/* Mode of a spool: spools hold kernel addresses, like the kallsyms cache. */
#define SP_FILE_MODE_PRIVATE 0600u
/* Mode of an export (before the umask). */
#define SP_FILE_MODE_SHARED 0644u

/* Creates a new file ".NAME.XXXXXX" in the directory of @p path (O_EXCL,
 * O_NOFOLLOW, @p mode before the umask) and checks it is a regular file
 * with one link. Refuses a @p path that is a directory (-EISDIR) or a
 * special file (-EINVAL: FIFOs, devices and sockets are not replaced). */
int sp_file_sink_open(sp_file_sink *sink, const char *path, unsigned mode);
/* Renames the temporary file onto the final path (atomically replacing
 * what is there, a symlink or hard link included). Writes may go on
 * through the same descriptor afterwards. 0 or -errno. */
int sp_file_sink_commit(sp_file_sink *sink);
/* Writes all of @p data with full-write loops: 0, or -ENOSPC, -EIO, ... */
int sp_file_sink_write(void *sink, const void *data, size_t len);
/* fsync()s the file: 0 or -errno. */
int sp_file_sink_sync(sp_file_sink *sink);
/* Closes the descriptor and unlinks the temporary file when it was never
 * committed; returns the first error seen (write or close). */
int sp_file_sink_close(sp_file_sink *sink);

#endif
