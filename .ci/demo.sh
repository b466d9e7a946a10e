#!/usr/bin/env bash
# `zig build demo`: runs examples/demo.sh with the examples just built.
set -euo pipefail
bin_dir=$(cd "$1" && pwd)
exec bash "$(dirname "$0")/../examples/demo.sh" "$bin_dir"
