/* The build-id of a file a target maps, read as the target sees it. */
#ifndef SP_RECORD_BUILD_ID_H
#define SP_RECORD_BUILD_ID_H

#include <stdint.h>
#include <sys/types.h>

#define SP_BUILD_ID_MAX 64

/* The build-id of the file mapped at [start, end) by @p pid, opened with
 * sp_file_open_mapped (map_files, else PATH inside /proc/PID/root; never
 * blocking, regular files only, @p inode checked when nonzero). Returns 0,
 * STACKPULSE_ENOTFOUND when the file has no note, or another code. */
int sp_build_id_for_mapping(pid_t pid, uint64_t start, uint64_t end, const char *path,
                            uint64_t inode, uint8_t out[SP_BUILD_ID_MAX], uint32_t *len);

#endif
