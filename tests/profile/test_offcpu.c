/* Wall-clock time end to end, as root and as an unprivileged user: `record --off-cpu` of a target that
 * per round spins 30%, sleeps 40% in nanosleep and blocks 30% in read() on
 * a pipe a filler thread writes late; `report --folded --time=...` and
 * `go tool pprof -sample_index=...` of `report --pprof`. The target
 * measures its own phases: that is the truth the shares are held to.
 * And recordings of off-CPU time only (a sleeping Python attached): every
 * output of report, read by its decoder, shows the wait the spool holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../python/py_versions.h"
#include "example_tools.h"
#include "harness.h"
#include "push_util.h"

/* One recording per user for every test of the file. */
typedef struct phases_run {
	char spool[512];
	double truth[3]; /* spin, sleep, read: seconds. */
	double steal;    /* Seconds the hypervisor took from all CPUs meanwhile. */
	int pid;
} phases_run;
static phases_run g_root, g_nobody;
static char g_report[512];

/* Steal time of all CPUs so far (/proc/stat), in seconds: time a virtual
 * machine's CPU was taken by the hypervisor, which no guest clock but the
 * wall clock sees. */
static double steal_s(void)
{
	char *text = sp_test_read_file("/proc/stat", NULL);
	unsigned long long v[8] = { 0 };
	int n = text ? sscanf(text, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
	                      &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
	             : 0;
	free(text);
	long hz = sysconf(_SC_CLK_TCK);
	return n == 8 && hz > 0 ? (double)v[7] / (double)hz : 0;
}

/* Records `phases 20 100` into @p r: as root (the context-switch event,
 * kernel frames) or, with @p nobody, as an unprivileged user (nobody
 * through setpriv when we are root, else ourselves). */
static void record_run(phases_run *r, int nobody)
{
	char record[512], exe[512], cmd[4096], truth[512], log[512], dir[512];
	tools(record, g_report, sizeof(record));
	if (!nobody && geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	if (nobody && geteuid() == 0 && sp_test_run("command -v setpriv >/dev/null 2>&1") != 0)
		sp_test_skip("setpriv missing (util-linux)");
	/* A directory the unprivileged recorder and its target can write. */
	snprintf(dir, sizeof(dir), "%s/%s", sp_test_tmpdir(), nobody ? "public" : "root");
	mkdir(dir, 0777);
	chmod(dir, 0777);
	chmod(sp_test_tmpdir(), 0755);
	snprintf(exe, sizeof(exe), "%s/phases", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "test -x %s || cc -O2 -g -fomit-frame-pointer -pthread -o %s "
	         "%s/tests/record/targets/phases.c",
	         exe, exe, sp_test_source_root());
	REQUIRE_EQ(sp_test_run(cmd), 0);
	snprintf(r->spool, sizeof(r->spool), "%s/phases.spool", dir);
	snprintf(truth, sizeof(truth), "%s/phases.truth", dir);
	snprintf(log, sizeof(log), "%s/phases.log", dir);
	snprintf(cmd, sizeof(cmd),
	         "%s %s -F 999 --off-cpu -o %s -- sh -c 'echo $$ >%s.pid; exec %s 20 100 >%s' 2>%s",
	         nobody && geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups"
	                                  : "",
	         record, r->spool, truth, exe, truth, log);
	double steal = steal_s();
	int rc = sp_test_run(cmd);
	r->steal = steal_s() - steal;
	char *text = sp_test_read_file(log, NULL);
	fprintf(stderr, "    %s", text ? text : "");
	free(text);
	REQUIRE_EQ(rc, 0);
	text = sp_test_read_file(truth, NULL);
	REQUIRE(text != NULL);
	unsigned long long a = 0, b = 0, c = 0;
	REQUIRE_EQ(sscanf(text, "spin %llu sleep %llu read %llu", &a, &b, &c), 3);
	free(text);
	r->truth[0] = (double)a / 1e9;
	r->truth[1] = (double)b / 1e9;
	r->truth[2] = (double)c / 1e9;
	snprintf(cmd, sizeof(cmd), "%s.pid", truth);
	text = sp_test_read_file(cmd, NULL);
	REQUIRE(text != NULL);
	r->pid = atoi(text);
	free(text);
}

static const phases_run *recorded(void)
{
	if (!g_root.spool[0])
		record_run(&g_root, 0);
	return &g_root;
}

static const phases_run *recorded_nobody(void)
{
	if (!g_nobody.spool[0])
		record_run(&g_nobody, 1);
	return &g_nobody;
}

/* Runs report with @p args; returns its stdout (free it). */
static char *report(const phases_run *r, const char *args)
{
	char cmd[4096], out[512];
	snprintf(out, sizeof(out), "%s/report.out", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s %s %s >%s", g_report, r->spool, args, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	return text;
}

/* The weight of folded line @p line, which is cut to its stack. */
static double cut_weight(char *line)
{
	char *sp = strrchr(line, ' ');
	REQUIRE(sp != NULL);
	*sp = '\0';
	return strtod(sp + 1, NULL);
}

static const char *const phase_fn[3] = { ";spin_phase", ";sleep_phase;", ";read_phase;" };

/* Sums the folded weights of the main thread per phase; *all gets every
 * line, *none (if not NULL) the main thread's time without a stack (its
 * label alone). */
static void fold_phases(const phases_run *r, char *text, double us[3], double *all, double *none)
{
	char label[64];
	snprintf(label, sizeof(label), "phases/%d;", r->pid);
	size_t len = strlen(label);
	us[0] = us[1] = us[2] = *all = 0;
	if (none)
		*none = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		double v = cut_weight(line);
		*all += v;
		if (none && strncmp(line, label, len - 1) == 0 && line[len - 1] == '\0')
			*none += v;
		if (strncmp(line, label, len) != 0)
			continue;
		for (int k = 0; k < 3; k++)
			if (strstr(line, phase_fn[k]))
				us[k] += v;
	}
}

/* Wall shares of the phases (the default time of an off-CPU spool) against
 * the truth the target measured. With @p no_stack, the main thread's time
 * without a stack (an unprivileged recorder reads a blocked thread's stack
 * only if it gets a CPU while the thread still waits: on a loaded machine
 * some waits end first, docs/recording.md) may belong to any phase: no
 * phase gets more than its truth, none gets less than its truth less that
 * time, and that time stays under half of the blocked phases'. */
static void wall_shares(const phases_run *r, int no_stack)
{
	char *text = report(r, "--folded --tid"); /* Default: wall, for an off-CPU spool. */
	char *same = report(r, "--folded --tid --time=wall");
	CHECK_STR(text, same);
	free(same);
	double us[3], all, none;
	fold_phases(r, text, us, &all, &none);
	free(text);
	if (!no_stack)
		none = 0; /* Privileged: the kernel's stacks; none is a phase's loss. */
	double sum = us[0] + us[1] + us[2] + none;
	double tsum = r->truth[0] + r->truth[1] + r->truth[2];
	REQUIRE(sum > 0);
	printf("    truth  spin %.3fs sleep %.3fs read %.3fs\n", r->truth[0], r->truth[1],
	       r->truth[2]);
	printf("    wall   spin %.3fs sleep %.3fs read %.3fs, %.3fs without a stack (%.3fs "
	       "stolen by the hypervisor)\n",
	       us[0] / 1e6, us[1] / 1e6, us[2] / 1e6, none / 1e6, r->steal);
	/* Stolen time passes on the target's wall clock while its task clock,
	 * which drives cpu-clock samples, stands still: the bounds widen by
	 * what was stolen (an upper bound: all CPUs' steal). */
	double slack = r->steal / tsum, unknown = none / sum;
	for (int k = 0; k < 3; k++) {
		double share = us[k] / sum, truth = r->truth[k] / tsum;
		printf("    share %d: %.4f, truth %.4f\n", k, share, truth);
		CHECK(share > truth - 0.03 - slack - unknown && share < truth + 0.03 + slack);
	}
	CHECK(none / 1e6 < (r->truth[1] + r->truth[2]) / 2);
	/* And the phases add up to the time they took. */
	CHECK(sum / 1e6 > tsum * (0.97 - slack) && sum / 1e6 < tsum * 1.03);
}

SP_TEST(wall_shares_match_the_phases)
{
	wall_shares(recorded(), 0);
}

/* The same recorded by an unprivileged user (perf_event_paranoid 2: switch
 * records, stacks read from the blocked threads). */
SP_TEST(wall_shares_match_the_phases_unprivileged)
{
	wall_shares(recorded_nobody(), 1);
}

/* Off-CPU stacks end in the blocking call. With @p kernel: the user frame
 * next to the kernel is clock_nanosleep (sleep) or read (pipe), under
 * kernel frames; without: the leaf is that user frame, the stack reaches
 * main, and no kernel frame is there. */
static void stacks_end(const phases_run *r, int kernel)
{
	char *text = report(r, "--folded --tid --time=off");
	char label[64];
	snprintf(label, sizeof(label), "phases/%d;", r->pid);
	double in[2] = { 0, 0 }, ends[2] = { 0, 0 };
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		double v = cut_weight(line);
		if (strncmp(line, label, strlen(label)) != 0)
			continue;
		for (int k = 0; k < 2; k++) {
			if (!strstr(line, phase_fn[k + 1]))
				continue;
			in[k] += v;
			const char *want = k == 0 ? "clock_nanosleep" : "read";
			if (!kernel) {
				const char *leaf = strrchr(line, ';');
				if (leaf && strstr(leaf, want) && !strstr(line, "_[k]") &&
				    strstr(line, ";main;"))
					ends[k] += v;
				continue;
			}
			/* The user frame before the first kernel frame. */
			char *kf = strstr(line, "_[k]");
			if (!kf)
				continue;
			char *end = kf;
			while (end > line && end[-1] != ';')
				end--;
			char *start = end - 1;
			while (start > line && start[-1] != ';')
				start--;
			char user[256];
			snprintf(user, sizeof(user), "%.*s", (int)(end - 1 - start), start);
			if (strstr(user, want) &&
			    strstr(line, k == 0 ? "do_nanosleep_[k]" : "pipe_read_[k]"))
				ends[k] += v;
		}
	}
	free(text);
	printf("    off-CPU in sleep_phase %.3fs (%.1f%% ending in clock_nanosleep), read_phase "
	       "%.3fs (%.1f%% in read)\n",
	       in[0] / 1e6, 100 * ends[0] / (in[0] > 0 ? in[0] : 1), in[1] / 1e6,
	       100 * ends[1] / (in[1] > 0 ? in[1] : 1));
	CHECK(in[0] / 1e6 > r->truth[1] * 0.95);
	CHECK(in[1] / 1e6 > r->truth[2] * 0.95);
	/* What is left is preemption inside the phase functions. */
	CHECK(ends[0] >= in[0] * 0.97);
	CHECK(ends[1] >= in[1] * 0.97);
}

SP_TEST(offcpu_stacks_end_in_the_blocking_call)
{
	stacks_end(recorded(), 1);
}

SP_TEST(offcpu_stacks_end_in_the_blocking_call_unprivileged)
{
	stacks_end(recorded_nobody(), 0);
}

/* Totals of a -raw column of `go tool pprof`, by sample type name. */
static double pprof_total(const char *raw, const char *type)
{
	const char *hdr = strstr(raw, "samples/count");
	REQUIRE(hdr != NULL);
	const char *eol = strchr(hdr, '\n');
	REQUIRE(eol != NULL);
	int col = -1, k = 0;
	for (const char *p = hdr; p < eol; k++) {
		const char *q = p;
		while (q < eol && *q != ' ')
			q++;
		if ((size_t)(q - p) >= strlen(type) && strncmp(p, type, strlen(type)) == 0 &&
		    p[strlen(type)] == '/')
			col = k;
		while (q < eol && *q == ' ')
			q++;
		p = q;
	}
	REQUIRE(col >= 0);
	double total = 0;
	for (const char *line = eol + 1; *line;) {
		const char *next = strchr(line, '\n');
		if (!strchr(line, ':') || (next && strchr(line, ':') > next))
			break;
		const char *p = line;
		for (int i = 0; i <= col; i++) {
			char *end;
			double v = strtod(p, &end);
			if (end == p)
				return total;
			if (i == col)
				total += v;
			p = end;
		}
		if (!next)
			break;
		line = next + 1;
	}
	return total;
}

SP_TEST(pprof_has_cpu_and_off_cpu_nanoseconds)
{
	const phases_run *r = recorded();
	if (sp_test_run("command -v go >/dev/null 2>&1") != 0)
		sp_test_skip("go is not installed (Debian golang-go)");
	char args[1024], cmd[4096], path[512];
	snprintf(args, sizeof(args), "--pprof %s/phases.pb.gz", sp_test_tmpdir());
	free(report(r, args));
	double got[2], folded[2];
	const char *types[2] = { "cpu", "off_cpu" };
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/raw-%d.txt", sp_test_tmpdir(), k);
		snprintf(cmd, sizeof(cmd),
		         "cd %s && GOTOOLCHAIN=local go tool pprof -sample_index=%s -raw "
		         "phases.pb.gz >%s 2>/dev/null",
		         sp_test_tmpdir(), types[k], path);
		REQUIRE_EQ(sp_test_run(cmd), 0);
		char *raw = sp_test_read_file(path, NULL);
		REQUIRE(raw != NULL);
		CHECK(strstr(raw, "cpu/nanoseconds") != NULL);
		CHECK(strstr(raw, "off_cpu/nanoseconds") != NULL);
		got[k] = pprof_total(raw, types[k]);
		free(raw);
		char *text = report(r, k == 0 ? "--folded --time=cpu" : "--folded --time=off");
		double us[3], all;
		fold_phases(r, text, us, &all, NULL);
		free(text);
		folded[k] = all;
	}
	printf("    pprof cpu %.3fs off_cpu %.3fs; folded %.3fs %.3fs\n", got[0] / 1e9,
	       got[1] / 1e9, folded[0] / 1e6, folded[1] / 1e6);
	CHECK(got[0] > 0 && got[1] > 0);
	/* Folded rounds each line to a microsecond. */
	for (int k = 0; k < 2; k++)
		CHECK(got[k] / 1e3 > folded[k] * 0.99 && got[k] / 1e3 < folded[k] * 1.01);
}

