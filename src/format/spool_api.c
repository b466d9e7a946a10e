/* The public spool accessors, the sample iterator and in-memory sources. */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cursor.h"
#include "common/error.h"
#include "common/search.h"
#include "format/spool_format.h"
#include "format/spool_internal.h"
#include "format/spool_reader.h"

/* ------------------------------------------------------------------ */
/* Memory source. */

struct mem_source {
	const uint8_t *p;
	size_t len;
};

static int mem_read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct mem_source *m = ctx;
	if (off > m->len || len > m->len - off)
		return sp_error(STACKPULSE_ETRUNCATED,
		                "read of %zu bytes at %llu past the end (%zu)", len,
		                (unsigned long long)off, m->len);
	if (len)
		memcpy(buf, m->p + off, len);
	return 0;
}

static void mem_close(void *ctx)
{
	sp_free(ctx);
}

int sp_spool_open_memory(const void *buf, size_t len, unsigned flags, stackpulse_spool **out)
{
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	if (flags & ~(unsigned)STACKPULSE_SPOOL_STRICT)
		return sp_error(-EINVAL, "unknown spool open flags 0x%x", flags);
	if (!buf && len)
		return sp_error(-EINVAL, "NULL buffer of %zu bytes", len);
	struct mem_source *m = sp_malloc(sizeof(*m));
	if (!m)
		return sp_error(-ENOMEM, "cannot allocate a memory source");
	m->p = buf;
	m->len = len;
	sp_source src = { mem_read_at, mem_close, m, len };
	return sp_spool_open_source_ex(&src, flags, out);
}

void stackpulse_spool_open_opts_init(stackpulse_spool_open_opts *opts)
{
	SP_API_ENTRY();
	if (opts)
		*opts = STACKPULSE_SPOOL_OPEN_OPTS;
}

/* ------------------------------------------------------------------ */
/* Tables. */

const struct stackpulse_spool_meta *stackpulse_spool_meta(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return &s->meta;
}

_Static_assert((int)STACKPULSE_STAT_TRUNCATED_STACKS == (int)SP_STAT_TRUNCATED_STACKS &&
                       (int)STACKPULSE_STAT_PYTHON_SAMPLES == (int)SP_STAT_PYTHON_SAMPLES &&
                       (int)STACKPULSE_STAT_UNWIND_ERRORS == (int)SP_STAT_UNWIND_ERRORS &&
                       (int)STACKPULSE_STAT_PERF_EVENT == (int)SP_STAT_EVENT &&
                       (int)STACKPULSE_STAT_PYTHON_FRAMES == (int)SP_STAT_PYTHON_FRAMES &&
                       (int)STACKPULSE_STAT_LOST == (int)SP_STAT_LOST &&
                       (int)STACKPULSE_STAT_RING_BYTES == (int)SP_STAT_RING_BYTES &&
                       (int)STACKPULSE_STAT_STACK_COPY == (int)SP_STAT_STACK_COPY &&
                       (int)STACKPULSE_STAT_COPY_RESIZES == (int)SP_STAT_COPY_RESIZES &&
                       (int)STACKPULSE_STAT_OFFCPU_INTERVALS == (int)SP_STAT_OFFCPU_INTERVALS &&
                       (int)STACKPULSE_STAT_OFFCPU_NO_STACK == (int)SP_STAT_OFFCPU_NO_STACK &&
                       (int)STACKPULSE_STAT_OFFCPU_DROPPED == (int)SP_STAT_OFFCPU_DROPPED &&
                       (int)STACKPULSE_STAT_OFFCPU_MERGED == (int)SP_STAT_OFFCPU_MERGED &&
                       (int)STACKPULSE_STAT_FAILED_RECORDS == (int)SP_STAT_FAILED_RECORDS &&
                       (int)STACKPULSE_STAT_PROCESSES_UNFOLLOWED == (int)SP_STAT_UNFOLLOWED,
               "public stat keys are the STATS record keys");

int stackpulse_spool_stat(const stackpulse_spool *s, stackpulse_stat key, uint64_t *value)
{
	SP_API_ENTRY();
	if (!s || !value) {
		sp_error(-EINVAL, "NULL argument");
		return -EINVAL;
	}
	return sp_spool_stat(s, (uint32_t)key, value);
}

uint32_t stackpulse_spool_process_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nprocs;
}

const struct stackpulse_process *stackpulse_spool_process(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nprocs ? &s->procs[i] : NULL;
}

uint32_t stackpulse_spool_thread_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nthreads;
}

