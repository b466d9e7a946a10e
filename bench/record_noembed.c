/* A minimal recorder driver with self_contained = false, so the spool holds no
 * embedded symbol tables and `report` must symbolize from the binaries and
 * the symbol cache. run.py uses it to time symbolization cold and warm.
 *
 *   record_noembed -F HZ -s STACK_BYTES -o FILE -- COMMAND [ARG...]
 *
 * Prints "record: N samples (L lost)" like examples/record.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "stackpulse.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "record_noembed: %s: %s (%s)\n", what, stackpulse_strerror(rc),
	        stackpulse_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	stackpulse_recorder_opts opts = STACKPULSE_RECORDER_OPTS;
	opts.self_contained = false;
	const char *out = NULL;
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (i + 1 >= argc)
			break;
		if (strcmp(argv[i], "-F") == 0)
			opts.frequency = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "-s") == 0)
			opts.stack_size = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "-o") == 0)
			out = argv[++i];
	}
	if (!out || i + 1 >= argc) {
		fprintf(stderr,
		        "usage: record_noembed -F HZ -s BYTES -o FILE -- COMMAND [ARG...]\n");
		return 2;
	}
	stackpulse_recorder *rec = NULL;
	pid_t child = 0;
	int rc = stackpulse_recorder_spawn(argv + i + 1, out, &opts, &rec, &child);
	if (rc)
		return fail("spawn", rc);
	for (;;) {
		rc = stackpulse_recorder_wait(rec, 200);
		if (rc == -EINTR)
			continue;
		if (rc < 0)
			break;
		if ((rc = stackpulse_recorder_consume_available(rec)) != 0)
			break;
		if (!stackpulse_recorder_process_is_active(rec, 0))
			break;
	}
	int frc = stackpulse_recorder_finish(rec);
	uint64_t samples = 0, lost = 0;
	stackpulse_recorder_stat(rec, STACKPULSE_STAT_SAMPLES, &samples);
	stackpulse_recorder_stat(rec, STACKPULSE_STAT_LOST, &lost);
	stackpulse_recorder_free(rec);
	int status = 0;
	if (child > 0)
		waitpid(child, &status, 0);
	if (rc < 0)
		return fail("record", rc);
	if (frc)
		return fail("finish", frc);
	fprintf(stderr, "record: %" PRIu64 " samples (%" PRIu64 " lost)\n", samples, lost);
	return 0;
}
