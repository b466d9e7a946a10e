/* Spool record decoding: each record body is checked field by field, every
 * id against what was defined before it, every string against its cap, and
 * every table allocation against the spool's memory budget. */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cursor.h"
#include "common/error.h"
#include "common/grow.h"
#include "format/spool_format.h"
#include "format/spool_internal.h"
#include "format/spool_keys.h"

/* Table building under the memory budget. */

int sp_spool_charge(stackpulse_spool *s, uint64_t bytes)
{
	if (bytes > s->mem_cap - s->mem_used)
		return sp_error(STACKPULSE_ELIMIT,
		                "tables would exceed %llu bytes for a file of %llu bytes",
		                (unsigned long long)s->mem_cap, (unsigned long long)s->src.size);
	s->mem_used += bytes;
	return 0;
}

int sp_spool_grow(stackpulse_spool *s, void **arr, uint32_t *cap, uint32_t need, size_t elem,
                  const char *what)
{
	if (need <= *cap || need > SP_TABLE_MAX)
		return sp_grow(arr, cap, need, elem, SP_TABLE_MAX, what);
	uint32_t ncap = sp_grow_cap(*cap, need, SP_TABLE_MAX);
	int rc = sp_spool_charge(s, (uint64_t)(ncap - *cap) * elem);
	return rc ? rc : sp_grow(arr, cap, need, elem, SP_TABLE_MAX, what);
}

static int reserve_ix(stackpulse_spool *s, sp_htab *t)
{
	size_t before = sp_htab_bytes(t);
	int rc = sp_htab_reserve(t);
	if (rc)
		return rc;
	return sp_spool_charge(s, sp_htab_bytes(t) - before);
}

/* Copies @p n bytes into the string pool; "" costs nothing. */
static int keep_bytes(stackpulse_spool *s, const uint8_t *p, size_t n, const char **out)
{
	if (n == 0) {
		*out = "";
		return 0;
	}
	int rc = SP_SPOOL_GROW(s, s->strings, s->strings_cap, s->nstrings + 1, "strings");
	if (!rc)
		rc = sp_spool_charge(s, (uint64_t)n + 1 + 16);
	if (rc)
		return rc;
	char *copy = sp_strndup((const char *)p, n);
	if (!copy)
		return sp_error(-ENOMEM, "cannot copy a string of %zu bytes", n);
	s->strings[s->nstrings++] = copy;
	*out = copy;
	return 0;
}

static int get_str(stackpulse_spool *s, sp_cursor *c, size_t max, const char **out,
                   const char *what)
{
	const uint8_t *p = NULL;
	size_t n = 0;
	size_t at = c->pos;
	int rc = sp_cursor_blob(c, max, &p, &n, what);
	if (rc)
		return rc;
	if (n && memchr(p, 0, n))
		return sp_error(STACKPULSE_EFORMAT, "%s at byte %zu contains a NUL", what, at);
	return keep_bytes(s, p, n, out);
}

/* An id that must name an earlier definition. */
static int get_ref(sp_cursor *c, uint32_t count, uint32_t *v, const char *what)
{
	size_t at = c->pos;
	uint64_t x = 0;
	int rc = sp_cursor_varint(c, &x, what);
	if (rc)
		return rc;
	if (x >= count)
		return sp_error(STACKPULSE_EFORMAT,
		                "%s %llu at byte %zu is not defined (%u so far)", what,
		                (unsigned long long)x, at, count);
	*v = (uint32_t)x;
	return 0;
}

/* An optional id stored as id + 1, 0 meaning none (UINT32_MAX). */
static int get_opt_ref(sp_cursor *c, uint32_t count, uint32_t *v, const char *what)
{
	size_t at = c->pos;
	uint64_t x = 0;
	int rc = sp_cursor_varint(c, &x, what);
	if (rc)
		return rc;
	if (x > count)
		return sp_error(STACKPULSE_EFORMAT,
		                "%s %llu at byte %zu is not defined (%u so far)", what,
		                (unsigned long long)x - 1, at, count);
	*v = x ? (uint32_t)(x - 1) : UINT32_MAX;
	return 0;
}

