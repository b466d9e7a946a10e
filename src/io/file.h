/* OS file access for untrusted paths and for spool output. Everything that
 * touches a descriptor lives here, so the pure layers stay free of syscalls. */
#ifndef SP_IO_FILE_H
#define SP_IO_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Largest file sp_file_open_regular accepts when @p max_size is 0. */
#define SP_FILE_SIZE_DEFAULT_MAX (1ull << 40)

enum sp_file_open_flag {
	SP_FILE_NOFOLLOW = 1u << 0, /* Refuse a symlink as the last component. */
	/* Resolve the path with the directory as its root: absolute symlinks
	 * and ".." stay inside it, magic links (/proc/PID/...) are not
	 * followed. openat2 RESOLVE_IN_ROOT; without openat2 (before Linux
	 * 5.6) a walk of the components that resolves symlinks by their text. */
	SP_FILE_IN_ROOT = 1u << 1,
	/* With SP_FILE_IN_ROOT: take the walk even where openat2 exists (the
	 * tests check that both resolve alike). */
	SP_FILE_WALK = 1u << 2,
};

/* The identity a file must have; a zero field is not checked. */
typedef struct sp_file_id {
	uint64_t dev;
	uint64_t ino;
} sp_file_id;

/* The one open for paths somebody else chose (a target, a spool): opens
 * @p path (relative to @p dirfd, AT_FDCWD for none) read-only and
 * O_CLOEXEC as a regular file of at most @p max_size bytes (0: the default
 * cap). The path is first opened O_PATH, so a FIFO or a device is never
 * really opened (no blocking, no side effects); the file is then reopened
 * through that descriptor and its device and inode checked again, and
 * against @p want when given. The descriptor is blocking as usual. Returns
 * 0 with *fd and *size set, or -errno: -EISDIR for a directory, -EINVAL
 * for any other non-regular file, -ESTALE when the identity differs,
 * STACKPULSE_ELIMIT when too big. */
int sp_file_open_at(int dirfd, const char *path, unsigned flags, uint64_t max_size,
                    const sp_file_id *want, int *fd, uint64_t *size);

/* sp_file_open_at(AT_FDCWD, path, flags, max_size, NULL, ...). */
int sp_file_open_regular(const char *path, unsigned flags, uint64_t max_size, int *fd,
                         uint64_t *size);

/* The file process @p pid maps at [start, end) from @p path, as that
 * process sees it: /proc/PID/map_files/START-END (the mapped file itself;
 * skipped when end <= start), else @p path resolved inside /proc/PID/root
 * (SP_FILE_IN_ROOT, so the target's symlinks never reach our root; not for
 * a path the kernel marked " (deleted)"). Never a path in our own root.
 * @p want, when given, is the identity the mapping reported (its inode).
 * Same returns as sp_file_open_at. */
int sp_file_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path,
                        const sp_file_id *want, uint64_t max_size, int *fd, uint64_t *size);

/* sp_file_open_at of @p path resolved inside the root directory of process
 * @p pid (/proc/PID/root, SP_FILE_IN_ROOT added to @p flags): the path the
 * target would open, never one in our own root. -ESRCH when the root cannot
 * be opened because the process is gone (or a zombie); else as
 * sp_file_open_at. */
int sp_file_open_in_root(pid_t pid, const char *path, unsigned flags, uint64_t max_size,
                         const sp_file_id *want, int *fd, uint64_t *size);

/* True when process @p pid resolves paths from our own root directory (same
 * mount namespace view), so its files are the ones our paths name. */
int sp_file_same_root(pid_t pid);

/* True when the file open on @p fd may feed a cache shared with other
 * recordings: owned by root or by our effective uid, and not writable by
 * group or others (nobody else can have changed what it says). */
int sp_file_trusted(int fd);

/* Called with each line of a file, newline removed and NUL-ended. */
typedef int (*sp_file_line_fn)(void *ctx, char *line, size_t len);

/* Reads @p path (O_NONBLOCK, any file type: /proc files are not regular in
 * size) line by line through a bounded buffer: @p fn gets every line
 * shorter than @p line_max bytes, longer lines are skipped but counted in
 * *lines (optional). A nonzero return of @p fn stops the walk and is
 * returned; else 0 or -errno (open and read errors, without a message). */
int sp_file_for_each_line(const char *path, size_t line_max, sp_file_line_fn fn, void *ctx,
                          uint64_t *lines);

/* Reads exactly @p len bytes at @p off, retrying short reads and EINTR.
 * A file that ends early gives STACKPULSE_ETRUNCATED. */
int sp_file_pread_full(int fd, uint64_t off, void *buf, size_t len);

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
/* Or'ed into the mode: an existing character device or FIFO at the path
 * (also behind a symlink: `--svg /dev/stdout`) is written in place, as a
 * shell redirection would, instead of being refused. Block devices and
 * sockets are still refused. For exports, never for spools. */
#define SP_FILE_DEVICE_OK 0x10000u

/* Creates a new file ".NAME.<random suffix>" in the directory of @p path (O_EXCL,
 * O_NOFOLLOW, @p mode before the umask) and checks it is a regular file
 * with one link, and holds flock(LOCK_EX) on it until it is closed (see
 * sp_file_writer_alive). Refuses a @p path that is a directory (-EISDIR) or a
 * special file (-EINVAL: FIFOs, devices and sockets are not replaced),
 * unless SP_FILE_DEVICE_OK allows writing into a device or FIFO. */
int sp_file_sink_open(sp_file_sink *sink, const char *path, unsigned mode);
/* Renames the temporary file onto the final path (atomically replacing
 * what is there, a symlink or hard link included). Writes may go on
 * through the same descriptor afterwards. 0 or -errno. */
int sp_file_sink_commit(sp_file_sink *sink);
/* Writes all of @p data with full-write loops: 0, or -ENOSPC, -EIO, ... */
int sp_file_sink_write(void *sink, const void *data, size_t len);
/* fsync()s the file: 0 or -errno. */
int sp_file_sink_sync(sp_file_sink *sink);
/* Whether a sink (of this or another process) still has the file open on
 * @p fd open for writing: sp_file_sink_open takes flock(LOCK_EX) on the
 * files it creates, held until the writer closes them or dies. 1 when it
 * is held, 0 when not, or -errno. */
int sp_file_writer_alive(int fd);
/* Closes the descriptor and unlinks the temporary file when it was never
 * committed; returns the first error seen (write or close). */
int sp_file_sink_close(sp_file_sink *sink);

#define SP_PROC_MAX_TASKS 65536u /* Threads listed per process. */

/* The thread ids of @p pid from /proc/PID/task (sorted ascending): -ESRCH
 * when there are none, STACKPULSE_ELIMIT past SP_PROC_MAX_TASKS. Caller
 * frees *tids. */
int sp_proc_tasks(pid_t pid, pid_t **tids, size_t *count);

#endif
