# Python workload of the aarch64 guest tests: py_outer -> py_hot for
# argv[1] seconds.
import sys
import time


def py_hot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def py_outer(secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        py_hot(20000)


py_outer(float(sys.argv[1]))
