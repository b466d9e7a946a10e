/* Self-contained spools: every distinct native frame is remembered as it
 * is interned, and at finish the symbolizer embeds one symbol table per
 * module those frames hit, so the spool symbolizes on another machine
 * without the binaries.
 *
 * A module's file may not be reachable by its recorded path at finish: it
 * lives in another mount namespace (a container), or it was deleted or
 * replaced. So the first time a module is sampled, while its process is
 * alive, the file is opened as that process sees it (/proc/PID/map_files,
 * /proc/PID/root/PATH, /proc/PID/exe) and, once its build-id matches the
 * recorded one, the descriptor is kept until finish unless the recorded
 * path reaches the very same file (descriptors stay flat for ordinary
 * recordings). At finish, a module whose path no longer holds its build-id
 * is opened through a live process again; a module of another mount
 * namespace is never opened by its path in ours, and its answers stay out
 * of the shared symbol cache (see docs/reliability.md, threat model). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/elf.h"
#include "io/file.h"
#include "io/vdso.h"
#include "format/spool_format.h"
#include "record/proc_scan.h"
#include "record/recorder.h"
#include "symbolize/cacheio.h"
#include "symbolize/symbolize.h"

/* Descriptors held per recording; later modules fall back to their path. */
#define SP_EMBED_MAX_FDS 128
/* Live processes tried per module. */
#define SP_EMBED_MAX_PROBES 8

enum {
	GRAB_UNTRIED = 0,
	GRAB_DONE = 1,
	GRAB_OVER_CAP = 2
};

struct sp_embed_file {
	int state;
	int fd;      /* -1 when none is held. */
	int foreign; /* Mapped in another mount namespace than ours. */
};

struct sp_native_frame {
	uint32_t module;
	uint64_t offset;
};

static const char deleted_mark[] = " (deleted)";

/* The recorded path without the kernel's " (deleted)" mark, in @p buf. */
static const char *trim_deleted(const char *path, char *buf, size_t cap)
{
	size_t n = strlen(path), k = sizeof(deleted_mark) - 1;
	if (n > k && strcmp(path + n - k, deleted_mark) == 0 && n - k < cap) {
		memcpy(buf, path, n - k);
		buf[n - k] = '\0';
		return buf;
	}
	return path;
}

/* Keeps @p fd (from the safe open: a regular file) when it carries the
 * recorded build-id. A module recorded without a build-id is trusted only
 * through map_files, which is the mapped file itself. */
static int verify(int rc, int fd, const uint8_t *bid, uint32_t bid_len, int is_mapped_file)
{
	if (rc || fd < 0)
		return -1;
	if (bid_len) {
		uint8_t got[SP_BUILD_ID_MAX];
		uint32_t got_len = 0;
		if (sp_elf_build_id_fd(fd, got, &got_len) != 0 || got_len != bid_len ||
		    memcmp(got, bid, bid_len) != 0)
			goto reject;
	} else if (!is_mapped_file) {
		goto reject;
	}
	return fd;
reject:
	close(fd);
	return -1;
}

typedef struct map_find {
	const char *path;
	uint64_t start, end;
	int found;
} map_find;

static int find_map(void *ctx, const sp_proc_map *m)
{
	map_find *f = ctx;
	if (strcmp(m->path, f->path) != 0)
		return 0;
	f->start = m->start;
	f->end = m->end;
	f->found = 1;
	return 1;
}

/* Opens the file @p pid maps at [start, end) as @p path, as that process
 * sees it, through the one safe open (never blocking, regular files only,
 * symlinks resolved inside the target's root). Returns a verified fd or -1. */
