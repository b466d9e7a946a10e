/* Process and thread bookkeeping for the recorder. Spool indexes come from
 * the writer; this file keeps the pid/tid maps, mapping tables and unwind
 * spaces consistent with them through fork, exec, exit and pid reuse. */
#include "record/process_table.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/search.h"
#include "format/spool_format.h"
#include "io/elf.h"
#include "record/proc_scan.h"
#include "record/python.h"

#define MAX_PROCESSES (1u << 20)
#define MAX_THREADS   (1u << 22)

/* (path, inode) -> spool module, so build-ids are read once per file. */
struct sp_module_cache {
	uint64_t hash;
	uint64_t inode;
	char *path;
	uint32_t module;
	uint8_t build_id[SP_BUILD_ID_MAX];
	uint32_t build_id_len;
};

int sp_ptable_module_info(const sp_ptable *t, uint32_t module, const char **path,
                          const uint8_t **build_id, uint32_t *build_id_len)
{
	if (module >= t->capmodfirst || t->modfirst[module] == 0)
		return STACKPULSE_ENOTFOUND;
	const sp_module_cache *c = &t->modules[t->modfirst[module] - 1];
	*path = c->path;
	*build_id = c->build_id_len ? c->build_id : NULL;
	*build_id_len = c->build_id_len;
	return 0;
}

/* ---- integer map ---- */

static int imap_grow(sp_imap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	int32_t *nk = sp_calloc(ncap, sizeof(*nk));
	uint32_t *nv = sp_calloc(ncap, sizeof(*nv));
	if (!nk || !nv) {
		sp_free(nk);
		sp_free(nv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] <= 0)
			continue;
		size_t j = (size_t)sp_hash64((uint64_t)m->keys[i]) & (ncap - 1);
		while (nk[j] != 0)
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	sp_free(m->keys);
	sp_free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	m->used = 0;
	for (size_t i = 0; i < ncap; i++)
		m->used += nk[i] != 0;
	return 0;
}

/* Deleted slots hold -1 so probe chains stay intact. */
static uint32_t *imap_find(const sp_imap *m, int32_t key)
{
	if (!m->cap)
		return NULL;
	size_t j = (size_t)sp_hash64((uint64_t)key) & (m->cap - 1);
	for (size_t n = 0; n < m->cap && m->keys[j] != 0; n++) {
		if (m->keys[j] == key)
			return &m->vals[j];
		j = (j + 1) & (m->cap - 1);
	}
	return NULL;
}

static int imap_put(sp_imap *m, int32_t key, uint32_t val)
{
	uint32_t *v = imap_find(m, key);
	if (v) {
		*v = val;
		return 0;
	}
	if ((m->used + 1) * 2 > m->cap) {
		int rc = imap_grow(m);
		if (rc)
			return rc;
	}
	size_t j = (size_t)sp_hash64((uint64_t)key) & (m->cap - 1);
	while (m->keys[j] > 0)
		j = (j + 1) & (m->cap - 1);
	if (m->keys[j] == 0)
		m->used++;
	m->keys[j] = key;
	m->vals[j] = val;
	return 0;
}

static void imap_del(sp_imap *m, int32_t key)
{
	uint32_t *v = imap_find(m, key);
	if (v)
		m->keys[v - m->vals] = -1;
}

