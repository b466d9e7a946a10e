/* Fuzzes the one ELF reader (io/elf.c) over untrusted bytes: header,
 * program headers and notes (build-id, section lookup, offset and address
 * mapping, CRC), as the recorder and the symbolizer both use it. The input
 * is served as a file (a memfd), as a mapped binary would be. Answers must
 * be in bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The OS layer, outside the pure library the harnesses link. */
#include "io/elf.c"
#include "io/file.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (1u << 20)

static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (fd < 0 && (fd = memfd_create("elf_notes", MFD_CLOEXEC)) < 0)
		return 0;
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		return 0;

	sp_elf_info info;
	if (sp_elf_read_info(fd, size, &info) == 0) {
		if (info.build_id_len > sizeof(info.build_id))
			__builtin_trap();
		for (uint64_t off = 0; off < size; off += 1 + size / 7) {
			uint64_t v;
			(void)sp_elf_offset_to_vaddr(&info, off, &v);
		}
		uint8_t sec[256];
		size_t got = 0;
		if (sp_elf_read_section(fd, size, ".gnu_debuglink", sec, sizeof(sec), &got) == 0 &&
		    got > sizeof(sec))
			__builtin_trap();
		uint32_t crc;
		(void)sp_elf_file_crc32(fd, size, &crc);
	}
	uint8_t bid[64];
	uint32_t len = 0;
	if (sp_elf_build_id_fd(fd, bid, &len) == 0 && (len == 0 || len > sizeof(bid)))
		__builtin_trap();
	return 0;
}
