#!/usr/bin/env python3
"""Layering check: the pure layers must not include OS headers or headers of
the OS layers, and must not call I/O, process or environment functions. Run
from the repository root.

usage: check-layers.py [LAYER...]
The pure layers, lowest first, are `pure_layers` of src/sources.zig (build.zig
passes them as arguments; without arguments they are read from that file).

A pure layer may include C standard headers, <sys/types.h>, <zstd.h>,
"stackpulse.h", its own headers and those of the pure layers before it.
"""
import os
import re
import sys

STD_HEADERS = {
    "assert.h", "complex.h", "ctype.h", "errno.h", "fenv.h", "float.h", "inttypes.h",
    "iso646.h", "limits.h", "math.h", "stdalign.h", "stdarg.h", "stdatomic.h", "stdbool.h",
    "stddef.h", "stdint.h", "stdio.h", "stdlib.h", "stdnoreturn.h", "string.h", "tgmath.h",
    "uchar.h", "wchar.h", "wctype.h", "sys/types.h",
}
# zstd is itself pure (bytes in, bytes out).
PURE_SYSTEM_HEADERS = {"zstd.h"}
# Calls that reach the OS (stdio.h is allowed for snprintf only).
FORBIDDEN_CALLS = re.compile(
    r"(?<![\w.>])(fopen|freopen|fdopen|fclose|fread|fwrite|fgets|fputs|fprintf|printf|puts|"
    r"putchar|perror|open|openat|close|read|write|pread|pwrite|lseek|mmap|munmap|ioctl|"
    r"syscall|getpid|gettid|kill|fork|exec[lv]p?e?|system|popen|getenv|setenv|"
    r"clock_gettime|gettimeofday|time|sleep|usleep|nanosleep|exit|_Exit|abort|"
    r"pthread_\w+|dlopen|dlsym)\s*\("
)
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def strip_comments(text):
    """Blanks out comments and string literals, keeping line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_file(path, layer, rules):
    errors = []
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    here = os.path.dirname(path)
    for lineno, line in enumerate(raw.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        if kind == "<":
            if name not in STD_HEADERS and name not in PURE_SYSTEM_HEADERS:
                errors.append(f"{path}:{lineno}: pure layer '{layer}' includes OS/system header <{name}>")
            continue
        if name == "stackpulse.h":
            continue
        if "/" not in name:
            # Same-directory include: resolve to this layer.
            if os.path.exists(os.path.join(here, name)):
                continue
            errors.append(f'{path}:{lineno}: "{name}" not found next to the file; use "layer/{name}"')
            continue
        top = name.split("/", 1)[0]
        if top not in rules["dirs"]:
            errors.append(f'{path}:{lineno}: pure layer \'{layer}\' includes "{name}" of layer \'{top}\'')
    code = strip_comments(raw)
    for lineno, line in enumerate(code.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for m in FORBIDDEN_CALLS.finditer(line):
            errors.append(f"{path}:{lineno}: pure layer '{layer}' calls {m.group(1)}() (no I/O, syscalls or process state)")
    return errors


def pure_layers(argv):
    if argv:
        return argv
    with open(os.path.join("src", "sources.zig"), encoding="utf-8") as f:
        m = re.search(r"pub const pure_layers = \[_\]\[\]const u8\{([^}]*)\}", f.read())
    if not m:
        sys.exit("layers: no `pure_layers` list in src/sources.zig")
    return re.findall(r'"([^"]+)"', m.group(1))


def main():
    errors = []
    checked = 0
    layers = pure_layers(sys.argv[1:])
    for i, layer in enumerate(layers):
        rules = {"dirs": set(layers[: i + 1])}
        top = os.path.join("src", layer)
        if not os.path.isdir(top):
            continue
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith((".c", ".h")):
                    checked += 1
                    errors += check_file(os.path.join(dirpath, name), layer, rules)
    if errors:
        print("LAYERING CHECK FAILED:", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        print(f"layers: {len(errors)} violation(s) in the pure layers; see .ci/check-layers.py for the rules",
              file=sys.stderr)
        return 1
    where = ", ".join(f"src/{layer}" for layer in layers)
    print(f"layers: {checked} files in {where} respect the layering rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