static void imap_free(sp_imap *m)
{
	sp_free(m->keys);
	sp_free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- table ---- */

void sp_ptable_init(sp_ptable *t, sp_writer *w, sp_unwinder *u)
{
	memset(t, 0, sizeof(*t));
	t->w = w;
	t->u = u;
}

static void process_free(sp_process *p)
{
	if (!p)
		return;
	sp_unwind_space_free(p->space);
	sp_python_free(p->py);
	sp_free(p->maps);
	sp_free(p);
}

void sp_ptable_free(sp_ptable *t)
{
	for (size_t i = 0; i < t->nprocs; i++)
		process_free(t->procs[i]);
	sp_free(t->procs);
	sp_free(t->threads);
	imap_free(&t->by_pid);
	imap_free(&t->by_tid);
	for (size_t i = 0; i < t->nmodcache; i++)
		sp_free(t->modules[i].path);
	sp_free(t->modules);
	sp_free(t->modorder);
	sp_free(t->modfirst);
	memset(t, 0, sizeof(*t));
}

sp_process *sp_ptable_find(sp_ptable *t, pid_t pid)
{
	uint32_t *slot = imap_find(&t->by_pid, (int32_t)pid);
	return slot ? t->procs[*slot] : NULL;
}

sp_thread *sp_ptable_find_thread(sp_ptable *t, pid_t tid)
{
	uint32_t *slot = imap_find(&t->by_tid, (int32_t)tid);
	return slot ? &t->threads[*slot] : NULL;
}

uint32_t sp_ptable_slot(const sp_ptable *t, const sp_process *p)
{
	for (size_t i = t->nprocs; i-- > 0;)
		if (t->procs[i] == p)
			return (uint32_t)i;
	return SP_NONE;
}

/* Registers @p p (already holding its spool index) under its pid. */
static int insert_process(sp_ptable *t, sp_process *p)
{
	if (t->nprocs >= MAX_PROCESSES)
		return sp_error(STACKPULSE_ELIMIT, "more than %u processes", MAX_PROCESSES);
	if (t->nprocs == t->cap_procs) {
		size_t nc = t->cap_procs ? t->cap_procs * 2 : 8;
		sp_process **np = sp_realloc_array(t->procs, nc, sizeof(sp_process *));
		if (!np)
			return -ENOMEM;
		t->procs = np;
		t->cap_procs = nc;
	}
	int rc = imap_put(&t->by_pid, (int32_t)p->pid, (uint32_t)t->nprocs);
	if (rc)
		return rc;
	t->procs[t->nprocs++] = p;
	return 0;
}

/* Marks a live process with @p pid as gone (exit or a reused pid). */
static int retire_pid(sp_ptable *t, pid_t pid, uint64_t time_ns)
{
	sp_process *old = sp_ptable_find(t, pid);
	if (!old)
		return 0;
	imap_del(&t->by_pid, (int32_t)pid);
	if (old->exited)
		return 0;
	old->exited = 1;
	return sp_writer_exit(t->w, old->index, SP_NONE, time_ns);
}

static int new_process(sp_ptable *t, pid_t pid, uint32_t parent_slot, uint64_t time_ns,
                       const char *name, const char *cmdline, sp_process **out)
{
	int rc = retire_pid(t, pid, time_ns);
	if (rc)
		return rc;
	sp_process *p = sp_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->first_ns = time_ns;
	uint32_t parent = parent_slot == SP_NONE ? SP_NONE : t->procs[parent_slot]->index;
	rc = sp_writer_process(t->w, pid, parent, time_ns, name ? name : "", cmdline ? cmdline : "",
	                       &p->index);
	if (rc == 0)
		rc = insert_process(t, p);
	if (rc) {
		process_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int sp_ptable_add(sp_ptable *t, pid_t pid, uint32_t parent, uint64_t time_ns, const char *name,
                  const char *cmdline, sp_process **out)
{
	sp_process *p;
	int rc = new_process(t, pid, parent, time_ns, name, cmdline, &p);
	if (rc)
		return rc;
	rc = sp_unwind_space_new(t->u, pid, &p->space);
	if (rc)
		return rc;
	*out = p;
	return 0;
}

int sp_ptable_thread(sp_ptable *t, sp_process *p, pid_t tid, uint64_t time_ns, const char *name,
                     sp_thread **out)
{
	sp_thread *th = sp_ptable_find_thread(t, tid);
	uint32_t pslot = sp_ptable_slot(t, p);
	if (th && th->process == pslot && !th->exited) {
		*out = th;
		return 0;
	}
	if (t->nthreads >= MAX_THREADS)
		return sp_error(STACKPULSE_ELIMIT, "more than %u threads", MAX_THREADS);
	if (t->nthreads == t->cap_threads) {
		size_t nc = t->cap_threads ? t->cap_threads * 2 : 16;
		sp_thread *nt = sp_realloc_array(t->threads, nc, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		t->threads = nt;
		t->cap_threads = nc;
	}
	char comm[SP_PROC_NAME_MAX];
	if (!name) {
		sp_proc_comm(p->pid, tid, comm, sizeof(comm));
		name = comm;
	}
	if (!t->threads)
		return sp_error(STACKPULSE_EINTERNAL, "thread table missing");
	sp_thread *nt = &t->threads[t->nthreads];
	memset(nt, 0, sizeof(*nt));
	nt->tid = tid;
	nt->process = pslot;
	int rc = sp_writer_thread(t->w, p->index, tid, time_ns, name, &nt->index);
	if (rc)
		return rc;
	rc = imap_put(&t->by_tid, (int32_t)tid, (uint32_t)t->nthreads);
	if (rc)
		return rc;
	t->nthreads++;
	p->live_threads++;
	*out = nt;
	return 0;
}

int sp_ptable_rename(sp_ptable *t, sp_process *p, pid_t tid, const char *name, uint64_t time_ns)
{
	sp_thread *th = sp_ptable_find_thread(t, tid);
	if (!th || th->process != sp_ptable_slot(t, p))
		return sp_ptable_thread(t, p, tid, time_ns, name, &th);
	return sp_writer_thread_name(t->w, th->index, time_ns, name);
}

/* ---- mappings ---- */

static int module_key_cmp(const sp_module_cache *c, uint64_t hash, uint64_t inode, const char *path)
{
	if (c->hash != hash)
		return c->hash < hash ? -1 : 1;
	if (c->inode != inode)
		return c->inode < inode ? -1 : 1;
	return strcmp(c->path, path);
}

/* Position in t->modorder of the first cache entry whose key is not below
 * (hash, inode, path): a binary search, so a process mapping thousands of
 * files costs log(files) per mapping. */
static size_t module_lower_bound(const sp_ptable *t, uint64_t hash, uint64_t inode,
                                 const char *path)
{
	size_t lo = 0, hi = t->nmodcache;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (module_key_cmp(&t->modules[t->modorder[mid]], hash, inode, path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Room for one more cache entry, in the entries, the order and the
 * module -> entry index (for spool module @p module). */
static int module_cache_reserve(sp_ptable *t, uint32_t module)
{
	if (t->nmodcache == t->capmodcache) {
		size_t nc = t->capmodcache ? t->capmodcache * 2 : 16;
		sp_module_cache *nm = sp_realloc_array(t->modules, nc, sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		t->modules = nm;
		uint32_t *no = sp_realloc_array(t->modorder, nc, sizeof(*no));
		if (!no)
			return -ENOMEM;
		t->modorder = no;
		t->capmodcache = nc;
	}
	if (module >= t->capmodfirst) {
		size_t nc = t->capmodfirst ? t->capmodfirst : 16;
		while (nc <= module)
			nc *= 2;
		uint32_t *nf = sp_realloc_array(t->modfirst, nc, sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		memset(nf + t->capmodfirst, 0, (nc - t->capmodfirst) * sizeof(*nf));
		t->modfirst = nf;
		t->capmodfirst = nc;
	}
	return 0;
}

/* Finds or creates the module of a mapping; the build-id pointer and length end up pointing
 * at the build-id (from the record, else read from the file once). */
static int module_for(sp_ptable *t, pid_t pid, uint64_t start, uint64_t end, const char *path,
                      const uint8_t **bidp, uint32_t *bid_lenp, uint64_t inode, uint32_t *module)
{
	const uint8_t *bid = *bidp;
	uint32_t bid_len = *bid_lenp;
	uint64_t h = sp_hash_combine(sp_hash_bytes(path, strlen(path)), inode);
	size_t pos = module_lower_bound(t, h, inode, path);
	if (pos < t->nmodcache) {
		sp_module_cache *c = &t->modules[t->modorder[pos]];
		if (module_key_cmp(c, h, inode, path) == 0) {
			*module = c->module;
			*bidp = c->build_id_len ? c->build_id : NULL;
			*bid_lenp = c->build_id_len;
			return 0;
		}
	}
	if (t->nmodcache >= SP_PTABLE_MAX_FILES)
		return STACKPULSE_ELIMIT;
	uint8_t buf[SP_BUILD_ID_MAX];
	if (!bid || bid_len == 0) {
		bid_len = 0;
		if (path[0] == '/' &&
		    sp_elf_build_id_mapped(pid, start, end, path, inode, buf, &bid_len) == 0)
			bid = buf;
		else
			bid_len = 0;
	}
	int rc = sp_writer_module(t->w, path, bid_len ? bid : NULL, bid_len, module);
	if (rc)
		return rc;
	if ((rc = module_cache_reserve(t, *module)) != 0)
		return rc;
	char *copy = sp_strdup(path);
	if (!copy)
		return -ENOMEM;
	uint32_t idx = (uint32_t)t->nmodcache;
	sp_module_cache *c = &t->modules[t->nmodcache++];
	c->hash = h;
	c->inode = inode;
	c->path = copy;
	c->module = *module;
	c->build_id_len = bid_len;
	if (bid_len)
		memcpy(c->build_id, bid, bid_len);
	memmove(&t->modorder[pos + 1], &t->modorder[pos],
	        (t->nmodcache - 1 - pos) * sizeof(*t->modorder));
	t->modorder[pos] = idx;
	if (t->modfirst[*module] == 0)
		t->modfirst[*module] = idx + 1;
	*bidp = c->build_id_len ? c->build_id : NULL;
	*bid_lenp = c->build_id_len;
	return 0;
}

/* Anonymous code (JIT, //anon, heap) has no module. */
static int is_anonymous(const char *path)
{
	return path[0] == '\0' || strncmp(path, "//anon", 6) == 0 || strcmp(path, "[heap]") == 0 ||
	       strncmp(path, "[stack", 6) == 0 || strncmp(path, "[anon", 5) == 0;
}

/* Index of the first mapping of @p p whose end is above @p addr. */
static size_t maps_first_ending_after(const sp_process *p, uint64_t addr)
{
	size_t lo;
	SP_PARTITION_POINT(lo, p->nmaps, mid, p->maps[mid].end <= addr);
	return lo;
}

/* Inserts [start, end) into the sorted table, cutting what it overlaps.
 * The table must have room for two more entries (one split plus the new). */
static void maps_insert(sp_process *p, const sp_mapping *m)
{
	sp_mapping *v = p->maps;
	size_t i = maps_first_ending_after(p, m->start), j = i;
	sp_mapping head = { 0, 0, 0, SP_NONE }, tail = head;
	size_t have_head = 0, have_tail = 0;
	for (; j < p->nmaps && v[j].start < m->end; j++) {
		if (v[j].start < m->start) {
			head = v[j];
			head.end = m->start;
			have_head = 1;
		}
		if (v[j].end > m->end) {
			/* At most one old mapping can stick out on the right. */
			tail = v[j];
			tail.pgoff = v[j].pgoff + (m->end - v[j].start);
			tail.start = m->end;
			have_tail = 1;
		}
	}
	/* v[i, j) overlap the new mapping: replace them by head, new, tail. */
	size_t nnew = have_head + 1 + have_tail;
	memmove(&v[i + nnew], &v[j], (p->nmaps - j) * sizeof(*v));
	p->nmaps = p->nmaps - (j - i) + nnew;
	if (have_head)
		v[i++] = head;
	v[i++] = *m;
	if (have_tail)
		v[i] = tail;
}

/* A mapping that is not kept: what it overlaps can no longer be trusted,
 * so those entries turn anonymous (their pcs become unknown frames, never
 * another module's); nothing is inserted, so the table does not grow. */
static int maps_drop(sp_ptable *t, sp_process *p, uint64_t start, uint64_t end)
{
	for (size_t i = maps_first_ending_after(p, start); i < p->nmaps && p->maps[i].start < end;
	     i++)
		p->maps[i].module = SP_NONE;
	p->maps_dropped++;
	t->maps_dropped++;
	return 0;
}

int sp_ptable_mmap(sp_ptable *t, sp_process *p, uint64_t start, uint64_t len, uint64_t pgoff,
                   const char *path, const uint8_t *build_id, uint32_t build_id_len, uint64_t inode,
                   uint64_t time_ns)
{
	if (len == 0 || start + len < start)
		return 0;
	uint64_t end = start + len;
	sp_mapping m = { start, end, pgoff, SP_NONE };
	if (p->nmaps >= SP_PTABLE_MAX_MAPS)
		return maps_drop(t, p, start, end);
	int rc;
	const uint8_t *bid = build_id;
	uint32_t bid_len = build_id_len;
	if (!is_anonymous(path)) {
		rc = module_for(t, p->pid, start, end, path, &bid, &bid_len, inode, &m.module);
		if (rc == STACKPULSE_ELIMIT)
			return maps_drop(t, p, start, end);
		if (rc)
			return rc;
		rc = sp_writer_mapping(t->w, p->index, m.module, start, end, pgoff, time_ns);
		if (rc)
			return rc;
	}
	if (p->nmaps + 2 > p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 32;
		sp_mapping *nm = sp_realloc_array(p->maps, nc, sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		p->maps = nm;
		p->cap = nc;
	}
	maps_insert(p, &m);
	if (!p->py && sp_python_candidate(path))
		p->py_probed = 0; /* libpython may arrive by dlopen. */
	if (p->space)
		return sp_unwind_space_map(p->space, start, end, pgoff, path, bid, bid_len);
	return 0;
}

void sp_ptable_frame(const sp_process *p, uint64_t pc, struct stackpulse_raw_frame *f)
{
	f->kind = STACKPULSE_FRAME_UNKNOWN;
	f->module = SP_NONE;
	f->offset = pc;
	f->pycode = SP_NONE;
	f->line = 0;
	size_t lo = maps_first_ending_after(p, pc);
	if (lo < p->nmaps && p->maps[lo].start <= pc && pc < p->maps[lo].end &&
	    p->maps[lo].module != SP_NONE) {
		f->kind = STACKPULSE_FRAME_NATIVE;
		f->module = p->maps[lo].module;
		f->offset = pc - p->maps[lo].start + p->maps[lo].pgoff;
	}
}

/* ---- /proc snapshot ---- */

typedef struct scan_ctx {
	sp_ptable *t;
	sp_process *p;
	uint64_t time_ns;
} scan_ctx;

static int scan_map(void *ctx, const sp_proc_map *m)
{
	scan_ctx *s = ctx;
	char path[4096];
	/* Deleted files keep their name with " (deleted)"; the unwinder and the
	 * build-id reader go through map_files, so keep the name as shown. */
	snprintf(path, sizeof(path), "%s", m->path);
	return sp_ptable_mmap(s->t, s->p, m->start, m->end - m->start, m->pgoff, path, NULL, 0,
	                      m->inode, s->time_ns);
}

int sp_ptable_scan(sp_ptable *t, pid_t pid, uint32_t parent, uint64_t time_ns, sp_process **out)
{
	char comm[SP_PROC_NAME_MAX];
	char *cmdline = NULL;
	sp_proc_comm(0, pid, comm, sizeof(comm));
	int rc = sp_proc_cmdline(pid, &cmdline);
	if (rc == -ENOMEM)
		return rc;
	sp_process *p;
	rc = sp_ptable_add(t, pid, parent, time_ns, comm, cmdline ? cmdline : "", &p);
	sp_free(cmdline);
	if (rc)
		return rc;
	scan_ctx s = { t, p, time_ns };
	rc = sp_proc_maps(pid, scan_map, &s);
	if (rc == -ESRCH) {
		p->unscanned = 1; /* Gone already: nothing read. */
		rc = 0;
	} else if (rc) {
		return rc;
	}
	pid_t *tids = NULL;
	size_t n = 0;
	if (sp_proc_tasks(pid, &tids, &n) == 0) {
		for (size_t i = 0; i < n && rc == 0; i++) {
			sp_thread *th;
			rc = sp_ptable_thread(t, p, tids[i], time_ns, NULL, &th);
		}
		sp_free(tids);
		if (rc)
			return rc;
	}
	*out = p;
	return 0;
}

/* ---- life cycle ---- */

/* Gives @p p (first seen in its own records, /proc unreadable) what it
 * inherited at fork: the parent's mappings and unwind state, with its own
 * later mappings on top. */
static int inherit_maps(sp_ptable *t, const sp_process *parent, sp_process *p)
{
	size_t cap = parent->nmaps + 3 * p->nmaps + 2; /* Each insert may split one. */
	sp_mapping *maps = sp_calloc(cap, sizeof(*maps));
	sp_unwind_space *space = NULL;
	int rc = maps ? 0 : -ENOMEM;
	if (rc == 0)
		rc = parent->space ? sp_unwind_space_fork(parent->space, p->pid, &space)
		                   : sp_unwind_space_new(t->u, p->pid, &space);
	if (rc) {
		sp_free(maps);
		return rc;
	}
	if (parent->nmaps)
		memcpy(maps, parent->maps, parent->nmaps * sizeof(*maps));
	sp_mapping *own = p->maps;
	size_t nown = p->nmaps;
	p->maps = maps;
	p->nmaps = parent->nmaps;
	p->cap = cap;
	for (size_t i = 0; i < nown && rc == 0; i++) {
		maps_insert(p, &own[i]);
		const char *path;
		const uint8_t *bid;
		uint32_t bid_len;
		if (own[i].module != SP_NONE &&
		    sp_ptable_module_info(t, own[i].module, &path, &bid, &bid_len) == 0)
			rc = sp_unwind_space_map(space, own[i].start, own[i].end, own[i].pgoff,
			                         path, bid, bid_len);
	}
	sp_free(own);
	sp_unwind_space_free(p->space);
	p->space = space;
	p->unscanned = 0;
	return rc;
}

/* A FORK for a live pid first seen at or after the fork's time is the
 * child itself, met in its own records first (a FORK written late on
 * another CPU): link it to its parent rather than start a duplicate. */
static int adopt(sp_ptable *t, sp_process *parent, sp_process *p, pid_t tid, uint64_t time_ns)
{
	int rc = 0;
	if (p->unscanned && !p->execed)
		rc = inherit_maps(t, parent, p);
	if (rc == 0)
		rc = sp_writer_fork(t->w, parent->index, p->index, time_ns);
	sp_thread *th;
	if (rc == 0)
		rc = sp_ptable_thread(t, p, tid, time_ns, NULL, &th);
	return rc;
}

int sp_ptable_fork(sp_ptable *t, pid_t ppid, pid_t pid, pid_t tid, uint64_t time_ns)
{
	sp_process *parent = sp_ptable_find(t, ppid);
	if (!parent)
		return 0; /* Not followed; the child is scanned if it ever samples. */
	sp_process *early = sp_ptable_find(t, pid);
	if (early && early != parent && early->first_ns >= time_ns)
		return adopt(t, parent, early, tid, time_ns);
	uint32_t pslot = sp_ptable_slot(t, parent);
	/* The writer copies strings, so the parent's current name is reused by
	 * reading it back through /proc would race; the child starts unnamed
	 * and takes the parent's comm from its first COMM or scan. */
	char comm[SP_PROC_NAME_MAX];
	sp_proc_comm(0, pid, comm, sizeof(comm));
	if (!comm[0])
		sp_proc_comm(0, ppid, comm, sizeof(comm));
	char *cmdline = NULL;
	if (sp_proc_cmdline(pid, &cmdline) == -ENOMEM)
		return -ENOMEM;
	sp_process *p;
	int rc = new_process(t, pid, pslot, time_ns, comm, cmdline ? cmdline : "", &p);
	sp_free(cmdline);
	if (rc)
		return rc;
	parent = t->procs[pslot]; /* The array may have moved; the pointer did not. */
	if (parent->space)
		rc = sp_unwind_space_fork(parent->space, pid, &p->space);
	else
		rc = sp_unwind_space_new(t->u, pid, &p->space);
	if (rc)
		return rc;
	if (parent->nmaps) {
		p->maps = sp_calloc(parent->nmaps + 2, sizeof(*p->maps));
		if (!p->maps)
			return -ENOMEM;
		memcpy(p->maps, parent->maps, parent->nmaps * sizeof(*p->maps));
		p->nmaps = parent->nmaps;
		p->cap = parent->nmaps + 2;
	}
	rc = sp_writer_fork(t->w, parent->index, p->index, time_ns);
	if (rc)
		return rc;
	sp_thread *th;
	return sp_ptable_thread(t, p, tid, time_ns, comm, &th);
}

int sp_ptable_exec(sp_ptable *t, pid_t pid, pid_t tid, const char *comm, uint64_t time_ns)
{
	sp_process *p = sp_ptable_find(t, pid);
	if (!p)
		return 0;
	p->nmaps = 0;
	p->execed = 1;
	if (p->space)
		sp_unwind_space_clear(p->space);
	if (!p->py_probed || p->py_probe_ns < time_ns) {
		sp_python_free(p->py); /* A new image: probe again. */
		p->py = NULL;
		p->py_probed = 0;
	}
	char *cmdline = NULL;
	if (sp_proc_cmdline(pid, &cmdline) == -ENOMEM)
		return -ENOMEM;
	int rc = sp_writer_process_exec(t->w, p->index, time_ns, comm, cmdline ? cmdline : "");
	sp_free(cmdline);
	if (rc)
		return rc;
	return sp_ptable_rename(t, p, tid, comm, time_ns);
}

/* The process ends with its last thread: the leader may leave early
 * (pthread_exit in main) while other threads run on, and the threads of an
 * exiting group report their exits in any order. */
int sp_ptable_exit(sp_ptable *t, pid_t pid, pid_t tid, uint64_t time_ns)
{
	sp_process *p = sp_ptable_find(t, pid);
	sp_thread *th = sp_ptable_find_thread(t, tid);
	if (!p)
		return 0;
	if (tid == pid)
		p->leader_exited = 1;
	if (th && !th->exited && t->procs[th->process] == p) {
		th->exited = 1;
		imap_del(&t->by_tid, (int32_t)tid);
		if (p->live_threads)
			p->live_threads--;
		if (!(p->leader_exited && p->live_threads == 0)) {
			int rc = sp_writer_exit(t->w, p->index, th->index, time_ns);
			if (rc)
				return rc;
		}
	}
	if (p->leader_exited && p->live_threads == 0)
		return retire_pid(t, pid, time_ns);
	return 0;
}
