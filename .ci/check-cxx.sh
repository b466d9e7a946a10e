#!/usr/bin/env bash
# Compiles and runs a C++ program that uses the installed header, as C++11
# and as C++20, with -Wall -Wextra -Wpedantic -Werror: the header must be
# clean C++ (the *_OPTS macros are C-only; C++ uses the *_opts_init calls).
set -euo pipefail
prefix=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/use.cpp" <<'CXX'
#include <cstdio>
#include <cstring>
#include <string>
#include "stackpulse.h"
int main()
{
	stackpulse_recorder_opts ro;
	stackpulse_recorder_opts_init(&ro);
	ro.frequency = 199;
	ro.kernel = STACKPULSE_FEATURE_OFF;
	ro.perf_event = STACKPULSE_PERF_EVENT_CPU_CLOCK;
	stackpulse_symbolizer_opts so;
	stackpulse_symbolizer_opts_init(&so);
	so.flags = STACKPULSE_SYM_OFFLINE;
	stackpulse_profile_opts po;
	stackpulse_profile_opts_init(&po);
	po.view = STACKPULSE_VIEW_PYTHON_ONLY;
	stackpulse_export_opts eo;
	stackpulse_export_opts_init(&eo);
	stackpulse_push_opts pu;
	stackpulse_push_opts_init(&pu);
	pu.protocol = STACKPULSE_PUSH_OTLP;
	stackpulse_spool_open_opts oo;
	stackpulse_spool_open_opts_init(&oo);
	static const char junk[] = "not a spool";
	oo.buf = junk;
	oo.len = sizeof(junk) - 1;
	stackpulse_spool *s = nullptr;
	int rc = stackpulse_spool_open(nullptr, &oo, &s);
	if (rc == 0 || std::string(stackpulse_last_error()).empty())
		return 1;
	if (ro.sz != sizeof(ro) || so.sz != sizeof(so) || po.sz != sizeof(po) ||
	    eo.sz != sizeof(eo) || oo.sz != sizeof(oo) || pu.sz != sizeof(pu) ||
	    ro.frequency != 199)
		return 2;
	/* A successful call clears the error left by the failed one. */
	stackpulse_recorder *rec = nullptr;
	if (stackpulse_recorder_attach(0, "x.spool", STACKPULSE_ATTACH_LIVE, &ro, &rec) == 0)
		return 3;
	stackpulse_profile_opts_init(&po);
	if (stackpulse_last_error()[0] != '\0')
		return 4;
	std::printf("stackpulse %s from C++ (%ld): %s\n", stackpulse_version(),
	            static_cast<long>(__cplusplus), stackpulse_strerror(rc));
	return 0;
}
CXX
for std in c++11 c++20; do
	g++ -std=$std -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" "$work/use.cpp" \
		-o "$work/use-$std" -L"$prefix/lib" -lstackpulse -Wl,-rpath,"$prefix/lib"
	"$work/use-$std"
done
echo "check-cxx: the header compiles and runs as C++11 and C++20 (-Wall -Wextra -Wpedantic -Werror)"