static int get_u32(sp_cursor *c, uint32_t *v, const char *what)
{
	return sp_cursor_varint32(c, v, what);
}

static int get_i32(sp_cursor *c, int32_t *v, const char *what)
{
	size_t at = c->pos;
	int64_t x = 0;
	int rc = sp_cursor_svarint(c, &x, what);
	if (rc)
		return rc;
	if (x < INT32_MIN || x > INT32_MAX)
		return sp_error(STACKPULSE_ELIMIT, "%s %lld at byte %zu exceeds 32 bits", what,
		                (long long)x, at);
	*v = (int32_t)x;
	return 0;
}

static int get_pid(sp_cursor *c, pid_t *v, const char *what)
{
	uint64_t x = 0;
	int rc = sp_cursor_varint_max(c, INT32_MAX, &x, what);
	if (rc)
		return rc;
	*v = (pid_t)x;
	return 0;
}

static int add_event(stackpulse_spool *s, enum stackpulse_spool_event_kind kind, uint64_t time,
                     uint32_t process, uint32_t thread, uint32_t other, uint64_t count)
{
	int rc = SP_SPOOL_GROW(s, s->events, s->events_cap, s->nevents + 1, "events");
	if (rc)
		return rc;
	s->events[s->nevents++] = (struct stackpulse_spool_event){
		kind, time, process, thread, other, count, "", "",
	};
	return 0;
}

/* ------------------------------------------------------------------ */
/* Records. Each reads the fields it knows; trailing bytes are for later
 * versions of the writer and are ignored. */

static int rec_meta(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_spool_meta *m = &s->meta;
	uint64_t kf = 0;
	int rc;
	if (s->has_meta)
		return sp_error(STACKPULSE_EFORMAT, "second metadata record");
	if ((rc = sp_cursor_varint(c, &m->start_time_ns, "start time")) ||
	    (rc = sp_cursor_varint(c, &s->start_mono_ns, "monotonic start")) ||
	    (rc = get_u32(c, &m->frequency, "frequency")) ||
	    (rc = get_u32(c, &m->stack_size, "stack size")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &m->event, "event")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &m->machine, "machine")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &m->kernel_release, "kernel release")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &m->hostname, "hostname")) ||
	    (rc = sp_cursor_varint_max(c, 1, &kf, "kernel frames flag")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &m->kernel_note, "kernel note")))
		return rc;
	if (sp_cursor_left(c) > 0) {
		/* Trailing field: how off-CPU intervals were recorded. A method
		 * this reader does not know reads as its number. */
		uint32_t method = 0;
		if ((rc = get_u32(c, &method, "off-CPU method")))
			return rc;
		m->off_cpu_method = (enum stackpulse_offcpu_method)method;
	}
	m->kernel_frames = kf != 0;
	m->start_clock_ns = s->start_mono_ns;
	s->has_meta = 1;
	return 0;
}

static int rec_process(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_process p = { 0 };
	int rc;
	if ((rc = get_pid(c, &p.pid, "pid")) ||
	    (rc = get_opt_ref(c, s->nprocs, &p.parent, "parent process")) ||
	    (rc = sp_cursor_varint(c, &p.start_ns, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &p.name, "process name")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &p.cmdline, "command line")) ||
	    (rc = SP_SPOOL_GROW(s, s->procs, s->procs_cap, s->nprocs + 1, "processes")))
		return rc;
	p.index = s->nprocs;
	p.initial_name = p.name;
	p.initial_cmdline = p.cmdline;
	s->procs[s->nprocs++] = p;
	return 0;
}

static int rec_exec(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t proc = 0;
	uint64_t time = 0;
	const char *name = "", *cmdline = "";
	int rc;
	if ((rc = get_ref(c, s->nprocs, &proc, "process")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &name, "process name")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &cmdline, "command line")) ||
	    (rc = add_event(s, STACKPULSE_SPOOL_EVENT_EXEC, time, proc, UINT32_MAX, UINT32_MAX, 0)))
		return rc;
	/* Applied in time order once all events are in (sp_spool_apply_names). */
	s->events[s->nevents - 1].name = name;
	s->events[s->nevents - 1].cmdline = cmdline;
	return 0;
}