const struct stackpulse_thread *stackpulse_spool_thread(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nthreads ? &s->threads[i] : NULL;
}

const char *stackpulse_spool_thread_runtime_name(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nthreads && s->thread_rtname ? s->thread_rtname[i] : NULL;
}

const char *stackpulse_spool_thread_display_name(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	if (i >= s->nthreads)
		return NULL;
	const char *rt = s->thread_rtname ? s->thread_rtname[i] : NULL;
	return rt && *rt ? rt : s->threads[i].name;
}

uint32_t stackpulse_spool_module_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nmodules;
}

const struct stackpulse_module *stackpulse_spool_module(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nmodules ? &s->modules[i] : NULL;
}

uint32_t stackpulse_spool_pycode_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->npycodes;
}

const struct stackpulse_pycode *stackpulse_spool_pycode(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->npycodes ? &s->pycodes[i] : NULL;
}

uint32_t stackpulse_spool_event_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nevents;
}

const struct stackpulse_spool_event *stackpulse_spool_event(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nevents ? &s->events[i] : NULL;
}

uint32_t stackpulse_spool_frame_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nframes;
}

const struct stackpulse_raw_frame *stackpulse_spool_frame(const stackpulse_spool *s, uint32_t i)
{
	SP_API_ENTRY();
	return i < s->nframes ? &s->frames[i] : NULL;
}

uint32_t stackpulse_spool_stack_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nstacks;
}

int stackpulse_spool_stack_node(const stackpulse_spool *s, uint32_t stack, uint32_t *frame,
                                uint32_t *parent)
{
	SP_API_ENTRY();
	if (stack == 0 || stack >= s->nstacks)
		return sp_error(STACKPULSE_ENOTFOUND, "no stack node %u", stack);
	if (frame)
		*frame = s->stacks[stack].frame;
	if (parent)
		*parent = s->stacks[stack].parent;
	return 0;
}

uint32_t stackpulse_spool_stack_depth(const stackpulse_spool *s, uint32_t stack)
{
	SP_API_ENTRY();
	return stack < s->nstacks ? s->stacks[stack].depth : 0;
}

/* Parents always have smaller ids, so the walk ends within depth steps. */
uint32_t stackpulse_spool_stack_frames(const stackpulse_spool *s, uint32_t stack, uint32_t *frames,
                                       uint32_t max)
{
	SP_API_ENTRY();
	if (stack >= s->nstacks)
		return 0;
	uint32_t depth = s->stacks[stack].depth;
	for (uint32_t i = 0; stack != 0 && i < max; i++) {
		frames[i] = s->stacks[stack].frame;
		stack = s->stacks[stack].parent;
	}
	return depth;
}

uint32_t stackpulse_spool_ksym_count(const stackpulse_spool *s)
{
	SP_API_ENTRY();
	return s->nksyms;
}

int stackpulse_spool_ksym_lookup(const stackpulse_spool *s, uint64_t addr, const char **name,
                                 uint64_t *start, const char **module)
{
	SP_API_ENTRY();
	/* The last symbol starting at or below addr. */
	size_t lo;
	SP_PARTITION_POINT(lo, s->nksyms, mid, s->ksyms[mid].addr <= addr);
	if (lo == 0)
		return STACKPULSE_ENOTFOUND;
	const struct sp_ksym *k = &s->ksyms[lo - 1];
	if (name)
		*name = k->name;
	if (start)
		*start = k->addr;
	if (module)
		*module = k->module;
	return 0;
}

int sp_spool_module_symtab(const stackpulse_spool *s, uint32_t module, const uint8_t **table,
                           size_t *len)
{
	if (module >= s->nmodules || !s->modules[module].has_symbols)
		return STACKPULSE_ENOTFOUND;
	*table = s->symtabs[module].data;
	*len = (size_t)s->symtabs[module].len;
	return 0;
}

int sp_spool_jitsym_lookup(const stackpulse_spool *s, uint32_t process, uint64_t addr,
                           const char **name, uint64_t *start)
{
	/* The last symbol of the process starting at or below addr. */
	size_t lo;
	SP_PARTITION_POINT(
	        lo, s->njitsyms, mid,
	        s->jitsyms[mid].process < process ||
	                (s->jitsyms[mid].process == process && s->jitsyms[mid].start <= addr));
	if (lo == 0)
		return STACKPULSE_ENOTFOUND;
	const struct sp_jitsym *j = &s->jitsyms[lo - 1];
	if (j->process != process || addr - j->start >= j->size)
		return STACKPULSE_ENOTFOUND;
	if (name)
		*name = j->name;
	if (start)
		*start = j->start;
	return 0;
}

