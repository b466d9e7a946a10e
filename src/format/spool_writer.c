/* Spool encoder. Records are appended to the current chunk buffer as soon as
 * they are added; a definition is therefore always in the same or an earlier
 * chunk than its first use. A full chunk is closed lazily, at the start of the
 * next record, so a failing call never leaves half of a record behind. */
#include "format/spool_writer.h"

#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/cursor.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/htab.h"
#include "format/spool_format.h"
#include "format/spool_keys.h"

enum {
	W_OPEN = 0,
	W_FINISHED = 1,
	W_FAILED = 2
};

struct w_module {
	char *path;
	uint8_t build_id[SP_BUILD_ID_MAX];
	uint32_t build_id_len;
	int has_symtab;
};

struct w_stack {
	uint32_t parent;
	uint32_t frame;
	uint32_t depth;
};

struct sp_writer {
	sp_sink_fn sink;
	void *sink_ctx;
	int level;
	uint32_t chunk_bytes;
	int state;
	int has_meta;
	ZSTD_CCtx *cctx;
	sp_buf chunk;      /* Raw records of the open chunk. */
	sp_buf body;       /* Body of the record being built. */
	sp_buf out;        /* Header and payload of the chunk being written. */
	uint32_t seq;      /* Chunks written so far. */
	int offcpu_method; /* enum stackpulse_offcpu_method for META records. */
	/* Samples of the open chunk, one column per field; they go out as one
	 * SAMPLES record at the end of the chunk. Columns compress far better
	 * than rows: the weight and cpu columns shrink to almost nothing. */
	sp_buf cols[SP_SAMPLE_COLUMNS];
	uint32_t chunk_samples;
	uint64_t chunk_base; /* Time of the chunk's first sample. */
	uint64_t chunk_prev; /* Time of the chunk's latest sample. */
	/* Off-CPU intervals of the open chunk, by column likewise (one
	 * OFFCPU record at the end of the chunk, before SAMPLES). */
	sp_buf ocols[SP_OFFCPU_ALL_COLUMNS];
	uint32_t chunk_offcpu;
	/* A row of the chunk has merged intervals: its block carries the two
	 * optional columns. */
	int chunk_merged;
	uint64_t offcpu_prev; /* Start of the chunk's latest interval. */
	sp_writer_counts counts;
	/* Counts when the current file began (sp_writer_next_file): its footer
	 * holds the file's own samples and bytes. */
	uint64_t file_samples0, file_bytes0;
	/* With keep_defs: every definition record so far, encoded, in order;
	 * replayed at the start of each next file so it stands alone. */
	int keep_defs;
	sp_buf defs;
	struct w_module *modules;
	uint32_t modules_cap;
	struct stackpulse_raw_frame *frames;
	uint32_t frames_cap;
	struct w_stack *stacks; /* stacks[0] is the empty stack. */
	uint32_t stacks_cap;
	sp_htab module_ix, frame_ix, stack_ix;
};

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return sp_grow(arr, cap, need, elem, SP_TABLE_MAX, "spool table entries");
}

static size_t chunk_raw_len(const sp_writer *w)
{
	size_t n = w->chunk.len;
	for (int i = 0; i < SP_SAMPLE_COLUMNS; i++)
		n += w->cols[i].len;
	for (int i = 0; i < SP_OFFCPU_ALL_COLUMNS; i++)
		n += w->ocols[i].len;
	return n;
}

/* Appends a SAMPLES or OFFCPU record of @p n rows built from @p ncols
 * columns. */
static int append_block(sp_writer *w, unsigned type, uint32_t n, const sp_buf *cols, int ncols)
{
	uint8_t count[SP_VARINT_MAX];
	size_t count_len = sp_varint_put(count, n);
	size_t body = count_len;
	for (int i = 0; i < ncols; i++)
		body += cols[i].len;
	int rc = sp_buf_varint(&w->chunk, type);
	if (!rc)
		rc = sp_buf_varint(&w->chunk, body);
	if (!rc)
		rc = sp_buf_append(&w->chunk, count, count_len);
	for (int i = 0; i < ncols && !rc; i++)
		rc = sp_buf_append(&w->chunk, cols[i].data, cols[i].len);
	return rc;
}

/* Hands a finished chunk to the sink. A sink failure leaves the file without
 * definitions later records would need, so the writer stops for good. Any
 * other failure leaves the chunk open, to be retried. */
