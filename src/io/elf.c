#include "io/elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "io/file.h"

#define MAX_PHNUM      1024
#define MAX_SHNUM      8192
#define MAX_NOTE_BYTES (64u << 10)

int sp_elf_open_regular(const char *path, uint64_t *size)
{
	int fd = -1;
	int rc = sp_file_open_regular(path, 0, SP_ELF_MAX_FILE_SIZE, &fd, size);
	if (rc == -EISDIR || rc == -EINVAL)
		return sp_error(STACKPULSE_EUNSUPPORTED, "%s: not a regular file", path);
	if (rc)
		return rc;
	if (*size < 64) {
		close(fd);
		return sp_error(STACKPULSE_EFORMAT, "%s: too small for ELF", path);
	}
	return fd;
}

int sp_elf_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path, uint64_t inode,
                       uint64_t *size)
{
	int fd = -1;
	sp_file_id want = { 0, inode };
	int rc = sp_file_open_mapped(pid, start, end, path, &want, SP_ELF_MAX_FILE_SIZE, &fd, size);
	return rc ? rc : fd;
}

int sp_elf_build_id_fd(int fd, uint8_t out[64], uint32_t *len)
{
	struct stat st;
	*len = 0;
	if (fstat(fd, &st) != 0)
		return sp_error(-errno, "ELF: cannot stat");
	if (!S_ISREG(st.st_mode))
		return sp_error(STACKPULSE_EFORMAT, "not a regular file");
	sp_elf_info info;
	int rc = sp_elf_read_info(fd, (uint64_t)st.st_size, &info);
	if (rc)
		return rc;
	if (!info.build_id_len)
		return STACKPULSE_ENOTFOUND;
	memcpy(out, info.build_id, info.build_id_len);
	*len = info.build_id_len;
	return 0;
}

/* Reads exactly @p len bytes at @p off, inside a file of @p size bytes. */
static int read_at(int fd, uint64_t size, uint64_t off, void *buf, size_t len)
{
	if (off > size || len > size - off)
		return sp_error(STACKPULSE_EFORMAT, "ELF: %zu bytes at %llu past the end", len,
		                (unsigned long long)off);
	return sp_file_pread_full(fd, off, buf, len);
}

typedef struct rd {
	int be; /* Big-endian file. */
} rd;

