#!/bin/bash
# Runs inside the aarch64 guest (.ci/arm64-vm, from `zig build
# test-arm64-vm`): every aarch64 test binary copied into /work, through
# tests/run_tests.sh. Spools for the host check go to /out.
# Arguments: the tests left out of the guest (arm64_vm_skip), to name them.
set -u
cd /work || exit 2
(($#)) && echo "left out of the guest (arm64_vm_skip in tests/tests.zig): $*"
export SP_ARM64_OUT=/out SP_ARM64_SECS=${SP_ARM64_SECS:-1.5} SP_TEST_TIMEOUT=${SP_TEST_TIMEOUT:-300}
bins=()
for f in /work/*_test_*; do
	[[ -x $f ]] && bins+=("$f")
done
# test_arm64_guest first: its spools are what the host check reads.
mapfile -t bins < <(printf '%s\n' "${bins[@]}" | sort -t_ -k1,1 -s | awk '/arm64_test_arm64_guest/ {print; next} {rest[n++] = $0} END {for (i = 0; i < n; i++) print rest[i]}')
exec bash /work/run_tests.sh --root=/work --bin-dir=/work "${bins[@]}"
