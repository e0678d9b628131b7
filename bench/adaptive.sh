#!/usr/bin/env bash
# Adaptive sampling benchmark (issue 11): samples needed by `run --precision
# P` against a fixed 64 samples a row, and the share of rows whose adaptive
# mean lies inside the fixed-64 run's 95% confidence interval of that row.
# Goal: a third of the samples or fewer.
#
#   bash bench/adaptive.sh [REPEATS] [-- numalab run options...]
#
# Each repeat runs the same rows twice with the same seed: fixed (--samples
# 64) and adaptive (--precision $P, default 2, --min-samples 5,
# --max-samples 64). The options after `--` go to both runs and replace the
# defaults below, so the benchmark points at any backend or matrix, e.g.
#   bash bench/adaptive.sh 3 -- --backend sim ...   (the simulator, once it lands)
# Defaults: small probes on this machine (--size 4M --counts 1), the
# PNID -1 blocks (NB 0 and 1) x Mem {A,F} x CPU {A,F}: 8 rows.
#
# Environment: P (precision target, default 2), MIN (5), MAX (64).
#
# It also replays the rule on each fixed run's own samples (in the order
# they ran): samples needed and the share of prefix means inside the full
# run's CI95, free of the machine's drift between the two runs.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
shift || true
[ "${1:-}" = "--" ] && shift
if [ $# -gt 0 ]; then
    ARGS=("$@")
else
    ARGS=(--size 4M --counts 1 --pnid -1 --mem A,F --cpu A,F)
fi
P=${P:-2}
MIN=${MIN:-5}
MAX=${MAX:-64}
cargo build --release -q
NL=target/release/numalab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench: --precision $P (min $MIN, max $MAX) vs --samples $MAX; $REPEATS repeats; run options: ${ARGS[*]}"
for r in $(seq "$REPEATS"); do
    "$NL" run --samples "$MAX" --seed "$r" --out "$work/fixed-$r" "${ARGS[@]}" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; exit 1; }
    "$NL" run --precision "$P" --min-samples "$MIN" --max-samples "$MAX" --seed "$r" \
        --out "$work/adaptive-$r" "${ARGS[@]}" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; exit 1; }
done

python3 - "$work" "$REPEATS" "$P" "$MIN" <<'EOF'
import json, math, sys, statistics as st
from pathlib import Path

work, repeats, p, MIN = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

def rows(d):
    """Per row id: (n, mean, ci95 half-width, stop reason) from report.json."""
    doc = json.loads((d / "report.json").read_text())
    out = {}
    for r in doc["rows"]:
        if r["row"]["skip"] is not None or r["time"] is None:
            continue
        t = r["time"]
        out[r["row"]["id"]] = (r["n"], t["mean"], t["ci95"], (r.get("stop") or {}).get("reason"))
    return out, doc

fixed_n = adapt_n = inside = total = 0
reasons = {}
rel = []
for i in range(1, repeats + 1):
    f, fdoc = rows(work / f"fixed-{i}")
    a, adoc = rows(work / f"adaptive-{i}")
    for row, (n, mean, ci, _) in f.items():
        if row not in a:
            continue
        an, amean, aci, why = a[row]
        fixed_n += n
        adapt_n += an
        total += 1
        inside += abs(amean - mean) <= (ci or 0.0)
        reasons[why] = reasons.get(why, 0) + 1
        rel.append(100 * (ci or 0) / mean if mean else float("nan"))
        print(f"  repeat {i} row {row:2}: fixed n={n} mean {mean:.6f} ±{ci:.6f} ({100*ci/mean:.1f}%); "
              f"adaptive n={an} mean {amean:.6f} ({why}) {'inside' if abs(amean-mean) <= ci else 'OUTSIDE'}")
print(f"rows compared: {total} ({repeats} repeats)")
print(f"samples: adaptive {adapt_n} / fixed {fixed_n} = {adapt_n / fixed_n:.3f} "
      f"({'PASS' if adapt_n * 3 <= fixed_n else 'FAIL'}: goal <= 1/3)")
print(f"adaptive means inside the fixed-{max(1, fixed_n // max(1, total))} CI95: {inside}/{total} = {inside / total:.3f}")
print(f"why rows stopped: {reasons}")
print(f"fixed CI95 half-width as % of mean: median {st.median(rel):.2f}%, max {max(rel):.2f}%")

# Replay: the rule applied to each fixed run's own samples, in the order
# they were taken. The two runs above are minutes apart, so drift of the
# machine between them also moves the means; the replay has none of it
# and shows what the rule alone costs in accuracy.
def t975(df):
    """Student t 0.975 quantile: bisection on the CDF, the density
    integrated with Simpson's rule (no scipy here)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    f = lambda x: c * (1 + x * x / df) ** (-(df + 1) / 2)
    def cdf(t, m=2000):
        h = t / m
        return 0.5 + h / 3 * sum((1 if i in (0, m) else 4 if i % 2 else 2) * f(i * h) for i in range(m + 1))
    lo, hi = 0.0, 200.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < 0.975 else (lo, mid)
    return (lo + hi) / 2

T = {}
def rel_ci(v):
    n = len(v)
    if n < 2:
        return None
    m = st.mean(v)
    if n - 1 not in T:
        T[n - 1] = t975(n - 1)
    return T[n - 1] * st.stdev(v) / math.sqrt(n) / m * 100 if m else None

rp_n = rp_inside = rp_total = rp_full = 0
for i in range(1, repeats + 1):
    d = work / f"fixed-{i}"
    recs = [json.loads(l) for l in (d / "samples.jsonl").read_text().splitlines() if l.strip()]
    by = {}
    for r in sorted(recs, key=lambda r: r["seq"]):
        by.setdefault(r["row"], []).append(r["probe"]["timing"]["total_ns"] / 1e9)
    f, _ = rows(d)
    for row, v in by.items():
        k = next((k for k in range(MIN, len(v) + 1) if (rel_ci(v[:k]) or 1e300) <= p), len(v))
        _, mean, ci, _ = f[row]
        rp_n += k
        rp_full += len(v)
        rp_total += 1
        rp_inside += abs(st.mean(v[:k]) - mean) <= ci
print(f"replay on the fixed runs' own samples: samples {rp_n} / {rp_full} = {rp_n / rp_full:.3f}; "
      f"means inside the full run's CI95: {rp_inside}/{rp_total} = {rp_inside / rp_total:.3f}")
EOF
