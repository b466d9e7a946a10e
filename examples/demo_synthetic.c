/* Synthetic demo: writes a spool with a known call tree through the internal
 * writer, reads it back through the public API and prints the hottest
 * stacks. A placeholder until the recorder can make real recordings.
 *
 * usage: demo_synthetic [SPOOL_PATH]   (default: $TMPDIR/stackpulse-demo.spool)
 * Exits non-zero when what is read back differs from what was written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/spool_writer.h"
#include "io/file.h"
#include "stackpulse.h"

/* The synthetic program: functions at made-up offsets of two modules. */
struct fn {
	const char *name;
	int module; /* 0: the binary, 1: libc, -1: kernel. */
	uint64_t offset;
};

static const struct fn fns[] = {
	{ "main", 0, 0x1100 },
	{ "run", 0, 0x1240 },
	{ "parse_input", 0, 0x1400 },
	{ "read", 1, 0xf7e10 },
	{ "ksys_read", -1, 0xffffffff81350010ull },
	{ "compute", 0, 0x1800 },
	{ "hash_block", 0, 0x1a20 },
	{ "sort_keys", 0, 0x1c40 },
	{ "memcmp", 1, 0x9a2b0 },
	{ "worker_main", 0, 0x2000 },
	{ "process_queue", 0, 0x2200 },
	{ "compress_chunk", 0, 0x2480 },
};

/* Call paths (root first, indexes into fns) and their share of samples. */
struct path {
	int frames[6];
	int depth;
	int thread;   /* 0: main, 1: worker. */
	unsigned pct; /* Percent of samples. */
};

static const struct path paths[] = {
	{ { 0, 1, 5, 6 }, 4, 0, 40 },    /* main;run;compute;hash_block */
	{ { 0, 1, 5, 7, 8 }, 5, 0, 20 }, /* ...;sort_keys;memcmp */
	{ { 0, 1, 5, 7 }, 4, 0, 10 },    /* ...;sort_keys */
	{ { 0, 1, 2, 3, 4 }, 5, 0, 5 },  /* ...;parse_input;read;ksys_read */
	{ { 9, 10, 11 }, 3, 1, 22 },     /* worker_main;process_queue;compress_chunk */
	{ { 9, 10 }, 2, 1, 3 },
};

#define NPATHS   (sizeof(paths) / sizeof(paths[0]))
#define NSAMPLES 20000u

static int write_demo(const char *path, uint32_t stack_of_path[NPATHS], uint64_t *bytes)
{
	sp_file_sink sink;
	int rc = sp_file_sink_open(&sink, path, SP_FILE_MODE_SHARED);
	if (rc == 0)
		rc = sp_file_sink_commit(&sink);
	if (rc)
		return rc;
	sp_writer *w = NULL;
	sp_writer_opts opts = { 3, 0 };
	uint32_t proc, thr[2], mods[2], frame_of_fn[sizeof(fns) / sizeof(fns[0])];
	static const uint8_t build_id[20] = { 0x5d, 0xe0, 0x01, 0x02, 0x03, 0x04, 0x05,
		                              0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
		                              0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12 };
	sp_meta meta = { 1700000000000000000ull,
		         1000000000ull,
		         99,
		         32768,
		         "cpu-clock",
		         "x86_64",
		         "synthetic",
		         "demo-host",
		         1,
		         "" };
	if ((rc = sp_writer_new(&opts, sp_file_sink_write, &sink, &w)) ||
	    (rc = sp_writer_meta(w, &meta)) ||
	    (rc = sp_writer_process(w, 4242, UINT32_MAX, 1000000000ull, "demo-app",
	                            "demo-app --synthetic", &proc)) ||
	    (rc = sp_writer_thread(w, proc, 4242, 1000000000ull, "demo-app", &thr[0])) ||
	    (rc = sp_writer_thread(w, proc, 4243, 1000000000ull, "worker", &thr[1])) ||
	    (rc = sp_writer_module(w, "/usr/bin/demo-app", build_id, 20, &mods[0])) ||
	    (rc = sp_writer_module(w, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0, &mods[1])))
		goto out;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		struct stackpulse_raw_frame f = { STACKPULSE_FRAME_NATIVE, 0, fns[i].offset, 0, 0 };
		if (fns[i].module < 0)
			f.kind = STACKPULSE_FRAME_KERNEL;
		else
			f.module = mods[fns[i].module];
		if ((rc = sp_writer_frame(w, &f, &frame_of_fn[i])))
			goto out;
		if (fns[i].module < 0 &&
		    (rc = sp_writer_ksym(w, fns[i].offset & ~0xfffull, fns[i].name, "")))
			goto out;
	}
	for (size_t p = 0; p < NPATHS; p++) {
		uint32_t node = 0;
		for (int d = 0; d < paths[p].depth; d++)
			if ((rc = sp_writer_stack(w, node, frame_of_fn[paths[p].frames[d]], &node)))
				goto out;
		stack_of_path[p] = node;
	}
	/* Deterministic schedule: sample n goes to the path whose cumulative
	 * share covers n % 100. */
	uint64_t t = 1000000000ull;
	uint32_t seed = 1;
	for (uint32_t n = 0; n < NSAMPLES; n++) {
		unsigned slot = n % 100, acc = 0;
		size_t p = 0;
		while (p + 1 < NPATHS && slot >= acc + paths[p].pct)
			acc += paths[p++].pct;
		seed = seed * 1103515245u + 12345u;
		t += 5050505u + (seed >> 16) % 2000u; /* Two threads at 99 Hz, with jitter. */
		if ((rc = sp_writer_sample(w, t, thr[paths[p].thread], stack_of_path[p], 1,
		                           (uint32_t)paths[p].thread)))
			goto out;
	}
	rc = sp_writer_finish(w);
