#!/usr/bin/env python3
"""Checks that every public function defined in src/ starts with
SP_API_ENTRY(), so stackpulse_last_error() is never stale. The exceptions
are the error functions themselves and the functions that free or close an
object (they run in callers' error paths and must keep the error)."""
import pathlib
import re
import sys

EXEMPT = {
    "stackpulse_last_error",
    "stackpulse_last_error_code",
    "stackpulse_strerror",
    "stackpulse_version",
}
DEF = re.compile(r"^[A-Za-z].*\b(stackpulse_[a-z0-9_]+)\(")


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    bad = []
    seen = 0
    for path in sorted((root / "src").rglob("*.c")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = DEF.match(line)
            if not m or line.rstrip().endswith(";"):
                continue
            name = m.group(1)
            # The body starts at the first line that is "{".
            j = i
            while j < len(lines) and lines[j] != "{":
                if lines[j].rstrip().endswith(";"):
                    j = -1
                    break
                j += 1
            if j < 0 or j + 1 >= len(lines):
                continue
            seen += 1
            if name in EXEMPT or name.endswith("_free") or name.endswith("_close"):
                continue
            if lines[j + 1].strip() != "SP_API_ENTRY();":
                bad.append(f"{path.relative_to(root)}:{i + 1}: {name} does not start with SP_API_ENTRY();")
    for b in bad:
        print(b, file=sys.stderr)
    if seen == 0:
        print("check-api-entry: no public function found (wrong directory?)", file=sys.stderr)
        return 1
    if bad:
        return 1
    print(f"check-api-entry: {seen} public functions checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
