/* perf ring records -> spool records. Every field is read through a
 * bounds-checked cursor over the record; a malformed record is counted and
 * skipped, never trusted. */
#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cursor.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/search.h"
#include "format/spool_format.h"
#include "io/clock.h"
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

/* The kernel writes perf records in host byte order. Both supported
 * targets (x86_64, aarch64) are little-endian, so the cursor's
 * little-endian getters read them as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "perf records are host-endian; sp_cursor reads little-endian");

/* A cursor over the body of record @p p: everything after its header. */
static sp_cursor record_body(const uint8_t *p, size_t len)
{
	size_t h = sizeof(struct perf_event_header);
	return len < h ? sp_cursor_make(p, 0) : sp_cursor_make(p + h, len - h);
}

/* The NUL-terminated string at the cursor; it must end before body offset
 * @p end (where the sample_id trailer starts). NULL when it does not. */
static const char *cursor_str(sp_cursor *c, size_t end)
{
	if (end > c->len || c->pos >= end)
		return NULL;
	const uint8_t *s = c->p + c->pos;
	const uint8_t *nul = memchr(s, '\0', end - c->pos);
	if (!nul)
		return NULL;
	c->pos += (size_t)(nul - s) + 1;
	return (const char *)s;
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
		return STACKPULSE_EFORMAT;
	sp_cursor c = sp_cursor_make(p + len - SAMPLE_ID_BYTES, SAMPLE_ID_BYTES);
	uint32_t pid = 0, tid = 0, res = 0;
	if (sp_cursor_le32(&c, &pid, "sample_id pid") ||
	    sp_cursor_le32(&c, &tid, "sample_id tid") ||
	    sp_cursor_le64(&c, &s->time, "sample_id time") ||
	    sp_cursor_le32(&c, &s->cpu, "sample_id cpu") ||
	    sp_cursor_le32(&c, &res, "sample_id res") || sp_cursor_le64(&c, &s->id, "sample_id id"))
		return STACKPULSE_EFORMAT;
	s->pid = (pid_t)pid;
	s->tid = (pid_t)tid;
	return 0;
}

static const sp_event_id *id_owner(const stackpulse_recorder *rec, uint64_t id)
{
	size_t lo;
	SP_PARTITION_POINT(lo, rec->nids, mid, rec->ids[mid].id < id);
	return lo < rec->nids && rec->ids[lo].id == id ? &rec->ids[lo] : NULL;
}

static int is_direct(const stackpulse_recorder *rec, pid_t tid)
{
	size_t lo;
	SP_PARTITION_POINT(lo, rec->ndirect, mid, rec->direct[mid] < tid);
	return lo < rec->ndirect && rec->direct[lo] == tid;
}

/* A thread that has events of its own also inherits its creator's events
 * when it appeared during a live attach: keep only its own copy. */
static int duplicate(const stackpulse_recorder *rec, pid_t tid, uint64_t id)
{
	if (!is_direct(rec, tid))
		return 0;
	const sp_event_id *owner = id_owner(rec, id);
	/* Events replaced by a re-open (stack copy sizing) no longer sample:
	 * what they wrote before is no copy of anything. */
	return owner && owner->tid != tid && owner->gen == rec->reopens;
}

static int followed_pid(stackpulse_recorder *rec, pid_t pid)
{
	if (!rec->opts.children && pid != rec->target)
		return 0;
	const sp_process *p = sp_ptable_find(&rec->pt, pid);
	return !p || !p->unfollowed;
}

int sp_recorder_process(stackpulse_recorder *rec, pid_t pid, uint64_t time, sp_process **out)
{
	sp_process *p = sp_ptable_find(&rec->pt, pid);
	if (p) {
		*out = p;
		return 0;
	}
	uint32_t parent = SP_NONE;
	pid_t ppid;
	if (sp_proc_ppid(pid, &ppid) == 0 && ppid != pid) {
		sp_process *pp = sp_ptable_find(&rec->pt, ppid);
		if (pp)
			parent = sp_ptable_slot(&rec->pt, pp);
	}
	int rc = sp_ptable_scan(&rec->pt, pid, parent, time, &p);
	if (rc == -ESRCH || rc == -ENOENT || rc == -EACCES) {
		/* Gone, or its maps refused: followed without them (its frames
		 * unknown). The scan may have added it before. */
		p = sp_ptable_find(&rec->pt, pid);
		rc = p ? 0 : sp_ptable_add(&rec->pt, pid, parent, time, "", "", &p);
		if (rc == 0)
			p->unscanned = 1;
	} else if (rc && !sp_recorder_fatal(rec, rc) && (p = sp_ptable_find(&rec->pt, pid))) {
		/* Added, but its snapshot failed (more executable mappings
		 * than SP_PROC_MAX_MAPS, an unreadable /proc): that process
		 * alone is given up. */
		sp_recorder_unfollow(rec, p, rc);
		rc = 0;
	}
	if (rc)
		return rc;
	*out = p;
	return 0;
}

