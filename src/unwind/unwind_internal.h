/* Shared state of the unwinder's files: the per-binary cache (binary.c),
 * address spaces (space.c) and the frame walker (unwind.c). */
#ifndef SP_UNWIND_UNWIND_INTERNAL_H
#define SP_UNWIND_UNWIND_INTERNAL_H

#include <elfutils/libdw.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

#define SP_UNWIND_BUILD_ID_MAX 64
/* Direct-mapped cache of CFI lookups per binary; a power of two. */
#define SP_UNWIND_FRAME_CACHE 512

/* One PT_LOAD segment of a binary (link-time addresses). */
typedef struct sp_unwind_load {
	uint64_t vaddr;  /* p_vaddr. */
	uint64_t offset; /* p_offset. */
	uint64_t filesz; /* p_filesz. */
	uint32_t flags;  /* p_flags (PF_X...). */
} sp_unwind_load;

/* One cached CFI lookup: the frame rules at link-time address @p addr. */
typedef struct sp_unwind_frame_slot {
	uint64_t addr;      /* Looked-up link-time address + 1 (0: empty slot). */
	Dwarf_Frame *frame; /* NULL: no CFI covers the address. */
} sp_unwind_frame_slot;

/* One opened binary, shared by every address space that maps it. */
typedef struct sp_unwind_binary {
	uint64_t dev, ino, size; /* Identity of the file we opened. */
	int64_t mtime_ns;
	/* Mount namespace (inode of /proc/PID/ns/mnt) of the process it was
	 * opened for, 0 when unknown: a build-id is a claim the file makes, so
	 * a binary is reused by build-id alone only inside that namespace. */
	uint64_t mntns;
	uint8_t build_id[SP_UNWIND_BUILD_ID_MAX];
	uint32_t build_id_len;
	Elf *elf;
	int fd;               /* Kept open only for a lazy .debug_frame; else -1. */
	void *image;          /* Owned copy backing @p elf (vDSO), else NULL. */
	Dwarf_CFI *eh_cfi;    /* .eh_frame, or NULL. */
	Dwarf *dwarf;         /* For .debug_frame, opened lazily. */
	Dwarf_CFI *debug_cfi; /* .debug_frame, or NULL. */
	bool has_debug_frame; /* The file has a .debug_frame section. */
	bool debug_tried;     /* dwarf/debug_cfi were attempted. */
	bool is_exec;         /* ET_EXEC: loaded at its link addresses. */
	sp_unwind_load *loads;
	size_t nloads;
	sp_unwind_frame_slot *frames; /* SP_UNWIND_FRAME_CACHE slots. */
} sp_unwind_binary;

struct sp_unwinder {
	sp_unwind_binary **bins; /* Every binary opened so far; never evicted. */
	size_t nbins, cap;
	sp_unwind_binary *vdso; /* Our own vDSO image (same kernel), or NULL. */
	uint64_t vdso_len;      /* Page-rounded length of the vDSO mapping. */
	bool vdso_tried;
};

/* One executable mapping of an address space. */
typedef struct sp_unwind_map {
	uint64_t start, end;   /* [start, end) in the target. */
	uint64_t pgoff;        /* File offset of @p start. */
	uint64_t bias;         /* Runtime address minus link-time address. */
	sp_unwind_binary *bin; /* NULL: unwound by frame pointers only. */
} sp_unwind_map;

struct sp_unwind_space {
	sp_unwinder *u;
	pid_t pid;
	sp_unwind_map *maps; /* Sorted by start, non-overlapping. */
	size_t n, cap;
};

/* binary.c */
/* Finds or opens the binary behind a mapping. Returns NULL (not an error)
 * when the file cannot be opened or is not a usable ELF. */
sp_unwind_binary *sp_unwind_binary_get(sp_unwinder *u, pid_t pid, uint64_t start, uint64_t end,
                                       const char *path, const uint8_t *build_id,
                                       uint32_t build_id_len);
void sp_unwind_binary_free(sp_unwind_binary *b);
/* Computes the load bias of a mapping of @p b at @p start with file offset
 * @p pgoff; false when no PT_LOAD covers the offset. */
bool sp_unwind_binary_bias(const sp_unwind_binary *b, uint64_t start, uint64_t pgoff,
                           uint64_t *bias);
/* The CFI rules at link-time address @p addr, cached; NULL when no CFI
 * covers it. The frame stays owned by the cache. */
Dwarf_Frame *sp_unwind_binary_frame(sp_unwind_binary *b, uint64_t addr);

/* space.c */
/* The mapping containing @p pc, or NULL. */
const sp_unwind_map *sp_unwind_space_find(const sp_unwind_space *s, uint64_t pc);

#endif
