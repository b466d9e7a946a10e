/* Helpers for the symbolizer tests: compile real programs, find symbols and
 * call sites with nm/objdump, write spools naming them, and collect the
 * frames a symbolizer reports. Header-only: each test is one executable. */
#ifndef SP_TEST_SYM_FIXTURE_H
#define SP_TEST_SYM_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/harness.h"
#include "format/spool_reader.h"
#include "format/spool_writer.h"
#include "stackpulse.h"
#include "io/elf.h"
#include "symbolize/symbolize.h"
#include "rec_stats.h"

#define FX_UNUSED __attribute__((unused))

/* ---- files and programs ------------------------------------------------ */

static FX_UNUSED void fx_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	REQUIRE(fputs(text, f) >= 0);
	fclose(f);
}

static FX_UNUSED int fx_have(const char *tool)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

/* Runs a shell command; fails the test when it does not exit 0. */
static FX_UNUSED void fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static FX_UNUSED void fx_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc != 0) {
		sp_test_fail(__FILE__, __LINE__, "command failed (%d): %s", rc, cmd);
		sp_test_abort();
	}
}

/* Path in the test's scratch dir. */
static FX_UNUSED const char *fx_path(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", sp_test_tmpdir(), name);
	return buf;
}

/* Source line (1-based) of the first line containing @p marker. */
static FX_UNUSED uint32_t fx_line_of(const char *src, const char *marker)
{
	const char *p = strstr(src, marker);
	REQUIRE(p);
	uint32_t line = 1;
	for (const char *q = src; q < p; q++)
		line += *q == '\n';
	return line;
}

/* Build-id of @p path (len 0 when none). */
static FX_UNUSED void fx_build_id(const char *path, uint8_t *bid, uint32_t *len)
{
	uint64_t size;
	int fd = sp_elf_open_regular(path, &size);
	REQUIRE(fd >= 0);
	sp_elf_info info;
	REQUIRE_OK(sp_elf_read_info(fd, size, &info));
	close(fd);
	memcpy(bid, info.build_id, info.build_id_len);
	*len = info.build_id_len;
}

/* Virtual address → file offset through the program headers. */
static FX_UNUSED uint64_t fx_offset(const char *path, uint64_t vaddr)
{
	uint64_t size;
	int fd = sp_elf_open_regular(path, &size);
	REQUIRE(fd >= 0);
	sp_elf_info info;
	REQUIRE_OK(sp_elf_read_info(fd, size, &info));
	close(fd);
	for (uint32_t i = 0; i < info.nloads; i++) {
		const sp_elf_load *l = &info.loads[i];
		if (vaddr >= l->vaddr && vaddr - l->vaddr < l->filesz)
			return l->offset + (vaddr - l->vaddr);
	}
	sp_test_fail(__FILE__, __LINE__, "%s: 0x%llx is in no PT_LOAD", path,
	             (unsigned long long)vaddr);
	return 0;
}

/* Address and size of symbol @p name (nm -S). */
static FX_UNUSED void fx_symbol(const char *path, const char *name, uint64_t *addr, uint64_t *size)
{
	char cmd[1024], line[1024];
	snprintf(cmd, sizeof(cmd), "nm -S '%s'", path);
	FILE *p = popen(cmd, "r");
	REQUIRE(p);
	int found = 0;
	while (fgets(line, sizeof(line), p)) {
		/* "ADDR SIZE TYPE NAME" */
		char *end;
		unsigned long long a = strtoull(line, &end, 16);
		if (end == line || *end != ' ')
			continue;
		char *p2 = end + 1;
		unsigned long long s = strtoull(p2, &end, 16);
		if (end == p2 || end[0] != ' ' || !end[1] || end[2] != ' ')
			continue;
		char *sym = end + 3;
		sym[strcspn(sym, "\n")] = '\0';
		if (strcmp(sym, name) == 0) {
			*addr = a;
			*size = s;
			found = 1;
		}
	}
	pclose(p);
	if (!found) {
		sp_test_fail(__FILE__, __LINE__, "symbol %s not in %s", name, path);
		sp_test_abort();
	}
}

/* The return address of the first call to @p callee inside @p caller
 * (objdump): the address of the instruction after the call. */
static FX_UNUSED uint64_t fx_return_address(const char *path, const char *caller,
                                            const char *callee)
{
	char cmd[1024], line[1024], want[300], head[300];
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn '%s'", path);
	snprintf(head, sizeof(head), "<%s>:", caller);
	snprintf(want, sizeof(want), "<%s>", callee);
	FILE *p = popen(cmd, "r");
	REQUIRE(p);
	int in = 0, after_call = 0;
	uint64_t ret = 0;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, head)) {
			in = 1;
			continue;
		}
		if (!in)
			continue;
		char *p2 = line + strspn(line, " ");
		char *end;
		unsigned long long a = strtoull(p2, &end, 16);
		if (end == p2 || *end != ':') {
			if (line[0] == '\n')
				break;
			continue;
		}
		if (after_call) {
			ret = a;
			break;
		}
		if (strstr(line, "call") && strstr(line, want))
			after_call = 1;
	}
	pclose(p);
	if (!ret) {
		sp_test_fail(__FILE__, __LINE__, "no call to %s in %s", callee, caller);
		sp_test_abort();
	}
	return ret;
}