uint32_t sp_spool_mapping_count(const stackpulse_spool *s)
{
	return s->nmappings;
}

const struct sp_mapping *sp_spool_mapping(const stackpulse_spool *s, uint32_t i)
{
	return i < s->nmappings ? &s->mappings[i] : NULL;
}

int sp_spool_stat(const stackpulse_spool *s, uint32_t key, uint64_t *value)
{
	for (uint32_t i = 0; i < s->nstats; i++) {
		if (s->stats[i].key == key) {
			*value = s->stats[i].value;
			return 0;
		}
	}
	return STACKPULSE_ENOTFOUND;
}

uint32_t sp_spool_jitsym_count(const stackpulse_spool *s)
{
	return s->njitsyms;
}

const struct sp_jitsym *sp_spool_jitsym(const stackpulse_spool *s, uint32_t i)
{
	return i < s->njitsyms ? &s->jitsyms[i] : NULL;
}

uint32_t sp_spool_rtname_count(const stackpulse_spool *s)
{
	return s->nrtnames;
}

const struct sp_rtname *sp_spool_rtname(const stackpulse_spool *s, uint32_t i)
{
	return i < s->nrtnames ? &s->rtnames[i] : NULL;
}

/* ------------------------------------------------------------------ */
/* Sample and off-CPU iterators: one decompressed chunk at a time, walking
 * the blocks (SAMPLES or OFFCPU records) of one type. */

struct block_iter {
	const stackpulse_spool *s;
	struct sp_chunk_scratch sc;
	unsigned type;                  /* SP_REC_SAMPLES or SP_REC_OFFCPU. */
	int ncols;                      /* Columns of a block of that type. */
	uint32_t next_chunk;            /* Next chunk to load. */
	sp_cursor cur;                  /* Records of the loaded chunk. */
	sp_cursor cols[SP_COLUMNS_MAX]; /* Columns of the current block. */
	uint64_t block_left;            /* Rows left in the block. */
	uint64_t base_time;             /* Where the chunk's time chain starts. */
	uint64_t prev_time;
	int has_prev;
	int merged_cols; /* The OFFCPU block has the merged columns. */
	int failed;      /* Sticky error code. */
};

struct stackpulse_sample_iter {
	struct block_iter b;
	struct stackpulse_sample sample;
};

struct stackpulse_offcpu_iter {
	struct block_iter b;
	struct stackpulse_offcpu interval;
};

static int block_iter_init(const stackpulse_spool *s, struct block_iter *b, unsigned type)
{
	if (!s)
		return sp_error(-EINVAL, "no spool");
	if (s->tail)
		return sp_error(-EINVAL, "a tailed spool delivers its samples by "
		                         "stackpulse_spool_tail_poll, not by an iterator");
	b->s = s;
	b->type = type;
	static const int ncols[2] = { SP_SAMPLE_COLUMNS, SP_OFFCPU_COLUMNS };
	b->ncols = ncols[type == SP_REC_OFFCPU];
	b->cur = sp_cursor_make(NULL, 0);
	return 0;
}

int stackpulse_sample_iter_new(const stackpulse_spool *s, stackpulse_sample_iter **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	stackpulse_sample_iter *it = sp_calloc(1, sizeof(*it));
	if (!it)
		return sp_error(-ENOMEM, "cannot allocate a sample iterator");
	int rc = block_iter_init(s, &it->b, SP_REC_SAMPLES);
	if (rc) {
		sp_free(it);
		return rc;
	}
	*out = it;
	return 0;
}

void stackpulse_sample_iter_free(stackpulse_sample_iter *it)
{
	if (!it)
		return;
	sp_chunk_scratch_free(&it->b.sc);
	sp_free(it);
}

int stackpulse_offcpu_iter_new(const stackpulse_spool *s, stackpulse_offcpu_iter **out)
{
	SP_API_ENTRY();
	if (!out)
		return sp_error(-EINVAL, "no output pointer");
	*out = NULL;
	stackpulse_offcpu_iter *it = sp_calloc(1, sizeof(*it));
	if (!it)
		return sp_error(-ENOMEM, "cannot allocate an off-CPU iterator");
	int rc = block_iter_init(s, &it->b, SP_REC_OFFCPU);
	if (rc) {
		sp_free(it);
		return rc;
	}
	*out = it;
	return 0;
}

void stackpulse_offcpu_iter_free(stackpulse_offcpu_iter *it)
{
	if (!it)
		return;
	sp_chunk_scratch_free(&it->b.sc);
	sp_free(it);
}

