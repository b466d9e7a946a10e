/* Spool generator of bench/report_scale.py:
 *
 *   report_scale PATH SAMPLES [STACKS]
 *
 * writes a spool of SAMPLES samples of STACKS (default 3, at most 8)
 * stacks with the spool writer (tests/profile/many_samples.h, the spool of
 * tests/profile/test_report_memory.c) and prints its size. */
#include <stdio.h>
#include <stdlib.h>

#include "many_samples.h"

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: report_scale PATH SAMPLES [STACKS]\n");
		return 2;
	}
	uint64_t n = strtoull(argv[2], NULL, 10);
	uint32_t k = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 3;
	int rc = many_samples_spool(argv[1], n, k, 0);
	if (rc) {
		fprintf(stderr, "report_scale: %s: %s (%s)\n", argv[1], stackpulse_strerror(rc),
		        stackpulse_last_error());
		return 1;
	}
	FILE *f = fopen(argv[1], "rb");
	long size = -1;
	if (f && fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (f)
		fclose(f);
	printf("%s: %llu samples, %ld bytes\n", argv[1], (unsigned long long)n, size);
	return 0;
}
