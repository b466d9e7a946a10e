/* Fuzzes the parsers of /proc text over untrusted bytes: maps lines, alone
 * and through the file reader (whose buffer splits lines and drops
 * over-long ones), /proc/PID/task/TID/syscall lines, and /proc/kallsyms through the full resolver (line
 * parser, name/module split, address passes). The input is served as a
 * file (a memfd), as the kernel would. Every answer must be in bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* OS-layer parsers, outside the pure library the harnesses link. */
#include "io/file.c"
#include "record/kallsyms.c"
#include "record/proc_scan.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (1u << 20)
#define MAX_ADDRS      32

static int fd = -1;
static char path[64];
static char line[MAP_LINE_MAX + 2];

static int on_map(void *ctx, const sp_proc_map *m)
{
	if (!m->path || !m->exec || m->end < m->start || strlen(m->path) > MAP_LINE_MAX)
		__builtin_trap();
	(*(unsigned *)ctx)++;
	return 0;
}

typedef struct kcheck {
	uint64_t max_addr;
	unsigned answers;
} kcheck;

static int on_ksym(void *ctx, uint64_t start, const char *name, const char *module)
{
	kcheck *k = ctx;
	/* A symbol is only named for an address at or after its start. */
	if (!name || !module || !*name || start > k->max_addr || strlen(name) > FUZZ_MAX_INPUT)
		__builtin_trap();
	k->answers++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (fd < 0) {
		fd = memfd_create("proc_text", MFD_CLOEXEC);
		if (fd < 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		return 0;

	/* maps, as a file */
	unsigned maps = 0;
	uint64_t lines = 0;
	(void)maps_file(path, 1, on_map, &maps, &lines);
	if (maps > lines)
		__builtin_trap();

	/* maps and kallsyms, line by line; kallsyms lines give addresses */
	uint64_t addrs[MAX_ADDRS];
	size_t naddrs = 0;
	for (size_t pos = 0; pos < size;) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
		if (len < sizeof(line)) {
			memcpy(line, data + pos, len);
			line[len] = '\0';
			sp_proc_map m;
			memset(&m, 0, sizeof(m));
			if (sp_proc_parse_map_line(line, &m) == 0 && m.end < m.start)
				__builtin_trap();
			memcpy(line, data + pos, len);
			line[len] = '\0';
			sp_proc_syscall sc;
			if (sp_proc_parse_syscall(line, &sc) == 0 && sc.nr < -1)
				__builtin_trap();
			memcpy(line, data + pos, len);
			line[len] = '\0';
			ksym_line k;
			if (parse_line(line, &k) == 0 && naddrs < MAX_ADDRS)
				addrs[naddrs++] = k.addr + (uint64_t)(len & 3);
		}
		pos += len + 1;
	}
	/* kallsyms, through the resolver */
	if (naddrs) {
		kcheck k = { 0, 0 };
		for (size_t i = 0; i < naddrs; i++)
			if (addrs[i] > k.max_addr)
				k.max_addr = addrs[i];
		int zeroed = 0;
		(void)sp_kallsyms_resolve(path, addrs, naddrs, on_ksym, &k, &zeroed);
		if (k.answers > naddrs)
			__builtin_trap();
	}
	return 0;
}
