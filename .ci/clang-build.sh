#!/usr/bin/env bash
# Builds and runs what zig cc cannot: ASan/UBSan tests, coverage, libFuzzer
# and AFL++ binaries, all with the system clang-14 and the file lists from the
# manifest that build.zig writes (bash arrays SP_PURE_LAYERS, SP_PURE_SRCS,
# SP_OS_SRCS, SP_TEST_SUPPORT, SP_PURE_TESTS, SP_OS_TESTS, SP_FUZZ,
# SP_FUZZ_OS, SP_EXAMPLES, SP_CFLAGS, SP_PURE_LIBS, SP_LIBS, SP_TEST_LIBS,
# SP_DEFINES). Pure harnesses (SP_FUZZ) link the pure layers; OS harnesses
# (SP_FUZZ_OS) the whole library and libunwind.
#
# usage: clang-build.sh MANIFEST ROOT PREFIX MODE [ARGS]
#   MODE: sanitize | coverage | coverage-html | fuzz | fuzz-smoke SECS AFL_SECS
set -euo pipefail

manifest=$1
root=$(cd "$2" && pwd)
mkdir -p "$3"
prefix=$(cd "$3" && pwd)
mode=$4
shift 4
# shellcheck disable=SC1090
source "$manifest"
cd "$root"

CC=clang-14
work=$root/.zig-cache/clang/$mode
jobs=$(nproc)

need() {
	if ! command -v "$1" >/dev/null; then
		echo "$mode: $1 not found. Install it with: apt-get install -y $2" >&2
		exit 1
	fi
}

# Commands queued with add_job run in parallel at run_jobs.
jobfile=$(mktemp)
trap 'rm -f "$jobfile"' EXIT
add_job() {
	printf '%q ' "$@" >>"$jobfile"
	echo >>"$jobfile"
}
run_jobs() {
	if [[ -s $jobfile ]]; then
		if ! xargs -P "$jobs" -d '\n' -I{} bash -c '{}' <"$jobfile"; then
			echo "$mode: build failed" >&2
			exit 1
		fi
	fi
	: >"$jobfile"
}

obj_name() {
	local s=${1%.c}
	echo "${s//\//_}.o"
}

# build_tree OUT: objects, two archives, tests, replays and examples, with the
# compile flags in CFLAGS_X and link flags in LDFLAGS_X. libpure.a (pure
# layers and test support) and libfull.a only serve the tests.
build_tree() {
	local out=$1 src
	rm -rf "$out"
	mkdir -p "$out/obj" "$out/tests" "$out/bin"
	# The tree also stands in for the install prefix (the docs check builds
	# against $bin/../lib and ../include): the headers, and the zig-installed
	# library and pkg-config files (build.zig makes these steps install first).
	ln -s "$prefix/lib" "$out/lib"
	ln -s "$root/include" "$out/include"
	local common=("${SP_CFLAGS[@]}" "${SP_DEFINES[@]}" -Iinclude -Isrc -Itests/support "${CFLAGS_X[@]}")
	for src in "${SP_PURE_SRCS[@]}" "${SP_TEST_SUPPORT[@]}" "${SP_OS_SRCS[@]}" tests/support/harness.c; do
		add_job "$CC" "${common[@]}" -c "$src" -o "$out/obj/$(obj_name "$src")"
	done
	run_jobs
	local pure_objs=() os_objs=()
	for src in "${SP_PURE_SRCS[@]}" "${SP_TEST_SUPPORT[@]}"; do pure_objs+=("$out/obj/$(obj_name "$src")"); done
	for src in "${SP_OS_SRCS[@]}"; do os_objs+=("$out/obj/$(obj_name "$src")"); done
	ar rcs "$out/libpure.a" "${pure_objs[@]}"
	ar rcs "$out/libfull.a" "${pure_objs[@]}" "${os_objs[@]}"
	TEST_BINS=()
	local name dir
	for src in "${SP_PURE_TESTS[@]}" "${SP_OS_TESTS[@]}"; do
		dir=$(basename "$(dirname "$src")")
		name=${dir}_$(basename "${src%.c}")
		TEST_BINS+=("$out/tests/$name")
	done
	for src in "${SP_PURE_TESTS[@]}"; do
		dir=$(basename "$(dirname "$src")")
		add_job "$CC" "${common[@]}" "$src" "$out/obj/tests_support_harness.o" "$out/libpure.a" \
			"${SP_PURE_LIBS[@]}" "${LDFLAGS_X[@]}" -o "$out/tests/${dir}_$(basename "${src%.c}")"
	done
	for src in "${SP_OS_TESTS[@]}"; do
		dir=$(basename "$(dirname "$src")")
		add_job "$CC" "${common[@]}" "$src" "$out/obj/tests_support_harness.o" "$out/libfull.a" \
			"${SP_TEST_LIBS[@]}" "${LDFLAGS_X[@]}" -o "$out/tests/${dir}_$(basename "${src%.c}")"
	done
	for name in "${SP_FUZZ[@]}"; do
		TEST_BINS+=("$out/tests/replay_$name")
		add_job "$CC" "${common[@]}" "-DSP_FUZZ_NAME=\"$name\"" "fuzz/$name.c" fuzz/replay_main.c \
			"$out/libpure.a" "${SP_PURE_LIBS[@]}" "${LDFLAGS_X[@]}" -o "$out/tests/replay_$name"
	done
	for name in "${SP_FUZZ_OS[@]}"; do
		TEST_BINS+=("$out/tests/replay_$name")
		add_job "$CC" "${common[@]}" "-DSP_FUZZ_NAME=\"$name\"" "fuzz/$name.c" fuzz/replay_main.c \
			"$out/libfull.a" "${SP_TEST_LIBS[@]}" "${LDFLAGS_X[@]}" -o "$out/tests/replay_$name"
	done
	for src in "${SP_EXAMPLES[@]}"; do
		add_job "$CC" "${common[@]}" "$src" "$out/libfull.a" "${SP_LIBS[@]}" "${LDFLAGS_X[@]}" \
			-o "$out/bin/$(basename "${src%.c}")"
	done
	run_jobs
}

