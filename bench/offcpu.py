#!/usr/bin/env python3
"""Off-CPU recording cost on a switch-heavy target, beside perf.

    python3 bench/offcpu.py [--runs N] [--rounds R] [--out docs/benchmarks.md]
    python3 bench/offcpu.py --unpriv [--runs N] [--rounds R] [--out ...]

bench/workloads/pingpong.c passes a byte between two threads over pipes R
times: every pass blocks one thread and wakes the other. Run by run,
interleaved: the target alone, under `record --off-cpu` (stackpulse,
ReleaseFast, default options) and under `perf record -e sched:sched_switch
-g` (kernel callchains plus frame-pointer user callchains, unwound at
report time). `perf record --off-cpu` is tried too; this perf may lack it
(built without BPF skeletons). Target wall time and CPU come from the
target itself (workloads/selfreport.h); a recorder's CPU is its process
tree's minus the target's. Then Python: tests/record/targets/pyblock.py
(functions blocked in time.sleep, Lock.acquire, socket.recv and on the GIL)
under `record --off-cpu` (`report --time=wall --python-only`) and under
`py-spy record --idle`, wall seconds per leaf Python function. The section "Off-CPU recording" of --out is
replaced (or appended); run.py rewrites the whole file, so run this after
it.

--unpriv runs the unprivileged method instead, as nobody (setpriv, so run
it as root): accuracy on tests/record/targets/phases.c (per round 30% spin,
40% nanosleep, 30% read() on a pipe filled late; wall shares of the main
thread against the times the target measured, root's privileged method
beside it), cost on the pingpong target beside what perf can record as
nobody (`perf record -e cpu-clock:u --switch-events --call-graph dwarf`:
switch records, no off-CPU stacks; `-e sched:sched_switch` is refused), and
the recorder's CPU on a target that only sleeps (the 1 ms ring poll). It
rewrites only its sub-section (between the offcpu-unpriv markers) inside
the off-CPU section; the default mode keeps that sub-section.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (measure, med, log: one home for them)

ROOT = run.ROOT
BEGIN, END = "<!-- offcpu:begin -->", "<!-- offcpu:end -->"
UBEGIN, UEND = "<!-- offcpu-unpriv:begin -->", "<!-- offcpu-unpriv:end -->"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def target_report(path):
    try:
        with open(path) as f:
            wall, cpu, rq = (float(x) for x in f.read().split()[:3])
            return wall, cpu, rq
    except (OSError, ValueError):
        return None, None, None


# Leaf Python functions of pyblock.py and the wall seconds each blocks for
# by construction (None: not fixed by the script).
PY_LEAVES = [("sleeper", 0.2), ("waiter", 0.45), ("receiver", 0.45), ("settle", 0.1),
             ("spin", None)]


def leaf_seconds(path, per_count):
    """Wall seconds per leaf function name of a folded file."""
    out = {}
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return out
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1].split(" (", 1)[0]
        out[leaf] = out.get(leaf, 0.0) + int(n) * per_count
    return out


def python_section(record, prefix, tmp, runs):
    py = os.path.realpath(sys.executable)
    script = os.path.join(ROOT, "tests", "record", "targets", "pyblock.py")
    report = os.path.join(prefix, "bin", "report")
    spool, folded, raw = (os.path.join(tmp, n) for n in ("pyb.spool", "pyb.folded", "pyb.pyspy"))
    have_pyspy = shutil.which("py-spy") is not None
    ours, theirs = [], []
    for r in range(runs):
        rc = subprocess.run([record, "--off-cpu", "-o", spool, "--", py, script],
                            capture_output=True).returncode
        if rc == 0:
            with open(folded, "w") as f:
                subprocess.run([report, spool, "--folded", "--time=wall", "--python-only"],
                               stdout=f, stderr=subprocess.DEVNULL)
            ours.append(leaf_seconds(folded, 1e-6))
        if have_pyspy:
            rc = subprocess.run(["py-spy", "record", "--idle", "--format", "raw", "-r", "100",
                                 "-o", raw, "--", py, script], capture_output=True).returncode
            if rc == 0:
                theirs.append(leaf_seconds(raw, 1e-2))
        run.log("python run %d done" % r)
    out = ["", "### Python: functions blocked off CPU", "",
           "`tests/record/targets/pyblock.py` on %s: `sleeper` sleeps 10 × 20 ms, `waiter` "
           "blocks in `Lock.acquire` and `receiver` in `socket.recv` about 450 ms each (after "
           "`settle`, 50 ms of `time.sleep` each), three `gil_worker` threads run `spin` for "
           "500 ms and wait for the GIL. Wall seconds per leaf Python function, medians of %d "
           "runs: `record --off-cpu` + `report --folded --time=wall --python-only` (on-CPU "
           "samples plus off-CPU intervals, exact durations) beside `py-spy record --idle` "
           "(100 Hz wall-clock samples)." % (os.path.basename(py), runs), "",
           "| leaf function | by construction | stackpulse | py-spy --idle |", "|---|---|---|---|"]
    for name, want in PY_LEAVES:
        a = run.med([x.get(name, 0.0) for x in ours]) if ours else None
        b = run.med([x.get(name, 0.0) for x in theirs]) if theirs else None
        f = lambda v: "%.3f s" % v if v is not None else "—"
        out.append("| `%s` | %s | %s | %s |" % (name, f(want), f(a), f(b)))
    if not have_pyspy:
        out += ["", "py-spy is not installed here."]
    return out


def phase_shares(report, spool, pid, tmp):
    """Wall seconds of spin_phase, sleep_phase and read_phase of thread pid
    (report --folded --tid --time=wall, microseconds)."""
    out = os.path.join(tmp, "ph.folded")
    with open(out, "w") as f:
        subprocess.run([report, spool, "--folded", "--tid", "--time=wall"], stdout=f,
                       stderr=subprocess.DEVNULL)
    got = [0.0, 0.0, 0.0]
    for line in open(out, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack.startswith("phases/%d;" % pid) or not n.isdigit():
            continue
        for k, fn in enumerate((";spin_phase", ";sleep_phase;", ";read_phase;")):
            if fn in stack:
                got[k] += int(n) / 1e6
    return got


def unpriv_accuracy(record, report, pub, runs):
    exe = os.path.join(pub, "phases")
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o", exe,
                    os.path.join(ROOT, "tests", "record", "targets", "phases.c")], check=True)
    os.chmod(exe, 0o755)
    res = {"nobody": [], "root": []}
    for r in range(runs):
        for who in res:
            spool, truth = os.path.join(pub, "ph.spool"), os.path.join(pub, "ph.truth")
            for p in (spool, truth):
                if os.path.exists(p):
                    os.unlink(p)
            cmd = (NOBODY if who == "nobody" else []) + [
                record, "-F", "999", "--off-cpu", "-o", spool, "--", "sh", "-c",
                "echo $$ >%s.pid; exec %s 20 100 >%s" % (truth, exe, truth)]
            err = os.path.join(pub, "ph.err")
            m = run.measure(cmd, stderr=err)
            try:
                a, b, c = (int(x) / 1e9 for x in open(truth).read().split()[1::2])
                pid = int(open(truth + ".pid").read())
            except (OSError, ValueError):
                run.log("phases run failed:", open(err, errors="replace").read())
                continue
            got = phase_shares(report, spool, pid, pub)
            text = open(err, errors="replace").read()
            mm = re.search(r"(\d+) off-CPU intervals \((\d+) without a stack", text)
            tsum, gsum = a + b + c, sum(got) or 1.0
            err_max = max(abs(g / gsum - t / tsum) for g, t in zip(got, (a, b, c)))
            res[who].append({"rc": m.rc, "truth": (a, b, c), "got": got, "err": err_max,
                             "iv": int(mm.group(1)) if mm else None,
                             "nostack": int(mm.group(2)) if mm else None})
            run.log("phases %d %-6s shares err %.4f intervals %s" % (r, who, err_max,
                                                                    mm.groups() if mm else None))
    return res


def measure_fresh(cmd, rep, outs, err):
    """run.measure of cmd after removing its outputs: the result, the
    target's own report and the command's stderr."""
    for p in (rep,) + tuple(outs):
        if os.path.exists(p):
            os.unlink(p)
    m = run.measure(cmd, env=dict(os.environ, BENCH_REPORT=rep), stderr=err)
    return m, target_report(rep), open(err, errors="replace").read()


def unpriv_main(args, record, report, tmp):
    pub = os.path.join(tmp, "public")
    os.makedirs(pub, exist_ok=True)
    os.chmod(pub, 0o777)
    for d in (tmp, os.path.join(tmp, "out"), os.path.join(tmp, "out", "bin")):
        os.chmod(d, 0o755)
    load0 = os.getloadavg()[0]
    acc = unpriv_accuracy(record, report, pub, args.runs)
    exe = os.path.join(pub, "pingpong")
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-I", os.path.join(ROOT, "bench", "workloads"),
                    "-o", exe, os.path.join(ROOT, "bench", "workloads", "pingpong.c")], check=True)
    os.chmod(exe, 0o755)
    rep, spool, pdata, err = (os.path.join(pub, n) for n in ("pp.report", "pp.spool", "pp.perf.data",
                                                             "pp.stderr"))
    sched = subprocess.run(NOBODY + ["perf", "record", "-e", "sched:sched_switch", "-g", "-o", pdata,
                                     "--", "true"], capture_output=True, text=True)
    sched_refused = sched.returncode != 0 or "can't access trace events" in sched.stderr
    rounds = str(args.rounds)
    tools = {
        "alone": NOBODY + [exe, rounds],
        "stackpulse --off-cpu (unprivileged)": NOBODY + [record, "--off-cpu", "-o", spool, "--", exe,
                                                         rounds],
        "perf cpu-clock:u --switch-events (dwarf)": NOBODY + [
            "perf", "record", "-e", "cpu-clock:u", "-F", "99", "--switch-events",
            "--call-graph", "dwarf,32768", "-o", pdata, "--", exe, rounds],
    }
    res = {t: [] for t in tools}
    for r in range(args.runs):
        for tool, cmd in tools.items():
            m, (wall, cpu, _), text = measure_fresh(cmd, rep, (spool, pdata), err)
            out = spool if tool.startswith("stackpulse") else pdata
            size = os.path.getsize(out) if tool != "alone" and os.path.exists(out) else None
            ev = nostack = lost = None
            if tool.startswith("stackpulse"):
                mm = re.search(r"(\d+) off-CPU intervals \((\d+) without a stack", text)
                ev, nostack = (int(mm.group(1)), int(mm.group(2))) if mm else (None, None)
                ml = re.search(r"samples \((\d+) lost\)", text)
                lost = int(ml.group(1)) if ml else None
            elif tool != "alone":
                sw = subprocess.run(["perf", "report", "-f", "-i", pdata, "--stats"], capture_output=True,
                                    text=True).stdout
                mm = re.search(r"SWITCH events:\s+(\d+)", sw)
                ev = int(mm.group(1)) // 2 if mm else None
            res[tool].append({"rc": m.rc, "wall": wall, "cpu": cpu, "tree": m.cpu, "size": size,
                              "ev": ev, "nostack": nostack, "lost": lost})
            run.log("pingpong %d %-42s rc %s wall %s tree %.2f ev %s" % (r, tool, m.rc, wall, m.cpu, ev))
    idle = {"--off-cpu": [], "on-CPU only": []}
    for r in range(args.runs):
        for mode in idle:
            extra = ["--off-cpu"] if mode == "--off-cpu" else []
            m = run.measure(NOBODY + [record] + extra + ["-o", spool, "--", "sleep", "3"])
            idle[mode].append(m.cpu)
    f = lambda v, fmt: (fmt % v) if v is not None else "—"
    out = [UBEGIN, "### Unprivileged method (as nobody, perf_event_paranoid 2)", "",
           "`python3 bench/offcpu.py --unpriv --runs %d --rounds %d` (as root; the recordings run "
           "as nobody through setpriv), medians of %d runs on this 2-CPU machine shared with "
           "other work (load average %.1f at the start, %.1f at the end)."
           % (args.runs, args.rounds, args.runs, load0, os.getloadavg()[0]), "",
           "**Accuracy** on `tests/record/targets/phases.c` (20 rounds of 100 ms: 30%% spin, 40%% "
           "`nanosleep`, 30%% `read()` on a pipe a thread fills late), `record -F 999 --off-cpu`, "
           "wall seconds of the main thread per phase from `report --folded --tid --time=wall` "
           "against the times the target measured; the largest share error of the three phases. "
           "perf has no unprivileged off-CPU recording here: `perf record -e sched:sched_switch` "
           "is %s as nobody and `perf record --off-cpu` is not in this perf (no BPF skeletons)."
           % ("refused (\"can't access trace events\")" if sched_refused else "allowed"), "",
           "| | spin (truth) | sleep (truth) | read (truth) | largest share error | intervals | without a stack |",
           "|---|---|---|---|---|---|---|"]
    for who, label in (("nobody", "stackpulse, unprivileged (nobody)"),
                       ("root", "stackpulse, context-switch event (root)")):
        rs = acc[who]
        if not rs:
            out.append("| %s | — | — | — | — | — | — |" % label)
            continue
        cell = lambda k: "%.3f s (%.3f s)" % (run.med([x["got"][k] for x in rs]),
                                              run.med([x["truth"][k] for x in rs]))
        out.append("| %s | %s | %s | %s | %.4f | %s | %s |" % (
            label, cell(0), cell(1), cell(2), run.med([x["err"] for x in rs]),
            f(run.med([x["iv"] for x in rs if x["iv"] is not None]), "%.0f"),
            f(run.med([x["nostack"] for x in rs if x["nostack"] is not None]), "%.0f")))
    base = run.med([x["wall"] for x in res["alone"] if x["wall"]])
    out += ["", "**Cost** on `bench/workloads/pingpong.c` (%s rounds), all as nobody: the target "
            "alone, under `record --off-cpu` (ReleaseFast, defaults: 99 Hz, unprivileged method) "
            "and under the closest perf can do unprivileged, `perf record -e cpu-clock:u -F 99 "
            "--switch-events --call-graph dwarf,32768` (switch records and samples; perf has no "
            "stack for the off-CPU intervals themselves). Events: stackpulse's off-CPU intervals, "
            "perf's switch records / 2." % args.rounds, "",
            "| | target wall | slowdown | recorder CPU | output | events | bytes per event | without a stack | records lost |",
            "|---|---|---|---|---|---|---|---|---|"]
    for tool, rs in res.items():
        ok = [x for x in rs if x["rc"] == 0 and x["wall"]]
        wall = run.med([x["wall"] for x in ok]) if ok else None
        rcpu = run.med([x["tree"] - x["cpu"] for x in ok if x["cpu"] is not None]) if tool != "alone" and ok else None
        size = run.med([x["size"] for x in ok if x["size"]]) if tool != "alone" and ok else None
        ev = run.med([x["ev"] for x in ok if x["ev"]]) if tool != "alone" and ok else None
        ns = run.med([x["nostack"] for x in ok if x["nostack"] is not None]) if tool.startswith("stackpulse") and ok else None
        lo = run.med([x["lost"] for x in ok if x["lost"] is not None]) if tool.startswith("stackpulse") and ok else None
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            tool, f(wall, "%.2f s"), f(wall / base if wall and base else None, "%.2f×"),
            f(rcpu, "%.2f s"), f(size / 1048576 if size else None, "%.2f MiB"), f(ev, "%.0f"),
            f(size / ev if size and ev else None, "%.1f"), f(ns, "%.0f"), f(lo, "%.0f")))
    out += ["", "Nearly every pingpong interval is a few microseconds long: it ends before the "
            "recorder can read the thread's stack, so it has none (counted); the records lost "
            "are those the 512 KiB unprivileged rings could not hold.",
            "", "**Idle cost** of the 1 ms ring poll: recorder CPU over `sleep 3` as nobody, "
            "`record --off-cpu` %s s against %s s on-CPU only (medians)."
            % (f(run.med(idle["--off-cpu"]), "%.3f"), f(run.med(idle["on-CPU only"]), "%.3f")), UEND]
    section = "\n".join(out)
    text = open(args.out).read() if os.path.exists(args.out) else ""
    if UBEGIN in text and UEND in text:
        text = text[:text.index(UBEGIN)] + section + text[text.index(UEND) + len(UEND):]
    elif END in text:
        text = text[:text.index(END)] + section + "\n" + text[text.index(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(args.out, "w") as fo:
        fo.write(text)
    run.log("wrote", args.out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=200000)
    ap.add_argument("--unpriv", action="store_true", help="the unprivileged method, as nobody")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    args = ap.parse_args()
    tmp = os.environ.get("BENCH_TMP", "/tmp/stackpulse-bench")
    os.makedirs(tmp, exist_ok=True)
    prefix = os.path.join(tmp, "out")
    run.log("building stackpulse (ReleaseFast) into", prefix)
    subprocess.run([sys.executable, "-m", "ziglang", "build", "install", "examples",
                    "-Doptimize=ReleaseFast", "-p", prefix], cwd=ROOT, check=True,
                   capture_output=True)
    record = os.path.join(prefix, "bin", "record")
    if args.unpriv:
        return unpriv_main(args, record, os.path.join(prefix, "bin", "report"), tmp)
    exe = os.path.join(tmp, "pingpong")
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-I", os.path.join(ROOT, "bench", "workloads"),
                    "-o", exe, os.path.join(ROOT, "bench", "workloads", "pingpong.c")], check=True)
    rep, spool, pdata = (os.path.join(tmp, n) for n in ("pp.report", "pp.spool", "pp.perf.data"))
    err = os.path.join(tmp, "pp.stderr")
    perf_offcpu = subprocess.run(["perf", "record", "--off-cpu", "-o", "/dev/null", "true"],
                                 capture_output=True, text=True)
    has_perf_offcpu = "ignored" not in perf_offcpu.stderr and perf_offcpu.returncode == 0
    tools = {
        "alone": [exe, str(args.rounds)],
        "stackpulse": [record, "--off-cpu", "-o", spool, "--", exe, str(args.rounds)],
        "perf sched_switch -g": ["perf", "record", "-e", "sched:sched_switch", "-g", "-o", pdata,
                                 "--", exe, str(args.rounds)],
    }
    if has_perf_offcpu:
        tools["perf --off-cpu"] = ["perf", "record", "--off-cpu", "-o", pdata, "--", exe,
                                   str(args.rounds)]
    res = {t: [] for t in tools}
    for r in range(args.runs):
        for tool, cmd in tools.items():
            for p in (rep, spool, pdata):
                if os.path.exists(p):
                    os.unlink(p)
            m = run.measure(cmd, env=dict(os.environ, BENCH_REPORT=rep), stderr=err)
            wall, cpu, rq = target_report(rep)
            text = open(err, errors="replace").read()
            out = spool if tool == "stackpulse" else pdata
            size = os.path.getsize(out) if tool != "alone" and os.path.exists(out) else None
            events = None
            if tool == "stackpulse":
                mm = re.search(r"(\d+) off-CPU intervals \((\d+) without a stack, (\d+) dropped\)", text)
                lost = re.search(r"samples \((\d+) lost\)", text)
                events = int(mm.group(1)) if mm else None
                extra = {"no_stack": int(mm.group(2)) if mm else None,
                         "dropped": int(mm.group(3)) if mm else None,
                         "lost": int(lost.group(1)) if lost else None}
            else:
                mm = re.search(r"\((\d+) samples\)", text)
                events = int(mm.group(1)) if mm else None
                lost = re.search(r"Processed \d+ events and lost (\d+) chunks", text)
                extra = {"lost": lost.group(1) if lost else 0}
            res[tool].append({"rc": m.rc, "wall": wall, "cpu": cpu, "rq": rq,
                              "tree_cpu": m.cpu, "size": size, "events": events, **extra})
            run.log("run %d %-22s rc %s target %.2fs cpu %.2fs tree %.2fs events %s size %s"
                    % (r, tool, m.rc, wall or -1, cpu or -1, m.cpu, events, size))
    base = run.med([x["wall"] for x in res["alone"]])
    lines = [BEGIN, "## Off-CPU recording (switch storm)", "",
             "`python3 bench/offcpu.py --runs %d --rounds %d`: `bench/workloads/pingpong.c` passes a "
             "byte between two threads over pipes %d times (every pass blocks one thread and "
             "wakes the other), alone, under `record --off-cpu` (ReleaseFast, defaults: 99 Hz, "
             "32 KiB stack copies) and under `perf record -e sched:sched_switch -g`, interleaved "
             "run by run; medians of %d runs on this 2-CPU machine shared with other work. "
             "Target wall and CPU are the target's own; a recorder's CPU is its process tree's "
             "minus the target's. Bytes per interval divide the whole file (samples, symbols, "
             "footer included) by the intervals in it."
             % (args.runs, args.rounds, args.rounds, args.runs), "",
             "| | target wall | slowdown | target CPU | recorder CPU | output | events | bytes per event | lost |",
             "|---|---|---|---|---|---|---|---|---|"]
    for tool, rs in res.items():
        ok = [x for x in rs if x["rc"] == 0]
        wall = run.med([x["wall"] for x in ok])
        cpu = run.med([x["cpu"] for x in ok])
        rcpu = run.med([x["tree_cpu"] - x["cpu"] for x in ok if x["cpu"] is not None]) if tool != "alone" else None
        size = run.med([x["size"] for x in ok])
        ev = run.med([x["events"] for x in ok])
        lost = run.med([float(x.get("lost") or 0) for x in ok]) if tool != "alone" else None
        f = lambda v, fmt: (fmt % v) if v is not None else "—"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            tool, f(wall, "%.2f s"), f(wall / base if wall and base else None, "%.2f×"),
            f(cpu, "%.2f s"), f(rcpu, "%.2f s"),
            f(size / 1048576 if size else None, "%.2f MiB"), f(ev, "%.0f"),
            f(size / ev if size and ev else None, "%.1f"), f(lost, "%.0f")))
    sp = [x for x in res["stackpulse"] if x["rc"] == 0]
    lines += ["", "stackpulse's events are off-CPU intervals (median %s without a stack, %s "
              "dropped); perf's are `sched_switch` samples, each with its callchain, unwound "
              "later by `perf script`/`report`; perf's \"lost\" counts chunks. %s"
              % (f"{run.med([x['no_stack'] for x in sp]):.0f}" if sp else "—",
                 f"{run.med([x['dropped'] for x in sp]):.0f}" if sp else "—",
                 "`perf record --off-cpu` is not in this perf (built without BPF skeletons)."
                 if not has_perf_offcpu else ""), END]
    lines = lines[:-1] + python_section(record, prefix, tmp, args.runs) + [END]
    text = open(args.out).read() if os.path.exists(args.out) else ""
    if UBEGIN in text and UEND in text:  # the --unpriv sub-section stays
        lines = lines[:-1] + ["", text[text.index(UBEGIN):text.index(UEND) + len(UEND)], END]
    section = "\n".join(lines) + "\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section.rstrip("\n") + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(args.out, "w") as fo:
        fo.write(text)
    run.log("wrote", args.out)


if __name__ == "__main__":
    main()
