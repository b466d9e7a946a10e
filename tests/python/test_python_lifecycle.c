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
 * - threads started again and again, each sleeping at once, recorded with
 *   --off-cpu: a new thread's first wait keeps its Python chain, and
 *   --python-only keeps the samples whose chain was cut;
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

/* Attaches `record ARGS -p PID -o SPOOL` to the leaderless @p pid and
 * stops it (SIGINT) once every worker has run @p cpu_s seconds of CPU
 * since the spool appeared: a loaded machine gives the workers less CPU per wall second,
 * and a fixed duration fewer samples. Returns record's exit status. */
static int record_workers(pid_t pid, const char *args, const char *spool, double cpu_s)
{
	enum {
		MAX_W = 16
	};
	int tids[MAX_W];
	long long start[MAX_W];
	int nw = 0;
	char dir[64], cmd[1200];
	snprintf(cmd, sizeof(cmd), "exec %s/record -p %d %s -o %s 2>&1", getenv("SP_BIN_DIR"),
	         (int)pid, args, spool);
	unlink(spool);
	pid_t rec = fork();
	REQUIRE(rec >= 0);
	if (rec == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	/* The CPU counts from the attach on (the spool is there). */
	for (int tries = 0; tries < 6000 && access(spool, F_OK) != 0; tries++)
		usleep(10000);
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d)) != NULL && nw < MAX_W;) {
		int tid = atoi(e->d_name);
		if (tid <= 0 || tid == (int)pid)
			continue;
		tids[nw] = tid;
		start[nw++] = sp_test_cpu_ticks((int)pid, tid);
	}
	if (d)
		closedir(d);
	long long want = (long long)(cpu_s * (double)sysconf(_SC_CLK_TCK));
	long long least = 0;
	/* 120 s: the workers never get that little CPU, but they may die. */
	for (int tries = 0; tries < 12000; tries++) {
		usleep(10000);
		least = -1;
		for (int k = 0; k < nw; k++) {
			long long t = sp_test_cpu_ticks((int)pid, tids[k]);
			long long ran = t < 0 ? -1 : t - start[k];
			if (least < 0 || ran < least)
				least = ran;
		}
		if (least < 0 || least >= want)
			break;
	}
	fprintf(stderr, "    every worker ran %lld ticks under the recorder (%lld wanted)\n", least,
	        want);
	kill(rec, SIGINT);
	int status = 0;
	REQUIRE(waitpid(rec, &status, 0) == rec);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
			int rc = record_workers(pid,
			                        mode == 3 ? "-F 999 --python=on --attach=live "
			                                    "--python-pause=on"
			                                  : "-F 999 --python=on",
			                        spool, slow ? 0.2 : 0.4);
			if (rc == 0) {
				snprintf(cmd, sizeof(cmd),
				         "%s/report %s --folded --tid >%s 2>/dev/null", bin, spool,
				         out);
				rc = sp_test_run(cmd);
			}
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
			 * after the leader left; attached: until each had run
			 * 0.4 s), nearly all of it whole. */
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

/* ---- new threads' first waits ------------------------------------------------------ */

/* Four threads at a time, each sleeping 50 ms at once (its first blocking
 * call) and ending; beside them one thread 300 frames deep (past the
 * reader's 256) sleeping in 10 ms steps, whose every wait is a cut chain. */
static const char reuse_script[] = "import sys, threading, time\n"
                                   "def work():\n"
                                   "    time.sleep(0.05)\n"
                                   "def deep(n, done):\n"
                                   "    if n:\n"
                                   "        return deep(n - 1, done)\n"
                                   "    while not done.is_set():\n"
                                   "        time.sleep(0.01)\n"
                                   "done = threading.Event()\n"
                                   "d = threading.Thread(target=deep, args=(300, done))\n"
                                   "d.start()\n"
                                   "end = time.monotonic() + float(sys.argv[1])\n"
                                   "while time.monotonic() < end:\n"
                                   "    ts = [threading.Thread(target=lambda: work()) for _ in "
                                   "range(4)]\n"
                                   "    for t in ts:\n"
                                   "        t.start()\n"
                                   "    for t in ts:\n"
                                   "        t.join()\n"
                                   "done.set()\n"
                                   "d.join()\n";