out:
	sp_writer_free(w);
	int crc = sp_file_sink_close(&sink);
	*bytes = sink.written;
	return rc ? rc : crc;
}

static const char *frame_name(const stackpulse_spool *s, uint32_t frame_id)
{
	const struct stackpulse_raw_frame *f = stackpulse_spool_frame(s, frame_id);
	if (!f)
		return "[bad frame]";
	if (f->kind == STACKPULSE_FRAME_KERNEL) {
		const char *name;
		if (stackpulse_spool_ksym_lookup(s, f->offset, &name, NULL, NULL) == 0)
			return name;
		return "[kernel]";
	}
	/* No symbolizer yet: the demo knows its own made-up symbols. */
	const struct stackpulse_module *m = stackpulse_spool_module(s, f->module);
	for (size_t i = 0; m && i < sizeof(fns) / sizeof(fns[0]); i++) {
		int is_libc = strstr(m->path, "libc") != NULL;
		if (fns[i].module == is_libc && fns[i].offset == f->offset)
			return fns[i].name;
	}
	return "[unknown]";
}

int main(int argc, char **argv)
{
	char def[512];
	const char *path = argc > 1 ? argv[1] : NULL;
	if (!path) {
		const char *tmp = getenv("TMPDIR");
		snprintf(def, sizeof(def), "%s/stackpulse-demo.spool", tmp && *tmp ? tmp : "/tmp");
		path = def;
	}
	uint32_t stack_of_path[NPATHS];
	uint64_t bytes = 0;
	int rc = write_demo(path, stack_of_path, &bytes);
	if (rc) {
		fprintf(stderr, "demo: writing %s: %s (%s)\n", path, stackpulse_strerror(rc),
		        stackpulse_last_error());
		return 1;
	}
	stackpulse_spool *s;
	if (stackpulse_spool_open(path, NULL, &s) != 0) {
		fprintf(stderr, "demo: %s\n", stackpulse_last_error());
		return 1;
	}
	const struct stackpulse_spool_meta *meta = stackpulse_spool_meta(s);
	printf("stackpulse %s demo (synthetic spool; real recording lands later)\n",
	       stackpulse_version());
	printf("wrote %s: %llu bytes, %u chunks, %llu samples (%.2f bytes/sample), %.1f s\n", path,
	       (unsigned long long)bytes, meta->chunks, (unsigned long long)meta->samples,
	       meta->samples ? (double)bytes / (double)meta->samples : 0.0,
	       (double)meta->duration_ns / 1e9);

	/* Count samples per stack id; the table is small in a synthetic run. */
	uint32_t nstacks = stackpulse_spool_stack_count(s);
	uint64_t *count = calloc(nstacks, sizeof(*count));
	stackpulse_sample_iter *it = NULL;
	if (!count || stackpulse_sample_iter_new(s, &it) != 0) {
		fprintf(stderr, "demo: out of memory\n");
		free(count);
		stackpulse_spool_close(s);
		return 1;
	}
	const struct stackpulse_sample *x;
	uint64_t total = 0;
	while ((rc = stackpulse_sample_iter_next(it, &x)) == 1) {
		count[x->stack] += x->weight;
		total += x->weight;
	}
	stackpulse_sample_iter_free(it);
	int ok = rc == 0 && total == NSAMPLES && meta->truncated == 0;
	if (rc < 0)
		fprintf(stderr, "demo: reading samples: %s\n", stackpulse_last_error());

	printf("hottest stacks (root;...;leaf):\n");
	for (int rank = 0; rank < 5; rank++) {
		uint32_t best = 0;
		for (uint32_t i = 1; i < nstacks; i++)
			if (count[i] > count[best])
				best = i;
		if (count[best] == 0)
			break;
		uint32_t frames[64];
		uint32_t depth = stackpulse_spool_stack_frames(s, best, frames, 64);
		printf("  %5.1f%%  ", 100.0 * (double)count[best] / (double)total);
		for (uint32_t d = depth; d-- > 0;)
			printf("%s%s", frame_name(s, frames[d]), d ? ";" : "\n");
		/* The written shares must come back exactly. */
		for (size_t p = 0; p < NPATHS; p++)
			if (stack_of_path[p] == best &&
			    count[best] != NSAMPLES / 100 * paths[p].pct)
				ok = 0;
		if (rank == 0 && best != stack_of_path[0])
			ok = 0;
		count[best] = 0;
	}
	free(count);
	stackpulse_spool_close(s);
	if (!ok) {
		fprintf(stderr, "demo: read-back does not match what was written\n");
		return 1;
	}
	printf("read-back matches the written call tree\n");
	return 0;
}
