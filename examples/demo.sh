#!/usr/bin/env bash
# The end-to-end demo: record the bundled workloads (a C call tree with a
# known 50/30/20 split, a C program with named threads, and a Python
# script), print report's top table for each, and write SVG flame graphs.
#
#   examples/demo.sh [BIN_DIR] [OUT_DIR]
#
# BIN_DIR holds record and report (default zig-out/bin, after
# `zig build examples`); OUT_DIR receives the programs, spools and SVGs
# (default: a new temporary directory).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:-$here/../zig-out/bin}
out=${2:-$(mktemp -d /tmp/stackpulse-demo.XXXXXX)}
for tool in record report; do
	if [[ ! -x $bin/$tool ]]; then
		echo "demo: $bin/$tool is missing; run 'zig build examples' first" >&2
		exit 1
	fi
done
mkdir -p "$out"
cc -O2 -g -o "$out/ladder" "$here/workloads/ladder.c"
cc -O2 -g -pthread -o "$out/threads" "$here/workloads/threads.c"

show() { # NAME TOP -- COMMAND...
	local name=$1 top=$2
	shift 3
	echo
	echo "==== $name: $*"
	"$bin/record" -F 499 -o "$out/$name.spool" -- "$@"
	echo
	"$bin/report" "$out/$name.spool" --top "$top"
	"$bin/report" "$out/$name.spool" --svg "$out/$name.svg" >/dev/null
	echo "flame graph: $out/$name.svg"
}

show ladder 8 -- "$out/ladder" 3
show threads 8 -- "$out/threads" 2
show python 10 -- python3 "$here/workloads/workload.py" 2
