/* Python chains over a process's life, on every CPython here, recorded
 * with the record example and read with report --folded:
 * - worker threads (threading.Thread), each sample down to the thread's
 *   bootstrap;
 * - the same after the main thread called pthread_exit: the workers run
 *   on in a process whose leader is gone, recorded from the start or
 *   attached to after the leader left;
 * - the first samples of a new interpreter whose <module> runs a loop at
 *   once, spawned directly and exec'd by a shell;
 * - a local module whose import does the work, so its samples run under
 *   importlib's frames.
 * A sample shows its Python chain whole or says it was cut: a partial
 * chain never passes as whole, and no sample running the eval loop is left
 * with native frames only. A Python target without Python frames fails.
 * The targets stop on CPU time, so load changes only the sample count. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "py_versions.h"

#define MAX_FRAMES 1024
#define MAX_TIDS   16

static const char threads_script[] =
        "import sys, threading, time\n"
        "if len(sys.argv) > 2:\n"
        "    import ctypes\n"
        "def work(n):\n"
        "    acc = 0\n"
        "    for i in range(n):\n"
        "        acc = (acc * 31 + i) & 0xFFFFFFFF\n"
        "    return acc\n"
        "def worker(cpu):\n"
        "    deadline = time.thread_time() + cpu\n"
        "    while time.thread_time() < deadline:\n"
        "        work(5000)\n"
        "ts = [threading.Thread(target=worker, args=(float(sys.argv[1]),)) for _ in range(3)]\n"
        "for t in ts:\n"
        "    t.start()\n"
        "if len(sys.argv) > 2:\n"
        "    ctypes.CDLL(None).pthread_exit(None)\n"
        "for t in ts:\n"
        "    t.join()\n";

static const char first_script[] = "import sys, time\n"
                                   "deadline = time.process_time() + float(sys.argv[1])\n"
                                   "acc = 0\n"
                                   "while time.process_time() < deadline:\n"
                                   "    acc = (acc * 31 + 7) & 0xFFFFFFFF\n";

static const char import_script[] =
        "import os, sys\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
        "import sp_heavy_mod\n";

static const char heavy_module[] = "import sys, time\n"
                                   "def spin(n):\n"
                                   "    acc = 0\n"
                                   "    for i in range(n):\n"
                                   "        acc = (acc * 31 + i) & 0xFFFFFFFF\n"
                                   "    return acc\n"
                                   "def warm(cpu):\n"
                                   "    deadline = time.process_time() + cpu\n"
                                   "    while time.process_time() < deadline:\n"
                                   "        spin(5000)\n"
                                   "warm(float(sys.argv[1]))\n";

/* One folded line: its frames, root first (f[0] is the process or
 * "process/TID" label), and its sample count. */
typedef struct fline {
	char *f[MAX_FRAMES];
	int nf;
	long long n;
} fline;

/* Splits @p line in place; 0 for a line without a count. */
static int fline_parse(char *line, fline *l)
{
	char *sp = strrchr(line, ' ');
	if (!sp)
		return 0;
	l->n = strtoll(sp + 1, NULL, 10);
	*sp = '\0';
	l->nf = 0;
	for (char *f = line; f && l->nf < MAX_FRAMES;) {
		char *semi = strchr(f, ';');
		if (semi)
			*semi = '\0';
		l->f[l->nf++] = f;
		f = semi ? semi + 1 : NULL;
	}
	return 1;
}

/* A Python frame: "name (file.py)" or "name (<frozen module>)". */
static int is_py(const char *f)
{
	size_t n = strlen(f);
	return n > 5 && f[n - 1] == ')' &&
	       ((n > 4 && memcmp(f + n - 4, ".py)", 4) == 0) || strstr(f, " (<frozen "));
}

/* Python frame @p f is function @p name (a qualname ending in ".name"
 * also matches: 3.11+ names methods by their class). */
static int is_fn(const char *f, const char *name)
{
	const char *paren = strstr(f, " (");
	if (!paren || !is_py(f))
		return 0;
	size_t k = strlen(name), len = (size_t)(paren - f);
	return (len == k && memcmp(f, name, k) == 0) ||
	       (len > k && f[len - k - 1] == '.' && memcmp(paren - k, name, k) == 0);
}

/* Python frame @p f comes from a file whose path ends in @p file. */
static int in_file(const char *f, const char *file)
{
	size_t n = strlen(f), k = strlen(file);
	return is_py(f) && n > k + 1 && memcmp(f + n - 1 - k, file, k) == 0;
}

/* How one line reads. */
typedef struct shape {
	int py;     /* Python frames */
	int cut;    /* a [truncated] marker */
	int eval;   /* a native _PyEval_EvalFrameDefault left */
	int root;   /* index of the rootmost Python frame, or -1 */
	int native; /* eval loop running, no Python frame, no marker */
} shape;

