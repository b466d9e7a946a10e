#!/usr/bin/env bash
# Builds the Debian packages from debian/ (offline, dpkg-buildpackage -b),
# fails on any lintian error, then unpacks them into a scratch root and
# builds and runs a small tool against that root, shared and static, and
# runs the packaged stackpulse-record and stackpulse-report once.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe=$(cd "$(dirname "$0")" && pwd)/link-probe.c

# The committed symbols file is what the version script gives.
python3 "$top/.ci/gen-symbols.py" "$top/src/stackpulse.map" libstackpulse.so.0.3 libstackpulse0.3 \
	--check "$top/debian/libstackpulse0.3.symbols"

# dpkg-buildpackage writes the packages next to the source tree.
mkdir "$work/src"
git -C "$top" ls-files -z | (cd "$top" && xargs -0 cp --parents -t "$work/src")
# zig's global cache of this user (libc stubs, compiler_rt) is reused.
export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$HOME/.cache/zig}
(cd "$work/src" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
	tail -n 60 "$work/build.log" >&2
	echo "deb: dpkg-buildpackage failed" >&2
	exit 1
}
changes=$(ls "$work"/*.changes)
ls "$work"/*.deb

# Errors fail; warnings are printed for the record.
lintian --fail-on error --tag-display-limit 0 "$changes" | tee "$work/lintian.txt" || {
	echo "deb: lintian reported errors" >&2
	exit 1
}

root="$work/root"
for d in "$work"/*.deb; do dpkg-deb -x "$d" "$root"; done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir="$root/usr/lib/$multiarch"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046 # pkg-config output is meant to be split
cc -std=c17 -Wall -Werror "$probe" -o "$work/use-shared" $(pkg-config --cflags --libs stackpulse)
# shellcheck disable=SC2046
cc -std=c17 -Wall -Werror -static "$probe" -o "$work/use-static" $(pkg-config --static --cflags --libs stackpulse-static)
LD_LIBRARY_PATH="$libdir" "$work/use-shared"
"$work/use-static"
if readelf -d "$work/use-static" | grep -q NEEDED; then
	echo "deb: the -static tool has dynamic dependencies" >&2
	exit 1
fi

# The tools package: record a short command and report it.
LD_LIBRARY_PATH="$libdir" "$root/usr/bin/stackpulse-record" -F 199 -o "$work/t.spool" -- sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'
LD_LIBRARY_PATH="$libdir" "$root/usr/bin/stackpulse-report" "$work/t.spool" --top 5 >"$work/report.txt"
grep -q . "$work/report.txt"
echo "deb: $(cd "$work" && ls ./*.deb | tr '\n' ' ')built, lintian clean of errors, shared and static tools link and run"
