#!/usr/bin/env bash
# The newly-idle gate of a lab guest (issue #28). sched_balance_newidle()
# skips a domain while the CPU's avg_idle is below the domain's
# max_newidle_lb_cost (plus what the walk has cost so far); on hardware a
# balance attempt costs microseconds, under single-threaded TCG
# milliseconds, because the guest's clock runs on while the one emulator
# thread serves the other vCPUs. profiles/lab-tcg.toml takes its
# `kernel.newidle_cost_ms_per_cpu` from what this prints.
#
# In each guest (the 6.12 lab kernel booted with sched_verbose, which
# gives /sys/kernel/debug/sched/domains) `numalab load --percent 60` runs on
# every CPU and the probe (16 MiB x 4, unpinned) runs over and over; every
# 5 s for 40 s the script reads each domain's max_newidle_lb_cost and each
# CPU's avg_idle and max_idle_balance_cost. It prints, per guest and
# domain level, the cost per vCPU of the guest (min, quartiles and max
# over the CPUs and the readings from the second on) and the CPUs'
# avg_idle; then the cost per vCPU pooled over every guest and level, the
# quantiles profiles/lab-tcg.toml gives as `newidle_cost_ms_per_cpu`.
#
#   bash bench/lab_newidle_cost.sh [TOPOLOGY...]
#       (default: 2node 2node-smt 4node-smt 4node 8node-dl980)
#
# About 100 s per guest on one host core. Run it on a quiet host. A
# measurement, not a test: nothing here is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
topos=("$@")
((${#topos[@]})) || topos=(2node 2node-smt 4node-smt 4node 8node-dl980)
source bench/guest_numalab.sh
cat >"$tmp/script.sh" <<'SH'
n=$(grep -c ^processor /proc/cpuinfo)
d=/sys/kernel/debug/sched
[ -d $d/domains/cpu0 ] || { echo "no $d/domains: boot with sched_verbose"; exit 1; }
numalab load --percent 60 --duration 120 >/dev/null 2>&1 &
lp=$!
( while :; do numalab probe --size 16M --counts 4 >/dev/null 2>&1; done ) &
pp=$!
for i in 1 2 3 4 5 6 7 8; do
    sleep 5
    for f in $d/domains/cpu*/domain*; do
        c=${f#$d/domains/cpu}
        echo "@@ cost $i ${c%%/*} $(cat $f/name) $(cat $f/max_newidle_lb_cost)"
    done
    awk '/^cpu#/ {c = substr($1, 5); sub(",", "", c)}
         /\.avg_idle|\.max_idle_balance_cost/ {print "@@ rq", i, c, $1, $3}' i=$i $d/debug
done
kill $pp $lp
wait 2>/dev/null || true
SH
for t in "${topos[@]}"; do
    NUMALAB_LAB_APPEND=sched_verbose lab/guest --kernel pnid --bin "$bin" --timeout 900 \
        "$t" "$tmp/script.sh" >"$tmp/$t.out"
done
python3 - "$tmp" "${topos[@]}" <<'PY'
import statistics as st, sys
tmp, topos = sys.argv[1], sys.argv[2:]
def q5(v):
    v = sorted(v)
    n = len(v)
    return " ".join(f"{v[round(i * (n - 1) / 4)]:6.2f}" for i in range(5))
print("max_newidle_lb_cost per vCPU, ms, from the second reading on: min, quartiles, max")
print("guest        vCPUs  level  readings  per vCPU ms                          avg_idle ms (min q1 med q3 max)")
pooled = []
for t in topos:
    lines = [l.split() for l in open(f"{tmp}/{t}.out") if l.startswith("@@ ")]
    cpus = 1 + max(int(f[3]) for f in lines if f[1] == "rq")
    cost = {}
    for f in lines:
        if f[1] == "cost" and int(f[2]) >= 2:
            cost.setdefault(f[4], []).append(int(f[5]) / 1e6 / cpus)
    idle = [int(f[5]) / 1e6 for f in lines if f[1] == "rq" and f[4] == ".avg_idle" and int(f[2]) >= 2]
    for lvl, v in cost.items():
        pooled += v
        print(f"{t:<12} {cpus:5}  {lvl:<5}  {len(v):8}  {q5(v)}  {q5(idle)}")
print(f"{'all':<12} {'':5}  {'':<5}  {len(pooled):8}  {q5(pooled)}")
PY
