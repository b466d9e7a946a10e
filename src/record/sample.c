/* perf ring records -> spool records. Every field is read through a
 * bounds-checked cursor over the record; a malformed record is counted and
 * skipped, never trusted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/hash.h"
#include "record/kallsyms.h"
#include "record/proc_scan.h"
#include "record/python.h"
#include "record/recorder.h"

/* Trailer of side-band records for sample_id_all with our sample_type:
 * pid/tid, time, cpu/res, identifier. */
#define SAMPLE_ID_BYTES 32

#if defined(__x86_64__)
#define PERF_SP_BIT 7 /* PERF_REG_X86_SP */
#define PERF_IP_BIT 8 /* PERF_REG_X86_IP */
#elif defined(__aarch64__)
#define PERF_SP_BIT 31 /* PERF_REG_ARM64_SP */
#define PERF_IP_BIT 32 /* PERF_REG_ARM64_PC */
#endif

typedef struct rd {
	const uint8_t *p;
	size_t len, pos;
	int bad;
} rd;

static uint64_t rd64(rd *r)
{
	uint64_t v = 0;
	if (r->len - r->pos < 8) {
		r->bad = 1;
		r->pos = r->len;
		return 0;
	}
	memcpy(&v, r->p + r->pos, 8);
	r->pos += 8;
	return v;
}

static uint32_t rd32(rd *r)
{
	uint32_t v = 0;
	if (r->len - r->pos < 4) {
		r->bad = 1;
		r->pos = r->len;
		return 0;
	}
	memcpy(&v, r->p + r->pos, 4);
	r->pos += 4;
	return v;
}

typedef struct sample_id {
	pid_t pid, tid;
	uint64_t time;
	uint32_t cpu;
	uint64_t id;
} sample_id;

static int read_sample_id(const uint8_t *p, size_t len, sample_id *s)
{
	if (len < sizeof(struct perf_event_header) + SAMPLE_ID_BYTES)
		return -1;
	rd r = { p, len, len - SAMPLE_ID_BYTES, 0 };
	s->pid = (pid_t)rd32(&r);
	s->tid = (pid_t)rd32(&r);
	s->time = rd64(&r);
	s->cpu = rd32(&r);
	(void)rd32(&r);
	s->id = rd64(&r);
	return r.bad ? -1 : 0;
}

static pid_t id_owner(const stackpulse_recorder *rec, uint64_t id)
{
	size_t lo = 0, hi = rec->nids;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rec->ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rec->nids && rec->ids[lo].id == id ? rec->ids[lo].tid : 0;
}

static int is_direct(const stackpulse_recorder *rec, pid_t tid)
{
	size_t lo = 0, hi = rec->ndirect;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rec->direct[mid] < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rec->ndirect && rec->direct[lo] == tid;
}

/* A thread that has events of its own also inherits its creator's events
 * when it appeared during a live attach: keep only its own copy. */
static int duplicate(const stackpulse_recorder *rec, pid_t tid, uint64_t id)
{
	if (!is_direct(rec, tid))
		return 0;
	pid_t owner = id_owner(rec, id);
	return owner != 0 && owner != tid;
}

static int followed_pid(const stackpulse_recorder *rec, pid_t pid)
{
	return rec->opts.children || pid == rec->target;
}

/* The live process of @p pid, scanned from /proc when first seen (a fork
 * whose record was lost, or a process created during a live attach). */
static int process_for(stackpulse_recorder *rec, pid_t pid, uint64_t time, sp_process **out)
{
	sp_process *p = sp_ptable_find(&rec->pt, pid);
	if (p) {
		*out = p;
		return 0;
	}
	int rc = sp_ptable_scan(&rec->pt, pid, SP_NONE, time, &p);
	if (rc == -ESRCH || rc == -ENOENT || rc == -EACCES)
		rc = sp_ptable_add(&rec->pt, pid, SP_NONE, time, "", "", &p);
	if (rc)
		return rc;
	*out = p;
	return 0;
}

