#!/usr/bin/env bash
# What single-threaded TCG does to the shape of `numalab load` (#28: the
# emulator's reshaping of the lab's load, the one lab-side effect the sim
# did not model). In each guest, `numalab load --percent 60` runs on every
# CPU, first alone, then with a floating probe looping beside it (as in the
# lab comparisons), and the guest's own tracefs records each worker's
# wake-ups (sched_wakeup) and sleeps (sched_switch away from it in state
# S) for 12 s of guest time. The worker's plan is fixed: a 20.618 ms
# period, busy for the first 60%. Per guest and phase it prints:
#   - busy share, idle periods a second and their mean (the figures
#     docs/sim-validation.md, "The newly-idle gate", took from schedstat);
#   - how late each busy part ends past its planned end (the stop's
#     overshoot, U) and how late each wake-up comes past its period's
#     start (W), as quantiles in ms, and the share of periods with no idle
#     part at all (the worker saw its deadline only after the next period
#     had begun);
#   - the quantiles `profiles/lab-tcg.toml` takes as `emulator.load."N"`,
#     pooled per guest size (vCPUs) over the guests given, with the probe
#     beside the load.
# The plan's period grid is the load's own: its start line names its epoch
# on CLOCK_MONOTONIC, the clock the trace is kept in, and worker k (CPU k)
# starts k/n of a period after it (staggered phases).
#
#   bash bench/lab_load_shape.sh [TOPOLOGY...]   (default: 2node 4node, the
#   guests the lab profile's 4- and 8-vCPU figures come from)
#
# With LAB_OUT=DIR the guests' raw output is kept there (DIR/TOPOLOGY.out),
# for `python3 bench/lab_load_shape.py DIR TOPOLOGY...` to read again.
#
# About 70 s per guest on one host core, on the 6.12 lab kernel. Run it
# on a quiet host. A measurement, not a test: nothing here is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
topos=("$@")
((${#topos[@]})) || topos=(2node 4node)
source bench/guest_numalab.sh
cat >"$tmp/script.sh" <<'SH'
n=$(grep -c ^processor /proc/cpuinfo)
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
record() { # PHASE: 12 s of the load workers' wake-ups and sleeps
    echo 0 >$T/tracing_on
    echo >$T/trace
    echo 16384 >$T/buffer_size_kb
    echo mono >$T/trace_clock
    echo 'sched:sched_switch sched:sched_wakeup' >$T/set_event
    numalab load --percent 60 --duration 18 >/dev/null 2>/tmp/load.err &
    lp=$!
    sleep 3
    echo "@@ epoch $1 $(grep -o 'CLOCK_MONOTONIC [0-9.]*' /tmp/load.err | cut -d' ' -f2)"
    # The workers: every thread but the main one (which sleeps 20 ms at
    # a time, on any CPU).
    tids=$(ls /proc/$lp/task | grep -vx "$lp" | tr '\n' ' ')
    echo 1 >$T/tracing_on
    sleep 12
    echo 0 >$T/tracing_on
    wait $lp 2>/dev/null || true
    echo "@@ phase $1 $n"
    awk -v tids="$tids" -v ph="$1" '
        BEGIN { split(tids, a, " "); for (i in a) w[a[i]] = 1 }
        / sched_wakeup: / {
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^pid=/) p = substr($i, 5)
                if ($i ~ /^target_cpu=/) c = substr($i, 12) + 0
                if ($i ~ /:$/ && $i ~ /^[0-9.]+:$/) t = substr($i, 1, length($i) - 1)
            }
            if (p in w) print "@@ W", ph, c, t
        }
        / sched_switch: / {
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^prev_pid=/) p = substr($i, 10)
                if ($i ~ /^prev_state=/) s = substr($i, 12)
                if ($i ~ /^\[[0-9]+\]$/) c = substr($i, 2, length($i) - 2) + 0
                if ($i ~ /^[0-9.]+:$/) t = substr($i, 1, length($i) - 1)
            }
            if ((p in w) && s ~ /^S/) print "@@ S", ph, c, t
        }' $T/trace
}
record alone
( while :; do numalab probe --size 16M --counts 4 >/dev/null 2>&1; done ) &
pp=$!
sleep 2
record probe
kill $pp
wait 2>/dev/null || true
SH
out=${LAB_OUT:-$tmp}
mkdir -p "$out"
for t in "${topos[@]}"; do
    lab/guest --kernel pnid --bin "$bin" --timeout 600 "$t" "$tmp/script.sh" >"$out/$t.out"
done
python3 bench/lab_load_shape.py "$out" "${topos[@]}"