/* The process of @p pid (sp_recorder_process) and its thread @p tid, created on
 * first sight; *th NULL when the process is given up just now. */
static int thread_for(stackpulse_recorder *rec, pid_t pid, pid_t tid, uint64_t time,
                      sp_process **proc, sp_thread **th)
{
	*th = NULL;
	int rc = sp_recorder_process(rec, pid, time, proc);
	if (rc || (*proc)->unfollowed)
		return rc;
	return sp_ptable_thread(&rec->pt, *proc, tid, time, NULL, th);
}

static int add_frame(stackpulse_recorder *rec, uint32_t *n, int kind, uint32_t module,
                     uint64_t offset)
{
	struct stackpulse_raw_frame f = { (enum stackpulse_frame_kind)kind, module, offset, SP_NONE,
		                          0 };
	return sp_recorder_frame(rec, &f, &rec->frames[(*n)++]);
}

/* Appends the user part: native pcs merged with the Python stack when the
 * process runs CPython, else the native pcs alone. */
static int user_frames(stackpulse_recorder *rec, sp_process *proc, pid_t tid,
                       const sp_unwind_result *res, const uint8_t *stack, size_t stack_len,
                       uint64_t sp, uint64_t time, uint32_t *n)
{
	int rc;
	sp_python *py = sp_recorder_python_for(rec, proc);
	uint32_t npy = 0;
	int py_trunc = 0;
	int early_rc = 0, read_rc = STACKPULSE_ENOTFOUND;
	if (py && sp_recorder_python_take(rec, proc, tid, time, &npy, &py_trunc, &early_rc)) {
		read_rc = early_rc;
	} else if (py) {
		sp_python_set_sample_time(py, time);
		read_rc = sp_python_read_stack(py, tid, stack, stack_len, sp, rec->pyframes,
		                               SP_MAX_PY_FRAMES, &npy, &py_trunc);
	}
	if (read_rc != 0)
		npy = 0;
	if (py && (rc = sp_recorder_python_names(rec, proc, tid, time, 0)) != 0)
		return rc;
	/* Every sample of a CPython process goes through the merge, also
	 * when no frame was read (the thread left Python before the read, or
	 * its thread state was not found yet): if it ran the eval loop, the
	 * merge marks it cut. */
	if (py) {
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
					rc = sp_recorder_python_frame(rec, py,
					                              &rec->pyframes[it->index],
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

int sp_recorder_parse_sample(const stackpulse_recorder *rec, const uint8_t *p, size_t len,
                             sp_sample_fields *s)
{
	sp_cursor c = record_body(p, len);
	uint64_t ip = 0;
	uint32_t upid = 0, utid = 0, reserved = 0;
	memset(s, 0, sizeof(*s));
	if (sp_cursor_le64(&c, &s->id, "sample id") || sp_cursor_le64(&c, &ip, "sample ip") ||
	    sp_cursor_le32(&c, &upid, "sample pid") || sp_cursor_le32(&c, &utid, "sample tid") ||
	    sp_cursor_le64(&c, &s->time, "sample time") ||
	    sp_cursor_le32(&c, &s->cpu, "sample cpu") ||
	    sp_cursor_le32(&c, &reserved, "sample res") ||
	    sp_cursor_le64(&c, &s->nr, "callchain nr") || s->nr > sp_cursor_left(&c) / 8 ||
	    sp_cursor_bytes(&c, (size_t)s->nr * 8, &s->chain, "callchain"))
		return STACKPULSE_EFORMAT;
	s->pid = (pid_t)upid;
	s->tid = (pid_t)utid;
	uint64_t mask = rec->setup.attr.sample_regs_user;
	if (sp_cursor_le64(&c, &s->regs.abi, "regs abi"))
		return STACKPULSE_EFORMAT;
	if (s->regs.abi) {
		uint32_t cnt = (uint32_t)__builtin_popcountll(mask);
		if (cnt > SP_UNWIND_MAX_REGS || cnt > sp_cursor_left(&c) / 8)
			return STACKPULSE_EFORMAT;
		for (uint32_t i = 0; i < cnt; i++)
			if (sp_cursor_le64(&c, &s->regs.value[i], "user register"))
				return STACKPULSE_EFORMAT;
		s->regs.count = cnt;
		uint64_t bit = 1ULL << PERF_SP_BIT;
		if (mask & bit)
			s->sp = s->regs.value[__builtin_popcountll(mask & (bit - 1))];
	}
	uint64_t ssize = 0;
	if (sp_cursor_le64(&c, &ssize, "stack size"))
		return STACKPULSE_EFORMAT;
	if (ssize) {
		/* The copy, then its dynamic size. */
		if (ssize > sp_cursor_left(&c) || sp_cursor_left(&c) - ssize < 8 ||
		    sp_cursor_bytes(&c, (size_t)ssize, &s->stack, "user stack") ||
		    sp_cursor_le64(&c, &s->dyn, "stack dyn_size"))
			return STACKPULSE_EFORMAT;
		if (s->dyn > ssize)
			s->dyn = ssize;
	}
	s->ssize = ssize;
	return 0;
}

/* Learns how many stack bytes complete unwinds need and asks for a copy
 * of that size with a margin (re-opened by the drain). A walk cut by the
 * end of a shrunk copy asks for a larger one at once. */
static void copy_learn(stackpulse_recorder *rec, const sp_unwind_result *res, uint64_t dyn,
                       uint64_t ssize)
{
	uint32_t max = rec->opts.stack_size;
	if (ssize != rec->copy_size || rec->copy_resizes >= SP_COPY_MAX_RESIZE || rec->copy_stop)
		return; /* A sample of the previous events, or sizing gave up. */
	if (rec->python_found) {
		/* The CPython reader takes interpreter frames from the copy too
		 * (python_reader.c): keep all of it. */
		if (ssize < max)
			rec->copy_want = max;
		return;
	}
	if (res->truncated) {
		/* Cut by the copy's end: the copy was full (not the top of the
		 * stack) and the walk wanted bytes just past it (a wild CFA from
		 * bad unwind data reads far away instead). */
		if (dyn == ssize && res->stack_hi > dyn && res->stack_hi - dyn <= max &&
		    ssize < max) {
			rec->copy_cut++;
			rec->copy_want = max; /* One step back; learning shrinks it again. */
		}
		return;
	}
	if (res->stack_hi > rec->copy_need)
		rec->copy_need = (uint32_t)(res->stack_hi < max ? res->stack_hi : max);
	if (++rec->copy_seen < SP_COPY_LEARN || rec->copy_want)
		return;
	/* Need plus a quarter plus 512 bytes, rounded up to 512. */
	uint64_t want = ((uint64_t)rec->copy_need * 5 / 4 + 512 + 511) & ~511ull;
	if (want < SP_COPY_MIN)
		want = SP_COPY_MIN;
	if (want <= max && want * 2 <= rec->copy_size)
		rec->copy_want = (uint32_t)want;
}

int sp_recorder_sample_stack(stackpulse_recorder *rec, const sp_sample_fields *sf, sp_process *proc,
                             uint32_t *stack_id)
{
	pid_t tid = sf->tid;
	uint64_t time = sf->time, nr = sf->nr, dyn = sf->dyn;
	const uint8_t *chain = sf->chain, *stack = sf->stack;
	uint64_t mask = rec->setup.attr.sample_regs_user;
	sp_regs regs = sf->regs;
	int rc, counted = 0;
	uint32_t n = 0;
	/* Kernel part, leaf first; PERF_CONTEXT_* markers are skipped. */
	sp_cursor cc = sp_cursor_make(chain, (size_t)nr * 8);
	for (uint64_t i = 0; i < nr && n < SP_MAX_KERNEL_FRAMES; i++) {
		uint64_t a = 0;
		if (sp_cursor_le64(&cc, &a, "callchain entry"))
			break; /* Cannot happen: the length was checked. */
		if (a >= (uint64_t)PERF_CONTEXT_MAX)
			continue;
		if ((rc = add_frame(rec, &n, STACKPULSE_FRAME_KERNEL, SP_NONE, a)) != 0)
			return rc;
		if ((rc = sp_recorder_kaddr_add(rec, a)) != 0)
			return rc;
	}
	/* User part from the online unwinder. */
	if (regs.abi && regs.count) {
		uint64_t ipbit = 1ULL << PERF_IP_BIT, sp = sf->sp;
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
		if (u == 0)
			copy_learn(rec, &res, dyn, sf->ssize);
		if ((rc = user_frames(rec, proc, tid, &res, stack, (size_t)dyn, sp, time, &n)) != 0)
			return rc;
		if (res.truncated) {
			rec->truncated++;
			counted = 1;
			if ((rc = add_frame(rec, &n, STACKPULSE_FRAME_TRUNCATED, SP_NONE, 0)) != 0)
				return rc;
		}
	}
	/* Kernel, native and Python frames together may pass what a spool
	 * stack holds: keep the leaf side, the part a profile shows, and end
	 * it with the marker, as the unwinder's cuts end. */
	if (n > SP_STACK_DEPTH_MAX) {
		n = SP_STACK_DEPTH_MAX - 1;
		rec->truncated += !counted;
		if ((rc = add_frame(rec, &n, STACKPULSE_FRAME_TRUNCATED, SP_NONE, 0)) != 0)
			return rc;
	}
	return sp_writer_stack_frames(rec->w, rec->frames, n, stack_id);
}

static int handle_sample(stackpulse_recorder *rec, const uint8_t *p, size_t len)
{
	sp_sample_fields sf;
	if (sp_recorder_parse_sample(rec, p, len, &sf) != 0) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, sf.pid) || duplicate(rec, sf.tid, sf.id)) {
		rec->dropped++;
		return 0;
	}
	sp_process *proc;
	sp_thread *th;
	int rc = thread_for(rec, sf.pid, sf.tid, sf.time, &proc, &th);
	if (rc || !th) {
		rec->dropped += rc == 0;
		return rc;
	}
	uint32_t thread = th->index, stack_id;
	if ((rc = sp_recorder_sample_stack(rec, &sf, proc, &stack_id)) != 0)
		return rc;
	const sp_event_id *owner = id_owner(rec, sf.id);
	if (owner && owner->kind == SP_EVENT_SWITCH) {
		/* The stack the thread leaves the CPU with: it goes with the
		 * switch-out record that follows (the thread table may have
		 * moved while the stack was built). */
		th = sp_ptable_find_thread(&rec->pt, sf.tid);
		if (th)
			sp_offcpu_sample(th, sf.time, stack_id);
		return 0;
	}
	if (rec->offcpu == STACKPULSE_OFFCPU_UNPRIVILEGED) {
		th = sp_ptable_find_thread(&rec->pt, sf.tid);
		if (th)
			sp_offcpu_unpriv_sample(th, sf.time, stack_id);
	}
	return sp_writer_sample(rec->w, sf.time, thread, stack_id, 1, sf.cpu);
}

#ifndef PERF_RECORD_MISC_SWITCH_OUT_PREEMPT
#define PERF_RECORD_MISC_SWITCH_OUT_PREEMPT (1 << 14) /* Linux 4.17. */
#endif

/* PERF_RECORD_SWITCH of a followed thread (off-CPU events only). */
static int handle_switch(stackpulse_recorder *rec, uint16_t misc, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, sid.pid) || duplicate(rec, sid.tid, sid.id))
		return 0;
	sp_process *proc;
	sp_thread *th;
	int rc = thread_for(rec, sid.pid, sid.tid, sid.time, &proc, &th);
	if (rc || !th)
		return rc;
	return sp_offcpu_switch(rec, th, sid.time, (misc & PERF_RECORD_MISC_SWITCH_OUT) != 0,
	                        (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0);
}