/* The SVG's frame titles and the Firefox JSON's samples carry time: the
 * sleep phase weighs what it took. */
SP_TEST(svg_and_firefox_show_time)
{
	const phases_run *r = recorded();
	char args[1024], cmd[4096], path[512];
	snprintf(path, sizeof(path), "%s/phases.svg", sp_test_tmpdir());
	snprintf(args, sizeof(args), "--svg %s", path);
	free(report(r, args));
	char *svg = sp_test_read_file(path, NULL);
	REQUIRE(svg != NULL);
	const char *t = strstr(svg, "<title>sleep_phase (");
	REQUIRE(t != NULL);
	double svg_ms = strtod(t + strlen("<title>sleep_phase ("), NULL);
	CHECK(strstr(t, " ms, ") != NULL);
	free(svg);
	/* Firefox: the main thread's samples under sleep_phase, times the
	 * interval. */
	snprintf(path, sizeof(path), "%s/phases.json", sp_test_tmpdir());
	snprintf(args, sizeof(args), "--firefox %s", path);
	free(report(r, args));
	char out[512];
	snprintf(out, sizeof(out), "%s/ff.txt", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "python3 -c 'import json,sys\n"
	         "p=json.load(open(sys.argv[1]))\n"
	         "iv=p[\"meta\"][\"interval\"]\n"
	         "for th in p[\"threads\"]:\n"
	         "  if th[\"tid\"]!=int(sys.argv[2]): continue\n"
	         "  "
	         "st=th[\"stringTable\"];fr=th[\"frameTable\"][\"data\"];sk=th[\"stackTable\"]["
	         "\"data\"]\n"
	         "  def has(s):\n"
	         "    while s is not None:\n"
	         "      if st[fr[sk[s][1]][0]].startswith(\"sleep_phase\"): return True\n"
	         "      s=sk[s][0]\n"
	         "    return False\n"
	         "  n=sum(1 for x in th[\"samples\"][\"data\"] if has(x[0]))\n"
	         "  print(n*iv)' %s %d >%s",
	         path, r->pid, out);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	double ff_ms = strtod(text, NULL);
	free(text);
	printf("    sleep phase: truth %.1f ms, SVG %.1f ms, Firefox %.1f ms\n", r->truth[1] * 1e3,
	       svg_ms, ff_ms);
	CHECK(svg_ms > r->truth[1] * 1e3 * 0.97 && svg_ms < r->truth[1] * 1e3 * 1.03);
	CHECK(ff_ms > r->truth[1] * 1e3 * 0.97 && ff_ms < r->truth[1] * 1e3 * 1.03);
}

