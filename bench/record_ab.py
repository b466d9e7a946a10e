#!/usr/bin/env python3
"""Recording cost of two or more record binaries, side by side.

    python3 bench/record_ab.py old=/tmp/old/bin/record new=zig-out/bin/record \
        [--runs 5] [--wl cpu_tree,threads4] [--rates 99,999,4000]

Runs the recording phase's workloads (bench/workloads, built as bench/run.py
builds them) under each binary, interleaved run by run and binary by binary
so machine load hits every binary alike. Prints, per workload and rate, the
medians of recorder CPU per 1000 samples (user+sys of the recorder's process
tree minus the target's own CPU, as in docs/benchmarks.md), recorder CPU per
run, peak RSS of the tree, samples and lost. Each binary has its own symbol
cache directory, warmed by one unmeasured run. Raw runs go to
$BENCH_TMP/record_ab.json.
"""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as benchrun  # noqa: E402  (bench/run.py: measure, workloads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recorders", nargs="+", help="NAME=PATH of a record binary")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--wl", default="cpu_tree,threads4")
    ap.add_argument("--rates", default="99,999,4000")
    ap.add_argument("--quick", action="store_true", help="the workloads' quick sizes")
    args = ap.parse_args()
    recs = []
    for spec in args.recorders:
        name, _, path = spec.partition("=")
        if not path or not os.access(path, os.X_OK):
            ap.error("not NAME=PATH of an executable: " + spec)
        recs.append((name, os.path.abspath(path)))
    wls = args.wl.split(",")
    rates = args.rates.split(",")
    b = benchrun.Bench(argparse.Namespace(quick=args.quick, runs=args.runs, out=os.devnull))
    os.makedirs(b.tmp, exist_ok=True)
    os.makedirs(os.path.join(b.tmp, "run"), exist_ok=True)
    os.makedirs(os.path.join(b.tmp, "wl"), exist_ok=True)
    b.compile_workloads()
    # A symbol cache per binary: versions must not answer from (or evict)
    # each other's tables. One unmeasured run each fills it.
    cache = {}
    for name, path in recs:
        cache[name] = os.path.join(b.tmp, "abcache", name)
        os.makedirs(cache[name], exist_ok=True)
        os.environ["STACKPULSE_SYMBOL_CACHE_DIR"] = cache[name]
        b.rec = path
        b.run_tool("sp", wls[0], rates[-1], "ab-warm-%s" % name)
    rows = []
    for i in range(args.runs):
        for wl in wls:
            benchrun.log("record_ab: run %d/%d %s" % (i + 1, args.runs, wl))
            for hz in rates:
                # Alternate the order each run: neither binary always goes first.
                order = recs if i % 2 == 0 else list(reversed(recs))
                for name, path in order:
                    b.rec = path
                    os.environ["STACKPULSE_SYMBOL_CACHE_DIR"] = cache[name]
                    r = b.run_tool("sp", wl, hz, "ab-%s-%s-%s-%d" % (wl, name, hz, i))
                    r.update(rec=name, wl=wl, hz=int(hz))
                    rows.append(r)
    with open(os.path.join(b.tmp, "record_ab.json"), "w") as f:
        json.dump({"recorders": recs, "rows": rows}, f, indent=1)
    med = benchrun.med
    print("| workload | Hz | " + " | ".join(
        "%s CPU/1k | %s CPU/run | %s RSS | %s samples/lost" % (n, n, n, n) for n, _ in recs) + " |")
    print("|---|---|" + "---|---|---|---|" * len(recs))
    for wl in wls:
        for hz in rates:
            cells = []
            for name, _ in recs:
                rs = [r for r in rows if r["rec"] == name and r["wl"] == wl and r["hz"] == int(hz)]
                per1k = med([r["rec_cpu"] * 1e6 / r["samples"] for r in rs if r["samples"]])
                cells += ["%.0f ms" % per1k if per1k is not None else "n/a",
                          "%.1f ms" % (med([r["rec_cpu"] for r in rs]) * 1e3),
                          "%.1f MiB" % (med([r["rec_maxrss_kb"] for r in rs]) / 1024),
                          "%d / %d" % (med([r["samples"] for r in rs]), max(r["lost"] for r in rs))]
            print("| %s | %s | %s |" % (wl, hz, " | ".join(cells)))
    print("\nload average at end: %.1f %.1f %.1f" % os.getloadavg())


if __name__ == "__main__":
    main()