/* The fields of a PERF_RECORD_MMAP2 that we use. */
typedef struct mmap2_rec {
	pid_t pid;
	uint64_t addr, len, pgoff, inode;
	uint8_t bid[20];
	uint32_t bid_len;
	const char *path;
} mmap2_rec;

static int parse_mmap2(uint16_t misc, const uint8_t *p, size_t len, mmap2_rec *m)
{
	sp_cursor c = record_body(p, len);
	uint32_t pid = 0, tid = 0, maj = 0, min = 0, prot = 0, flags = 0;
	uint64_t ino_gen = 0;
	memset(m, 0, sizeof(*m));
	if (sp_cursor_le32(&c, &pid, "mmap2 pid") || sp_cursor_le32(&c, &tid, "mmap2 tid") ||
	    sp_cursor_le64(&c, &m->addr, "mmap2 addr") ||
	    sp_cursor_le64(&c, &m->len, "mmap2 len") ||
	    sp_cursor_le64(&c, &m->pgoff, "mmap2 pgoff"))
		return STACKPULSE_EFORMAT;
	m->pid = (pid_t)pid;
	if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		/* u8 size, u8[3] reserved, u8[20] build_id. */
		const uint8_t *b;
		if (sp_cursor_bytes(&c, 24, &b, "mmap2 build-id"))
			return STACKPULSE_EFORMAT;
		m->bid_len = b[0] > 20 ? 20 : b[0];
		memcpy(m->bid, b + 4, 20);
	} else if (sp_cursor_le32(&c, &maj, "mmap2 maj") || sp_cursor_le32(&c, &min, "mmap2 min") ||
	           sp_cursor_le64(&c, &m->inode, "mmap2 ino") ||
	           sp_cursor_le64(&c, &ino_gen, "mmap2 ino_generation")) {
		return STACKPULSE_EFORMAT;
	}
	if (sp_cursor_le32(&c, &prot, "mmap2 prot") || sp_cursor_le32(&c, &flags, "mmap2 flags"))
		return STACKPULSE_EFORMAT;
	/* read_sample_id succeeded: the trailer fits after the header. */
	m->path = cursor_str(&c, len - SAMPLE_ID_BYTES - sizeof(struct perf_event_header));
	return m->path ? 0 : -1;
}