static shape shape_of(const fline *l)
{
	shape s = { 0, 0, 0, -1, 0 };
	for (int i = 1; i < l->nf; i++) {
		if (strcmp(l->f[i], "[truncated]") == 0)
			s.cut = 1;
		else if (strcmp(l->f[i], "_PyEval_EvalFrameDefault") == 0)
			s.eval = 1;
		else if (is_py(l->f[i])) {
			if (s.root < 0)
				s.root = i;
			s.py++;
		}
	}
	s.native = s.eval && !s.py && !s.cut;
	return s;
}

/* 1 when the Python frames of @p l hold @p want (n names, root first) in
 * that order, the first one at the root. A name "@file" matches a
 * "<module>" of that file. */
static int chain_is(const fline *l, const shape *s, const char *const *want, int n)
{
	int k = 0;
	for (int i = s->root; i >= 0 && i < l->nf && k < n; i++) {
		const char *w = want[k];
		int ok = w[0] == '@' ? is_fn(l->f[i], "<module>") && in_file(l->f[i], w + 1)
		                     : is_fn(l->f[i], w);
		if (ok)
			k++;
		else if (i == s->root)
			return 0;
	}
	return k == n;
}

/* Writes @p text to @p name in the test directory. */
static void write_file(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", sp_test_tmpdir(), name);
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

/* ---- threads --------------------------------------------------------------------- */

typedef struct thread_tally {
	long tid;
	long long all, with_py, whole, in_worker, cut, dishonest, native;
	char example[512];
} thread_tally;

static const char *const worker_chain[] = { "_bootstrap", "_bootstrap_inner", "run", "worker" };

/* Tallies each thread's samples of report --folded --tid output. */
static int tally_threads(char *text, thread_tally *t, int max)
{
	static fline l;
	int nt = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char copy[512];
		snprintf(copy, sizeof(copy), "%.500s", line);
		if (!fline_parse(line, &l) || l.nf < 2)
			continue;
		const char *slash = strrchr(l.f[0], '/');
		long tid = slash ? strtol(slash + 1, NULL, 10) : 0;
		int k = 0;
		while (k < nt && t[k].tid != tid)
			k++;
		if (k == nt) {
			if (nt == max)
				continue;
			memset(&t[nt], 0, sizeof(t[nt]));
			t[nt++].tid = tid;
		}
		thread_tally *th = &t[k];
		shape s = shape_of(&l);
		th->all += l.n;
		th->native += s.native ? l.n : 0;
		if (!s.py)
			continue;
		th->with_py += l.n;
		/* Whole: from the thread's bootstrap (the main thread's, from
		 * <module>, are checked by the other tests). */
		int whole = !s.cut &&
		            (is_fn(l.f[s.root], "_bootstrap") || is_fn(l.f[s.root], "<module>"));
		th->whole += whole ? l.n : 0;
		th->in_worker += whole && chain_is(&l, &s, worker_chain, 4) ? l.n : 0;
		th->cut += s.cut ? l.n : 0;
		if (!whole && !s.cut) {
			th->dishonest += l.n;
			snprintf(th->example, sizeof(th->example), "%s", copy);
		}
	}
	return nt;
}

/* Starts @p py on the threads script with its leader exiting, and waits
 * until the leader is gone (a zombie while its threads run on). Returns
 * the pid. */
static pid_t start_leaderless(const char *py, const char *script, const char *cpu)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl(py, py, script, cpu, "exit", (char *)NULL);
		_exit(127);
	}
	char status[64], *text = NULL;
	snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
	int gone = 0;
	for (int tries = 0; tries < 500 && !gone; tries++) {
		usleep(10000);
		text = sp_test_read_file(status, NULL);
		gone = text && strstr(text, "\nState:\tZ") != NULL;
		free(text);
	}
	if (!gone) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		sp_test_fail(__FILE__, __LINE__, "%s: the leader of %d did not exit", py, (int)pid);
		return -1;
	}
	return pid;
}

/* 1 when a thread of @p pid is stopped or traced: what a paused recording
 * must never leave behind. */
static int held_after(pid_t pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int held = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL && !held;) {
		if (e->d_name[0] == '.')
			continue;
		char path[160];
		snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
		char *text = sp_test_read_file(path, NULL);
		if (!text)
			continue;
		held = strstr(text, "\nState:\tt") || strstr(text, "\nState:\tT") ||
		       !strstr(text, "\nTracerPid:\t0\n");
		if (held)
			fprintf(stderr, "    thread %s of %d held: %.200s\n", e->d_name, (int)pid,
			        strstr(text, "State:"));
		free(text);
	}
	closedir(d);
	return held;
}

/* @p mode 0: spawned; 1: spawned, the leader exits with pthread_exit while
 * recorded; 2: attached after the leader exited; 3: the same, paused at
 * each sample (--python-pause=on): every thread seized, none left held. */
