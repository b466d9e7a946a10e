/* The per-binary cache: each file is opened once per recording (as the
 * target sees it), its CFI sections read into memory, and looked up through
 * libdw with a small cache of frame rules in front. */
#include "unwind/unwind_internal.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "io/elf.h"
#include "io/file.h"
#include "io/vdso.h"

#if defined(__x86_64__)
#define SP_HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define SP_HOST_MACHINE EM_AARCH64
#else
#define SP_HOST_MACHINE EM_NONE
#endif

void sp_unwind_binary_free(sp_unwind_binary *b)
{
	if (!b)
		return;
	if (b->frames) {
		for (size_t i = 0; i < SP_UNWIND_FRAME_CACHE; i++)
			free(b->frames[i].frame); /* libdw allocates frames with malloc. */
		sp_free(b->frames);
	}
	if (b->eh_cfi)
		dwarf_cfi_end(b->eh_cfi);
	if (b->dwarf)
		dwarf_end(b->dwarf); /* Also frees debug_cfi. */
	if (b->elf)
		elf_end(b->elf);
	if (b->fd >= 0)
		close(b->fd);
	sp_free(b->image);
	sp_free(b->loads);
	sp_free(b);
}

/* Fills loads, build-id and CFI of a freshly created binary around @p elf.
 * Returns false for files we cannot unwind with (wrong class or machine). */
static bool binary_init(sp_unwind_binary *b, Elf *elf)
{
	b->elf = elf;
	if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64)
		return false;
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh) || eh.e_machine != SP_HOST_MACHINE)
		return false;
	b->is_exec = eh.e_type == ET_EXEC;
	size_t phnum;
	if (elf_getphdrnum(elf, &phnum) != 0 || phnum == 0 || phnum > 4096)
		return false;
	b->loads = sp_calloc(phnum, sizeof(*b->loads));
	if (!b->loads)
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		b->loads[b->nloads++] =
		        (sp_unwind_load){ ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_flags };
	}
	if (b->nloads == 0)
		return false;
	const void *id = NULL;
	ssize_t idlen = dwelf_elf_gnu_build_id(elf, &id);
	if (idlen > 0 && idlen <= SP_UNWIND_BUILD_ID_MAX && id) {
		memcpy(b->build_id, id, (size_t)idlen);
		b->build_id_len = (uint32_t)idlen;
	}
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
				continue;
			const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
			if (name && strcmp(name, ".debug_frame") == 0)
				b->has_debug_frame = true;
		}
	}
	b->eh_cfi = dwarf_getcfi_elf(elf); /* NULL without .eh_frame. */
	b->frames = sp_calloc(SP_UNWIND_FRAME_CACHE, sizeof(*b->frames));
	return b->frames != NULL;
}

static int add_binary(sp_unwinder *u, sp_unwind_binary *b)
{
	if (u->nbins == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 16;
		sp_unwind_binary **bins =
		        sp_realloc_array(u->bins, cap, sizeof(sp_unwind_binary *));
		if (!bins)
			return -ENOMEM;
		u->bins = bins;
		u->cap = cap;
	}
	u->bins[u->nbins++] = b;
	return 0;
}

/* The target's view of the file, through the one safe open (never
 * blocking, regular files only, the target's symlinks kept inside its
 * root): map_files first (deleted or replaced files, other mount
 * namespaces), then the path inside the target's root. Only when the target
 * is gone, and a build-id will prove it is the same file, our own view. */