static int close_chunk(sp_writer *w)
{
	if (w->chunk.len == 0 && w->chunk_samples == 0 && w->chunk_offcpu == 0)
		return 0;
	size_t records_len = w->chunk.len;
	int rc = w->chunk_offcpu
	                 ? append_block(w, SP_REC_OFFCPU, w->chunk_offcpu, w->ocols,
	                                w->chunk_merged ? SP_OFFCPU_ALL_COLUMNS : SP_OFFCPU_COLUMNS)
	                 : 0;
	if (!rc && w->chunk_samples)
		rc = append_block(w, SP_REC_SAMPLES, w->chunk_samples, w->cols, SP_SAMPLE_COLUMNS);
	if (!rc) {
		sp_buf_reset(&w->out);
		rc = sp_buf_reserve(&w->out,
		                    SP_CHUNK_HEADER_LEN + ZSTD_compressBound(w->chunk.len));
	}
	if (rc) {
		w->chunk.len = records_len;
		return rc;
	}
	size_t bound = ZSTD_compressBound(w->chunk.len);
	uint8_t *hdr = w->out.data;
	uint8_t *payload = hdr + SP_CHUNK_HEADER_LEN;
	size_t n =
	        ZSTD_compressCCtx(w->cctx, payload, bound, w->chunk.data, w->chunk.len, w->level);
	if (ZSTD_isError(n)) {
		w->chunk.len = records_len;
		return sp_error(STACKPULSE_ECOMPRESS, "zstd: %s", ZSTD_getErrorName(n));
	}
	uint8_t codec = SP_CODEC_ZSTD;
	if (n >= w->chunk.len) {
		/* Incompressible: store it as is. */
		codec = SP_CODEC_NONE;
		n = w->chunk.len;
		memcpy(payload, w->chunk.data, n);
	}
	sp_put_le32(hdr, SP_CHUNK_MAGIC);
	hdr[4] = codec;
	hdr[5] = 0;
	sp_put_le16(hdr + 6, 0);
	sp_put_le32(hdr + 8, w->seq);
	sp_put_le32(hdr + 12, (uint32_t)n);
	sp_put_le32(hdr + 16, (uint32_t)w->chunk.len);
	sp_put_le64(hdr + 20, w->chunk_samples ? w->chunk_base : 0);
	uint32_t crc = sp_crc32c(0, hdr, SP_CHUNK_CRC_OFFSET);
	crc = sp_crc32c(crc, payload, n);
	sp_put_le32(hdr + SP_CHUNK_CRC_OFFSET, crc);
	w->out.len = SP_CHUNK_HEADER_LEN + n;
	rc = w->sink(w->sink_ctx, w->out.data, w->out.len);
	if (rc) {
		w->state = W_FAILED;
		return rc < 0 ? rc : sp_error(-EIO, "spool sink failed");
	}
	w->seq++;
	w->counts.bytes += w->out.len;
	w->counts.chunks++;
	sp_buf_reset(&w->chunk);
	for (int i = 0; i < SP_SAMPLE_COLUMNS; i++)
		sp_buf_reset(&w->cols[i]);
	for (int i = 0; i < SP_OFFCPU_ALL_COLUMNS; i++)
		sp_buf_reset(&w->ocols[i]);
	w->chunk_samples = 0;
	w->chunk_offcpu = 0;
	w->chunk_merged = 0;
	return 0;
}

/* Starts a record: checks the state, closes a full chunk, clears the body. */
static int begin(sp_writer *w)
{
	if (w->state == W_FINISHED)
		return sp_error(STACKPULSE_ESTATE, "spool writer already finished");
	if (w->state == W_FAILED)
		return sp_error(STACKPULSE_ESTATE, "spool writer stopped after a write error");
	if (chunk_raw_len(w) >= w->chunk_bytes) {
		int rc = close_chunk(w);
		if (rc)
			return rc;
	}
	sp_buf_reset(&w->body);
	return 0;
}

/* Records that define what later records refer to (a next file replays
 * them); samples, losses, symbols and counters belong to one file. */
static int is_definition(unsigned type)
{
	switch (type) {
	case SP_REC_PROCESS:
	case SP_REC_EXEC:
	case SP_REC_THREAD:
	case SP_REC_COMM:
	case SP_REC_RTNAME:
	case SP_REC_EXIT:
	case SP_REC_FORK:
	case SP_REC_MODULE:
	case SP_REC_MAPPING:
	case SP_REC_PYCODE:
	case SP_REC_FRAME:
	case SP_REC_STACK: return 1;
	default: return 0;
	}
}

/* Appends the built body as a record of @p type to @p b; all or nothing. */
static int put_record(sp_buf *b, unsigned type, const sp_buf *body)
{
	size_t saved = b->len;
	int rc = sp_buf_varint(b, type);
	if (!rc)
		rc = sp_buf_varint(b, body->len);
	if (!rc)
		rc = sp_buf_append(b, body->data, body->len);
	if (rc)
		b->len = saved;
	return rc;
}

/* Appends the built body as a record of @p type (and to the definitions
 * kept for the next file); all or nothing. */
static int commit(sp_writer *w, unsigned type)
{
	size_t saved = w->chunk.len;
	int rc = put_record(&w->chunk, type, &w->body);
	if (!rc && w->keep_defs && is_definition(type)) {
		rc = put_record(&w->defs, type, &w->body);
		if (rc)
			w->chunk.len = saved;
	}
	return rc;
}