static void check_threads(int mode)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "threads.py", threads_script, path, sizeof(path));
	int leader_exits = mode != 0;
	for (int i = 0; i < vs.n; i++) {
		char cmd[1200], tag[64];
		snprintf(tag, sizeof(tag), "threads%d%s", i,
		         mode == 1   ? "x"
		         : mode == 2 ? "a"
		         : mode == 3 ? "p"
		                     : "");
		char *text;
		if (mode >= 2) {
			/* Threads still busy through the whole recording. */
			/* Paused, they must still run after the recording (a
			 * sanitized recorder takes seconds to finish): more CPU
			 * than they get before they are killed. */
			pid_t pid = start_leaderless(vs.path[i], path,
			                             mode == 3 ? "20"
			                             : slow    ? "2"
			                                       : "3");
			if (pid < 0)
				continue;
			const char *bin = getenv("SP_BIN_DIR");
			char spool[600], out[700];
			snprintf(spool, sizeof(spool), "%s/%s.spool", sp_test_tmpdir(), tag);
			snprintf(out, sizeof(out), "%s.folded", spool);
			snprintf(cmd, sizeof(cmd),
			         "%s/record -p %d -d %s -F 999 --python=on %s -o %s 2>&1 && "
			         "%s/report %s --folded --tid >%s 2>/dev/null",
			         bin, (int)pid, slow ? "0.5" : "1",
			         mode == 3 ? "--attach=live --python-pause=on" : "", spool, bin,
			         spool, out);
			int rc = sp_test_run(cmd);
			if (mode == 3) {
				/* Released, and no trap still on its way to it. */
				usleep(200000);
				CHECK_EQ(held_after(pid), 0);
				int alive = 0;
				char dir[64];
				snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
				DIR *d = opendir(dir);
				for (struct dirent *e; d && (e = readdir(d)) != NULL;)
					alive += e->d_name[0] != '.';
				if (d)
					closedir(d);
				CHECK(alive >= 2); /* its workers run on */
			}
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			REQUIRE_EQ(rc, 0);
			text = sp_test_read_file(out, NULL);
			REQUIRE(text != NULL);
		} else {
			snprintf(cmd, sizeof(cmd), "%s %s %s%s", vs.path[i], path,
			         slow ? "0.1" : "0.4", leader_exits ? " exit" : "");
			text = py_record_folded(tag, 999, cmd, "--tid");
		}
		thread_tally t[MAX_TIDS];
		int nt = tally_threads(text, t, MAX_TIDS);
		free(text);
		/* The leader is the lowest tid (the spawned pid); attached after
		 * it left, every thread sampled is a worker. */
		int leader = mode >= 2 ? -1 : 0;
		for (int k = 1; k < nt && leader >= 0; k++)
			if (t[k].tid < t[leader].tid)
				leader = k;
		int workers = 0;
		for (int k = 0; k < nt; k++) {
			if (k == leader)
				continue;
			thread_tally *th = &t[k];
			workers++;
			fprintf(stderr,
			        "    %s%s: worker %ld: %lld samples, %lld with Python, %lld whole "
			        "(%lld in worker), %lld cut, %lld not whole and not cut, %lld eval "
			        "loop without Python\n",
			        vs.path[i],
			        mode == 1   ? " (leader exits)"
			        : mode == 2 ? " (attached, no leader)"
			        : mode == 3 ? " (attached, no leader, paused)"
			                    : "",
			        th->tid, th->all, th->with_py, th->whole, th->in_worker, th->cut,
			        th->dishonest, th->native);
			/* Never a partial chain shown whole, and no Python code
			 * left native (1 in 200 allowed for a frame reused under
			 * the reader that still looked valid). */
			if ((th->dishonest + th->native) * 200 > th->all)
				sp_test_fail(__FILE__, __LINE__,
				             "%s: worker %ld: %lld of %lld samples partial shown "
				             "whole, %lld native only, e.g. %s",
				             vs.path[i], th->tid, th->dishonest, th->all,
				             th->native, th->example);
			CHECK(th->with_py > 0); /* no Python in a Python target fails */
			if (slow)
				continue;
			/* Each worker ran 0.4 s of CPU under the recorder (also
			 * after the leader left; attached: a third of 2 CPUs for
			 * 1 s), nearly all of it whole. */
			CHECK(th->in_worker >= 100);
			if (th->whole * 10 < th->with_py * 9)
				sp_test_fail(__FILE__, __LINE__,
				             "%s: worker %ld: %lld of %lld whole", vs.path[i],
				             th->tid, th->whole, th->with_py);
		}
		CHECK_EQ(workers, 3);
	}
}

SP_TEST(worker_threads_have_whole_chains)
{
	check_threads(0);
}