static int rec_thread(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_thread t = { 0 };
	uint64_t time = 0;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &t.process, "process")) ||
	    (rc = get_pid(c, &t.tid, "tid")) || (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &t.name, "thread name")) ||
	    (rc = SP_SPOOL_GROW(s, s->threads, s->threads_cap, s->nthreads + 1, "threads")))
		return rc;
	t.index = s->nthreads;
	t.initial_name = t.name;
	s->threads[s->nthreads++] = t;
	return 0;
}

static int rec_comm(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t thr = 0;
	uint64_t time = 0;
	const char *name = "";
	int rc;
	if ((rc = get_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &name, "thread name")) ||
	    (rc = add_event(s, STACKPULSE_SPOOL_EVENT_COMM, time, s->threads[thr].process, thr,
	                    UINT32_MAX, 0)))
		return rc;
	s->events[s->nevents - 1].name = name;
	return 0;
}

static int rec_rtname(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_rtname r = { 0, 0, 0, "" };
	int rc;
	if ((rc = get_ref(c, s->nthreads, &r.thread, "thread")) ||
	    (rc = sp_cursor_varint(c, &r.time_ns, "time")) ||
	    (rc = get_u32(c, &r.runtime, "runtime")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &r.name, "runtime thread name")) ||
	    (rc = SP_SPOOL_GROW(s, s->rtnames, s->rtnames_cap, s->nrtnames + 1,
	                        "runtime thread names")))
		return rc;
	s->rtnames[s->nrtnames++] = r;
	return 0;
}

static int rec_exit(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t proc = 0, thr = 0;
	uint64_t time = 0;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &proc, "process")) ||
	    (rc = get_opt_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = add_event(s, STACKPULSE_SPOOL_EVENT_EXIT, time, proc, thr, UINT32_MAX, 0)))
		return rc;
	/* The latest exit wins whatever the record order. */
	if (thr == UINT32_MAX && time > s->procs[proc].end_ns)
		s->procs[proc].end_ns = time;
	return 0;
}

static int rec_fork(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t parent = 0, child = 0;
	uint64_t time = 0;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &parent, "parent process")) ||
	    (rc = get_ref(c, s->nprocs, &child, "child process")) ||
	    (rc = sp_cursor_varint(c, &time, "time")))
		return rc;
	/* A child first seen before its fork was recorded without a parent.
	 * Only an earlier process may become it, so chains stay acyclic. */
	if (s->procs[child].parent == UINT32_MAX && parent < child)
		s->procs[child].parent = parent;
	return add_event(s, STACKPULSE_SPOOL_EVENT_FORK, time, parent, UINT32_MAX, child, 0);
}

static int rec_lost(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t thr = 0;
	uint64_t count = 0, time = 0;
	int rc;
	if ((rc = get_opt_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &count, "lost count")) ||
	    (rc = sp_cursor_varint(c, &time, "time")))
		return rc;
	uint32_t proc = thr == UINT32_MAX ? UINT32_MAX : s->threads[thr].process;
	if ((rc = add_event(s, STACKPULSE_SPOOL_EVENT_LOST, time, proc, thr, UINT32_MAX, count)))
		return rc;
	s->meta.lost = count > UINT64_MAX - s->meta.lost ? UINT64_MAX : s->meta.lost + count;
	return 0;
}

static int module_eq(const void *ctx, uint32_t id, const void *key)
{
	const stackpulse_spool *s = ctx;
	const struct stackpulse_module *m = &s->modules[id];
	return sp_module_key_equal(key, m->path, m->build_id, m->build_id_len);
}

