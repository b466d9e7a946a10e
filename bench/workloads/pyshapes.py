"""The shapes that make Python stacks hard to read, one timed phase each:
main -> phase_gen   (a generator pipeline resumed from C by sum())
     -> phase_async (coroutines run by asyncio.gather, resumed by the loop)
     -> phase_json  (json.dumps/json.loads: time in C functions called from
                     Python)
usage: python3 pyshapes.py [ROUNDS]  (fixed work; about 1/3 per phase)"""
import asyncio
import json
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


def numbers(n):
    i = 0
    while i < n:
        yield (i * 7) % 1000
        i += 1


def evens(it):
    for x in it:
        if x % 2 == 0:
            yield x


def phase_gen(n):
    return sum(evens(numbers(n)))


async def crunch(n):
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
        if i % 2000 == 0:
            await asyncio.sleep(0)
    return acc


async def gather_all(n):
    return await asyncio.gather(*(crunch(n) for _ in range(4)))


def phase_async(n):
    return asyncio.run(gather_all(n))


DOC = {"k%d" % i: [i, str(i) * 3, {"x": i * 1.5, "y": [i] * 4}] for i in range(300)}


def phase_json(n):
    total = 0
    for _ in range(n):
        total += len(json.loads(json.dumps(DOC)))
    return total


PHASE_CPU = [0.0, 0.0, 0.0]  # thread CPU seconds of each phase: the truth


def timed(k, fn, n):
    t = time.thread_time()
    r = fn(n)
    PHASE_CPU[k] += time.thread_time() - t
    return r


def main(rounds):
    s = 0
    for _ in range(rounds):
        s += timed(0, phase_gen, 360000)
        s += sum(timed(1, phase_async, 80000))
        s += timed(2, phase_json, 50)
    return s


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
    path = os.environ.get("BENCH_REPORT")
    if path:
        r = resource.getrusage(resource.RUSAGE_SELF)
        with open(path, "w") as f:
            f.write("%.6f %.6f %.6f %.6f %.6f %.6f\n" % (
                time.monotonic() - T0, r.ru_utime + r.ru_stime, rq_wait() - W0, *PHASE_CPU))