/* A string field, cut to @p max bytes so the reader's caps always hold. */
static int put_str(sp_buf *b, const char *s, size_t max)
{
	if (!s)
		s = "";
	size_t n = strlen(s);
	return sp_buf_blob(b, s, n > max ? max : n);
}

static int bad_ref(const char *what, uint32_t id, uint32_t count)
{
	return sp_error(-EINVAL, "%s %u is not defined (%u known)", what, id, count);
}

/* The file header, through the sink. */
static int write_header(sp_writer *w)
{
	static const uint8_t magic[SP_FILE_MAGIC_LEN] = SP_FILE_MAGIC_BYTES;
	uint8_t hdr[SP_FILE_HEADER_LEN];
	memcpy(hdr, magic, SP_FILE_MAGIC_LEN);
	sp_put_le16(hdr + 8, SP_SPOOL_VERSION);
	sp_put_le16(hdr + 10, 0);
	sp_put_le32(hdr + 12, 0);
	int rc = w->sink(w->sink_ctx, hdr, sizeof(hdr));
	if (rc)
		return rc < 0 ? rc : sp_error(-EIO, "spool sink failed");
	w->counts.bytes += sizeof(hdr);
	return 0;
}

int sp_writer_new(const sp_writer_opts *opts, sp_sink_fn sink, void *sink_ctx, sp_writer **out)
{
	*out = NULL;
	if (!sink)
		return sp_error(-EINVAL, "spool writer needs a sink");
	int level = opts && opts->zstd_level ? opts->zstd_level : 3;
	uint32_t chunk_bytes =
	        opts && opts->chunk_bytes ? opts->chunk_bytes : SP_CHUNK_BYTES_DEFAULT;
	if (level < 1 || level > 19)
		return sp_error(-EINVAL, "zstd level %d outside 1..19", level);
	if (chunk_bytes > SP_CHUNK_BYTES_MAX)
		chunk_bytes = SP_CHUNK_BYTES_MAX;
	sp_writer *w = sp_calloc(1, sizeof(*w));
	if (!w)
		return sp_error(-ENOMEM, "cannot allocate spool writer");
	w->sink = sink;
	w->sink_ctx = sink_ctx;
	w->level = level;
	w->chunk_bytes = chunk_bytes;
	sp_buf_init(&w->defs);
	sp_buf_init(&w->chunk);
	sp_buf_init(&w->body);
	sp_buf_init(&w->out);
	for (int i = 0; i < SP_SAMPLE_COLUMNS; i++)
		sp_buf_init(&w->cols[i]);
	for (int i = 0; i < SP_OFFCPU_ALL_COLUMNS; i++)
		sp_buf_init(&w->ocols[i]);
	sp_htab_init(&w->module_ix);
	sp_htab_init(&w->frame_ix);
	sp_htab_init(&w->stack_ix);
	int rc = grow((void **)&w->stacks, &w->stacks_cap, 1, sizeof(*w->stacks));
	if (rc)
		goto fail;
	w->stacks[0] = (struct w_stack){ 0, UINT32_MAX, 0 };
	w->counts.stacks = 1;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx) {
		rc = sp_error(-ENOMEM, "cannot create zstd context");
		goto fail;
	}
	if ((rc = write_header(w)) != 0)
		goto fail;
	*out = w;
	return 0;
fail:
	sp_writer_free(w);
	return rc;
}

void sp_writer_free(sp_writer *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cctx);
	sp_buf_free(&w->defs);
	sp_buf_free(&w->chunk);
	sp_buf_free(&w->body);
	sp_buf_free(&w->out);
	for (int i = 0; i < SP_SAMPLE_COLUMNS; i++)
		sp_buf_free(&w->cols[i]);
	for (int i = 0; i < SP_OFFCPU_ALL_COLUMNS; i++)
		sp_buf_free(&w->ocols[i]);
	for (uint32_t i = 0; i < w->counts.modules; i++)
		sp_free(w->modules[i].path);
	sp_free(w->modules);
	sp_free(w->frames);
	sp_free(w->stacks);
	sp_htab_free(&w->module_ix);
	sp_htab_free(&w->frame_ix);
	sp_htab_free(&w->stack_ix);
	sp_free(w);
}

void sp_writer_set_offcpu_method(sp_writer *w, int method)
{
	w->offcpu_method = method;
}