static int rec_module(stackpulse_spool *s, sp_cursor *c)
{
	const uint8_t *path = NULL, *bid = NULL;
	size_t path_len = 0, bid_len = 0;
	size_t at = c->pos;
	int rc;
	if ((rc = sp_cursor_blob(c, SP_PATH_MAX, &path, &path_len, "module path")) ||
	    (rc = sp_cursor_blob(c, SP_BUILD_ID_MAX, &bid, &bid_len, "build-id")))
		return rc;
	if (path_len && memchr(path, 0, path_len))
		return sp_error(STACKPULSE_EFORMAT, "module path at byte %zu contains a NUL", at);
	sp_module_key key = { (const char *)path, path_len, bid, bid_len };
	uint64_t h = sp_module_hash((const char *)path, path_len, bid, bid_len);
	if (sp_htab_find(&s->module_ix, h, module_eq, s, &key) != SP_HTAB_NONE)
		return sp_error(STACKPULSE_EFORMAT, "module defined twice");
	struct stackpulse_module m = { 0 };
	const char *kept_bid = NULL;
	if ((rc = SP_SPOOL_GROW(s, s->modules, s->modules_cap, s->nmodules + 1, "modules")) ||
	    (rc = SP_SPOOL_GROW(s, s->symtabs, s->symtabs_cap, s->nmodules + 1, "modules")) ||
	    (rc = reserve_ix(s, &s->module_ix)) || (rc = keep_bytes(s, path, path_len, &m.path)) ||
	    (bid_len && (rc = keep_bytes(s, bid, bid_len, &kept_bid))))
		return rc;
	m.index = s->nmodules;
	m.build_id = (const uint8_t *)kept_bid;
	m.build_id_len = (uint32_t)bid_len;
	s->modules[s->nmodules] = m;
	memset(&s->symtabs[s->nmodules], 0, sizeof(s->symtabs[0]));
	sp_htab_add(&s->module_ix, h, s->nmodules);
	s->nmodules++;
	return 0;
}

static int rec_mapping(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_mapping m = { 0, 0, 0, 0, 0, 0 };
	uint64_t len = 0;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &m.process, "process")) ||
	    (rc = get_ref(c, s->nmodules, &m.module, "module")) ||
	    (rc = sp_cursor_varint(c, &m.start, "mapping start")) ||
	    (rc = sp_cursor_varint(c, &len, "mapping length")) ||
	    (rc = sp_cursor_varint(c, &m.pgoff, "mapping offset")) ||
	    (rc = sp_cursor_varint(c, &m.time_ns, "time")))
		return rc;
	if (len == 0 || m.start + len < m.start)
		return sp_error(STACKPULSE_EFORMAT, "mapping of %llu bytes at %#llx",
		                (unsigned long long)len, (unsigned long long)m.start);
	m.end = m.start + len;
	if ((rc = SP_SPOOL_GROW(s, s->mappings, s->mappings_cap, s->nmappings + 1, "mappings")))
		return rc;
	s->mappings[s->nmappings++] = m;
	return 0;
}

static int rec_pycode(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_pycode p = { 0 };
	int rc;
	if ((rc = get_str(s, c, SP_NAME_MAX, &p.qualname, "qualname")) ||
	    (rc = get_str(s, c, SP_PATH_MAX, &p.filename, "Python file name")) ||
	    (rc = get_i32(c, &p.first_line, "first line")) ||
	    (rc = SP_SPOOL_GROW(s, s->pycodes, s->pycodes_cap, s->npycodes + 1,
	                        "Python code objects")))
		return rc;
	p.index = s->npycodes;
	s->pycodes[s->npycodes++] = p;
	return 0;
}

static int frame_eq(const void *ctx, uint32_t id, const void *key)
{
	const stackpulse_spool *s = ctx;
	return sp_frame_equal(&s->frames[id], key);
}

