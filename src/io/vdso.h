/* The running kernel's vDSO image, as this process maps it
 * (AT_SYSINFO_EHDR). Every process of our architecture on this kernel maps
 * the same image as "[vdso]": the unwinder reads its CFI from it and the
 * recorder embeds its symbols, so its frames get names. */
#ifndef SP_IO_VDSO_H
#define SP_IO_VDSO_H

#include <stddef.h>
#include <stdint.h>

/* Largest image we accept. */
#define SP_VDSO_MAX (1u << 20)

/* Our own vDSO image: *img points at it (read-only, mapped for the life of
 * the process), *len is its length up to the end of its section headers,
 * *map_len the page-rounded length of its "[vdso]" mapping. Returns 0, or
 * STACKPULSE_ENOTFOUND when there is none (or it is not a 64-bit ELF image
 * of a usable size). */
int sp_vdso_image(const uint8_t **img, size_t *len, uint64_t *map_len);

/* A sealed, read-only memfd holding our vDSO image (a regular file, for
 * readers that take a descriptor). Returns the fd or a negative code. */
int sp_vdso_memfd(void);

#endif
