/* Sysprof capture (.syscap): the libsysprof-capture file format, version 1,
 * as Sysprof 3.46 reads it (GNOME/sysprof src/libsysprof-capture/
 * sysprof-capture-types.h gives the frame layouts, sysprof-capture-reader.c
 * what a reader accepts). Layout: docs/exporters.md.
 *
 * A 256-byte header, then frames of a multiple of 8 bytes and at most 65528
 * (the length field has 16 bits), all little-endian. Sysprof names addresses
 * itself, from the ELF files of MAP frames, from /proc/kallsyms or from
 * JITMAP frames. A spool's binaries need not exist where the capture is
 * opened and the profile has the names already, so every function gets a
 * synthetic address: user code one named by a JITMAP frame (how Sysprof
 * names JIT code), kernel code one in the kernel's half of the address space
 * named by an embedded /proc/kallsyms, which Sysprof's kernel resolver
 * prefers to the host's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/error.h"
#include "profile/export_internal.h"

#define SC_MAGIC        0xFDCA975Eu
#define SC_HEADER       256u
#define SC_FRAME        24u    /* The common frame header. */
#define SC_MAX_FRAME    65528u /* Largest multiple of 8 a u16 holds. */
#define SC_CHUNK_HEADER 284u   /* SysprofCaptureFileChunk before its data. */
#define SC_MAX_ADDRS    8000u  /* Callchain entries of one SAMPLE frame. */
#define SC_MAX_NAME     1024u  /* Bytes of one function name. */
#define SC_MAX_TEXT     4096u  /* Command lines, paths, mark messages. */
#define SC_MAX_THREAD   256u   /* Bytes of a thread name. */
#define SC_MAX_REPS     64u    /* SAMPLE frames one weighted sample becomes. */

/* Frame types (SysprofCaptureFrameType). */
enum {
	SC_SAMPLE = 2,
	SC_MAP = 3,
	SC_PROCESS = 4,
	SC_JITMAP = 7,
	SC_MARK = 10,
	SC_METADATA = 11,
	SC_FILE_CHUNK = 13,
};

/* Sysprof's JIT addresses have the top three bits set
 * (SYSPROF_CAPTURE_JITMAP_MARK); its ELF resolver leaves them alone. Ours are
 * MARK | module slot << 32 | index in the slot. */
#define SC_JITMAP_MARK 0xE000000000000000ull
#define SC_SLOT_MAX    ((1u << 28) - 1)
/* Kernel functions: 16 bytes apart from here, below perf's context markers. */
#define SC_KERNEL_BASE 0xffff800000000000ull
/* perf's PERF_CONTEXT_KERNEL and _USER: Sysprof resolves the addresses after
 * one in that context. */
#define SC_CTX_KERNEL ((uint64_t)-128)
#define SC_CTX_USER   ((uint64_t)-512)

typedef struct sc_item {
	uint64_t time;
	uint64_t idx;
} sc_item;

typedef struct sc {
	const struct stackpulse_profile *p;
	sp_out *out;
	uint8_t *f;           /* The frame being built (SC_MAX_FRAME bytes). */
	uint64_t *addr;       /* Function -> synthetic address. */
	uint32_t *slot;       /* Function -> module slot (0: none). */
	uint8_t *used;        /* Function -> reached by a kept sample. */
	uint32_t *mod_slot;   /* String -> module slot of that path (0: none). */
	uint32_t *slot_count; /* Slot -> functions in it. */
	uint32_t *slot_path;  /* Slot -> string index of the module path. */
	uint32_t nslots;
	uint32_t *node_seen;                /* Stack node -> process index + 1 that walked it. */
	uint32_t *slot_seen, *slots, nsl;   /* Per process: the slots it uses. */
	uint32_t *thread_seen, *thrs, nthr; /* Per process: its threads with samples. */
	sc_item *items;
	uint64_t *chain;
	int64_t start, end;
	char name[SC_MAX_NAME + 1];
} sc;

static int64_t to_i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Copies @p s into @p dst (room for @p cap bytes, no NUL) as valid UTF-8
 * without control bytes: those read ' ', invalid bytes '?'; in kernel names,
 * which /proc/kallsyms splits at white space, ' ' reads '_'. Stops before a
 * sequence that does not fit. Returns the bytes written. */
