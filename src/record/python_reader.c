/* Finding CPython in a live process and reading its thread stacks with
 * the target memory reader (target_mem.h). See python.h. */
#include "record/python.h"

#include "python/names.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/error.h"
#include "io/clock.h"
#include "io/elf.h"
#include "record/proc_scan.h"
#include "record/target_mem.h"

#define MAX_EVAL_RANGES           8
#define MAX_SYMBOLS               (16u << 20) /* Symbols scanned per table. */
#define RESCAN_NS                 20000000ull /* Least time between thread rescans. */
#define READ_TRIES                4           /* Reads of one stack that changed while read. */
#define GLIBC_X86_64_PTHREAD_TID  720         /* offsetof(struct pthread, tid), glibc 2.x */
#define GLIBC_AARCH64_PTHREAD_TID 208         /* the same on aarch64 (glibc 2.36) */
#define MAPS_PATH_MAX             1088u       /* Paths compared for "tried already". */

/* A thread's name as the name callback last took it. */
typedef struct named {
	int64_t tid;
	char name[SP_PY_TNAME_MAX];
	uint8_t taken; /* 0: read, not yet taken by the callback. */
} named;

/* Reads of the names due after a thread state first seen, while one of
 * the threads has no name yet: SP_PYTHON_NAMES_NEW_NS after it, then 4,
 * 16 and 64 times that (a new thread may wait for the GIL that long
 * before it runs the code that enters it in threading._active). */
#define NAMES_NEW_TRIES 4

typedef struct tid_entry {
	int64_t tid;
	uint64_t tstate;
	uint64_t ident;          /* Its thread_id (pthread_t): threading's ident. */
	uint64_t hot[SP_PY_HOT]; /* Its last walk's frame pages (sp_py_walker.hot). */
	uint32_t nhot;
} tid_entry;

struct sp_python {
	pid_t pid;
	uint64_t runtime; /* Address of _PyRuntime. */
	sp_py_layout layout;
	sp_py_walker w;
	sp_target_mem mem;
	sp_py_range eval[MAX_EVAL_RANGES];
	uint32_t neval;
	tid_entry *threads;
	uint32_t nthreads;
	uint64_t last_scan_ns;
	int scanned;
	/* The list as the last rescan saw it: its first interpreter (0: none
	 * yet), that interpreter's newest thread state and its count of
	 * thread states made. */
	uint64_t interp0, head0, serial0;
	/* Thread states of that list without a tid of their own yet: a new
	 * thread's, made by the thread that starts it, which the new thread
	 * binds to itself when it runs (3.12+: tid 0 until then; 3.10/3.11:
	 * the starting thread's tid, so the oldest claim to a tid wins). */
	uint64_t *pend;
	uint32_t npend;
	/* Thread names (sp_python_thread_names). */
	sp_py_names_cache names_cache;
	sp_py_tname *names; /* SP_PY_MAX_THREADS, on the first read. */
	named *named;       /* Sorted by tid. */
	uint32_t nnamed, nuntaken;
	uint64_t names_last_ns; /* Of the last read; 0: none yet. */
	uint32_t names_new;     /* Reads due for new thread states. */
	sp_python_stats stats;
	sp_python_stats *totals; /* Also gets each read's costs, or NULL. */
	uint64_t sample_ns;      /* Of the next read; 0: unknown. */
	/* A walk cut where a generator lost its caller, kept while later
	 * tries look for a whole one. */
	sp_py_frame cut[SP_PY_MAX_DEPTH];
};

/* ---- target memory ----------------------------------------------------------- */

/* The sp_py_read_fn of a live process (target_mem.h). */
static int read_live(void *ctx, sp_py_iov *iov, uint32_t n, int prefix)
{
	sp_python *py = ctx;
	uint64_t calls = py->mem.read_calls;
	int rc = sp_target_mem_read(&py->mem, iov, n, prefix);
	py->stats.read_calls += py->mem.read_calls - calls;
	return rc;
}

/* ---- ELF ------------------------------------------------------------------------ */

typedef struct elf_syms {
	uint64_t runtime, runtime_section, version, code_type, frame_type, unicode_type, bytes_type,
	        init_cleanup, dict_type, long_type, module_type;
	uint64_t runtime_size; /* st_size of _PyRuntime or the section's size */
	sp_py_range eval[MAX_EVAL_RANGES];
	uint32_t neval;
} elf_syms;