int sp_writer_meta(sp_writer *w, const sp_meta *m)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (w->has_meta)
		return sp_error(STACKPULSE_ESTATE, "spool metadata already written");
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, m->start_time_ns)) ||
	    (rc = sp_buf_varint(b, m->start_mono_ns)) || (rc = sp_buf_varint(b, m->frequency)) ||
	    (rc = sp_buf_varint(b, m->stack_size)) || (rc = put_str(b, m->event, SP_NAME_MAX)) ||
	    (rc = put_str(b, m->machine, SP_NAME_MAX)) ||
	    (rc = put_str(b, m->kernel_release, SP_NAME_MAX)) ||
	    (rc = put_str(b, m->hostname, SP_NAME_MAX)) ||
	    (rc = sp_buf_varint(b, m->kernel_frames ? 1 : 0)) ||
	    (rc = put_str(b, m->kernel_note, SP_NAME_MAX)))
		return rc;
	/* Trailing field, only when set: spools without off-CPU data keep
	 * the bytes of older writers. */
	if (w->offcpu_method && (rc = sp_buf_varint(b, (uint64_t)(unsigned)w->offcpu_method)))
		return rc;
	if ((rc = commit(w, SP_REC_META)))
		return rc;
	w->has_meta = 1;
	return 0;
}

int sp_writer_process(sp_writer *w, pid_t pid, uint32_t parent, uint64_t time_ns, const char *name,
                      const char *cmdline, uint32_t *index)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (pid < 0)
		return sp_error(-EINVAL, "negative pid %d", (int)pid);
	if (parent != UINT32_MAX && parent >= w->counts.processes)
		return bad_ref("parent process", parent, w->counts.processes);
	if (w->counts.processes >= SP_TABLE_MAX)
		return sp_error(STACKPULSE_ELIMIT, "too many processes");
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, (uint64_t)pid)) ||
	    (rc = sp_buf_varint(b, parent == UINT32_MAX ? 0 : (uint64_t)parent + 1)) ||
	    (rc = sp_buf_varint(b, time_ns)) || (rc = put_str(b, name, SP_NAME_MAX)) ||
	    (rc = put_str(b, cmdline, SP_NAME_MAX)) || (rc = commit(w, SP_REC_PROCESS)))
		return rc;
	if (index)
		*index = w->counts.processes;
	w->counts.processes++;
	return 0;
}

int sp_writer_process_exec(sp_writer *w, uint32_t process, uint64_t time_ns, const char *name,
                           const char *cmdline)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (process >= w->counts.processes)
		return bad_ref("process", process, w->counts.processes);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, process)) || (rc = sp_buf_varint(b, time_ns)) ||
	    (rc = put_str(b, name, SP_NAME_MAX)) || (rc = put_str(b, cmdline, SP_NAME_MAX)))
		return rc;
	return commit(w, SP_REC_EXEC);
}

int sp_writer_thread(sp_writer *w, uint32_t process, pid_t tid, uint64_t time_ns, const char *name,
                     uint32_t *index)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (process >= w->counts.processes)
		return bad_ref("process", process, w->counts.processes);
	if (tid < 0)
		return sp_error(-EINVAL, "negative tid %d", (int)tid);
	if (w->counts.threads >= SP_TABLE_MAX)
		return sp_error(STACKPULSE_ELIMIT, "too many threads");
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, process)) || (rc = sp_buf_varint(b, (uint64_t)tid)) ||
	    (rc = sp_buf_varint(b, time_ns)) || (rc = put_str(b, name, SP_NAME_MAX)) ||
	    (rc = commit(w, SP_REC_THREAD)))
		return rc;
	if (index)
		*index = w->counts.threads;
	w->counts.threads++;
	return 0;
}

int sp_writer_thread_name(sp_writer *w, uint32_t thread, uint64_t time_ns, const char *name)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, thread)) || (rc = sp_buf_varint(b, time_ns)) ||
	    (rc = put_str(b, name, SP_NAME_MAX)))
		return rc;
	return commit(w, SP_REC_COMM);
}

int sp_writer_thread_runtime_name(sp_writer *w, uint32_t thread, uint64_t time_ns, uint32_t runtime,
                                  const char *name)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, thread)) || (rc = sp_buf_varint(b, time_ns)) ||
	    (rc = sp_buf_varint(b, runtime)) || (rc = put_str(b, name, SP_NAME_MAX)))
		return rc;
	return commit(w, SP_REC_RTNAME);
}

int sp_writer_exit(sp_writer *w, uint32_t process, uint32_t thread, uint64_t time_ns)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (process >= w->counts.processes)
		return bad_ref("process", process, w->counts.processes);
	if (thread != UINT32_MAX && thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, process)) ||
	    (rc = sp_buf_varint(b, thread == UINT32_MAX ? 0 : (uint64_t)thread + 1)) ||
	    (rc = sp_buf_varint(b, time_ns)))
		return rc;
	return commit(w, SP_REC_EXIT);
}

int sp_writer_fork(sp_writer *w, uint32_t parent, uint32_t child, uint64_t time_ns)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (parent >= w->counts.processes)
		return bad_ref("process", parent, w->counts.processes);
	if (child >= w->counts.processes)
		return bad_ref("process", child, w->counts.processes);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, parent)) || (rc = sp_buf_varint(b, child)) ||
	    (rc = sp_buf_varint(b, time_ns)))
		return rc;
	return commit(w, SP_REC_FORK);
}

