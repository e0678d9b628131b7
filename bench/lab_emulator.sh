#!/usr/bin/env bash
# What single-threaded TCG does to a lab guest's time (issue #28: the
# move-rate gap between the lab and the sim). In each guest the probe runs
# pinned to CPU 0, alone and then with `numalab load` on every other CPU at
# 100%, 60% and 30%, and the guest's local timer interrupts (LOC in
# /proc/interrupts) are counted over each loaded probe run. It prints, per
# guest and load:
#   - the probe's time per access, and its slowdown against running alone;
#   - the local timer interrupts per second of guest time on the probe's
#     CPU, busy throughout, where they are the scheduler's ticks (#     a second on a real machine); and on a loaded CPU, where they are its
#     ticks while busy (250 x the share at most) plus its worker's wake-up
#     timer (one a period: 48.5 a second), for reference.
# A guest whose ticks and probe slow alike runs in dilated time: its
# balancer's decisions per unit of the probe's work are a real kernel's,
# and only its per-second rates differ. docs/sim-validation.md ("The
# emulator's time") quotes what this printed.
#
#   bash bench/lab_emulator.sh [TOPOLOGY...]    (default: 2node 4node)
#
# About 90 s per guest on one host core, on the 6.12 lab kernel (built and
# cached by lab/kernel/build if it is not yet). Run it on a quiet host: the
# guest's one emulator thread shares the host's cores with everything else.
# A measurement, not a test: nothing here is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
topos=("$@")
((${#topos[@]})) || topos=(2node 4node)
source bench/guest_numalab.sh
cat >"$tmp/script.sh" <<'SH'
n=$(grep -c ^processor /proc/cpuinfo)
probe() {
    taskset -c 0 numalab probe --size 16M --counts 4 --json 2>/dev/null |
        tr ',' '\n' | grep -m1 '"ns_per_access"' | cut -d: -f2
}
probe >/dev/null # the first run pays for the page cache and the binary
echo "@@ alone $(probe)"
for pct in 100 60 30; do
    numalab load --percent $pct --cpus 1-$((n - 1)) --duration 120 >/dev/null 2>&1 &
    lp=$!
    sleep 2
    u0=$(cut -d' ' -f1 /proc/uptime)
    l0=$(grep LOC /proc/interrupts)
    ns=$(probe)
    u1=$(cut -d' ' -f1 /proc/uptime)
    l1=$(grep LOC /proc/interrupts)
    echo "@@ load $pct $ns $u0 $u1 | $l0 | $l1"
    kill $lp
    wait $lp 2>/dev/null || true
done
SH
for t in "${topos[@]}"; do
    lab/guest --kernel pnid --bin "$bin" --timeout 900 "$t" "$tmp/script.sh" >"$tmp/$t.out"
done
python3 - "$tmp" "${topos[@]}" <<'PY'
import sys
tmp, topos = sys.argv[1], sys.argv[2:]
print("guest   vCPUs  load %  probe ns/access  slowdown  timer irqs/s, probe's CPU (ticks: 250)  loaded CPU (ticks <= 250 x load, + 48.5)")
for t in topos:
    alone = None
    for line in open(f"{tmp}/{t}.out"):
        if not line.startswith("@@ "):
            continue
        f = line[3:].split()
        if f[0] == "alone":
            alone = float(f[1])
            print(f"{t:<7} {'':>5}  {0:>6}  {alone:15.0f}  {1:8.2f}")
            continue
        pct, ns, u0, u1 = int(f[1]), float(f[2]), float(f[3]), float(f[4])
        locs = line.split("|")[1:3]
        counts = [[int(x) for x in s.split()[1:] if x.isdigit()] for s in locs]
        d = [b - a for a, b in zip(*counts)]
        secs = u1 - u0
        loaded = sum(d[1:]) / len(d[1:]) / secs
        print(f"{t:<7} {len(d):>5}  {pct:>6}  {ns:15.0f}  {ns / alone:8.2f}  {d[0] / secs:39.0f}"
              f"  {loaded:39.0f}")
PY