static int rec_frame(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_raw_frame f = { 0, UINT32_MAX, 0, UINT32_MAX, 0 };
	uint64_t kind = 0;
	size_t at = c->pos;
	int rc = sp_cursor_varint(c, &kind, "frame kind");
	if (rc)
		return rc;
	switch (kind) {
	case STACKPULSE_FRAME_NATIVE:
		rc = get_ref(c, s->nmodules, &f.module, "module");
		if (!rc)
			rc = sp_cursor_varint(c, &f.offset, "file offset");
		break;
	case STACKPULSE_FRAME_PYTHON:
		rc = get_ref(c, s->npycodes, &f.pycode, "Python code");
		if (!rc)
			rc = sp_cursor_varint(c, &f.offset, "bytecode offset");
		if (!rc)
			rc = get_i32(c, &f.line, "line");
		break;
	case STACKPULSE_FRAME_KERNEL:
	case STACKPULSE_FRAME_UNKNOWN:
	case STACKPULSE_FRAME_JIT: rc = sp_cursor_varint(c, &f.offset, "address"); break;
	case STACKPULSE_FRAME_TRUNCATED: break;
	default:
		return sp_error(STACKPULSE_EFORMAT, "frame kind %llu at byte %zu",
		                (unsigned long long)kind, at);
	}
	if (rc)
		return rc;
	f.kind = (enum stackpulse_frame_kind)kind;
	uint64_t h = sp_frame_hash(&f);
	if (sp_htab_find(&s->frame_ix, h, frame_eq, s, &f) != SP_HTAB_NONE)
		return sp_error(STACKPULSE_EFORMAT, "frame defined twice");
	if ((rc = SP_SPOOL_GROW(s, s->frames, s->frames_cap, s->nframes + 1, "frames")) ||
	    (rc = reserve_ix(s, &s->frame_ix)))
		return rc;
	s->frames[s->nframes] = f;
	sp_htab_add(&s->frame_ix, h, s->nframes);
	s->nframes++;
	return 0;
}

struct stack_key {
	uint32_t parent, frame;
};

static int stack_eq(const void *ctx, uint32_t id, const void *key)
{
	const stackpulse_spool *s = ctx;
	const struct stack_key *k = key;
	return s->stacks[id].parent == k->parent && s->stacks[id].frame == k->frame;
}

static int rec_stack(stackpulse_spool *s, sp_cursor *c)
{
	struct stack_key k = { 0, 0 };
	int rc;
	if ((rc = get_ref(c, s->nstacks, &k.parent, "parent stack")) ||
	    (rc = get_ref(c, s->nframes, &k.frame, "frame")))
		return rc;
	uint32_t depth = s->stacks[k.parent].depth + 1;
	if (depth > SP_STACK_DEPTH_MAX)
		return sp_error(STACKPULSE_ELIMIT, "stack deeper than %u frames",
		                SP_STACK_DEPTH_MAX);
	uint64_t h = sp_stack_hash(k.parent, k.frame);
	if (sp_htab_find(&s->stack_ix, h, stack_eq, s, &k) != SP_HTAB_NONE)
		return sp_error(STACKPULSE_EFORMAT, "stack node defined twice");
	if ((rc = SP_SPOOL_GROW(s, s->stacks, s->stacks_cap, s->nstacks + 1, "stack nodes")) ||
	    (rc = reserve_ix(s, &s->stack_ix)))
		return rc;
	s->stacks[s->nstacks] = (struct sp_stack_node){ k.parent, k.frame, depth };
	sp_htab_add(&s->stack_ix, h, s->nstacks);
	s->nstacks++;
	return 0;
}

static int rec_ksym(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_ksym k = { 0, "", "" };
	int rc;
	if ((rc = sp_cursor_varint(c, &k.addr, "address")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &k.name, "symbol name")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &k.module, "kernel module")) ||
	    (rc = SP_SPOOL_GROW(s, s->ksyms, s->ksyms_cap, s->nksyms + 1, "kernel symbols")))
		return rc;
	s->ksyms[s->nksyms++] = k;
	return 0;
}

