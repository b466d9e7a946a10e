/* Self-contained spools: every distinct native frame is remembered as it
 * is interned, and at finish the symbolizer embeds one symbol table per
 * module those frames hit, so the spool symbolizes on another machine
 * without the binaries. */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/error.h"
#include "record/recorder.h"
#include "symbolize/symbolize.h"

struct sp_native_frame {
	uint32_t module;
	uint64_t offset;
};

int sp_recorder_frame(stackpulse_recorder *rec, const struct stackpulse_raw_frame *f, uint32_t *id)
{
	int rc = sp_writer_frame(rec->w, f, id);
	if (rc)
		return rc;
	/* Ids are dense, so an id at the high-water mark is a new frame. */
	if (*id < rec->frames_seen)
		return 0;
	rec->frames_seen = *id + 1;
	if (!rec->opts.self_contained || f->kind != STACKPULSE_FRAME_NATIVE)
		return 0;
	if (rec->nnative == rec->capnative) {
		size_t ncap = rec->capnative ? rec->capnative * 2 : 256;
		struct sp_native_frame *grown = sp_realloc_array(rec->native, ncap, sizeof(*grown));
		if (!grown)
			return sp_error(-ENOMEM, "cannot remember %zu native frames", ncap);
		rec->native = grown;
		rec->capnative = ncap;
	}
	rec->native[rec->nnative].module = f->module;
	rec->native[rec->nnative].offset = f->offset;
	rec->nnative++;
	return 0;
}

static int by_module_offset(const void *a, const void *b)
{
	const struct sp_native_frame *x = a, *y = b;
	if (x->module != y->module)
		return x->module < y->module ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int sp_recorder_embed_symbols(stackpulse_recorder *rec)
{
	if (!rec->opts.self_contained || rec->nnative == 0)
		return 0;
	qsort(rec->native, rec->nnative, sizeof(*rec->native), by_module_offset);

	size_t nmod = 0;
	for (size_t i = 0; i < rec->nnative; i++)
		if (i == 0 || rec->native[i].module != rec->native[i - 1].module)
			nmod++;
	uint64_t *offsets = sp_calloc(rec->nnative, sizeof(*offsets));
	sp_symtab_request *reqs = sp_calloc(nmod, sizeof(*reqs));
	if (!offsets || !reqs) {
		sp_free(offsets);
		sp_free(reqs);
		return sp_error(-ENOMEM, "cannot plan symbol tables for %zu modules", nmod);
	}
	size_t nreq = 0;
	for (size_t i = 0; i < rec->nnative;) {
		size_t j = i;
		while (j < rec->nnative && rec->native[j].module == rec->native[i].module) {
			offsets[j] = rec->native[j].offset;
			j++;
		}
		sp_symtab_request *r = &reqs[nreq];
		/* A module the table does not know (should not happen) is left out. */
		if (sp_ptable_module_info(&rec->pt, rec->native[i].module, &r->path, &r->build_id,
		                          &r->build_id_len) == 0) {
			r->module = rec->native[i].module;
			r->offsets = &offsets[i];
			r->offset_count = j - i;
			nreq++;
		}
		i = j;
	}
	uint32_t embedded = 0, skipped = 0;
	int rc = sp_symbolize_build_symtab(rec->w, reqs, nreq, NULL, &embedded, &skipped, NULL);
	sp_free(offsets);
	sp_free(reqs);
	return rc;
}