static int kaddr_add(stackpulse_recorder *rec, uint64_t a)
{
	if (a == 0)
		return 0;
	if ((rec->kused + 1) * 2 > rec->kcap) {
		if (rec->kused >= SP_MAX_KADDRS)
			return 0; /* Beyond the cap the frames stay unnamed. */
		size_t nc = rec->kcap ? rec->kcap * 2 : 1024;
		uint64_t *nk = sp_calloc(nc, sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		for (size_t i = 0; i < rec->kcap; i++) {
			if (!rec->kaddrs[i])
				continue;
			size_t j = (size_t)sp_hash64(rec->kaddrs[i]) & (nc - 1);
			while (nk[j])
				j = (j + 1) & (nc - 1);
			nk[j] = rec->kaddrs[i];
		}
		sp_free(rec->kaddrs);
		rec->kaddrs = nk;
		rec->kcap = nc;
	}
	size_t j = (size_t)sp_hash64(a) & (rec->kcap - 1);
	while (rec->kaddrs[j]) {
		if (rec->kaddrs[j] == a)
			return 0;
		j = (j + 1) & (rec->kcap - 1);
	}
	rec->kaddrs[j] = a;
	rec->kused++;
	return 0;
}

static int add_frame(stackpulse_recorder *rec, uint32_t *n, int kind, uint32_t module,
                     uint64_t offset)
{
	struct stackpulse_raw_frame f = { kind, module, offset, SP_NONE, 0 };
	return sp_recorder_frame(rec, &f, &rec->frames[(*n)++]);
}

/* The CPython reader of @p proc, probing once per image. */
static sp_python *python_for(stackpulse_recorder *rec, sp_process *proc)
{
	if (rec->opts.python == STACKPULSE_FEATURE_OFF)
		return NULL;
	if (!proc->py_probed) {
		proc->py_probed = 1;
		if (sp_python_probe(proc->pid, &proc->py) != 0)
			proc->py = NULL;
		else
			rec->python_found = 1;
	}
	return proc->py;
}

/* The spool frame of Python frame @p f (its code object interned once). */
static int python_frame(stackpulse_recorder *rec, sp_python *py, const sp_py_frame *f, uint32_t *id,
                        int *skip)
{
	sp_py_code *code = sp_python_code(py, f->code);
	*skip = !code || code->synthetic;
	if (*skip)
		return 0;
	if (code->user == UINT32_MAX) {
		int rc = sp_writer_pycode(rec->w, code->qualname, code->filename, code->first_line,
		                          &code->user);
		if (rc)
			return rc;
	}
	struct stackpulse_raw_frame rf = { STACKPULSE_FRAME_PYTHON, SP_NONE, f->offset, code->user,
		                           f->line };
	return sp_recorder_frame(rec, &rf, id);
}

/* Appends the user part: native pcs merged with the Python stack when the
 * process runs CPython, else the native pcs alone. */
static int user_frames(stackpulse_recorder *rec, sp_process *proc, pid_t tid,
                       const sp_unwind_result *res, const uint8_t *stack, size_t stack_len,
                       uint64_t sp, uint32_t *n)
{
	int rc;
	sp_python *py = python_for(rec, proc);
	uint32_t npy = 0;
	int py_trunc = 0;
	if (py && sp_python_read_stack(py, tid, stack, stack_len, sp, rec->pyframes,
	                               SP_MAX_PY_FRAMES, &npy, &py_trunc) != 0)
		npy = 0;
	if (npy > 0 || (py && py_trunc)) {
		sp_py_merge_in in;
		memset(&in, 0, sizeof(in));
		in.pcs = rec->pcs;
		in.npcs = res->count;
		in.native_truncated = res->truncated;
		in.eval = sp_python_eval_ranges(py, &in.neval);
		in.py = rec->pyframes;
		in.npy = npy;
		in.py_truncated = py_trunc;
		uint32_t m = 0, flags = 0;
		if (sp_py_merge(&in, rec->pymerge, SP_MAX_USER_FRAMES, &m, &flags) == 0) {
			rec->python_samples += npy > 0;
			for (uint32_t i = 0; i < m; i++) {
				const sp_py_merge_item *it = &rec->pymerge[i];
				if (it->kind == SP_PY_MERGE_NATIVE && it->index < res->count) {
					struct stackpulse_raw_frame f;
					sp_ptable_frame(proc, rec->pcs[it->index], &f);
					rc = sp_recorder_frame(rec, &f, &rec->frames[(*n)++]);
				} else if (it->kind == SP_PY_MERGE_PYTHON && it->index < npy) {
					int skip;
					rc = python_frame(rec, py, &rec->pyframes[it->index],
					                  &rec->frames[*n], &skip);
					if (!skip)
						(*n)++;
				} else {
					rc = add_frame(rec, n, STACKPULSE_FRAME_TRUNCATED, SP_NONE,
					               0);
				}
				if (rc)
					return rc;
			}
			return 0;
		}
	}
	for (uint32_t i = 0; i < res->count && i < SP_MAX_USER_FRAMES; i++) {
		struct stackpulse_raw_frame f;
		sp_ptable_frame(proc, rec->pcs[i], &f);
		if ((rc = sp_recorder_frame(rec, &f, &rec->frames[(*n)++])) != 0)
			return rc;
	}
	return 0;
}

static int handle_sample(stackpulse_recorder *rec, const uint8_t *p, size_t len)
{
	rd r = { p, len, sizeof(struct perf_event_header), 0 };
	uint64_t id = rd64(&r);
	uint64_t ip = rd64(&r);
	pid_t pid = (pid_t)rd32(&r);
	pid_t tid = (pid_t)rd32(&r);
	uint64_t time = rd64(&r);
	uint32_t cpu = rd32(&r);
	(void)rd32(&r);
	uint64_t nr = rd64(&r);
	if (r.bad || nr > (r.len - r.pos) / 8) {
		rec->corrupt++;
		return 0;
	}
	const uint8_t *chain = p + r.pos;
	r.pos += (size_t)nr * 8;
	(void)ip;
	sp_regs regs;
	memset(&regs, 0, sizeof(regs));
	regs.abi = rd64(&r);
	uint64_t mask = rec->setup.attr.sample_regs_user;
	if (regs.abi) {
		uint32_t cnt = (uint32_t)__builtin_popcountll(mask);
		if (cnt > SP_UNWIND_MAX_REGS || cnt > (r.len - r.pos) / 8) {
			rec->corrupt++;
			return 0;
		}
		for (uint32_t i = 0; i < cnt; i++)
			regs.value[i] = rd64(&r);
		regs.count = cnt;
	}
	uint64_t ssize = rd64(&r);
	const uint8_t *stack = NULL;
	uint64_t dyn = 0;
	if (ssize) {
		if (ssize > r.len - r.pos || r.len - r.pos - ssize < 8) {
			rec->corrupt++;
			return 0;
		}
		stack = p + r.pos;
		r.pos += (size_t)ssize;
		dyn = rd64(&r);
		if (dyn > ssize)
			dyn = ssize;
	}
	if (r.bad) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, pid) || duplicate(rec, tid, id)) {
		rec->dropped++;
		return 0;
	}
	sp_process *proc;
	int rc = process_for(rec, pid, time, &proc);
	if (rc)
		return rc;
	sp_thread *th;
	rc = sp_ptable_thread(&rec->pt, proc, tid, time, NULL, &th);
	if (rc)
		return rc;

	uint32_t n = 0;
	/* Kernel part, leaf first; PERF_CONTEXT_* markers are skipped. */
	for (uint64_t i = 0; i < nr && n < SP_MAX_KERNEL_FRAMES; i++) {
		uint64_t a;
		memcpy(&a, chain + i * 8, 8);
		if (a >= (uint64_t)PERF_CONTEXT_MAX)
			continue;
		if ((rc = add_frame(rec, &n, STACKPULSE_FRAME_KERNEL, SP_NONE, a)) != 0)
			return rc;
		if ((rc = kaddr_add(rec, a)) != 0)
			return rc;
	}
	/* User part from the online unwinder. */
	if (regs.abi && regs.count) {
		uint64_t bit = 1ULL << PERF_SP_BIT, ipbit = 1ULL << PERF_IP_BIT;
		uint64_t sp = (mask & bit) ? regs.value[__builtin_popcountll(mask & (bit - 1))] : 0;
		sp_unwind_result res;
		memset(&res, 0, sizeof(res));
		int u = proc->space ? sp_unwind(proc->space, &regs, stack, (size_t)dyn, sp,
		                                rec->pcs, SP_MAX_USER_FRAMES, &res)
		                    : -EINVAL;
		if (u != 0) {
			/* Keep the sampled pc, mark the rest unknown. */
			res.count = 0;
			res.truncated = 1;
			if (mask & ipbit) {
				rec->pcs[0] = regs.value[__builtin_popcountll(mask & (ipbit - 1))];
				res.count = 1;
			}
		}
		if ((rc = user_frames(rec, proc, tid, &res, stack, (size_t)dyn, sp, &n)) != 0)
			return rc;
		if (res.truncated) {
			rec->truncated++;
			if ((rc = add_frame(rec, &n, STACKPULSE_FRAME_TRUNCATED, SP_NONE, 0)) != 0)
				return rc;
		}
	}
	uint32_t stack_id;
	rc = sp_writer_stack_frames(rec->w, rec->frames, n, &stack_id);
	if (rc)
		return rc;
	return sp_writer_sample(rec->w, time, th->index, stack_id, 1, cpu);
}