static void take_symbol(elf_syms *s, const char *name, const GElf_Sym *sym)
{
	if (sym->st_shndx == SHN_UNDEF || sym->st_value == 0)
		return;
	if (strcmp(name, "_PyRuntime") == 0) {
		s->runtime = sym->st_value;
		s->runtime_size = sym->st_size;
	} else if (strcmp(name, "Py_Version") == 0)
		s->version = sym->st_value;
	else if (strcmp(name, "PyCode_Type") == 0)
		s->code_type = sym->st_value;
	else if (strcmp(name, "PyFrame_Type") == 0)
		s->frame_type = sym->st_value;
	else if (strcmp(name, "PyUnicode_Type") == 0)
		s->unicode_type = sym->st_value;
	else if (strcmp(name, "PyBytes_Type") == 0)
		s->bytes_type = sym->st_value;
	else if (strcmp(name, "_Py_InitCleanup") == 0)
		s->init_cleanup = sym->st_value;
	else if (strcmp(name, "PyDict_Type") == 0)
		s->dict_type = sym->st_value;
	else if (strcmp(name, "PyLong_Type") == 0)
		s->long_type = sym->st_value;
	else if (strcmp(name, "PyModule_Type") == 0)
		s->module_type = sym->st_value;
	else if ((strcmp(name, "_PyEval_EvalFrameDefault") == 0 ||
	          strcmp(name, "_PyEval_EvalFrameDefault.cold") == 0) &&
	         GELF_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_size > 0) {
		for (uint32_t i = 0; i < s->neval; i++)
			if (s->eval[i].start == sym->st_value)
				return;
		if (s->neval < MAX_EVAL_RANGES) {
			s->eval[s->neval].start = sym->st_value;
			s->eval[s->neval].end = sym->st_value + sym->st_size;
			s->neval++;
		}
	}
}

static int elf_scan(int fd, elf_syms *s)
{
	memset(s, 0, sizeof(*s));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return sp_error(STACKPULSE_EINTERNAL, "libelf: %s", elf_errmsg(-1));
	/* pread, never mmap: the target can truncate its libpython under us,
	 * and a mapped read past the new end would raise SIGBUS. */
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return sp_error(STACKPULSE_EFORMAT, "not an ELF file: %s", elf_errmsg(-1));
	int rc = 0;
	GElf_Ehdr eh;
	if (elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64) {
		rc = sp_error(STACKPULSE_EUNSUPPORTED, "not a 64-bit ELF file");
		goto out;
	}
	size_t shstrndx;
	if (elf_getshdrstrndx(e, &shstrndx) != 0) {
		rc = sp_error(STACKPULSE_EFORMAT, "ELF without section names");
		goto out;
	}
	for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *sname = elf_strptr(e, shstrndx, sh.sh_name);
		if (sname && strcmp(sname, ".PyRuntime") == 0 && !s->runtime_section) {
			s->runtime_section = sh.sh_addr;
			if (!s->runtime_size)
				s->runtime_size = sh.sh_size;
		}
		if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t count = sh.sh_size / sh.sh_entsize;
		if (count > MAX_SYMBOLS)
			count = MAX_SYMBOLS;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym))
				break;
			const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (name && (name[0] == '_' || name[0] == 'P'))
				take_symbol(s, name, &sym);
		}
	}
out:
	elf_end(e);
	return rc;
}

/* Load bias of a mapping at @p start of file offset @p pgoff. */
static int load_bias(const sp_elf_info *info, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	for (uint32_t i = 0; i < info->nloads; i++) {
		const sp_elf_load *ph = &info->loads[i];
		uint64_t align = ph->align > 1 ? ph->align : 4096;
		uint64_t seg_off = ph->offset & ~(align - 1);
		if (pgoff >= seg_off && pgoff < ph->offset + ph->filesz) {
			/* vaddr of file offset pgoff, in this segment. */
			uint64_t vaddr = ph->vaddr - (ph->offset - pgoff);
			*bias = start - vaddr;
			return 0;
		}
	}
	return sp_error(STACKPULSE_EFORMAT, "mapping offset 0x%" PRIx64 " is in no segment", pgoff);
}

/* ---- probing ------------------------------------------------------------------------ */

int sp_python_candidate(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(base, "python", 6) == 0 || strncmp(base, "libpython3", 10) == 0;
}

/* The minor version from a file name like ".../libpython3.10.so.1.0". */
static uint32_t version_from_name(const char *path)
{
	const char *p = strstr(path, "python3.");
	if (!p)
		return 0;
	p += 8;
	uint32_t minor = 0;
	int digits = 0;
	while (*p >= '0' && *p <= '9' && digits < 3) {
		minor = minor * 10 + (uint32_t)(*p++ - '0');
		digits++;
	}
	return digits ? (3u << 24) | (minor << 16) : 0;
}

