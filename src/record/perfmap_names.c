/* Names for anonymous executable code: at finish, the perf map a JIT wrote
 * (/tmp/perf-PID.map: Python 3.12 -X perf, node, ...) is copied into the
 * spool, so replay does not depend on the map file surviving. */
#include "common/error.h"
#include "record/perfmap.h"
#include "record/recorder.h"

/* Maps with more entries than this are cut: a bound on spool growth. */
#define SP_PERFMAP_MAX_ENTRIES 200000u

typedef struct perfmap_ctx {
	sp_writer *w;
	uint32_t process;
	uint32_t entries;
	int werr; /* First writer error: the only failure that matters. */
} perfmap_ctx;

static int add_entry(void *ctx, uint64_t start, uint64_t size, const char *name)
{
	perfmap_ctx *c = ctx;
	if (c->entries >= SP_PERFMAP_MAX_ENTRIES)
		return STACKPULSE_ELIMIT;
	c->entries++;
	c->werr = sp_writer_jitsym(c->w, c->process, start, size, name);
	return c->werr;
}

int sp_recorder_write_perfmaps(stackpulse_recorder *rec)
{
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		const sp_process *p = rec->pt.procs[i];
		perfmap_ctx c = { rec->w, p->index, 0, 0 };
		uint64_t offset = 0;
		/* No map, an untrusted or unreadable one, or a cut one only
		 * costs names; a failing spool write is an error. */
		(void)sp_perfmap_read(p->pid, &offset, add_entry, &c);
		if (c.werr)
			return c.werr;
	}
	return 0;
}