/* Open descriptors of this process (for leak checks). */
static FX_UNUSED int fx_fd_count(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* ---- spools ------------------------------------------------------------ */

typedef struct fx_sink {
	uint8_t *data;
	size_t len, cap;
} fx_sink;

static FX_UNUSED int fx_sink_write(void *ctx, const void *p, size_t n)
{
	fx_sink *m = ctx;
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap < m->len + n)
			cap *= 2;
		uint8_t *d = realloc(m->data, cap);
		if (!d)
			return -12;
		m->data = d;
		m->cap = cap;
	}
	memcpy(m->data + m->len, p, n);
	m->len += n;
	return 0;
}

typedef struct fx_spool {
	fx_sink sink;
	sp_writer *w;
	stackpulse_spool *spool;
} fx_spool;

static FX_UNUSED void fx_spool_begin(fx_spool *s)
{
	memset(s, 0, sizeof(*s));
	REQUIRE_OK(sp_writer_new(NULL, fx_sink_write, &s->sink, &s->w));
}

static FX_UNUSED uint32_t fx_module(fx_spool *s, const char *path, const uint8_t *bid, uint32_t len)
{
	uint32_t id;
	REQUIRE_OK(sp_writer_module(s->w, path, bid, len, &id));
	return id;
}

static FX_UNUSED uint32_t fx_frame(fx_spool *s, int kind, uint32_t module, uint64_t offset)
{
	struct stackpulse_raw_frame f = { (enum stackpulse_frame_kind)kind, module, offset,
		                          UINT32_MAX, 0 };
	uint32_t id;
	REQUIRE_OK(sp_writer_frame(s->w, &f, &id));
	return id;
}

static FX_UNUSED uint32_t fx_stack(fx_spool *s, const uint32_t *leaf_first, size_t n)
{
	uint32_t id;
	REQUIRE_OK(sp_writer_stack_frames(s->w, leaf_first, n, &id));
	return id;
}

static FX_UNUSED void fx_spool_open(fx_spool *s)
{
	REQUIRE_OK(sp_writer_finish(s->w));
	sp_writer_free(s->w);
	s->w = NULL;
	REQUIRE_OK(sp_spool_open_memory(s->sink.data, s->sink.len, 0, &s->spool));
}

static FX_UNUSED void fx_spool_free(fx_spool *s)
{
	stackpulse_spool_close(s->spool);
	sp_writer_free(s->w);
	free(s->sink.data);
	memset(s, 0, sizeof(*s));
}

/* ---- collected frames -------------------------------------------------- */

#define FX_MAX_FRAMES 256

typedef struct fx_frame_rec {
	char name[512];
	char file[512];
	char module[512];
	uint32_t line, depth, raw_id;
	uint64_t offset;
	int kind;
	int has_file;
} fx_frame_rec;

typedef struct fx_frames {
	fx_frame_rec f[FX_MAX_FRAMES];
	int n;
} fx_frames;

static FX_UNUSED int fx_collect(const stackpulse_frame *frame, void *ctx)
{
	fx_frames *c = ctx;
	if (c->n >= FX_MAX_FRAMES)
		return 1;
	fx_frame_rec *r = &c->f[c->n++];
	snprintf(r->name, sizeof(r->name), "%s", stackpulse_frame_func_name(frame));
	const char *file = stackpulse_frame_file(frame);
	r->has_file = file != NULL;
	snprintf(r->file, sizeof(r->file), "%s", file ? file : "");
	const char *mod = stackpulse_frame_module(frame);
	snprintf(r->module, sizeof(r->module), "%s", mod ? mod : "");
	r->line = stackpulse_frame_line(frame);
	r->depth = stackpulse_frame_inline_depth(frame);
	r->raw_id = stackpulse_frame_raw_id(frame);
	r->offset = stackpulse_frame_offset(frame);
	r->kind = (int)stackpulse_frame_kind(frame);
	return 0;
}

static FX_UNUSED int fx_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static FX_UNUSED void fx_dump(const fx_frames *c)
{
	for (int i = 0; i < c->n; i++)
		fprintf(stderr, "      #%d kind %d depth %u %s at %s:%u (%s+0x%llx)\n", i,
		        c->f[i].kind, c->f[i].depth, c->f[i].name, c->f[i].file, c->f[i].line,
		        c->f[i].module, (unsigned long long)c->f[i].offset);
}

/* Records @p bin (no arguments) into @p spool until it exits, at 499 Hz
 * with kernel and Python frames off; skips the test where perf events are
 * not allowed. */
static FX_UNUSED void fx_record(const char *bin, const char *spool)
{
	stackpulse_recorder_opts o = STACKPULSE_RECORDER_OPTS;
	o.frequency = 499;
	o.kernel = STACKPULSE_FEATURE_OFF;
	o.python = STACKPULSE_FEATURE_OFF;
	char *argv[] = { (char *)bin, NULL };
	stackpulse_recorder *rec;
	pid_t pid;
	int rc = stackpulse_recorder_spawn(argv, spool, &o, &rec, &pid);
	if (rc == -EPERM || rc == -EACCES || rc == -ENOSYS || rc == -ENOENT)
		sp_test_skip("perf events not available here");
	REQUIRE_OK(rc);
	for (int i = 0; i < 600 && stackpulse_recorder_process_is_active(rec, 0); i++) {
		rc = stackpulse_recorder_wait(rec, 100);
		if (rc < 0 && rc != -EINTR)
			break;
		REQUIRE_OK(stackpulse_recorder_consume_available(rec));
	}
	REQUIRE_OK(rec_finish(rec));
	waitpid(pid, NULL, 0);
}

#endif