static int probe_runtime(sp_python *py, const elf_syms *s, uint64_t bias, const char *path)
{
	sp_py_mem *m = &py->w.mem;
	uint64_t rt = s->runtime ? s->runtime : s->runtime_section;
	if (!rt || !s->code_type)
		return sp_error(STACKPULSE_ENOTFOUND, "%s: no _PyRuntime or PyCode_Type", path);
	py->runtime = bias + rt;
	uint8_t dbg[SP_PY_DEBUG_OFFSETS_READ];
	memset(dbg, 0, sizeof(dbg));
	/* Not past the object: 3.10's _PyRuntime is only 672 bytes. */
	uint32_t dlen = s->runtime_size >= 64 && s->runtime_size < sizeof(dbg)
	                        ? (uint32_t)s->runtime_size
	                        : (uint32_t)sizeof(dbg);
	sp_py_iov iov = { py->runtime, dbg, dlen, 0 };
	int rc = sp_py_mem_read(m, &iov, 1);
	if (rc == -ESRCH)
		return rc;
	if (rc)
		return sp_error(STACKPULSE_ENOTFOUND, "%s: _PyRuntime unreadable", path);
	uint32_t version = 0;
	if (s->version) {
		uint8_t v[4];
		sp_py_iov vi = { bias + s->version, v, 4, 0 };
		if (sp_py_mem_read(m, &vi, 1) == 0)
			version = sp_le32(v);
	}
	if (!version && sp_py_has_debug_cookie(dbg, dlen))
		version = (uint32_t)sp_le64(dbg + 8);
	if (!version)
		version = version_from_name(path);
	if ((version >> 24) != 3 || ((version >> 16) & 0xff) < SP_PY_MIN_MINOR)
		return sp_py_unsupported(path, version);
	if (((version >> 16) & 0xff) >= 13)
		rc = sp_py_layout_from_debug(dbg, dlen, &py->layout);
	else
		rc = sp_py_layout_from_table(version, &py->layout);
	if (rc)
		return sp_error_context(rc, "%s", path);
	py->layout.version = version;
	py->w.types.code = bias + s->code_type;
	py->w.types.frame = s->frame_type ? bias + s->frame_type : 0;
	py->w.types.unicode = s->unicode_type ? bias + s->unicode_type : 0;
	py->w.types.bytes = s->bytes_type ? bias + s->bytes_type : 0;
	py->w.types.init_cleanup = s->init_cleanup ? bias + s->init_cleanup : 0;
	py->w.types.dict = s->dict_type ? bias + s->dict_type : 0;
	py->w.types.long_ = s->long_type ? bias + s->long_type : 0;
	py->w.types.module = s->module_type ? bias + s->module_type : 0;
	py->neval = s->neval;
	for (uint32_t i = 0; i < s->neval; i++) {
		py->eval[i].start = s->eval[i].start + bias;
		py->eval[i].end = s->eval[i].end + bias;
	}
	if (py->layout.tstate_native_thread_id == SP_PY_NONE) {
#if defined(__x86_64__)
		py->w.pthread_tid = GLIBC_X86_64_PTHREAD_TID;
#elif defined(__aarch64__)
		py->w.pthread_tid = GLIBC_AARCH64_PTHREAD_TID;
#endif
	}
	return 0;
}

/* The mapped file is opened as the target sees it (map_files, else the path
 * inside the target's root, never our own root) by the one safe open. */
int sp_python_probe_file(pid_t pid, const char *path, uint64_t start, uint64_t end, uint64_t pgoff,
                         uint64_t inode, sp_python **out)
{
	*out = NULL;
	uint64_t size = 0;
	int fd = sp_elf_open_mapped(pid, start, end, path, inode, &size);
	if (fd < 0)
		return sp_error_context(fd == -ENOENT ? STACKPULSE_ENOTFOUND : fd,
		                        "open %s of process %d", path, (int)pid);
	/* The bounded reader first (header, PT_LOADs): libelf only parses
	 * what passed it. */
	sp_elf_info info;
	elf_syms s;
	int rc = sp_elf_read_info(fd, size, &info);
	if (rc == 0 && info.elf_class != ELFCLASS64)
		rc = STACKPULSE_EUNSUPPORTED;
	if (rc == 0)
		rc = elf_scan(fd, &s);
	close(fd);
	if (rc)
		return rc == STACKPULSE_EFORMAT || rc == STACKPULSE_EUNSUPPORTED
		               ? sp_error(STACKPULSE_ENOTFOUND, "%s: not a CPython ELF", path)
		               : rc;
	if (!(s.runtime || s.runtime_section) || !s.code_type)
		return sp_error(STACKPULSE_ENOTFOUND, "%s: no CPython symbols", path);
	uint64_t bias = 0;
	if ((rc = load_bias(&info, start, pgoff, &bias)) != 0)
		return rc;
	sp_python *py = sp_calloc(1, sizeof(*py));
	if (!py)
		return sp_error(-ENOMEM, "python reader");
	py->pid = pid;
	sp_target_mem_init(&py->mem, pid);
	py->w.layout = &py->layout;
	py->w.mem.read = read_live;
	py->w.mem.ctx = py;
	py->w.mem.pages = sp_malloc((size_t)SP_PY_PAGES * SP_PY_PAGE);
	py->w.mem.verify = sp_malloc((size_t)SP_PY_MAX_LIVE * SP_PY_PAGE);
	if (!py->w.mem.pages || !py->w.mem.verify) {
		sp_python_free(py);
		return sp_error(-ENOMEM, "python reader pages");
	}
	if ((rc = sp_py_codes_new(&py->w.codes)) != 0 ||
	    (rc = probe_runtime(py, &s, bias, path)) != 0) {
		sp_python_free(py);
		return rc;
	}
	*out = py;
	return 0;
}

