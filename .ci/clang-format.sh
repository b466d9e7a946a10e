#!/usr/bin/env bash
# clang-format over the C files (*.c, *.h) under the given directories.
# usage: clang-format.sh fix|check DIR...
set -euo pipefail
mode=$1
shift
cf=
for c in clang-format-14 clang-format; do
	if command -v "$c" >/dev/null; then
		cf=$c
		break
	fi
done
if [[ -z $cf ]]; then
	echo "clang-format not found: apt-get install -y clang-format-14" >&2
	exit 1
fi
dirs=()
for d in "$@"; do [[ -d $d ]] && dirs+=("$d"); done
((${#dirs[@]})) || exit 0
mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' \) | sort)
((${#files[@]})) || exit 0
if [[ $mode == fix ]]; then
	"$cf" -i --style=file "${files[@]}"
	echo "clang-format: formatted ${#files[@]} files"
	exit 0
fi
bad=()
for f in "${files[@]}"; do
	if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
		bad+=("$f")
	fi
done
if ((${#bad[@]})); then
	echo "clang-format: ${#bad[@]} of ${#files[@]} files need formatting (run: python3 -m ziglang build fmt):" >&2
	for f in "${bad[@]}"; do
		echo "  $f" >&2
		"$cf" --style=file "$f" | diff -u "$f" - | sed -n '3,12p' | sed 's/^/    /' >&2
	done
	exit 1
fi
echo "clang-format: ${#files[@]} files clean"
