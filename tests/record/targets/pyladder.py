# py_entry -> py_middle -> py_leaf, for argv[1] seconds of CPU time.
import sys
import time


def py_leaf(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def py_middle(n):
    return py_leaf(n) + 1


def py_entry(n):
    return py_middle(n) * 2


end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    py_entry(20000)