static int rec_jitsym(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_jitsym j = { 0, 0, 0, "" };
	int rc;
	if ((rc = get_ref(c, s->nprocs, &j.process, "process")) ||
	    (rc = sp_cursor_varint(c, &j.start, "start")) ||
	    (rc = sp_cursor_varint(c, &j.size, "size")))
		return rc;
	if (j.size == 0 || j.start + j.size < j.start)
		return sp_error(STACKPULSE_EFORMAT, "JIT symbol range %#llx+%llu",
		                (unsigned long long)j.start, (unsigned long long)j.size);
	if ((rc = get_str(s, c, SP_NAME_MAX, &j.name, "symbol name")) ||
	    (rc = SP_SPOOL_GROW(s, s->jitsyms, s->jitsyms_cap, s->njitsyms + 1, "JIT symbols")))
		return rc;
	s->jitsyms[s->njitsyms++] = j;
	return 0;
}

static int rec_symtab(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t mod = 0;
	uint64_t total = 0, off = 0;
	const uint8_t *part = NULL;
	size_t part_len = 0;
	int rc;
	if ((rc = get_ref(c, s->nmodules, &mod, "module")) ||
	    (rc = sp_cursor_varint_max(c, SP_SYMTAB_MAX, &total, "symbol table length")) ||
	    (rc = sp_cursor_varint(c, &off, "symbol table offset")) ||
	    (rc = sp_cursor_blob(c, SP_SYMTAB_PART_MAX, &part, &part_len, "symbol table part")))
		return rc;
	struct sp_symtab *t = &s->symtabs[mod];
	if (total == 0 || part_len == 0)
		return sp_error(STACKPULSE_EFORMAT, "empty symbol table part");
	if (t->total && t->len == t->total)
		return sp_error(STACKPULSE_EFORMAT, "module %u has a second symbol table", mod);
	if ((t->total && total != t->total) || off != t->len || part_len > total - off)
		return sp_error(STACKPULSE_EFORMAT,
		                "symbol table part [%llu, +%zu) of %llu out of order for module %u",
		                (unsigned long long)off, part_len, (unsigned long long)total, mod);
	t->total = total;
	/* Grow geometrically, never past the announced total. */
	uint64_t need = t->len + part_len;
	if (need > t->cap) {
		uint64_t cap = t->cap * 2 > need ? t->cap * 2 : need;
		if (cap > total)
			cap = total;
		if ((rc = sp_spool_charge(s, cap - t->cap)))
			return rc;
		uint8_t *p = sp_realloc_array(t->data, (size_t)cap, 1);
		if (!p)
			return sp_error(-ENOMEM, "cannot grow a symbol table to %llu bytes",
			                (unsigned long long)cap);
		t->data = p;
		t->cap = cap;
	}
	memcpy(t->data + t->len, part, part_len);
	t->len = need;
	if (t->len == t->total)
		s->modules[mod].has_symbols = 1;
	return 0;
}

static int rec_stats(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t key = 0;
	uint64_t value = 0;
	int rc;
	if ((rc = get_u32(c, &key, "stats key")) ||
	    (rc = sp_cursor_varint(c, &value, "stats value")))
		return rc;
	if (sp_cursor_left(c) > 0) {
		/* Optional third field: the value is one thread's (key 6: its lost
		 * samples); other per-thread keys are not kept. */
		uint32_t thr = UINT32_MAX;
		if ((rc = get_opt_ref(c, s->nthreads, &thr, "stats thread")))
			return rc;
		if (thr != UINT32_MAX) {
			if (key == SP_STAT_LOST)
				s->threads[thr].lost = value;
			return 0;
		}
	}
	for (uint32_t i = 0; i < s->nstats; i++) {
		if (s->stats[i].key == key) {
			s->stats[i].value = value;
			return 0;
		}
	}
	if (s->nstats >= SP_STATS_MAX)
		return sp_error(STACKPULSE_ELIMIT, "more than %u stats keys", SP_STATS_MAX);
	if ((rc = SP_SPOOL_GROW(s, s->stats, s->stats_cap, s->nstats + 1, "stats")))
		return rc;
	s->stats[s->nstats++] = (struct sp_stat){ key, value };
	return 0;
}

struct chunk_state {
	uint64_t prev_time;
	int has_prev;
	uint64_t offcpu_prev; /* Start of the chunk's latest interval; 0 first. */
};