static int handle_mmap2(stackpulse_recorder *rec, uint16_t misc, const uint8_t *p, size_t len)
{
	sample_id sid;
	mmap2_rec m;
	if (read_sample_id(p, len, &sid) != 0 || parse_mmap2(misc, p, len, &m) != 0) {
		rec->corrupt++;
		return 0;
	}
	if (!followed_pid(rec, m.pid) || duplicate(rec, sid.tid, sid.id))
		return 0;
	sp_process *proc;
	int rc = sp_recorder_process(rec, m.pid, sid.time, &proc);
	if (rc || proc->unfollowed)
		return rc;
	return sp_ptable_mmap(&rec->pt, proc, m.addr, m.len, m.pgoff, m.path,
	                      m.bid_len ? m.bid : NULL, m.bid_len, m.inode, sid.time);
}

/* A new image named like CPython (python3.11, or a #! script.py, whose
 * comm is the script's name): worth watching for its first samples. */
static int python_comm(const char *comm)
{
	size_t n = strnlen(comm, 16);
	return sp_python_candidate(comm) || (n > 3 && memcmp(comm + n - 3, ".py", 3) == 0);
}

/* The exec itself: the new image's name, its process known again. */
static int exec_to(stackpulse_recorder *rec, pid_t pid, pid_t tid, const char *comm, uint64_t time)
{
	if (!rec->python_found && rec->opts.python != STACKPULSE_FEATURE_OFF && python_comm(comm))
		rec->py_watch_until_ns = time + SP_PY_WATCH_NS;
	return sp_ptable_exec(&rec->pt, pid, tid, comm, time);
}

