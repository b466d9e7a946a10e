/* OTLP profiles (opentelemetry.proto, profiles v1development): one
 * ExportProfilesServiceRequest with a single resource, scope and profile,
 * and the shared ProfilesDictionary. Encoded by hand.
 *
 * Every dictionary table starts with its zero entry, as the spec asks.
 * Locations are the pprof exporter's (a physical frame plus its inline
 * frames, innermost line first); samples are summed per (thread, stack)
 * and carry thread.id, thread.name and process.pid attributes. The sample
 * type is samples/count with a cpu/nanoseconds period. */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"
#include "profile/proto_tables.h"
#include "profile/proto.h"

#define SP_STR_(x) #x
#define SP_STR(x)  SP_STR_(x)
#define SP_VERSION                                                                                 \
	SP_STR(STACKPULSE_VERSION_MAJOR)                                                           \
	"." SP_STR(STACKPULSE_VERSION_MINOR) "." SP_STR(STACKPULSE_VERSION_PATCH)

/* Field numbers, by message. */
enum {
	REQ_RESOURCE_PROFILES = 1,
	REQ_DICTIONARY = 2,
	DICT_MAPPING = 1,
	DICT_LOCATION = 2,
	DICT_FUNCTION = 3,
	DICT_STRING = 5,
	DICT_ATTRIBUTE = 6,
	DICT_STACK = 7,
	RP_RESOURCE = 1,
	RP_SCOPE_PROFILES = 2,
	RES_ATTRIBUTES = 1,
	KV_KEY = 1,
	KV_VALUE = 2,
	ANY_STRING = 1,
	ANY_INT = 3,
	SP_SCOPE = 1,
	SP_PROFILES = 2,
	SCOPE_NAME = 1,
	SCOPE_VERSION = 2,
	PROF_SAMPLE_TYPE = 1,
	PROF_SAMPLES = 2,
	PROF_TIME = 3,
	PROF_DURATION = 4,
	PROF_PERIOD_TYPE = 5,
	PROF_PERIOD = 6,
	VT_TYPE = 1,
	VT_UNIT = 2,
	SAMPLE_STACK = 1,
	SAMPLE_ATTRS = 2,
	SAMPLE_VALUES = 4,
	MAP_LIMIT = 2,
	MAP_FILENAME = 4,
	MAP_ATTRS = 5,
	LOC_MAPPING = 1,
	LOC_ADDRESS = 2,
	LOC_LINES = 3,
	LINE_FUNCTION = 1,
	LINE_LINE = 2,
	FN_NAME = 1,
	FN_SYSTEM_NAME = 2,
	FN_FILENAME = 3,
	KVU_KEY = 1,
	KVU_VALUE = 2,
	STACK_LOCATIONS = 1,
};

typedef struct ot {
	const struct stackpulse_profile *p;
	/* Dictionary tables, each a run of repeated fields. */
	sp_buf strings, mappings, locations, functions, attributes, stacks;
	sp_buf samples; /* Repeated Profile.samples. */
	sp_buf msg, sub, tmp;
	uint32_t nattrs, nstacks;
	uint32_t k_bid, k_tid, k_tname, k_pid; /* Attribute key strings, 0 until used. */
	sp_pbstrings strs;                     /* The string_table. */
	uint32_t *map_of_str;                  /* Module string -> mapping index, 0 when none. */
	uint32_t *stack_of;                    /* Profile stack node -> stack_table index, 0. */
	uint32_t *thread_attr;                 /* Thread -> first of its 3 attributes, 0. */
	sp_locs locs;
} ot;

/* A KeyValue with a string value (resource attributes). */
static int resource_attr(sp_buf *out, sp_buf *kv, sp_buf *any, const char *key, const char *val,
                         size_t vlen)
{
	int rc = 0;
	sp_buf_reset(any);
	sp_buf_reset(kv);
	PB(sp_pb_bytes(any, ANY_STRING, val, vlen));
	PB(sp_pb_str(kv, KV_KEY, key));
	PB(sp_pb_msg(kv, KV_VALUE, any));
	PB(sp_pb_msg(out, RES_ATTRIBUTES, kv));
	return rc;
}

/* Appends a KeyValueAndUnit to the attribute table: an int value when
 * @p sval is NULL, else a string value. *key caches the key's string
 * index (0 until first use). */
