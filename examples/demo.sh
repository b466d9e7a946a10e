#!/usr/bin/env bash
# The end-to-end demo: record the bundled ladder workload (a known 50/30/20
# call tree), print report's top table and write an SVG flame graph.
#
#   examples/demo.sh [BIN_DIR] [OUT_DIR]
#
# BIN_DIR holds record and report (default zig-out/bin, after
# `zig build examples`); OUT_DIR receives ladder, ladder.spool and
# ladder.svg (default: a new temporary directory).
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
"$bin/record" -F 199 -o "$out/ladder.spool" -- "$out/ladder" 3
echo
"$bin/report" "$out/ladder.spool" --top 10
"$bin/report" "$out/ladder.spool" --svg "$out/ladder.svg" >/dev/null
echo
echo "flame graph: $out/ladder.svg"
