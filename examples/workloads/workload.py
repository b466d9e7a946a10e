"""A small CPU-bound Python workload for demos: recursion, a method and a
nested helper, in two phases taking 60% and 40% of the CPU time.

    python3 workload.py [SECONDS]     (CPU seconds, default 3)

Phases end on process CPU time, not wall time, so the split holds on a
busy machine too (a sampling profiler counts CPU time).
"""
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Matrix:
    def __init__(self, n):
        self.rows = [[(i * n + j) % 7 for j in range(n)] for i in range(n)]

    def multiply(self, other):
        n = len(self.rows)

        def cell(i, j):
            return sum(self.rows[i][k] * other.rows[k][j] for k in range(n))

        return [[cell(i, j) for j in range(n)] for i in range(n)]


def phase_fib(deadline):
    while time.process_time() < deadline:
        fib(18)


def phase_matrix(deadline):
    m = Matrix(24)
    while time.process_time() < deadline:
        m.multiply(m)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    start = time.process_time()
    phase_fib(start + 0.6 * seconds)
    phase_matrix(start + seconds)
    print("workload.py: done")


if __name__ == "__main__":
    main()
