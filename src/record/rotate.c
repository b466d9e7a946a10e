/* Rotation (opts.rotate_ns): the recording is cut by sample time into
 * windows, each a self-contained spool PATH.0001, PATH.0002, ... The writer
 * keeps its definitions (sp_writer_next_file replays them), so ids stay
 * the same across windows and the recorder's caches stay valid. Each
 * window file goes through the one output sink: written under a temporary
 * name and renamed onto its name once sealed, so a reader never sees a
 * window that is not complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/error.h"
#include "io/clock.h"
#include "record/recorder.h"

/* "PATH.NNNN" for window @p index (sp_free it). */
static char *window_path(const char *base, uint32_t index)
{
	size_t cap = strlen(base) + 16;
	char *p = sp_malloc(cap);
	if (!p) {
		sp_error(-ENOMEM, "window file name");
		return NULL;
	}
	snprintf(p, cap, "%s.%04u", base, index);
	return p;
}

int sp_recorder_rotate_init(stackpulse_recorder *rec, const char *path, char **first)
{
	rec->base_path = sp_strdup(path);
	if (!rec->base_path)
		return sp_error(-ENOMEM, "spool path");
	rec->win_index = 1;
	*first = window_path(path, 1);
	return *first ? 0 : -ENOMEM;
}

void sp_recorder_rotate_start(stackpulse_recorder *rec, uint64_t mono_ns)
{
	rec->win_start = mono_ns;
	rec->win_end = mono_ns + rec->opts.rotate_ns;
}

int sp_recorder_rotate_due(const stackpulse_recorder *rec, uint64_t t)
{
	return rec->opts.rotate_ns && rec->win_end && t >= rec->win_end;
}

int sp_recorder_window_close(stackpulse_recorder *rec, uint64_t end_ns, int last)
{
	if (end_ns > rec->win_end)
		end_ns = rec->win_end; /* Its records all came before win_end. */
	int rc = rec->opts.rotate_ns && !last ? sp_recorder_read_live_loss(rec) : 0;
	if (rc == 0)
		rc = sp_recorder_seal(rec);
	if (rc == 0)
		rc = sp_file_sink_commit(&rec->sink);
	if (rc)
		return sp_error_context(rc, "cannot complete window %u", rec->win_index);
	sp_writer_counts wc;
	sp_writer_get_counts(rec->w, &wc);
	struct stackpulse_window win = {
		.sz = sizeof(win),
		.path = rec->sink.path,
		.index = rec->win_index,
		.last = last,
		.start_ns = rec->win_start,
		.end_ns = end_ns,
		.samples = wc.samples - rec->win_samples0,
		.lost = rec->lost - rec->win_lost0,
		.bytes = rec->sink.written,
		.total_samples = wc.samples,
	};
	if (rec->opts.on_window)
		rec->opts.on_window(rec->opts.window_ctx, &win);
	rec->win_samples0 = wc.samples;
	rec->win_lost0 = rec->lost;
	rec->win_truncated0 = rec->truncated;
	rec->win_failed0 = rec->failed;
	rec->win_python0 = rec->python_samples;
	return 0;
}

int sp_recorder_rotate_to(stackpulse_recorder *rec, uint64_t t)
{
	int rc = sp_recorder_window_close(rec, rec->win_end, 0);
	int rc2 = sp_file_sink_close(&rec->sink);
	if (rc == 0)
		rc = rc2;
	if (rc)
		return rc;
	/* The next window is the one holding @p t: a stretch the caller did not
	 * consume gets no empty files. */
	uint64_t rot = rec->opts.rotate_ns, start = rec->win_end;
	if (t >= start + rot)
		start += (t - start) / rot * rot;
	rec->win_index++;
	char *path = window_path(rec->base_path, rec->win_index);
	if (!path)
		return -ENOMEM;
	rc = sp_file_sink_open(&rec->sink, path, SP_FILE_MODE_PRIVATE);
	sp_free(path);
	if (rc)
		return sp_error_context(rc, "cannot create window %u", rec->win_index);
	rec->win_start = start;
	rec->win_end = start + rot;
	/* The wall clock at the window's start, through the monotonic one. */
	uint64_t mono = sp_clock_ns(CLOCK_MONOTONIC), wall = sp_clock_ns(CLOCK_REALTIME);
	uint64_t back = mono > start ? mono - start : 0;
	rc = sp_recorder_write_meta(rec, wall > back ? wall - back : wall, start, 1);
	/* Out at once: a recorder killed during this window leaves a cut spool
	 * that has its definitions. */
	if (rc == 0)
		rc = sp_writer_flush(rec->w);
	rec->last_flush_ns = mono;
	return rc;
}
