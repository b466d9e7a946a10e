/* A target that attacks the recorder through the files it maps. One
 * argument, "MODE:LIB:SECONDS[:EXTRA]"; LIB is a copy of hotlib.so the
 * test made for this run (build-id note removed for fifo and dev).
 *   fifo  dlopen LIB, unlink it, put FIFOs at LIB and "LIB (deleted)".
 *   dev   the same with character devices (mknod 1,5 as root; else
 *         symlinks to /dev/zero).
 *   swap  (root) in a private mount namespace with a tmpfs on LIB's folder:
 *         copy EXTRA to LIB, dlopen it, split its text mapping with
 *         mprotect (map_files of the recorded range disappears), move the
 *         file away and put an absolute symlink to a FIFO at LIB.
 *   trunc LIB is a copy of libpython3.*: dlopen it, then fork children
 *         (each probed for CPython) that spin while the parent truncates LIB
 *         to one page and restores it, in a loop.
 *   swapdev as swap, with a character device (mknod 1,5) at LIB instead
 *         of the symlink.
 * Spins in hotlib_spin for SECONDS of its CPU time (the same samples on a
 * loaded machine), then exits 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*spin_fn)(uint64_t);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static spin_fn load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
		exit(2);
	}
	spin_fn f = (spin_fn)(uintptr_t)dlsym(h, "hotlib_spin");
	if (!f)
		die("dlsym");
	return f;
}

static void spin_for(spin_fn f, double secs)
{
	double end = now() + secs;
	while (now() < end)
		f(200000);
}

/* The special file of @p mode at @p path (replacing what is there). */
static void plant(const char *mode, const char *path)
{
	unlink(path);
	if (strcmp(mode, "fifo") == 0) {
		if (mkfifo(path, 0666) != 0)
			die("mkfifo");
	} else if (mknod(path, S_IFCHR | 0666, makedev(1, 5)) != 0 &&
	           symlink("/dev/zero", path) != 0) {
		die("mknod/symlink");
	}
}

/* The executable mapping of @p f's library, from /proc/self/maps. */
static int text_mapping(spin_fn f, uintptr_t *lo, uintptr_t *hi)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[4096];
	uintptr_t a = (uintptr_t)f;
	while (m && fgets(line, sizeof(line), m)) {
		unsigned long s, e;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) == 3 && a >= s && a < e &&
		    perms[2] == 'x') {
			*lo = s;
			*hi = e;
			fclose(m);
			return 0;
		}
	}
	if (m)
		fclose(m);
	return -1;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	if (system(cmd) != 0)
		die("cp");
}

/* CPU work in the target itself (trunc mode never runs library code). */
__attribute__((noinline)) static uint64_t own_spin(uint64_t n)
{
	volatile uint64_t x = 1;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + i;
	return x;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	char *arg = strdup(argv[1]);
	char *mode = strtok(arg, ":"), *lib = strtok(NULL, ":"), *secs_s = strtok(NULL, ":");
	char *extra = strtok(NULL, ":");
	if (!mode || !lib || !secs_s)
		return 2;
	double secs = atof(secs_s);
	char deleted[4200];
	snprintf(deleted, sizeof(deleted), "%s (deleted)", lib);

	if (strcmp(mode, "fifo") == 0 || strcmp(mode, "dev") == 0) {
		spin_fn f = load(lib);
		plant(mode, lib);
		plant(mode, deleted);
		spin_for(f, secs);
		return 0;
	}
	if (strcmp(mode, "swap") == 0 || strcmp(mode, "swapdev") == 0) {
		if (!extra)
			return 2;
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", lib);
		*strrchr(dir, '/') = '\0';
		if (unshare(CLONE_NEWNS) != 0)
			die("unshare");
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
			die("mount private");
		if (mount("none", dir, "tmpfs", 0, "mode=0755") != 0)
			die("mount tmpfs");
		copy_file(extra, lib);
		spin_fn f = load(lib);
		uintptr_t lo, hi;
		if (text_mapping(f, &lo, &hi) != 0 || hi - lo < 2 * 4096)
			die("text mapping");
		/* One page gets other permissions: the VMA splits in two. */
		if (mprotect((void *)(hi - 4096), 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
			die("mprotect");
		char moved[4200];
		snprintf(moved, sizeof(moved), "%s.moved", lib);
		if (rename(lib, moved) != 0)
			die("rename");
		if (strcmp(mode, "swapdev") == 0) {
			if (mknod(lib, S_IFCHR | 0666, makedev(1, 5)) != 0)
				die("mknod");
		} else {
			char fifo[4200];
			snprintf(fifo, sizeof(fifo), "%s/../hostfifo", dir);
			char *real = realpath(fifo, NULL);
			if (!real || symlink(real, lib) != 0)
				die("symlink");
		}
		spin_for(f, secs);
		return 0;
	}
	if (strcmp(mode, "trunc") == 0) {
		int fd = open(lib, O_RDWR);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0)
			die("open lib");
		uint8_t *img = malloc((size_t)st.st_size);
		if (!img || pread(fd, img, (size_t)st.st_size, 0) != st.st_size)
			die("read lib");
		/* Mapped, then never touched again: only readers of the file
		 * (the recorder) meet the truncated state. */
		if (!dlopen(lib, RTLD_NOW))
			die("dlopen");
		const off_t cut = 4096;
		double end = now() + secs;
		while (now() < end) {
			pid_t c = fork();
			if (c == 0) {
				double e2 = now() + 0.35;
				while (now() < e2)
					own_spin(200000);
				_exit(0);
			}
			while (waitpid(c, NULL, WNOHANG) == 0) {
				if (ftruncate(fd, cut) != 0)
					die("ftruncate");
				own_spin(20000);
				if (pwrite(fd, img + cut, (size_t)(st.st_size - cut), cut) !=
				    st.st_size - cut)
					die("pwrite");
				own_spin(20000);
			}
		}
		return 0;
	}
	return 2;
}
