#!/usr/bin/env bash
# Compiles and runs a C++ program that uses the installed header, as C++11
# and as C++20, with -Wall -Wextra -Wpedantic -Werror: the header must be
# clean C++ (the *_OPTS macros are C-only; C++ uses the *_opts_init calls),
# and every public typedef names its type without `struct` or `enum`.
set -euo pipefail
prefix=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/use.cpp" <<'CXX'
#include <cstdio>
#include <cstring>
#include <string>
#include "stackpulse.h"
/* Every public type is named without `struct` or `enum` from C++. */
static std::size_t typedef_names()
{
	const void *all[] = {
		(const stackpulse_error *)nullptr,
		(const stackpulse_feature *)nullptr,
		(const stackpulse_perf_event *)nullptr,
		(const stackpulse_offcpu_method *)nullptr,
		(const stackpulse_offcpu_state *)nullptr,
		(const stackpulse_attach_mode *)nullptr,
		(const stackpulse_window *)nullptr,
		(const stackpulse_recorder_opts *)nullptr,
		(const stackpulse_wait_result *)nullptr,
		(const stackpulse_process *)nullptr,
		(const stackpulse_thread *)nullptr,
		(const stackpulse_module *)nullptr,
		(const stackpulse_raw_frame *)nullptr,
		(const stackpulse_pycode *)nullptr,
		(const stackpulse_sample *)nullptr,
		(const stackpulse_spool_event_kind *)nullptr,
		(const stackpulse_spool_open_flags *)nullptr,
		(const stackpulse_spool_open_opts *)nullptr,
		(const stackpulse_stat *)nullptr,
		(const stackpulse_realtime_state *)nullptr,
		(const stackpulse_offcpu *)nullptr,
		(const stackpulse_tail_state *)nullptr,
		(const stackpulse_spool_tail_opts *)nullptr,
		(const stackpulse_symbolizer_flag *)nullptr,
		(const stackpulse_symbolizer_opts *)nullptr,
		(const stackpulse_view *)nullptr,
		(const stackpulse_profile_flag *)nullptr,
		(const stackpulse_time *)nullptr,
		(const stackpulse_profile_opts *)nullptr,
		(const stackpulse_profile_func_count *)nullptr,
		(const stackpulse_export_format *)nullptr,
		(const stackpulse_export_flag *)nullptr,
		(const stackpulse_export_opts *)nullptr,
		(const stackpulse_push_protocol *)nullptr,
		(const stackpulse_push_opts *)nullptr,
	};
	return sizeof(all) / sizeof(all[0]);
}
int main()
{
	if (typedef_names() == 0)
		return 5;
	stackpulse_recorder_opts ro;
	stackpulse_recorder_opts_init(&ro);
	ro.frequency = 199;
	ro.kernel = STACKPULSE_FEATURE_OFF;
	ro.perf_event = STACKPULSE_PERF_EVENT_CPU_CLOCK;
	ro.children = true;
	ro.self_contained = false;
	stackpulse_feature realtime = STACKPULSE_FEATURE_OFF;
	ro.realtime = realtime;
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
