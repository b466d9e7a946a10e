/* Fuzz target: decode untrusted spool bytes and touch everything the reader
 * hands out. Any input may be rejected; an accepted one must be internally
 * consistent (checked with traps, so every sanitizer and fuzzer sees it). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format/spool_reader.h"
#include "spool_fixup.h"
#include "stackpulse.h"
#include "spool_peek.h"

#define ENSURE(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			__builtin_trap();                                                          \
	} while (0)

/* Bounds so one input cannot take seconds. */
#define WALK_STACKS_MAX 4096u
#define LOOKUPS         64u

static void check_tables(const stackpulse_spool *s)
{
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	ENSURE(m && m->format_version == 1 && m->event && m->machine && m->kernel_release &&
	       m->hostname && m->kernel_note);
	uint32_t nprocs = stackpulse_spool_process_count(s);
	uint32_t nthreads = stackpulse_spool_thread_count(s);
	for (uint32_t i = 0; i < nprocs; i++) {
		const struct stackpulse_process *p = stackpulse_spool_process(s, i);
		ENSURE(p && p->index == i && p->name && p->cmdline && p->pid >= 0);
		ENSURE(p->initial_name && p->initial_cmdline);
		ENSURE(p->parent == UINT32_MAX || p->parent < i);
		ENSURE(strlen(p->name) <= 65536 && strlen(p->cmdline) <= 65536);
	}
	ENSURE(stackpulse_spool_process(s, nprocs) == NULL);
	for (uint32_t i = 0; i < nthreads; i++) {
		const struct stackpulse_thread *t = stackpulse_spool_thread(s, i);
		ENSURE(t && t->index == i && t->process < nprocs && t->name && t->initial_name);
	}
	uint32_t nmods = stackpulse_spool_module_count(s);
	for (uint32_t i = 0; i < nmods; i++) {
		const struct stackpulse_module *mod = stackpulse_spool_module(s, i);
		ENSURE(mod && mod->path && mod->build_id_len <= 64);
		ENSURE((mod->build_id_len == 0) == (mod->build_id == NULL));
		const uint8_t *tab;
		size_t len;
		int rc = sp_spool_module_symtab(s, i, &tab, &len);
		ENSURE((rc == 0) == (mod->has_symbols == 1));
		if (rc == 0)
			ENSURE(len > 0 && tab != NULL);
	}
	uint32_t npy = stackpulse_spool_pycode_count(s);
	for (uint32_t i = 0; i < npy; i++)
		ENSURE(stackpulse_spool_pycode(s, i)->qualname &&
		       stackpulse_spool_pycode(s, i)->filename);
	uint32_t nframes = stackpulse_spool_frame_count(s);
	for (uint32_t i = 0; i < nframes; i++) {
		const struct stackpulse_raw_frame *f = stackpulse_spool_frame(s, i);
		ENSURE(f && f->kind != STACKPULSE_FRAME_INLINE);
		if (f->kind == STACKPULSE_FRAME_NATIVE)
			ENSURE(f->module < nmods);
		if (f->kind == STACKPULSE_FRAME_PYTHON)
			ENSURE(f->pycode < npy);
	}
	uint64_t prev = 0;
	for (uint32_t i = 0; i < stackpulse_spool_event_count(s); i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(s, i);
		ENSURE(e->time_ns >= prev);
		prev = e->time_ns;
		ENSURE(e->process == UINT32_MAX || e->process < nprocs);
		ENSURE(e->thread == UINT32_MAX || e->thread < nthreads);
		ENSURE(e->other == UINT32_MAX || e->other < nprocs);
		ENSURE(e->name && e->cmdline);
		if (e->kind != STACKPULSE_SPOOL_EVENT_EXEC &&
		    e->kind != STACKPULSE_SPOOL_EVENT_COMM)
			ENSURE(e->name[0] == '\0' && e->cmdline[0] == '\0');
	}
	for (uint32_t i = 0; i < sp_spool_mapping_count(s); i++) {
		const struct sp_mapping *mp = sp_spool_mapping(s, i);
		ENSURE(mp->process < nprocs && mp->module < nmods && mp->start < mp->end);
	}
}

static void check_stacks(const stackpulse_spool *s)
{
	static uint32_t frames[1024];
	uint32_t nstacks = stackpulse_spool_stack_count(s);
	uint32_t nframes = stackpulse_spool_frame_count(s);
	ENSURE(nstacks >= 1 && stackpulse_spool_stack_depth(s, 0) == 0);
	uint32_t from = nstacks > WALK_STACKS_MAX ? nstacks - WALK_STACKS_MAX : 1;
	for (uint32_t i = from; i < nstacks; i++) {
		uint32_t frame, parent;
		ENSURE(stackpulse_spool_stack_node(s, i, &frame, &parent) == 0);
		ENSURE(parent < i && frame < nframes);
		uint32_t depth = stackpulse_spool_stack_frames(s, i, frames, 1024);
		ENSURE(depth >= 1 && depth <= 1024 && depth == stackpulse_spool_stack_depth(s, i));
		ENSURE(depth == stackpulse_spool_stack_depth(s, parent) + 1);
		ENSURE(frames[0] == frame);
	}
	ENSURE(stackpulse_spool_stack_node(s, nstacks, NULL, NULL) == STACKPULSE_ENOTFOUND);
}