static int open_as_seen_by(pid_t pid, uint64_t start, uint64_t end, const char *path,
                           const uint8_t *bid, uint32_t bid_len)
{
	char p[64], trimmed[4096];
	int fd = -1;
	uint64_t size;
	int rc = sp_file_open_mapped(pid, start, end, NULL, NULL, SP_ELF_MAX_FILE_SIZE, &fd, &size);
	if ((fd = verify(rc, fd, bid, bid_len, 1)) >= 0)
		return fd;
	/* map_files needs CAP_SYS_ADMIN (or CHECKPOINT_RESTORE); the root link
	 * reaches another mount namespace without it, exe a deleted program. */
	const char *live = trim_deleted(path, trimmed, sizeof(trimmed));
	rc = sp_file_open_mapped(pid, 0, 0, live, NULL, SP_ELF_MAX_FILE_SIZE, &fd, &size);
	if ((fd = verify(rc, fd, bid, bid_len, 0)) >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
	rc = sp_file_open_at(AT_FDCWD, p, 0, SP_ELF_MAX_FILE_SIZE, NULL, &fd, &size);
	if ((fd = verify(rc, fd, bid, bid_len, 0)) >= 0)
		return fd;
	/* Our table may hold a mapping split by a later mmap: map_files needs
	 * the exact bounds, which /proc/PID/maps has. */
	map_find f = { path, 0, 0, 0 };
	if (sp_proc_maps(pid, find_map, &f) == 1 && f.found && (f.start != start || f.end != end)) {
		rc = sp_file_open_mapped(pid, f.start, f.end, NULL, NULL, SP_ELF_MAX_FILE_SIZE, &fd,
		                         &size);
		return verify(rc, fd, bid, bid_len, 1);
	}
	return -1;
}

/* 1 when the newest live process that maps @p module sees another root
 * directory than ours (a container): its path means nothing here. */
static int module_foreign(const stackpulse_recorder *rec, uint32_t module)
{
	for (size_t i = rec->pt.nprocs; i-- > 0;) {
		const sp_process *p = rec->pt.procs[i];
		if (p->exited)
			continue;
		for (size_t j = 0; j < p->nmaps; j++)
			if (p->maps[j].module == module)
				return !sp_file_same_root(p->pid);
	}
	return 0;
}

/* Opens @p module through a live process that maps it, newest first. */
static int open_live(stackpulse_recorder *rec, uint32_t module, const char *path,
                     const uint8_t *bid, uint32_t bid_len)
{
	int probes = 0;
	for (size_t i = rec->pt.nprocs; i-- > 0 && probes < SP_EMBED_MAX_PROBES;) {
		const sp_process *p = rec->pt.procs[i];
		if (p->exited)
			continue;
		for (size_t j = 0; j < p->nmaps; j++) {
			if (p->maps[j].module != module)
				continue;
			probes++;
			int fd = open_as_seen_by(p->pid, p->maps[j].start, p->maps[j].end, path,
			                         bid, bid_len);
			if (fd >= 0)
				return fd;
			break;
		}
	}
	return -1;
}

/* On the first sample of @p module: opens its file through a live process
 * and keeps the descriptor unless the recorded path reaches the same file.
 * Failing is not an error: finish then tries the path and the processes. */
static int grab(stackpulse_recorder *rec, uint32_t module)
{
	if (module >= rec->nembed_files) {
		size_t ncap = rec->nembed_files ? rec->nembed_files : 16;
		while (ncap <= module)
			ncap *= 2;
		struct sp_embed_file *g = sp_realloc_array(rec->embed_files, ncap, sizeof(*g));
		if (!g)
			return sp_error(-ENOMEM, "cannot track %zu modules", ncap);
		for (size_t i = rec->nembed_files; i < ncap; i++) {
			g[i].state = GRAB_UNTRIED;
			g[i].fd = -1;
			g[i].foreign = 0;
		}
		rec->embed_files = g;
		rec->nembed_files = ncap;
	}
	struct sp_embed_file *ef = &rec->embed_files[module];
	if (ef->state == GRAB_DONE)
		return 0;
	ef->foreign = module_foreign(rec, module);
	if (rec->embed_fds >= SP_EMBED_MAX_FDS) {
		ef->state = GRAB_OVER_CAP;
		return 0;
	}
	ef->state = GRAB_DONE;
	const char *path;
	const uint8_t *bid;
	uint32_t bid_len;
	if (sp_ptable_module_info(&rec->pt, module, &path, &bid, &bid_len) != 0 || path[0] != '/')
		return 0;
	int fd = open_live(rec, module, path, bid, bid_len);
	struct stat here, there;
	if (fd >= 0 && !ef->foreign && stat(path, &here) == 0 && fstat(fd, &there) == 0 &&
	    here.st_dev == there.st_dev && here.st_ino == there.st_ino) {
		close(fd); /* Reachable by its path: finish opens it there. */
		fd = -1;
	}
	ef->fd = fd;
	if (fd >= 0)
		rec->embed_fds++;
	return 0;
}

/* A target's "[vdso]" is the running kernel's image, ours when the target
 * is of our architecture, which its mapping's size shows (a 32-bit
 * target's differs). A descriptor of our copy, or -1. */
static int open_vdso(const stackpulse_recorder *rec, uint32_t module)
{
	const uint8_t *img = NULL;
	size_t len = 0;
	uint64_t map_len = 0;
	if (sp_vdso_image(&img, &len, &map_len) != 0)
		return -1;
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		const sp_process *p = rec->pt.procs[i];
		for (size_t j = 0; p && j < p->nmaps; j++)
			if (p->maps[j].module == module &&
			    p->maps[j].end - p->maps[j].start != map_len)
				return -1;
	}
	int fd = sp_vdso_memfd();
	return fd >= 0 ? fd : -1;
}

/* True when @p path is a regular file carrying @p bid (any file when the
 * module has no build-id). */
static int path_still_good(const char *path, const uint8_t *bid, uint32_t bid_len)
{
	int fd = -1;
	uint64_t size;
	int rc = sp_file_open_regular(path, 0, SP_ELF_MAX_FILE_SIZE, &fd, &size);
	return verify(rc, fd, bid, bid_len, bid_len == 0) >= 0 && close(fd) == 0;
}

