/* Bounded reader of the GNU build-id note of an ELF file. */
#ifndef SP_RECORD_BUILD_ID_H
#define SP_RECORD_BUILD_ID_H

#include <stdint.h>
#include <sys/types.h>

#define SP_BUILD_ID_MAX 64

/* Reads the NT_GNU_BUILD_ID note of the ELF file open on @p fd (32/64-bit,
 * little or big endian). Returns 0, STACKPULSE_ENOTFOUND when there is no
 * note, or STACKPULSE_EFORMAT for a malformed file. */
int sp_build_id_read_fd(int fd, uint8_t out[SP_BUILD_ID_MAX], uint32_t *len);

/* The build-id of the file mapped at [start, end) by @p pid, opened as the
 * target sees it: /proc/PID/map_files/START-END, else /proc/PID/root/PATH. */
int sp_build_id_for_mapping(pid_t pid, uint64_t start, uint64_t end, const char *path,
                            uint8_t out[SP_BUILD_ID_MAX], uint32_t *len);

#endif
