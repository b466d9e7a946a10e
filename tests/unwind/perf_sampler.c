/* See perf_sampler.h. Kept minimal: one event, one process, no inherit. */
#include "perf_sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PS_RING_PAGES  256 /* Data pages; a power of two. */
#define PS_MIN_SAMPLES 200

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int popcount64(uint64_t x)
{
	int n = 0;
	for (; x; x &= x - 1)
		n++;
	return n;
}

static int push_sample(ps_samples *out, const ps_sample *s)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 256;
		ps_sample *v = realloc(out->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		out->v = v;
		out->cap = cap;
	}
	out->v[out->n++] = *s;
	return 0;
}

/* Parses one PERF_RECORD_SAMPLE body (IP|TID|REGS_USER|STACK_USER). */
static int parse_sample(const uint8_t *p, size_t len, int nregs, ps_samples *out)
{
	ps_sample s;
	memset(&s, 0, sizeof(s));
	size_t need = 8 + 8 + 8;
	if (len < need)
		return -EINVAL;
	memcpy(&s.ip, p, 8);
	memcpy(&s.pid, p + 8, 4);
	memcpy(&s.tid, p + 12, 4);
	memcpy(&s.regs.abi, p + 16, 8);
	size_t off = 24;
	if (s.regs.abi != 0) {
		if (nregs > SP_UNWIND_MAX_REGS || len < off + (size_t)nregs * 8)
			return -EINVAL;
		memcpy(s.regs.value, p + off, (size_t)nregs * 8);
		s.regs.count = (uint32_t)nregs;
		off += (size_t)nregs * 8;
	}
	uint64_t size = 0, dyn = 0;
	if (len < off + 8)
		return -EINVAL;
	memcpy(&size, p + off, 8);
	off += 8;
	if (size) {
		if (size > len - off || len - off - size < 8)
			return -EINVAL;
		memcpy(&dyn, p + off + size, 8);
		if (dyn > size)
			return -EINVAL;
		s.stack = malloc(dyn ? dyn : 1);
		if (!s.stack)
			return -ENOMEM;
		memcpy(s.stack, p + off, dyn);
		s.stack_len = dyn;
	}
#if defined(__x86_64__)
	s.sp = s.regs.count > 7 ? s.regs.value[7] : 0; /* PERF_REG_X86_SP */
#else
	s.sp = s.regs.count > 31 ? s.regs.value[31] : 0; /* PERF_REG_ARM64_SP */
#endif
	int rc = push_sample(out, &s);
	if (rc)
		free(s.stack);
	return rc;
}

static void parse_mmap2(const uint8_t *p, size_t len, ps_samples *out)
{
	/* pid, tid, addr, len, pgoff, maj, min, ino, ino_gen, prot, flags. */
	if (len < 8 + 24 + 8 + 8 + 16 + 8 + 1)
		return;
	ps_mmap *m = realloc(out->maps, (out->nmaps + 1) * sizeof(*m));
	if (!m)
		return;
	out->maps = m;
	m = &out->maps[out->nmaps++];
	memcpy(&m->start, p + 8, 8);
	memcpy(&m->len, p + 16, 8);
	memcpy(&m->pgoff, p + 24, 8);
	memcpy(&m->prot, p + 56, 4);
	size_t name_len = strnlen((const char *)p + 64, len - 64);
	if (name_len >= sizeof(m->path))
		name_len = sizeof(m->path) - 1;
	memcpy(m->path, p + 64, name_len);
	m->path[name_len] = 0;
}

/* Drains the ring, copying out records that wrap around its end. */
static int drain(struct perf_event_mmap_page *meta, const uint8_t *data, size_t data_len, int nregs,
                 ps_samples *out)
{
	static uint8_t rec[1 << 17];
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	int rc = 0;
	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		for (size_t i = 0; i < sizeof(h); i++)
			((uint8_t *)&h)[i] = data[(tail + i) & (data_len - 1)];
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		for (size_t i = 0; i < h.size; i++)
			rec[i] = data[(tail + i) & (data_len - 1)];
		const uint8_t *body = rec + sizeof(h);
		size_t blen = h.size - sizeof(h);
		if (h.type == PERF_RECORD_SAMPLE)
			rc = parse_sample(body, blen, nregs, out);
		else if (h.type == PERF_RECORD_MMAP2)
			parse_mmap2(body, blen, out);
		else if (h.type == PERF_RECORD_LOST && blen >= 16) {
			uint64_t lost;
			memcpy(&lost, body + 8, 8);
			out->lost += lost;
		}
		tail += h.size;
		if (rc)
			break;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return rc;
}

