#!/usr/bin/env python3
"""stackpulse benchmarks against perf and py-spy, side by side.

    python3 bench/run.py [--quick] [--runs N] [--out docs/benchmarks.md]

One command does it all: builds stackpulse (ReleaseFast, into a scratch
prefix so nobody's zig-out changes), compiles the workloads, runs every
phase with the tools interleaved run by run (so machine drift hits all of
them alike), and writes docs/benchmarks.md with medians and ratios. The
document is rewritten after every phase, so a cut run still leaves results.
Raw numbers go to $BENCH_TMP/results.json (default /tmp/stackpulse-bench).

Measures (see docs/benchmarks.md for the definitions):
  A  recording cost at 99/999/4000 Hz vs perf record --call-graph dwarf
  B  end-to-end CPU (record + report) and symbolization cold/warm
  C  accuracy: known shares and complete unwinds, every workload, both tools
  D  Python vs py-spy
  E  reader throughput and peak RSS vs spool size
  F  where our recorder's CPU goes (perf on the recorder itself)
  G  load: 4/16/64 busy threads x 999/4000 Hz, samples kept and lost, as
     root and as nobody (perf_event_mlock_kb rings)
  H  tail reader: sample-to-visible latency while recording, memory over
     long recordings
  I  push cost per rotation window: window close, read-back and profile,
     Pyroscope and OTLP push (wall, CPU, bytes) to a loopback sink
"""
import argparse
import datetime
import glob
import json
import mmap
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WL_DIR = os.path.join(ROOT, "bench", "workloads")
STACK = 32768
PY = os.path.realpath(sys.executable)  # not a pyenv shim: a real interpreter
TOOL_COMMS = {"perf", "record", "py-spy"}
ROOTS = {"main", "start_thread", "clone3", "__clone3", "clone", "__clone"}

# name -> (source, compiler, args in full mode, args in quick mode, comm,
#          expected self shares of leaf functions or None)
WORKLOADS = {
    "cpu_tree": ("cpu_tree.c", "gcc", ["700"], ["350"], "cpu_tree",
                 {"work_a": 0.5, "work_b": 0.3, "work_c": 0.2}),
    "threads4": ("threads4.c", "gcc", ["350"], ["175"], "threads4",
                 {"t_hot_a": 0.6, "t_hot_b": 0.4}),
    "forkexec": ("forkexec.c", "gcc", ["8", "60"], ["6", "40"], "forkexec",
                 {"child_work": 2 / 3, "parent_work": 1 / 3}),
    "recursion": ("recursion.c", "gcc", ["3500", "100"], ["1800", "100"], "recursion",
                  {"leaf_spin": 1.0}),
    "inline": ("inline.cpp", "g++", ["500"], ["250"], "inline", None),
    "busy": ("busy.c", "gcc", ["64", "5"], ["64", "3"], "busy", None),
    "pyshares": ("pyshares.py", None, ["100"], ["50"], os.path.basename(PY)[:15],
                 {"py_a": 0.5, "py_b": 0.3, "py_c": 0.2}),
}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- running

class Res:
    def __init__(self, rc, wall, cpu, maxrss_kb):
        self.rc, self.wall, self.cpu, self.maxrss_kb = rc, wall, cpu, maxrss_kb


def measure(cmd, env=None, stdout=None, stderr=None, timeout=300):
    """Runs cmd; returns its exit code, wall time, user+sys CPU of its whole
    waited-for process tree (wait4 rusage) and peak RSS."""
    # Peak RSS through /usr/bin/time: a child's ru_maxrss also counts the
    # RSS its parent had at fork (here, this script with perf.data mapped).
    rssf = None
    if os.path.exists("/usr/bin/time"):
        rssf = os.path.join(os.environ.get("BENCH_TMP", "/tmp/stackpulse-bench"), ".maxrss.%d" % os.getpid())
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rssf] + list(cmd)
    so = open(stdout, "wb") if stdout else subprocess.DEVNULL
    se = open(stderr, "wb") if stderr else subprocess.DEVNULL
    t0 = time.monotonic()
    try:
        p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=so, stderr=se,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        for f in (so, se):
            if f is not subprocess.DEVNULL:
                f.close()
    killed = []

    def kill():
        killed.append(1)
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    rc = p.returncode if not killed else -999
    maxrss = ru.ru_maxrss
    if rssf:
        try:
            with open(rssf) as f:
                maxrss = int(f.read().split()[-1])
        except (OSError, ValueError, IndexError):
            maxrss = None
    return Res(rc, time.monotonic() - t0, ru.ru_utime + ru.ru_stime, maxrss)


def tail(path, n=600):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-n:]
    except OSError:
        return ""