static int handle_comm(stackpulse_recorder *rec, uint16_t misc, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	sp_cursor c = record_body(p, len);
	uint32_t upid = 0, utid = 0;
	const char *comm = NULL;
	if (sp_cursor_le32(&c, &upid, "comm pid") == 0 &&
	    sp_cursor_le32(&c, &utid, "comm tid") == 0)
		comm = cursor_str(&c, len - SAMPLE_ID_BYTES - sizeof(struct perf_event_header));
	if (!comm) {
		rec->corrupt++;
		return 0;
	}
	pid_t pid = (pid_t)upid, tid = (pid_t)utid;
	if (!followed_pid(rec, pid) || duplicate(rec, sid.tid, sid.id))
		return 0;
	sp_process *proc;
	int rc = sp_recorder_process(rec, pid, sid.time, &proc);
	if (rc || proc->unfollowed)
		return rc;
	if (!(misc & PERF_RECORD_MISC_COMM_EXEC))
		return sp_ptable_rename(&rec->pt, proc, tid, comm, sid.time);
	/* An exec that cannot be applied leaves the process's table as it
	 * was before: that process is given up. */
	rc = exec_to(rec, pid, tid, comm, sid.time);
	if (rc && !sp_recorder_fatal(rec, rc)) {
		sp_recorder_unfollow(rec, proc, rc);
		rc = 0;
	}
	return rc;
}

