/* Replays a fuzz harness over its committed corpus in every normal test run:
 * each file in corpus/NAME (or the paths given as arguments, files or
 * directories) is fed once to LLVMFuzzerTestOneInput. A crash or sanitizer
 * report fails the run; the harness itself decides what is a bug. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SP_FUZZ_NAME
#define SP_FUZZ_NAME "harness"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replayed;

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			fclose(f);
			fprintf(stderr, "%s: out of memory\n", path);
			return -1;
		}
		len += fread(buf + len, 1, cap - len, f);
		if (len < cap)
			break;
		cap *= 2;
		uint8_t *grown = realloc(buf, cap);
		if (!grown)
			free(buf);
		buf = grown;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		free(buf);
		fprintf(stderr, "%s: read error\n", path);
		return -1;
	}
	/* An exact-size copy lets ASan catch reads past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	replayed++;
	return 0;
}

static int replay_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	DIR *dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char child[4096];
		int n = snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
		if (n < 0 || (size_t)n >= sizeof(child) || replay_path(child) != 0)
			rc = -1;
	}
	closedir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int rc = 0;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (replay_path(argv[i]) != 0)
				rc = -1;
	} else {
		const char *root = getenv("SP_SOURCE_ROOT");
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/corpus/%s", root ? root : ".", SP_FUZZ_NAME);
		rc = replay_path(dir);
	}
	printf("summary replay_%s: %d ok, %d failed, 0 skipped\n", SP_FUZZ_NAME, replayed,
	       rc != 0 ? 1 : 0);
	return rc != 0 ? 1 : 0;
}