void sp_recorder_embed_release(stackpulse_recorder *rec)
{
	for (size_t i = 0; i < rec->nembed_files; i++)
		if (rec->embed_files[i].fd >= 0)
			close(rec->embed_files[i].fd);
	sp_free(rec->embed_files);
	rec->embed_files = NULL;
	rec->nembed_files = 0;
	rec->embed_fds = 0;
}

int sp_recorder_frame(stackpulse_recorder *rec, const struct stackpulse_raw_frame *f, uint32_t *id)
{
	int rc = sp_writer_frame(rec->w, f, id);
	if (rc)
		return rc;
	/* Ids are dense, so an id at the high-water mark is a new frame. */
	if (*id < rec->frames_seen)
		return 0;
	rec->frames_seen = *id + 1;
	if (!rec->opts.self_contained || f->kind != STACKPULSE_FRAME_NATIVE)
		return 0;
	if (f->module >= rec->nembed_files || rec->embed_files[f->module].state == GRAB_UNTRIED) {
		rc = grab(rec, f->module);
		if (rc)
			return rc;
	}
	if (rec->nnative == rec->capnative) {
		size_t ncap = rec->capnative ? rec->capnative * 2 : 256;
		struct sp_native_frame *grown = sp_realloc_array(rec->native, ncap, sizeof(*grown));
		if (!grown)
			return sp_error(-ENOMEM, "cannot remember %zu native frames", ncap);
		rec->native = grown;
		rec->capnative = ncap;
	}
	rec->native[rec->nnative].module = f->module;
	rec->native[rec->nnative].offset = f->offset;
	rec->nnative++;
	return 0;
}

static int by_module_offset(const void *a, const void *b)
{
	const struct sp_native_frame *x = a, *y = b;
	if (x->module != y->module)
		return x->module < y->module ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

char *sp_recorder_cache_dir(const stackpulse_recorder *rec)
{
	return sp_cacheio_dir(rec->opts.cache_dir);
}

int sp_recorder_embed_symbols(stackpulse_recorder *rec)
{
	if (!rec->opts.self_contained || rec->nnative == 0)
		return 0;
	qsort(rec->native, rec->nnative, sizeof(*rec->native), by_module_offset);

	size_t nmod = 0;
	for (size_t i = 0; i < rec->nnative; i++)
		if (i == 0 || rec->native[i].module != rec->native[i - 1].module)
			nmod++;
	uint64_t *offsets = sp_calloc(rec->nnative, sizeof(*offsets));
	sp_symtab_request *reqs = sp_calloc(nmod, sizeof(*reqs));
	char *trimmed = sp_calloc(nmod, 4096);
	if (!offsets || !reqs || !trimmed) {
		sp_free(offsets);
		sp_free(reqs);
		sp_free(trimmed);
		return sp_error(-ENOMEM, "cannot plan symbol tables for %zu modules", nmod);
	}
	size_t nreq = 0;
	int rc = 0;
	for (size_t i = 0; i < rec->nnative;) {
		size_t j = i;
		uint32_t module = rec->native[i].module;
		while (j < rec->nnative && rec->native[j].module == module) {
			offsets[j] = rec->native[j].offset;
			j++;
		}
		sp_symtab_request *r = &reqs[nreq];
		/* A module the table does not know (should not happen) is left out. */
		if (sp_ptable_module_info(&rec->pt, module, &r->path, &r->build_id,
		                          &r->build_id_len) == 0) {
			r->module = module;
			r->offsets = &offsets[i];
			r->offset_count = j - i;
			/* Not held, and the path no longer has the file (deleted or
			 * replaced since, or over the cap): try the live processes. */
			/* A container's file is never looked up by its path in our root. */
			r->foreign = module < rec->nembed_files && rec->embed_files[module].foreign;
			if (module < rec->nembed_files && rec->embed_files[module].fd < 0 &&
			    r->path[0] == '/' &&
			    (r->foreign ||
			     !path_still_good(r->path, r->build_id, r->build_id_len))) {
				int fd = open_live(rec, module, r->path, r->build_id,
				                   r->build_id_len);
				rec->embed_files[module].fd = fd; /* Closed by release. */
			} else if (module < rec->nembed_files && rec->embed_files[module].fd < 0 &&
			           strcmp(r->path, "[vdso]") == 0) {
				rec->embed_files[module].fd = open_vdso(rec, module);
			}
			if (module < rec->nembed_files && rec->embed_files[module].fd >= 0) {
				r->have_fd = 1;
				r->fd = rec->embed_files[module].fd;
			}
			/* libdwfl looks for .gnu_debuglink files next to this path. */
			r->path = trim_deleted(r->path, trimmed + nreq * 4096, 4096);
			nreq++;
		}
		i = j;
	}
	char *cache_dir = rc ? NULL : sp_recorder_cache_dir(rec);
	uint32_t embedded = 0, skipped = 0;
	if (!rc)
		rc = sp_symbolize_build_symtab_cached(rec->w, reqs, nreq, NULL, cache_dir,
		                                      &embedded, &skipped, NULL);
	sp_free(cache_dir);
	sp_free(offsets);
	sp_free(reqs);
	sp_free(trimmed);
	return rc;
}