static int keep_map(void *ctx, const sp_proc_map *m)
{
	sp_exec_note *e = ctx;
	sp_proc_map *nm = sp_realloc_array(e->maps, e->nmaps + 1, sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	e->maps = nm;
	char *path = sp_strdup(m->path);
	if (!path)
		return -ENOMEM;
	nm[e->nmaps] = *m;
	nm[e->nmaps++].path = path;
	return 0;
}

static void note_free(sp_exec_note *e)
{
	for (size_t i = 0; i < e->nmaps; i++)
		sp_free((void *)(uintptr_t)e->maps[i].path);
	sp_free(e->maps);
}

int sp_recorder_exec_seen(stackpulse_recorder *rec, pid_t pid, pid_t tid)
{
	int rc = SP_GROW(rec->execs, rec->capexecs, rec->nexecs + 1, UINT32_MAX, "exec notes");
	if (rc)
		return rc;
	sp_exec_note *e = &rec->execs[rec->nexecs];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->tid = tid;
	e->time = sp_clock_ns(CLOCK_MONOTONIC);
	sp_proc_comm(pid, tid, e->comm, sizeof(e->comm));
	rc = sp_proc_maps(pid, keep_map, e);
	if (rc == -ENOMEM) {
		note_free(e);
		return rc;
	}
	rec->nexecs++; /* Unreadable maps (it died): the name alone. */
	return 0;
}

int sp_recorder_exec_apply(stackpulse_recorder *rec, uint64_t upto)
{
	size_t done = 0;
	int rc = 0;
	for (; done < rec->nexecs && rec->execs[done].time <= upto && rc == 0; done++) {
		sp_exec_note *e = &rec->execs[done];
		sp_process *proc = NULL;
		if (followed_pid(rec, e->pid) &&
		    (rc = sp_recorder_process(rec, e->pid, e->time, &proc)) == 0 &&
		    !proc->unfollowed)
			rc = exec_to(rec, e->pid, e->tid, e->comm, e->time);
		for (size_t i = 0; i < e->nmaps && rc == 0 && proc && !proc->unfollowed; i++) {
			const sp_proc_map *m = &e->maps[i];
			rc = sp_ptable_mmap(&rec->pt, proc, m->start, m->end - m->start, m->pgoff,
			                    m->path, NULL, 0, m->inode, e->time);
		}
		/* An exec that cannot be applied gives up that process alone. */
		if (rc && !sp_recorder_fatal(rec, rc)) {
			if (proc)
				sp_recorder_unfollow(rec, proc, rc);
			else
				rec->failed++;
			sp_error_clear();
			rc = 0;
		}
		note_free(e);
	}
	memmove(rec->execs, rec->execs + done, (rec->nexecs - done) * sizeof(*rec->execs));
	rec->nexecs -= done;
	return rc;
}

void sp_recorder_exec_free(stackpulse_recorder *rec)
{
	for (size_t i = 0; i < rec->nexecs; i++)
		note_free(&rec->execs[i]);
	sp_free(rec->execs);
	rec->execs = NULL;
	rec->nexecs = rec->capexecs = 0;
}

static int handle_task(stackpulse_recorder *rec, uint32_t type, const uint8_t *p, size_t len)
{
	sample_id sid;
	if (read_sample_id(p, len, &sid) != 0) {
		rec->corrupt++;
		return 0;
	}
	sp_cursor c = record_body(p, len);
	uint32_t upid = 0, uppid = 0, utid = 0, uptid = 0;
	uint64_t time = 0;
	if (sp_cursor_le32(&c, &upid, "task pid") || sp_cursor_le32(&c, &uppid, "task ppid") ||
	    sp_cursor_le32(&c, &utid, "task tid") || sp_cursor_le32(&c, &uptid, "task ptid") ||
	    sp_cursor_le64(&c, &time, "task time")) {
		rec->corrupt++;
		return 0;
	}
	pid_t pid = (pid_t)upid, ppid = (pid_t)uppid, tid = (pid_t)utid;
	if (duplicate(rec, sid.tid, sid.id))
		return 0;
	if (type == PERF_RECORD_EXIT) {
		if (!sp_ptable_find(&rec->pt, pid))
			return 0;
		sp_thread *th = sp_ptable_find_thread(&rec->pt, tid);
		/* Its loss is read at finish, when the tid is no longer live. */
		if (th && is_direct(rec, tid) && rec->setup.lost_format) {
			int rc = sp_recorder_thread_lost(rec, tid, th->index, 0);
			if (rc)
				return rc;
		}
		return sp_ptable_exit(&rec->pt, pid, tid, time);
	}
	if (pid == ppid) {
		/* A new thread. */
		sp_process *proc = sp_ptable_find(&rec->pt, pid);
		if (!proc)
			return followed_pid(rec, pid) ? sp_recorder_process(rec, pid, time, &proc)
			                              : 0;
		sp_thread *th;
		return sp_ptable_thread(&rec->pt, proc, tid, time, NULL, &th);
	}
	if (!rec->opts.children)
		return 0;
	int rc = sp_ptable_fork(&rec->pt, ppid, pid, tid, time);
	sp_process *child;
	/* A fork that cannot be applied gives up the child alone. */
	if (rc && !sp_recorder_fatal(rec, rc) && (child = sp_ptable_find(&rec->pt, pid))) {
		sp_recorder_unfollow(rec, child, rc);
		rc = 0;
	}
	return rc;
}

static int handle_lost(stackpulse_recorder *rec, const uint8_t *p, size_t len, int samples_only)
{
	sp_cursor c = record_body(p, len);
	uint64_t id = 0, lost = 0;
	if ((!samples_only && sp_cursor_le64(&c, &id, "lost id")) ||
	    sp_cursor_le64(&c, &lost, "lost count")) {
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
	uint64_t time = read_sample_id(p, len, &sid) == 0 ? sid.time : 0;
	sp_offcpu_storm_count(rec, time, lost);
	return sp_writer_lost(rec->w, thread, lost, time);
}

uint64_t sp_recorder_record_time(const struct perf_event_header *hdr, const uint8_t *p, size_t len)
{
	uint64_t t = 0;
	if (hdr->type == PERF_RECORD_SAMPLE) {
		/* identifier, ip, pid/tid, then time. */
		sp_cursor c = record_body(p, len);
		const uint8_t *skip;
		if (sp_cursor_bytes(&c, 24, &skip, "sample head") ||
		    sp_cursor_le64(&c, &t, "sample time"))
			return 0;
		return t;
	}
	sample_id sid;
	return read_sample_id(p, len, &sid) == 0 ? sid.time : 0;
}

static int record_one(stackpulse_recorder *rec, const struct perf_event_header *hdr,
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
	case PERF_RECORD_SWITCH: return handle_switch(rec, hdr->misc, p, len);
	default: return 0; /* THROTTLE, MMAP (mmap2 supersedes it), ... */
	}
}

int sp_recorder_record(stackpulse_recorder *rec, const struct perf_event_header *hdr,
                       const uint8_t *p, size_t len)
{
	int rc = record_one(rec, hdr, p, len);
	if (rc == 0 || sp_recorder_fatal(rec, rc))
		return rc;
	/* That record's own error (a table full, a reference refused): it is
	 * left out, all or nothing, and the drain goes on. */
	rec->failed++;
	rec->dropped += hdr->type == PERF_RECORD_SAMPLE;
	sp_error_clear();
	return 0;
}