int sp_writer_lost(sp_writer *w, uint32_t thread, uint64_t count, uint64_t time_ns)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (thread != UINT32_MAX && thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, thread == UINT32_MAX ? 0 : (uint64_t)thread + 1)) ||
	    (rc = sp_buf_varint(b, count)) || (rc = sp_buf_varint(b, time_ns)) ||
	    (rc = commit(w, SP_REC_LOST)))
		return rc;
	w->counts.lost += count;
	return 0;
}

static int module_eq(const void *ctx, uint32_t id, const void *key)
{
	const sp_writer *w = ctx;
	const struct w_module *m = &w->modules[id];
	return sp_module_key_equal(key, m->path, m->build_id, m->build_id_len);
}

int sp_writer_module(sp_writer *w, const char *path, const uint8_t *build_id, uint32_t build_id_len,
                     uint32_t *index)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (!path)
		path = "";
	if (build_id_len > SP_BUILD_ID_MAX || (build_id_len && !build_id))
		return sp_error(-EINVAL, "build-id of %u bytes (at most %u)", build_id_len,
		                SP_BUILD_ID_MAX);
	size_t path_len = strlen(path);
	if (path_len > SP_PATH_MAX)
		path_len = SP_PATH_MAX;
	sp_module_key key = { path, path_len, build_id, build_id_len };
	uint64_t h = sp_module_hash(path, path_len, build_id, build_id_len);
	uint32_t id = sp_htab_find(&w->module_ix, h, module_eq, w, &key);
	if (id != UINT32_MAX) {
		if (index)
			*index = id;
		return 0;
	}
	id = w->counts.modules;
	if ((rc = grow((void **)&w->modules, &w->modules_cap, id + 1, sizeof(*w->modules))) ||
	    (rc = sp_htab_reserve(&w->module_ix)))
		return rc;
	char *copy = sp_strndup(path, path_len);
	if (!copy)
		return sp_error(-ENOMEM, "cannot copy module path");
	sp_buf *b = &w->body;
	if ((rc = sp_buf_blob(b, path, path_len)) ||
	    (rc = sp_buf_blob(b, build_id, build_id_len)) || (rc = commit(w, SP_REC_MODULE))) {
		sp_free(copy);
		return rc;
	}
	struct w_module *m = &w->modules[id];
	m->path = copy;
	if (build_id_len)
		memcpy(m->build_id, build_id, build_id_len);
	m->build_id_len = build_id_len;
	m->has_symtab = 0;
	sp_htab_add(&w->module_ix, h, id);
	w->counts.modules++;
	if (index)
		*index = id;
	return 0;
}

int sp_writer_mapping(sp_writer *w, uint32_t process, uint32_t module, uint64_t start, uint64_t end,
                      uint64_t pgoff, uint64_t time_ns)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (process >= w->counts.processes)
		return bad_ref("process", process, w->counts.processes);
	if (module >= w->counts.modules)
		return bad_ref("module", module, w->counts.modules);
	if (end <= start)
		return sp_error(-EINVAL, "empty mapping [%#llx, %#llx)", (unsigned long long)start,
		                (unsigned long long)end);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, process)) || (rc = sp_buf_varint(b, module)) ||
	    (rc = sp_buf_varint(b, start)) || (rc = sp_buf_varint(b, end - start)) ||
	    (rc = sp_buf_varint(b, pgoff)) || (rc = sp_buf_varint(b, time_ns)))
		return rc;
	return commit(w, SP_REC_MAPPING);
}

int sp_writer_pycode(sp_writer *w, const char *qualname, const char *filename, int32_t first_line,
                     uint32_t *index)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (w->counts.pycodes >= SP_TABLE_MAX)
		return sp_error(STACKPULSE_ELIMIT, "too many Python code objects");
	sp_buf *b = &w->body;
	if ((rc = put_str(b, qualname, SP_NAME_MAX)) || (rc = put_str(b, filename, SP_PATH_MAX)) ||
	    (rc = sp_buf_svarint(b, first_line)) || (rc = commit(w, SP_REC_PYCODE)))
		return rc;
	if (index)
		*index = w->counts.pycodes;
	w->counts.pycodes++;
	return 0;
}

static int frame_eq(const void *ctx, uint32_t id, const void *key)
{
	const sp_writer *w = ctx;
	return sp_frame_equal(&w->frames[id], key);
}

