/* The CPython side of sample frames: the reader of a process (probed once
 * per image) and the spool frame of each Python frame, its code object
 * interned through the writer once. */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common/error.h"
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
