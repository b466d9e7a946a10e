#!/usr/bin/env bash
# Links a small program against the installed libraries with the system cc
# (no zig), the ways the README documents, and runs each: statically through
# `pkg-config --static stackpulse-static`, and dynamically through
# `pkg-config stackpulse` with an rpath to its libdir.
set -euo pipefail
prefix=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe=$(cd "$(dirname "$0")" && pwd)/link-probe.c
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config output is meant to be split
cc -std=c17 -Wall -Werror "$probe" -o "$work/use-static" $(pkg-config --static --cflags --libs stackpulse-static)
# shellcheck disable=SC2046
cc -std=c17 -Wall -Werror "$probe" -o "$work/use-shared" $(pkg-config --cflags --libs stackpulse) \
	-Wl,-rpath,"$(pkg-config --variable=libdir stackpulse)"
if readelf -d "$work/use-static" | grep -q 'libstackpulse\.so'; then
	echo "check-link: the stackpulse-static.pc program needs libstackpulse.so" >&2
	exit 1
fi
# libstdc++ is loaded when the first C++ name is demangled, never linked.
lib=$(readlink -f "$prefix/lib/libstackpulse.so")
if readelf -d "$lib" | grep -q 'NEEDED.*libstdc++'; then
	echo "check-link: $lib needs libstdc++ (it must load it at the first C++ name)" >&2
	exit 1
fi
if ! readelf -d "$work/use-shared" | grep -q 'NEEDED.*\[libstackpulse\.so\.0\.3\]'; then
	echo "check-link: the stackpulse.pc program does not link libstackpulse.so.0.3" >&2
	exit 1
fi
"$work/use-static" >/dev/null
"$work/use-shared" >/dev/null
echo "check-link: static (stackpulse-static.pc) and shared (stackpulse.pc + rpath) programs link and run with the system cc; no libstdc++ in NEEDED"
