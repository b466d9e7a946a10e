#!/usr/bin/env bash
# clang-tidy over the given C files with the project's compile flags;
# any warning fails the run. Files run in parallel, one per CPU.
# usage: clang-tidy.sh [-DNAME=VALUE...] FILE...
set -euo pipefail
tidy=
for c in clang-tidy-14 clang-tidy; do
	if command -v "$c" >/dev/null; then
		tidy=$c
		break
	fi
done
if [[ -z $tidy ]]; then
	echo "clang-tidy not found: apt-get install -y clang-tidy-14" >&2
	exit 1
fi
flags=(-std=c17 -D_GNU_SOURCE -Iinclude -Isrc -Itests/support -Wall -Wextra -Wpedantic -Wshadow -Wconversion)
while (($#)) && [[ $1 == -D* ]]; do
	flags+=("$1")
	shift
done
(($#)) || exit 0
export tidy
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
printf '%s\n' "$@" | sort -u | xargs -P "$(nproc)" -I{} sh -c \
	'f={}; s=$(date +%s%N); "$tidy" --quiet --warnings-as-errors="*" "$f" -- "$@" >"$0/$(echo "$f" | tr / _).log" 2>&1 || echo "$f" >>"$0/failed"; echo "$(( ($(date +%s%N) - s) / 1000000 )) $f" >>"$0/times"' \
	"$out" "${flags[@]}" || status=1
if [[ -s $out/failed ]]; then
	while read -r f; do
		echo "clang-tidy: $f" >&2
		grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated|^Suppressed|^Use -header-filter' \
			"$out/$(echo "$f" | tr / _).log" >&2 || true
	done <"$out/failed"
	echo "clang-tidy: $(wc -l <"$out/failed") of $# files have findings" >&2
	echo "clang-tidy: slowest files: $(sort -rn "$out/times" | head -n 5 | awk '{printf "%s %.1fs, ", $2, $1 / 1000}')" >&2
	exit 1
fi
((status == 0)) || exit 1
echo "clang-tidy: $# files clean (slowest: $(sort -rn "$out/times" | head -n 3 | awk '{printf "%s %.1fs, ", $2, $1 / 1000}'))"
