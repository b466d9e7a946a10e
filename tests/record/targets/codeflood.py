"""Churns code objects: each round makes a chain of DEPTH new functions
(code.replace of one template, with names and file names of 1000 4-byte
characters), calls down the chain, spins in the leaf, and drops them, so
their addresses come back with other code objects. argv[1] = CPU seconds.
Qualified names are "f_ROUND_DEPTH_" + padding; prints the rounds made.
The names of the last KEEP rounds stay alive, so a new code object at an
old address has new name objects too (the recorder tells code objects
apart by their own and their names' addresses)."""
import os
import sys
import time

DEPTH = 60
KEEP = 8
PAD = "\U00020000" * 1000


def noise():
    """1000 random Latin-1 characters: names the spool cannot compress
    away (its reader bounds tables by the file size)."""
    return os.urandom(1000).decode("latin-1")


def template(depth, fns, until):
    if depth + 1 < len(fns):
        return fns[depth + 1](depth + 1, fns, until)
    while time.process_time() < until:
        pass
    return depth


def main():
    end = time.process_time() + float(sys.argv[1])
    code = template.__code__
    rounds = 0
    names = [None] * KEEP
    while time.process_time() < end:
        fns = []
        keep = []
        for d in range(DEPTH):
            name = "f_%d_%d_" % (rounds, d) + noise()
            kw = {"co_name": name, "co_filename": "/flood/%d/%s" % (rounds, PAD)}
            if hasattr(code, "co_qualname"):
                kw["co_qualname"] = name
            keep.append(kw)
            fns.append(type(template)(code.replace(**kw), globals()))
        names[rounds % KEEP] = keep
        fns[0](0, fns, time.process_time() + 0.005)
        del fns
        rounds += 1
    print("rounds", rounds, flush=True)


main()
