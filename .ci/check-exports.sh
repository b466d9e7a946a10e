#!/usr/bin/env bash
# Fails unless every dynamic symbol defined by the shared library is a public
# stackpulse_* function (or one of the linker's own markers) carrying a
# STACKPULSE_* symbol version (src/stackpulse.map), and the soname is SONAME.
#   check-exports.sh LIB SONAME
set -euo pipefail
lib=$1
want_soname=$2
if ! command -v nm >/dev/null; then
	echo "check-exports: nm not found (apt-get install -y binutils)" >&2
	exit 1
fi
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}')
bad=$(grep -vE '^(stackpulse_[A-Za-z0-9_]+@@?STACKPULSE_[0-9.]+|_init|_fini|__bss_start|_edata|_end)$' <<<"$syms" || true)
count=$(grep -cE '^stackpulse_' <<<"$syms" || true)
if [[ -n $bad ]]; then
	echo "check-exports: $lib exports symbols outside stackpulse_* or without a STACKPULSE_* version:" >&2
	sed 's/^/  /' <<<"$bad" >&2
	exit 1
fi
soname=$(readelf -d "$lib" 2>/dev/null | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
if [[ $soname != "$want_soname" ]]; then
	echo "check-exports: soname is '$soname', expected $want_soname" >&2
	exit 1
fi
# The header's STACKPULSE_API functions, the version script's names and the
# exports are one list.
top=$(cd "$(dirname "$0")/.." && pwd)
header=$(grep -oE 'STACKPULSE_API[^(]*\bstackpulse_[a-z0-9_]+\(' "$top/include/stackpulse.h" |
	grep -oE 'stackpulse_[a-z0-9_]+\($' | tr -d '(' | sort -u)
mapped=$(grep -oE '^[[:space:]]+stackpulse_[a-z0-9_]+;' "$top/src/stackpulse.map" | tr -d ' \t;' | sort -u)
exported=$(grep -oE '^stackpulse_[A-Za-z0-9_]+' <<<"$syms" | sort -u)
if [[ $header != "$mapped" || $mapped != "$exported" ]]; then
	echo "check-exports: header, src/stackpulse.map and exports differ:" >&2
	diff <(echo "$header") <(echo "$mapped") | sed 's/^/  header vs map: /' >&2 || true
	diff <(echo "$mapped") <(echo "$exported") | sed 's/^/  map vs exports: /' >&2 || true
	exit 1
fi
echo "check-exports: $count versioned stackpulse_* symbols exported, soname $soname, the same as the header's and the version script's"
