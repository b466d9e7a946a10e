#!/usr/bin/env python3
"""Rewrites a static library with members named by their base names.

usage: repack-ar.py ZIG IN.a OUT.a

zig names archive members by their cache paths (.zig-cache/o/<hash>/x.o),
and the hash depends on the checkout's directory, so two builds of one
commit in two directories differ in the long-name table alone. The members
are kept in order, byte for byte; `zig ar rcsD` rebuilds the symbol index
with zero times and ids.
"""
import os
import subprocess
import sys
import tempfile


def members(data):
    if data[:8] != b"!<arch>\n":
        sys.exit("repack-ar: not an archive")
    i, names = 8, b""
    while i + 60 <= len(data):
        head = data[i:i + 60]
        name = head[:16].decode().rstrip()
        size = int(head[48:58])
        body = data[i + 60:i + 60 + size]
        i += 60 + size + (size & 1)
        if name == "/" or name == "/SYM64/":
            continue
        if name == "//":
            names = body
            continue
        if name.startswith("/"):
            off = int(name[1:])
            name = names[off:names.index(b"/\n", off)].decode()
        yield os.path.basename(name.rstrip("/")), body


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    zig, src, dst = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        order = []
        for name, body in members(open(src, "rb").read()):
            if name in order:
                sys.exit(f"repack-ar: two members named {name}")
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(body)
            order.append(name)
        out = os.path.abspath(dst)
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run([zig, "ar", "rcsD", out] + order, cwd=tmp, check=True)


main()