static int dict_attr(ot *x, const char *key, uint32_t *kidx, const char *sval, int64_t ival)
{
	int rc = *kidx ? 0 : sp_pbstrings_add(&x->strs, key, kidx);
	uint32_t k = *kidx;
	sp_buf_reset(&x->sub);
	sp_buf_reset(&x->tmp);
	if (sval)
		PB(sp_pb_str(&x->sub, ANY_STRING, sval));
	else
		PB(sp_pb_u64(&x->sub, ANY_INT, (uint64_t)ival));
	PB(sp_pb_u64(&x->tmp, KVU_KEY, k));
	PB(sp_pb_msg(&x->tmp, KVU_VALUE, &x->sub));
	PB(sp_pb_msg(&x->attributes, DICT_ATTRIBUTE, &x->tmp));
	if (!rc)
		x->nattrs++;
	return rc;
}

/* One OTLP Mapping (sp_mapping_fn); the index is its place in the table,
 * whose entry 0 is the zero mapping. */
static int write_mapping(void *ctx, uint32_t module, uint32_t build_id, uint32_t index)
{
	ot *x = ctx;
	(void)index;
	const struct stackpulse_profile *p = x->p;
	uint32_t sfile, bid_attr = 0;
	int rc = sp_pbstrings_of(&x->strs, module, &sfile);
	if (!rc && build_id) {
		bid_attr = x->nattrs;
		rc = dict_attr(x, "process.executable.build_id.gnu", &x->k_bid,
		               sp_pstr(p, build_id), 0);
	}
	if (rc)
		return rc;
	sp_buf_reset(&x->msg);
	sp_buf_reset(&x->sub);
	PB(sp_pb_u64(&x->msg, MAP_LIMIT, UINT64_MAX >> 1)); /* Addresses are file offsets. */
	PB(sp_pb_u64(&x->msg, MAP_FILENAME, sfile));
	if (bid_attr) {
		PB(sp_buf_varint(&x->sub, bid_attr));
		PB(sp_pb_msg(&x->msg, MAP_ATTRS, &x->sub));
	}
	PB(sp_pb_msg(&x->mappings, DICT_MAPPING, &x->msg));
	return rc;
}

static int write_functions(ot *x)
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
		PB(sp_pb_u64(&x->msg, FN_NAME, name));
		PB(sp_pb_u64(&x->msg, FN_SYSTEM_NAME, name));
		PB(sp_pb_u64(&x->msg, FN_FILENAME, file));
		PB(sp_pb_msg(&x->functions, DICT_FUNCTION, &x->msg));
		if (rc)
			return rc;
	}
	return 0;
}

static int write_locations(ot *x)
{
	const struct stackpulse_profile *p = x->p;
	for (uint32_t id = 1; id <= x->locs.n; id++) {
		const uint32_t *fr;
		uint32_t len;
		sp_locs_frames(&x->locs, id, &fr, &len);
		const struct stackpulse_profile_frame *phys = &p->frames[fr[0]];
		int rc = 0;
		sp_buf_reset(&x->msg);
		PB(sp_pb_u64(&x->msg, LOC_MAPPING,
		             sp_profile_mapping_of(p, x->map_of_str, phys->func)));
		PB(sp_pb_u64(&x->msg, LOC_ADDRESS, phys->address));
		for (uint32_t k = len; k > 0; k--) { /* Innermost first, the caller last. */
			const struct stackpulse_profile_frame *f = &p->frames[fr[k - 1]];
			sp_buf_reset(&x->sub);
			PB(sp_pb_u64(&x->sub, LINE_FUNCTION, (uint64_t)f->func + 1));
			PB(sp_pb_u64(&x->sub, LINE_LINE, f->line));
			PB(sp_pb_msg(&x->msg, LOC_LINES, &x->sub));
		}
		PB(sp_pb_msg(&x->locations, DICT_LOCATION, &x->msg));
		if (rc)
			return rc;
	}
	return 0;
}

/* The stack_table index of profile stack node @p node. */
static int stack_index(ot *x, uint32_t node, uint32_t *out)
{
	if (x->stack_of[node]) {
		*out = x->stack_of[node];
		return 0;
	}
	uint32_t n;
	int rc = sp_locs_stack(&x->locs, node, &n);
	if (rc)
		return rc;
	sp_buf_reset(&x->msg);
	sp_buf_reset(&x->sub);
	for (uint32_t k = 0; k < n; k++)
		PB(sp_buf_varint(&x->sub, x->locs.ids[k]));
	if (n)
		PB(sp_pb_msg(&x->msg, STACK_LOCATIONS, &x->sub));
	PB(sp_pb_msg(&x->stacks, DICT_STACK, &x->msg));
	if (rc)
		return rc;
	x->stack_of[node] = ++x->nstacks;
	*out = x->nstacks;
	return 0;
}