static void check_lookups(const stackpulse_spool *s, const uint8_t *data, size_t size)
{
	uint32_t nk = stackpulse_spool_ksym_count(s);
	uint64_t prev = 0;
	for (uint32_t i = 0; i < nk; i++) {
		uint64_t addr;
		const char *name, *module;
		ENSURE(sp_spool_ksym_at(s, i, &addr, &name, &module) == 0);
		ENSURE(addr >= prev && name && module);
		prev = addr;
		const char *found;
		uint64_t start;
		ENSURE(stackpulse_spool_ksym_lookup(s, addr, &found, &start, NULL) == 0);
		ENSURE(start == addr);
		if (i > LOOKUPS)
			break;
	}
	/* Addresses taken from the input itself. */
	for (uint32_t i = 0; i < LOOKUPS && (size_t)(i + 1) * 8 <= size; i++) {
		uint64_t addr;
		memcpy(&addr, data + i * 8, 8);
		const char *name;
		uint64_t start;
		if (stackpulse_spool_ksym_lookup(s, addr, &name, &start, NULL) == 0)
			ENSURE(start <= addr && name);
		for (uint32_t p = 0; p < 2 && p < stackpulse_spool_process_count(s); p++)
			if (sp_spool_jitsym_lookup(s, p, addr, &name, &start) == 0)
				ENSURE(start <= addr && name);
	}
}

static void check_samples(const stackpulse_spool *s)
{
	stackpulse_sample_iter *it;
	if (stackpulse_sample_iter_new(s, &it) != 0)
		return;
	const struct stackpulse_sample *x;
	uint64_t n = 0;
	int rc;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		ENSURE(x->thread < stackpulse_spool_thread_count(s));
		ENSURE(x->stack < stackpulse_spool_stack_count(s));
		ENSURE(x->process == stackpulse_spool_thread(s, x->thread)->process);
		n++;
	}
	/* Memory input never changes, so iteration repeats what open saw. */
	ENSURE(rc == 0 && n == stackpulse_spool_meta(s)->samples);
	ENSURE(stackpulse_sample_iter_next(it, &x) == 0);
	stackpulse_sample_iter_free(it);
}

static void check_offcpu(const stackpulse_spool *s)
{
	stackpulse_offcpu_iter *it;
	if (stackpulse_offcpu_iter_new(s, &it) != 0)
		return;
	const struct stackpulse_offcpu *x;
	uint64_t n = 0, merged = 0;
	int rc;
	while ((rc = stackpulse_offcpu_iter_next(it, &x)) == 1) {
		merged += x->merged; /* open bounded the sum */
		ENSURE(x->thread < stackpulse_spool_thread_count(s));
		ENSURE(x->stack < stackpulse_spool_stack_count(s));
		ENSURE(x->process == stackpulse_spool_thread(s, x->thread)->process);
		ENSURE(x->state == STACKPULSE_OFFCPU_BLOCKED ||
		       x->state == STACKPULSE_OFFCPU_PREEMPTED);
		n++;
	}
	ENSURE(rc == 0 && n == stackpulse_spool_meta(s)->offcpu_intervals);
	ENSURE(merged == stackpulse_spool_meta(s)->offcpu_merged);
	ENSURE(stackpulse_offcpu_iter_next(it, &x) == 0);
	stackpulse_offcpu_iter_free(it);
}

/* A damaged spool keeps the chunks before the damage; a strict open fails
 * with its code and detail. An undamaged one opens strictly alike. */
static void check_damage(const stackpulse_spool *s, const uint8_t *data, size_t size)
{
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
	stackpulse_spool *x = NULL;
	int rc = sp_spool_open_memory(data, size, STACKPULSE_SPOOL_STRICT, &x);
	ENSURE(m->damage != NULL);
	if (!m->damaged) {
		ENSURE(rc == 0 && m->damage[0] == '\0' && m->damaged_code == 0);
		ENSURE(stackpulse_spool_meta(x)->chunks == m->chunks);
		stackpulse_spool_close(x);
		return;
	}
	ENSURE(m->truncated == 1 && m->damaged_chunk == m->chunks && m->damaged_code < 0);
	ENSURE(m->damaged_offset >= 16 && m->damaged_offset < size && m->damage[0] != '\0');
	ENSURE(rc == m->damaged_code && x == NULL);
	ENSURE(strcmp(stackpulse_last_error(), m->damage) == 0);
}

static void decode_one(const uint8_t *data, size_t size)
{
	stackpulse_spool *s = NULL;
	int rc = sp_spool_open_memory(data, size, 0, &s);
	if (rc) {
		ENSURE(rc < 0 && s == NULL && stackpulse_last_error()[0] != '\0');
		return;
	}
	check_damage(s, data, size);
	check_tables(s);
	check_stacks(s);
	check_lookups(s, data, size);
	check_samples(s);
	check_offcpu(s);
	stackpulse_spool_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_one(data, size);
	uint8_t *fixed = sp_fuzz_fix_checksums(data, size);
	if (fixed) {
		decode_one(fixed, size);
		free(fixed);
	}
	return 0;
}