/* Copies the NUL-terminated string at r.pos that must end before @p end. */
static const char *rd_str(rd *r, size_t end)
{
	if (r->pos >= end)
		return NULL;
	const uint8_t *s = r->p + r->pos;
	const uint8_t *nul = memchr(s, '\0', end - r->pos);
	return nul ? (const char *)s : NULL;
}

static int handle_mmap2(stackpulse_recorder *rec, uint16_t misc, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	rd r = { p, len, sizeof(struct perf_event_header), 0 };
	pid_t pid = (pid_t)rd32(&r);
	(void)rd32(&r);
	uint64_t addr = rd64(&r), mlen = rd64(&r), pgoff = rd64(&r);
	uint8_t bid[20];
	uint32_t bid_len = 0;
	uint64_t inode = 0;
	if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		if (r.len - r.pos < 24) {
			rec->corrupt++;
			return 0;
		}
		bid_len = r.p[r.pos];
		if (bid_len > 20)
			bid_len = 20;
		memcpy(bid, r.p + r.pos + 4, 20);
		r.pos += 24;
	} else {
		(void)rd32(&r);
		(void)rd32(&r);
		inode = rd64(&r);
		(void)rd64(&r);
	}
	(void)rd32(&r); /* prot */
	(void)rd32(&r); /* flags */
	const char *path = r.bad ? NULL : rd_str(&r, len - SAMPLE_ID_BYTES);
	if (!path) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, pid) || duplicate(rec, sid.tid, sid.id))
		return 0;
	sp_process *proc;
	int rc = process_for(rec, pid, sid.time, &proc);
	if (rc)
		return rc;
	return sp_ptable_mmap(&rec->pt, proc, addr, mlen, pgoff, path, bid_len ? bid : NULL,
	                      bid_len, inode, sid.time);
}

