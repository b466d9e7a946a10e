/* The CPython side of sample frames: the reader of a process (probed once
 * per image) and the spool frame of each Python frame, its code object
 * interned through the writer once. */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common/error.h"
#include "format/spool_format.h"
#include "io/clock.h"
#include "record/python.h"
#include "record/recorder.h"

/* The CPython reader of @p proc, probing once per image. */
sp_python *sp_recorder_python_for(stackpulse_recorder *rec, sp_process *proc)
{
	if (rec->opts.python == STACKPULSE_FEATURE_OFF)
		return NULL;
	if (!proc->py_probed) {
		proc->py_probed = 1;
		proc->py_probe_ns = sp_mono_ns();
		int rc = sp_python_probe(proc->pid, &proc->py);
		if (rc != 0) {
			proc->py = NULL;
			/* A CPython found but not readable (an unsupported version):
			 * recorded without Python frames, and said in the stats.
			 * A process counts once, however often it is probed again
			 * (a libpython mapped after the executable, an exec). */
			if (rc != STACKPULSE_ENOTFOUND && rc != -ESRCH && rc != -ENOMEM &&
			    !proc->py_unreadable) {
				proc->py_unreadable = 1;
				if (rec->python_unreadable++ == 0)
					snprintf(rec->python_note, sizeof(rec->python_note),
					         "pid %d: %s", (int)proc->pid,
					         stackpulse_last_error());
			}
		} else {
			rec->python_found = 1;
			proc->py_serial = ++rec->py_serials;
			sp_python_set_totals(proc->py, &rec->python_stats);
		}
	}
	return proc->py;
}

typedef struct names_ctx {
	stackpulse_recorder *rec;
	uint32_t slot; /* The process's slot in the table. */
	uint64_t time;
} names_ctx;

/* A thread's threading name: written once the thread has a spool index
 * (it was sampled), else offered again at the next read. */
static int take_name(void *ctx, pid_t tid, const char *name)
{
	names_ctx *nc = ctx;
	sp_thread *th = sp_ptable_find_thread(&nc->rec->pt, tid);
	if (!th || th->exited || th->process != nc->slot)
		return 1;
	return sp_writer_thread_runtime_name(nc->rec->w, th->index, nc->time, SP_RUNTIME_CPYTHON,
	                                     name);
}

int sp_recorder_python_names(stackpulse_recorder *rec, sp_process *proc, pid_t tid, uint64_t time,
                             int force)
{
	if (!proc->py || proc->exited)
		return 0;
	names_ctx nc = { rec, sp_ptable_slot(&rec->pt, proc), time };
	return sp_python_thread_names(proc->py, sp_mono_ns(), tid, force, take_name, &nc);
}

int sp_recorder_python_names_final(stackpulse_recorder *rec)
{
	uint64_t now = sp_clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < rec->pt.nprocs; i++) {
		int rc = sp_recorder_python_names(rec, rec->pt.procs[i], 0, now, 1);
		if (rc && sp_recorder_fatal(rec, rc))
			return rc;
		if (rc) { /* One process's names are that process's loss. */
			rec->failed++;
			sp_error_clear();
		}
	}
	return 0;
}

/* The spool frame of Python frame @p f (its code object interned once). */
int sp_recorder_python_frame(stackpulse_recorder *rec, sp_python *py, const sp_py_frame *f,
                             uint32_t *id, int *skip)
{
	sp_py_code *code = sp_python_code(py, f->code);
	*skip = !code || code->synthetic;
	if (*skip)
		return 0;
	if (code->user == UINT32_MAX) {
		int rc = sp_writer_pycode(rec->w, code->qualname, code->filename, code->first_line,
		                          &code->user);
		if (rc)
			return rc;
	}
	struct stackpulse_raw_frame rf = { STACKPULSE_FRAME_PYTHON, SP_NONE, f->offset, code->user,
		                           f->line };
	return sp_recorder_frame(rec, &rf, id);
}
