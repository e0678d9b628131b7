#!/usr/bin/env bash
# Probe speed benchmark: numalab's rand-rw loop against the C reference
# (../shared/bench/refprobe.c, gcc -O2) on the same buffer, side by side, and
# the cost of self-observation.
#
#   bash bench/probe.sh [MIB] [PASSES] [ROUNDS]     (default 256 MiB, 2 passes, 7 rounds)
#
# Targets (issue 3): rand-rw ns/access within 5% of the C loop; instructions
# per access no higher than the C loop's; self-observation overhead < 1%.
# Time: runs alternate (ref, numalab, numalab without observation) ROUNDS
# times and the medians are compared. Instructions: valgrind --tool=callgrind
# on a 1 MiB buffer at 1 and 3 passes; the difference divided by the extra
# accesses is the loop's cost per access, free of set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-256}
PASSES=${2:-2}
ROUNDS=${3:-7}
REF_SRC=${NUMALAB_REFPROBE:-../shared/bench/refprobe.c}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -f "$REF_SRC" ] || { echo "bench: $REF_SRC not found (set NUMALAB_REFPROBE)" >&2; exit 2; }
gcc -O2 -o "$work/refprobe" "$REF_SRC"
cargo build --release -q
NL=target/release/numalab

ref_ns() { "$work/refprobe" "$1" "$2" | awk '{print $4}'; }
nl_ns() {
    "$NL" probe --size "${1}M" --counts "$2" --thp system --observe-every "$3" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["timing"]["ns_per_access"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "bench: rand-rw, ${MIB} MiB, ${PASSES} passes, ${ROUNDS} rounds (alternating)"
: >"$work/ref"; : >"$work/nl"; : >"$work/nl0"
for r in $(seq "$ROUNDS"); do
    a=$(ref_ns "$MIB" "$PASSES"); b=$(nl_ns "$MIB" "$PASSES" 4096); c=$(nl_ns "$MIB" "$PASSES" 0)
    echo "  round $r: refprobe $a ns, numalab $b ns, numalab (no observation) $c ns"
    echo "$a" >>"$work/ref"; echo "$b" >>"$work/nl"; echo "$c" >>"$work/nl0"
done
ref=$(median <"$work/ref"); nl=$(median <"$work/nl"); nl0=$(median <"$work/nl0")

ir() { # instructions of a command (callgrind total)
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$@" >/dev/null 2>"$work/cg.err"
    grep -E '^(summary|totals):' "$work/cg.out" | tail -1 | awk '{print $2}'
}
words=$((1024 * 1024 / 8))
ref_ipa=$(python3 -c "print(($(ir "$work/refprobe" 1 3) - $(ir "$work/refprobe" 1 1)) / (2 * $words))")
nl_ipa=$(python3 -c "print(($(ir "$NL" probe --size 1M --counts 3 --json) - $(ir "$NL" probe --size 1M --counts 1 --json)) / (2 * $words))")
nl0_ipa=$(python3 -c "print(($(ir "$NL" probe --size 1M --counts 3 --observe-every 0 --json) - $(ir "$NL" probe --size 1M --counts 1 --observe-every 0 --json)) / (2 * $words))")

python3 - "$ref" "$nl" "$nl0" "$ref_ipa" "$nl_ipa" "$nl0_ipa" <<'PY'
import sys
ref, nl, nl0, ref_ipa, nl_ipa, nl0_ipa = map(float, sys.argv[1:])
rows = [
    ("rand-rw ns/access vs refprobe (<= +5%)", f"{nl:.3f} vs {ref:.3f} ns", (nl / ref - 1) * 100, nl <= ref * 1.05),
    ("instructions/access vs refprobe (<=)", f"{nl0_ipa:.3f} vs {ref_ipa:.3f}", (nl0_ipa / ref_ipa - 1) * 100, nl0_ipa <= ref_ipa + 1e-9),
    ("self-observation time overhead (< 1%)", f"{nl:.3f} vs {nl0:.3f} ns", (nl / nl0 - 1) * 100, nl <= nl0 * 1.01),
    ("self-observation instructions (< 1%)", f"{nl_ipa:.4f} vs {nl0_ipa:.4f}", (nl_ipa / nl0_ipa - 1) * 100, nl_ipa <= nl0_ipa * 1.01),
]
bad = 0
for name, vals, pct, ok in rows:
    print(f"{'PASS' if ok else 'FAIL'}  {name:42s} {vals:28s} {pct:+.2f}%")
    bad += not ok
sys.exit(1 if bad else 0)
PY
