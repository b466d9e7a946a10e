#!/usr/bin/env bash
# Runs the demo program installed by `zig build examples`.
set -euo pipefail
mkdir -p "$1"
bin_dir=$(cd "$1" && pwd)
for name in demo_synthetic demo; do
	if [[ -x $bin_dir/$name ]]; then
		echo "demo: running $bin_dir/$name"
		exec "$bin_dir/$name"
	fi
done
echo "demo: no demo program yet (examples/demo_synthetic.c is not listed in src/sources.zig 'examples')."
echo "demo: the library itself was built into zig-out/lib and zig-out/include."
