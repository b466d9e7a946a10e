#!/usr/bin/env bash
# Doxygen over include/stackpulse.h into PREFIX/doc (zig-out/doc).
set -euo pipefail
prefix=$1
if ! command -v doxygen >/dev/null; then
	echo "doxygen not found: apt-get install -y doxygen" >&2
	exit 1
fi
mkdir -p "$prefix/doc"
SP_DOC_OUT=$(cd "$prefix/doc" && pwd)
export SP_DOC_OUT
doxygen docs/Doxyfile
echo "doc: $SP_DOC_OUT/html/index.html"