static int handle_comm(stackpulse_recorder *rec, uint16_t misc, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	rd r = { p, len, sizeof(struct perf_event_header), 0 };
	pid_t pid = (pid_t)rd32(&r);
	pid_t tid = (pid_t)rd32(&r);
	const char *comm = r.bad ? NULL : rd_str(&r, len - SAMPLE_ID_BYTES);
	if (!comm) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, pid) || duplicate(rec, sid.tid, sid.id))
		return 0;
	sp_process *proc;
	int rc = process_for(rec, pid, sid.time, &proc);
	if (rc)
		return rc;
	if (misc & PERF_RECORD_MISC_COMM_EXEC)
		return sp_ptable_exec(&rec->pt, pid, tid, comm, sid.time);
	return sp_ptable_rename(&rec->pt, proc, tid, comm, sid.time);
}

static int handle_task(stackpulse_recorder *rec, uint32_t type, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	rd r = { p, len, sizeof(struct perf_event_header), 0 };
	pid_t pid = (pid_t)rd32(&r), ppid = (pid_t)rd32(&r);
	pid_t tid = (pid_t)rd32(&r), ptid = (pid_t)rd32(&r);
	uint64_t time = rd64(&r);
	if (r.bad) {
		rec->corrupt++;
		return 0;
	}
	(void)ptid;
	if (duplicate(rec, sid.tid, sid.id))
		return 0;
	if (type == PERF_RECORD_EXIT) {
		if (!sp_ptable_find(&rec->pt, pid))
			return 0;
		return sp_ptable_exit(&rec->pt, pid, tid, time);
	}
	if (pid == ppid) {
		/* A new thread. */
		sp_process *proc = sp_ptable_find(&rec->pt, pid);
		if (!proc)
			return followed_pid(rec, pid) ? process_for(rec, pid, time, &proc) : 0;
		sp_thread *th;
		return sp_ptable_thread(&rec->pt, proc, tid, time, NULL, &th);
	}
	if (!rec->opts.children)
		return 0;
	return sp_ptable_fork(&rec->pt, ppid, pid, tid, time);
}

