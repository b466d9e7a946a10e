/* Our own vDSO image (see vdso.h). */
#include "io/vdso.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/error.h"

int sp_vdso_image(const uint8_t **img, size_t *len, uint64_t *map_len)
{
	const uint8_t *p = (const uint8_t *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!p || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64)
		return sp_error(STACKPULSE_ENOTFOUND, "no 64-bit vDSO in this process");
	Elf64_Ehdr eh;
	memcpy(&eh, p, sizeof(eh));
	/* Section headers end the image the kernel builds. */
	uint64_t n = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
	if (eh.e_shoff == 0 || n < sizeof(eh) || n > SP_VDSO_MAX)
		return sp_error(STACKPULSE_ENOTFOUND, "vDSO of unusable size");
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return sp_error(STACKPULSE_ENOTFOUND, "no page size");
	*img = p;
	*len = (size_t)n;
	*map_len = (n + (uint64_t)page - 1) & ~((uint64_t)page - 1);
	return 0;
}

int sp_vdso_memfd(void)
{
	const uint8_t *img = NULL;
	size_t len = 0;
	uint64_t map_len = 0;
	int rc = sp_vdso_image(&img, &len, &map_len);
	if (rc)
		return rc;
	int fd = memfd_create("stackpulse-vdso", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return sp_error(-errno, "vDSO: memfd_create failed");
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, img + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = sp_error(w < 0 ? -errno : -EIO, "vDSO: cannot copy the image");
			close(fd);
			return rc;
		}
		done += (size_t)w;
	}
	/* Best effort: the image is ours, sealing only guards against mistakes. */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	return fd;
}