class Bench:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.runs = args.runs or (3 if args.quick else 5)
        self.tmp = os.environ.get("BENCH_TMP", "/tmp/stackpulse-bench")
        self.out = args.out
        self.data = {"phases": {}, "notes": [], "errors": {}}
        self.rec = self.rep = self.lib = None
        self.wl = {}
        self.started = time.time()

    # ------------------------------------------------------------ setup
    def setup(self):
        os.makedirs(self.tmp, exist_ok=True)
        for d in ("run", "wl", "cache"):
            shutil.rmtree(os.path.join(self.tmp, d), ignore_errors=True)
            os.makedirs(os.path.join(self.tmp, d))
        self.data["env"] = self.environment()
        self.compile_workloads()
        self.build_stackpulse()

    def environment(self):
        def out(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=30).stdout.strip().splitlines()[0]
            except Exception:
                return "unavailable"
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
            "perf": out(["perf", "--version"]),
            "py-spy": out(["py-spy", "--version"]),
            "python": out([PY, "--version"]),
            "gcc": out(["gcc", "--version"]),
            "git": out(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
            "command": " ".join(["python3", "bench/run.py"] + sys.argv[1:]),
        }

    def compile_workloads(self):
        for name, (src, cc, full, quick, comm, shares) in WORKLOADS.items():
            path = os.path.join(WL_DIR, src)
            if cc is None:
                self.wl[name] = [PY, path] + (quick if self.quick else full)
                continue
            exe = os.path.join(self.tmp, "wl", name)
            cmd = [cc, "-O2", "-fomit-frame-pointer", "-g", "-pthread", "-o", exe, path]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError("cannot compile %s: %s" % (src, r.stderr[-400:]))
            self.wl[name] = [exe] + (quick if self.quick else full)

    def build_stackpulse(self):
        prefix = os.path.join(self.tmp, "out")
        log("building stackpulse (ReleaseFast) into", prefix)
        r = subprocess.run([sys.executable, "-m", "ziglang", "build", "install", "examples",
                            "-Doptimize=ReleaseFast", "-p", prefix], cwd=ROOT,
                           capture_output=True, text=True, timeout=1200)
        self.data["build"] = {"rc": r.returncode, "stderr": r.stderr[-1500:]}
        if r.returncode:
            self.data["notes"].append("`zig build -Doptimize=ReleaseFast` failed: "
                                      + r.stderr.strip().splitlines()[-1][:200]
                                      if r.stderr.strip() else "zig build failed")
        lib = os.path.join(prefix, "lib", "libstackpulse.a")
        self.lib = lib if os.path.exists(lib) else None
        libs = ["-lzstd", "-lelf", "-ldw", "-lunwind", "-lz", "-lunwind-x86_64",
                "-lpthread", "-lstdc++"]
        pc = os.path.join(prefix, "lib", "pkgconfig", "stackpulse.pc")
        if os.path.exists(pc):
            text = open(pc).read()
            m = re.search(r"^Libs.private:(.*)$", text, re.M)
            if m:
                # The system libraries are in Requires.private (pkg-config
                # names), not in Libs.private: keep the -l list for them.
                req = re.search(r"^Requires.private:(.*)$", text, re.M)
                libs = m.group(1).split() + (libs if req else ["-lpthread", "-lstdc++"])
        for tool in ("record", "report"):
            exe = os.path.join(prefix, "bin", tool)
            how = "zig build examples (ReleaseFast)"
            if not os.path.exists(exe) and self.lib:
                # Not registered in the build yet: same source, same release lib.
                exe = os.path.join(self.tmp, "out", tool + "-bench")
                r2 = subprocess.run(["gcc", "-O2", "-I", os.path.join(ROOT, "include"),
                                     "-I", os.path.join(ROOT, "examples"), "-o", exe,
                                     os.path.join(ROOT, "examples", tool + ".c"), self.lib]
                                    + libs, capture_output=True, text=True)
                how = "gcc -O2 examples/%s.c + ReleaseFast libstackpulse.a" % tool
                if r2.returncode:
                    self.data["notes"].append("cannot build %s: %s" % (tool, r2.stderr[-300:]))
                    exe = None
            if exe and os.path.exists(exe):
                setattr(self, "rec" if tool == "record" else "rep", exe)
                self.data.setdefault("tools", {})[tool] = how
        def build_bench(name, extra=()):
            """bench/NAME.c against the library (internal headers too), or None."""
            if not self.lib:
                return None
            exe = os.path.join(self.tmp, "out", name)
            r = subprocess.run(["gcc", "-O2", "-std=c17", "-D_GNU_SOURCE",
                                "-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "src")]
                               + list(extra) +
                               ["-o", exe, os.path.join(ROOT, "bench", name + ".c"),
                                self.lib] + libs, capture_output=True, text=True)
            if r.returncode:
                self.data["notes"].append(name + " build failed: " + r.stderr[-300:])
            return exe if r.returncode == 0 else None
        self.reader = build_bench("reader_throughput")
        self.flood = build_bench("flood", ("-I", os.path.join(ROOT, "tests")))
        self.tailb = build_bench("tail_latency")
        self.pushb = build_bench("push_cost", ("-pthread",))
        # A recorder driver without embedded symbol tables (symbolization timing).
        self.noembed = None
        if self.lib:
            exe = os.path.join(self.tmp, "out", "record_noembed")
            r5 = subprocess.run(["gcc", "-O2", "-std=c17", "-D_GNU_SOURCE", "-I" + os.path.join(ROOT, "include"),
                                 "-o", exe, os.path.join(ROOT, "bench", "record_noembed.c"), self.lib] + libs,
                                capture_output=True, text=True)
            self.noembed = exe if r5.returncode == 0 else None
            if r5.returncode:
                self.data["notes"].append("record_noembed build failed: " + r5.stderr[-300:])
        # The unwind engineer's micro benchmark (bench/unwind_cost.c), same lib.
        self.unwind_cost = None
        if self.lib:
            exe = os.path.join(self.tmp, "out", "unwind_cost")
            r4 = subprocess.run(["gcc", "-O2", "-std=c17", "-D_GNU_SOURCE"] +
                                ["-I" + os.path.join(ROOT, x) for x in ("include", "src", "tests/unwind")] +
                                ["-o", exe, os.path.join(ROOT, "bench", "unwind_cost.c"), self.lib] + libs,
                                capture_output=True, text=True)
            self.unwind_cost = exe if r4.returncode == 0 else None

    # ------------------------------------------------------------ one run
    def run_tool(self, tool, wl, hz, tag, keep=False):
        """Runs workload wl under tool ('base', 'perf', 'sp', 'pyspy').
        Returns a dict of target wall/cpu, recorder cpu, samples, lost, bytes,
        and 'file' when keep is set."""
        d = os.path.join(self.tmp, "run")
        rep = os.path.join(d, tag + ".rep")
        err = os.path.join(d, tag + ".err")
        for p in (rep,):
            if os.path.exists(p):
                os.unlink(p)
        env = dict(os.environ, BENCH_REPORT=rep)
        cmd = self.wl[wl]
        out = None
        if tool == "base":
            full = cmd
        elif tool == "perf":
            out = os.path.join(d, tag + ".perf.data")
            full = ["perf", "record", "-e", "cpu-clock", "-F", hz, "--call-graph",
                    "dwarf,%d" % STACK, "-o", out, "--"] + cmd
        elif tool in ("sp", "spnok", "spnopause"):
            if not self.rec:
                raise NotReady("record example not built yet")
            out = os.path.join(d, tag + ".spool")
            full = [self.rec, "-F", hz, "-s", STACK, "-o", out]
            if tool == "spnok":
                full.append("--kernel=off")
            if tool == "spnopause":
                full.append("--python-pause=off")
            if wl == "pyshares" or wl.startswith("pyshapes"):
                full.append("--python=on")
            full += ["--"] + cmd
        elif tool == "spraw":
            if not self.noembed:
                raise NotReady("record_noembed not built")
            out = os.path.join(d, tag + ".spool")
            full = [self.noembed, "-F", hz, "-s", STACK, "-o", out, "--"] + cmd
        elif tool == "pyspy":
            out = os.path.join(d, tag + ".pyspy.txt")
            full = ["py-spy", "record", "-r", hz, "-f", "raw", "-o", out, "--"] + cmd
        r = measure(full, env=env, stderr=err)
        if r.rc != 0:
            raise RuntimeError("%s on %s exited %s: %s" % (tool, wl, r.rc, tail(err, 400)))
        try:
            vals = [float(x) for x in open(rep).read().split()]
            wall, tcpu = vals[0], vals[1]
            rqw = vals[2] if len(vals) > 2 else None
        except (OSError, ValueError):
            raise RuntimeError("%s on %s: the workload wrote no report (%s)" % (tool, wl, tail(err, 300)))
        res = {"iter": int(re.sub(r".*-", "", tag)) if re.search(r"-\d+$", tag) else None,
               "phase_cpu": vals[3:6] if len(vals) >= 6 else None,
               "wall": wall, "tcpu": tcpu, "oncpu_wall": wall - rqw if rqw is not None else None, "rec_cpu": max(r.cpu - tcpu, 0.0) if tool != "base" else 0.0,
               "rec_maxrss_kb": r.maxrss_kb}
        if out:
            res["bytes"] = os.path.getsize(out)
            if tool == "perf":
                res["samples"], res["lost"] = perf_counts(out)
            elif tool in ("sp", "spnok", "spraw", "spnopause"):
                m = re.search(r"record: (\d+) samples \((\d+) lost\)", tail(err, 4000))
                if not m:
                    raise RuntimeError("no summary from record: " + tail(err, 300))
                res["samples"], res["lost"] = int(m.group(1)), int(m.group(2))
            elif tool == "pyspy":
                m = re.search(r"Samples: (\d+) Errors: (\d+)", tail(err, 4000))
                res["samples"] = int(m.group(1)) if m else sum_counts(out)
                res["lost"] = int(m.group(2)) if m else None
            res["yield"] = res["samples"] / (float(hz) * tcpu) if tcpu > 0 else None
            if keep:
                res["file"] = out
            else:
                os.unlink(out)
        for p in (rep, err):
            if os.path.exists(p):
                os.unlink(p)
        return res

    # ------------------------------------------------------------ phases
    def phase_recording(self):
        """A (+B, C for cpu_tree/threads4): interleaved runs per iteration."""
        rates = ["99", "999", "4000"]
        wls = ["cpu_tree", "threads4"]
        P = self.data["phases"].setdefault("recording", {})
        E = self.data["phases"].setdefault("e2e", {"perf": [], "sp": []})
        ACC = self.data["phases"].setdefault("accuracy", {})
        for i in range(self.runs):
            for wl in wls:
                log("recording: run %d/%d %s" % (i + 1, self.runs, wl))
                slot = P.setdefault(wl, {})
                slot.setdefault("base", []).append(dict(self.run_tool("base", wl, "0", "%s-base" % wl), iter=i))
                for hz in rates:
                    for tool in ("perf", "sp"):
                        key = "%s@%s" % (tool, hz)
                        keep = hz == "999"
                        try:
                            r = self.run_tool(tool, wl, hz, "%s-%s-%s-%d" % (wl, tool, hz, i), keep=keep)
                        except NotReady as e:
                            slot[key] = str(e)
                            continue
                        except Exception as e:
                            self.error("recording %s %s" % (wl, key), e)
                            continue
                        if isinstance(slot.get(key), str):
                            slot[key] = []
                        slot.setdefault(key, []).append(r)
                        if keep:
                            self.postprocess(tool, wl, r, i, E if wl == "cpu_tree" else None, ACC)
                    if hz == "999" and wl == "cpu_tree":
                        # Symbolization from the binaries and the cache (no embedded tables).
                        try:
                            r = self.run_tool("spraw", wl, hz, "%s-spraw-%d" % (wl, i), keep=True)
                            self.postprocess("spraw", wl, r, i, E, ACC)
                        except NotReady:
                            pass
                        except Exception as e:
                            self.error("recording %s spraw" % wl, e)
            self.write_doc()

    def postprocess(self, tool, wl, r, i, e2e, acc):
        """For a kept 999 Hz file: report/script CPU (end-to-end) and accuracy."""
        f = r.pop("file")
        d = os.path.join(self.tmp, "run")
        try:
            if tool == "perf":
                row = {"record": r["rec_cpu"], "samples": r["samples"]}
                rr = measure(["perf", "report", "--stdio", "-i", f], stdout=os.path.join(d, "perf.report"),
                             stderr=os.path.join(d, "perf.report.err"))
                row["report"] = rr.cpu if rr.rc == 0 else None
                script = os.path.join(d, "perf.script")
                rs = measure(["perf", "script", "-F", "comm,tid,ip,sym,dso", "-i", f], stdout=script,
                             stderr=os.path.join(d, "perf.script.err"))
                row["script"] = rs.cpu if rs.rc == 0 else None
                if e2e is not None:
                    e2e["perf"].append(row)
                if i == 0 or wl not in acc.get("perf", {}):
                    acc.setdefault("perf", {})[wl] = accuracy(parse_perf_script(script), WORKLOADS[wl][4],
                                                              WORKLOADS[wl][5])
            else:
                row = {"record": r["rec_cpu"], "samples": r["samples"]}
                cache = os.path.join(self.tmp, "cache", "%s-%d" % (wl, i))
                shutil.rmtree(cache, ignore_errors=True)
                os.makedirs(cache)
                env = dict(os.environ, STACKPULSE_SYMBOL_CACHE_DIR=cache)
                if self.rep:
                    cold = measure([self.rep, f], env=env, stdout=os.path.join(d, "sp.report"),
                                   stderr=os.path.join(d, "sp.report.err"))
                    warm = measure([self.rep, f], env=env, stdout=os.path.join(d, "sp.report"),
                                   stderr=os.path.join(d, "sp.report.err"))
                    row["report"] = cold.cpu if cold.rc == 0 else None
                    row["report_warm"] = warm.cpu if warm.rc == 0 else None
                    if cold.rc:
                        self.error("report %s" % wl, RuntimeError(tail(os.path.join(d, "sp.report.err"), 300)))
                    folded = os.path.join(d, "sp.folded")
                    rf = measure([self.rep, f, "--folded"], env=env, stdout=folded,
                                 stderr=os.path.join(d, "sp.folded.err"))
                    row["folded"] = rf.cpu if rf.rc == 0 else None
                    if tool == "sp" and rf.rc == 0 and (i == 0 or wl not in acc.get("sp", {})):
                        acc.setdefault("sp", {})[wl] = accuracy(parse_folded(folded), WORKLOADS[wl][4],
                                                                WORKLOADS[wl][5])
                row["bytes_per_sample"] = r["bytes"] / r["samples"] if r.get("samples") else None
                if e2e is not None:
                    e2e.setdefault(tool, []).append(row)
        finally:
            if os.path.exists(f):
                os.unlink(f)

    def run_load(self, tool, nthr, hz, secs, tag):
        """One load run: busy NTHR threads for SECS s under tool ('perf',
        'sp', 'spbase': the --base-record recorder, 'spprev': the
        --prev-record recorder; '-nobody' suffix: as
        user nobody, within perf_event_mlock_kb)."""
        nobody = tool.endswith("-nobody")
        base_tool = tool[:-len("-nobody")] if nobody else tool
        d = os.path.join(self.tmp, "pub")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o1777)
        rep = os.path.join(d, tag + ".rep")
        err = os.path.join(self.tmp, "run", tag + ".err")
        for p in (rep,):
            if os.path.exists(p):
                os.unlink(p)
        env = dict(os.environ, BENCH_REPORT=rep)
        cmd = [self.wl["busy"][0], nthr, secs]
        if base_tool == "perf":
            out = os.path.join(d, tag + ".perf.data")
            full = ["perf", "record", "-e", "cpu-clock:u" if nobody else "cpu-clock", "-F", hz,
                    "--call-graph", "dwarf,%d" % STACK, "-o", out, "--"] + cmd
        else:
            exe = {"sp": self.rec, "spbase": self.args.base_record,
                   "spprev": self.args.prev_record}[base_tool]
            out = os.path.join(d, tag + ".spool")
            full = [exe, "-F", hz, "-s", STACK, "-o", out, "--"] + cmd
        if nobody:
            full = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + full
        r = measure(full, env=env, stderr=err)
        if r.rc != 0:
            raise RuntimeError("%s on busy %s exited %s: %s" % (tool, nthr, r.rc, tail(err, 400)))
        wall, tcpu = [float(x) for x in open(rep).read().split()][:2]
        res = {"tool": tool, "threads": int(nthr), "hz": int(hz), "tcpu": tcpu, "wall": wall,
               "rec_cpu": max(r.cpu - tcpu, 0.0), "rec_maxrss_kb": r.maxrss_kb}
        if base_tool == "perf":
            res["samples"], res["lost"] = perf_counts(out)
        else:
            m = re.search(r"record: (\d+) samples \((\d+) lost\)", tail(err, 4000))
            if not m:
                raise RuntimeError("no summary from record: " + tail(err, 300))
            res["samples"], res["lost"] = int(m.group(1)), int(m.group(2))
            if self.rep:
                folded = os.path.join(self.tmp, "run", tag + ".folded")
                rf = measure([self.rep, out, "--folded"], stdout=folded)
                if rf.rc == 0:
                    res["complete"] = accuracy(parse_folded(folded), "busy", None)["complete"]
                    os.unlink(folded)
        res["expected"] = tcpu * float(hz)
        os.unlink(out)
        for p in (rep, err):
            if os.path.exists(p):
                os.unlink(p)
        return res

    def phase_load(self):
        """G: many busy threads on few CPUs, perf and stackpulse interleaved."""
        L = self.data["phases"]["load"] = {"rows": [], "secs": None}
        secs = self.wl["busy"][2]
        L["secs"] = float(secs)
        n = 1 if self.quick else 2
        tools = ["perf", "sp"] + (["spbase"] if self.args.base_record else []) + \
            (["spprev"] if self.args.prev_record else [])
        nobody = os.geteuid() == 0 and shutil.which("setpriv")
        for i in range(n):
            for nthr in ("4", "16", "64"):
                for hz in ("999", "4000"):
                    ts = list(tools)
                    if nobody and nthr == "64":
                        # Unprivileged rings are the same in every build but the base.
                        ts += [t + "-nobody" for t in tools if t != "spprev"]
                    for tool in ts:
                        tag = "load-%s-%s-%s-%d" % (tool, nthr, hz, i)
                        try:
                            L["rows"].append(self.run_load(tool, nthr, hz, secs, tag))
                        except Exception as e:
                            self.error("load %s %s x %s Hz" % (tool, nthr, hz), e)
                    self.write_doc()

    def phase_accuracy(self):
        """C for the other native workloads: slowdown and accuracy at 999 Hz."""
        P = self.data["phases"].setdefault("others", {})
        ACC = self.data["phases"].setdefault("accuracy", {})
        n = 1 if self.quick else min(3, self.runs)
        for wl in ("forkexec", "recursion", "inline"):
            slot = P.setdefault(wl, {})
            for i in range(n):
                log("accuracy: %s run %d/%d" % (wl, i + 1, n))
                slot.setdefault("base", []).append(dict(self.run_tool("base", wl, "0", wl + "-base"), iter=i))
                for tool in ("perf", "sp"):
                    try:
                        r = self.run_tool(tool, wl, "999", "%s-%s-%d" % (wl, tool, i), keep=(i == 0))
                    except NotReady as e:
                        slot[tool] = str(e)
                        continue
                    except Exception as e:
                        self.error("accuracy %s %s" % (wl, tool), e)
                        continue
                    slot.setdefault(tool, []).append(r)
                    if i == 0:
                        self.postprocess(tool, wl, r, 0, None, ACC)
            if wl == "inline":
                self.inline_perf(slot)
            self.write_doc()

    def inline_perf(self, slot):
        """perf script --inline on the inline workload (slow: addr2line)."""
        if self.quick:
            return
        d = os.path.join(self.tmp, "run")
        try:
            r = self.run_tool("perf", "inline", "999", "inline-perf-inl", keep=True)
            f = r.pop("file")
            script = os.path.join(d, "perf.inline.script")
            rs = measure(["perf", "script", "--inline", "-F", "comm,tid,ip,sym,dso", "-i", f], stdout=script,
                         stderr=os.path.join(d, "perf.inline.err"), timeout=240)
            os.unlink(f)
            if rs.rc == 0:
                a = accuracy(parse_perf_script(script), "inline", None)
                a["script_cpu"] = rs.cpu
                self.data["phases"]["accuracy"].setdefault("perf_inline", {})["inline"] = a
            else:
                self.data["notes"].append("perf script --inline did not finish in 240 s (rc %s)" % rs.rc)
        except Exception as e:
            self.error("perf script --inline", e)

    def phase_python(self):
        P = self.data["phases"].setdefault("python", {})
        ACC = self.data["phases"].setdefault("accuracy", {})
        rates = ["999"] if self.quick else ["99", "999"]
        for i in range(self.runs):
            log("python: run %d/%d" % (i + 1, self.runs))
            P.setdefault("base", []).append(dict(self.run_tool("base", "pyshares", "0", "py-base"), iter=i))
            for hz in rates:
                for tool in ("pyspy", "sp", "spnok"):
                    key = "%s@%s" % (tool, hz)
                    try:
                        r = self.run_tool(tool, "pyshares", hz, "py-%s-%s-%d" % (tool, hz, i),
                                          keep=(hz == "999" and tool != "spnok"))
                    except NotReady as e:
                        P[key] = str(e)
                        continue
                    except Exception as e:
                        self.error("python %s" % key, e)
                        continue
                    if isinstance(P.get(key), str):
                        P[key] = []
                    P.setdefault(key, []).append(r)
                    if "file" in r:
                        f = r.pop("file")
                        try:
                            if tool == "pyspy":
                                stacks = parse_pyspy(f)
                            else:
                                folded = os.path.join(self.tmp, "run", "py.folded")
                                rf = measure([self.rep, f, "--folded"], stdout=folded,
                                             stderr=folded + ".err")
                                stacks = parse_folded(folded) if rf.rc == 0 else []
                            a = accuracy_py(stacks, WORKLOADS["pyshares"][5])
                            ACC.setdefault("py_" + tool, []).append(a)
                        finally:
                            os.unlink(f)
            self.write_doc()

    def phase_pyshapes(self):
        """Generator, asyncio and C-call phases (workloads/pyshapes.py) on
        every CPython here, py-spy and us side by side: how many samples
        carry a complete Python chain, and the per-function shares."""
        P = self.data["phases"]["pyshapes"] = {}
        path = os.path.join(WL_DIR, "pyshapes.py")
        rounds = 10 if self.quick else 20
        for interp in pythons():
            ver = subprocess.run([interp, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                 capture_output=True, text=True).stdout.strip()
            label = "%s (%s)" % (ver, "Debian" if interp.startswith("/usr/") else "pyenv")
            E = P.setdefault(label, {})
            for hz in ("199", "999"):
                # 199 Hz runs 4x the work: about as many samples as at 999 Hz,
                # so per-function shares are compared with the same noise.
                wl = "pyshapes-" + ver + ("d" if interp.startswith("/usr/") else "") + "-" + hz
                self.wl[wl] = [interp, path, str(rounds * 4 if hz == "199" else rounds)]
                for i in range(max(1, self.runs // 2)):
                    for tool in ("pyspy", "sp", "spnopause"):
                        log("pyshapes: %s %s Hz %s run %d" % (label, hz, tool, i + 1))
                        key = "%s@%s" % (tool, hz)
                        try:
                            r = self.run_tool(tool, wl, hz, "pyshapes-%s-%s-%d" % (tool, hz, i), keep=True)
                        except Exception as e:
                            self.error("pyshapes %s %s" % (label, key), e)
                            continue
                        f = r.pop("file")
                        try:
                            if tool == "pyspy":
                                stacks = parse_pyspy(f)
                            else:
                                folded = os.path.join(self.tmp, "run", "pyshapes.folded")
                                rf = measure([self.rep, f, "--folded"], stdout=folded,
                                             stderr=folded + ".err")
                                stacks = parse_folded(folded) if rf.rc == 0 else []
                            r["shapes"] = py_chains(stacks)
                        finally:
                            os.unlink(f)
                        E.setdefault(key, []).append(r)
            self.write_doc()

    def phase_reader(self):
        if not self.reader:
            self.data["phases"]["reader"] = "reader_throughput not built: library missing"
            return
        P = self.data["phases"].setdefault("reader", {})
        sizes = [100000, 1000000] if self.quick else [100000, 1000000, 4000000, 16000000]
        d = os.path.join(self.tmp, "run")
        for n in sizes:
            path = os.path.join(d, "synthetic-%d.spool" % n)
            log("reader: %d samples" % n)
            g = measure([self.reader, "gen", path, n], stderr=path + ".err", timeout=600)
            if g.rc:
                self.error("reader gen %d" % n, RuntimeError(tail(path + ".err")))
                continue
            rows = []
            for _ in range(self.runs):
                outp = path + ".out"
                r = measure([self.reader, "read", path], stdout=outp, stderr=path + ".err")
                if r.rc:
                    self.error("reader read %d" % n, RuntimeError(tail(path + ".err")))
                    break
                kv = dict(x.split("=") for x in open(outp).read().split())
                rows.append({"maxrss_kb": r.maxrss_kb, "cpu": r.cpu,
                             "total_per_s": float(kv["total_per_s"]), "iter_per_s": float(kv["iter_per_s"]),
                             "open_s": float(kv["open_s"])})
            P[str(n)] = {"bytes": os.path.getsize(path), "runs": rows}
            os.unlink(path)
        self.write_doc()

    def phase_hostile(self):
        """Hash-flood and amplification spools (bench/flood.c): CPU time and
        peak RSS against input size, each case in its own process."""
        if not getattr(self, "flood", None):
            self.data["phases"]["hostile"] = "flood not built: library missing"
            return
        P = self.data["phases"].setdefault("hostile", {"flood": {}, "amplify": {}})
        d = os.path.join(self.tmp, "run")
        outp = os.path.join(d, "flood.out")
        sizes = [16384, 32768, 65536] if self.quick else [16384, 32768, 65536, 131072]
        for n in sizes:
            for kind in ("random", "crafted"):
                log("hostile: flood %d %s" % (n, kind))
                rows = []
                for _ in range(self.runs):
                    r = measure([self.flood, "flood", n, kind], stdout=outp, timeout=600)
                    if r.rc:
                        self.error("flood %d %s" % (n, kind), RuntimeError("rc %d" % r.rc))
                        break
                    x = open(outp).read().split()
                    rows.append({"open_s": float(x[3]), "profile_s": float(x[4]),
                                 "maxrss_kb": r.maxrss_kb})
                P["flood"]["%d %s" % (n, kind)] = rows
        for depth in [128, 256, 512, 1023]:
            log("hostile: amplify depth %d" % depth)
            rows = []
            for _ in range(self.runs):
                r = measure([self.flood, "amplify", depth], stdout=outp, timeout=600)
                if r.rc:
                    self.error("amplify %d" % depth, RuntimeError("rc %d" % r.rc))
                    break
                x = open(outp).read().split()
                rows.append({"spool": int(x[2]), "out": int(x[3]), "export_s": float(x[4]),
                             "rc": int(x[6]), "maxrss_kb": r.maxrss_kb})
            P["amplify"][str(depth)] = rows
    def phase_tail(self):
        """H: the tail reader. Latency: `busy 2` recorded at 999 Hz for 10 s
        by the recorder API in one process, tailed every 10 ms from another;
        per chunk size, medians over the runs of each run's p50/p99. Memory:
        synthetic recordings of 10 and 60 minutes tailed while written."""
        if not self.tailb:
            self.data["phases"]["tail"] = "tail_latency not built: library missing"
            return
        P = self.data["phases"]["tail"] = {"latency": {}, "memory": {}}
        busy = self.wl["busy"][0]
        d = os.path.join(self.tmp, "run")
        outp = os.path.join(d, "tail.out")
        for chunk in (1048576, 16384):
            rows = []
            for _ in range(self.runs):
                log("tail latency: chunk_bytes %d" % chunk)
                r = measure([self.tailb, "live", "10", chunk, busy, "2", "12"], stdout=outp,
                            stderr=outp + ".err", timeout=120)
                if r.rc:
                    self.error("tail live %d" % chunk, RuntimeError(tail(outp + ".err")))
                    break
                rows.append(dict(x.split("=") for x in open(outp).read().split()))
            P["latency"][str(chunk)] = rows
        for minutes in ((10,) if self.quick else (10, 60)):
            log("tail memory: %d minutes" % minutes)
            r = measure([self.tailb, "memory", minutes], stdout=outp, stderr=outp + ".err",
                        timeout=900)
            if r.rc:
                self.error("tail memory %d" % minutes, RuntimeError(tail(outp + ".err")))
                continue
            kv = dict(x.split("=") for x in open(outp).read().split())
            kv["maxrss_kb"] = r.maxrss_kb
            P["memory"][str(minutes)] = kv
        self.write_doc()

    def phase_push(self):
        """I: push cost per window. `busy 4` at 99 and 999 Hz and
        pyshares.py (Python frames) at 999 Hz, recorded by the recorder API
        with 10 s windows; each window read back, symbolized and pushed as
        Pyroscope and as OTLP to a loopback sink (bench/push_cost.c). The
        last window (cut by finish) is left out."""
        if not self.pushb:
            self.data["phases"]["push"] = "push_cost not built: library missing"
            return
        P = self.data["phases"]["push"] = {}
        secs = 30 if self.quick else 60
        d = os.path.join(self.tmp, "run")
        outp = os.path.join(d, "push.out")
        configs = (("busy 4", 99, [self.wl["busy"][0], "4", secs + 5]),
                   ("busy 4", 999, [self.wl["busy"][0], "4", secs + 5]),
                   ("pyshares.py", 999, [PY, os.path.join(WL_DIR, "pyshares.py"), "100000"]))
        for i, (name, hz, cmd) in enumerate(configs):
            log("push cost: %s at %d Hz, %d s in 10 s windows" % (name, hz, secs))
            r = measure([self.pushb, secs, 10, hz] + cmd, stdout=outp,
                        stderr=outp + ".err", timeout=secs + 120)
            if r.rc:
                self.error("push %s %d" % (name, hz), RuntimeError(tail(outp + ".err")))
                continue
            rows = [dict(x.split("=") for x in ln.split()) for ln in open(outp) if ln.startswith("window=")]
            P[str(i)] = {"workload": name, "hz": hz, "secs": secs,
                         "windows": rows[:-1] if len(rows) > 1 else rows}
        self.write_doc()

    def phase_selfprofile(self):
        """F: where our recorder's CPU goes. perf 6.1 cannot do it here (perf
        record/report abort in util/build-id.c on a process that maps perf
        rings), so stackpulse records itself: an outer record -F 1999 over the
        inner record and its target."""
        if self.quick or not self.rec or not self.rep:
            return
        out = self.data["phases"]["selfprofile"] = {}
        for label, hz, wl, extra in (("threads4, record -F 4000", "4000", "threads4", []),
                                     ("pyshares.py, record -F 999 --python=on", "999", "pyshares",
                                      ["--python=on"])):
            log("self-profile of the recorder:", label)
            try:
                out[label] = self.selfprofile_one(hz, wl, extra)
            except Exception as e:
                self.error("self-profile " + label, e)
        self.write_doc()

    def selfprofile_one(self, hz, wl, extra):
        d = os.path.join(self.tmp, "run")
        outer, inner = os.path.join(d, "outer.spool"), os.path.join(d, "inner.spool")
        r = measure([self.rec, "-F", "1999", "-o", outer, "--",
                     self.rec, "-F", hz, "-s", STACK] + extra + ["-o", inner, "--"] + self.wl[wl],
                    stderr=os.path.join(d, "self.err"))
        if r.rc:
            raise RuntimeError(tail(os.path.join(d, "self.err")))
        folded = os.path.join(d, "self.folded")
        rf = measure([self.rep, outer, "--folded", "--pid"], stdout=folded, stderr=folded + ".err")
        if rf.rc:
            raise RuntimeError("report: " + tail(folded + ".err"))
        name = os.path.basename(self.rec)[:15] + "-"
        selfc, total, n = {}, {}, 0
        with open(folded, errors="replace") as f:
            for line in f:
                stack, _, cnt = line.rstrip("\n").rpartition(" ")
                if not stack.startswith(name):
                    continue
                c = int(cnt)
                fr = stack.split(";")[1:]
                n += c
                if fr:
                    selfc[fr[-1]] = selfc.get(fr[-1], 0) + c
                for x in set(fr):
                    total[x] = total.get(x, 0) + c
        for p in (outer, inner):
            if os.path.exists(p):
                os.unlink(p)
        if not n:
            return ["no recorder samples found"]

        def top(dct, k):
            return sorted(dct.items(), key=lambda kv: -kv[1])[:k]
        lines = ["recorder samples: %d (at 1999 Hz: %.3f s of CPU)" % (n, n / 1999.0), "", "self:"]
        lines += ["  %5.1f%%  %s" % (100.0 * v / n, k) for k, v in top(selfc, 10)]
        lines += ["", "total (inclusive):"]
        lines += ["  %5.1f%%  %s" % (100.0 * v / n, k) for k, v in top(total, 28)
                  if k not in ("_start", "__libc_start_main_impl", "__libc_start_call_main")]
        return lines

    def phase_unwind(self):
        """The unwinder alone: bench/unwind_cost (owned by the unwind engineer)."""
        if not self.unwind_cost:
            return
        log("unwind_cost")
        r = subprocess.run([self.unwind_cost, ROOT, "10" if self.quick else "30"],
                           capture_output=True, text=True, timeout=300)
        self.data["phases"]["unwind"] = r.stdout.strip().splitlines() or [r.stderr.strip()[-300:]]

    def error(self, what, e):
        msg = "%s: %s" % (type(e).__name__, str(e).strip().replace("\n", " ")[:300])
        log("ERROR", what, msg)
        self.data["errors"].setdefault(what, msg)

    # ------------------------------------------------------------ doc
    def write_doc(self):
        self.data["elapsed_s"] = time.time() - self.started
        self.data["env"]["loadavg_end"] = os.getloadavg()
        with open(os.path.join(self.tmp, "results.json"), "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        import report_md  # noqa: E402  (bench/report_md.py)
        text = report_md.render(self.data, self)
        tmp = self.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.out)


class NotReady(Exception):
    pass


# ---------------------------------------------------------------- parsing

def perf_counts(path):
    """(samples, lost) straight from perf.data: SAMPLE records, and the
    counts in LOST and LOST_SAMPLES records (what `perf report --stats`
    shows, without its cost on big files)."""
    samples = lost = lost_samples = 0
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            magic, hsize, attr_size = struct.unpack_from("<8sQQ", mm, 0)
            data_off, data_size = struct.unpack_from("<QQ", mm, 40)
            pos, end = data_off, data_off + data_size
            while pos + 8 <= end:
                typ, misc, size = struct.unpack_from("<IHH", mm, pos)
                if size < 8:
                    break
                if typ == 9:
                    samples += 1
                elif typ == 2:
                    lost += struct.unpack_from("<Q", mm, pos + 16)[0]
                elif typ == 13:
                    lost_samples += struct.unpack_from("<Q", mm, pos + 8)[0]
                pos += size
        finally:
            mm.close()
    # LOST_SAMPLES (written at the end from the kernel's lost counter) counts
    # the same samples as the LOST records of the ring: not a sum.
    return samples, max(lost, lost_samples)


FRAME_RE = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\(([^()]*)\)\s*$")


def parse_perf_script(path):
    """perf script -F comm,tid,ip,sym,dso -> [(comm, [user frames root first])]."""
    out = []
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    out.append((comm, frames[::-1]))
                comm, frames = None, []
                continue
            if line[0] not in " \t":
                if comm is not None:
                    out.append((comm, frames[::-1]))
                m = re.match(r"^(.*?)\s+\d+\s*$", line.rstrip("\n"))
                comm, frames = (m.group(1).strip() if m else line.split()[0]), []
                continue
            m = FRAME_RE.match(line.rstrip("\n"))
            if not m:
                continue
            sym, dso = m.group(2), m.group(3)
            if "kernel.kallsyms" in dso or dso.startswith("[kernel"):
                continue
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
            out_sym = sym.split("(")[0] if "(" in sym and not sym.startswith("(") else sym
            frames.append(out_sym)
    if comm is not None:
        out.append((comm, frames[::-1]))
    return out


def parse_folded(path):
    """report --folded -> [(comm, [user frames root first])], one per sample."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, cnt = line.rpartition(" ")
            try:
                n = int(cnt)
            except ValueError:
                continue
            parts = stack.split(";")
            comm = re.sub(r"(-\d+)?(/\d+)?$", "", parts[0])
            frames = [p for p in parts[1:] if not p.endswith("_[k]")]
            frames = [p if PY_FRAME.search(p) or p.startswith("(") or "(" not in p
                      else p.split("(")[0] for p in frames]
            for _ in range(n):
                out.append((comm, frames))
    return out


def parse_pyspy(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            stack, _, cnt = line.rstrip("\n").rpartition(" ")
            try:
                n = int(cnt)
            except ValueError:
                continue
            frames = stack.split(";")
            for _ in range(n):
                out.append(("python", frames))
    return out


def sum_counts(path):
    return len(parse_pyspy(path))


def accuracy(stacks, comm, expected):
    """Shares of leaf functions and complete-unwind fraction for the
    workload's samples (its comm; the tools' own samples excluded)."""
    mine = [fr for c, fr in stacks if c == comm[:15]]
    if not mine:
        mine = [fr for c, fr in stacks if c not in TOOL_COMMS]
    n = len(mine)
    leaf = {}
    complete = 0
    inline_hits = 0
    for fr in mine:
        lf = fr[-1] if fr else "[no user frames]"
        leaf[lf] = leaf.get(lf, 0) + 1
        if any(x in ROOTS for x in fr):
            complete += 1
        if any(("Mixer" in x or "Accum" in x or "rotl" in x) for x in fr):
            inline_hits += 1
    res = {"samples": n, "complete": complete / n if n else None,
           "inline_frac": inline_hits / n if n else None,
           "top": sorted(leaf.items(), key=lambda kv: -kv[1])[:6]}
    if expected:
        res["shares"] = {k: leaf.get(k, 0) / n if n else None for k in expected}
        res["err"] = {k: abs(res["shares"][k] - v) if n else None for k, v in expected.items()}
    return res


def accuracy_py(stacks, expected):
    """Python leaf shares: the innermost Python frame of each sample."""
    n = 0
    leaf = {}
    complete = 0
    for _, fr in stacks:
        py = [x for x in fr if re.search(r"\(.*\.py(:\d+)?\)$", x) or x.endswith(".py)")]
        py = [x.split(" (")[0] for x in py]
        n += 1
        if py:
            leaf[py[-1]] = leaf.get(py[-1], 0) + 1
            if "<module>" in py:
                complete += 1
    res = {"samples": n, "with_python": sum(leaf.values()),
           "complete": complete / n if n else None,
           "in_expected": sum(leaf.get(k, 0) for k in expected) / n if n else None}
    m = sum(leaf.get(k, 0) for k in expected)
    res["shares"] = {k: leaf.get(k, 0) / m if m else None for k in expected}
    res["err"] = {k: abs(res["shares"][k] - v) if m else None for k, v in expected.items()}
    return res


def pythons():
    """Every CPython 3.10+ on this machine: Debian's, then pyenv's."""
    found = [p for p in ("/usr/bin/python3.11",) if os.path.exists(p)]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3.1[0-9]")))
    return found


PY_FRAME = re.compile(r" \((?:.*\.py|<frozen [^>]*>)(?::\d+)?\)$")
PHASES = ("phase_gen", "phase_async", "phase_json")


def py_chains(stacks):
    """Per sample (frames root first): its Python frames, whether the chain
    is complete (the outermost Python frame is `<module>` and the stack was
    not cut), which phase it is in, and its innermost Python function.
    complete_running is over the samples that ran Python code: all but
    those with no Python frame and no cut marker (an uncut native stack
    with no eval-loop activation, so none to read).
    Incomplete samples by kind: no Python frame and cut (the frames changed
    before the read), no Python frame (none at the sample: start-up, exit,
    C only), a cut chain, a whole chain whose root is importlib called from
    C (imports run by the start-up), a chain with another root."""
    n = complete = 0
    phase = {k: 0 for k in PHASES}
    leaf = {}
    why = {"nopy_cut": 0, "nopy": 0, "py_cut": 0, "import_root": 0, "other_root": 0}
    for _, fr in stacks:
        n += 1
        pyf = [x for x in fr if PY_FRAME.search(x)]
        py = [x.split(" (")[0] for x in pyf]
        cut = any(x == "[truncated]" for x in fr)
        if not py:
            why["nopy_cut" if cut else "nopy"] += 1
        elif cut:
            why["py_cut"] += 1
        elif py[0] != "<module>":
            why["import_root" if "(<frozen importlib." in pyf[0] else "other_root"] += 1
        if py and py[0] == "<module>" and not cut:
            complete += 1
        ph = [x for x in py if x in PHASES]
        if ph:
            phase[ph[0]] += 1
        if py:
            leaf[py[-1]] = leaf.get(py[-1], 0) + 1
    inph = sum(phase.values())
    running = n - why["nopy"]
    return {"samples": n, "complete": complete / n if n else None,
            "complete_running": complete / running if running else None,
            "in_phase": inph / n if n else None,
            "phase_share": {k: v / inph if inph else None for k, v in phase.items()},
            "leaf_share": {k: v / n for k, v in leaf.items()} if n else {},
            "incomplete": {k: v / n for k, v in why.items()} if n else {}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 runs, half the work, fewer sizes (~3 min)")
    ap.add_argument("--runs", type=int, default=0, help="runs per configuration (default 5, quick 3)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--only", default="", help="comma list of phases: recording,accuracy,python,pyshapes,reader,hostile,tail,push,unwind,self,load")
    ap.add_argument("--base-record", default="",
                    help="a second record binary (e.g. built from main) run beside ours in the load phase")
    ap.add_argument("--prev-record", default="",
                    help="a third record binary for the load phase (e.g. the previous release)")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite the doc from $BENCH_TMP/results.json of the last run")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    b = Bench(args)
    if args.render:
        with open(os.path.join(b.tmp, "results.json")) as f:
            b.data = json.load(f)
        import report_md  # noqa: E402  (bench/report_md.py)
        with open(args.out, "w") as f:
            f.write(report_md.render(b.data, b))
        log("rendered %s from %s" % (args.out, os.path.join(b.tmp, "results.json")))
        return
    only = set(filter(None, args.only.split(",")))
    old_results = os.path.join(b.tmp, "results.json")
    keep = None
    if only and os.path.exists(old_results):
        # Re-running some phases: keep the other phases' last results.
        with open(old_results) as f:
            keep = json.load(f)
    b.setup()
    if keep is not None:
        for k, v in keep.get("phases", {}).items():
            b.data["phases"].setdefault(k, v)
        if "python" in only:
            b.data["phases"].pop("python", None)
            acc = b.data["phases"].get("accuracy", {})
            for k in [k for k in acc if k.startswith("py_")]:
                del acc[k]
        prev = [n for n in keep.get("notes", []) if n.startswith("phases ")]
        if not prev:
            env = keep.get("env", {})
            prev = ["phases of the full run: %s (git %s)" % (env.get("date", "?"), env.get("git", "?"))]
        b.data["notes"].extend(prev)
        b.data["notes"].append("phases re-run on %s: %s (git %s); the others are from the runs above"
                               % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                  ", ".join(sorted(only)), b.data["env"].get("git", "?")))
    b.write_doc()
    phases = [("recording", b.phase_recording), ("accuracy", b.phase_accuracy),
              ("python", b.phase_python), ("pyshapes", b.phase_pyshapes),
              ("reader", b.phase_reader), ("hostile", b.phase_hostile),
              ("tail", b.phase_tail), ("push", b.phase_push),
              ("unwind", b.phase_unwind),
              ("self", b.phase_selfprofile), ("load", b.phase_load)]
    for name, fn in phases:
        if only and name not in only:
            continue
        try:
            fn()
        except Exception as e:
            traceback.print_exc()
            b.error("phase " + name, e)
        b.write_doc()
    log("done in %.0f s -> %s" % (time.time() - b.started, args.out))


if __name__ == "__main__":
    main()