static int handle_lost(stackpulse_recorder *rec, const uint8_t *p, size_t len, int samples_only)
{
	rd r = { p, len, sizeof(struct perf_event_header), 0 };
	if (!samples_only)
		(void)rd64(&r); /* id */
	uint64_t lost = rd64(&r);
	if (r.bad) {
		rec->corrupt++;
		return 0;
	}
	sample_id sid;
	uint32_t thread = SP_NONE;
	if (read_sample_id(p, len, &sid) == 0) {
		sp_thread *th = sp_ptable_find_thread(&rec->pt, sid.tid);
		if (th)
			thread = th->index;
	}
	rec->lost += lost;
	return sp_writer_lost(rec->w, thread, lost,
	                      read_sample_id(p, len, &sid) == 0 ? sid.time : 0);
}

uint64_t sp_recorder_record_time(const struct perf_event_header *hdr, const uint8_t *p, size_t len)
{
	uint64_t t = 0;
	if (hdr->type == PERF_RECORD_SAMPLE) {
		/* identifier, ip, pid/tid, then time. */
		if (len >= sizeof(*hdr) + 32)
			memcpy(&t, p + sizeof(*hdr) + 24, 8);
		return t;
	}
	sample_id sid;
	return read_sample_id(p, len, &sid) == 0 ? sid.time : 0;
}

int sp_recorder_record(stackpulse_recorder *rec, const struct perf_event_header *hdr,
                       const uint8_t *p, size_t len)
{
	switch (hdr->type) {
	case PERF_RECORD_SAMPLE: return handle_sample(rec, p, len);
	case PERF_RECORD_MMAP2: return handle_mmap2(rec, hdr->misc, p, len);
	case PERF_RECORD_COMM: return handle_comm(rec, hdr->misc, p, len);
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT: return handle_task(rec, hdr->type, p, len);
	case PERF_RECORD_LOST: return handle_lost(rec, p, len, 0);
	case PERF_RECORD_LOST_SAMPLES: return handle_lost(rec, p, len, 1);
	default: return 0; /* THROTTLE, MMAP (mmap2 supersedes it), ... */
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int emit_ksym(void *ctx, uint64_t start, const char *name, const char *module)
{
	return sp_writer_ksym(ctx, start, name, module);
}

int sp_recorder_write_ksyms(stackpulse_recorder *rec)
{
	if (rec->kused == 0)
		return 0;
	size_t n = 0;
	for (size_t i = 0; i < rec->kcap; i++)
		if (rec->kaddrs[i])
			rec->kaddrs[n++] = rec->kaddrs[i]; /* Compact in place. */
	qsort(rec->kaddrs, n, sizeof(uint64_t), cmp_u64);
	rec->kused = 0;
	int zeroed = 0;
	int rc = sp_kallsyms_resolve("/proc/kallsyms", rec->kaddrs, n, emit_ksym, rec->w, &zeroed);
	memset(rec->kaddrs, 0, rec->kcap * sizeof(uint64_t));
	if (zeroed)
		rec->kptr_zeroed = 1;
	return rc == -EACCES || rc == -ENOENT ? 0 : rc;
}
