/* Spool decoder: one validating pass over the whole file that keeps the
 * tables and counts the samples. Every id is checked against what was
 * defined before it, every length against its cap, and all table memory
 * against a budget relative to the file size. */
#include "format/spool_reader.h"

#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/cursor.h"
#include "common/error.h"
#include "format/spool_format.h"
#include "format/spool_internal.h"
#include "format/spool_keys.h"

/* ------------------------------------------------------------------ */
/* Chunk loading, shared with the sample iterator. */

void sp_chunk_scratch_free(struct sp_chunk_scratch *sc)
{
	sp_free(sc->stored);
	sp_free(sc->raw);
	ZSTD_freeDCtx(sc->dctx);
	memset(sc, 0, sizeof(*sc));
}

static int scratch_grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	uint8_t *n = sp_realloc_array(*p, need, 1);
	if (!n) {
		(void)sp_error(-ENOMEM, "cannot allocate %zu bytes for a chunk", need);
		return -ENOMEM; /* Spelled out for the static analyzer. */
	}
	*p = n;
	*cap = need;
	return 0;
}

int sp_chunk_load(const sp_source *src, uint32_t index, const struct sp_chunk_ref *ref,
                  struct sp_chunk_scratch *sc, const uint8_t **payload)
{
	size_t total = SP_CHUNK_HEADER_LEN + (size_t)ref->stored_len;
	int rc = scratch_grow(&sc->stored, &sc->stored_cap, total);
	if (rc)
		return rc;
	rc = src->read_at(src->ctx, ref->offset, sc->stored, total);
	if (rc)
		return sp_error_context(rc, "chunk %u at offset %llu", index,
		                        (unsigned long long)ref->offset);
	const uint8_t *h = sc->stored;
	/* The file may have changed since it was opened. */
	if (sp_le32(h) != SP_CHUNK_MAGIC || h[4] != ref->codec || sp_le32(h + 8) != index ||
	    sp_le32(h + 12) != ref->stored_len || sp_le32(h + 16) != ref->raw_len ||
	    sp_le64(h + 20) != ref->base_time || sp_le32(h + SP_CHUNK_CRC_OFFSET) != ref->crc)
		return sp_error(STACKPULSE_EFORMAT, "chunk %u at offset %llu changed since open",
		                index, (unsigned long long)ref->offset);
	const uint8_t *data = h + SP_CHUNK_HEADER_LEN;
	uint32_t crc = sp_crc32c(0, h, SP_CHUNK_CRC_OFFSET);
	crc = sp_crc32c(crc, data, ref->stored_len);
	if (crc != ref->crc)
		return sp_error(
		        STACKPULSE_ECHECKSUM,
		        "chunk %u at offset %llu: checksum mismatch (stored %08x, computed %08x)",
		        index, (unsigned long long)ref->offset, ref->crc, crc);
	if (ref->codec == SP_CODEC_NONE) {
		*payload = data;
		return 0;
	}
	unsigned long long fcs = ZSTD_getFrameContentSize(data, ref->stored_len);
	if (fcs == ZSTD_CONTENTSIZE_ERROR || fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs != ref->raw_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: zstd frame does not declare %u bytes",
		                index, (unsigned long long)ref->offset, ref->raw_len);
	size_t fsize = ZSTD_findFrameCompressedSize(data, ref->stored_len);
	if (ZSTD_isError(fsize) || fsize != ref->stored_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: payload is not exactly one zstd frame",
		                index, (unsigned long long)ref->offset);
	if ((rc = scratch_grow(&sc->raw, &sc->raw_cap, ref->raw_len ? ref->raw_len : 1)))
		return rc;
	if (!sc->dctx && !(sc->dctx = ZSTD_createDCtx()))
		return sp_error(-ENOMEM, "cannot create zstd context");
	size_t n = ZSTD_decompressDCtx(sc->dctx, sc->raw, ref->raw_len, data, ref->stored_len);
	if (ZSTD_isError(n))
		return sp_error(STACKPULSE_ECOMPRESS, "chunk %u at offset %llu: zstd: %s", index,
		                (unsigned long long)ref->offset, ZSTD_getErrorName(n));
	if (n != ref->raw_len)
		return sp_error(STACKPULSE_EFORMAT,
		                "chunk %u at offset %llu: decompressed %zu bytes, header says %u",
		                index, (unsigned long long)ref->offset, n, ref->raw_len);
	*payload = sc->raw;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Table building under the memory budget. */

static int charge(stackpulse_spool *s, uint64_t bytes)
{
	if (bytes > s->mem_cap - s->mem_used)
		return sp_error(STACKPULSE_ELIMIT,
		                "tables would exceed %llu bytes for a file of %llu bytes",
		                (unsigned long long)s->mem_cap, (unsigned long long)s->src.size);
	s->mem_used += bytes;
	return 0;
}

static int grow(stackpulse_spool *s, void **arr, uint32_t *cap, uint32_t need, size_t elem,
                const char *what)
{
	if (need <= *cap)
		return 0;
	if (need > SP_TABLE_MAX)
		return sp_error(STACKPULSE_ELIMIT, "more than %u %s", SP_TABLE_MAX, what);
	uint32_t ncap = *cap ? *cap : 8;
	while (ncap < need)
		ncap = ncap > SP_TABLE_MAX / 2 ? SP_TABLE_MAX : ncap * 2;
	int rc = charge(s, (uint64_t)(ncap - *cap) * elem);
	if (rc)
		return rc;
	void *p = sp_realloc_array(*arr, ncap, elem);
	if (!p)
		return sp_error(-ENOMEM, "cannot grow the %s table to %u entries", what, ncap);
	*arr = p;
	*cap = ncap;
	return 0;
}

#define GROW(s, arr, cap, need, what)                                                              \
	grow((s), (void **)&(arr), &(cap), (need), sizeof(*(arr)), (what))

static int reserve_ix(stackpulse_spool *s, sp_intern *t)
{
	size_t before = sp_intern_bytes(t);
	int rc = sp_intern_reserve(t);
	if (rc)
		return rc;
	return charge(s, sp_intern_bytes(t) - before);
}

/* Copies @p n bytes into the string pool; "" costs nothing. */
static int keep_bytes(stackpulse_spool *s, const uint8_t *p, size_t n, const char **out)
{
	if (n == 0) {
		*out = "";
		return 0;
	}
	int rc = GROW(s, s->strings, s->strings_cap, s->nstrings + 1, "strings");
	if (!rc)
		rc = charge(s, (uint64_t)n + 1 + 16);
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
	const uint8_t *p;
	size_t n;
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
	uint64_t x;
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
	uint64_t x;
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
	int64_t x;
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
	uint64_t x;
	int rc = sp_cursor_varint_max(c, INT32_MAX, &x, what);
	if (rc)
		return rc;
	*v = (pid_t)x;
	return 0;
}

static int add_event(stackpulse_spool *s, int kind, uint64_t time, uint32_t process,
                     uint32_t thread, uint32_t other, uint64_t count)
{
	int rc = GROW(s, s->events, s->events_cap, s->nevents + 1, "events");
	if (rc)
		return rc;
	s->events[s->nevents++] =
	        (struct stackpulse_spool_event){ kind, time, process, thread, other, count };
	return 0;
}

/* ------------------------------------------------------------------ */
/* Records. Each reads the fields it knows; trailing bytes are for later
 * versions of the writer and are ignored. */

static int rec_meta(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_spool_meta *m = &s->meta;
	uint64_t kf;
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
	m->kernel_frames = (int)kf;
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
	    (rc = GROW(s, s->procs, s->procs_cap, s->nprocs + 1, "processes")))
		return rc;
	p.index = s->nprocs;
	s->procs[s->nprocs++] = p;
	return 0;
}