SP_TEST(workers_keep_whole_chains_after_the_leader_exits)
{
	check_threads(1);
}

SP_TEST(attach_after_the_leader_exited_reads_the_workers)
{
	check_threads(2);
}

SP_TEST(paused_attach_reads_the_workers_and_lets_them_go)
{
	check_threads(3);
}

/* ---- the first samples -------------------------------------------------------------- */

typedef struct tally {
	long long all, with_py, in_code, whole, cut, dishonest, native;
	char example[512];
} tally;

/* Tallies report --folded output: samples in @p file's code (a frame of
 * it), whole when their chain is @p want (root first), else cut or
 * dishonest. */
static void tally_code(char *text, const char *file, const char *const *want, int nwant, tally *t)
{
	static fline l;
	memset(t, 0, sizeof(*t));
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char copy[512];
		snprintf(copy, sizeof(copy), "%.500s", line);
		if (!fline_parse(line, &l))
			continue;
		shape s = shape_of(&l);
		t->all += l.n;
		if (s.native) {
			t->native += l.n;
			snprintf(t->example, sizeof(t->example), "%s", copy);
		}
		if (!s.py)
			continue;
		t->with_py += l.n;
		int in_code = 0;
		for (int i = s.root; i < l.nf && !in_code; i++)
			in_code = in_file(l.f[i], file);
		if (!in_code)
			continue;
		t->in_code += l.n;
		if (s.cut) {
			t->cut += l.n;
		} else if (chain_is(&l, &s, want, nwant)) {
			t->whole += l.n;
		} else {
			t->dishonest += l.n;
			snprintf(t->example, sizeof(t->example), "%s", copy);
		}
	}
}

/* The checks shared by the start-up tests. */
static void check_tally(const char *what, const char *py, const tally *t, int slow)
{
	fprintf(stderr,
	        "    %s %s: %lld samples, %lld with Python, %lld in its code: %lld whole, %lld "
	        "cut, %lld not whole and not cut; %lld eval loop without Python\n",
	        py, what, t->all, t->with_py, t->in_code, t->whole, t->cut, t->dishonest,
	        t->native);
	if ((t->dishonest + t->native) * 200 > t->all)
		sp_test_fail(__FILE__, __LINE__,
		             "%s %s: %lld of %lld samples partial shown whole, %lld native "
		             "only, e.g. %s",
		             py, what, t->dishonest, t->all, t->native, t->example);
	CHECK(t->in_code > 0); /* a Python target without Python frames fails */
	if (slow)
		return;
	CHECK(t->in_code >= 100);
	if (t->whole * 10 < t->in_code * 9)
		sp_test_fail(__FILE__, __LINE__, "%s %s: %lld of %lld samples whole", py, what,
		             t->whole, t->in_code);
}

SP_TEST(first_samples_of_a_new_interpreter_are_whole)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "first.py", first_script, path, sizeof(path));
	static const char *const chain[] = { "@first.py" };
	for (int i = 0; i < vs.n; i++) {
		/* Spawned directly, then exec'd by a shell (the recorder
		 * meets the shell first). A short run: its first samples are
		 * a good part of it. */
		for (int via_shell = 0; via_shell < 2; via_shell++) {
			char cmd[1200], tag[64];
			const char *cpu = slow ? "0.1" : "0.3";
			if (via_shell)
				snprintf(cmd, sizeof(cmd), "/bin/sh -c 'exec %s %s %s'", vs.path[i],
				         path, cpu);
			else
				snprintf(cmd, sizeof(cmd), "%s %s %s", vs.path[i], path, cpu);
			snprintf(tag, sizeof(tag), "first%d_%d", i, via_shell);
			char *text = py_record_folded(tag, 999, cmd, "");
			tally t;
			tally_code(text, "first.py", chain, 1, &t);
			free(text);
			check_tally(via_shell ? "(exec'd by sh)" : "(spawned)", vs.path[i], &t,
			            slow);
		}
	}
}

/* ---- imports ---------------------------------------------------------------------- */

SP_TEST(import_time_samples_show_importlib_frames)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "imp_main.py", import_script, path, sizeof(path));
	write_file("sp_heavy_mod.py", heavy_module);
	static const char *const chain[] = { "@imp_main.py", "_find_and_load",
		                             "_call_with_frames_removed", "@sp_heavy_mod.py",
		                             "warm" };
	for (int i = 0; i < vs.n; i++) {
		char cmd[1200], tag[64];
		snprintf(cmd, sizeof(cmd), "%s %s %s", vs.path[i], path, slow ? "0.1" : "0.4");
		snprintf(tag, sizeof(tag), "import%d", i);
		char *text = py_record_folded(tag, 999, cmd, "");
		tally t;
		tally_code(text, "sp_heavy_mod.py", chain, 5, &t);
		free(text);
		check_tally("(import)", vs.path[i], &t, slow);
	}
}
