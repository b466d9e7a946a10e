#!/usr/bin/env bash
# Links a small program against the installed libraries with the system cc
# (no zig), statically through `pkg-config --static` and dynamically, and
# runs both: what a distro tool does.
set -euo pipefail
prefix=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "stackpulse.h"
int main(void)
{
	stackpulse_spool *s = NULL;
	stackpulse_spool_open_opts o = STACKPULSE_SPOOL_OPEN_OPTS;
	o.buf = "not a spool";
	o.len = 11;
	int rc = stackpulse_spool_open(NULL, &o, &s);
	if (rc == 0 || strlen(stackpulse_last_error()) == 0)
		return 1;
	printf("stackpulse %s: %s\n", stackpulse_version(), stackpulse_strerror(rc));
	return 0;
}
C
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c17 -Wall -Werror $(pkg-config --cflags stackpulse) "$work/use.c" -o "$work/use-static" \
	"$prefix/lib/libstackpulse.a" $(pkg-config --static --libs-only-l stackpulse | sed 's/-lstackpulse//')
cc -std=c17 -Wall -Werror $(pkg-config --cflags stackpulse) "$work/use.c" -o "$work/use-shared" \
	$(pkg-config --libs stackpulse) -Wl,-rpath,"$prefix/lib"
"$work/use-static" >/dev/null
"$work/use-shared" >/dev/null
echo "check-link: static and shared libraries link and run with the system cc"