/* Finds where each column of a block body starts by skipping varints. */
static int iter_block(struct block_iter *it, const uint8_t *body, size_t len)
{
	sp_cursor c = sp_cursor_make(body, len);
	uint64_t n, v;
	int rc = sp_cursor_varint(&c, &n, "row count");
	if (rc)
		return rc;
	/* Both block types take at least one byte per column. */
	if (n == 0 || n > sp_cursor_left(&c) / (uint64_t)it->ncols)
		return sp_error(STACKPULSE_EFORMAT, "bad row count %llu", (unsigned long long)n);
	/* OFFCPU blocks may carry the two merged columns after the others. */
	int ncols = it->ncols;
	for (int col = 0; col < ncols; col++) {
		size_t start = c.pos;
		for (uint64_t i = 0; i < n; i++)
			if ((rc = sp_cursor_varint(&c, &v, "block column")))
				return rc;
		it->cols[col] = sp_cursor_make(body + start, c.pos - start);
		if (col + 1 == ncols && it->type == SP_REC_OFFCPU && ncols == SP_OFFCPU_COLUMNS &&
		    sp_cursor_left(&c))
			ncols = SP_OFFCPU_ALL_COLUMNS;
	}
	it->merged_cols = ncols > it->ncols;
	it->block_left = n;
	return 0;
}

/* The next time of the block's chain. */
static uint64_t iter_time(struct block_iter *it, int64_t delta)
{
	uint64_t t = (it->has_prev ? it->prev_time : it->base_time) + (uint64_t)delta;
	it->prev_time = t;
	it->has_prev = 1;
	it->block_left--;
	return t;
}

/* Decodes the next sample of the block; ids are checked again, against the
 * final tables. */
static int iter_sample(stackpulse_sample_iter *si)
{
	struct block_iter *it = &si->b;
	const stackpulse_spool *s = it->s;
	int64_t delta;
	uint32_t thr, stack, weight, cpu;
	int rc;
	if ((rc = sp_cursor_svarint(&it->cols[0], &delta, "time delta")) ||
	    (rc = sp_cursor_varint32(&it->cols[1], &thr, "thread")) ||
	    (rc = sp_cursor_varint32(&it->cols[2], &stack, "stack")) ||
	    (rc = sp_cursor_varint32(&it->cols[3], &weight, "weight")) ||
	    (rc = sp_cursor_varint32(&it->cols[4], &cpu, "cpu")))
		return rc;
	if (thr >= s->nthreads || stack >= s->nstacks)
		return sp_error(STACKPULSE_EFORMAT, "sample refers to thread %u / stack %u", thr,
		                stack);
	const struct stackpulse_thread *th = &s->threads[thr];
	si->sample.time_ns = iter_time(it, delta);
	si->sample.thread = thr;
	si->sample.process = th->process;
	si->sample.pid = s->procs[th->process].pid;
	si->sample.tid = th->tid;
	si->sample.stack = stack;
	si->sample.weight = weight;
	si->sample.cpu = cpu;
	return 0;
}

static int iter_offcpu(stackpulse_offcpu_iter *oi)
{
	struct block_iter *it = &oi->b;
	const stackpulse_spool *s = it->s;
	int64_t delta;
	uint32_t thr, stack, state;
	uint64_t dur;
	int rc;
	if ((rc = sp_cursor_svarint(&it->cols[0], &delta, "start delta")) ||
	    (rc = sp_cursor_varint32(&it->cols[1], &thr, "thread")) ||
	    (rc = sp_cursor_varint32(&it->cols[2], &stack, "stack")) ||
	    (rc = sp_cursor_varint(&it->cols[3], &dur, "duration")) ||
	    (rc = sp_cursor_varint32(&it->cols[4], &state, "off-CPU state")))
		return rc;
	if (thr >= s->nthreads || stack >= s->nstacks || state > STACKPULSE_OFFCPU_PREEMPTED)
		return sp_error(STACKPULSE_EFORMAT,
		                "off-CPU interval refers to thread %u / stack %u / state %u", thr,
		                stack, state);
	const struct stackpulse_thread *th = &s->threads[thr];
	oi->interval.start_ns = iter_time(it, delta);
	oi->interval.duration_ns = dur;
	oi->interval.thread = thr;
	oi->interval.process = th->process;
	oi->interval.pid = s->procs[th->process].pid;
	oi->interval.tid = th->tid;
	oi->interval.stack = stack;
	oi->interval.state = (enum stackpulse_offcpu_state)state;
	oi->interval.merged = oi->interval.merged_ns = 0;
	if (it->merged_cols &&
	    ((rc = sp_cursor_varint(&it->cols[5], &oi->interval.merged, "merged intervals")) ||
	     (rc = sp_cursor_varint(&it->cols[6], &oi->interval.merged_ns, "merged duration"))))
		return rc;
	return 0;
}