static int rec_exec(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t proc;
	uint64_t time;
	const char *name, *cmdline;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &proc, "process")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &name, "process name")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &cmdline, "command line")) ||
	    (rc = add_event(s, STACKPULSE_EV_EXEC, time, proc, UINT32_MAX, UINT32_MAX, 0)))
		return rc;
	s->procs[proc].name = name;
	s->procs[proc].cmdline = cmdline;
	return 0;
}

static int rec_thread(stackpulse_spool *s, sp_cursor *c)
{
	struct stackpulse_thread t = { 0 };
	uint64_t time;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &t.process, "process")) ||
	    (rc = get_pid(c, &t.tid, "tid")) || (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &t.name, "thread name")) ||
	    (rc = GROW(s, s->threads, s->threads_cap, s->nthreads + 1, "threads")))
		return rc;
	t.index = s->nthreads;
	s->threads[s->nthreads++] = t;
	return 0;
}

static int rec_comm(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t thr;
	uint64_t time;
	const char *name;
	int rc;
	if ((rc = get_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &name, "thread name")) ||
	    (rc = add_event(s, STACKPULSE_EV_COMM, time, s->threads[thr].process, thr, UINT32_MAX,
	                    0)))
		return rc;
	s->threads[thr].name = name;
	return 0;
}

