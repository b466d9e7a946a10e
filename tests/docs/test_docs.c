/* The docs check: the shell blocks of the how-tos run, in order, in one
 * shell per document, and every documented command must succeed.
 *
 * Conventions (docs/howto.md explains them to writers):
 * - Every ```sh block runs, with `sh -e`, in a scratch directory holding
 *   links to zig-out/, examples/ and include/, and with "/tmp/" in the block
 *   read as that directory, so runs never meet each other or old files.
 * - `<!-- docs-check: skip REASON -->` on the line before a block skips it
 *   (placeholders, network, interactive tools, a rebuild).
 * - `<!-- docs-check: file NAME -->` on the line before a block of any
 *   language writes it to NAME in the scratch directory (a C program that
 *   a later block compiles).
 * The last command of a pipeline decides its status (no pipefail: `| head`
 * ends its writer with SIGPIPE). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define MAX_SCRIPT (1u << 20)

struct script {
	char *text;
	size_t len;
	int ran, skipped, files;
};

static void put(struct script *s, const char *p, size_t n)
{
	REQUIRE(s->len + n < MAX_SCRIPT);
	memcpy(s->text + s->len, p, n);
	s->len += n;
	s->text[s->len] = '\0';
}

/* Appends @p line with every "/tmp/" read as @p scratch + "/". */
static void put_line(struct script *s, const char *line, size_t n, const char *scratch)
{
	size_t i = 0;
	while (i < n) {
		if (n - i >= 5 && memcmp(line + i, "/tmp/", 5) == 0) {
			put(s, scratch, strlen(scratch));
			put(s, "/", 1);
			i += 5;
		} else {
			put(s, line + i, 1);
			i++;
		}
	}
}

/* The marker argument of @p line ("<!-- docs-check: KIND ARG -->"), or NULL. */
static const char *marker(const char *line, size_t n, const char *kind, char *arg, size_t cap)
{
	char pre[64];
	snprintf(pre, sizeof(pre), "<!-- docs-check: %s", kind);
	size_t pl = strlen(pre);
	if (n < pl + 4 || memcmp(line, pre, pl) != 0 || memcmp(line + n - 4, " -->", 4) != 0)
		return NULL;
	const char *a = line + pl;
	size_t al = n - pl - 4;
	while (al && *a == ' ') {
		a++;
		al--;
	}
	snprintf(arg, cap, "%.*s", (int)al, a);
	return arg;
}

/* Turns markdown @p md into a script for @p scratch (files written there). */
static void build_script(const char *md, const char *scratch, struct script *s)
{
	memset(s, 0, sizeof(*s));
	s->text = calloc(MAX_SCRIPT, 1);
	REQUIRE(s->text != NULL);
	const char *prev = "", *p = md;
	size_t prev_n = 0;
	int lineno = 0;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		lineno++;
		if (n >= 3 && memcmp(p, "```", 3) == 0 && n > 3) {
			char arg[256];
			int is_sh = n == 5 && memcmp(p + 3, "sh", 2) == 0;
			int skip = marker(prev, prev_n, "skip", arg, sizeof(arg)) != NULL;
			const char *file = marker(prev, prev_n, "file", arg, sizeof(arg));
			FILE *out = NULL;
			if (file) {
				char path[1024];
				REQUIRE(strchr(file, '/') == NULL && *file);
				snprintf(path, sizeof(path), "%s/%s", scratch, file);
				out = fopen(path, "w");
				REQUIRE(out != NULL);
				s->files++;
			}
			int run = is_sh && !skip && !file;
			if (run) {
				char head[128];
				snprintf(head, sizeof(head),
				         "echo '--- docs block at line %d' >&2\n", lineno);
				put(s, head, strlen(head));
				s->ran++;
			} else if (is_sh && skip) {
				s->skipped++;
			}
			/* The block's lines, up to the closing fence. */
			p = nl ? nl + 1 : p + n;
			while (*p) {
				nl = strchr(p, '\n');
				n = nl ? (size_t)(nl - p) : strlen(p);
				lineno++;
				if (n == 3 && memcmp(p, "```", 3) == 0)
					break;
				if (run) {
					put_line(s, p, n, scratch);
					put(s, "\n", 1);
				}
				if (out)
					fprintf(out, "%.*s\n", (int)n, p);
				p = nl ? nl + 1 : p + n;
			}
			if (out)
				REQUIRE(fclose(out) == 0);
		}
		if (n)
			prev = p, prev_n = n;
		p = nl ? nl + 1 : p + n;
	}
}

/* A fresh scratch directory (world-writable: a block may record as nobody)
 * with links to the built examples, the sources of examples and headers. */
