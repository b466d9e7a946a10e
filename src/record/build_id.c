/* Build-ids of mapped files: the safe open of io/file.c, then the bounded
 * ELF reader of io/elf.c. */
#include "record/build_id.h"

#include <unistd.h>

#include "io/elf.h"

int sp_build_id_for_mapping(pid_t pid, uint64_t start, uint64_t end, const char *path,
                            uint64_t inode, uint8_t out[SP_BUILD_ID_MAX], uint32_t *len)
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
