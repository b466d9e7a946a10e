#!/usr/bin/env bash
# Reproducible builds: this checkout and a clean clone of its HEAD (commit
# first), in directories of different names and lengths, built with the same SOURCE_DATE_EPOCH, must install
# byte-identical libstackpulse.a, libstackpulse.so.* and .pc files.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$top" log -1 --format=%ct)}
# Build A is this checkout's own install (cached when CI built it already);
# build B a clean clone at a longer path.
(cd "$top" && python3 -m ziglang build -p "$work/a/out" >"$work/a.log" 2>&1) || {
	tail -n 40 "$work/a.log" >&2
	exit 1
}
git clone -q "$top" "$work/build-tree-b"
(cd "$work/build-tree-b" && python3 -m ziglang build -p "$work/build-tree-b/out" >"$work/b.log" 2>&1) || {
	tail -n 40 "$work/b.log" >&2
	exit 1
}
n=0
while IFS= read -r f; do
	if ! cmp -s "$work/a/out/$f" "$work/build-tree-b/out/$f"; then
		echo "repro: $f differs between the two builds" >&2
		exit 1
	fi
	n=$((n + 1))
done < <(cd "$work/a/out" && find lib -type f \( -name '*.a' -o -name '*.so*' -o -name '*.pc' \) | sort)
[ "$n" -ge 4 ] || {
	echo "repro: only $n files compared" >&2
	exit 1
}
echo "repro: $n files (.a, .so, .pc) byte-identical across two clean builds (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