typedef struct probe_walk {
	pid_t pid;
	sp_python **out;
	int rc, best;
	char last[MAPS_PATH_MAX]; /* One try per file. */
} probe_walk;

static int probe_map(void *ctx, const sp_proc_map *m)
{
	probe_walk *w = ctx;
	if (!m->inode || m->path[0] != '/' || !sp_python_candidate(m->path) ||
	    strcmp(m->path, w->last) == 0)
		return 0;
	snprintf(w->last, sizeof(w->last), "%s", m->path);
	w->rc = sp_python_probe_file(w->pid, m->path, m->start, m->end, m->pgoff, m->inode, w->out);
	if (w->rc == 0 || w->rc == -ESRCH || w->rc == -ENOMEM)
		return 1;
	if (w->best == STACKPULSE_ENOTFOUND)
		w->best = w->rc; /* e.g. EUNSUPPORTED says more than "not found" */
	return 0;
}

int sp_python_probe(pid_t pid, sp_python **out)
{
	*out = NULL;
	probe_walk w = { pid, out, STACKPULSE_ENOTFOUND, STACKPULSE_ENOTFOUND, "" };
	int rc = sp_proc_maps(pid, probe_map, &w);
	if (rc < 0)
		return sp_error(rc, "read the maps of process %d", (int)pid);
	if (w.rc == 0 || w.rc == -ESRCH || w.rc == -ENOMEM)
		return w.rc;
	return w.best == STACKPULSE_ENOTFOUND
	               ? sp_error(STACKPULSE_ENOTFOUND, "process %d is not CPython", (int)pid)
	               : w.best;
}

void sp_python_free(sp_python *py)
{
	if (!py)
		return;
	sp_target_mem_close(&py->mem);
	sp_py_codes_free(py->w.codes);
	sp_free(py->w.mem.pages);
	sp_free(py->w.mem.verify);
	sp_free(py->threads);
	sp_free(py->pend);
	sp_free(py->names);
	sp_free(py->named);
	sp_free(py);
}

uint32_t sp_python_version(const sp_python *py)
{
	return py->layout.version;
}

const sp_py_range *sp_python_eval_ranges(const sp_python *py, uint32_t *n)
{
	*n = py->neval;
	return py->eval;
}

sp_py_code *sp_python_code(sp_python *py, uint32_t id)
{
	return sp_py_codes_get(py->w.codes, id);
}

void sp_python_set_sample_time(sp_python *py, uint64_t ns)
{
	py->sample_ns = ns;
}

void sp_python_set_totals(sp_python *py, sp_python_stats *totals)
{
	py->totals = totals;
	sp_py_codes_set_budget(py->w.codes, 0, totals ? &totals->code_bytes : NULL,
	                       totals ? &totals->code_bytes_peak : NULL, 0);
}

/* Adds what one read cost (@p now minus @p before) to the totals. */
static void add_totals(sp_python_stats *t, const sp_python_stats *now,
                       const sp_python_stats *before)
{
	t->stacks += now->stacks - before->stacks;
	t->failed += now->failed - before->failed;
	t->frames += now->frames - before->frames;
	t->truncated += now->truncated - before->truncated;
	t->torn += now->torn - before->torn;
	t->misplaced += now->misplaced - before->misplaced;
	t->anchored += now->anchored - before->anchored;
	t->anchor_misses += now->anchor_misses - before->anchor_misses;
	t->read_calls += now->read_calls - before->read_calls;
	t->rescans += now->rescans - before->rescans;
	t->ns += now->ns - before->ns;
	t->codes_evicted += now->codes_evicted - before->codes_evicted;
	t->codes_refused += now->codes_refused - before->codes_refused;
	t->delayed += now->delayed - before->delayed;
	t->delay_ns += now->delay_ns - before->delay_ns;
	t->name_reads += now->name_reads - before->name_reads;
	t->names_ns += now->names_ns - before->names_ns;
	if (now->delay_max_ns > t->delay_max_ns)
		t->delay_max_ns = now->delay_max_ns;
}

/* ---- threads and stacks ------------------------------------------------------------ */

/* A thread state as a rescan found it; @p order is its place in the list
 * (CPython links new thread states at the head: higher is older). */
typedef struct found_ts {
	int64_t tid;
	uint64_t addr, ident;
	uint32_t order;
} found_ts;

static int by_tid_then_age(const void *a, const void *b)
{
	const found_ts *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->order > y->order ? -1 : x->order < y->order; /* oldest first */
}

/* Rebuilds the tid -> thread state map from the interpreters' lists. A
 * tid claimed by several thread states belongs to the oldest: the newer
 * ones were made by that thread for threads it starts (3.10/3.11 give
 * them its own tid until the new thread binds them), and wait in pend
 * with those that have no tid yet. */