/* The first of thread @p t's three attributes (thread.id, thread.name,
 * process.pid), made on first use. */
static int thread_attrs(ot *x, uint32_t t, uint32_t *out)
{
	const struct stackpulse_profile *p = x->p;
	if (!x->thread_attr[t]) {
		const struct stackpulse_profile_thread *th = &p->threads[t];
		uint32_t first = x->nattrs;
		pid_t pid = th->process < p->nprocesses ? p->processes[th->process].pid : 0;
		int rc = dict_attr(x, "thread.id", &x->k_tid, NULL, th->tid);
		if (!rc)
			rc = dict_attr(x, "thread.name", &x->k_tname, sp_pstr(p, th->name), 0);
		if (!rc)
			rc = dict_attr(x, "process.pid", &x->k_pid, NULL, pid);
		if (rc)
			return rc;
		x->thread_attr[t] = first;
	}
	*out = x->thread_attr[t];
	return 0;
}

static int write_samples(ot *x)
{
	const struct stackpulse_profile *p = x->p;
	sp_agg a;
	memset(&a, 0, sizeof(a));
	int rc = 0;
	for (uint64_t i = 0; i < p->nsamples && !rc; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		rc = sp_agg_add(&a, s->thread, s->stack, s->thread, s->value);
	}
	for (uint32_t i = 0; i < a.n && !rc; i++) {
		uint32_t stack = 0, attr = 0;
		if (a.node[i] < p->nstacks)
			rc = stack_index(x, a.node[i], &stack);
		int has_thread = a.thread[i] < p->nthreads;
		if (!rc && has_thread)
			rc = thread_attrs(x, a.thread[i], &attr);
		if (rc)
			break;
		sp_buf_reset(&x->msg);
		PB(sp_pb_u64(&x->msg, SAMPLE_STACK, stack));
		if (has_thread) {
			sp_buf_reset(&x->sub);
			for (uint32_t k = 0; k < 3; k++)
				PB(sp_buf_varint(&x->sub, attr + k));
			PB(sp_pb_msg(&x->msg, SAMPLE_ATTRS, &x->sub));
		}
		sp_buf_reset(&x->sub);
		PB(sp_buf_varint(&x->sub, a.count[i]));
		PB(sp_pb_msg(&x->msg, SAMPLE_VALUES, &x->sub));
		PB(sp_pb_msg(&x->samples, PROF_SAMPLES, &x->msg));
	}
	sp_agg_free(&a);
	return rc;
}

static int value_type(ot *x, sp_buf *out, uint32_t field, const char *type, const char *unit)
{
	uint32_t t, u;
	int rc = sp_pbstrings_add(&x->strs, type, &t);
	PB(sp_pbstrings_add(&x->strs, unit, &u));
	sp_buf_reset(&x->tmp);
	PB(sp_pb_u64(&x->tmp, VT_TYPE, t));
	PB(sp_pb_u64(&x->tmp, VT_UNIT, u));
	PB(sp_pb_msg(out, field, &x->tmp));
	return rc;
}

/* The Resource: service.name, host facts and the caller's labels. */
static int write_resource(ot *x, const stackpulse_export_opts *o, sp_buf *res)
{
	const struct stackpulse_profile *p = x->p;
	const char *app = o->app && *o->app ? o->app : "stackpulse";
	int rc = resource_attr(res, &x->msg, &x->sub, "service.name", app, strlen(app));
	if (!rc && p->hostname) {
		const char *h = sp_pstr(p, p->hostname);
		rc = resource_attr(res, &x->msg, &x->sub, "host.name", h, strlen(h));
	}
	if (!rc && p->machine) {
		const char *m = sp_pstr(p, p->machine);
		rc = resource_attr(res, &x->msg, &x->sub, "host.arch", m, strlen(m));
	}
	for (size_t i = 0; i < o->nlabels && !rc; i++) {
		const char *kv = o->labels[i];
		const char *eq = strchr(kv, '=');
		char key[256];
		size_t klen = (size_t)(eq - kv);
		if (klen >= sizeof(key))
			return sp_error(-EINVAL, "export: label key of %zu bytes is too long",
			                klen);
		memcpy(key, kv, klen);
		key[klen] = '\0';
		rc = resource_attr(res, &x->msg, &x->sub, key, eq + 1, strlen(eq + 1));
	}
	return rc;
}

