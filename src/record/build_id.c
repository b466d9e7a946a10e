/* Build-ids of mapped files: the safe open of io/file.c, then the bounded
 * ELF reader of io/elf.c. */
#include "record/build_id.h"

#include <unistd.h>

#include "io/elf.h"
#include "io/file.h"

int sp_build_id_for_mapping(pid_t pid, uint64_t start, uint64_t end, const char *path,
                            uint64_t inode, uint8_t out[SP_BUILD_ID_MAX], uint32_t *len)
{
	*len = 0;
	int fd = -1;
	uint64_t size = 0;
	sp_file_id want = { 0, inode };
	int rc =
	        sp_file_open_mapped(pid, start, end, path, &want, SP_ELF_MAX_FILE_SIZE, &fd, &size);
	if (rc)
		return rc;
	rc = sp_elf_build_id_fd(fd, out, len);
	close(fd);
	return rc;
}
