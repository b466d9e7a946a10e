/* Helpers shared by the recorder tests: build the target programs, run a
 * recording to the end, and name frames independently of the symbolizer
 * (ELF symbol tables read with libelf, kernel names from the spool). */
#ifndef SP_TEST_REC_UTIL_H
#define SP_TEST_REC_UTIL_H

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "stackpulse.h"

static inline double rec_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Compiles tests/record/targets/NAME.c (gcc -O2 -fomit-frame-pointer plus
 * @p extra) into the test directory once; returns the binary path. */
static inline const char *rec_target(const char *name, const char *extra)
{
	static char paths[16][512];
	static int npaths;
	char out[512];
	snprintf(out, sizeof(out), "%s/%s", sp_test_tmpdir(), name);
	for (int i = 0; i < npaths; i++)
		if (strcmp(paths[i], out) == 0)
			return paths[i];
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -fomit-frame-pointer -o '%s' '%s/tests/record/targets/%s.c' %s", out,
	         sp_test_source_root(), name, extra ? extra : "");
	if (system(cmd) != 0) {
		sp_test_fail(__FILE__, __LINE__, "cannot build %s", cmd);
		sp_test_abort();
	}
	chmod(out, 0755);
	if (npaths < 16)
		snprintf(paths[npaths], sizeof(paths[0]), "%s", out);
	return npaths < 16 ? paths[npaths++] : strdup(out);
}

/* Waits and drains until every followed process exited (or @p max_s). */
static inline int rec_run(stackpulse_recorder *rec, double max_s)
{
	double end = rec_now() + max_s;
	while (rec_now() < end) {
		int rc = stackpulse_recorder_wait(rec, 200);
		if (rc < 0 && rc != -EINTR)
			return rc;
		rc = stackpulse_recorder_consume_available(rec);
		if (rc)
			return rc;
		if (!stackpulse_recorder_process_is_active(rec, 0))
			return 0;
	}
	return -ETIMEDOUT;
}

/* ---- ELF symbols ---- */

typedef struct rec_sym {
	uint64_t start, size;
	char *name;
} rec_sym;

typedef struct rec_elf {
	char path[512];
	rec_sym *syms;
	size_t nsyms;
	uint64_t load_off[16], load_vaddr[16], load_size[16];
	int nloads;
} rec_elf;

static inline int rec_sym_cmp(const void *a, const void *b)
{
	const rec_sym *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static inline rec_elf *rec_elf_get(const char *path)
{
	static rec_elf cache[32];
	static int n;
	for (int i = 0; i < n; i++)
		if (strcmp(cache[i].path, path) == 0)
			return &cache[i];
	if (n == 32)
		return NULL;
	rec_elf *e = &cache[n];
	memset(e, 0, sizeof(*e));
	snprintf(e->path, sizeof(e->path), "%s", path);
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t phnum = 0;
	elf_getphdrnum(elf, &phnum);
	for (size_t i = 0; i < phnum && e->nloads < 16; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			e->load_off[e->nloads] = ph.p_offset;
			e->load_vaddr[e->nloads] = ph.p_vaddr;
			e->load_size[e->nloads++] = ph.p_filesz;
		}
	}
	Elf_Scn *scn = NULL;
	size_t cap = 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t cnt = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < cnt; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_value == 0)
				continue;
			if (e->nsyms == cap) {
				cap = cap ? cap * 2 : 256;
				e->syms = realloc(e->syms, cap * sizeof(*e->syms));
			}
			e->syms[e->nsyms++] =
			        (rec_sym){ s.st_value, s.st_size,
				           strdup(elf_strptr(elf, sh.sh_link, s.st_name)) };
		}
	}
	elf_end(elf);
	close(fd);
	qsort(e->syms, e->nsyms, sizeof(*e->syms), rec_sym_cmp);
	n++;
	return e;
}

/* Name of file offset @p off in @p path, or NULL. */
static inline const char *rec_elf_name(const char *path, uint64_t off)
{
	rec_elf *e = rec_elf_get(path);
	if (!e)
		return NULL;
	uint64_t va = 0;
	int found = 0;
	for (int i = 0; i < e->nloads; i++)
		if (off >= e->load_off[i] && off < e->load_off[i] + e->load_size[i]) {
			va = off - e->load_off[i] + e->load_vaddr[i];
			found = 1;
			break;
		}
	if (!found)
		return NULL;
	const char *best = NULL;
	for (size_t i = 0; i < e->nsyms && e->syms[i].start <= va; i++)
		if (va < e->syms[i].start + (e->syms[i].size ? e->syms[i].size : 1))
			best = e->syms[i].name;
	return best;
}

/* Fills @p names with the frames of @p stack, leaf first: function names
 * for native frames, kernel names for kernel frames, "[truncated]",
 * "[unknown]" or "?" otherwise. Returns the depth stored. */
static inline uint32_t rec_stack_names(const stackpulse_spool *sp, uint32_t stack,
                                       const char **names, uint32_t max)
{
	uint32_t ids[256];
	uint32_t d = stackpulse_spool_stack_frames(sp, stack, ids, 256);
	if (d > 256)
		d = 256;
	if (d > max)
		d = max;
	for (uint32_t i = 0; i < d; i++) {
		const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, ids[i]);
		const char *n = "?";
		if (!f) {
			n = "?";
		} else if (f->kind == STACKPULSE_FRAME_TRUNCATED) {
			n = "[truncated]";
		} else if (f->kind == STACKPULSE_FRAME_KERNEL) {
			const char *kn;
			n = stackpulse_spool_ksym_lookup(sp, f->offset, &kn, NULL, NULL) == 0
			            ? kn
			            : "[kernel?]";
		} else if (f->kind == STACKPULSE_FRAME_NATIVE) {
			const struct stackpulse_module *m = stackpulse_spool_module(sp, f->module);
			/* Return addresses point after the call. */
			uint64_t off = f->offset - (i > 0 && f->offset ? 1 : 0);
			const char *s = m ? rec_elf_name(m->path, off) : NULL;
			n = s ? s : "?";
		} else if (f->kind == STACKPULSE_FRAME_UNKNOWN) {
			n = "[unknown]";
		}
		names[i] = n;
	}
	return d;
}

/* 1 when the names contain a, then b, then c... consecutively at the leaf
 * end after skipping kernel frames. */
static inline int rec_has_seq(const char **names, uint32_t d, const char *const *seq, int nseq)
{
	for (uint32_t i = 0; i + (uint32_t)nseq <= d; i++) {
		int ok = 1;
		for (int k = 0; k < nseq && ok; k++)
			ok = strcmp(names[i + (uint32_t)k], seq[k]) == 0;
		if (ok)
			return 1;
	}
	return 0;
}

/* Thread states of @p pid: returns 1 if any thread is stopped (t/T). */
static inline int rec_any_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
	         "cat /proc/%d/task/*/stat 2>/dev/null | sed 's/.*) //' | cut -c1 | grep -q '[tT]'",
	         (int)pid);
	(void)path;
	return system(cmd) == 0;
}

#endif