int ps_sample_process(pid_t pid, uint32_t freq, uint32_t stack_size, unsigned ms, ps_samples *out)
{
	memset(out, 0, sizeof(*out));
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = freq;
	attr.sample_type =
	        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	attr.sample_regs_user = sp_unwind_regs_mask();
	attr.sample_stack_user = stack_size;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.mmap = 1;
	attr.mmap2 = 1;
	attr.wakeup_events = 1;
	int fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	long page = sysconf(_SC_PAGESIZE);
	size_t data_len = (size_t)page * PS_RING_PAGES;
	size_t map_len = data_len + (size_t)page;
	uint8_t *ring = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct perf_event_mmap_page *meta = (void *)ring;
	int nregs = popcount64(attr.sample_regs_user);
	int rc = 0;
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	/* A loaded machine gives the target less CPU time (cpu-clock counts
	 * only that): keep going, up to 8x longer, until enough samples. */
	uint64_t t0 = now_ms(), end = t0 + ms, hard_end = t0 + 8 * (uint64_t)ms;
	for (;;) {
		uint64_t t = now_ms();
		if (rc != 0 || t >= hard_end || (t >= end && out->n >= PS_MIN_SAMPLES))
			break;
		struct pollfd pfd = { fd, POLLIN, 0 };
		poll(&pfd, 1, 5);
		rc = drain(meta, ring + page, data_len, nregs, out);
	}
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	if (rc == 0)
		rc = drain(meta, ring + page, data_len, nregs, out);
	munmap(ring, map_len);
	close(fd);
	return rc;
}

void ps_samples_free(ps_samples *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].stack);
	free(s->v);
	free(s->maps);
	memset(s, 0, sizeof(*s));
}

int ps_read_maps(pid_t pid, ps_procmap **out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	ps_procmap *v = NULL;
	int n = 0;
	char line[4400];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e, off;
		char perms[5];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %4s %llx %*s %*s%n", &s, &e, perms, &off, &pos) < 4)
			continue;
		if (perms[2] != 'x')
			continue;
		ps_procmap *nv = realloc(v, (size_t)(n + 1) * sizeof(*v));
		if (!nv)
			break;
		v = nv;
		ps_procmap *m = &v[n++];
		m->start = s;
		m->end = e;
		m->pgoff = off;
		memcpy(m->perms, perms, 5);
		const char *p = line + pos;
		while (*p == ' ')
			p++;
		snprintf(m->path, sizeof(m->path), "%s", p);
		m->path[strcspn(m->path, "\n")] = 0;
	}
	fclose(f);
	*out = v;
	return n;
}

int ps_feed_maps(sp_unwind_space *s, const ps_procmap *maps, int n)
{
	if (!maps)
		return n ? -EINVAL : 0;
	for (int i = 0; i < n; i++) {
		const char *p = maps[i].path[0] ? maps[i].path : "//anon";
		int rc = sp_unwind_space_map(s, maps[i].start, maps[i].end, maps[i].pgoff, p, NULL,
		                             0);
		if (rc)
			return rc;
	}
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const ps_sym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int ps_symtab_load(ps_symtab *t, const char *path)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s", path);
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		close(fd);
		return -1;
	}
	size_t phnum = 0;
	elf_getphdrnum(elf, &phnum);
	for (size_t i = 0; i < phnum && t->nloads < 16; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			t->loads[t->nloads].vaddr = ph.p_vaddr;
			t->loads[t->nloads].offset = ph.p_offset;
			t->loads[t->nloads].filesz = ph.p_filesz;
			t->nloads++;
		}
	}
	static const GElf_Word kinds[2] = { SHT_SYMTAB, SHT_DYNSYM };
	for (int ki = 0; ki < 2 && t->n == 0; ki++) {
		GElf_Word want = kinds[ki];
		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize)
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			size_t cnt = sh.sh_size / sh.sh_entsize;
			for (size_t i = 0; d && i < cnt; i++) {
				GElf_Sym sym;
				if (!gelf_getsym(d, (int)i, &sym) ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0)
					continue;
				const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (!name)
					continue;
				ps_sym *ns = realloc(t->syms, (t->n + 1) * sizeof(*ns));
				if (!ns)
					break;
				t->syms = ns;
				t->syms[t->n++] =
				        (ps_sym){ sym.st_value, sym.st_size, strdup(name) };
			}
		}
	}
	/* PLT stubs have no symbols: name their sections "[plt]". */
	size_t shstrndx = 0;
	elf_getshdrstrndx(elf, &shstrndx);
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strcmp(name, ".plt") != 0 && strcmp(name, ".plt.sec") != 0))
			continue;
		ps_sym *ns = realloc(t->syms, (t->n + 1) * sizeof(*ns));
		if (!ns)
			break;
		t->syms = ns;
		t->syms[t->n++] = (ps_sym){ sh.sh_addr, sh.sh_size, strdup("[plt]") };
	}
	elf_end(elf);
	close(fd);
	qsort(t->syms, t->n, sizeof(*t->syms), sym_cmp);
	return 0;
}