static uint16_t g16(const rd *r, const uint8_t *p)
{
	return r->be ? (uint16_t)((p[0] << 8) | p[1]) : (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t g32(const rd *r, const uint8_t *p)
{
	if (r->be)
		return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
		       p[3];
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

static uint64_t g64(const rd *r, const uint8_t *p)
{
	uint64_t a = g32(r, p), b = g32(r, p + 4);
	return r->be ? (a << 32) | b : (b << 32) | a;
}

/* Scans a note area for NT_GNU_BUILD_ID; returns 1 when found. */
static int scan_notes(const rd *r, const uint8_t *p, size_t len, size_t align, sp_elf_info *out)
{
	size_t pos = 0;
	while (len - pos >= 12) {
		uint32_t namesz = g32(r, p + pos), descsz = g32(r, p + pos + 4);
		uint32_t type = g32(r, p + pos + 8);
		pos += 12;
		size_t nameal = ((size_t)namesz + align - 1) & ~(align - 1);
		size_t descal = ((size_t)descsz + align - 1) & ~(align - 1);
		if (namesz > len - pos || nameal > len - pos)
			return 0;
		const uint8_t *name = p + pos;
		pos += nameal;
		if (descsz > len - pos)
			return 0;
		const uint8_t *desc = p + pos;
		pos += descal < len - pos ? descal : len - pos;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
		    descsz > 0 && descsz <= sizeof(out->build_id)) {
			memcpy(out->build_id, desc, descsz);
			out->build_id_len = descsz;
			return 1;
		}
	}
	return 0;
}

static int note_range(int fd, uint64_t size, const rd *r, uint64_t off, uint64_t len,
                      uint64_t align, sp_elf_info *out)
{
	static _Thread_local uint8_t buf[MAX_NOTE_BYTES];
	if (len == 0 || len > MAX_NOTE_BYTES || off > size || len > size - off)
		return 0;
	if (read_at(fd, size, off, buf, (size_t)len) != 0)
		return 0;
	return scan_notes(r, buf, (size_t)len, align == 8 ? 8 : 4, out);
}

int sp_elf_read_info(int fd, uint64_t size, sp_elf_info *out)
{
	uint8_t eh[64] = { 0 };
	memset(out, 0, sizeof(*out));
	int rc = read_at(fd, size, 0, eh, sizeof(eh));
	if (rc)
		return rc;
	if (memcmp(eh, ELFMAG, SELFMAG) != 0)
		return sp_error(STACKPULSE_EFORMAT, "not an ELF file");
	if ((eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64) ||
	    (eh[EI_DATA] != ELFDATA2LSB && eh[EI_DATA] != ELFDATA2MSB))
		return sp_error(STACKPULSE_EFORMAT, "ELF: bad class or data encoding");
	rd r = { eh[EI_DATA] == ELFDATA2MSB };
	int is64 = eh[EI_CLASS] == ELFCLASS64;
	out->elf_class = eh[EI_CLASS];
	out->type = g16(&r, eh + 16);
	uint64_t phoff = is64 ? g64(&r, eh + 32) : g32(&r, eh + 28);
	uint64_t shoff = is64 ? g64(&r, eh + 40) : g32(&r, eh + 32);
	uint16_t phentsize = g16(&r, eh + (is64 ? 54 : 42));
	uint16_t phnum = g16(&r, eh + (is64 ? 56 : 44));
	uint16_t shentsize = g16(&r, eh + (is64 ? 58 : 46));
	uint16_t shnum = g16(&r, eh + (is64 ? 60 : 48));
	size_t phsz = is64 ? 56 : 32, shsz = is64 ? 64 : 40;

	int found = 0;
	if (shoff && shnum && shnum <= MAX_SHNUM && shentsize >= shsz) {
		for (uint16_t i = 0; i < shnum && !found; i++) {
			uint8_t sh[64] = { 0 };
			if (read_at(fd, size, shoff + (uint64_t)i * shentsize, sh, shsz) != 0)
				break;
			if (g32(&r, sh + 4) != SHT_NOTE)
				continue;
			uint64_t off = is64 ? g64(&r, sh + 24) : g32(&r, sh + 16);
			uint64_t len = is64 ? g64(&r, sh + 32) : g32(&r, sh + 20);
			uint64_t al = is64 ? g64(&r, sh + 48) : g32(&r, sh + 32);
			found = note_range(fd, size, &r, off, len, al, out);
		}
	}
	if (phoff && phnum && phnum <= MAX_PHNUM && phentsize >= phsz) {
		for (uint16_t i = 0; i < phnum; i++) {
			uint8_t ph[56] = { 0 };
			rc = read_at(fd, size, phoff + (uint64_t)i * phentsize, ph, phsz);
			if (rc)
				return rc;
			uint32_t type = g32(&r, ph);
			uint64_t off = is64 ? g64(&r, ph + 8) : g32(&r, ph + 4);
			uint64_t vaddr = is64 ? g64(&r, ph + 16) : g32(&r, ph + 8);
			uint64_t filesz = is64 ? g64(&r, ph + 32) : g32(&r, ph + 16);
			uint64_t memsz = is64 ? g64(&r, ph + 40) : g32(&r, ph + 20);
			uint64_t align = is64 ? g64(&r, ph + 48) : g32(&r, ph + 28);
			if (type == PT_LOAD && out->nloads < SP_ELF_MAX_LOADS) {
				sp_elf_load *l = &out->loads[out->nloads++];
				l->offset = off;
				l->vaddr = vaddr;
				l->filesz = filesz;
				l->memsz = memsz;
				l->align = align;
			} else if (type == PT_NOTE && !found) {
				found = note_range(fd, size, &r, off, filesz, align, out);
			}
		}
	}
	return 0;
}

int sp_elf_read_section(int fd, uint64_t size, const char *name, uint8_t *buf, size_t cap,
                        size_t *len)
{
	uint8_t eh[64] = { 0 };
	int rc = read_at(fd, size, 0, eh, sizeof(eh));
	if (rc)
		return rc;
	if (memcmp(eh, ELFMAG, SELFMAG) != 0 ||
	    (eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64))
		return sp_error(STACKPULSE_EFORMAT, "not an ELF file");
	rd r = { eh[EI_DATA] == ELFDATA2MSB };
	int is64 = eh[EI_CLASS] == ELFCLASS64;
	uint64_t shoff = is64 ? g64(&r, eh + 40) : g32(&r, eh + 32);
	uint16_t shentsize = g16(&r, eh + (is64 ? 58 : 46));
	uint16_t shnum = g16(&r, eh + (is64 ? 60 : 48));
	uint16_t shstrndx = g16(&r, eh + (is64 ? 62 : 50));
	size_t shsz = is64 ? 64 : 40;
	if (!shoff || !shnum || shnum > MAX_SHNUM || shentsize < shsz || shstrndx >= shnum)
		return STACKPULSE_ENOTFOUND;
	/* The section-name table, bounded like everything else. */
	static _Thread_local char names[MAX_NOTE_BYTES];
	uint8_t sh[64] = { 0 };
	rc = read_at(fd, size, shoff + (uint64_t)shstrndx * shentsize, sh, shsz);
	if (rc)
		return rc;
	uint64_t noff = is64 ? g64(&r, sh + 24) : g32(&r, sh + 16);
	uint64_t nlen = is64 ? g64(&r, sh + 32) : g32(&r, sh + 20);
	if (nlen == 0 || nlen > sizeof(names))
		return STACKPULSE_ENOTFOUND;
	rc = read_at(fd, size, noff, names, (size_t)nlen);
	if (rc)
		return rc;
	names[nlen - 1] = '\0';
	for (uint16_t i = 0; i < shnum; i++) {
		rc = read_at(fd, size, shoff + (uint64_t)i * shentsize, sh, shsz);
		if (rc)
			return rc;
		uint32_t nm = g32(&r, sh);
		if (nm >= nlen || strcmp(names + nm, name) != 0 || g32(&r, sh + 4) == SHT_NOBITS)
			continue;
		uint64_t off = is64 ? g64(&r, sh + 24) : g32(&r, sh + 16);
		uint64_t slen = is64 ? g64(&r, sh + 32) : g32(&r, sh + 20);
		if (slen > cap)
			return sp_error(STACKPULSE_ELIMIT, "ELF: section %s of %llu bytes", name,
			                (unsigned long long)slen);
		rc = read_at(fd, size, off, buf, (size_t)slen);
		if (rc)
			return rc;
		*len = (size_t)slen;
		return 0;
	}
	return STACKPULSE_ENOTFOUND;
}

int sp_elf_offset_to_vaddr(const sp_elf_info *info, uint64_t off, uint64_t *vaddr)
{
	for (uint32_t i = 0; i < info->nloads; i++) {
		const sp_elf_load *l = &info->loads[i];
		if (off >= l->offset && off - l->offset < l->filesz) {
			*vaddr = l->vaddr + (off - l->offset);
			return 0;
		}
	}
	return STACKPULSE_ENOTFOUND;
}

int sp_elf_file_crc32(int fd, uint64_t size, uint32_t *out)
{
	static _Thread_local uint8_t buf[1u << 16];
	uint32_t table[256]; /* Per call: cheap, and no shared mutable state. */
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
	uint32_t crc = 0xFFFFFFFFu;
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		int rc = read_at(fd, size, off, buf, n);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
		off += n;
	}
	*out = crc ^ 0xFFFFFFFFu;
	return 0;
}

void sp_hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int sp_elf_build_id_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path,
                           uint64_t inode, uint8_t out[64], uint32_t *len)
{
	*len = 0;
	uint64_t size = 0;
	int fd = sp_elf_open_mapped(pid, start, end, path, inode, &size);
	if (fd < 0)
		return fd;
	int rc = sp_elf_build_id_fd(fd, out, len);
	close(fd);
	return rc;
}
