#include "dbgcache.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/elf.h"
#include "io/file.h"
#include "symbolize/cacheio.h"
#include "symbolize/cachetrim.h"

static int copy_path(char *buf, size_t cap, const char *dir, const uint8_t *bid, uint32_t bid_len)
{
	char hex[129];
	if (!dir || !*dir || bid_len < 2 || bid_len > 64)
		return -1;
	sp_hex(bid, bid_len, hex);
	int n = snprintf(buf, cap, "%s/%s.debug", dir, hex);
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Regular file, ELF, with exactly @p bid. */
static int has_build_id(int fd, uint64_t size, const uint8_t *bid, uint32_t bid_len)
{
	sp_elf_info info;
	return sp_elf_read_info(fd, size, &info) == 0 && info.build_id_len == bid_len &&
	       memcmp(info.build_id, bid, bid_len) == 0;
}

int sp_dbgcache_find(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len, char **path)
{
	char p[4200];
	*path = NULL;
	if (copy_path(p, sizeof(p), cfg->cache_dir, bid, bid_len) != 0)
		return -1;
	/* Only from a private cache directory, through its descriptor. */
	int dfd = sp_cacheio_dir_open(cfg->cache_dir, 0);
	if (dfd < 0)
		return -1;
	uint64_t size;
	int fd = -1;
	int rc = sp_file_open_at(dfd, strrchr(p, '/') + 1, SP_FILE_NOFOLLOW, SP_ELF_MAX_FILE_SIZE,
	                         NULL, &fd, &size);
	close(dfd);
	if (rc)
		return -1;
	if (!has_build_id(fd, size, bid, bid_len) || !(*path = strdup(p))) {
		close(fd);
		return -1;
	}
	if (cfg->counters)
		cfg->counters->debug_files++;
	sp_cache_touch(fd);
	return fd;
}

static int copy_bytes(int from, int to, uint64_t size)
{
	static const size_t chunk = 1u << 20;
	uint8_t *buf = sp_malloc(chunk);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t off = 0; off < size && !rc;) {
		size_t want = size - off < chunk ? (size_t)(size - off) : chunk;
		ssize_t n = pread(from, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = -EIO;
			break;
		}
		for (ssize_t done = 0; done < n && !rc;) {
			ssize_t w = write(to, buf + done, (size_t)(n - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				rc = -EIO;
			else
				done += w;
		}
		off += (uint64_t)n;
	}
	sp_free(buf);
	return rc;
}

/* Inflates every SHF_COMPRESSED section of the ELF file open on @p fd
 * (read-write) in place. Returns 0, or -1 when there was nothing to do, it
 * would grow past the cap, or libelf failed. */
static int inflate_in_place(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_RDWR, NULL);
	if (!e)
		return -1;
	int rc = -1, any = 0;
	uint64_t total = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			goto out;
		if (!(sh.sh_flags & SHF_COMPRESSED)) {
			total += sh.sh_type == SHT_NOBITS ? 0 : sh.sh_size;
			continue;
		}
		GElf_Chdr ch;
		if (!gelf_getchdr(scn, &ch))
			goto out;
		total += ch.ch_size;
		any = 1;
	}
	if (!any || total > SP_DBGCACHE_MAX_FILE)
		goto out;
	scn = NULL;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			goto out;
		if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			goto out;
	}
	if (elf_update(e, ELF_C_WRITE) < 0)
		goto out;
	rc = 0;
out:
	elf_end(e);
	return rc;
}

void sp_dbgcache_store(const sp_dbg_config *cfg, const uint8_t *bid, uint32_t bid_len, int fd)
{
	static _Atomic unsigned counter;
	char path[4200], tmp[4300];
	struct stat st;
	if (copy_path(path, sizeof(path), cfg->cache_dir, bid, bid_len) != 0 ||
	    fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > SP_DBGCACHE_MAX_FILE)
		return;
	const char *name = strrchr(path, '/') + 1;
	int dfd = sp_cacheio_dir_open(cfg->cache_dir, 1);
	if (dfd < 0)
		return;
	if (faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		close(dfd);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%u", name, (long)getpid(), counter++);
	int out = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (out < 0) {
		close(dfd);
		return;
	}
	elf_version(EV_CURRENT);
	int ok = copy_bytes(fd, out, (uint64_t)st.st_size) == 0 && inflate_in_place(out) == 0;
	struct stat done;
	/* Trust the copy only once it reads back with the same build-id. */
	ok = ok && fstat(out, &done) == 0 && done.st_size > 0 &&
	     has_build_id(out, (uint64_t)done.st_size, bid, bid_len);
	if (close(out) != 0)
		ok = 0;
	if (!ok || renameat(dfd, tmp, dfd, name) != 0)
		unlinkat(dfd, tmp, 0);
	else
		(void)sp_cache_trim_at(dfd, name, NULL, sp_cache_max_bytes());
	close(dfd);
}