static int rec_exit(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t proc, thr;
	uint64_t time;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &proc, "process")) ||
	    (rc = get_opt_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &time, "time")) ||
	    (rc = add_event(s, STACKPULSE_EV_EXIT, time, proc, thr, UINT32_MAX, 0)))
		return rc;
	/* The latest exit wins whatever the record order. */
	if (thr == UINT32_MAX && time > s->procs[proc].end_ns)
		s->procs[proc].end_ns = time;
	return 0;
}

static int rec_fork(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t parent, child;
	uint64_t time;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &parent, "parent process")) ||
	    (rc = get_ref(c, s->nprocs, &child, "child process")) ||
	    (rc = sp_cursor_varint(c, &time, "time")))
		return rc;
	return add_event(s, STACKPULSE_EV_FORK, time, parent, UINT32_MAX, child, 0);
}

static int rec_lost(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t thr;
	uint64_t count, time;
	int rc;
	if ((rc = get_opt_ref(c, s->nthreads, &thr, "thread")) ||
	    (rc = sp_cursor_varint(c, &count, "lost count")) ||
	    (rc = sp_cursor_varint(c, &time, "time")))
		return rc;
	uint32_t proc = thr == UINT32_MAX ? UINT32_MAX : s->threads[thr].process;
	if ((rc = add_event(s, STACKPULSE_EV_LOST, time, proc, thr, UINT32_MAX, count)))
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
	const uint8_t *path, *bid;
	size_t path_len, bid_len;
	size_t at = c->pos;
	int rc;
	if ((rc = sp_cursor_blob(c, SP_PATH_MAX, &path, &path_len, "module path")) ||
	    (rc = sp_cursor_blob(c, SP_BUILD_ID_MAX, &bid, &bid_len, "build-id")))
		return rc;
	if (path_len && memchr(path, 0, path_len))
		return sp_error(STACKPULSE_EFORMAT, "module path at byte %zu contains a NUL", at);
	sp_module_key key = { (const char *)path, path_len, bid, bid_len };
	uint64_t h = sp_module_hash((const char *)path, path_len, bid, bid_len);
	if (sp_intern_find(&s->module_ix, h, module_eq, s, &key) != UINT32_MAX)
		return sp_error(STACKPULSE_EFORMAT, "module defined twice");
	struct stackpulse_module m = { 0 };
	const char *kept_bid = NULL;
	if ((rc = GROW(s, s->modules, s->modules_cap, s->nmodules + 1, "modules")) ||
	    (rc = GROW(s, s->symtabs, s->symtabs_cap, s->nmodules + 1, "modules")) ||
	    (rc = reserve_ix(s, &s->module_ix)) || (rc = keep_bytes(s, path, path_len, &m.path)) ||
	    (bid_len && (rc = keep_bytes(s, bid, bid_len, &kept_bid))))
		return rc;
	m.index = s->nmodules;
	m.build_id = (const uint8_t *)kept_bid;
	m.build_id_len = (uint32_t)bid_len;
	s->modules[s->nmodules] = m;
	memset(&s->symtabs[s->nmodules], 0, sizeof(s->symtabs[0]));
	sp_intern_insert(&s->module_ix, h, s->nmodules);
	s->nmodules++;
	return 0;
}

