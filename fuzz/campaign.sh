#!/usr/bin/env bash
# Long fuzzing runs for docs/reliability.md. Not part of CI.
#   fuzz/campaign.sh ENGINE HARNESS SECONDS OUTDIR
# ENGINE is libfuzzer or afl. Binaries come from `zig build fuzz`
# (zig-out/fuzz/ENGINE/HARNESS), seeds from corpus/HARNESS (only read).
# Appends one tab-separated line to OUTDIR/results.tsv:
#   harness engine cpu_seconds executions coverage crashes hangs leaks corpus
# Runs under `nice -n 19` so that it only takes otherwise idle CPU.
set -euo pipefail
engine=$1 name=$2 secs=$3 out=$4
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/zig-out/fuzz/$engine/$name
seeds=$root/corpus/$name
[[ -x $bin ]] || { echo "campaign: $bin missing; run zig build fuzz" >&2; exit 2; }
mkdir -p "$out"
# A private copy: rebuilding zig-out must not swap the binary mid-run.
cp "$bin" "$out/$engine-$name.bin"
bin=$out/$engine-$name.bin
dict=()
for d in "$root/fuzz/$name.dict" "$root/fuzz/${name%%_*}.dict"; do
	if [[ -f $d ]]; then
		dict=("$d")
		break
	fi
done
work=$out/$engine-$name
mkdir -p "$work"
timef=$out/$engine-$name.time
crashes=0 hangs=0 leaks=0 execs=0 cov=? corpus=0
if [[ $engine == libfuzzer ]]; then
	mkdir -p "$work/corpus" "$work/artifacts"
	log=$out/$engine-$name.log
	rc=0
	/usr/bin/time -f '%U %S' -o "$timef" nice -n 19 "$bin" -max_total_time="$secs" \
		-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/artifacts/" ${dict:+-dict="${dict[0]}"} \
		"$work/corpus" "$seeds" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 | sed 's/cov: \([0-9]*\) ft: \([0-9]*\)/\1 edges \/ \2 features/')
	crashes=$(find "$work/artifacts" -name 'crash-*' | wc -l)
	hangs=$(find "$work/artifacts" -name 'timeout-*' | wc -l)
	leaks=$(find "$work/artifacts" -name 'leak-*' | wc -l)
	# Minimise: what the run found plus the seeds, merged into one set.
	mkdir -p "$work/min"
	"$bin" -merge=1 "$work/min" "$seeds" "$work/corpus" >"$work/merge.log" 2>&1 || rc=$?
	corpus=$(find "$work/min" -type f | wc -l)
	((rc == 0)) || echo "campaign: $name libFuzzer exited $rc (log $log)" >&2
else
	export AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
	/usr/bin/time -f '%U %S' -o "$timef" nice -n 19 afl-fuzz -V "$secs" -i "$seeds" -o "$work" \
		${dict:+-x "${dict[0]}"} -- "$bin" >"$out/$engine-$name.log" 2>&1 </dev/null || true
	st=$work/default/fuzzer_stats
	execs=$(sed -n 's/^execs_done *: *//p' "$st")
	cov="$(sed -n 's/^edges_found *: *//p' "$st") edges ($(sed -n 's/^bitmap_cvg *: *//p' "$st") of map)"
	crashes=$(find "$work/default/crashes" -name 'id:*' | wc -l)
	hangs=$(find "$work/default/hangs" -name 'id:*' | wc -l)
	corpus=$(sed -n 's/^corpus_count *: *//p' "$st")
fi
cpu=$(awk '{printf "%.0f", $1 + $2}' "$timef")
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$engine" "$cpu" "$execs" "$cov" \
	"$crashes" "$hangs" "$leaks" "$corpus" | tee -a "$out/results.tsv"