/* The row count of a block, bounded by what is left: every row takes at
 * least @p min_bytes (one per column). */
static int block_count(sp_cursor *c, size_t min_bytes, const char *what, uint64_t *n)
{
	size_t at = c->pos;
	int rc = sp_cursor_varint(c, n, what);
	if (rc)
		return rc;
	if (*n == 0 || *n > sp_cursor_left(c) / min_bytes)
		return sp_error(STACKPULSE_EFORMAT, "%s %llu at byte %zu does not fit in %zu bytes",
		                what, (unsigned long long)*n, at, sp_cursor_left(c));
	return 0;
}

/* The thread and stack columns of a block of @p n rows: defined ids. */
static int thread_stack_columns(const stackpulse_spool *s, sp_cursor *c, uint64_t n)
{
	uint32_t v = 0;
	int rc = 0;
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_ref(c, s->nthreads, &v, "thread");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_ref(c, s->nstacks, &v, "stack");
	return rc;
}

/* A SAMPLES block: a count, then one column per field. Times chain through
 * every block of the chunk, starting from the chunk's base time. */
static int rec_samples(stackpulse_spool *s, sp_cursor *c, const struct sp_chunk_ref *ref,
                       struct chunk_state *st)
{
	uint64_t n = 0;
	int rc = block_count(c, SP_SAMPLE_MIN_BYTES, "sample count", &n);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		int64_t delta;
		if ((rc = sp_cursor_svarint(c, &delta, "time delta")))
			return rc;
		uint64_t t = (st->has_prev ? st->prev_time : ref->base_time) + (uint64_t)delta;
		st->prev_time = t;
		st->has_prev = 1;
		if (s->meta.samples == 0 || t < s->first_time)
			s->first_time = t;
		if (s->meta.samples == 0 || t > s->last_time)
			s->last_time = t;
		s->meta.samples++;
	}
	uint32_t v = 0;
	rc = thread_stack_columns(s, c, n);
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_u32(c, &v, "weight");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_u32(c, &v, "cpu");
	return rc;
}

/* An OFFCPU block: a count, then one column per field. Start times chain
 * through every block of the chunk, starting from 0. */
static int rec_offcpu(stackpulse_spool *s, sp_cursor *c, struct sp_chunk_ref *ref,
                      struct chunk_state *st)
{
	uint64_t n = 0, v64 = 0;
	int rc = block_count(c, SP_OFFCPU_MIN_BYTES, "interval count", &n);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		int64_t delta;
		if ((rc = sp_cursor_svarint(c, &delta, "start delta")))
			return rc;
		st->offcpu_prev += (uint64_t)delta;
	}
	rc = thread_stack_columns(s, c, n);
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = sp_cursor_varint(c, &v64, "duration");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = sp_cursor_varint_max(c, STACKPULSE_OFFCPU_PREEMPTED, &v64, "off-CPU state");
	/* The optional merged columns: both or neither (older writers). */
	uint64_t merged = 0;
	if (!rc && sp_cursor_left(c)) {
		for (uint64_t i = 0; i < n && !rc; i++) {
			rc = sp_cursor_varint(c, &v64, "merged intervals");
			if (!rc && v64 > UINT64_MAX - merged)
				rc = sp_error(STACKPULSE_EFORMAT, "merged intervals overflow");
			merged += v64;
		}
		for (uint64_t i = 0; i < n && !rc; i++)
			rc = sp_cursor_varint(c, &v64, "merged duration");
	}
	if (rc)
		return rc;
	s->meta.offcpu_intervals += n;
	s->meta.offcpu_merged += merged;
	ref->intervals += n;
	return 0;
}