SP_TEST(time_views_need_off_cpu_data)
{
	char record[512], report_bin[512], cmd[4096], spool[512];
	tools(record, report_bin, sizeof(record));
	snprintf(spool, sizeof(spool), "%s/plain.spool", sp_test_tmpdir());
	record_cmd(record, spool, "sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'");
	snprintf(cmd, sizeof(cmd), "%s %s --folded --time=wall >/dev/null 2>&1", report_bin, spool);
	CHECK_EQ(sp_test_run(cmd), 1);
	snprintf(cmd, sizeof(cmd), "%s %s --folded --time=cpu >/dev/null", report_bin, spool);
	CHECK_EQ(sp_test_run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s %s --time=bogus >/dev/null 2>&1", report_bin, spool);
	CHECK_EQ(sp_test_run(cmd), 2);
}

/* A Python function blocked in time.sleep, Lock.acquire, socket.recv, or
 * waiting for the GIL sits under its Python callers in the off-CPU stacks:
 * recorded as root, or with @p nobody as an unprivileged user (the stacks
 * read from the blocked threads, Python frames merged the same way). */
static void python_blocked(int nobody)
{
	char record[512], report_bin[512], cmd[4096], spool[512], out[512], dir[512];
	tools(record, report_bin, sizeof(record));
	if (!nobody && geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	snprintf(dir, sizeof(dir), "%s/%s", sp_test_tmpdir(), nobody ? "public" : "root");
	mkdir(dir, 0777);
	chmod(dir, 0777);
	chmod(sp_test_tmpdir(), 0755);
	const char *as = nobody && geteuid() == 0
	                         ? "setpriv --reuid=65534 --regid=65534 --clear-groups"
	                         : "";
	py_versions v;
	py_versions_find(&v);
	/* As nobody, the interpreters nobody may run (pyenv builds under
	 * /root are not). */
	int keep = 0;
	for (int i = 0; i < v.n; i++) {
		snprintf(cmd, sizeof(cmd), "%s test -x %s", as, v.path[i]);
		if (!*as || sp_test_run(cmd) == 0)
			memmove(v.path[keep++], v.path[i], sizeof(v.path[0]));
	}
	v.n = keep;
	REQUIRE(v.n > 0);
	/* Python function, its Python caller, what it blocks in (two
	 * spellings: time.sleep is select() before 3.11). The GIL is a futex
	 * wait under spin(), which only runs Python. Thread.run is "run"
	 * before 3.11 (co_name, no qualname). */
	static const char *const want[4][4] = {
		{ "sleeper (", "main (", "clock_nanosleep", "select" },
		{ "waiter (", "run (", "futex", "futex" },
		{ "receiver (", "run (", "recv", "recv" },
		{ "spin (", "gil_worker (", "futex", "futex" },
	};
	for (int i = 0; i < v.n; i++) {
		snprintf(spool, sizeof(spool), "%s/pyblock-%d.spool", dir, i);
		snprintf(out, sizeof(out), "%s/pyblock-%d.folded", dir, i);
		snprintf(cmd, sizeof(cmd),
		         "%s %s --off-cpu -o %s -- %s %s/tests/record/targets/pyblock.py "
		         "2>/dev/null && %s %s --folded --time=off >%s 2>/dev/null",
		         as, record, spool, v.path[i], sp_test_source_root(), report_bin, spool,
		         out);
		REQUIRE_EQ(sp_test_run(cmd), 0);
		char *text = sp_test_read_file(out, NULL);
		REQUIRE(text != NULL);
		double us[4] = { 0, 0, 0, 0 };
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
			double w = cut_weight(line);
			for (int k = 0; k < 4; k++) {
				const char *fn = strstr(line, want[k][0]);
				const char *caller = strstr(line, want[k][1]);
				if (fn && caller && caller < fn &&
				    (strstr(fn, want[k][2]) || strstr(fn, want[k][3])))
					us[k] += w;
			}
		}
		free(text);
		printf("    %s: sleep %.3fs, Lock.acquire %.3fs, recv %.3fs, GIL %.3fs\n",
		       v.path[i], us[0] / 1e6, us[1] / 1e6, us[2] / 1e6, us[3] / 1e6);
		/* 10 sleeps of 20 ms; the lock and the socket are held for 500 ms
		 * after the thread was started (it blocks 50 ms after it runs). */
		CHECK(us[0] / 1e6 > 0.18);
		CHECK(us[1] / 1e6 > 0.3);
		CHECK(us[2] / 1e6 > 0.3);
		CHECK(us[3] > 0);
	}
}

SP_TEST(python_blocked_frames_under_their_callers)
{
	python_blocked(0);
}

SP_TEST(python_blocked_frames_under_their_callers_unprivileged)
{
	python_blocked(1);
}

/* ---- Recordings that hold only off-CPU time ---- */

/* A Python process asleep in time.sleep (3 s under longsleep, line 8,
 * under <module>, line 12), attached once it sleeps: no on-CPU sample,
 * one wait. It ends with os._exit so it uses no CPU after waking. */
static const char sleeper_py[] = "import os\n"
                                 "import sys\n"
                                 "import time\n"
                                 "\n"
                                 "\n"
                                 "def longsleep(path):\n"
                                 "    open(path, \"w\").close()\n"
                                 "    time.sleep(3.0)\n"
                                 "\n"
                                 "\n"
                                 "if __name__ == \"__main__\":\n"
                                 "    longsleep(sys.argv[1])\n"
                                 "    os._exit(0)\n";

/* Prints the wait under longsleep < <module> in milliseconds that each
 * output shows, read by its decoder: `svg` (XML), `firefox` (JSON),
 * `otlp` (opentelemetry-proto; also prints the sample types), `traces`
 * (the text of `go tool pprof -traces -unit=ms`). */
static const char wait_py[] =
        "import json, sys\n"
        "kind, path = sys.argv[1], sys.argv[2]\n"
        "def waits(names):\n"
        "    return any(names[i] == 'longsleep' and names[i + 1] == '<module>'\n"
        "               for i in range(len(names) - 1))\n"
        "if kind == 'svg':\n"
        "    import xml.etree.ElementTree as E\n"
        "    ns = '{http://www.w3.org/2000/svg}'\n"
        "    fr = []\n"
        "    for g in E.parse(path).getroot().iter(ns + 'g'):\n"
        "        if 'f' in (g.get('class') or '').split():\n"
        "            fr.append((int(g.get('data-d')), int(g.get('data-s')), int(g.get('data-n')),\n"
        "                       g.find(ns + 'title').text))\n"
        "    ms = 0.0\n"
        "    for d, s, n, t in fr:\n"
        "        if t.startswith('longsleep (') and any(\n"
        "                pd == d - 1 and ps <= s and s + n <= ps + pn and pt.startswith('<module> "
        "(')\n"
        "                for pd, ps, pn, pt in fr):\n"
        "            ms += float(t[t.rindex(' (') + 2:].split(' ms')[0])\n"
        "    print(ms)\n"
        "elif kind == 'firefox':\n"
        "    p = json.load(open(path))\n"
        "    n = 0\n"
        "    for th in p['threads']:\n"
        "        st, fr, sk = th['stringTable'], th['frameTable']['data'], "
        "th['stackTable']['data']\n"
        "        def chain(s):\n"
        "            out = []\n"
        "            while s is not None:\n"
        "                out.append(st[fr[sk[s][1]][0]].split(' (')[0])\n"
        "                s = sk[s][0]\n"
        "            return out\n"
        "        n += sum(1 for x in th['samples']['data'] if x[0] is not None and "
        "waits(chain(x[0])))\n"
        "    print(n * p['meta']['interval'])\n"
        "elif kind == 'otlp':\n"
        "    from opentelemetry.proto.collector.profiles.v1development import "
        "profiles_service_pb2 as svc\n"
        "    req = svc.ExportProfilesServiceRequest()\n"
        "    req.ParseFromString(open(path, 'rb').read())\n"
        "    d = req.dictionary\n"
        "    S = d.string_table\n"
        "    ns, types = 0, []\n"
        "    for rp in req.resource_profiles:\n"
        "        for sp in rp.scope_profiles:\n"
        "            for prof in sp.profiles:\n"
        "                types.append(S[prof.sample_type.type_strindex] + '/' +\n"
        "                             S[prof.sample_type.unit_strindex])\n"
        "                for smp in prof.samples:\n"
        "                    names = [S[d.function_table[ln.function_index].name_strindex]\n"
        "                             for li in d.stack_table[smp.stack_index].location_indices\n"
        "                             for ln in d.location_table[li].lines]\n"
        "                    if waits(names):\n"
        "                        ns += smp.values[0]\n"
        "    print(ns / 1e6, ' '.join(types))\n"
        "elif kind == 'traces':\n"
        "    ms = 0.0\n"
        "    for block in open(path).read().split('-----------+')[1:]:\n"
        "        lines = [ln.strip() for ln in block.strip('-\\n').splitlines() if ln.strip()]\n"
        "        if not lines or not lines[0].split()[0].endswith('ms'):\n"
        "            continue\n"
        "        first = lines[0].split(None, 1)\n"
        "        if waits(first[1:] + lines[1:]):\n"
        "            ms += float(first[0][:-2])\n"
        "    print(ms)\n";

typedef struct sleep_run {
	char dir[512], spool[512], script[512];
	double wait_ms; /* The wait under longsleep < <module>, read through the API. */
	uint64_t intervals;
} sleep_run;
static sleep_run g_sleep_root, g_sleep_nobody;

/* 1 when the Python frames of spool stack @p stack (leaf first) have
 * longsleep at line 8 right under <module> at line 12. */
static int is_the_wait(const stackpulse_spool *sp, uint32_t stack)
{
	uint32_t ids[512];
	uint32_t d = stackpulse_spool_stack_frames(sp, stack, ids, 512);
	const struct stackpulse_raw_frame *prev = NULL;
	for (uint32_t i = 0; i < d && i < 512; i++) {
		const struct stackpulse_raw_frame *f = stackpulse_spool_frame(sp, ids[i]);
		if (!f || f->kind != STACKPULSE_FRAME_PYTHON)
			continue;
		if (prev) {
			const struct stackpulse_pycode *a =
			        stackpulse_spool_pycode(sp, prev->pycode);
			const struct stackpulse_pycode *b = stackpulse_spool_pycode(sp, f->pycode);
			if (a && b && strcmp(a->qualname, "longsleep") == 0 && prev->line == 8 &&
			    strcmp(b->qualname, "<module>") == 0 && f->line == 12)
				return 1;
		}
		prev = f;
	}
	return 0;
}

/* Attaches `record -p PID --off-cpu` to the sleeper: as root (the
 * context-switch event, kernel frames) or, with @p nobody, as an
 * unprivileged user (stacks read from the blocked thread). */
static const sleep_run *sleeper_recorded(int nobody)
{
	sleep_run *r = nobody ? &g_sleep_nobody : &g_sleep_root;
	if (r->spool[0])
		return r;
	char record[512], cmd[4096], log[600];
	tools(record, g_report, sizeof(record));
	if (!nobody && geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	if (nobody && geteuid() == 0 && sp_test_run("command -v setpriv >/dev/null 2>&1") != 0)
		sp_test_skip("setpriv missing (util-linux)");
	const char *py = "/usr/bin/python3.11"; /* One nobody may run (pyenv's are under /root). */
	if (access(py, X_OK) != 0)
		sp_test_skip("/usr/bin/python3.11 is not installed (Debian python3.11)");
	snprintf(r->dir, sizeof(r->dir), "%s/sleep-%s", sp_test_tmpdir(),
	         nobody ? "nobody" : "root");
	mkdir(r->dir, 0777);
	chmod(r->dir, 0777);
	chmod(sp_test_tmpdir(), 0755);
	snprintf(r->script, sizeof(r->script), "%s/sleeper.py", r->dir);
	FILE *f = fopen(r->script, "w");
	REQUIRE(f != NULL);
	fputs(sleeper_py, f);
	REQUIRE_EQ(fclose(f), 0);
	chmod(r->script, 0644);
	snprintf(r->spool, sizeof(r->spool), "%s/sleep.spool", r->dir);
	snprintf(log, sizeof(log), "%s/record.log", r->dir);
	/* Attached once the script is in time.sleep (it made the file just
	 * before); record ends when the target exits. */
	snprintf(cmd, sizeof(cmd),
	         "%s sh -c 'cd %s && %s sleeper.py %s/ready & P=$!; i=0; "
	         "while [ ! -e %s/ready ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; "
	         "%s -p $P --off-cpu -o %s 2>%s; rc=$?; wait $P; exit $rc'",
	         nobody && geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups"
	                                  : "",
	         r->dir, py, r->dir, r->dir, record, r->spool, log);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(log, NULL);
	fprintf(stderr, "    %s", text ? text : "");
	free(text);
	REQUIRE_EQ(rc, 0);
	/* The premise: no on-CPU sample, the wait in off-CPU intervals. */
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(r->spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	CHECK_EQ(m->samples, 0);
	CHECK_EQ(m->off_cpu_method,
	         nobody ? STACKPULSE_OFFCPU_UNPRIVILEGED : STACKPULSE_OFFCPU_SWITCH_EVENT);
	r->intervals = m->offcpu_intervals;
	stackpulse_offcpu_iter *it;
	REQUIRE_OK(stackpulse_offcpu_iter_new(sp, &it));
	const struct stackpulse_offcpu *iv;
	uint64_t ns = 0;
	while (stackpulse_offcpu_iter_next(it, &iv) == 1)
		if (is_the_wait(sp, iv->stack))
			ns += iv->duration_ns + iv->merged_ns;
	stackpulse_offcpu_iter_free(it);
	stackpulse_spool_close(sp);
	r->wait_ms = (double)ns / 1e6;
	printf("    %s: %llu off-CPU intervals, the wait %.1f ms\n", nobody ? "nobody" : "root",
	       (unsigned long long)r->intervals, r->wait_ms);
	/* 3 s asleep, attached within a second of it. */
	REQUIRE(r->wait_ms > 1000 && r->wait_ms < 3300);
	return r;
}

/* Runs report on the sleeper's spool with @p args: its exit status, stdout
 * and stderr (malloc'd). */
static int report_sleep(const sleep_run *r, const char *args, char **out, char **err)
{
	char cmd[4096], o[600], e[600];
	snprintf(o, sizeof(o), "%s/report.out", r->dir);
	snprintf(e, sizeof(e), "%s/report.err", r->dir);
	snprintf(cmd, sizeof(cmd), "cd %s && %s %s %s >%s 2>%s", r->dir, g_report, r->spool, args,
	         o, e);
	int rc = sp_test_run(cmd);
	*out = sp_test_read_file(o, NULL);
	*err = sp_test_read_file(e, NULL);
	REQUIRE(*out && *err);
	return rc;
}

/* The milliseconds wait_py reads from @p path as @p kind; *rest gets the
 * rest of its line when not NULL (malloc'd). */
static double decoded_wait(const sleep_run *r, const char *kind, const char *path, char **rest)
{
	char py[600], out[600], cmd[2048];
	snprintf(py, sizeof(py), "%s/wait.py", r->dir);
	snprintf(out, sizeof(out), "%s/wait.txt", r->dir);
	FILE *f = fopen(py, "w");
	REQUIRE(f != NULL);
	fputs(wait_py, f);
	REQUIRE_EQ(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s >%s 2>&1", py, kind, path, out);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	if (rc != 0)
		fprintf(stderr, "    %s decoder: %s\n", kind, text);
	REQUIRE_EQ(rc, 0);
	char *end = NULL;
	double ms = strtod(text, &end);
	if (rest)
		*rest = strdup(end ? end : "");
	free(text);
	printf("    %-8s the wait %.1f ms\n", kind, ms);
	return ms;
}

/* Within a millisecond or 1% of the wait the spool holds: outputs round
 * (folded to microseconds, Firefox to one sample period). */
static int near(double got_ms, const sleep_run *r, double slack_ms)
{
	double tol = r->wait_ms * 0.01 + slack_ms;
	return got_ms > r->wait_ms - tol && got_ms < r->wait_ms + tol;
}

/* `go tool pprof -traces` of @p pb: the wait it shows (off_cpu). */
static double pprof_wait(const sleep_run *r, const char *pb)
{
	char cmd[4096], out[600];
	snprintf(out, sizeof(out), "%s/traces.txt", r->dir);
	snprintf(cmd, sizeof(cmd),
	         "cd %s && mkdir -p home gocache && HOME=%s/home GOCACHE=%s/gocache "
	         "GOPATH=%s/home/go GOTOOLCHAIN=local go tool pprof -traces -sample_index=off_cpu "
	         "-unit=ms %s >%s 2>&1",
	         r->dir, r->dir, r->dir, r->dir, pb, out);
	int rc = sp_test_run(cmd);
	if (rc != 0) {
		char *t = sp_test_read_file(out, NULL);
		fprintf(stderr, "    go tool pprof: %s\n", t ? t : "");
		free(t);
	}
	REQUIRE_EQ(rc, 0);
	return decoded_wait(r, "traces", out, NULL);
}

/* The table, --top, --threads and --folded: exit 0, a note that there is
 * no on-CPU sample, and the wait with its stack and duration. */
static void offcpu_only_text(const sleep_run *r)
{
	char *out, *err, want[160];
	CHECK_EQ(report_sleep(r, "", &out, &err), 0);
	printf("%.600s", out);
	snprintf(want, sizeof(want), "0 samples, %llu off-CPU interval",
	         (unsigned long long)r->intervals);
	CHECK(strncmp(out, want, strlen(want)) == 0);
	snprintf(want, sizeof(want), "has no on-CPU samples, only %llu off-CPU interval",
	         (unsigned long long)r->intervals);
	CHECK(strstr(err, want) != NULL);
	/* Leaf first: longsleep, then <module>, in the hottest stack. */
	const char *a = strstr(out, "\n    longsleep [py]");
	const char *next = a ? strchr(a + 1, '\n') : NULL;
	CHECK(next != NULL && strncmp(next, "\n    <module> [py]", 18) == 0);
	/* The stacks end in a named wrapper: no "0.00% of samples" hint. */
	CHECK(strstr(out, "0.00% of samples") == NULL);
	free(out);
	free(err);
	CHECK_EQ(report_sleep(r, "--top 40", &out, &err), 0);
	CHECK(strstr(out, "100.00%  longsleep [py]") != NULL);
	free(out);
	free(err);
	CHECK_EQ(report_sleep(r, "--threads", &out, &err), 0);
	CHECK(strstr(out, "python3.11") != NULL);
	free(out);
	free(err);
	/* --folded (wall by default), and --time=cpu, which has nothing on-CPU
	 * to show: the same lines, and it says so. */
	char *cpu, *cpu_err;
	CHECK_EQ(report_sleep(r, "--folded --lines", &out, &err), 0);
	CHECK_EQ(report_sleep(r, "--folded --lines --time=cpu", &cpu, &cpu_err), 0);
	CHECK_STR(out, cpu);
	CHECK(strstr(cpu_err, "showing them instead (--time=off)") != NULL);
	char stack[1200];
	snprintf(stack, sizeof(stack), ";<module> (%s:12);longsleep (%s:8);", r->script, r->script);
	double us = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		double v = cut_weight(line);
		if (strstr(line, stack))
			us += v;
	}
	printf("    folded   the wait %.1f ms\n", us / 1e3);
	CHECK(near(us / 1e3, r, 1));
	free(out);
	free(err);
	free(cpu);
	free(cpu_err);
}

/* pprof, SVG, Firefox and OTLP files, each read by its decoder. */
static void offcpu_only_files(const sleep_run *r)
{
	char *out, *err, path[700], args[800];
	if (!sp_test_have_program("go"))
		sp_test_skip("go is not installed (Debian golang-go)");
	snprintf(path, sizeof(path), "%s/sleep.pb.gz", r->dir);
	snprintf(args, sizeof(args), "--pprof %s", path);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	CHECK(strstr(out, " off-CPU interval") != NULL);
	free(out);
	free(err);
	CHECK(near(pprof_wait(r, path), r, 1));

	snprintf(path, sizeof(path), "%s/sleep.svg", r->dir);
	snprintf(args, sizeof(args), "--svg %s", path);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	free(out);
	free(err);
	CHECK(near(decoded_wait(r, "svg", path, NULL), r, 1));

	snprintf(path, sizeof(path), "%s/sleep.json", r->dir);
	snprintf(args, sizeof(args), "--firefox %s", path);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	free(out);
	free(err);
	/* One Gecko sample per period (10.1 ms at 99 Hz) of the wait. */
	CHECK(near(decoded_wait(r, "firefox", path, NULL), r, 11));

	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	snprintf(path, sizeof(path), "%s/sleep.otlp", r->dir);
	snprintf(args, sizeof(args), "--otlp-file %s", path);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	free(out);
	free(err);
	char *types = NULL;
	CHECK(near(decoded_wait(r, "otlp", path, &types), r, 1));
	CHECK(types && strstr(types, "wall/nanoseconds") != NULL);
	free(types);
}

SP_TEST(offcpu_only_attach_shows_in_text_outputs)
{
	offcpu_only_text(sleeper_recorded(0));
}

SP_TEST(offcpu_only_attach_shows_in_text_outputs_unprivileged)
{
	offcpu_only_text(sleeper_recorded(1));
}

SP_TEST(offcpu_only_attach_shows_in_every_file_format)
{
	offcpu_only_files(sleeper_recorded(0));
}

SP_TEST(offcpu_only_attach_shows_in_every_file_format_unprivileged)
{
	offcpu_only_files(sleeper_recorded(1));
}

#ifdef SP_HAVE_CURL
/* report --otlp and --push to the loopback server: the bodies it took,
 * decoded by opentelemetry-proto and `go tool pprof`, show the wait. */
static void offcpu_only_push(const sleep_run *r)
{
	if (sp_test_run("python3 -c 'import opentelemetry.proto.collector.profiles."
	                "v1development.profiles_service_pb2' 2>/dev/null") != 0)
		sp_test_skip("python3 has no opentelemetry-proto (.ci/setup installs it)");
	if (!sp_test_have_program("go"))
		sp_test_skip("go is not installed (Debian golang-go)");
	char *out, *err, args[800], body[700];
	const char *dir = server_dir("push-otlp");
	int port = start_server(dir, "");
	snprintf(args, sizeof(args), "--otlp http://127.0.0.1:%d --app sleeper", port);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	CHECK(strstr(out, "pushed 0 samples, ") != NULL);
	free(out);
	free(err);
	char *s = summary(dir);
	CHECK(strncmp(s, "error ", 6) != 0 && strstr(s, "\nerror ") == NULL);
	CHECK(strstr(s, "\nsample_type wall/nanoseconds\n") != NULL);
	free(s);
	snprintf(body, sizeof(body), "%s/body-0", dir);
	CHECK(near(decoded_wait(r, "otlp", body, NULL), r, 1));

	dir = server_dir("push-pyroscope");
	port = start_server(dir, "--deadline 120");
	snprintf(args, sizeof(args), "--push http://127.0.0.1:%d --app sleeper", port);
	CHECK_EQ(report_sleep(r, args, &out, &err), 0);
	free(out);
	free(err);
	s = summary(dir);
	CHECK(strncmp(s, "error ", 6) != 0 && strstr(s, "\nerror ") == NULL);
	free(s);
	snprintf(body, sizeof(body), "%s/body-0.pb.gz", dir);
	CHECK(near(pprof_wait(r, body), r, 1));
}

SP_TEST(offcpu_only_attach_pushes)
{
	offcpu_only_push(sleeper_recorded(0));
}

SP_TEST(offcpu_only_attach_pushes_unprivileged)
{
	offcpu_only_push(sleeper_recorded(1));
}
#endif

/* A recording with off-CPU intervals switched on that holds neither a
 * sample nor an interval (a stopped process, attached without stopping
 * it, never runs nor switches) still fails, saying so. */
SP_TEST(offcpu_empty_recording_says_so)
{
	char record[512], cmd[4096], spool[600], log[600];
	tools(record, g_report, sizeof(record));
	if (geteuid() != 0)
		sp_test_skip("the context-switch event needs root (or CAP_PERFMON)");
	snprintf(spool, sizeof(spool), "%s/stopped.spool", sp_test_tmpdir());
	snprintf(log, sizeof(log), "%s/stopped.log", sp_test_tmpdir());
	snprintf(cmd, sizeof(cmd),
	         "sleep 60 & P=$!; kill -STOP $P; %s -p $P --off-cpu --attach=live -d 0.3 -o %s "
	         ">%s 2>&1; rc=$?; kill -KILL $P; wait $P 2>/dev/null; exit $rc",
	         record, spool, log);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	REQUIRE_EQ(stackpulse_spool_meta(sp)->samples, 0);
	REQUIRE_EQ(stackpulse_spool_meta(sp)->offcpu_intervals, 0);
	CHECK(stackpulse_spool_meta(sp)->off_cpu_method != STACKPULSE_OFFCPU_NONE);
	stackpulse_spool_close(sp);
	static const char *const args[] = { "", "--folded", "--time=cpu", "--svg x.svg" };
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		snprintf(cmd, sizeof(cmd), "cd %s && %s %s %s >%s 2>&1", sp_test_tmpdir(), g_report,
		         spool, args[i], log);
		CHECK_EQ(sp_test_run(cmd), 1);
		char *text = sp_test_read_file(log, NULL);
		REQUIRE(text != NULL);
		CHECK(strstr(text, "the recording holds no samples and no off-CPU intervals") !=
		      NULL);
		free(text);
	}
	snprintf(cmd, sizeof(cmd), "%s/x.svg", sp_test_tmpdir());
	CHECK(access(cmd, F_OK) != 0);
}
