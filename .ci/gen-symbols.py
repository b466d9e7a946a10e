#!/usr/bin/env python3
"""Writes debian/<package>.symbols from the version script.

usage: gen-symbols.py MAP SONAME PACKAGE [--check FILE]

Each version node STACKPULSE_X.Y of MAP gives its symbols the minimal
version X.Y.0, the release that added them. With --check, compares with
FILE instead and exits 1 on a difference (CI keeps the committed file in
step with the map; dpkg-gensymbols -c4 then checks it against the .so).
"""
import re
import sys


def nodes(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"(STACKPULSE_[0-9.]+)\s*\{(.*?)\}\s*[A-Z0-9_.]*\s*;", text, re.S):
        name, body = m.group(1), m.group(2)
        syms, scope = [], None
        for tok in re.split(r"[;\s]+", body):
            if not tok:
                continue
            if tok in ("global:", "local:"):
                scope = tok
                continue
            if scope == "global:":
                if "*" in tok or "?" in tok:
                    sys.exit(f"gen-symbols: {name} uses a pattern ({tok}); list symbols by name")
                syms.append(tok)
        yield name, syms


def main():
    args = sys.argv[1:]
    check = None
    if "--check" in args:
        i = args.index("--check")
        check = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    mapfile, soname, package = args
    out = [f"{soname} {package} #MINVER#", "* Build-Depends-Package: libstackpulse-dev"]
    lines = []
    for name, syms in nodes(open(mapfile).read()):
        ver = name.split("_", 1)[1]
        ver = ver + ".0" if ver.count(".") == 1 else ver
        lines.append(f" {name}@{name} {ver}")
        lines += [f" {s}@{name} {ver}" for s in syms]
    text = "\n".join(out + sorted(lines)) + "\n"
    if check is None:
        sys.stdout.write(text)
        return
    if open(check).read() != text:
        sys.exit(f"gen-symbols: {check} is not what {mapfile} gives: run "
                 f".ci/gen-symbols.py {mapfile} {soname} {package} > {check}")


main()
