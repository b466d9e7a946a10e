#!/usr/bin/env bash
# ABI check of libstackpulse.so against the committed baseline
# abi/stackpulse.abi (abidw/abidiff from Debian's abigail-tools).
#   abi.sh check  LIB: fails on any ABI difference (added, removed or changed
#                      functions and types of include/stackpulse.h);
#   abi.sh update LIB: regenerates the baseline (`zig build abi-update`).
# A deliberate ABI change commits the regenerated baseline with it.
set -euo pipefail
mode=$1
lib=$2
baseline=abi/stackpulse.abi
for tool in abidw abidiff; do
	if ! command -v "$tool" >/dev/null; then
		echo "abi: $tool not found (apt-get install -y abigail-tools, or .ci/setup)" >&2
		exit 1
	fi
done
# Only the public header's types (types private to the library, such as
# the struct behind an opaque handle, are dropped: their layout is not ABI);
# no path of this build in the XML (no corpus or compilation directory), so
# the baseline is the same from any checkout.
dump() { abidw --headers-dir include --drop-private-types --no-corpus-path --no-comp-dir-path --drop-undefined-syms "$lib" --out-file "$1"; }
case $mode in
update)
	mkdir -p abi
	dump "$baseline"
	echo "abi: wrote $baseline ($(grep -c '<elf-symbol ' "$baseline") symbols); commit it with the change"
	;;
check)
	if [[ ! -f $baseline ]]; then
		echo "abi: no $baseline: run 'python3 -m ziglang build abi-update' and commit it" >&2
		exit 1
	fi
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	dump "$work/current.abi"
	if abidiff "$baseline" "$work/current.abi" >"$work/diff" 2>&1; then
		echo "abi: libstackpulse.so matches $baseline"
		exit 0
	fi
	cat "$work/diff" >&2
	echo "abi: the ABI differs from $baseline. If the change is deliberate, run" >&2
	echo "     'python3 -m ziglang build abi-update' and commit $baseline with it" >&2
	echo "     (a removed or changed function or type also needs a soname bump: README.md)." >&2
	exit 1
	;;
*)
	echo "usage: abi.sh check|update LIB" >&2
	exit 2
	;;
esac
