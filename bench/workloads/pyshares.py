"""Pure-Python hot functions with known shares of the work:
main -> run -> py_a 50% / py_b 30% / py_c 20% (same loop body, different
counts). usage: python3 pyshares.py [ROUNDS]  (fixed work)"""
import os
import resource
import sys
import time


def rq_wait():
    """Seconds this thread waited on a run queue (see selfreport.h)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


T0 = time.monotonic()
W0 = rq_wait()


def py_a():
    acc = 0
    for i in range(50000):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def py_b():
    acc = 0
    for i in range(30000):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def py_c():
    acc = 0
    for i in range(20000):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def run(rounds):
    s = 0
    for _ in range(rounds):
        s += py_a() + py_b() + py_c()
    return s


def main():
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
    path = os.environ.get("BENCH_REPORT")
    if path:
        r = resource.getrusage(resource.RUSAGE_SELF)
        k = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(path, "w") as f:
            f.write("%.6f %.6f %.6f\n" % (time.monotonic() - T0,
                                           r.ru_utime + r.ru_stime + k.ru_utime + k.ru_stime,
                                           rq_wait() - W0))


if __name__ == "__main__":
    main()