run_tree() {
	local out=$1
	shift
	bash tests/run_tests.sh --root="$root" --bin-dir="$out/bin" "$@" "${TEST_BINS[@]}"
}

sanitize() {
	need "$CC" clang-14
	CFLAGS_X=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
	LDFLAGS_X=(-fsanitize=address,undefined)
	echo "sanitize: building ${#SP_PURE_TESTS[@]} pure + ${#SP_OS_TESTS[@]} os tests and ${#SP_FUZZ[@]} replays with $CC ASan+UBSan"
	build_tree "$work"
	# No detect_stack_use_after_return: its fake frames hide the real stack from
	# the tests that unwind themselves.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	run_tree "$work"
}

# Per-layer line/branch totals from `llvm-cov export -summary-only`.
layer_summary() {
	python3 - "$1" "${SP_PURE_LAYERS[@]}" <<'PY'
import json, sys, collections
data = json.load(open(sys.argv[1]))
acc = collections.OrderedDict()
for f in data["data"][0]["files"]:
    parts = f["filename"].split("/")
    if "src" not in parts:
        continue
    i = len(parts) - 1 - parts[::-1].index("src")
    layer = "/".join(parts[i:i + 2])
    s = f["summary"]
    a = acc.setdefault(layer, [0, 0, 0, 0])
    a[0] += s["lines"]["covered"]; a[1] += s["lines"]["count"]
    a[2] += s["branches"]["covered"]; a[3] += s["branches"]["count"]
pure = tuple("src/" + layer for layer in sys.argv[2:])
pct = lambda c, n: f"{100.0 * c / n:6.2f}%" if n else "     -"
print(f"{'layer':<16}{'lines':>18}{'branches':>20}")
for layer in sorted(acc, key=lambda l: (l not in pure, l)):
    lc, ln, bc, bn = acc[layer]
    tag = " (pure)" if layer in pure else ""
    print(f"{layer:<16}{pct(lc, ln)} {lc:>5}/{ln:<5}{pct(bc, bn)} {bc:>5}/{bn:<5}{tag}")
PY
}