int sp_writer_frame(sp_writer *w, const struct stackpulse_raw_frame *frame, uint32_t *id_out)
{
	int rc = begin(w);
	if (rc)
		return rc;
	struct stackpulse_raw_frame f = *frame;
	if (sp_frame_canonical(&f))
		return sp_error(-EINVAL, "frame kind %d cannot be stored", frame->kind);
	if (f.kind == STACKPULSE_FRAME_NATIVE && f.module >= w->counts.modules)
		return bad_ref("module", f.module, w->counts.modules);
	if (f.kind == STACKPULSE_FRAME_PYTHON && f.pycode >= w->counts.pycodes)
		return bad_ref("Python code", f.pycode, w->counts.pycodes);
	uint64_t h = sp_frame_hash(&f);
	uint32_t id = sp_htab_find(&w->frame_ix, h, frame_eq, w, &f);
	if (id != UINT32_MAX) {
		*id_out = id;
		return 0;
	}
	id = w->counts.frames;
	if ((rc = grow((void **)&w->frames, &w->frames_cap, id + 1, sizeof(*w->frames))) ||
	    (rc = sp_htab_reserve(&w->frame_ix)))
		return rc;
	sp_buf *b = &w->body;
	rc = sp_buf_varint(b, (uint64_t)f.kind);
	switch (f.kind) {
	case STACKPULSE_FRAME_NATIVE:
		if (!rc)
			rc = sp_buf_varint(b, f.module);
		if (!rc)
			rc = sp_buf_varint(b, f.offset);
		break;
	case STACKPULSE_FRAME_PYTHON:
		if (!rc)
			rc = sp_buf_varint(b, f.pycode);
		if (!rc)
			rc = sp_buf_varint(b, f.offset);
		if (!rc)
			rc = sp_buf_svarint(b, f.line);
		break;
	case STACKPULSE_FRAME_TRUNCATED: break;
	default:
		if (!rc)
			rc = sp_buf_varint(b, f.offset);
		break;
	}
	if (!rc)
		rc = commit(w, SP_REC_FRAME);
	if (rc)
		return rc;
	w->frames[id] = f;
	sp_htab_add(&w->frame_ix, h, id);
	w->counts.frames++;
	*id_out = id;
	return 0;
}

struct stack_key {
	uint32_t parent, frame;
};

static int stack_eq(const void *ctx, uint32_t id, const void *key)
{
	const sp_writer *w = ctx;
	const struct stack_key *k = key;
	return w->stacks[id].parent == k->parent && w->stacks[id].frame == k->frame;
}

int sp_writer_stack(sp_writer *w, uint32_t parent, uint32_t frame, uint32_t *id_out)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (parent >= w->counts.stacks)
		return bad_ref("stack", parent, w->counts.stacks);
	if (frame >= w->counts.frames)
		return bad_ref("frame", frame, w->counts.frames);
	struct stack_key k = { parent, frame };
	uint64_t h = sp_stack_hash(parent, frame);
	uint32_t id = sp_htab_find(&w->stack_ix, h, stack_eq, w, &k);
	if (id != UINT32_MAX) {
		*id_out = id;
		return 0;
	}
	uint32_t depth = w->stacks[parent].depth + 1;
	if (depth > SP_STACK_DEPTH_MAX)
		return sp_error(STACKPULSE_ELIMIT, "stack deeper than %u frames",
		                SP_STACK_DEPTH_MAX);
	id = w->counts.stacks;
	if ((rc = grow((void **)&w->stacks, &w->stacks_cap, id + 1, sizeof(*w->stacks))) ||
	    (rc = sp_htab_reserve(&w->stack_ix)))
		return rc;
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, parent)) || (rc = sp_buf_varint(b, frame)) ||
	    (rc = commit(w, SP_REC_STACK)))
		return rc;
	w->stacks[id] = (struct w_stack){ parent, frame, depth };
	sp_htab_add(&w->stack_ix, h, id);
	w->counts.stacks++;
	*id_out = id;
	return 0;
}

int sp_writer_stack_frames(sp_writer *w, const uint32_t *frames_leaf_first, size_t n, uint32_t *id)
{
	if (n > SP_STACK_DEPTH_MAX)
		return sp_error(STACKPULSE_ELIMIT, "stack of %zu frames exceeds %u", n,
		                SP_STACK_DEPTH_MAX);
	uint32_t node = 0;
	for (size_t i = n; i-- > 0;) {
		int rc = sp_writer_stack(w, node, frames_leaf_first[i], &node);
		if (rc)
			return rc;
	}
	*id = node;
	return 0;
}

/* Appends one row to a block's @p ncols columns: the time delta (signed),
 * then @p rest. All or nothing. */
static int put_row(sp_buf *cols, int ncols, int64_t delta, const uint64_t *rest)
{
	size_t saved[SP_COLUMNS_MAX];
	for (int i = 0; i < ncols; i++)
		saved[i] = cols[i].len;
	int rc = sp_buf_svarint(&cols[0], delta);
	for (int i = 1; i < ncols && !rc; i++)
		rc = sp_buf_varint(&cols[i], rest[i - 1]);
	if (rc)
		for (int i = 0; i < ncols; i++)
			cols[i].len = saved[i];
	return rc;
}

/* begin() for a row of a block: its thread and stack must be defined. */
static int begin_row(sp_writer *w, uint32_t thread, uint32_t stack)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	if (stack >= w->counts.stacks)
		return bad_ref("stack", stack, w->counts.stacks);
	return 0;
}