static int open_as_target(pid_t pid, uint64_t start, uint64_t end, const char *path, bool verified,
                          struct stat *st)
{
	int fd = -1;
	uint64_t size;
	int rc = -ESRCH;
	if (pid > 0) {
		rc = sp_file_open_mapped(pid, start, end, path, NULL, SP_ELF_MAX_FILE_SIZE, &fd,
		                         &size);
		if (rc == 0 && fstat(fd, st) == 0 && st->st_size > 0)
			return fd;
		if (rc == 0)
			close(fd);
	}
	/* pid 0: no target, our own view (offline use and tests). */
	if (rc != -ESRCH || (pid > 0 && !verified) ||
	    sp_file_open_regular(path, SP_FILE_NOFOLLOW, SP_ELF_MAX_FILE_SIZE, &fd, &size) != 0)
		return -1;
	if (fstat(fd, st) != 0 || st->st_size <= 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Inode of the mount namespace of @p pid, 0 when unknown. */
static uint64_t mount_ns(pid_t pid)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	return pid > 0 && stat(p, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static sp_unwind_binary *vdso_binary(sp_unwinder *u)
{
	if (u->vdso_tried)
		return u->vdso;
	u->vdso_tried = true;
	const uint8_t *img = NULL;
	size_t len = 0;
	uint64_t map_len = 0;
	if (sp_vdso_image(&img, &len, &map_len) != 0)
		return NULL;
	sp_unwind_binary *b = sp_calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->fd = -1;
	b->image = sp_malloc(len);
	if (!b->image) {
		sp_free(b);
		return NULL;
	}
	memcpy(b->image, img, len);
	Elf *elf = elf_memory(b->image, len);
	if (!elf || !binary_init(b, elf) || add_binary(u, b) != 0) {
		if (!b->elf && elf)
			elf_end(elf);
		sp_unwind_binary_free(b);
		return NULL;
	}
	u->vdso = b;
	u->vdso_len = map_len;
	return b;
}

sp_unwind_binary *sp_unwind_binary_get(sp_unwinder *u, pid_t pid, uint64_t start, uint64_t end,
                                       const char *path, const uint8_t *build_id,
                                       uint32_t build_id_len)
{
	if (!path)
		return NULL;
	if (strcmp(path, "[vdso]") == 0) {
		/* The target runs on our kernel: its vDSO is ours when the size matches. */
		sp_unwind_binary *v = vdso_binary(u);
		return v && end - start == u->vdso_len ? v : NULL;
	}
	if (path[0] != '/' || strncmp(path, "//anon", 6) == 0)
		return NULL;
	uint64_t ns = mount_ns(pid);
	if (ns && build_id && build_id_len > 0 && build_id_len <= SP_UNWIND_BUILD_ID_MAX) {
		for (size_t i = 0; i < u->nbins; i++) {
			sp_unwind_binary *b = u->bins[i];
			if (b->mntns == ns && b->build_id_len == build_id_len &&
			    memcmp(b->build_id, build_id, build_id_len) == 0)
				return b;
		}
	}
	struct stat st;
	bool verified = build_id && build_id_len > 0;
	int fd = open_as_target(pid, start, end, path, verified, &st);
	if (fd < 0)
		return NULL;
	int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	for (size_t i = 0; i < u->nbins; i++) {
		sp_unwind_binary *b = u->bins[i];
		if (b->dev == st.st_dev && b->ino == st.st_ino && b->size == (uint64_t)st.st_size &&
		    b->mtime_ns == mtime && !b->image) {
			close(fd);
			if (verified && (b->build_id_len != build_id_len ||
			                 memcmp(b->build_id, build_id, build_id_len) != 0))
				return NULL; /* Not the file that was mapped. */
			return b;
		}
	}
	sp_unwind_binary *b = sp_calloc(1, sizeof(*b));
	if (!b) {
		close(fd);
		return NULL;
	}
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = (uint64_t)st.st_size;
	b->mtime_ns = mtime;
	b->mntns = ns;
	b->fd = -1;
	/* pread, not mmap: a mapped file truncated under us would SIGBUS. */
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	bool ok = elf && binary_init(b, elf);
	if (!ok && !b->elf && elf)
		elf_end(elf);
	if (ok && b->has_debug_frame) {
		b->fd = fd; /* .debug_frame is read lazily, on the first miss. */
	} else {
		/* binary_init read what the CFI needs (.eh_frame, .eh_frame_hdr). */
		if (b->elf)
			elf_cntl(b->elf, ELF_C_FDDONE);
		close(fd);
	}
	if (ok && build_id && build_id_len > 0 &&
	    (b->build_id_len != build_id_len || memcmp(b->build_id, build_id, build_id_len) != 0))
		ok = false; /* The file was replaced since it was mapped. */
	if (!ok || add_binary(u, b) != 0) {
		sp_unwind_binary_free(b);
		return NULL;
	}
	return b;
}

bool sp_unwind_binary_bias(const sp_unwind_binary *b, uint64_t start, uint64_t pgoff,
                           uint64_t *bias)
{
	if (b->is_exec) {
		*bias = 0; /* Fixed addresses. */
		return true;
	}
	/* Our mappings are executable, so prefer PF_X segments; a segment
	 * matches when pgoff lies in it or in the (up to 64 KiB) page the
	 * kernel mapped its start from. */
	const sp_unwind_load *best = NULL;
	for (int pass = 0; pass < 2 && !best; pass++) {
		for (size_t i = 0; i < b->nloads && !best; i++) {
			const sp_unwind_load *l = &b->loads[i];
			if (pass == 0 && !(l->flags & PF_X))
				continue;
			if (pgoff < l->offset + l->filesz &&
			    pgoff >= (l->offset & ~(uint64_t)0xffff))
				best = l;
		}
	}
	if (!best)
		return false;
	/* Within a segment, vaddr - offset is constant. */
	*bias = start - (best->vaddr - best->offset + pgoff);
	return true;
}

Dwarf_Frame *sp_unwind_binary_frame(sp_unwind_binary *b, uint64_t addr)
{
	sp_unwind_frame_slot *slot = &b->frames[sp_hash64(addr) & (SP_UNWIND_FRAME_CACHE - 1)];
	if (slot->addr == addr + 1)
		return slot->frame;
	free(slot->frame);
	slot->frame = NULL;
	slot->addr = addr + 1;
	Dwarf_Frame *f = NULL;
	if (b->eh_cfi && dwarf_cfi_addrframe(b->eh_cfi, addr, &f) == 0) {
		slot->frame = f;
		return f;
	}
	if (b->has_debug_frame && !b->debug_tried) {
		b->debug_tried = true;
		b->dwarf = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
		if (b->dwarf)
			b->debug_cfi = dwarf_getcfi(b->dwarf);
	}
	f = NULL;
	if (b->debug_cfi && dwarf_cfi_addrframe(b->debug_cfi, addr, &f) == 0)
		slot->frame = f;
	return slot->frame;
}