static const char *const reuse_chain[] = { "_bootstrap", "_bootstrap_inner", "run", "<lambda>",
	                                   "work" };

typedef struct wall_tally {
	long long py, whole, cut, kept; /* µs of wall time */
	long long po_cut, po_all;       /* the same recording, --python-only */
	long long rows;
	char example[512];
} wall_tally;

/* The process and thread of a "--pid --tid" label "name-PID/TID". */
static void label_ids(const char *label, long *pid, long *tid)
{
	const char *slash = strrchr(label, '/');
	*tid = slash ? strtol(slash + 1, NULL, 10) : 0;
	*pid = 0;
	for (const char *c = slash; c && c > label; c--)
		if (*c == '-') {
			*pid = strtol(c + 1, NULL, 10);
			break;
		}
}

/* Tallies report --folded --pid --tid --time=wall: the workers' wall time
 * while they ran Python (a Python frame, the eval loop, or a marker of a
 * cut chain; not the main thread, not the deep thread) and of it what
 * shows the whole chain; and over all threads, the time of cut chains (a
 * [truncated] below the root: the unwinder puts its own at the root) and
 * of rows a Python-only view keeps (a Python frame or such a marker). */
static void tally_wall(char *text, wall_tally *t)
{
	static fline l;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char copy[512];
		snprintf(copy, sizeof(copy), "%.500s", line);
		if (!fline_parse(line, &l) || l.nf < 2)
			continue;
		t->rows++;
		long pid, tid;
		label_ids(l.f[0], &pid, &tid);
		shape s = shape_of(&l);
		int cut = 0, deep = 0, eval = s.eval;
		for (int i = 2; i < l.nf; i++)
			cut |= strcmp(l.f[i], "[truncated]") == 0;
		for (int i = 1; i < l.nf; i++)
			deep |= is_fn(l.f[i], "deep");
		t->cut += cut ? l.n : 0;
		t->kept += cut || s.py ? l.n : 0;
		if (tid == pid || deep || !(s.py || eval || cut))
			continue;
		t->py += l.n;
		if (!s.cut && s.py && chain_is(&l, &s, reuse_chain, 1)) {
			t->whole += l.n;
		} else if (l.n > 1000) {
			snprintf(t->example, sizeof(t->example), "%s", copy);
		}
	}
}

static void tally_python_only(char *text, wall_tally *t)
{
	static fline l;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!fline_parse(line, &l) || l.nf < 2)
			continue;
		int cut = 0;
		for (int i = 1; i < l.nf; i++)
			cut |= strcmp(l.f[i], "[truncated]") == 0;
		t->po_all += l.n;
		t->po_cut += cut ? l.n : 0;
	}
}