static int rescan(sp_python *py)
{
	uint64_t *addrs = sp_malloc(SP_PY_MAX_THREADS * sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	uint32_t n = 0;
	py->stats.rescans++;
	py->last_scan_ns = sp_mono_ns();
	py->scanned = 1;
	py->w.mem.stack = NULL;
	sp_py_mem_reset(&py->w.mem);
	/* The list's heads first: a change after this is seen by the next
	 * list_changed. */
	uint64_t interp0 = 0, head0 = 0, serial0 = 0;
	int rc = sp_py_list_head(&py->w, py->runtime, 0, &interp0, NULL);
	if (rc == 0 && interp0)
		rc = sp_py_list_head(&py->w, py->runtime, interp0, &head0, &serial0);
	if (rc == 0)
		rc = sp_py_list_tstates(&py->w, py->runtime, addrs, SP_PY_MAX_THREADS, &n);
	if (rc == -ESRCH || rc == -ENOMEM) {
		sp_free(addrs);
		return rc;
	}
	/* A list torn by a concurrent thread exit still yields its prefix. */
	int64_t *tids = n ? sp_malloc(n * sizeof(*tids)) : NULL;
	uint64_t *idents = n ? sp_malloc(n * sizeof(*idents)) : NULL;
	found_ts *f = n ? sp_malloc(n * sizeof(*f)) : NULL;
	tid_entry *t = n ? sp_malloc(n * sizeof(*t)) : NULL;
	uint64_t *pend = n ? sp_malloc(n * sizeof(*pend)) : NULL;
	rc = n && (!tids || !idents || !f || !t || !pend) ? -ENOMEM : 0;
	if (rc == 0 && n)
		rc = sp_py_read_tids(&py->w, addrs, n, tids, idents);
	if (rc == -ESRCH || rc == -ENOMEM) {
		sp_free(addrs);
		sp_free(tids);
		sp_free(idents);
		sp_free(f);
		sp_free(t);
		sp_free(pend);
		return rc;
	}
	uint32_t nf = 0, k = 0, np = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (rc != 0 || tids[i] <= 0)
			pend[np++] = addrs[i];
		else
			f[nf++] = (found_ts){ tids[i], addrs[i], idents[i], i };
	}
	if (nf > 1)
		qsort(f, nf, sizeof(*f), by_tid_then_age);
	for (uint32_t i = 0; i < nf; i++) {
		if (i > 0 && f[i].tid == f[i - 1].tid) {
			pend[np++] = f[i].addr;
			continue;
		}
		memset(&t[k], 0, sizeof(t[k]));
		t[k].tid = f[i].tid;
		t[k].tstate = f[i].addr;
		t[k].ident = f[i].ident;
		k++;
	}
	sp_free(addrs);
	sp_free(tids);
	sp_free(idents);
	sp_free(f);
	/* A thread state not in the last map: its thread wants a name. The
	 * new map is sorted by tid. */
	uint32_t kept_old = 0;
	for (uint32_t i = 0; i < py->nthreads; i++) {
		uint32_t lo = 0, hi = k;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (t[mid].tid < py->threads[i].tid)
				lo = mid + 1;
			else
				hi = mid;
		}
		kept_old += lo < k && t[lo].tid == py->threads[i].tid &&
		            t[lo].tstate == py->threads[i].tstate;
	}
	if (k > kept_old)
		py->names_new = NAMES_NEW_TRIES;
	sp_free(py->threads);
	sp_free(py->pend);
	py->threads = t;
	py->nthreads = k;
	py->pend = pend;
	py->npend = np;
	py->interp0 = interp0;
	py->head0 = head0;
	py->serial0 = serial0;
	return 0;
}

/* 1 when the thread list may hold a thread it did not hold at the last
 * rescan, so a tid it did not know is worth a rescan before RESCAN_NS: a
 * new thread state (a thread started, or the interpreter came up), told
 * by the list's head and its count of thread states made (a new thread
 * state often takes a freed one's address). One read; a thread without
 * Python state (a native helper thread) costs that per sample. */
static int list_changed(sp_python *py)
{
	uint64_t head = 0, serial = 0;
	py->w.mem.stack = NULL;
	sp_py_mem_reset(&py->w.mem);
	if (sp_py_list_head(&py->w, py->runtime, py->interp0, &head, &serial) != 0)
		return 0;
	return py->interp0 ? head != py->head0 || serial != py->serial0 : head != 0;
}

static tid_entry *lookup_entry(const sp_python *py, pid_t tid)
{
	for (uint32_t i = 0; i < py->nthreads; i++)
		if (py->threads[i].tid == tid)
			return &py->threads[i];
	return NULL;
}

static uint64_t lookup(const sp_python *py, pid_t tid)
{
	const tid_entry *e = lookup_entry(py, tid);
	return e ? e->tstate : 0;
}

/* Reads the thread states that had no tid of their own at the last
 * rescan again (one batched read): a thread that started since has bound
 * its own. Those now carrying a tid nobody claims join the map. Returns
 * the thread state of @p tid, or 0. */