static int rec_mapping(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_mapping m;
	uint64_t len;
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
	if ((rc = GROW(s, s->mappings, s->mappings_cap, s->nmappings + 1, "mappings")))
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
	    (rc = GROW(s, s->pycodes, s->pycodes_cap, s->npycodes + 1, "Python code objects")))
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
	uint64_t kind;
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
	f.kind = (int)kind;
	uint64_t h = sp_frame_hash(&f);
	if (sp_intern_find(&s->frame_ix, h, frame_eq, s, &f) != UINT32_MAX)
		return sp_error(STACKPULSE_EFORMAT, "frame defined twice");
	if ((rc = GROW(s, s->frames, s->frames_cap, s->nframes + 1, "frames")) ||
	    (rc = reserve_ix(s, &s->frame_ix)))
		return rc;
	s->frames[s->nframes] = f;
	sp_intern_insert(&s->frame_ix, h, s->nframes);
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
	struct stack_key k;
	int rc;
	if ((rc = get_ref(c, s->nstacks, &k.parent, "parent stack")) ||
	    (rc = get_ref(c, s->nframes, &k.frame, "frame")))
		return rc;
	uint32_t depth = s->stacks[k.parent].depth + 1;
	if (depth > SP_STACK_DEPTH_MAX)
		return sp_error(STACKPULSE_ELIMIT, "stack deeper than %u frames",
		                SP_STACK_DEPTH_MAX);
	uint64_t h = sp_stack_hash(k.parent, k.frame);
	if (sp_intern_find(&s->stack_ix, h, stack_eq, s, &k) != UINT32_MAX)
		return sp_error(STACKPULSE_EFORMAT, "stack node defined twice");
	if ((rc = GROW(s, s->stacks, s->stacks_cap, s->nstacks + 1, "stack nodes")) ||
	    (rc = reserve_ix(s, &s->stack_ix)))
		return rc;
	s->stacks[s->nstacks] = (struct sp_stack_node){ k.parent, k.frame, depth };
	sp_intern_insert(&s->stack_ix, h, s->nstacks);
	s->nstacks++;
	return 0;
}

static int rec_ksym(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_ksym k;
	int rc;
	if ((rc = sp_cursor_varint(c, &k.addr, "address")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &k.name, "symbol name")) ||
	    (rc = get_str(s, c, SP_NAME_MAX, &k.module, "kernel module")) ||
	    (rc = GROW(s, s->ksyms, s->ksyms_cap, s->nksyms + 1, "kernel symbols")))
		return rc;
	s->ksyms[s->nksyms++] = k;
	return 0;
}

static int rec_jitsym(stackpulse_spool *s, sp_cursor *c)
{
	struct sp_jitsym j;
	int rc;
	if ((rc = get_ref(c, s->nprocs, &j.process, "process")) ||
	    (rc = sp_cursor_varint(c, &j.start, "start")) ||
	    (rc = sp_cursor_varint(c, &j.size, "size")))
		return rc;
	if (j.size == 0 || j.start + j.size < j.start)
		return sp_error(STACKPULSE_EFORMAT, "JIT symbol range %#llx+%llu",
		                (unsigned long long)j.start, (unsigned long long)j.size);
	if ((rc = get_str(s, c, SP_NAME_MAX, &j.name, "symbol name")) ||
	    (rc = GROW(s, s->jitsyms, s->jitsyms_cap, s->njitsyms + 1, "JIT symbols")))
		return rc;
	s->jitsyms[s->njitsyms++] = j;
	return 0;
}

