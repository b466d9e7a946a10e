/* attach_once: the README example. Attaches to PID, records 10 seconds at
 * 99 Hz with 60 KiB stack copies into profile.spool, reads the file back
 * and prints the function names of the first sample's stack, leaf first.
 *
 *   attach_once PID [SPOOL]
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "stackpulse.h"

static int die(const char *what, int rc)
{
	fprintf(stderr, "attach_once: %s: %s (%s)\n", what, stackpulse_strerror(rc),
	        stackpulse_last_error());
	return 1;
}

static int print_frame(const stackpulse_frame *frame, void *ctx)
{
	(void)ctx;
	printf("%s\n", stackpulse_frame_func_name(frame));
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: attach_once PID [SPOOL]\n");
		return 2;
	}
	char *end;
	errno = 0;
	long pid = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || pid <= 0 || pid > INT_MAX) {
		fprintf(stderr, "attach_once: '%s' is not a process id\n", argv[1]);
		return 2;
	}
	const char *path = argc == 3 ? argv[2] : "profile.spool";

	stackpulse_recorder_opts opts = STACKPULSE_RECORDER_OPTS;
	opts.frequency = 99;
	opts.stack_size = 60 * 1024;
	stackpulse_recorder *rec = NULL;
	int rc = stackpulse_recorder_attach((pid_t)pid, path, STACKPULSE_ATTACH_STOP_ENABLE_RESUME,
	                                    &opts, &rec);
	if (rc)
		return die("attach", rc);

	double deadline = now_s() + 10.0;
	while (now_s() < deadline && stackpulse_recorder_process_is_active(rec, (pid_t)pid)) {
		rc = stackpulse_recorder_wait(rec, 100);
		if (rc == STACKPULSE_WAIT_EXITED)
			break; /* nothing left to read: finish drains the rest */
		if (rc < 0 && rc != -EINTR)
			break;
		rc = stackpulse_recorder_consume_available(rec);
		if (rc)
			break;
	}
	int frc = stackpulse_recorder_finish(rec);
	stackpulse_recorder_free(rec);
	if (rc < 0 && rc != -EINTR)
		return die("recording", rc);
	if (frc)
		return die("finish", frc);

	stackpulse_spool *spool = NULL;
	rc = stackpulse_spool_open(path, NULL, &spool);
	if (rc)
		return die("open", rc);
	stackpulse_symbolizer *sym = NULL;
	rc = stackpulse_symbolizer_new(spool, NULL, &sym);
	if (rc) {
		stackpulse_spool_close(spool);
		return die("symbolizer", rc);
	}
	stackpulse_sample_iter *it = NULL;
	rc = stackpulse_sample_iter_new(spool, &it);
	const struct stackpulse_sample *sample = NULL;
	if (!rc) {
		rc = stackpulse_sample_iter_next(it, &sample);
		if (rc == 1)
			rc = stackpulse_symbolizer_for_each_frame(sym, sample, print_frame, NULL);
		else if (rc == 0)
			fprintf(stderr, "attach_once: no samples were recorded\n");
	}
	stackpulse_sample_iter_free(it);
	stackpulse_symbolizer_free(sym);
	stackpulse_spool_close(spool);
	if (rc < 0)
		return die("reading samples", rc);
	return 0;
}