static uint64_t bind_pending(sp_python *py, pid_t tid)
{
	int64_t tids[SP_PY_MAX_IOV];
	uint64_t idents[SP_PY_MAX_IOV], found = 0;
	py->w.mem.stack = NULL;
	sp_py_mem_reset(&py->w.mem);
	for (uint32_t at = 0; at < py->npend;) {
		uint32_t k = py->npend - at < SP_PY_MAX_IOV ? py->npend - at : SP_PY_MAX_IOV;
		if (sp_py_read_tids(&py->w, py->pend + at, k, tids, idents) != 0)
			return found;
		uint32_t kept = 0;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t addr = py->pend[at + i];
			if (tids[i] <= 0 || lookup_entry(py, (pid_t)tids[i])) {
				py->pend[at + kept++] = addr; /* still its starter's */
				continue;
			}
			/* py->threads has room: it was sized for every thread
			 * state of the last rescan, and pend holds the rest. */
			tid_entry *e = &py->threads[py->nthreads++];
			memset(e, 0, sizeof(*e));
			e->tid = tids[i];
			e->tstate = addr;
			e->ident = idents[i];
			py->names_new = NAMES_NEW_TRIES;
			if (tids[i] == tid)
				found = addr;
		}
		memmove(py->pend + at + kept, py->pend + at + k,
		        (py->npend - at - k) * sizeof(*py->pend));
		py->npend -= k - kept;
		at += kept;
	}
	return found;
}

/* Reads the thread state's pages together with those its last walk read
 * frames from, in one call: the frames are then seen as of the same
 * instant as the thread state's top frame pointer. */
static void fetch_hot(sp_python *py, pid_t tid, uint64_t addr)
{
	const tid_entry *e = lookup_entry(py, tid);
	uint64_t pages[SP_PY_HOT + 2];
	uint32_t k = 0;
	uint64_t a = addr & ~(uint64_t)(SP_PY_PAGE - 1);
	uint64_t b = (addr + py->layout.tstate_read - 1) & ~(uint64_t)(SP_PY_PAGE - 1);
	if (!e || !e->nhot || !sp_py_plausible(addr, 8))
		return;
	pages[k++] = a;
	if (b != a)
		pages[k++] = b;
	for (uint32_t i = 0; i < e->nhot; i++)
		pages[k++] = e->hot[i];
	sp_py_mem_fetch(&py->w.mem, pages, k);
}

/* Points the reader at the sample's stack copy, with an empty page cache. */
static void mem_begin(sp_python *py, const uint8_t *stack, size_t stack_len, uint64_t stack_start)
{
	sp_py_mem_reset(&py->w.mem);
	py->w.mem.stack = stack;
	py->w.mem.stack_len = stack ? stack_len : 0;
	py->w.mem.stack_start = stack_start;
}

/* One walk: from the frame the stack copy anchors (3.10), else from the
 * thread state's top frame @p top. */
static int walk(sp_python *py, uint64_t top, sp_py_frame *out, uint32_t max, uint32_t *n,
                int *truncated)
{
	uint64_t anchor = 0;
	int rc = sp_py_anchor(&py->w, &anchor);
	if (rc == -ESRCH || rc == -ENOMEM)
		return rc;
	if (rc == 0) {
		py->stats.anchored++;
		top = anchor;
	}
	if (!top)
		return 0;
	return sp_py_walk(&py->w, top, out, max, n, truncated);
}

/* Finds the thread state of @p tid (rescanning the thread list when it is
 * unknown or stale) and reads it into @p ts, with the sample's stack copy
 * (3.11/3.12 reach the top frame through tstate->cframe, which lives on
 * the C stack: so it is the sample's). */
static int find_tstate(sp_python *py, pid_t tid, uint64_t t0, const uint8_t *stack,
                       size_t stack_len, uint64_t stack_start, uint64_t *ts_addr, sp_py_tstate *ts)
{
	uint64_t addr = lookup(py, tid);
	if (!addr && py->npend)
		addr = bind_pending(py, tid);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!addr) {
			if (attempt == 0 && py->scanned && t0 - py->last_scan_ns < RESCAN_NS &&
			    !list_changed(py))
				return STACKPULSE_ENOTFOUND;
			int rc = rescan(py);
			if (rc != 0)
				return rc;
			addr = lookup(py, tid);
			if (!addr)
				return STACKPULSE_ENOTFOUND;
		}
		mem_begin(py, stack, stack_len, stack_start);
		fetch_hot(py, tid, addr);
		int rc = sp_py_read_tstate(&py->w, addr, ts);
		if (rc == -ESRCH)
			return rc;
		if (rc == 0 && ts->tid == tid) {
			*ts_addr = addr;
			return 0;
		}
		/* The thread state was freed or reused: rescan once. */
		addr = 0;
		py->last_scan_ns = 0;
	}
	return STACKPULSE_ENOTFOUND;
}