static size_t clean(char *dst, size_t cap, const char *s, int kernel)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t left = strnlen(s, cap + 4), n = 0; /* Names can be 60 KB: read what fits. */
	while (left > 0) {
		size_t k = sp_utf8_seq(u, left);
		if (k == 0 || k == 1) {
			unsigned char c = k ? *u : '?';
			if (c < 0x20 || c == 0x7f)
				c = ' ';
			if (kernel && c == ' ')
				c = '_';
			if (n + 1 > cap)
				break;
			dst[n++] = (char)c;
			u++;
			left--;
			continue;
		}
		if (n + k > cap)
			break;
		memcpy(dst + n, u, k);
		n += k;
		u += k;
		left -= k;
	}
	return n;
}

/* The name Sysprof shows for function @p func, in x->name: its name, and
 * for Python code "qualname (file)" as in folded stacks. */
static size_t func_name(sc *x, uint32_t func)
{
	const struct stackpulse_profile *p = x->p;
	const struct stackpulse_profile_func *fn = func < p->nfuncs ? &p->funcs[func] : NULL;
	const char *name = fn ? sp_pstr(p, fn->name) : "";
	int kernel = fn && fn->kind == STACKPULSE_FRAME_KERNEL;
	size_t n = clean(x->name, SC_MAX_NAME, *name ? name : "[unknown]", kernel);
	if (fn && fn->kind == STACKPULSE_FRAME_PYTHON && *sp_pstr(p, fn->file)) {
		n += clean(x->name + n, SC_MAX_NAME - n, " (", 0);
		n += clean(x->name + n, SC_MAX_NAME - n, sp_pstr(p, fn->file), 0);
		n += clean(x->name + n, SC_MAX_NAME - n, ")", 0);
	}
	x->name[n] = '\0';
	return n;
}

/* Starts a frame in x->f: the common header with cpu -1 (not recorded). */
static void head(sc *x, uint32_t type, int32_t pid, int64_t time)
{
	memset(x->f, 0, SC_FRAME);
	sp_put_le16(x->f + 2, 0xffff);
	sp_put_le32(x->f + 4, (uint32_t)pid);
	sp_put_le64(x->f + 8, (uint64_t)time);
	x->f[16] = (uint8_t)type;
}

/* Pads the frame of @p len bytes with zeros to 8, sets its length and writes
 * it. Every caller bounds @p len to SC_MAX_FRAME. */
static int put(sc *x, size_t len)
{
	size_t padded = (len + 7) & ~(size_t)7;
	memset(x->f + len, 0, padded - len);
	sp_put_le16(x->f, (uint16_t)padded);
	return sp_out_write(x->out, x->f, padded);
}

/* A frame whose payload is one NUL-terminated text at @p at. */
static int put_text(sc *x, size_t at, const char *s, size_t cap)
{
	size_t n = clean((char *)x->f + at, cap, s, 0);
	x->f[at + n] = 0;
	return put(x, at + n + 1);
}

static int pid_of(const struct stackpulse_profile *p, uint32_t process)
{
	return process < p->nprocesses ? (int)p->processes[process].pid : 0;
}

static void write_header(sc *x)
{
	const struct stackpulse_profile *p = x->p;
	uint8_t h[SC_HEADER];
	memset(h, 0, sizeof(h));
	sp_put_le32(h, SC_MAGIC);
	h[4] = 1; /* version */
	h[5] = 1; /* little_endian */
	time_t sec = (time_t)(p->start_wall_ns / 1000000000u);
	struct tm tm;
	if (gmtime_r(&sec, &tm))
		strftime((char *)h + 8, 64, "%Y-%m-%dT%H:%M:%SZ", &tm);
	sp_put_le64(h + 72, (uint64_t)x->start);
	sp_put_le64(h + 80, (uint64_t)x->end);
	sp_out_write(x->out, h, sizeof(h));
}

/* Addresses for every function: kernel ones in the kernel range, the others
 * by module slot. */
