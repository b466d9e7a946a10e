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
echo "check-exports: $count versioned stackpulse_* symbols exported, soname $soname"