int sp_writer_sample(sp_writer *w, uint64_t time_ns, uint32_t thread, uint32_t stack,
                     uint32_t weight, uint32_t cpu)
{
	int rc = begin_row(w, thread, stack);
	if (rc)
		return rc;
	if (w->chunk_samples == UINT32_MAX)
		return sp_error(STACKPULSE_ELIMIT, "too many samples in one chunk");
	/* Deltas wrap modulo 2^64, so any time sequence round-trips. */
	uint64_t prev = w->chunk_samples ? w->chunk_prev : time_ns;
	const uint64_t rest[SP_SAMPLE_COLUMNS - 1] = { thread, stack, weight, cpu };
	if ((rc = put_row(w->cols, SP_SAMPLE_COLUMNS, (int64_t)(time_ns - prev), rest)))
		return rc;
	if (w->chunk_samples++ == 0)
		w->chunk_base = time_ns;
	w->chunk_prev = time_ns;
	w->counts.samples++;
	return 0;
}

int sp_writer_offcpu(sp_writer *w, uint64_t start_ns, uint64_t duration_ns, uint32_t thread,
                     uint32_t stack, int state)
{
	return sp_writer_offcpu_merged(w, start_ns, duration_ns, thread, stack, state, 0, 0);
}

int sp_writer_offcpu_merged(sp_writer *w, uint64_t start_ns, uint64_t duration_ns, uint32_t thread,
                            uint32_t stack, int state, uint64_t merged, uint64_t merged_ns)
{
	int rc = begin_row(w, thread, stack);
	if (rc)
		return rc;
	if (state != STACKPULSE_OFFCPU_BLOCKED && state != STACKPULSE_OFFCPU_PREEMPTED)
		return sp_error(-EINVAL, "off-CPU state %d", state);
	if (w->chunk_offcpu == UINT32_MAX)
		return sp_error(STACKPULSE_ELIMIT, "too many off-CPU intervals in one chunk");
	/* The chain starts from 0 in each chunk: the chunk's base time is its
	 * first sample's, which may come after this interval. */
	uint64_t prev = w->chunk_offcpu ? w->offcpu_prev : 0;
	/* The optional columns are filled for every row and written only
	 * when a row of the chunk uses them. */
	const uint64_t rest[SP_OFFCPU_ALL_COLUMNS - 1] = {
		thread, stack, duration_ns, (uint64_t)state, merged, merged_ns,
	};
	if ((rc = put_row(w->ocols, SP_OFFCPU_ALL_COLUMNS, (int64_t)(start_ns - prev), rest)))
		return rc;
	w->chunk_merged |= merged != 0;
	w->chunk_offcpu++;
	w->offcpu_prev = start_ns;
	w->counts.offcpu++;
	return 0;
}

int sp_writer_ksym(sp_writer *w, uint64_t addr, const char *name, const char *module)
{
	int rc = begin(w);
	if (rc)
		return rc;
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, addr)) || (rc = put_str(b, name, SP_NAME_MAX)) ||
	    (rc = put_str(b, module, SP_NAME_MAX)))
		return rc;
	return commit(w, SP_REC_KSYM);
}

int sp_writer_jitsym(sp_writer *w, uint32_t process, uint64_t start, uint64_t size,
                     const char *name)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (process >= w->counts.processes)
		return bad_ref("process", process, w->counts.processes);
	if (size == 0 || start + size < start)
		return sp_error(-EINVAL, "bad JIT symbol range %#llx+%llu",
		                (unsigned long long)start, (unsigned long long)size);
	sp_buf *b = &w->body;
	if ((rc = sp_buf_varint(b, process)) || (rc = sp_buf_varint(b, start)) ||
	    (rc = sp_buf_varint(b, size)) || (rc = put_str(b, name, SP_NAME_MAX)))
		return rc;
	return commit(w, SP_REC_JITSYM);
}

/* A table goes out in parts of at most SP_SYMTAB_PART_MAX bytes, so no record
 * outgrows a chunk; the reader joins them in order. */
int sp_writer_symtab(sp_writer *w, uint32_t module, const uint8_t *table, size_t len)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if (module >= w->counts.modules)
		return bad_ref("module", module, w->counts.modules);
	if (w->modules[module].has_symtab)
		return sp_error(STACKPULSE_ESTATE, "module %u already has a symbol table", module);
	if (len == 0 || len > SP_SYMTAB_MAX)
		return sp_error(STACKPULSE_ELIMIT, "symbol table of %zu bytes (1..%u allowed)", len,
		                SP_SYMTAB_MAX);
	for (size_t off = 0; off < len;) {
		size_t part = len - off > SP_SYMTAB_PART_MAX ? SP_SYMTAB_PART_MAX : len - off;
		sp_buf *b = &w->body;
		if ((off && (rc = begin(w))) || (rc = sp_buf_varint(b, module)) ||
		    (rc = sp_buf_varint(b, len)) || (rc = sp_buf_varint(b, off)) ||
		    (rc = sp_buf_blob(b, table + off, part)) || (rc = commit(w, SP_REC_SYMTAB))) {
			/* Parts already written cannot be taken back. */
			if (off)
				w->state = W_FAILED;
			return rc;
		}
		off += part;
	}
	w->modules[module].has_symtab = 1;
	return 0;
}