coverage() {
	need "$CC" clang-14
	need llvm-profdata-14 llvm-14
	need llvm-cov-14 llvm-14
	CFLAGS_X=(-g -O0 -fprofile-instr-generate -fcoverage-mapping)
	LDFLAGS_X=(-fprofile-instr-generate)
	local out=$root/.zig-cache/clang/coverage
	build_tree "$out"
	rm -rf "$out/prof"
	mkdir -p "$out/prof"
	export LLVM_PROFILE_FILE="$out/prof/%p-%4m.profraw"
	local status=0
	run_tree "$out" || status=$?
	shopt -s nullglob
	local raws=("$out"/prof/*.profraw)
	if ((${#raws[@]} == 0)); then
		echo "coverage: no profiles were written (no tests listed?)"
		return $status
	fi
	llvm-profdata-14 merge -sparse "${raws[@]}" -o "$out/merged.profdata"
	# llvm-cov takes the first binary bare and the others after -object.
	local objs=() bin
	for bin in "${TEST_BINS[@]}"; do
		[[ -x $bin ]] || continue
		if ((${#objs[@]})); then objs+=(-object "$bin"); else objs+=("$bin"); fi
	done
	local pure_files=() pure_dirs=("${SP_PURE_LAYERS[@]/#/src/}")
	mapfile -t pure_files < <(find "${pure_dirs[@]}" -name '*.[ch]' 2>/dev/null | sort)
	echo
	echo "coverage of the pure layers (${pure_dirs[*]}):"
	llvm-cov-14 report -instr-profile="$out/merged.profdata" "${objs[@]}" \
		-show-region-summary=false -show-instantiation-summary=false "${pure_files[@]}"
	echo
	llvm-cov-14 export -summary-only -instr-profile="$out/merged.profdata" "${objs[@]}" \
		>"$out/summary.json"
	layer_summary "$out/summary.json"
	if [[ $mode == coverage-html ]]; then
		rm -rf "$prefix/coverage"
		local all_files=()
		mapfile -t all_files < <(find src -name '*.[ch]' | sort)
		llvm-cov-14 show -format=html -output-dir="$prefix/coverage" -show-branches=count \
			-show-line-counts-or-regions -instr-profile="$out/merged.profdata" "${objs[@]}" \
			"${all_files[@]}"
		echo "coverage-html: $prefix/coverage/index.html"
	fi
	return $status
}

# Fuzzer builds share fuzz/NAME.c; -Werror stays with the zig build.
# fuzz_archives DIR COMPILER FLAGS...: DIR/libpure.a (pure layers and test
# support) and, when OS harnesses are listed, DIR/libfull.a (plus the OS layers).
fuzz_archives() {
	local dir=$1 cc=$2 src
	shift 2
	local pure_objs=() os_objs=()
	for src in "${SP_PURE_SRCS[@]}" "${SP_TEST_SUPPORT[@]}"; do
		pure_objs+=("$dir/$(obj_name "$src")")
		add_job "$cc" "$@" -c "$src" -o "$dir/$(obj_name "$src")"
	done
	if ((${#SP_FUZZ_OS[@]})); then
		for src in "${SP_OS_SRCS[@]}"; do
			os_objs+=("$dir/$(obj_name "$src")")
			add_job "$cc" "$@" -c "$src" -o "$dir/$(obj_name "$src")"
		done
	fi
	run_jobs
	rm -f "$dir/libpure.a" "$dir/libfull.a"
	ar rcs "$dir/libpure.a" "${pure_objs[@]}"
	((${#os_objs[@]} == 0)) || ar rcs "$dir/libfull.a" "${pure_objs[@]}" "${os_objs[@]}"
}

# The archive and libraries harness NAME links, as words: pure or OS.
fuzz_link() {
	local dir=$1 name=$2 os
	for os in "${SP_FUZZ_OS[@]}"; do
		if [[ $os == "$name" ]]; then
			echo "$dir/libfull.a ${SP_TEST_LIBS[*]}"
			return
		fi
	done
	echo "$dir/libpure.a ${SP_PURE_LIBS[*]}"
}

fuzz_build() {
	need "$CC" clang-14
	local flags=() f
	for f in "${SP_CFLAGS[@]}"; do [[ $f == -Werror ]] || flags+=("$f"); done
	flags+=("${SP_DEFINES[@]}" -Iinclude -Isrc -Itests/support -g -O1 -fno-omit-frame-pointer)
	local lf=$prefix/fuzz/libfuzzer afl=$prefix/fuzz/afl name link
	local all=("${SP_FUZZ[@]}" "${SP_FUZZ_OS[@]}")
	mkdir -p "$lf" "$afl" "$work/lf" "$work/afl"
	if ((${#all[@]} == 0)); then
		echo "fuzz: no harnesses listed in fuzz/harnesses.zig"
		return 0
	fi
	fuzz_archives "$work/lf" "$CC" "${flags[@]}" -fsanitize=fuzzer-no-link,address,undefined
	for name in "${all[@]}"; do
		read -ra link <<<"$(fuzz_link "$work/lf" "$name")"
		add_job "$CC" "${flags[@]}" -fsanitize=fuzzer,address,undefined "fuzz/$name.c" \
			"${link[@]}" -o "$lf/$name"
	done
	run_jobs
	echo "fuzz: libFuzzer binaries in $lf: ${all[*]}"

	if ! command -v afl-clang-fast >/dev/null; then
		echo "fuzz: afl-clang-fast not found, skipping AFL++ (apt-get install -y afl++)" >&2
		AFL_BUILT=0
		return 0
	fi
	export AFL_QUIET=1
	fuzz_archives "$work/afl" afl-clang-fast "${flags[@]}"
	local driver=(/usr/lib/afl/libAFLDriver.a) linker=afl-clang-fast++
	if [[ ! -f /usr/lib/afl/libAFLDriver.a ]]; then
		driver=("$work/afl/afl_driver.o")
		linker=afl-clang-fast
		afl-clang-fast "${flags[@]}" -c fuzz/afl_driver.c -o "$work/afl/afl_driver.o"
	fi
	for name in "${all[@]}"; do
		add_job afl-clang-fast "${flags[@]}" -c "fuzz/$name.c" -o "$work/afl/harness_$name.o"
	done
	run_jobs
	# libAFLDriver.a is C++: link with the C++ driver, compile as C above.
	for name in "${all[@]}"; do
		read -ra link <<<"$(fuzz_link "$work/afl" "$name")"
		add_job "$linker" "$work/afl/harness_$name.o" "${driver[@]}" "${link[@]}" -o "$afl/$name"
	done
	run_jobs
	AFL_BUILT=1
	echo "fuzz: AFL++ binaries in $afl (driver: ${driver[*]})"
}

fuzz_smoke() {
	local secs=${1:-20} afl_secs=${2:-5} name failed=0
	fuzz_build
	local all=("${SP_FUZZ[@]}" "${SP_FUZZ_OS[@]}")
	((${#all[@]})) || return 0
	local lf=$prefix/fuzz/libfuzzer afl=$prefix/fuzz/afl runs=$work/runs
	rm -rf "$runs"
	mkdir -p "$runs"
	for name in "${all[@]}"; do
		local seeds=corpus/$name dict=() adict=() log=$runs/$name.libfuzzer.log
		# fuzz/NAME.dict, else the dictionary of its family (spool_decode -> spool.dict).
		local d
		for d in "fuzz/$name.dict" "fuzz/${name%%_*}.dict"; do
			if [[ -f $d ]]; then
				dict=(-dict="$d")
				adict=(-x "$d")
				break
			fi
		done
		mkdir -p "$runs/lf-$name" "$seeds"
		echo "fuzz-smoke: libFuzzer $name for ${secs}s"
		# New inputs go to the scratch dir; corpus/ is only read.
		# The exporters must stay bounded by the profile: a tighter memory cap.
		local rss=2048
		[[ $name == profile_export ]] && rss=512
		if "$lf/$name" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb="$rss" \
			-artifact_prefix="$runs/$name-" "${dict[@]}" "$runs/lf-$name" "$seeds" >"$log" 2>&1; then
			grep -E 'stat::number_of_executed_units|stat::peak_rss_mb|cov:' "$log" | tail -n 3 | sed 's/^/  /'
		else
			failed=1
			echo "fuzz-smoke: libFuzzer $name FAILED (log $log):" >&2
			tail -n 40 "$log" | sed 's/^/  | /' >&2
		fi
		[[ ${AFL_BUILT:-0} == 1 ]] || continue
		local in=$seeds
		if [[ -z $(ls -A "$seeds") ]]; then
			in=$runs/afl-seed-$name
			mkdir -p "$in"
			printf 'x' >"$in/seed"
		fi
		echo "fuzz-smoke: AFL++ $name for ${afl_secs}s"
		if AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
			AFL_NO_AFFINITY=1 AFL_QUIET=1 AFL_SKIP_BIN_CHECK=0 \
			timeout $((afl_secs + 60)) afl-fuzz -V "$afl_secs" -i "$in" -o "$runs/afl-$name" \
			"${adict[@]}" -- "$afl/$name" >"$runs/$name.afl.log" 2>&1 </dev/null; then
			local stats=$runs/afl-$name/default/fuzzer_stats
			[[ -f $stats ]] && grep -E '^(execs_done|corpus_count|bitmap_cvg|saved_crashes)' "$stats" |
				tr -s ' ' | sed 's/^/  /'
			if compgen -G "$runs/afl-$name/default/crashes/id:*" >/dev/null; then
				failed=1
				echo "fuzz-smoke: AFL++ $name found crashes in $runs/afl-$name/default/crashes" >&2
			fi
		else
			failed=1
			echo "fuzz-smoke: AFL++ $name FAILED (log $runs/$name.afl.log):" >&2
			tail -n 30 "$runs/$name.afl.log" | sed 's/^/  | /' >&2
		fi
	done
	((failed == 0)) && echo "fuzz-smoke: ${#all[@]} harnesses ran clean"
	return $failed
}

case $mode in
sanitize) sanitize ;;
coverage | coverage-html) coverage ;;
fuzz) fuzz_build ;;
fuzz-smoke) fuzz_smoke "$@" ;;
*)
	echo "clang-build.sh: unknown mode $mode" >&2
	exit 2
	;;
esac