static void assign_addresses(sc *x)
{
	const struct stackpulse_profile *p = x->p;
	uint64_t kernel = 0;
	for (uint32_t i = 0; i < p->nmodules && i < SC_SLOT_MAX; i++) {
		uint32_t path = p->modules[i].path;
		if (path && path < p->nstrings && !x->mod_slot[path]) {
			x->mod_slot[path] = ++x->nslots;
			x->slot_path[x->nslots] = path;
		}
	}
	for (uint32_t f = 0; f < p->nfuncs; f++) {
		const struct stackpulse_profile_func *fn = &p->funcs[f];
		if (fn->kind == STACKPULSE_FRAME_KERNEL) {
			x->addr[f] = SC_KERNEL_BASE + 16 * kernel++;
			continue;
		}
		uint32_t s = fn->module < p->nstrings ? x->mod_slot[fn->module] : 0;
		x->slot[f] = s;
		x->addr[f] = SC_JITMAP_MARK | (uint64_t)s << 32 | x->slot_count[s]++;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_item(const void *a, const void *b)
{
	const sc_item *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint32_t process_of(const struct stackpulse_profile *p, uint64_t i)
{
	uint32_t t = p->samples[i].thread;
	uint32_t pr = t < p->nthreads ? p->threads[t].process : SP_NONE;
	return pr < p->nprocesses ? pr : p->nprocesses;
}

/* Marks what process @p pi's samples items[0..n) use: functions, module
 * slots and threads. Walks each stack up to a node this process walked. */
static void walk_process(sc *x, uint32_t pi, const sc_item *items, uint64_t n)
{
	const struct stackpulse_profile *p = x->p;
	x->nsl = x->nthr = 0;
	for (uint64_t i = 0; i < n; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[items[i].idx];
		if (s->thread < p->nthreads && x->thread_seen[s->thread] != pi + 1) {
			x->thread_seen[s->thread] = pi + 1;
			x->thrs[x->nthr++] = s->thread;
		}
		for (uint32_t c = s->stack; c != 0 && c < p->nstacks && x->node_seen[c] != pi + 1;
		     c = p->stacks[c].parent) {
			x->node_seen[c] = pi + 1;
			uint32_t fr = p->stacks[c].frame;
			if (fr >= p->nframes || p->frames[fr].func >= p->nfuncs)
				continue;
			uint32_t f = p->frames[fr].func;
			x->used[f] = 1;
			uint32_t sl = x->slot[f];
			if (sl && x->slot_seen[sl] != pi + 1) {
				x->slot_seen[sl] = pi + 1;
				x->slots[x->nsl++] = sl;
			}
		}
	}
	qsort(x->slots, x->nsl, sizeof(uint32_t), cmp_u32);
	qsort(x->thrs, x->nthr, sizeof(uint32_t), cmp_u32);
}

/* PROCESS (its command line), a MAP per module it uses and a METADATA
 * "stackpulse.thread" per thread: Sysprof 3.46 has no thread-name frame. */
static int write_process(sc *x, uint32_t pi)
{
	const struct stackpulse_profile *p = x->p;
	const struct stackpulse_profile_process *pr = &p->processes[pi];
	int pid = pr->pid;
	const char *cmd = sp_pstr(p, pr->cmdline);
	if (!*cmd)
		cmd = sp_pstr(p, pr->name);
	head(x, SC_PROCESS, pid, x->start);
	put_text(x, 24, cmd, SC_MAX_TEXT);
	for (uint32_t i = 0; i < x->nsl; i++) {
		uint32_t sl = x->slots[i];
		uint64_t base = SC_JITMAP_MARK | (uint64_t)sl << 32;
		head(x, SC_MAP, pid, x->start);
		sp_put_le64(x->f + 24, base);
		sp_put_le64(x->f + 32, base + x->slot_count[sl]);
		sp_put_le64(x->f + 40, 0); /* offset */
		sp_put_le64(x->f + 48, 0); /* inode */
		put_text(x, 56, sp_pstr(p, x->slot_path[sl]), SC_MAX_TEXT);
	}
	for (uint32_t i = 0; i < x->nthr; i++) {
		const struct stackpulse_profile_thread *th = &p->threads[x->thrs[i]];
		char text[SC_MAX_THREAD + 32];
		int k = snprintf(text, sizeof(text), "%ld ", (long)th->tid);
		size_t n = (size_t)k + clean(text + k, SC_MAX_THREAD, sp_pstr(p, th->name), 0);
		text[n] = '\0';
		head(x, SC_METADATA, pid, x->start);
		memset(x->f + 24, 0, 40);
		memcpy(x->f + 24, "stackpulse.thread", sizeof("stackpulse.thread"));
		put_text(x, 64, text, sizeof(text));
	}
	return x->out->err;
}

/* JITMAP frames naming every used user-space function: packed entries of an
 * address and a NUL-terminated name. */
static int write_jitmaps(sc *x)
{
	const struct stackpulse_profile *p = x->p;
	size_t len = 28;
	uint32_t n = 0;
	for (uint32_t f = 0; f < p->nfuncs && !x->out->err; f++) {
		if (!x->used[f] || p->funcs[f].kind == STACKPULSE_FRAME_KERNEL)
			continue;
		size_t k = func_name(x, f);
		if (len + 8 + k + 1 > SC_MAX_FRAME) {
			sp_put_le32(x->f + 24, n);
			put(x, len);
			len = 28;
			n = 0;
		}
		if (n == 0)
			head(x, SC_JITMAP, 0, x->start);
		sp_put_le64(x->f + len, x->addr[f]);
		memcpy(x->f + len + 8, x->name, k + 1);
		len += 8 + k + 1;
		n++;
	}
	if (n) {
		sp_put_le32(x->f + 24, n);
		put(x, len);
	}
	return x->out->err;
}

/* FILE_CHUNK frames holding /proc/kallsyms with the used kernel functions,
 * one "ADDRESS T NAME" line each. Sysprof's parser drops the last line
 * when it ends the file, so the file ends in an empty line. */
static int write_kallsyms(sc *x)
{
	const struct stackpulse_profile *p = x->p;
	const size_t room = SC_MAX_FRAME - SC_CHUNK_HEADER - 1; /* 1: the final newline. */
	size_t len = 0;
	int any = 0;
	for (uint32_t f = 0; f < p->nfuncs && !x->out->err; f++) {
		if (!x->used[f] || p->funcs[f].kind != STACKPULSE_FRAME_KERNEL)
			continue;
		size_t k = func_name(x, f);
		char line[SC_MAX_NAME + 32];
		int h = snprintf(line, sizeof(line), "%016" PRIx64 " T ", x->addr[f]);
		memcpy(line + h, x->name, k);
		line[(size_t)h + k] = '\n';
		size_t ll = (size_t)h + k + 1;
		if (len + ll > room) {
			sp_put_le32(x->f + 24, (uint32_t)len << 16);
			put(x, SC_CHUNK_HEADER + len);
			len = 0;
		}
		if (len == 0) {
			head(x, SC_FILE_CHUNK, -1, x->start);
			memset(x->f + 24, 0, SC_CHUNK_HEADER - 24);
			memcpy(x->f + 28, "/proc/kallsyms", sizeof("/proc/kallsyms"));
		}
		memcpy(x->f + SC_CHUNK_HEADER + len, line, ll);
		len += ll;
		any = 1;
	}
	if (any) {
		x->f[SC_CHUNK_HEADER + len++] = '\n';
		sp_put_le32(x->f + 24, 1u | (uint32_t)len << 16); /* is_last */
		put(x, SC_CHUNK_HEADER + len);
	}
	return x->out->err;
}

/* The callchain of stack node @p leaf into x->chain, leaf first, a context
 * marker before each run of kernel or user frames as perf writes them. */
static uint32_t chain(sc *x, uint32_t leaf)
{
	const struct stackpulse_profile *p = x->p;
	uint32_t n = 0, steps = 0;
	int ctx = -1;
	for (uint32_t c = leaf; c != 0 && c < p->nstacks && steps++ < SC_MAX_ADDRS;
	     c = p->stacks[c].parent) {
		uint32_t fr = p->stacks[c].frame;
		if (fr >= p->nframes || p->frames[fr].func >= p->nfuncs)
			continue;
		uint32_t f = p->frames[fr].func;
		int k = p->funcs[f].kind == STACKPULSE_FRAME_KERNEL;
		if (k != ctx) {
			if (n + 2 > SC_MAX_ADDRS)
				break;
			x->chain[n++] = k ? SC_CTX_KERNEL : SC_CTX_USER;
			ctx = k;
		}
		if (n + 1 > SC_MAX_ADDRS)
			break;
		x->chain[n++] = x->addr[f];
	}
	return n;
}

static int write_sample(sc *x, const struct stackpulse_profile_sample *s, int pid, int tid)
{
	uint32_t n = chain(x, s->stack);
	uint32_t reps = s->weight == 0 ? 1 : s->weight < SC_MAX_REPS ? s->weight : SC_MAX_REPS;
	head(x, SC_SAMPLE, pid, to_i64(s->time_ns));
	sp_put_le16(x->f + 24, (uint16_t)n);
	sp_put_le16(x->f + 26, 0);
	sp_put_le32(x->f + 28, (uint32_t)tid);
	for (uint32_t i = 0; i < n; i++)
		sp_put_le64(x->f + 32 + 8 * (size_t)i, x->chain[i]);
	for (uint32_t r = 0; r < reps; r++)
		put(x, 32 + 8 * (size_t)n);
	return x->out->err;
}

/* Appends text @p s to the message at x->f + 96 of length *len; 0 when it
 * did not fit whole. */
static int msg_add(sc *x, size_t *len, const char *s, size_t keep)
{
	char *m = (char *)x->f + 96;
	size_t n = clean(m + *len, SC_MAX_TEXT - keep - *len, s, 0);
	*len += n;
	return s[n] == '\0'; /* clean() writes a byte per byte it reads. */
}

/* An off-CPU interval: MARK "stackpulse" / "off-CPU" lasting its value, with
 * the message "THREAD [TID]: leaf <- caller <- ... <- root". */
static int write_mark(sc *x, const struct stackpulse_profile_sample *s, int pid, int tid)
{
	const struct stackpulse_profile *p = x->p;
	static const char more[] = " <- ...";
	head(x, SC_MARK, pid, to_i64(s->time_ns));
	sp_put_le64(x->f + 24, (uint64_t)to_i64(s->value));
	memset(x->f + 32, 0, 64);
	memcpy(x->f + 32, "stackpulse", sizeof("stackpulse"));
	memcpy(x->f + 56, "off-CPU", sizeof("off-CPU"));
	char *m = (char *)x->f + 96;
	const char *tname = s->thread < p->nthreads ? sp_pstr(p, p->threads[s->thread].name) : "";
	size_t len = clean(m, SC_MAX_THREAD, *tname ? tname : "[unknown]", 0);
	len += (size_t)snprintf(m + len, 64, " [%d]", tid);
	if (s->weight > 1)
		len += (size_t)snprintf(m + len, 64, " (+%" PRIu32 " merged)", s->weight - 1);
	len += (size_t)snprintf(m + len, 4, ":");
	int first = 1;
	uint32_t steps = 0;
	for (uint32_t c = s->stack; c != 0 && c < p->nstacks && steps++ < SC_MAX_ADDRS;
	     c = p->stacks[c].parent) {
		uint32_t fr = p->stacks[c].frame;
		if (fr >= p->nframes)
			continue;
		func_name(x, p->frames[fr].func);
		size_t at = len;
		if (!msg_add(x, &len, first ? " " : " <- ", sizeof(more)) ||
		    !msg_add(x, &len, x->name, sizeof(more))) {
			len = at;
			memcpy(m + len, more, sizeof(more) - 1);
			len += sizeof(more) - 1;
			break;
		}
		first = 0;
	}
	m[len] = '\0';
	return put(x, 96 + len + 1);
}

static void sc_free(sc *x)
{
	sp_free(x->f);
	sp_free(x->addr);
	sp_free(x->slot);
	sp_free(x->used);
	sp_free(x->mod_slot);
	sp_free(x->slot_count);
	sp_free(x->slot_path);
	sp_free(x->node_seen);
	sp_free(x->slot_seen);
	sp_free(x->slots);
	sp_free(x->thread_seen);
	sp_free(x->thrs);
	sp_free(x->items);
	sp_free(x->chain);
}

int sp_export_syscap(const struct stackpulse_profile *p, const stackpulse_export_opts *opts,
                     sp_out *out)
{
	(void)opts;
	sc x;
	memset(&x, 0, sizeof(x));
	x.p = p;
	x.out = out;
	size_t nf = (size_t)p->nfuncs + 1, ns = (size_t)p->nmodules + 2;
	size_t nt = (size_t)p->nthreads + 1, nn = (size_t)p->nstacks + 1;
	x.f = sp_malloc(SC_MAX_FRAME);
	x.addr = sp_calloc(nf, sizeof(uint64_t));
	x.slot = sp_calloc(nf, sizeof(uint32_t));
	x.used = sp_calloc(nf, 1);
	x.mod_slot = sp_calloc((size_t)p->nstrings + 1, sizeof(uint32_t));
	x.slot_count = sp_calloc(ns, sizeof(uint32_t));
	x.slot_path = sp_calloc(ns, sizeof(uint32_t));
	x.slot_seen = sp_calloc(ns, sizeof(uint32_t));
	x.slots = sp_calloc(ns, sizeof(uint32_t));
	x.node_seen = sp_calloc(nn, sizeof(uint32_t));
	x.thread_seen = sp_calloc(nt, sizeof(uint32_t));
	x.thrs = sp_calloc(nt, sizeof(uint32_t));
	x.items = sp_calloc((size_t)p->nsamples + 1, sizeof(sc_item));
	x.chain = sp_calloc(SC_MAX_ADDRS, sizeof(uint64_t));
	int rc = 0;
	if (!x.f || !x.addr || !x.slot || !x.used || !x.mod_slot || !x.slot_count || !x.slot_path ||
	    !x.slot_seen || !x.slots || !x.node_seen || !x.thread_seen || !x.thrs || !x.items ||
	    !x.chain) {
		rc = sp_error(-ENOMEM, "syscap export tables");
		goto done;
	}
	assign_addresses(&x);

	/* The recording's span on the sample clock: from its start (or the
	 * first item) to the last sample or the end of the last interval. */
	uint64_t first = p->nsamples ? p->first_ns : p->start_mono_ns, last = first;
	uint64_t start = p->start_mono_ns && p->start_mono_ns <= first ? p->start_mono_ns : first;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[i];
		uint64_t e = s->time_ns;
		if (s->off_cpu)
			e = s->value > UINT64_MAX - e ? UINT64_MAX : e + s->value;
		if (e > last)
			last = e;
	}
	x.start = to_i64(start);
	x.end = to_i64(last);
	write_header(&x);

	/* Samples by process (counting sort), each process's frames first. */
	uint64_t *at = sp_calloc((size_t)p->nprocesses + 2, sizeof(uint64_t));
	if (!at) {
		rc = sp_error(-ENOMEM, "syscap export tables");
		goto done;
	}
	for (uint64_t i = 0; i < p->nsamples; i++)
		at[process_of(p, i) + 1]++;
	for (uint32_t i = 0; i <= p->nprocesses; i++)
		at[i + 1] += at[i];
	for (uint64_t i = 0; i < p->nsamples; i++)
		x.items[at[process_of(p, i)]++] = (sc_item){ 0, i };
	uint64_t from = 0;
	for (uint32_t pi = 0; pi <= p->nprocesses && !out->err; pi++) {
		uint64_t to = at[pi];
		if (to > from) {
			walk_process(&x, pi, x.items + from, to - from);
			if (pi < p->nprocesses)
				write_process(&x, pi);
		}
		from = to;
	}
	sp_free(at);
	write_jitmaps(&x);
	write_kallsyms(&x);

	/* Samples and off-CPU marks in time order. */
	for (uint64_t i = 0; i < p->nsamples; i++)
		x.items[i] = (sc_item){ p->samples[i].time_ns, i };
	qsort(x.items, (size_t)p->nsamples, sizeof(sc_item), cmp_item);
	for (uint64_t i = 0; i < p->nsamples && !out->err; i++) {
		const struct stackpulse_profile_sample *s = &p->samples[x.items[i].idx];
		if (s->thread >= p->nthreads)
			continue;
		const struct stackpulse_profile_thread *th = &p->threads[s->thread];
		int pid = pid_of(p, th->process);
		if (s->off_cpu)
			write_mark(&x, s, pid, (int)th->tid);
		else
			write_sample(&x, s, pid, (int)th->tid);
	}
	rc = out->err;
done:
	sc_free(&x);
	return rc;
}
