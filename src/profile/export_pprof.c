/* pprof: profile.proto (github.com/google/pprof/proto/profile.proto),
 * encoded by hand and gzip-compressed with zlib.
 *
 * Sample types are samples/count and cpu/nanoseconds (count x period); the
 * default is samples. A time profile (stackpulse_profile_opts.time) has
 * samples/count, cpu/nanoseconds, off_cpu/nanoseconds and wall/nanoseconds,
 * the default being the one it was built for; on-CPU samples and off-CPU
 * intervals of one stack are separate pprof samples. Each location is one physical frame with its inline
 * frames as extra lines, innermost first. Functions come from the profile's
 * function table (id = index + 1); mappings from the modules native and
 * kernel functions name, with their build-ids. */
#include <errno.h>
#include <string.h>
#define ZLIB_CONST /* next_in is const: no cast needed. */
#include <zlib.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"
#include "profile/proto_tables.h"
#include "profile/proto.h"

typedef struct pp {
	const struct stackpulse_profile *p;
	sp_buf out;           /* The encoded Profile message. */
	sp_buf msg;           /* Scratch for one sub-message. */
	sp_buf sub;           /* Scratch for a sub-sub-message or packed field. */
	sp_pbstrings strs;    /* Field 6 of the Profile. */
	uint32_t *map_of_str; /* Module string -> mapping id, 0 when none. */
	sp_locs locs;
	/* The gzip stream: out is handed over whenever it reaches a block, so
	 * memory stays bounded by the profile, not by samples x depth. */
	z_stream z;
	int zinit;
	uint8_t *zblock;
	sp_out *sink;
} pp;

static int gz_feed(pp *x, int finish);

/* One pprof Mapping (sp_mapping_fn). */
static int write_mapping(void *ctx, uint32_t module, uint32_t build_id, uint32_t index)
{
	pp *x = ctx;
	uint32_t sfile, sbid;
	int rc = sp_pbstrings_of(&x->strs, module, &sfile);
	if (!rc)
		rc = sp_pbstrings_of(&x->strs, build_id, &sbid);
	if (rc)
		return rc;
	sp_buf_reset(&x->msg);
	PB(sp_pb_u64(&x->msg, 1, index));
	PB(sp_pb_u64(&x->msg, 3, UINT64_MAX >> 1)); /* Addresses are file offsets. */
	PB(sp_pb_u64(&x->msg, 5, sfile));
	PB(sp_pb_u64(&x->msg, 6, sbid));
	PB(sp_pb_u64(&x->msg, 7, 1)); /* has_functions: nothing left to symbolize. */
	PB(sp_pb_u64(&x->msg, 8, 1));
	PB(sp_pb_u64(&x->msg, 9, 1));
	PB(sp_pb_u64(&x->msg, 10, 1));
	PB(sp_pb_msg(&x->out, 3, &x->msg));
	return rc;
}

static int write_locations(pp *x)
{
	const struct stackpulse_profile *p = x->p;
	for (uint32_t id = 1; id <= x->locs.n; id++) {
		const uint32_t *fr;
		uint32_t len;
		sp_locs_frames(&x->locs, id, &fr, &len);
		const struct stackpulse_profile_frame *phys = &p->frames[fr[0]];
		int rc = 0;
		sp_buf_reset(&x->msg);
		PB(sp_pb_u64(&x->msg, 1, id));
		PB(sp_pb_u64(&x->msg, 2, sp_profile_mapping_of(p, x->map_of_str, phys->func)));
		PB(sp_pb_u64(&x->msg, 3, phys->address));
		for (uint32_t k = len; k > 0; k--) { /* Innermost first. */
			const struct stackpulse_profile_frame *f = &p->frames[fr[k - 1]];
			sp_buf_reset(&x->sub);
			PB(sp_pb_u64(&x->sub, 1, (uint64_t)f->func + 1));
			PB(sp_pb_u64(&x->sub, 2, f->line));
			PB(sp_pb_msg(&x->msg, 4, &x->sub));
		}
		PB(sp_pb_msg(&x->out, 4, &x->msg));
		if (rc)
			return rc;
	}
	return 0;
}

static int write_functions(pp *x)
{
	const struct stackpulse_profile *p = x->p;
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		const struct stackpulse_profile_func *fn = &p->funcs[i];
		uint32_t name, file;
		int rc = sp_pbstrings_of(&x->strs, fn->name, &name);
		if (!rc)
			rc = sp_pbstrings_of(&x->strs, fn->file, &file);
		if (rc)
			return rc;
		sp_buf_reset(&x->msg);
		PB(sp_pb_u64(&x->msg, 1, (uint64_t)i + 1));
		PB(sp_pb_u64(&x->msg, 2, name));
		/* No system_name: pprof then keeps our (already demangled) name as
		 * is instead of "simplifying" names like "<module>" to nothing. */
		PB(sp_pb_u64(&x->msg, 4, file));
		PB(sp_pb_msg(&x->out, 5, &x->msg));
		if (rc)
			return rc;
	}
	return 0;
}