int sp_export_otlp(const struct stackpulse_profile *p, const stackpulse_export_opts *o, sp_out *out)
{
	ot x;
	memset(&x, 0, sizeof(x));
	x.p = p;
	sp_locs_init(&x.locs, p);
	sp_buf *bufs[] = { &x.strings, &x.mappings, &x.locations, &x.functions, &x.attributes,
		           &x.stacks,  &x.samples,  &x.msg,       &x.sub,       &x.tmp };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		sp_buf_init(bufs[i]);
	sp_buf prof, scope, res, top;
	sp_buf_init(&prof);
	sp_buf_init(&scope);
	sp_buf_init(&res);
	sp_buf_init(&top);
	int rc = 0;
	size_t ns = p->nstrings ? p->nstrings : 1;
	x.map_of_str = sp_calloc(ns, sizeof(uint32_t));
	x.stack_of = sp_calloc(p->nstacks ? p->nstacks : 1, sizeof(uint32_t));
	x.thread_attr = sp_calloc(p->nthreads ? p->nthreads : 1, sizeof(uint32_t));
	if (!x.map_of_str || !x.stack_of || !x.thread_attr) {
		rc = sp_error(-ENOMEM, "otlp tables");
		goto done;
	}
	/* The zero entry of every table. */
	PB(sp_pbstrings_init(&x.strs, p, &x.strings, DICT_STRING));
	PB(sp_pb_bytes(&x.mappings, DICT_MAPPING, "", 0));
	PB(sp_pb_bytes(&x.locations, DICT_LOCATION, "", 0));
	PB(sp_pb_bytes(&x.functions, DICT_FUNCTION, "", 0));
	PB(sp_pb_bytes(&x.attributes, DICT_ATTRIBUTE, "", 0));
	PB(sp_pb_bytes(&x.stacks, DICT_STACK, "", 0));
	x.nattrs = 1;
	PB(write_samples(&x));
	PB(sp_profile_mappings(p, x.map_of_str, write_mapping, &x));
	PB(write_locations(&x));
	PB(write_functions(&x));

	/* Profile. */
	/* A time profile's values are nanoseconds of the time it measures. */
	static const char *const time_type[] = { "samples", "cpu", "off_cpu", "wall" };
	PB(value_type(&x, &prof, PROF_SAMPLE_TYPE,
	              (unsigned)p->time < 4 ? time_type[p->time] : "samples",
	              p->time == STACKPULSE_TIME_SAMPLES ? "count" : "nanoseconds"));
	PB(sp_buf_append(&prof, x.samples.data, x.samples.len));
	PB(sp_pb_fixed64(&prof, PROF_TIME, p->start_wall_ns));
	PB(sp_pb_u64(&prof, PROF_DURATION,
	             p->last_ns > p->first_ns ? p->last_ns - p->first_ns : 0));
	PB(value_type(&x, &prof, PROF_PERIOD_TYPE, "cpu", "nanoseconds"));
	PB(sp_pb_u64(&prof, PROF_PERIOD, sp_profile_period_ns(p)));
	/* ScopeProfiles. */
	sp_buf_reset(&x.msg);
	PB(sp_pb_str(&x.msg, SCOPE_NAME, "stackpulse"));
	PB(sp_pb_str(&x.msg, SCOPE_VERSION, SP_VERSION));
	PB(sp_pb_msg(&scope, SP_SCOPE, &x.msg));
	PB(sp_pb_msg(&scope, SP_PROFILES, &prof));
	/* ResourceProfiles. */
	sp_buf_reset(&top);
	if (!rc)
		rc = write_resource(&x, o, &top);
	PB(sp_pb_msg(&res, RP_RESOURCE, &top));
	PB(sp_pb_msg(&res, RP_SCOPE_PROFILES, &scope));
	/* The request: resource_profiles, then the dictionary. */
	sp_buf_reset(&top);
	PB(sp_pb_msg(&top, REQ_RESOURCE_PROFILES, &res));
	sp_buf_reset(&prof);
	sp_buf *tables[] = { &x.mappings, &x.locations,  &x.functions,
		             &x.strings,  &x.attributes, &x.stacks };
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		PB(sp_buf_append(&prof, tables[i]->data, tables[i]->len));
	PB(sp_pb_msg(&top, REQ_DICTIONARY, &prof));
	PB(sp_out_write(out, top.data, top.len));
done:
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		sp_buf_free(bufs[i]);
	sp_buf_free(&prof);
	sp_buf_free(&scope);
	sp_buf_free(&res);
	sp_buf_free(&top);
	sp_pbstrings_free(&x.strs);
	sp_free(x.map_of_str);
	sp_free(x.stack_of);
	sp_free(x.thread_attr);
	sp_locs_free(&x.locs);
	return rc;
}