static int write_stat(sp_writer *w, uint32_t key, uint64_t value, uint32_t thread)
{
	int rc = begin(w);
	if (rc)
		return rc;
	if ((rc = sp_buf_varint(&w->body, key)) || (rc = sp_buf_varint(&w->body, value)))
		return rc;
	if (thread != UINT32_MAX && (rc = sp_buf_varint(&w->body, (uint64_t)thread + 1)))
		return rc;
	return commit(w, SP_REC_STATS);
}

int sp_writer_stat(sp_writer *w, uint32_t key, uint64_t value)
{
	return write_stat(w, key, value, UINT32_MAX);
}

int sp_writer_thread_stat(sp_writer *w, uint32_t key, uint64_t value, uint32_t thread)
{
	if (thread >= w->counts.threads)
		return bad_ref("thread", thread, w->counts.threads);
	return write_stat(w, key, value, thread);
}

int sp_writer_flush(sp_writer *w)
{
	if (w->state == W_FINISHED)
		return sp_error(STACKPULSE_ESTATE, "spool writer already finished");
	if (w->state == W_FAILED)
		return sp_error(STACKPULSE_ESTATE, "spool writer stopped after a write error");
	return close_chunk(w);
}

int sp_writer_failed(const sp_writer *w)
{
	return w->state == W_FAILED;
}

int sp_writer_finish(sp_writer *w)
{
	int rc = sp_writer_flush(w);
	if (rc)
		return rc;
	uint8_t f[SP_FOOTER_LEN];
	sp_put_le32(f, SP_FOOTER_MAGIC);
	sp_put_le32(f + 4, w->seq);
	sp_put_le64(f + 8, w->counts.samples - w->file_samples0);
	sp_put_le64(f + 16, w->counts.bytes - w->file_bytes0);
	sp_put_le32(f + 24, 0);
	sp_put_le32(f + 28, sp_crc32c(0, f, 28));
	rc = w->sink(w->sink_ctx, f, sizeof(f));
	if (rc) {
		w->state = W_FAILED;
		return rc < 0 ? rc : sp_error(-EIO, "spool sink failed");
	}
	w->counts.bytes += sizeof(f);
	w->state = W_FINISHED;
	return 0;
}

int sp_writer_keep_defs(sp_writer *w)
{
	if (w->counts.processes || w->counts.modules || w->counts.frames || w->counts.pycodes)
		return sp_error(STACKPULSE_ESTATE, "definitions were written before keep_defs");
	w->keep_defs = 1;
	return 0;
}

int sp_writer_next_file(sp_writer *w, const sp_meta *meta)
{
	if (w->state != W_FINISHED)
		return sp_error(STACKPULSE_ESTATE, "the spool file is not finished");
	if (!w->keep_defs)
		return sp_error(STACKPULSE_ESTATE, "the writer keeps no definitions to start "
		                                   "another file with");
	w->file_samples0 = w->counts.samples;
	w->file_bytes0 = w->counts.bytes;
	w->seq = 0;
	w->has_meta = 0;
	for (uint32_t i = 0; i < w->counts.modules; i++)
		w->modules[i].has_symtab = 0;
	/* Until the definitions are all out, the file is not usable. */
	w->state = W_FAILED;
	int rc = write_header(w);
	if (rc)
		return rc;
	w->state = W_OPEN;
	if ((rc = sp_writer_meta(w, meta)) != 0)
		goto fail;
	/* Our own bytes, already checked when they were built; walked with the
	 * cursor all the same. Chunks close at record boundaries, as always. */
	sp_cursor c = sp_cursor_make(w->defs.data, w->defs.len);
	while (sp_cursor_left(&c) > 0) {
		size_t at = c.pos;
		uint64_t type = 0, len = 0;
		const uint8_t *body = NULL;
		if ((rc = sp_cursor_varint(&c, &type, "kept record type")) ||
		    (rc = sp_cursor_varint(&c, &len, "kept record length")) ||
		    (rc = sp_cursor_bytes(&c, (size_t)len, &body, "kept record")))
			goto fail;
		if (chunk_raw_len(w) >= w->chunk_bytes && (rc = close_chunk(w)) != 0)
			goto fail;
		if ((rc = sp_buf_append(&w->chunk, w->defs.data + at, c.pos - at)) != 0)
			goto fail;
	}
	return 0;
fail:
	w->state = W_FAILED;
	return rc;
}

void sp_writer_get_counts(const sp_writer *w, sp_writer_counts *out)
{
	*out = w->counts;
}