/* Positions @p it on its next row: 1 when there is one, 0 at the end. */
static int iter_step(struct block_iter *it)
{
	const stackpulse_spool *s = it->s;
	for (;;) {
		if (it->block_left)
			return 1;
		while (sp_cursor_left(&it->cur)) {
			uint64_t type, len;
			const uint8_t *body;
			int rc;
			if ((rc = sp_cursor_varint(&it->cur, &type, "record type")) ||
			    (rc = sp_cursor_varint_max(&it->cur, sp_cursor_left(&it->cur), &len,
			                               "record length")) ||
			    (rc = sp_cursor_bytes(&it->cur, (size_t)len, &body, "record body")))
				return rc;
			if (type != it->type)
				continue;
			if ((rc = iter_block(it, body, (size_t)len)))
				return rc;
			break;
		}
		if (it->block_left)
			continue;
		/* Load the next chunk that holds rows of the type. */
		while (it->next_chunk < s->nchunks &&
		       (it->type == SP_REC_SAMPLES ? s->chunks[it->next_chunk].samples
		                                   : s->chunks[it->next_chunk].intervals) == 0)
			it->next_chunk++;
		if (it->next_chunk >= s->nchunks)
			return 0;
		uint32_t index = it->next_chunk++;
		const struct sp_chunk_ref *ref = &s->chunks[index];
		const uint8_t *raw;
		int rc = sp_chunk_load(&s->src, index, ref, &it->sc, &raw);
		if (rc)
			return rc;
		it->cur = sp_cursor_make(raw, ref->raw_len);
		it->base_time = it->type == SP_REC_SAMPLES ? ref->base_time : 0;
		it->has_prev = 0;
	}
}

static int sample_step(stackpulse_sample_iter *it, const struct stackpulse_sample **sample)
{
	int rc = iter_step(&it->b);
	if (rc != 1)
		return rc;
	if ((rc = iter_sample(it)) != 0)
		return rc;
	*sample = &it->sample;
	return 1;
}

int sp_spool_chunk_samples(const stackpulse_spool *s, const struct sp_chunk_ref *ref,
                           const uint8_t *raw, stackpulse_sample_fn fn, void *ctx)
{
	/* An iterator over this one chunk: no next chunk to load. */
	stackpulse_sample_iter it;
	memset(&it, 0, sizeof(it));
	it.b.s = s;
	it.b.type = SP_REC_SAMPLES;
	it.b.ncols = SP_SAMPLE_COLUMNS;
	it.b.next_chunk = UINT32_MAX;
	it.b.cur = sp_cursor_make(raw, ref->raw_len);
	it.b.base_time = ref->base_time;
	const struct stackpulse_sample *sample = NULL;
	int rc;
	while ((rc = sample_step(&it, &sample)) == 1)
		if ((rc = fn(sample, ctx)) != 0)
			return rc;
	return rc == STACKPULSE_ETRUNCATED ? STACKPULSE_EFORMAT : rc;
}

/* A failed step stops the iterator for good. */
static int iter_fail(struct block_iter *it, int rc)
{
	if (rc < 0) {
		if (rc == STACKPULSE_ETRUNCATED)
			rc = STACKPULSE_EFORMAT;
		it->failed = rc;
		it->cur = sp_cursor_make(NULL, 0);
		it->block_left = 0;
	}
	return rc;
}

int stackpulse_sample_iter_next(stackpulse_sample_iter *it, const struct stackpulse_sample **sample)
{
	SP_API_ENTRY();
	if (it->b.failed)
		return sp_error(it->b.failed, "sample iterator stopped after an error");
	return iter_fail(&it->b, sample_step(it, sample));
}

int stackpulse_offcpu_iter_next(stackpulse_offcpu_iter *it,
                                const struct stackpulse_offcpu **interval)
{
	SP_API_ENTRY();
	if (it->b.failed)
		return sp_error(it->b.failed, "off-CPU iterator stopped after an error");
	int rc = iter_step(&it->b);
	if (rc == 1 && (rc = iter_offcpu(it)) == 0) {
		*interval = &it->interval;
		return 1;
	}
	return iter_fail(&it->b, rc == 1 ? STACKPULSE_EINTERNAL : rc);
}
