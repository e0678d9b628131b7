#!/usr/bin/env bash
# Orchestration overhead of `numalab run --quick` (issue 4 target: run wall
# time / sum of the probe processes' wall times < 1.03). Also prints the ratio
# to the probes' timed loops alone, which additionally counts each probe's
# process start and untimed warm-up.
#
#   bash bench/run_overhead.sh [extra numalab run options]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
line=$(target/release/numalab run --quick --out "$out/run" "$@" 2>/dev/null | grep '^orchestration:')
echo "$line"
ratio=$(sed -E 's/.*= ([0-9.]+) \(timed.*/\1/' <<<"$line")
python3 -c "import sys; r=float('$ratio'); print(('PASS' if r < 1.03 else 'FAIL') + f'  run wall / probe processes = {r:.3f} (< 1.03)'); sys.exit(0 if r < 1.03 else 1)"
