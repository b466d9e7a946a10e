/* Safe opening and a small bounded ELF reader used before any file named
 * by a spool reaches libelf/libdw: only regular files are opened (without
 * blocking), sizes are capped, and the build-id is read from the notes with
 * every length checked. */
#ifndef SP_SYMBOLIZE_ELFID_H
#define SP_SYMBOLIZE_ELFID_H

#include <stddef.h>
#include <stdint.h>

/* Largest file we read: bigger ones are rejected with STACKPULSE_ELIMIT. */
#define SP_ELF_MAX_FILE_SIZE (8ull << 30)
#define SP_ELF_MAX_LOADS     32

typedef struct sp_elf_load {
	uint64_t offset; /* p_offset */
	uint64_t vaddr;  /* p_vaddr */
	uint64_t filesz; /* p_filesz */
} sp_elf_load;

typedef struct sp_elf_info {
	uint8_t build_id[64];
	uint32_t build_id_len; /* 0: no build-id note. */
	int elf_class;         /* ELFCLASS32 or ELFCLASS64. */
	uint16_t type;         /* e_type. */
	sp_elf_load loads[SP_ELF_MAX_LOADS];
	uint32_t nloads;
} sp_elf_info;

/* Opens @p path read-only if it is a regular file of at most
 * SP_ELF_MAX_FILE_SIZE bytes: stat first (devices and FIFOs are never
 * opened), then O_NONBLOCK|O_CLOEXEC|O_NOCTTY and an fstat that must match.
 * Returns the fd, or -ENOENT, -EACCES, STACKPULSE_EUNSUPPORTED (not a
 * regular file), STACKPULSE_ELIMIT (too big), ... with a detail. */
int sp_elf_open_regular(const char *path, uint64_t *size);

/* Reads the ELF header, the PT_LOAD segments and the GNU build-id note
 * (PT_NOTE segments, then SHT_NOTE sections) of @p fd (@p size bytes).
 * Returns 0 or STACKPULSE_EFORMAT (not ELF, bad lengths) / -EIO. */
int sp_elf_read_info(int fd, uint64_t size, sp_elf_info *out);

/* Maps a file offset to a virtual address through the PT_LOAD that
 * contains it. Returns 0 or STACKPULSE_ENOTFOUND. */
int sp_elf_offset_to_vaddr(const sp_elf_info *info, uint64_t off, uint64_t *vaddr);
/* The inverse, for symbol tables built from addresses. */
int sp_elf_vaddr_to_offset(const sp_elf_info *info, uint64_t vaddr, uint64_t *off);

/* Copies the contents of the section named @p name (at most @p cap bytes;
 * longer sections are refused) into @p buf. Returns 0 with *len set,
 * STACKPULSE_ENOTFOUND, or another code. */
int sp_elf_read_section(int fd, uint64_t size, const char *name, uint8_t *buf, size_t cap,
                        size_t *len);

/* zlib-compatible CRC-32 of the whole file (for .gnu_debuglink). */
int sp_elf_file_crc32(int fd, uint64_t size, uint32_t *crc);

/* Lowercase hex of @p n bytes into @p out (2n + 1 bytes). */
void sp_hex(const uint8_t *p, size_t n, char *out);

#endif
