/* The decoded spool: tables only, never samples. Private to src/format (and
 * the fuzz harnesses, which compare two decoded spools field by field). */
#ifndef SP_FORMAT_SPOOL_INTERNAL_H
#define SP_FORMAT_SPOOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/htab.h"
#include "format/spool_reader.h"

/* Where a complete chunk lies, so the iterator can read it again. */
struct sp_chunk_ref {
	uint64_t offset;    /* File offset of the chunk header. */
	uint64_t base_time; /* Header base time. */
	uint64_t samples;   /* Samples in the chunk. */
	uint64_t intervals; /* Off-CPU intervals in the chunk. */
	uint32_t stored_len;
	uint32_t raw_len;
	uint32_t crc;
	uint8_t codec;
};

struct sp_stack_node {
	uint32_t parent;
	uint32_t frame;
	uint32_t depth; /* Frames from this node to the root. */
};

struct sp_ksym {
	uint64_t addr;
	const char *name;
	const char *module;
};

struct sp_stat {
	uint32_t key;
	uint64_t value;
};

/* An embedded symbol table, joined from its parts. */
struct sp_symtab {
	uint8_t *data;
	uint64_t len;   /* Bytes received so far. */
	uint64_t cap;   /* Bytes allocated. */
	uint64_t total; /* Announced length; 0 when none was seen. */
};

struct stackpulse_spool {
	sp_source src;
	struct stackpulse_spool_meta meta;
	int has_meta;           /* A META record was read. */
	uint64_t start_mono_ns; /* META start_mono_ns. */
	uint64_t first_time;    /* Smallest sample time. */
	uint64_t last_time;     /* Largest sample time. */

	struct stackpulse_process *procs;
	uint32_t nprocs, procs_cap;
	struct stackpulse_thread *threads;
	uint32_t nthreads, threads_cap;
	struct stackpulse_module *modules;
	uint32_t nmodules, modules_cap;
	struct sp_symtab *symtabs; /* Parallel to modules. */
	uint32_t symtabs_cap;
	struct sp_mapping *mappings;
	uint32_t nmappings, mappings_cap;
	struct stackpulse_pycode *pycodes;
	uint32_t npycodes, pycodes_cap;
	struct stackpulse_raw_frame *frames;
	uint32_t nframes, frames_cap;
	struct sp_stack_node *stacks; /* stacks[0] is the empty stack. */
	uint32_t nstacks, stacks_cap;
	struct stackpulse_spool_event *events;
	uint32_t nevents, events_cap;
	struct sp_rtname *rtnames; /* Sorted by time by order_tables. */
	uint32_t nrtnames, rtnames_cap;
	/* Per thread, its latest runtime name (or NULL), set with the names
	 * by sp_spool_apply_names; nthreads entries. */
	const char **thread_rtname;
	struct sp_ksym *ksyms;
	uint32_t nksyms, ksyms_cap;
	struct sp_jitsym *jitsyms;
	uint32_t njitsyms, jitsyms_cap;
	struct sp_stat *stats;
	uint32_t nstats, stats_cap;
	struct sp_chunk_ref *chunks;
	uint32_t nchunks, chunks_cap;

	/* Every string the tables point at, freed at close. */
	char **strings;
	uint32_t nstrings, strings_cap;

	sp_htab module_ix, frame_ix, stack_ix;

	uint64_t footer_at;   /* Offset of a valid footer ending the file, or UINT64_MAX. */
	uint32_t chunk_limit; /* Read no chunk from this index on (UINT32_MAX: all). */

	/* Tailing (sp_spool_tail_step): chunks are decoded as they land and
	 * not remembered (chunks stays empty, nchunks counts them). */
	int tail;
	int tail_strict; /* STACKPULSE_SPOOL_STRICT: damage fails the poll. */
	int tail_done;   /* Footer seen or writer gone: no more polls read. */
	enum stackpulse_tail_state tail_state;
	uint64_t tail_off;     /* Next chunk (or footer) offset; 0 before the header. */
	uint64_t tail_suspect; /* Offset that failed a check once, or UINT64_MAX. */
	struct sp_chunk_scratch *tail_sc;

	uint64_t raw_used; /* Decompressed bytes so far. */
	uint64_t raw_cap;
	uint64_t mem_used; /* Table bytes so far. */
	uint64_t mem_cap;
};

/* Adds @p bytes to the table memory budget: 0 or STACKPULSE_ELIMIT. */
int sp_spool_charge(stackpulse_spool *s, uint64_t bytes);
/* Grows a table to hold @p need entries of @p elem bytes, charging the
 * budget: 0, -ENOMEM or STACKPULSE_ELIMIT. */
int sp_spool_grow(stackpulse_spool *s, void **arr, uint32_t *cap, uint32_t need, size_t elem,
                  const char *what);
#define SP_SPOOL_GROW(s, arr, cap, need, what)                                                     \
	sp_spool_grow((s), (void **)&(arr), &(cap), (need), sizeof(*(arr)), (what))
/* Decodes the records of complete chunk @p index (raw bytes at @p raw),
 * adding to the tables and counting samples into @p ref->samples. */
int sp_spool_decode_chunk(stackpulse_spool *s, uint32_t index, struct sp_chunk_ref *ref,
                          const uint8_t *raw);

/* Applies the EXEC and COMM events, sorted by time, to the process and
 * thread names, so the latest rename by time wins whatever the file order,
 * and the RTNAME records (sorted too) to thread_rtname. 0 or -ENOMEM. */
int sp_spool_apply_names(stackpulse_spool *s);

/* Reads, checks and decompresses one chunk described by @p ref. @p stored
 * and @p raw are scratch buffers owned by the caller (grown as needed).
 * On success *payload points at ref->raw_len decompressed bytes. */
struct sp_chunk_scratch {
	uint8_t *stored;
	size_t stored_cap;
	uint8_t *raw;
	size_t raw_cap;
	void *dctx; /* ZSTD_DCtx, created on first use. */
};
int sp_chunk_load(const sp_source *src, uint32_t index, const struct sp_chunk_ref *ref,
                  struct sp_chunk_scratch *scratch, const uint8_t **payload);
void sp_chunk_scratch_free(struct sp_chunk_scratch *scratch);

/* Calls @p fn with each sample of the decoded chunk @p ref (payload @p raw),
 * whose records are already in the tables: 0, the first nonzero return of
 * @p fn, or a format error. */
int sp_spool_chunk_samples(const stackpulse_spool *s, const struct sp_chunk_ref *ref,
                           const uint8_t *raw, stackpulse_sample_fn fn, void *ctx);

#endif