static int value_type(pp *x, uint32_t field, uint32_t type, uint32_t unit)
{
	int rc = 0;
	sp_buf_reset(&x->msg);
	PB(sp_pb_u64(&x->msg, 1, type));
	PB(sp_pb_u64(&x->msg, 2, unit));
	PB(sp_pb_msg(&x->out, field, &x->msg));
	return rc;
}

static int label(pp *x, uint32_t key, uint32_t str, int64_t num)
{
	int rc = 0;
	sp_buf_reset(&x->sub);
	PB(sp_pb_u64(&x->sub, 1, key));
	PB(sp_pb_u64(&x->sub, 2, str));
	PB(sp_pb_u64(&x->sub, 3, (uint64_t)num));
	PB(sp_pb_msg(&x->msg, 3, &x->sub));
	return rc;
}

static int write_samples(pp *x, uint32_t flags, uint32_t k_pid, uint32_t k_tid, uint32_t k_thread)
{
	const struct stackpulse_profile *p = x->p;
	uint32_t by_thread = flags & (STACKPULSE_EXPORT_PID | STACKPULSE_EXPORT_TID |
	                              STACKPULSE_EXPORT_THREAD_NAMES);
	int timed = p->time != STACKPULSE_TIME_SAMPLES;
	/* Values and counts, added with the same keys in the same order so that
	 * their entries line up. Time profiles keep on- and off-CPU apart. */
	sp_agg a, c;
	memset(&a, 0, sizeof(a));
	memset(&c, 0, sizeof(c));
	int rc = 0;
	for (uint64_t i = 0; i < p->nsamples && !rc; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		uint32_t group = by_thread ? s->thread : 0;
		if (timed)
			group = group * 2 + s->off_cpu;
		rc = sp_agg_add(&a, group, s->stack, s->thread, s->value);
		if (!rc && timed)
			rc = sp_agg_add(&c, group, s->stack, s->thread, s->weight);
	}
	uint64_t period = sp_profile_period_ns(p);
	for (uint32_t i = 0; i < a.n && !rc; i++) {
		uint32_t n;
		rc = sp_locs_stack(&x->locs, a.node[i], &n);
		if (rc)
			break;
		sp_buf_reset(&x->msg);
		sp_buf_reset(&x->sub);
		for (uint32_t k = 0; k < n; k++)
			PB(sp_buf_varint(&x->sub, x->locs.ids[k]));
		if (n)
			PB(sp_pb_msg(&x->msg, 1, &x->sub));
		sp_buf_reset(&x->sub);
		if (timed) {
			int off = (int)(a.group[i] & 1u);
			PB(sp_buf_varint(&x->sub, c.count[i]));
			PB(sp_buf_varint(&x->sub, off ? 0 : a.count[i]));
			PB(sp_buf_varint(&x->sub, off ? a.count[i] : 0));
			PB(sp_buf_varint(&x->sub, a.count[i]));
		} else {
			PB(sp_buf_varint(&x->sub, a.count[i]));
			PB(sp_buf_varint(&x->sub, a.count[i] * period));
		}
		PB(sp_pb_msg(&x->msg, 2, &x->sub));
		const struct stackpulse_profile_thread *t =
		        a.thread[i] < p->nthreads ? &p->threads[a.thread[i]] : NULL;
		if (t && (flags & STACKPULSE_EXPORT_PID) && t->process < p->nprocesses)
			PB(label(x, k_pid, 0, p->processes[t->process].pid));
		if (t && (flags & STACKPULSE_EXPORT_TID))
			PB(label(x, k_tid, 0, t->tid));
		if (t && (flags & STACKPULSE_EXPORT_THREAD_NAMES)) {
			uint32_t sname = 0;
			PB(sp_pbstrings_of(&x->strs, t->name, &sname));
			PB(label(x, k_thread, sname, 0));
		}
		PB(sp_pb_msg(&x->out, 2, &x->msg));
		if (!rc && x->out.len >= SP_OUT_BLOCK)
			rc = gz_feed(x, 0);
	}
	sp_agg_free(&a);
	sp_agg_free(&c);
	return rc;
}

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	return sp_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf ptr)
{
	(void)opaque;
	sp_free(ptr);
}

/* Compresses what x->out holds into the sink and empties it; @p finish
 * ends the gzip stream. */