int sp_python_read_stack(sp_python *py, pid_t tid, const uint8_t *stack, size_t stack_len,
                         uint64_t stack_start, sp_py_frame *out, uint32_t max, uint32_t *n,
                         int *truncated)
{
	uint64_t t0 = sp_mono_ns();
	sp_python_stats before = py->stats;
	uint64_t torn0 = py->w.mem.torn, misplaced0 = py->w.mem.misplaced,
	         misses0 = py->w.anchor_misses;
	*n = 0;
	*truncated = 0;
	py->mem.via_tid = tid;
	py->stats.stacks++;
	sp_py_codes_walk_begin(py->w.codes);
	if (py->sample_ns && t0 >= py->sample_ns) {
		uint64_t d = t0 - py->sample_ns;
		py->stats.delayed++;
		py->stats.delay_ns += d;
		if (d > py->stats.delay_max_ns)
			py->stats.delay_max_ns = d;
	}
	py->sample_ns = 0;
	uint64_t ts_addr = 0;
	sp_py_tstate ts;
	int rc = find_tstate(py, tid, t0, stack, stack_len, stack_start, &ts_addr, &ts);
	if (rc)
		goto done;
	rc = walk(py, ts.frame, out, max, n, truncated);
	/* No valid frame at all: the activation named by tstate->cframe may
	 * have ended between the reads of the pointer and of the cframe. */
	int no_top = rc == 0 && *n == 0 && *truncated && !py->w.lost_caller;
	int anchored = py->stats.anchored != before.anchored;
	/* The stack changed while it was read (or a generator yielded and
	 * dropped its caller): again, anchored again when the copy allows
	 * (3.10), else from the thread's current top frame (with the copy
	 * again after a stale cframe). Each try is a fresh look at a target
	 * that changes every few microseconds, so a few of them rarely all
	 * fail; then give up cleanly (a cut chain stays marked cut). */
	/* A generator that lost its caller: its walk is cut but names the
	 * sample's leaf. A later try must find the same leaf to replace it,
	 * else the try would move the sample to whatever runs at read time
	 * (the generator's consumer, as often as not). */
	uint32_t ncut = 0;
	if (rc == 0 && py->w.lost_caller && *n > 0) {
		ncut = *n < SP_PY_MAX_DEPTH ? *n : SP_PY_MAX_DEPTH;
		memcpy(py->cut, out, ncut * sizeof(*out));
	}
	for (int again = 0; again < READ_TRIES - 1 &&
	                    (rc == STACKPULSE_ESTATE || (rc == 0 && py->w.lost_caller) || no_top);
	     again++) {
		mem_begin(py, anchored || (no_top && again == 0) ? stack : NULL, stack_len,
		          stack_start);
		/* The last try: a caller that moves on while it is read (fast
		 * recursion) no longer refuses the walk; links and code must
		 * still hold. It is the last resort: a loose walk may, rarely,
		 * pair a recursion's leaf side with an earlier call's root side
		 * (docs/python.md, data stack geometry). */
		py->w.loose_verify = again == READ_TRIES - 2;
		rc = sp_py_read_tstate(&py->w, ts_addr, &ts);
		if (rc == 0 && ts.tid == tid)
			rc = anchored ? walk(py, ts.frame, out, max, n, truncated)
			              : (ts.frame ? sp_py_walk(&py->w, ts.frame, out, max, n,
			                                       truncated)
			                          : 0);
		py->w.loose_verify = 0;
		if (rc == -ESRCH || rc == -ENOMEM)
			break;
		if (rc != 0 || ts.tid != tid)
			rc = STACKPULSE_ESTATE;
		if (ts.tid != tid)
			break; /* the thread state was reused: no try helps */
		no_top = rc == 0 && *n == 0 && *truncated && !py->w.lost_caller;
		if (ncut && rc == 0 && (*n == 0 || out[0].code != py->cut[0].code)) {
			py->w.lost_caller = 1; /* another leaf: try again */
			*truncated = 1;
		}
	}
	if (ncut && (rc != 0 || py->w.lost_caller)) {
		/* No whole chain at the sample's leaf: the first walk, cut. */
		memcpy(out, py->cut, ncut * sizeof(*out));
		*n = ncut;
		*truncated = 1;
		rc = 0;
	}
	if (rc == STACKPULSE_ESTATE) {
		*n = 0;
		*truncated = 1;
		rc = 0;
	}
	py->stats.frames += *n;
	py->stats.truncated += (uint64_t)(*truncated != 0);
	tid_entry *e = lookup_entry(py, tid);
	if (e) {
		memcpy(e->hot, py->w.hot, sizeof(e->hot));
		e->nhot = py->w.nhot;
	}
done:
	py->w.mem.stack = NULL;
	py->stats.failed += (uint64_t)(rc != 0);
	py->stats.torn += py->w.mem.torn - torn0;
	py->stats.misplaced += py->w.mem.misplaced - misplaced0;
	py->stats.anchor_misses += py->w.anchor_misses - misses0;
	py->stats.ns += sp_mono_ns() - t0;
	sp_py_codes_usage cu;
	sp_py_codes_get_usage(py->w.codes, &cu);
	py->stats.codes_evicted = cu.evicted;
	py->stats.codes_refused = cu.refused;
	if (py->totals)
		add_totals(py->totals, &py->stats, &before);
	return rc;
}