static int rec_symtab(stackpulse_spool *s, sp_cursor *c)
{
	uint32_t mod;
	uint64_t total, off;
	const uint8_t *part;
	size_t part_len;
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
		if ((rc = charge(s, cap - t->cap)))
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
	uint32_t key;
	uint64_t value;
	int rc;
	if ((rc = get_u32(c, &key, "stats key")) ||
	    (rc = sp_cursor_varint(c, &value, "stats value")))
		return rc;
	for (uint32_t i = 0; i < s->nstats; i++) {
		if (s->stats[i].key == key) {
			s->stats[i].value = value;
			return 0;
		}
	}
	if (s->nstats >= SP_STATS_MAX)
		return sp_error(STACKPULSE_ELIMIT, "more than %u stats keys", SP_STATS_MAX);
	if ((rc = GROW(s, s->stats, s->stats_cap, s->nstats + 1, "stats")))
		return rc;
	s->stats[s->nstats++] = (struct sp_stat){ key, value };
	return 0;
}

struct chunk_state {
	uint64_t prev_time;
	int has_prev;
};

/* A SAMPLES block: a count, then one column per field. Times chain through
 * every block of the chunk, starting from the chunk's base time. */
static int rec_samples(stackpulse_spool *s, sp_cursor *c, const struct sp_chunk_ref *ref,
                       struct chunk_state *st)
{
	uint64_t n;
	size_t at = c->pos;
	int rc = sp_cursor_varint(c, &n, "sample count");
	if (rc)
		return rc;
	if (n == 0 || n > sp_cursor_left(c) / SP_SAMPLE_MIN_BYTES)
		return sp_error(STACKPULSE_EFORMAT,
		                "sample count %llu at byte %zu does not fit in %zu bytes",
		                (unsigned long long)n, at, sp_cursor_left(c));
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
	uint32_t v;
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_ref(c, s->nthreads, &v, "thread");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_ref(c, s->nstacks, &v, "stack");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_u32(c, &v, "weight");
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = get_u32(c, &v, "cpu");
	return rc;
}

static int decode_record(stackpulse_spool *s, uint64_t type, sp_cursor *c,
                         const struct sp_chunk_ref *ref, struct chunk_state *st)
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
	default: return 0; /* Unknown: skipped by its length. */
	}
}

