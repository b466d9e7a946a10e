#!/usr/bin/env bash
# Runs test binaries one after another and adds up their harness lines
# "summary NAME: N ok, N failed, N skipped". A binary that crashes, times out
# or exits non-zero without a summary counts as one failure.
#
# usage: run_tests.sh [--root=DIR] [--bin-dir=DIR] [--wrap="CMD ARGS"] BIN...
#   --root     repository root, exported as SP_SOURCE_ROOT (default: .)
#   --bin-dir  where example programs live, exported as SP_BIN_DIR
#   --wrap     command prefix for every binary (valgrind, qemu-aarch64)
# env: SP_TEST_TIMEOUT seconds per binary (default 300, 900 when wrapped),
#      SP_TEST_VERBOSE=1 prints every binary's full output.
set -uo pipefail

root=.
bin_dir=
wrap=
bins=()
for arg in "$@"; do
	case $arg in
	--root=*) root=${arg#--root=} ;;
	--bin-dir=*) bin_dir=${arg#--bin-dir=} ;;
	--wrap=*) wrap=${arg#--wrap=} ;;
	-*) echo "run_tests.sh: unknown option $arg" >&2; exit 2 ;;
	*) bins+=("$(realpath "$arg")") ;;
	esac
done

SP_SOURCE_ROOT=$(cd "$root" && pwd)
export SP_SOURCE_ROOT
if [[ -n $bin_dir ]]; then
	mkdir -p "$bin_dir"
	SP_BIN_DIR=$(cd "$bin_dir" && pwd)
	export SP_BIN_DIR
fi
cd "$SP_SOURCE_ROOT" || exit 2

if [[ -n $wrap ]]; then
	timeout_s=${SP_TEST_TIMEOUT:-900}
	read -r -a wrap_cmd <<<"$wrap"
	if ! command -v "${wrap_cmd[0]}" >/dev/null; then
		echo "run_tests.sh: ${wrap_cmd[0]} not found (apt-get install -y valgrind qemu-user)" >&2
		exit 2
	fi
else
	timeout_s=${SP_TEST_TIMEOUT:-300}
	wrap_cmd=()
fi

echo "run_tests: ${#bins[@]} binaries${wrap:+, each under: $wrap}"
passed=0 failed=0 skipped=0
failed_bins=()
log=$(mktemp)
checks=$(mktemp)
trap 'rm -f "$log" "$checks"' EXIT

for bin in "${bins[@]}"; do
	name=$(basename "$bin")
	start=$SECONDS
	timeout --kill-after=10 "$timeout_s" "${wrap_cmd[@]}" "$bin" </dev/null >"$log" 2>&1
	rc=$?
	secs=$((SECONDS - start))
	summary=$(grep -E '^summary .*: [0-9]+ ok, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
	if [[ -n $summary ]]; then
		read -r ok bad skip < <(sed -E 's/.*: ([0-9]+) ok, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/' <<<"$summary")
	else
		ok=0 bad=0 skip=0
	fi
	why=
	if [[ -z $summary ]]; then
		why="no summary line (exit $rc)"
		((rc == 124 || rc == 137)) && why="timed out after ${timeout_s}s"
		bad=$((bad + 1))
	elif ((rc != 0 && bad == 0)); then
		why="exit status $rc"
		bad=1
	fi
	passed=$((passed + ok))
	failed=$((failed + bad))
	skipped=$((skipped + skip))
	if ((bad > 0)); then
		failed_bins+=("$name")
		echo "FAIL $name: $ok ok, $bad failed, $skip skipped (${secs}s)${why:+: $why}"
		sed 's/^/  | /' "$log"
		# Repeated at the end, where a shortened CI log still shows them.
		grep -E '^  FAIL |^    [^ ]+:[0-9]+: |^    would skip' "$log" | sed "s|^|  $name: |" >>"$checks"
	else
		echo "ok   $name: $ok ok, $skip skipped (${secs}s)"
		if [[ ${SP_TEST_VERBOSE:-0} == 1 ]]; then
			sed 's/^/  | /' "$log"
		else
			# Keep skips visible with their reasons.
			grep -E '^  skip |^    skipped: ' "$log" | sed 's/^/  | /'
		fi
	fi
done

if ((${#failed_bins[@]})); then
	echo "failed checks:"
	cat "$checks"
	echo "failed binaries: ${failed_bins[*]}"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
