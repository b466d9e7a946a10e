#define SP_HARNESS_IMPL
#include "harness.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SP_MAX_TESTS 512

static struct {
	const char *name;
	sp_test_fn fn;
} tests[SP_MAX_TESTS];
static int test_count;
static int current_failed;
static int current_skipped;
static jmp_buf current_jmp;
static char tmpdir[256];

void sp_test_register(const char *name, sp_test_fn fn)
{
	if (test_count < SP_MAX_TESTS) {
		tests[test_count].name = name;
		tests[test_count].fn = fn;
		test_count++;
	}
}

void sp_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "    %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	current_failed = 1;
}

void sp_test_abort(void)
{
	longjmp(current_jmp, 1);
}

int sp_test_no_skip(void)
{
	const char *e = getenv("SP_NO_SKIP");
	return e && *e && strcmp(e, "0") != 0;
}

void sp_test_skip(const char *why)
{
	if (sp_test_no_skip()) {
		fprintf(stderr, "    would skip, a failure with SP_NO_SKIP=1: %s\n", why);
		current_failed = 1;
	} else {
		fprintf(stderr, "    skipped: %s\n", why);
		current_skipped = 1;
	}
	longjmp(current_jmp, 1);
}

void sp_test_skip_env(const char *why)
{
	fprintf(stderr, "    skipped: (machine property) %s\n", why);
	current_skipped = 1;
	longjmp(current_jmp, 1);
}

const char *sp_test_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/stackpulse-test-XXXXXX", base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(2);
		}
		chmod(tmpdir, 0755);
	}
	return tmpdir;
}

const char *sp_test_source_root(void)
{
	const char *root = getenv("SP_SOURCE_ROOT");
	return root ? root : ".";
}

char *sp_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 65536, n = 0, k;
	char *buf = malloc(cap);
	while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (cap - n < 2) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

int sp_test_run(const char *cmd)
{
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int sp_test_have_program(const char *name)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return sp_test_run(cmd) == 0;
}

long long sp_test_cpu_ticks(int pid, int tid)
{
	char path[96];
	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	char *text = sp_test_read_file(path, NULL);
	const char *p = text ? strrchr(text, ')') : NULL;
	long long ut = -1, st = -1;
	char state = '?';
	/* After the name: state, then fields 4-13, then utime and stime. */
	if (!p ||
	    sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &state, &ut,
	           &st) != 3 ||
	    state == 'Z' || state == 'X')
		ut = st = -1;
	free(text);
	return ut < 0 ? -1 : ut + st;
}

int sp_test_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");
	return p && strstr(p, "vgpreload") != NULL;
}

static int selected(int argc, char **argv, const char *name)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < test_count; i++) {
		if (!selected(argc, argv, tests[i].name))
			continue;
		current_failed = 0;
		current_skipped = 0;
		if (setjmp(current_jmp) == 0)
			tests[i].fn();
		if (current_skipped && !current_failed) {
			skipped++;
			printf("  skip %s\n", tests[i].name);
		} else if (current_failed) {
			failed++;
			printf("  FAIL %s\n", tests[i].name);
		} else {
			passed++;
			printf("  ok   %s\n", tests[i].name);
		}
	}
	if (tmpdir[0] && !getenv("SP_KEEP_TMP")) {
		char cmd[320];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	if (sp_test_no_skip())
		printf("no-skip mode (SP_NO_SKIP=1): only machine-property skips remain\n");
	printf("summary %s: %d ok, %d failed, %d skipped\n", argv[0], passed, failed, skipped);
	return failed ? 1 : 0;
}