static int decode_chunk(stackpulse_spool *s, uint32_t index, struct sp_chunk_ref *ref,
                        const uint8_t *raw)
{
	sp_cursor c = sp_cursor_make(raw, ref->raw_len);
	struct chunk_state st = { 0, 0 };
	uint64_t before = s->meta.samples;
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

/* ------------------------------------------------------------------ */
/* The pass over the file. */

static int read_at(stackpulse_spool *s, uint64_t off, void *buf, size_t len)
{
	int rc = s->src.read_at(s->src.ctx, off, buf, len);
	return rc ? sp_error_context(rc, "reading %zu bytes at offset %llu", len,
	                             (unsigned long long)off)
	          : 0;
}

static int check_header(stackpulse_spool *s)
{
	static const uint8_t sp_file_magic[SP_FILE_MAGIC_LEN] = SP_FILE_MAGIC_BYTES;
	uint8_t h[SP_FILE_HEADER_LEN];
	uint64_t size = s->src.size;
	size_t have = size < sizeof(h) ? (size_t)size : sizeof(h);
	int rc = read_at(s, 0, h, have);
	if (rc)
		return rc;
	size_t cmp = have < SP_FILE_MAGIC_LEN ? have : SP_FILE_MAGIC_LEN;
	if (memcmp(h, sp_file_magic, cmp) != 0)
		return sp_error(STACKPULSE_EFORMAT, "not a spool file (bad magic)");
	if (have < sizeof(h))
		return sp_error(STACKPULSE_ETRUNCATED,
		                "file of %llu bytes ends inside the %u-byte header",
		                (unsigned long long)size, SP_FILE_HEADER_LEN);
	uint16_t version = sp_le16(h + 8);
	if (version != SP_SPOOL_VERSION)
		return sp_error(STACKPULSE_EVERSION,
		                "spool format version %u (this reader knows %u)", version,
		                SP_SPOOL_VERSION);
	if (sp_le16(h + 10) != 0)
		return sp_error(STACKPULSE_EUNSUPPORTED, "spool header flags %#x not supported",
		                sp_le16(h + 10));
	if (sp_le32(h + 12) != 0)
		return sp_error(STACKPULSE_EFORMAT, "reserved header field is %#x, not 0",
		                sp_le32(h + 12));
	return 0;
}

static int check_footer(stackpulse_spool *s, uint64_t off)
{
	uint8_t f[SP_FOOTER_LEN];
	int rc = read_at(s, off, f, sizeof(f));
	if (rc)
		return rc;
	uint32_t crc = sp_crc32c(0, f, 28);
	if (crc != sp_le32(f + 28))
		return sp_error(STACKPULSE_ECHECKSUM, "footer at offset %llu: checksum mismatch",
		                (unsigned long long)off);
	if (sp_le32(f + 24) != 0)
		return sp_error(STACKPULSE_EFORMAT, "footer at offset %llu: reserved field not 0",
		                (unsigned long long)off);
	if (sp_le32(f + 4) != s->nchunks || sp_le64(f + 8) != s->meta.samples ||
	    sp_le64(f + 16) != off)
		return sp_error(STACKPULSE_EFORMAT,
		                "footer at offset %llu says %u chunks, %llu samples, offset %llu; "
		                "file has %u, %llu, %llu",
		                (unsigned long long)off, sp_le32(f + 4),
		                (unsigned long long)sp_le64(f + 8),
		                (unsigned long long)sp_le64(f + 16), s->nchunks,
		                (unsigned long long)s->meta.samples, (unsigned long long)off);
	if (s->src.size - off != SP_FOOTER_LEN)
		return sp_error(STACKPULSE_EFORMAT, "%llu bytes after the footer",
		                (unsigned long long)(s->src.size - off - SP_FOOTER_LEN));
	return 0;
}

/* Parses and checks the chunk header at @p off. Returns 1 when the file ends
 * inside the chunk (a cut file), 0 with @p ref filled, or an error. */
static int chunk_header(stackpulse_spool *s, uint64_t off, struct sp_chunk_ref *ref)
{
	uint64_t left = s->src.size - off;
	uint8_t h[SP_CHUNK_HEADER_LEN];
	if (left < SP_CHUNK_HEADER_LEN)
		return 1;
	int rc = read_at(s, off, h, sizeof(h));
	if (rc)
		return rc;
	uint32_t index = s->nchunks;
	ref->offset = off;
	ref->codec = h[4];
	ref->stored_len = sp_le32(h + 12);
	ref->raw_len = sp_le32(h + 16);
	ref->base_time = sp_le64(h + 20);
	ref->crc = sp_le32(h + SP_CHUNK_CRC_OFFSET);
	ref->samples = 0;
	const char *bad = NULL;
	rc = STACKPULSE_EFORMAT;
	if (ref->codec != SP_CODEC_NONE && ref->codec != SP_CODEC_ZSTD) {
		bad = "unknown codec";
		rc = STACKPULSE_EUNSUPPORTED;
	} else if (h[5] != 0) {
		bad = "flags not 0";
		rc = STACKPULSE_EUNSUPPORTED;
	} else if (sp_le16(h + 6) != 0) {
		bad = "reserved field not 0";
	} else if (sp_le32(h + 8) != index) {
		bad = "sequence number out of order";
	} else if (ref->raw_len > SP_CHUNK_RAW_MAX) {
		bad = "raw length over the 8 MiB cap";
		rc = STACKPULSE_ELIMIT;
	} else if (ref->codec == SP_CODEC_NONE && ref->stored_len != ref->raw_len) {
		bad = "stored and raw lengths differ without compression";
	} else if (ref->codec == SP_CODEC_ZSTD &&
	           ref->stored_len > ZSTD_compressBound(ref->raw_len)) {
		bad = "stored length larger than zstd's bound for the raw length";
	}
	if (bad)
		return sp_error(rc, "chunk %u at offset %llu: %s (codec %u, stored %u, raw %u)",
		                index, (unsigned long long)off, bad, ref->codec, ref->stored_len,
		                ref->raw_len);
	if (ref->stored_len > left - SP_CHUNK_HEADER_LEN)
		return 1;
	if (ref->raw_len > s->raw_cap - s->raw_used)
		return sp_error(
		        STACKPULSE_ELIMIT,
		        "chunk %u at offset %llu: decompressed total would exceed %llu bytes "
		        "for a file of %llu bytes",
		        index, (unsigned long long)off, (unsigned long long)s->raw_cap,
		        (unsigned long long)s->src.size);
	s->raw_used += ref->raw_len;
	return 0;
}

static int read_chunks(stackpulse_spool *s)
{
	struct sp_chunk_scratch sc = { 0 };
	uint64_t off = SP_FILE_HEADER_LEN;
	int complete = 0;
	int rc = 0;
	for (;;) {
		uint64_t left = s->src.size - off;
		uint8_t m[4];
		if (left < sizeof(m))
			break;
		if ((rc = read_at(s, off, m, sizeof(m))))
			break;
		uint32_t magic = sp_le32(m);
		if (magic == SP_FOOTER_MAGIC) {
			if (left < SP_FOOTER_LEN)
				break;
			if (!(rc = check_footer(s, off)))
				complete = 1;
			break;
		}
		if (magic != SP_CHUNK_MAGIC) {
			rc = sp_error(STACKPULSE_EFORMAT, "chunk %u at offset %llu: bad magic %08x",
			              s->nchunks, (unsigned long long)off, magic);
			break;
		}
		struct sp_chunk_ref ref;
		rc = chunk_header(s, off, &ref);
		if (rc == 1) {
			rc = 0;
			break;
		}
		const uint8_t *raw = NULL;
		if (rc || (rc = sp_chunk_load(&s->src, s->nchunks, &ref, &sc, &raw)) ||
		    (rc = decode_chunk(s, s->nchunks, &ref, raw)) ||
		    (rc = GROW(s, s->chunks, s->chunks_cap, s->nchunks + 1, "chunks")))
			break;
		s->chunks[s->nchunks++] = ref;
		off += SP_CHUNK_HEADER_LEN + (uint64_t)ref.stored_len;
	}
	sp_chunk_scratch_free(&sc);
	if (rc)
		return rc;
	s->meta.truncated = !complete;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Finishing touches: drop half-received symbol tables, order the tables
 * that are looked up by key. */

typedef int (*cmp_fn)(const void *a, const void *b);

/* Stable bottom-up merge sort, so ties keep file order. */
static int stable_sort(void *base, size_t n, size_t size, cmp_fn cmp)
{
	if (n < 2)
		return 0;
	uint8_t *tmp = sp_malloc(n * size);
	if (!tmp)
		return sp_error(-ENOMEM, "cannot allocate %zu bytes to sort a table", n * size);
	uint8_t *src = base, *dst = tmp;
	for (size_t width = 1; width < n; width *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * width) {
			size_t mid = lo + width < n ? lo + width : n;
			size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				if (cmp(src + j * size, src + i * size) < 0)
					memcpy(dst + k++ * size, src + j++ * size, size);
				else
					memcpy(dst + k++ * size, src + i++ * size, size);
			}
			while (i < mid)
				memcpy(dst + k++ * size, src + i++ * size, size);
			while (j < hi)
				memcpy(dst + k++ * size, src + j++ * size, size);
		}
		uint8_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != base)
		memcpy(base, src, n * size);
	sp_free(tmp);
	return 0;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_event(const void *a, const void *b)
{
	return cmp_u64(((const struct stackpulse_spool_event *)a)->time_ns,
	               ((const struct stackpulse_spool_event *)b)->time_ns);
}

static int cmp_ksym(const void *a, const void *b)
{
	return cmp_u64(((const struct sp_ksym *)a)->addr, ((const struct sp_ksym *)b)->addr);
}

static int cmp_jitsym(const void *a, const void *b)
{
	const struct sp_jitsym *x = a, *y = b;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	return cmp_u64(x->start, y->start);
}

static int cmp_stat(const void *a, const void *b)
{
	return cmp_u64(((const struct sp_stat *)a)->key, ((const struct sp_stat *)b)->key);
}

static int finish_tables(stackpulse_spool *s)
{
	for (uint32_t i = 0; i < s->nmodules; i++) {
		struct sp_symtab *t = &s->symtabs[i];
		if (t->total && t->len != t->total) {
			if (!s->meta.truncated)
				return sp_error(
				        STACKPULSE_EFORMAT,
				        "symbol table of module %u ends after %llu of %llu bytes",
				        i, (unsigned long long)t->len,
				        (unsigned long long)t->total);
			sp_free(t->data);
			memset(t, 0, sizeof(*t));
		}
	}
	int rc;
	if ((rc = stable_sort(s->events, s->nevents, sizeof(*s->events), cmp_event)) ||
	    (rc = stable_sort(s->ksyms, s->nksyms, sizeof(*s->ksyms), cmp_ksym)) ||
	    (rc = stable_sort(s->jitsyms, s->njitsyms, sizeof(*s->jitsyms), cmp_jitsym)) ||
	    (rc = stable_sort(s->stats, s->nstats, sizeof(*s->stats), cmp_stat)))
		return rc;
	s->meta.chunks = s->nchunks;
	s->meta.duration_ns = s->meta.samples ? s->last_time - s->first_time : 0;
	return 0;
}

static uint64_t cap_for(uint64_t size, uint64_t floor, uint64_t ratio)
{
	if (size > UINT64_MAX / ratio)
		return UINT64_MAX;
	return size * ratio > floor ? size * ratio : floor;
}

int sp_spool_open_source(const sp_source *src, stackpulse_spool **out)
{
	*out = NULL;
	stackpulse_spool *s = sp_calloc(1, sizeof(*s));
	if (!s) {
		if (src->close)
			src->close(src->ctx);
		return sp_error(-ENOMEM, "cannot allocate a spool");
	}
	s->src = *src;
	s->meta.format_version = SP_SPOOL_VERSION;
	s->meta.event = s->meta.machine = s->meta.kernel_release = "";
	s->meta.hostname = s->meta.kernel_note = "";
	s->raw_cap = cap_for(src->size, SP_RAW_TOTAL_FLOOR, SP_RAW_TOTAL_RATIO);
	s->mem_cap = cap_for(src->size, SP_TABLE_BYTES_FLOOR, SP_TABLE_BYTES_RATIO);
	sp_intern_init(&s->module_ix);
	sp_intern_init(&s->frame_ix);
	sp_intern_init(&s->stack_ix);
	int rc = GROW(s, s->stacks, s->stacks_cap, 1, "stack nodes");
	if (!rc) {
		s->stacks[0] = (struct sp_stack_node){ 0, UINT32_MAX, 0 };
		s->nstacks = 1;
		rc = check_header(s);
	}
	if (!rc)
		rc = read_chunks(s);
	if (!rc)
		rc = finish_tables(s);
	if (rc) {
		stackpulse_spool_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void stackpulse_spool_close(stackpulse_spool *s)
{
	if (!s)
		return;
	if (s->src.close)
		s->src.close(s->src.ctx);
	for (uint32_t i = 0; i < s->nstrings; i++)
		sp_free(s->strings[i]);
	for (uint32_t i = 0; i < s->nmodules; i++)
		sp_free(s->symtabs[i].data);
	sp_free(s->strings);
	sp_free(s->procs);
	sp_free(s->threads);
	sp_free(s->modules);
	sp_free(s->symtabs);
	sp_free(s->mappings);
	sp_free(s->pycodes);
	sp_free(s->frames);
	sp_free(s->stacks);
	sp_free(s->events);
	sp_free(s->ksyms);
	sp_free(s->jitsyms);
	sp_free(s->stats);
	sp_free(s->chunks);
	sp_intern_free(&s->module_ix);
	sp_intern_free(&s->frame_ix);
	sp_intern_free(&s->stack_ix);
	sp_free(s);
}
