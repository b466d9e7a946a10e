/* The one bounded ELF reader for files we do not trust (a target's
 * binaries, files a spool names): the header, the PT_LOAD segments and the
 * GNU build-id note, read with pread (never mmap: a file truncated under us
 * would raise SIGBUS) and every length checked against the file size. It
 * runs before libelf or libdw parse anything of a file. */
#ifndef SP_IO_ELF_H
#define SP_IO_ELF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Largest file we read: bigger ones are rejected with STACKPULSE_ELIMIT. */
#define SP_ELF_MAX_FILE_SIZE (8ull << 30)
#define SP_ELF_MAX_LOADS     32

typedef struct sp_elf_load {
	uint64_t offset; /* p_offset */
	uint64_t vaddr;  /* p_vaddr */
	uint64_t filesz; /* p_filesz */
	uint64_t memsz;  /* p_memsz */
	uint64_t align;  /* p_align */
} sp_elf_load;

typedef struct sp_elf_info {
	uint8_t build_id[64];
	uint32_t build_id_len; /* 0: no build-id note. */
	int elf_class;         /* ELFCLASS32 or ELFCLASS64. */
	uint16_t type;         /* e_type. */
	sp_elf_load loads[SP_ELF_MAX_LOADS];
	uint32_t nloads;
} sp_elf_info;

/* Opens @p path with sp_file_open_regular (never blocks, never opens a
 * device or FIFO) if it is a regular file of 64 to SP_ELF_MAX_FILE_SIZE
 * bytes. Returns the fd, or -ENOENT, -EACCES, STACKPULSE_EUNSUPPORTED (not a
 * regular file), STACKPULSE_ELIMIT (too big), STACKPULSE_EFORMAT (too
 * small), ... with a detail. */
int sp_elf_open_regular(const char *path, uint64_t *size);

/* sp_file_open_mapped for an ELF file a process maps: at most
 * SP_ELF_MAX_FILE_SIZE bytes, the mapping's @p inode checked when nonzero.
 * Returns the fd (size in *size), or a negative code. */
int sp_elf_open_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path, uint64_t inode,
                       uint64_t *size);

/* The GNU build-id of the ELF file open on @p fd (sp_elf_read_info over its
 * current size). Returns 0 with *len set, STACKPULSE_ENOTFOUND without a
 * note, or STACKPULSE_EFORMAT / -errno. */
int sp_elf_build_id_fd(int fd, uint8_t out[64], uint32_t *len);

/* The build-id of the file mapped at [start, end) by @p pid, read as the
 * target sees it (sp_elf_open_mapped: never blocking, regular files only,
 * @p inode checked when nonzero). 0, STACKPULSE_ENOTFOUND when the file
 * has no note, or another code. */
int sp_elf_build_id_mapped(pid_t pid, uint64_t start, uint64_t end, const char *path,
                           uint64_t inode, uint8_t out[64], uint32_t *len);

/* Reads the ELF header, the PT_LOAD segments and the GNU build-id note
 * (PT_NOTE segments, then SHT_NOTE sections) of @p fd (@p size bytes).
 * Returns 0 or STACKPULSE_EFORMAT (not ELF, bad lengths) / -EIO. */
int sp_elf_read_info(int fd, uint64_t size, sp_elf_info *out);

/* Maps a file offset to a virtual address through the PT_LOAD that
 * contains it. Returns 0 or STACKPULSE_ENOTFOUND. */
int sp_elf_offset_to_vaddr(const sp_elf_info *info, uint64_t off, uint64_t *vaddr);

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
