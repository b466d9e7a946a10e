#include "spool_copy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "format/spool_format.h"
#include "spool_peek.h"

static int copy_events(const stackpulse_spool *s, sp_writer *w)
{
	for (uint32_t i = 0; i < stackpulse_spool_event_count(s); i++) {
		const struct stackpulse_spool_event *e = stackpulse_spool_event(s, i);
		const struct stackpulse_process *p = stackpulse_spool_process(s, e->process);
		const struct stackpulse_thread *t = stackpulse_spool_thread(s, e->thread);
		int rc;
		switch (e->kind) {
		case STACKPULSE_SPOOL_EVENT_FORK:
			rc = sp_writer_fork(w, e->process, e->other, e->time_ns);
			break;
		case STACKPULSE_SPOOL_EVENT_EXEC:
			rc = p ? sp_writer_process_exec(w, e->process, e->time_ns, e->name,
			                                e->cmdline)
			       : sp_error(STACKPULSE_EINTERNAL, "exec event without process");
			break;
		case STACKPULSE_SPOOL_EVENT_EXIT:
			rc = sp_writer_exit(w, e->process, e->thread, e->time_ns);
			break;
		case STACKPULSE_SPOOL_EVENT_LOST:
			rc = sp_writer_lost(w, e->thread, e->count, e->time_ns);
			break;
		case STACKPULSE_SPOOL_EVENT_COMM:
			rc = t ? sp_writer_thread_name(w, e->thread, e->time_ns, e->name)
			       : sp_error(STACKPULSE_EINTERNAL, "rename event without thread");
			break;
		default: rc = sp_error(STACKPULSE_EINTERNAL, "event kind %d", e->kind); break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int copy_tables(const stackpulse_spool *s, sp_writer *w)
{
	int rc;
	uint32_t id;
	if (sp_spool_has_meta(s)) {
		const struct stackpulse_spool_meta *m = stackpulse_spool_meta(s);
		sp_meta meta = { m->start_time_ns,  stackpulse_spool_meta(s)->start_clock_ns,
			         m->frequency,      m->stack_size,
			         m->event,          m->machine,
			         m->kernel_release, m->hostname,
			         m->kernel_frames,  m->kernel_note };
		sp_writer_set_offcpu_method(w, (int)m->off_cpu_method);
		if ((rc = sp_writer_meta(w, &meta)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_process_count(s); i++) {
		const struct stackpulse_process *p = stackpulse_spool_process(s, i);
		if ((rc = sp_writer_process(w, p->pid, p->parent, p->start_ns, p->initial_name,
		                            p->initial_cmdline, &id)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(s); i++) {
		const struct stackpulse_thread *t = stackpulse_spool_thread(s, i);
		if ((rc = sp_writer_thread(w, t->process, t->tid, 0, t->initial_name, &id)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_module_count(s); i++) {
		const struct stackpulse_module *m = stackpulse_spool_module(s, i);
		if ((rc = sp_writer_module(w, m->path, m->build_id, m->build_id_len, &id)))
			return rc;
		if (id != i)
			return sp_error(STACKPULSE_EINTERNAL, "module %u re-interned as %u", i, id);
	}
	for (uint32_t i = 0; i < sp_spool_mapping_count(s); i++) {
		const struct sp_mapping *m = sp_spool_mapping(s, i);
		if ((rc = sp_writer_mapping(w, m->process, m->module, m->start, m->end, m->pgoff,
		                            m->time_ns)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_pycode_count(s); i++) {
		const struct stackpulse_pycode *p = stackpulse_spool_pycode(s, i);
		if ((rc = sp_writer_pycode(w, p->qualname, p->filename, p->first_line, &id)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_frame_count(s); i++) {
		if ((rc = sp_writer_frame(w, stackpulse_spool_frame(s, i), &id)))
			return rc;
		if (id != i)
			return sp_error(STACKPULSE_EINTERNAL, "frame %u re-interned as %u", i, id);
	}
	for (uint32_t i = 1; i < stackpulse_spool_stack_count(s); i++) {
		uint32_t frame, parent;
		if ((rc = stackpulse_spool_stack_node(s, i, &frame, &parent)) ||
		    (rc = sp_writer_stack(w, parent, frame, &id)))
			return rc;
		if (id != i)
			return sp_error(STACKPULSE_EINTERNAL, "stack %u re-interned as %u", i, id);
	}
	int rc2 = copy_events(s, w);
	for (uint32_t i = 0; !rc2 && i < sp_spool_rtname_count(s); i++) {
		const struct sp_rtname *r = sp_spool_rtname(s, i);
		rc2 = sp_writer_thread_runtime_name(w, r->thread, r->time_ns, r->runtime, r->name);
	}
	return rc2;
}

static int copy_symbols(const stackpulse_spool *s, sp_writer *w)
{
	int rc;
	for (uint32_t i = 0; i < stackpulse_spool_ksym_count(s); i++) {
		uint64_t addr;
		const char *name, *module;
		if ((rc = sp_spool_ksym_at(s, i, &addr, &name, &module)) ||
		    (rc = sp_writer_ksym(w, addr, name, module)))
			return rc;
	}
	for (uint32_t i = 0; i < sp_spool_jitsym_count(s); i++) {
		const struct sp_jitsym *j = sp_spool_jitsym(s, i);
		if ((rc = sp_writer_jitsym(w, j->process, j->start, j->size, j->name)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_module_count(s); i++) {
		const uint8_t *table;
		size_t len;
		if (sp_spool_module_symtab(s, i, &table, &len) == 0 &&
		    (rc = sp_writer_symtab(w, i, table, len)))
			return rc;
	}
	for (uint32_t i = 0; i < sp_spool_stat_count(s); i++) {
		uint32_t key;
		uint64_t value;
		if ((rc = sp_spool_stat_at(s, i, &key, &value)) ||
		    (rc = sp_writer_stat(w, key, value)))
			return rc;
	}
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(s); i++) {
		const struct stackpulse_thread *t = stackpulse_spool_thread(s, i);
		if (t->lost && (rc = sp_writer_thread_stat(w, SP_STAT_LOST, t->lost, i)))
			return rc;
	}
	return 0;
}

int sp_spool_copy(const stackpulse_spool *s, sp_writer *w)
{
	int rc = copy_tables(s, w);
	if (!rc)
		rc = copy_symbols(s, w);
	if (rc)
		return rc;
	stackpulse_sample_iter *it;
	if ((rc = stackpulse_sample_iter_new(s, &it)))
		return rc;
	const struct stackpulse_sample *x;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		if ((rc = sp_writer_sample(w, x->time_ns, x->thread, x->stack, x->weight, x->cpu)))
			break;
	}
	stackpulse_sample_iter_free(it);
	if (rc)
		return rc;
	stackpulse_offcpu_iter *oi;
	if ((rc = stackpulse_offcpu_iter_new(s, &oi)))
		return rc;
	const struct stackpulse_offcpu *iv;
	while ((rc = stackpulse_offcpu_iter_next(oi, &iv)) == 1) {
		if ((rc = sp_writer_offcpu_merged(w, iv->start_ns, iv->duration_ns, iv->thread,
		                                  iv->stack, (int)iv->state, iv->merged,
		                                  iv->merged_ns)))
			break;
	}
	stackpulse_offcpu_iter_free(oi);
	return rc;
}

/* ------------------------------------------------------------------ */

static int str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

#define DIFF(...)                                                                                  \
	do {                                                                                       \
		(void)snprintf(why, why_len, __VA_ARGS__);                                         \
		return 0;                                                                          \
	} while (0)

static int meta_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why,
                      size_t why_len)
{
	const struct stackpulse_spool_meta *x = stackpulse_spool_meta(a);
	const struct stackpulse_spool_meta *y = stackpulse_spool_meta(b);
	if (sp_spool_has_meta(a) != sp_spool_has_meta(b) ||
	    stackpulse_spool_meta(a)->start_clock_ns != stackpulse_spool_meta(b)->start_clock_ns ||
	    x->format_version != y->format_version || x->start_time_ns != y->start_time_ns ||
	    x->duration_ns != y->duration_ns || x->frequency != y->frequency ||
	    x->stack_size != y->stack_size || !str_eq(x->event, y->event) ||
	    !str_eq(x->machine, y->machine) || !str_eq(x->kernel_release, y->kernel_release) ||
	    !str_eq(x->hostname, y->hostname) || x->kernel_frames != y->kernel_frames ||
	    !str_eq(x->kernel_note, y->kernel_note) || x->samples != y->samples ||
	    x->lost != y->lost || x->off_cpu_method != y->off_cpu_method ||
	    x->offcpu_intervals != y->offcpu_intervals || x->offcpu_merged != y->offcpu_merged)
		DIFF("metadata differs");
	return 1;
}

static int tables_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why,
                        size_t why_len)
{
	if (stackpulse_spool_process_count(a) != stackpulse_spool_process_count(b))
		DIFF("process counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_process_count(a); i++) {
		const struct stackpulse_process *x = stackpulse_spool_process(a, i);
		const struct stackpulse_process *y = stackpulse_spool_process(b, i);
		if (x->index != y->index || x->pid != y->pid || x->parent != y->parent ||
		    !str_eq(x->name, y->name) || !str_eq(x->cmdline, y->cmdline) ||
		    x->start_ns != y->start_ns || x->end_ns != y->end_ns ||
		    !str_eq(x->initial_name, y->initial_name) ||
		    !str_eq(x->initial_cmdline, y->initial_cmdline))
			DIFF("process %u differs", i);
	}
	if (stackpulse_spool_thread_count(a) != stackpulse_spool_thread_count(b))
		DIFF("thread counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(a); i++) {
		const struct stackpulse_thread *x = stackpulse_spool_thread(a, i);
		const struct stackpulse_thread *y = stackpulse_spool_thread(b, i);
		if (x->process != y->process || x->tid != y->tid || !str_eq(x->name, y->name) ||
		    !str_eq(x->initial_name, y->initial_name) || x->lost != y->lost)
			DIFF("thread %u differs", i);
	}
	if (stackpulse_spool_module_count(a) != stackpulse_spool_module_count(b))
		DIFF("module counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_module_count(a); i++) {
		const struct stackpulse_module *x = stackpulse_spool_module(a, i);
		const struct stackpulse_module *y = stackpulse_spool_module(b, i);
		if (!str_eq(x->path, y->path) || x->build_id_len != y->build_id_len ||
		    (x->build_id_len && memcmp(x->build_id, y->build_id, x->build_id_len) != 0) ||
		    x->has_symbols != y->has_symbols)
			DIFF("module %u differs", i);
		const uint8_t *ta, *tb;
		size_t la, lb;
		if (sp_spool_module_symtab(a, i, &ta, &la) == 0 &&
		    (sp_spool_module_symtab(b, i, &tb, &lb) != 0 || la != lb ||
		     memcmp(ta, tb, la) != 0))
			DIFF("symbol table of module %u differs", i);
	}
	if (sp_spool_mapping_count(a) != sp_spool_mapping_count(b))
		DIFF("mapping counts differ");
	for (uint32_t i = 0; i < sp_spool_mapping_count(a); i++) {
		const struct sp_mapping *x = sp_spool_mapping(a, i), *y = sp_spool_mapping(b, i);
		if (x->process != y->process || x->module != y->module || x->start != y->start ||
		    x->end != y->end || x->pgoff != y->pgoff || x->time_ns != y->time_ns)
			DIFF("mapping %u differs", i);
	}
	if (stackpulse_spool_pycode_count(a) != stackpulse_spool_pycode_count(b))
		DIFF("Python code counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_pycode_count(a); i++) {
		const struct stackpulse_pycode *x = stackpulse_spool_pycode(a, i);
		const struct stackpulse_pycode *y = stackpulse_spool_pycode(b, i);
		if (!str_eq(x->qualname, y->qualname) || !str_eq(x->filename, y->filename) ||
		    x->first_line != y->first_line)
			DIFF("Python code %u differs", i);
	}
	if (stackpulse_spool_frame_count(a) != stackpulse_spool_frame_count(b))
		DIFF("frame counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_frame_count(a); i++) {
		const struct stackpulse_raw_frame *x = stackpulse_spool_frame(a, i);
		const struct stackpulse_raw_frame *y = stackpulse_spool_frame(b, i);
		if (x->kind != y->kind || x->module != y->module || x->offset != y->offset ||
		    x->pycode != y->pycode || x->line != y->line)
			DIFF("frame %u differs", i);
	}
	if (stackpulse_spool_stack_count(a) != stackpulse_spool_stack_count(b))
		DIFF("stack counts differ");
	for (uint32_t i = 1; i < stackpulse_spool_stack_count(a); i++) {
		uint32_t fa, pa, fb, pb;
		if (stackpulse_spool_stack_node(a, i, &fa, &pa) ||
		    stackpulse_spool_stack_node(b, i, &fb, &pb) || fa != fb || pa != pb ||
		    stackpulse_spool_stack_depth(a, i) != stackpulse_spool_stack_depth(b, i))
			DIFF("stack %u differs", i);
	}
	return 1;
}

static int symbols_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why,
                         size_t why_len)
{
	if (stackpulse_spool_event_count(a) != stackpulse_spool_event_count(b))
		DIFF("event counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_event_count(a); i++) {
		const struct stackpulse_spool_event *x = stackpulse_spool_event(a, i);
		const struct stackpulse_spool_event *y = stackpulse_spool_event(b, i);
		if (x->kind != y->kind || x->time_ns != y->time_ns || x->process != y->process ||
		    x->thread != y->thread || x->other != y->other || x->count != y->count ||
		    !str_eq(x->name, y->name) || !str_eq(x->cmdline, y->cmdline))
			DIFF("event %u differs", i);
	}
	if (sp_spool_rtname_count(a) != sp_spool_rtname_count(b))
		DIFF("runtime thread name counts differ");
	for (uint32_t i = 0; i < sp_spool_rtname_count(a); i++) {
		const struct sp_rtname *x = sp_spool_rtname(a, i), *y = sp_spool_rtname(b, i);
		if (x->thread != y->thread || x->time_ns != y->time_ns ||
		    x->runtime != y->runtime || !str_eq(x->name, y->name))
			DIFF("runtime thread name %u differs", i);
	}
	for (uint32_t i = 0; i < stackpulse_spool_thread_count(a); i++)
		if (!str_eq(stackpulse_spool_thread_runtime_name(a, i),
		            stackpulse_spool_thread_runtime_name(b, i)) ||
		    !str_eq(stackpulse_spool_thread_display_name(a, i),
		            stackpulse_spool_thread_display_name(b, i)))
			DIFF("runtime name of thread %u differs", i);
	if (stackpulse_spool_ksym_count(a) != stackpulse_spool_ksym_count(b))
		DIFF("kernel symbol counts differ");
	for (uint32_t i = 0; i < stackpulse_spool_ksym_count(a); i++) {
		uint64_t xa, ya;
		const char *xn, *xm, *yn, *ym;
		if (sp_spool_ksym_at(a, i, &xa, &xn, &xm) ||
		    sp_spool_ksym_at(b, i, &ya, &yn, &ym) || xa != ya || !str_eq(xn, yn) ||
		    !str_eq(xm, ym))
			DIFF("kernel symbol %u differs", i);
	}
	if (sp_spool_jitsym_count(a) != sp_spool_jitsym_count(b))
		DIFF("JIT symbol counts differ");
	for (uint32_t i = 0; i < sp_spool_jitsym_count(a); i++) {
		const struct sp_jitsym *x = sp_spool_jitsym(a, i), *y = sp_spool_jitsym(b, i);
		if (x->process != y->process || x->start != y->start || x->size != y->size ||
		    !str_eq(x->name, y->name))
			DIFF("JIT symbol %u differs", i);
	}
	if (sp_spool_stat_count(a) != sp_spool_stat_count(b))
		DIFF("stats counts differ");
	for (uint32_t i = 0; i < sp_spool_stat_count(a); i++) {
		uint32_t ka, kb;
		uint64_t va, vb;
		if (sp_spool_stat_at(a, i, &ka, &va) || sp_spool_stat_at(b, i, &kb, &vb) ||
		    ka != kb || va != vb)
			DIFF("stat %u differs", i);
	}
	return 1;
}

static int samples_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why,
                         size_t why_len)
{
	stackpulse_sample_iter *ia = NULL, *ib = NULL;
	int rc = stackpulse_sample_iter_new(a, &ia);
	if (!rc)
		rc = stackpulse_sample_iter_new(b, &ib);
	uint64_t n = 0;
	while (!rc) {
		const struct stackpulse_sample *x, *y;
		int ra = stackpulse_sample_iter_next(ia, &x);
		if (ra < 0) {
			rc = ra;
			break;
		}
		int rb = stackpulse_sample_iter_next(ib, &y);
		if (rb < 0) {
			rc = rb;
			break;
		}
		if (ra != rb) {
			(void)snprintf(why, why_len, "sample counts differ after %llu",
			               (unsigned long long)n);
			rc = 1;
			break;
		}
		if (ra == 0)
			break;
		if (x->time_ns != y->time_ns || x->thread != y->thread ||
		    x->process != y->process || x->pid != y->pid || x->tid != y->tid ||
		    x->stack != y->stack || x->weight != y->weight || x->cpu != y->cpu) {
			(void)snprintf(why, why_len, "sample %llu differs", (unsigned long long)n);
			rc = 1;
			break;
		}
		n++;
	}
	stackpulse_sample_iter_free(ia);
	stackpulse_sample_iter_free(ib);
	if (rc < 0)
		return rc;
	return rc == 1 ? 0 : 1;
}

static int offcpu_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why,
                        size_t why_len)
{
	stackpulse_offcpu_iter *ia = NULL, *ib = NULL;
	int rc = stackpulse_offcpu_iter_new(a, &ia);
	if (!rc)
		rc = stackpulse_offcpu_iter_new(b, &ib);
	uint64_t n = 0;
	while (!rc) {
		const struct stackpulse_offcpu *x, *y;
		int ra = stackpulse_offcpu_iter_next(ia, &x);
		if (ra < 0) {
			rc = ra;
			break;
		}
		int rb = stackpulse_offcpu_iter_next(ib, &y);
		if (rb < 0) {
			rc = rb;
			break;
		}
		if (ra != rb) {
			(void)snprintf(why, why_len, "interval counts differ after %llu",
			               (unsigned long long)n);
			rc = 1;
			break;
		}
		if (ra == 0)
			break;
		if (x->start_ns != y->start_ns || x->duration_ns != y->duration_ns ||
		    x->thread != y->thread || x->process != y->process || x->pid != y->pid ||
		    x->tid != y->tid || x->stack != y->stack || x->state != y->state ||
		    x->merged != y->merged || x->merged_ns != y->merged_ns) {
			(void)snprintf(why, why_len, "interval %llu differs",
			               (unsigned long long)n);
			rc = 1;
			break;
		}
		n++;
	}
	stackpulse_offcpu_iter_free(ia);
	stackpulse_offcpu_iter_free(ib);
	if (rc < 0)
		return rc;
	return rc == 1 ? 0 : 1;
}

int sp_spool_equal(const stackpulse_spool *a, const stackpulse_spool *b, char *why, size_t why_len)
{
	if (why_len)
		why[0] = '\0';
	int eq = meta_equal(a, b, why, why_len);
	if (eq == 1)
		eq = tables_equal(a, b, why, why_len);
	if (eq == 1)
		eq = symbols_equal(a, b, why, why_len);
	if (eq == 1)
		eq = samples_equal(a, b, why, why_len);
	if (eq == 1)
		eq = offcpu_equal(a, b, why, why_len);
	return eq;
}