static void make_scratch(const char *tag, char *dir, size_t cap)
{
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	char cmd[4096];
	snprintf(dir, cap, "%s/%s", sp_test_tmpdir(), tag);
	snprintf(cmd, sizeof(cmd),
	         "rm -rf %s && mkdir -p %s/home && chmod 1777 %s && ln -s %s/.. %s/zig-out && "
	         "ln -s %s/examples %s/examples && ln -s %s/include %s/include",
	         dir, dir, dir, bin, dir, sp_test_source_root(), dir, sp_test_source_root(), dir);
	REQUIRE_EQ(sp_test_run(cmd), 0);
}

/* Runs @p s in @p dir; returns the shell's status and prints the log's
 * tail on failure. */
static int run_script(const struct script *s, const char *dir)
{
	char path[1024], cmd[4096];
	snprintf(path, sizeof(path), "%s/docs-check.sh", dir);
	FILE *f = fopen(path, "w");
	REQUIRE(f != NULL);
	REQUIRE(fwrite(s->text, 1, s->len, f) == s->len);
	REQUIRE(fclose(f) == 0);
	snprintf(cmd, sizeof(cmd),
	         "cd %s && HOME=%s/home GOCACHE=%s/home/gocache GOPATH=%s/home/go "
	         "GOTOOLCHAIN=local STACKPULSE_SYMBOL_CACHE_DIR=%s/home/symcache "
	         "timeout 240 sh -e docs-check.sh >docs-check.log 2>&1",
	         dir, dir, dir, dir, dir);
	int rc = sp_test_run(cmd);
	if (rc != 0) {
		snprintf(path, sizeof(path), "%s/docs-check.log", dir);
		char *log = sp_test_read_file(path, NULL);
		size_t n = log ? strlen(log) : 0;
		fprintf(stderr, "    docs check failed (%d); end of its log:\n%s\n", rc,
		        log ? log + (n > 3000 ? n - 3000 : 0) : "(none)");
		free(log);
	}
	return rc;
}

static void check_doc(const char *doc, const char *tag, int min_blocks, int as_root)
{
	if (sp_test_under_valgrind())
		sp_test_skip("the docs run their commands, not this binary (plain zig build test)");
	if (as_root && geteuid() != 0)
		sp_test_skip("its recipes use setpriv and unshare, which need root");
	char dir[1024], path[1024];
	make_scratch(tag, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", sp_test_source_root(), doc);
	char *md = sp_test_read_file(path, NULL);
	REQUIRE(md != NULL);
	struct script s;
	build_script(md, dir, &s);
	free(md);
	printf("    %s: %d blocks run, %d skipped, %d files\n", doc, s.ran, s.skipped, s.files);
	CHECK(s.ran >= min_blocks);
	CHECK_EQ(run_script(&s, dir), 0);
	free(s.text);
}

SP_TEST(howto_commands_run)
{
	check_doc("docs/howto.md", "howto", 10, 1);
}

SP_TEST(howto_reports_commands_run)
{
	check_doc("docs/howto-reports.md", "howto-reports", 4, 0);
}

/* The check itself: a failing command fails it, even in the middle of a
 * block; a skipped block does not run; files are written; /tmp/ is the
 * scratch directory. */
SP_TEST(docs_check_fails_when_a_command_fails)
{
	char dir[1024];
	make_scratch("self", dir, sizeof(dir));
	struct script s;
	build_script(
	        "# t\n\n```sh\necho one > /tmp/one.txt\n```\n\n"
	        "<!-- docs-check: skip not runnable -->\n```sh\nfalse\n```\n\n"
	        "<!-- docs-check: file hello.c -->\n```c\nint main(void) { return 0; }\n```\n\n"
	        "```sh\ntest -s hello.c\ntest -s one.txt\n```\n",
	        dir, &s);
	CHECK_EQ(s.ran, 2);
	CHECK_EQ(s.skipped, 1);
	CHECK_EQ(s.files, 1);
	CHECK_EQ(run_script(&s, dir), 0);
	free(s.text);
	build_script("```sh\ntrue\nzig-out/bin/report /tmp/no-such.spool\necho after\n```\n", dir,
	             &s);
	CHECK(run_script(&s, dir) != 0);
	char path[1100];
	snprintf(path, sizeof(path), "%s/docs-check.log", dir);
	char *log = sp_test_read_file(path, NULL);
	REQUIRE(log != NULL);
	CHECK(strstr(log, "after") == NULL); /* It stopped at the failure. */
	CHECK(strstr(log, "--- docs block at line 1") != NULL);
	free(log);
	free(s.text);
}
