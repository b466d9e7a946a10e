/* ELF build-id notes, read with pread and checked against the file size.
 * Only program headers are used (PT_NOTE), which is what the loader maps. */
#include "record/build_id.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"

#define MAX_PHDRS      512  /* More program headers than any sane binary. */
#define MAX_NOTE_BYTES 4096 /* Note segments scanned per file. */

typedef struct elf_in {
	int fd;
	uint64_t size;
	int is64;
	int swap; /* File endianness differs from ours. */
} elf_in;

static uint32_t rd32(const elf_in *e, const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return e->swap ? __builtin_bswap32(v) : v;
}

static uint64_t rd64(const elf_in *e, const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return e->swap ? __builtin_bswap64(v) : v;
}

static uint16_t rd16(const elf_in *e, const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return e->swap ? (uint16_t)__builtin_bswap16(v) : v;
}

static int read_at(const elf_in *e, uint64_t off, void *buf, size_t n)
{
	if (off > e->size || n > e->size - off)
		return sp_error(STACKPULSE_EFORMAT, "ELF: range %llu+%zu outside the file",
		                (unsigned long long)off, n);
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(e->fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : sp_error(STACKPULSE_ETRUNCATED, "ELF: short read");
		done += (size_t)r;
	}
	return 0;
}

/* Scans one note area for NT_GNU_BUILD_ID. */
static int scan_notes(const elf_in *e, const uint8_t *p, size_t n, uint8_t *out, uint32_t *len)
{
	size_t pos = 0;
	while (n - pos >= 12) {
		uint32_t namesz = rd32(e, p + pos), descsz = rd32(e, p + pos + 4);
		uint32_t type = rd32(e, p + pos + 8);
		pos += 12;
		size_t name_al = ((size_t)namesz + 3) & ~(size_t)3;
		size_t desc_al = ((size_t)descsz + 3) & ~(size_t)3;
		if (name_al > n - pos || desc_al > n - pos - name_al)
			break; /* Note runs past its segment. */
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + pos, "GNU", 4) == 0) {
			if (descsz == 0 || descsz > SP_BUILD_ID_MAX)
				return sp_error(STACKPULSE_EFORMAT, "ELF: build-id of %u bytes",
				                descsz);
			memcpy(out, p + pos + name_al, descsz);
			*len = descsz;
			return 0;
		}
		pos += name_al + desc_al;
	}
	return STACKPULSE_ENOTFOUND;
}

int sp_build_id_read_fd(int fd, uint8_t out[SP_BUILD_ID_MAX], uint32_t *len)
{
	struct stat st;
	*len = 0;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return sp_error(STACKPULSE_EFORMAT, "not a regular file");
	elf_in e = { fd, (uint64_t)st.st_size, 0, 0 };
	uint8_t eh[64];
	if (e.size < 52 || read_at(&e, 0, eh, e.size < 64 ? 52 : 64) != 0)
		return sp_error(STACKPULSE_EFORMAT, "ELF: file too small");
	if (memcmp(eh, ELFMAG, SELFMAG) != 0)
		return sp_error(STACKPULSE_EFORMAT, "not an ELF file");
	if (eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64)
		return sp_error(STACKPULSE_EFORMAT, "ELF: bad class %u", eh[EI_CLASS]);
	e.is64 = eh[EI_CLASS] == ELFCLASS64;
	int little = eh[EI_DATA] == ELFDATA2LSB;
	if (!little && eh[EI_DATA] != ELFDATA2MSB)
		return sp_error(STACKPULSE_EFORMAT, "ELF: bad data encoding");
	e.swap = little != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
	if (e.is64 && e.size < 64)
		return sp_error(STACKPULSE_EFORMAT, "ELF: file too small");
	uint64_t phoff = e.is64 ? rd64(&e, eh + 32) : rd32(&e, eh + 28);
	uint16_t phentsize = rd16(&e, eh + (e.is64 ? 54 : 42));
	uint16_t phnum = rd16(&e, eh + (e.is64 ? 56 : 44));
	size_t want = e.is64 ? 56 : 32;
	if (phnum == 0)
		return STACKPULSE_ENOTFOUND;
	if (phentsize < want || phnum > MAX_PHDRS)
		return sp_error(STACKPULSE_EFORMAT, "ELF: bad program header table");
	uint8_t ph[64];
	uint8_t *notes = NULL;
	int rc = STACKPULSE_ENOTFOUND;
	for (uint16_t i = 0; i < phnum; i++) {
		int r = read_at(&e, phoff + (uint64_t)i * phentsize, ph, want);
		if (r) {
			rc = r;
			break;
		}
		if (rd32(&e, ph) != PT_NOTE)
			continue;
		uint64_t off = e.is64 ? rd64(&e, ph + 8) : rd32(&e, ph + 4);
		uint64_t sz = e.is64 ? rd64(&e, ph + 32) : rd32(&e, ph + 16);
		if (sz > MAX_NOTE_BYTES)
			sz = MAX_NOTE_BYTES; /* The build-id note is early; cap the read. */
		if (sz < 12)
			continue;
		if (!notes && !(notes = sp_malloc(MAX_NOTE_BYTES)))
			return -ENOMEM;
		r = read_at(&e, off, notes, (size_t)sz);
		if (r) {
			rc = r;
			continue;
		}
		rc = scan_notes(&e, notes, (size_t)sz, out, len);
		if (rc != STACKPULSE_ENOTFOUND)
			break;
	}
	sp_free(notes);
	return rc;
}

int sp_build_id_for_mapping(pid_t pid, uint64_t start, uint64_t end, const char *path,
                            uint8_t out[SP_BUILD_ID_MAX], uint32_t *len)
{
	char p[4200];
	*len = 0;
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid, (unsigned long long)start,
	         (unsigned long long)end);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && path && path[0] == '/') {
		int n = snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, path);
		if (n > 0 && (size_t)n < sizeof(p))
			fd = open(p, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	int rc = sp_build_id_read_fd(fd, out, len);
	close(fd);
	return rc;
}