void ps_symtab_free(ps_symtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->syms[i].name);
	free(t->syms);
	memset(t, 0, sizeof(*t));
}

const char *ps_symtab_lookup(const ps_symtab *t, uint64_t addr)
{
	const ps_sym *best = NULL;
	for (size_t i = 0; i < t->n && t->syms[i].addr <= addr; i++)
		best = &t->syms[i];
	if (best && addr < best->addr + (best->size ? best->size : 1))
		return best->name;
	return NULL;
}

static size_t path_len_no_deleted(const char *p)
{
	size_t n = strlen(p);
	const char *sfx = " (deleted)";
	size_t m = strlen(sfx);
	if (n >= m && strcmp(p + n - m, sfx) == 0)
		n -= m;
	return n;
}

const char *ps_symbolize(const ps_procmap *maps, int nmaps, ps_symtab *tabs, size_t ntabs,
                         uint64_t pc, int exact)
{
	uint64_t a = exact ? pc : pc - 1;
	for (int i = 0; i < nmaps; i++) {
		const ps_procmap *m = &maps[i];
		if (a < m->start || a >= m->end)
			continue;
		size_t n = path_len_no_deleted(m->path);
		for (size_t j = 0; j < ntabs; j++) {
			ps_symtab *t = &tabs[j];
			if (strlen(t->path) != n || strncmp(t->path, m->path, n) != 0)
				continue;
			uint64_t off = a - m->start + m->pgoff;
			for (size_t k = 0; k < t->nloads; k++) {
				if (off >= t->loads[k].offset &&
				    off < t->loads[k].offset + t->loads[k].filesz)
					return ps_symtab_lookup(t, off - t->loads[k].offset +
					                                   t->loads[k].vaddr);
			}
		}
		return NULL;
	}
	return NULL;
}

int ps_build_target(const char *srcroot, const char *dir)
{
	char cmd[8192];
	const char *flags = "-O2 -fomit-frame-pointer -fasynchronous-unwind-tables";
	snprintf(cmd, sizeof(cmd),
	         "gcc %s -shared -fPIC -o %s/libsptarget.so %s/tests/unwind/targets/lib.c && "
	         "gcc %s -o %s/sptarget %s/tests/unwind/targets/target.c -L%s -lsptarget "
	         "-Wl,-rpath,%s",
	         flags, dir, srcroot, flags, dir, srcroot, dir, dir);
	if (system(cmd) != 0)
		return -1;
	/* CFI only in .debug_frame (no .eh_frame for the program's code). */
	snprintf(cmd, sizeof(cmd),
	         "gcc -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables "
	         "-g "
	         "-o %s/sptarget_dbgframe %s/tests/unwind/targets/target.c -L%s -lsptarget "
	         "-Wl,-rpath,%s",
	         dir, srcroot, dir, dir);
	if (system(cmd) != 0)
		return -1;
	/* gcc 12 ignores -mno-omit-leaf-frame-pointer; clang honours it. A
	 * missing sptarget_fp only skips the test that needs it. */
	snprintf(cmd, sizeof(cmd),
	         "for cc in clang-14 clang; do command -v $cc >/dev/null && "
	         "$cc -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer "
	         "-fno-asynchronous-unwind-tables -fno-unwind-tables "
	         "-o %s/sptarget_fp %s/tests/unwind/targets/target.c -L%s -lsptarget "
	         "-Wl,-rpath,%s && break; done; true",
	         dir, srcroot, dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

const char *ps_target_dir(const char *srcroot, const char *tmpdir)
{
	static char dir[400];
	static int state; /* 0 untried, 1 built, -1 failed */
	if (state == 0) {
		snprintf(dir, sizeof(dir), "%s/target", tmpdir);
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
		state = system(cmd) == 0 && ps_build_target(srcroot, dir) == 0 ? 1 : -1;
	}
	return state > 0 ? dir : NULL;
}

pid_t ps_start_target(const char *exe, char *const args[])
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(p[1], 1);
		execv(exe, args);
		_exit(127);
	}
	close(p[1]);
	char buf[16] = { 0 };
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	if (n <= 0 || strncmp(buf, "ready", 5) != 0) {
		ps_stop_target(pid);
		return -1;
	}
	return pid;
}

void ps_stop_target(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