static int decode_record(stackpulse_spool *s, uint64_t type, sp_cursor *c, struct sp_chunk_ref *ref,
                         struct chunk_state *st)
{
	switch (type) {
	case SP_REC_META: return rec_meta(s, c);
	case SP_REC_PROCESS: return rec_process(s, c);
	case SP_REC_EXEC: return rec_exec(s, c);
	case SP_REC_THREAD: return rec_thread(s, c);
	case SP_REC_COMM: return rec_comm(s, c);
	case SP_REC_EXIT: return rec_exit(s, c);
	case SP_REC_FORK: return rec_fork(s, c);
	case SP_REC_LOST: return rec_lost(s, c);
	case SP_REC_MODULE: return rec_module(s, c);
	case SP_REC_MAPPING: return rec_mapping(s, c);
	case SP_REC_PYCODE: return rec_pycode(s, c);
	case SP_REC_FRAME: return rec_frame(s, c);
	case SP_REC_STACK: return rec_stack(s, c);
	case SP_REC_SAMPLES: return rec_samples(s, c, ref, st);
	case SP_REC_KSYM: return rec_ksym(s, c);
	case SP_REC_JITSYM: return rec_jitsym(s, c);
	case SP_REC_SYMTAB: return rec_symtab(s, c);
	case SP_REC_STATS: return rec_stats(s, c);
	case SP_REC_OFFCPU: return rec_offcpu(s, c, ref, st);
	case SP_REC_RTNAME: return rec_rtname(s, c);
	default: return 0; /* Unknown: skipped by its length. */
	}
}

int sp_spool_decode_chunk(stackpulse_spool *s, uint32_t index, struct sp_chunk_ref *ref,
                          const uint8_t *raw)
{
	sp_cursor c = sp_cursor_make(raw, ref->raw_len);
	struct chunk_state st = { 0, 0, 0 };
	uint64_t before = s->meta.samples;
	ref->intervals = 0;
	while (sp_cursor_left(&c)) {
		size_t at = c.pos;
		uint64_t type = 0, len;
		const uint8_t *body;
		int rc = sp_cursor_varint(&c, &type, "record type");
		if (!rc)
			rc = sp_cursor_varint_max(&c, sp_cursor_left(&c), &len, "record length");
		if (!rc)
			rc = sp_cursor_bytes(&c, (size_t)len, &body, "record body");
		if (!rc) {
			sp_cursor bc = sp_cursor_make(body, (size_t)len);
			rc = decode_record(s, type, &bc, ref, &st);
		}
		if (rc) {
			/* Inside a checksummed chunk a short field is malformed, not a cut file. */
			if (rc == STACKPULSE_ETRUNCATED)
				rc = STACKPULSE_EFORMAT;
			return sp_error_context(
			        rc, "chunk %u at offset %llu: record type %llu at byte %zu", index,
			        (unsigned long long)ref->offset, (unsigned long long)type, at);
		}
	}
	ref->samples = s->meta.samples - before;
	return 0;
}

int sp_spool_apply_names(stackpulse_spool *s)
{
	/* Derived from the RTNAME records (not charged: one pointer per
	 * thread, whose table is). */
	sp_free(s->thread_rtname);
	s->thread_rtname = NULL;
	if (s->nrtnames) {
		s->thread_rtname = sp_calloc(s->nthreads, sizeof(*s->thread_rtname));
		if (!s->thread_rtname)
			return sp_error(-ENOMEM, "runtime names of %u threads", s->nthreads);
		for (uint32_t i = 0; i < s->nrtnames; i++)
			if (s->rtnames[i].thread < s->nthreads)
				s->thread_rtname[s->rtnames[i].thread] = s->rtnames[i].name;
	}
	for (uint32_t i = 0; i < s->nevents; i++) {
		const struct stackpulse_spool_event *e = &s->events[i];
		if (e->kind == STACKPULSE_SPOOL_EVENT_EXEC) {
			s->procs[e->process].name = e->name;
			s->procs[e->process].cmdline = e->cmdline;
		} else if (e->kind == STACKPULSE_SPOOL_EVENT_COMM) {
			struct stackpulse_thread *t = &s->threads[e->thread];
			t->name = e->name;
			/* As in ps and perf: a process is named after its leader. */
			if (s->procs[t->process].pid == t->tid)
				s->procs[t->process].name = e->name;
		}
	}
	return 0;
}
