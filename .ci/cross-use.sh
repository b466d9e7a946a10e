#!/usr/bin/env bash
# The README's recipe for building one's own program for aarch64 against
# `zig build cross`'s prefix, both ways (libstackpulse.so through
# stackpulse.pc, libstackpulse.a through stackpulse-static.pc), each run
# under qemu-aarch64 with Debian's :arm64 libraries.
# usage: cross-use.sh ZIG PREFIX   (PREFIX: zig-out/cross/aarch64-linux-gnu)
set -euo pipefail
zig=$1
prefix=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe=$(cd "$(dirname "$0")" && pwd)/link-probe.c
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
# shellcheck disable=SC2046 # pkg-config output is meant to be split
"$zig" cc -target aarch64-linux-gnu.2.36 "$probe" -o "$work/my-shared" \
	$(pkg-config --cflags --libs stackpulse) -L/usr/lib/aarch64-linux-gnu
# shellcheck disable=SC2046
"$zig" cc -target aarch64-linux-gnu.2.36 "$probe" -o "$work/my-static" \
	$(pkg-config --static --cflags --libs stackpulse-static) -L/usr/lib/aarch64-linux-gnu
file "$work/my-shared" | grep -q 'ARM aarch64'
readelf -d "$work/my-shared" | grep -q 'NEEDED.*libstackpulse\.so'
if readelf -d "$work/my-static" | grep -q 'NEEDED.*libstackpulse'; then
	echo "cross-use: the stackpulse-static.pc program needs libstackpulse.so" >&2
	exit 1
fi
qemu-aarch64 -E LD_LIBRARY_PATH="$prefix/lib" "$work/my-shared"
qemu-aarch64 "$work/my-static"
echo "cross-use: aarch64 programs built against $prefix (shared and static) run under qemu-aarch64"