/* ---- thread names ------------------------------------------------------------------ */

static int by_ident(const void *a, const void *b)
{
	uint64_t x = ((const sp_py_tname *)a)->ident, y = ((const sp_py_tname *)b)->ident;
	return x < y ? -1 : x > y;
}

static int by_named_tid(const void *a, const void *b)
{
	int64_t x = ((const named *)a)->tid, y = ((const named *)b)->tid;
	return x < y ? -1 : x > y;
}

/* The entry of @p tid in the named list (sorted by tid), or NULL. */
static named *named_find(sp_python *py, int64_t tid)
{
	named key;
	key.tid = tid;
	return py->nnamed ? bsearch(&key, py->named, py->nnamed, sizeof(*py->named), by_named_tid)
	                  : NULL;
}

/* Offers the name of @p d to @p fn: 0 when taken or not now, else fn's
 * error. */
static int offer(sp_python *py, named *d, sp_python_name_fn fn, void *ctx)
{
	int rc = fn(ctx, (pid_t)d->tid, d->name);
	if (rc == 0) {
		d->taken = 1;
		py->nuntaken--;
	}
	return rc < 0 ? rc : 0;
}

int sp_python_thread_names(sp_python *py, uint64_t now, pid_t tid, int force, sp_python_name_fn fn,
                           void *ctx)
{
	uint64_t since = now - py->names_last_ns;
	uint64_t backoff = SP_PYTHON_NAMES_NEW_NS
	                   << (py->names_new ? 2 * (NAMES_NEW_TRIES - py->names_new) : 0);
	if (!force && py->names_last_ns && !(py->names_new && since >= backoff) &&
	    since < SP_PYTHON_NAMES_NS) {
		/* Not due: a name read before its thread could take it. */
		named *d = py->nuntaken ? named_find(py, tid) : NULL;
		return d && !d->taken ? offer(py, d, fn, ctx) : 0;
	}
	if (!py->layout.names || !py->interp0)
		return 0;
	if (!py->names) {
		py->names = sp_malloc(SP_PY_MAX_THREADS * sizeof(*py->names));
		if (!py->names)
			return -ENOMEM;
	}
	uint64_t t0 = sp_mono_ns();
	sp_python_stats before = py->stats;
	py->names_last_ns = now;
	py->stats.name_reads++;
	py->w.mem.stack = NULL;
	sp_py_mem_reset(&py->w.mem);
	uint32_t n = 0;
	int rc = sp_py_thread_names(&py->w, py->interp0, &py->names_cache, py->names,
	                            SP_PY_MAX_THREADS, &n);
	if (rc == -ENOMEM)
		return rc;
	if (rc != 0)
		n = 0; /* gone, or names not readable here: the OS names stay */
	if (n > 1)
		qsort(py->names, n, sizeof(*py->names), by_ident);
	/* The new list: each thread of the map with the name just read (a
	 * name that changed is to be taken again), or the one it had. */
	named *list = py->nthreads ? sp_malloc(py->nthreads * sizeof(*list)) : NULL;
	if (py->nthreads && !list)
		return -ENOMEM;
	uint32_t nlist = 0, nameless = 0;
	for (uint32_t i = 0; i < py->nthreads; i++) {
		const tid_entry *e = &py->threads[i];
		sp_py_tname key;
		key.ident = e->ident;
		const sp_py_tname *found =
		        n && e->ident ? bsearch(&key, py->names, n, sizeof(*py->names), by_ident)
		                      : NULL;
		const named *old = named_find(py, e->tid);
		nameless += !found;
		if (!found && !old)
			continue;
		named *d = &list[nlist++];
		d->tid = e->tid;
		if (found && !(old && strcmp(old->name, found->name) == 0)) {
			snprintf(d->name, sizeof(d->name), "%s", found->name);
			d->taken = 0;
		} else {
			memcpy(d->name, old->name, sizeof(d->name));
			d->taken = old->taken;
		}
	}
	if (nlist > 1)
		qsort(list, nlist, sizeof(*list), by_named_tid);
	sp_free(py->named);
	py->named = list;
	py->nnamed = nlist;
	py->nuntaken = 0;
	for (uint32_t i = 0; i < py->nnamed; i++)
		py->nuntaken += !py->named[i].taken;
	rc = 0;
	for (uint32_t i = 0; i < py->nnamed && rc == 0; i++)
		if (!py->named[i].taken)
			rc = offer(py, &py->named[i], fn, ctx);
	/* New threads enter threading._active once they run: look again
	 * while one of the map has no name yet. */
	if (py->names_new)
		py->names_new = nameless ? py->names_new - 1 : 0;
	py->stats.names_ns += sp_mono_ns() - t0;
	if (py->totals)
		add_totals(py->totals, &py->stats, &before);
	return rc;
}
