#!/usr/bin/env python3
"""Off-CPU recording cost on a switch-heavy target, beside perf.

    python3 bench/offcpu.py [--runs N] [--rounds R] [--out docs/benchmarks.md]

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
`py-spy record --idle`, wall seconds per leaf Python function (skipped
with --storm-only, which keeps that table as it is). The section "Off-CPU
recording" of --out is replaced (or appended), keeping the sub-sections
(### headings) this script does not write; run.py rewrites the whole file,
so run this after it.
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
PY_HEADING = "### Python: functions blocked off CPU"


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
    out = ["", PY_HEADING, "",
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=200000)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--storm-only", action="store_true",
                    help="bench the switch storm only; keep the Python table")
    args = ap.parse_args()
    tmp = os.environ.get("BENCH_TMP", "/tmp/stackpulse-bench")
    os.makedirs(tmp, exist_ok=True)
    prefix = os.path.join(tmp, "out")
    run.log("building stackpulse (ReleaseFast) into", prefix)
    subprocess.run([sys.executable, "-m", "ziglang", "build", "install", "examples",
                    "-Doptimize=ReleaseFast", "-p", prefix], cwd=ROOT, check=True,
                   capture_output=True)
    record = os.path.join(prefix, "bin", "record")
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
    loads = [os.getloadavg()[0]]
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
                mm = re.search(r"(\d+) off-CPU intervals \((\d+) without a stack, (\d+) dropped\)"
                               r"(?:, (\d+) more merged into them)?", text)
                lost = re.search(r"samples \((\d+) lost\)", text)
                # Intervals seen: the rows plus the intervals merged into them.
                rows = int(mm.group(1)) if mm else None
                merged = int(mm.group(4) or 0) if mm else None
                events = rows + merged if mm else None
                extra = {"rows": rows, "merged": merged,
                         "no_stack": int(mm.group(2)) if mm else None,
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
    loads.append(os.getloadavg()[0])
    base = run.med([x["wall"] for x in res["alone"]])
    lines = [BEGIN, "## Off-CPU recording (switch storm)", "",
             "`python3 bench/offcpu.py --runs %d --rounds %d`: `bench/workloads/pingpong.c` passes a "
             "byte between two threads over pipes %d times (every pass blocks one thread and "
             "wakes the other), alone, under `record --off-cpu` (ReleaseFast, defaults: 99 Hz, "
             "32 KiB stack copies; in a switch storm, switch-out stacks sampled at most 1000 "
             "times a second per thread and CPU) and under `perf record -e sched:sched_switch -g`, interleaved "
             "run by run; medians of %d runs on this 2-CPU machine shared with other work "
             "(1-minute load average %.1f before the runs, %.1f after). "
             "Target wall and CPU are the target's own; a recorder's CPU is its process tree's "
             "minus the target's. Bytes per interval divide the whole file (samples, symbols, "
             "footer included) by the intervals in it."
             % (args.runs, args.rounds, args.rounds, args.runs, loads[0], loads[1]), "",
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
            (f(size / 1048576, "%.2f MiB") if size and size >= 1048576
             else f(size / 1024 if size else None, "%.1f KiB")), f(ev, "%.0f"),
            f(size / ev if size and ev else None, "%.2f"), f(lost, "%.0f")))
    sp = [x for x in res["stackpulse"] if x["rc"] == 0]
    medf = lambda k: f"{run.med([x[k] for x in sp]):.0f}" if sp else "—"
    lines += ["", "stackpulse's events are the off-CPU intervals seen, each with its exact "
              "duration (medians): %s written as rows (%s of them with the empty stack: 1 ms "
              "or longer, without a stack sample), %s merged into the rows (shorter, without "
              "a stack sample of their own: their time counts under the stack of the row they "
              "went into), %s dropped; its \"lost\" counts ring records (switch records and "
              "samples). perf's are `sched_switch` samples, each "
              "with its callchain, unwound later by `perf script`/`report`; perf's \"lost\" "
              "counts chunks. %s"
              % (medf("rows"), medf("no_stack"), medf("merged"), medf("dropped"),
                 "`perf record --off-cpu` is not in this perf (built without BPF skeletons)."
                 if not has_perf_offcpu else ""), END]
    text = open(args.out).read() if os.path.exists(args.out) else ""
    # The existing section's sub-sections: the Python one is ours (kept with
    # --storm-only), any other is written by someone else and kept.
    kept, py_old = [], []
    if BEGIN in text and END in text:
        old = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
        for part in re.split(r"\n(?=### )", old)[1:]:
            body = ["", *part.rstrip("\n").split("\n")]
            (py_old if part.startswith(PY_HEADING) else kept).append(body)
    py = (sum(py_old, []) if args.storm_only
          else python_section(record, prefix, tmp, args.runs))
    lines = lines[:-1] + py + sum(kept, []) + [END]
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