static int gz_feed(pp *x, int finish)
{
	if (!x->zinit) {
		x->z.zalloc = z_alloc;
		x->z.zfree = z_free;
		/* windowBits 15 + 16 selects the gzip container. */
		if (deflateInit2(&x->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return sp_error(STACKPULSE_ECOMPRESS, "pprof: deflateInit2 failed");
		x->zinit = 1;
		x->zblock = sp_malloc(SP_OUT_BLOCK);
		if (!x->zblock)
			return sp_error(-ENOMEM, "pprof: gzip block");
	}
	z_stream *z = &x->z;
	int rc = 0, zr = Z_OK;
	size_t off = 0, len = x->out.len;
	for (;;) {
		size_t in = len - off;
		if (in > (1u << 30))
			in = 1u << 30;
		z->next_in = x->out.data + off;
		z->avail_in = (uInt)in;
		int flush = finish && off + in == len ? Z_FINISH : Z_NO_FLUSH;
		do {
			z->next_out = x->zblock;
			z->avail_out = SP_OUT_BLOCK;
			zr = deflate(z, flush);
			if (zr == Z_STREAM_ERROR)
				return sp_error(STACKPULSE_ECOMPRESS, "pprof: deflate failed");
			size_t have = SP_OUT_BLOCK - z->avail_out;
			if (have)
				rc = sp_out_write(x->sink, x->zblock, have);
		} while (!rc && z->avail_out == 0);
		if (rc)
			return rc;
		off += in - z->avail_in;
		if (z->avail_in != 0 && flush != Z_FINISH)
			return sp_error(STACKPULSE_ECOMPRESS, "pprof: deflate stalled");
		if (off == len && (!finish || zr == Z_STREAM_END))
			break;
	}
	sp_buf_reset(&x->out);
	return 0;
}

int sp_export_pprof(const struct stackpulse_profile *p, const stackpulse_export_opts *o,
                    sp_out *out)
{
	pp x;
	memset(&x, 0, sizeof(x));
	x.p = p;
	x.sink = out;
	sp_locs_init(&x.locs, p);
	sp_buf_init(&x.out);
	sp_buf_init(&x.msg);
	sp_buf_init(&x.sub);
	int rc = 0;
	x.map_of_str = sp_calloc(p->nstrings ? p->nstrings : 1, sizeof(uint32_t));
	if (!x.map_of_str) {
		rc = sp_error(-ENOMEM, "pprof string map");
		goto done;
	}
	uint32_t s_samples, s_count, s_cpu, s_ns, s_off = 0, s_wall = 0, k_pid, k_tid, k_thread;
	int timed = p->time != STACKPULSE_TIME_SAMPLES;
	rc = sp_pbstrings_init(&x.strs, p, &x.out, 6);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "samples", &s_samples);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "count", &s_count);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "cpu", &s_cpu);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "nanoseconds", &s_ns);
	if (!rc && timed)
		rc = sp_pbstrings_add(&x.strs, "off_cpu", &s_off);
	if (!rc && timed)
		rc = sp_pbstrings_add(&x.strs, "wall", &s_wall);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "pid", &k_pid);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "tid", &k_tid);
	if (!rc)
		rc = sp_pbstrings_add(&x.strs, "thread", &k_thread);
	if (!rc)
		rc = value_type(&x, 1, s_samples, s_count);
	if (!rc)
		rc = value_type(&x, 1, s_cpu, s_ns);
	if (!rc && timed)
		rc = value_type(&x, 1, s_off, s_ns);
	if (!rc && timed)
		rc = value_type(&x, 1, s_wall, s_ns);
	if (!rc)
		rc = write_samples(&x, o->flags, k_pid, k_tid, k_thread);
	if (!rc)
		rc = sp_profile_mappings(p, x.map_of_str, write_mapping, &x);
	if (!rc)
		rc = write_locations(&x);
	if (!rc)
		rc = write_functions(&x);
	if (rc)
		goto done;
	PB(sp_pb_u64(&x.out, 9, p->start_wall_ns));
	PB(sp_pb_u64(&x.out, 10, p->last_ns > p->first_ns ? p->last_ns - p->first_ns : 0));
	PB(value_type(&x, 11, s_cpu, s_ns));
	if (!rc)
		rc = sp_pb_u64(&x.out, 12, sp_profile_period_ns(p));
	if (!rc)
		rc = sp_pb_u64(&x.out, 14,
		               p->time == STACKPULSE_TIME_CPU    ? s_cpu
		               : p->time == STACKPULSE_TIME_OFF  ? s_off
		               : p->time == STACKPULSE_TIME_WALL ? s_wall
		                                                 : s_samples);
	if (!rc)
		rc = gz_feed(&x, 1);
done:
	if (x.zinit)
		deflateEnd(&x.z);
	sp_free(x.zblock);
	sp_buf_free(&x.out);
	sp_buf_free(&x.msg);
	sp_buf_free(&x.sub);
	sp_pbstrings_free(&x.strs);
	sp_free(x.map_of_str);
	sp_locs_free(&x.locs);
	return rc;
}
