/* Python stacks read as soon as their samples show up in the rings. The
 * drain takes records in time order and only once they are older than the
 * ordering slack, so a sample waits milliseconds there; a CPython thread
 * has moved on by then (3.10 frame objects freed, callers on other lines).
 * Reading ahead of the drain only needs what is already known about the
 * sample's process: a process known to the process table but not probed
 * yet is probed by the scan (an exec record not drained yet keeps a
 * reader probed after it: process_table.c), a sample of a process not
 * known yet is left to the drain, and a read made by a reader that an
 * exec replaced since is dropped (py_serial). */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "record/python.h"
#include "record/recorder.h"

static sp_early_py *free_slot(stackpulse_recorder *rec)
{
	for (uint32_t i = 0; i < SP_EARLY_PY; i++)
		if (rec->early[i].tid == 0)
			return &rec->early[i];
	return NULL;
}

static int early_alloc(stackpulse_recorder *rec)
{
	rec->early = sp_calloc(SP_EARLY_PY, sizeof(*rec->early));
	if (!rec->early)
		return -ENOMEM;
	for (uint32_t i = 0; i < SP_EARLY_PY; i++) {
		rec->early[i].frames = sp_malloc(SP_MAX_PY_FRAMES * sizeof(struct sp_py_frame));
		if (!rec->early[i].frames) {
			sp_recorder_python_early_free(rec);
			return -ENOMEM;
		}
	}
	return 0;
}

uint32_t sp_recorder_python_early(stackpulse_recorder *rec)
{
	uint32_t reads = 0;
	if (rec->opts.python == STACKPULSE_FEATURE_OFF)
		return 0;
	for (int c = 0; c < rec->ncpu; c++) {
		sp_ring *r = &rec->rings[c];
		struct perf_event_header h;
		const uint8_t *p;
		size_t len;
		for (;;) {
			/* Before any CPython is found, the scan only probes. */
			if (rec->python_found && !rec->early && early_alloc(rec) != 0)
				return reads; /* the drain reads them, later */
			sp_early_py *e = rec->early ? free_slot(rec) : NULL;
			if ((rec->python_found && !e) || sp_ring_scan(r, &h, &p, &len) != 1)
				break;
			sp_sample_fields s;
			if (h.type != PERF_RECORD_SAMPLE ||
			    sp_recorder_parse_sample(rec, p, len, &s) != 0 || s.tid <= 0)
				continue;
			sp_process *proc = sp_ptable_find(&rec->pt, s.pid);
			if (!proc || proc->exited || proc->unfollowed)
				continue;
			/* A process not probed yet is probed here, not when the
			 * drain reaches its first sample: the samples queued
			 * meanwhile (the interpreter's first ones) are then read
			 * ahead like the others. */
			if (!proc->py_probed && !sp_recorder_python_for(rec, proc))
				continue;
			if (!proc->py)
				continue;
			if (!e) {
				if (!rec->early && early_alloc(rec) != 0)
					return reads;
				e = free_slot(rec);
			}
			sp_python_set_sample_time(proc->py, s.time);
			e->n = 0;
			e->truncated = 0;
			e->rc = sp_python_read_stack(proc->py, s.tid, s.stack, (size_t)s.dyn, s.sp,
			                             e->frames, SP_MAX_PY_FRAMES, &e->n,
			                             &e->truncated);
			e->tid = s.tid;
			e->time = s.time;
			e->py_serial = proc->py_serial;
			reads++;
		}
	}
	return reads;
}

int sp_recorder_python_take(stackpulse_recorder *rec, const sp_process *proc, pid_t tid,
                            uint64_t time, uint32_t *n, int *truncated, int *rc)
{
	int found = 0;
	for (uint32_t i = 0; rec->early && i < SP_EARLY_PY; i++) {
		sp_early_py *e = &rec->early[i];
		if (e->tid == 0)
			continue;
		if (e->time < time) {
			e->tid = 0; /* its sample was dropped (duplicate, unfollowed) */
		} else if (!found && e->tid == tid && e->time == time) {
			e->tid = 0;
			if (e->py_serial != proc->py_serial)
				continue;
			memcpy(rec->pyframes, e->frames, e->n * sizeof(struct sp_py_frame));
			*n = e->n;
			*truncated = e->truncated;
			*rc = e->rc;
			found = 1;
			rec->python_early++;
		}
	}
	return found;
}

void sp_recorder_python_early_free(stackpulse_recorder *rec)
{
	for (uint32_t i = 0; rec->early && i < SP_EARLY_PY; i++)
		sp_free(rec->early[i].frames);
	sp_free(rec->early);
	rec->early = NULL;
}