/* Runs report on @p spool with @p args into a string (to free). */
static char *report_text(const char *spool, const char *args)
{
	const char *bin = getenv("SP_BIN_DIR");
	char out[700], cmd[1600];
	snprintf(out, sizeof(out), "%s.%d.folded", spool, (int)strlen(args));
	snprintf(cmd, sizeof(cmd), "%s/report %s %s >%s 2>/dev/null", bin, spool, args, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	return text;
}

/* Share of the workers' Python time with a whole chain that every run
 * must reach, loaded or sanitized. Measured (docs/python.md): 0.996-1.0
 * idle and under ASan, down to 0.955 with two busy loops beside a loaded
 * machine (a read late by tens of ms comes after the thread ended);
 * before new threads' thread states were bound at once, 0.63-0.96, and
 * in every run several interpreters below 0.90. */
#define REUSE_WHOLE_MIN 0.90

static void check_reuse(int attach)
{
	py_versions vs;
	char path[512];
	int slow = py_script_setup(&vs, "reuse.py", reuse_script, path, sizeof(path));
	const char *bin = getenv("SP_BIN_DIR");
	if (!bin || !*bin)
		sp_test_skip("SP_BIN_DIR is not set (zig build test sets it to zig-out/bin)");
	for (int i = 0; i < vs.n; i++) {
		char spool[600], err[620], cmd[2000];
		snprintf(spool, sizeof(spool), "%s/reuse%d%s.spool", sp_test_tmpdir(), i,
		         attach ? "a" : "");
		snprintf(err, sizeof(err), "%s.stderr", spool);
		int rc;
		if (attach) {
			pid_t pid = fork();
			REQUIRE(pid >= 0);
			if (pid == 0) {
				execl(vs.path[i], vs.path[i], path, slow ? "6" : "4", (char *)NULL);
				_exit(127);
			}
			usleep(500000); /* threads come and go by now */
			snprintf(cmd, sizeof(cmd),
			         "%s/record -p %d -d %s -F 999 --off-cpu --python=on -o %s 2>%s",
			         bin, (int)pid, slow ? "1" : "1.5", spool, err);
			rc = sp_test_run(cmd);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		} else {
			snprintf(cmd, sizeof(cmd),
			         "%s/record -F 999 --off-cpu --python=on -o %s -- %s %s %s 2>%s",
			         bin, spool, vs.path[i], path, slow ? "1" : "1.5", err);
			rc = sp_test_run(cmd);
		}
		if (rc != 0) {
			char *text = sp_test_read_file(err, NULL);
			fprintf(stderr, "    %s: record failed (%d): %.2000s\n", vs.path[i], rc,
			        text ? text : "");
			free(text);
		}
		REQUIRE_EQ(rc, 0);
		wall_tally t;
		memset(&t, 0, sizeof(t));
		char *text = report_text(spool, "--folded --pid --tid --time=wall");
		tally_wall(text, &t);
		free(text);
		text = report_text(spool, "--folded --pid --tid --time=wall --python-only");
		tally_python_only(text, &t);
		free(text);
		double share = t.py ? (double)t.whole / (double)t.py : 0;
		fprintf(stderr,
		        "    %s%s: workers ran Python %.3f s of wall time, %.4f of it whole; cut "
		        "chains %.3f s, --python-only %.3f s of them; kept %.3f s, --python-only "
		        "%.3f s\n",
		        vs.path[i], attach ? " (attached)" : "", (double)t.py / 1e6, share,
		        (double)t.cut / 1e6, (double)t.po_cut / 1e6, (double)t.kept / 1e6,
		        (double)t.po_all / 1e6);
		/* Each worker sleeps 50 ms, four at a time: seconds of it. */
		CHECK(t.py >= 300000);
		/* Under valgrind the recorder reads stacks too late for a
		 * bound: the threads have ended. */
		if (!slow && share < REUSE_WHOLE_MIN)
			sp_test_fail(
			        __FILE__, __LINE__,
			        "%s%s: %.4f of the workers' Python time whole (at least %.2f), "
			        "e.g. %s",
			        vs.path[i], attach ? " (attached)" : "", share, REUSE_WHOLE_MIN,
			        t.example);
		/* The deep thread's waits are cut chains, and --python-only
		 * keeps them with their marker: the same time (each row's
		 * microseconds are rounded on their own). */
		CHECK(t.cut >= 100000);
		long long slack = t.rows;
		CHECK(t.po_cut >= t.cut - slack && t.po_cut <= t.cut + slack);
		CHECK(t.po_all >= t.kept - slack && t.po_all <= t.kept + slack);
	}
}

SP_TEST(new_threads_first_wait_keeps_python_chain)
{
	check_reuse(0);
}

SP_TEST(attached_new_threads_first_wait_keeps_python_chain)
{
	check_reuse(1);
}
