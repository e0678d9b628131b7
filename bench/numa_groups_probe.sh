#!/usr/bin/env bash
# NUMA balancing's group behaviour on numalab's threaded probe (issue #29):
# four threads on 64 MiB, --sharing shared, private and mix:25, then four
# processes on one 64 MiB shared memory segment without and with
# --shm-numa-balancing, 20 s each under `numalab trace`; then four 2-thread
# shared instances side by side (`numalab jobs 4 -- --threads 2`), under
# NB 1 floating and under NB 0 each pinned to a node of its own (`--home
# auto --home-cpu pin`, numactl's manual pinning); in the 4node-smt lab
# guest (4 nodes x
# 2 CPUs) with NB on and its scan knobs at 100/100/400 ms, on Debian's 6.1
# and the lab's 6.12 kernel side by side (one host core each). Prints per
# run and thread: group id, preferred node, faults private/shared, time per
# node, NUMA moves and swaps from the trace; per array: pages per node at
# the start and the end, when it settled; pages migrated. The figures of
# docs/numa-groups.md.
#
#   bash bench/numa_groups_probe.sh
#
# About 5 minutes on the 2-core machine with the lab kernel cached (it is
# built first when it is not, 10-15 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then
    echo "usage: bash bench/numa_groups_probe.sh (it takes no arguments)" >&2
    exit 2
fi
bash scripts/deps.sh
tmp=$(mktemp -d)
deb=
trap '[ -z "$deb" ] || kill -TERM -- "-$deb" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
target=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target "$target" --quiet
bin=target/$target/release/numalab
cat >"$tmp/script.sh" <<'SH'
D=/sys/kernel/debug/sched/numa_balancing
[ -d $D ] || mount -t debugfs none /sys/kernel/debug
echo 1 > /proc/sys/kernel/numa_balancing
echo 100 > $D/scan_delay_ms; echo 100 > $D/scan_period_min_ms; echo 400 > $D/scan_period_max_ms
export NUMALAB_STATE_DIR=/tmp/state
echo "@@kernel $(uname -r), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
for m in shared private mix:25 procs procs-balanced; do
    case $m in
    procs) o="--processes" ;;
    procs-balanced) o="--processes --shm-numa-balancing" ;;
    *) o="--sharing $m" ;;
    esac
    numalab trace -o /tmp/t.json -- numalab probe --threads 4 $o --size 64M \
        --counts 1 --min-time 20 --timeline-ms 500 --json > /tmp/p.json
    echo "@@probe $m"; cat /tmp/p.json; echo "@@trace $m"; cat /tmp/t.json
done
echo "@@jobs NB 1"
numalab jobs 4 --nb 1 --load 0 --size 32M --counts 1 --no-trace -- --threads 2 --sharing shared --min-time 20
echo "@@jobs pinned"
numalab jobs 4 --nb 0 --home auto --home-cpu pin --load 0 --size 32M --counts 1 --no-trace -- \
    --threads 2 --sharing shared --min-time 20
SH
start=$(date +%s)
kernel=$(bash lab/kernel/build | tail -n 1)
rc=0
setsid lab/guest --bin "$bin" --timeout 600 4node-smt "$tmp/script.sh" >"$tmp/deb.txt" 2>&1 &
deb=$!
lab/guest --bin "$bin" --kernel "$kernel" --timeout 600 4node-smt "$tmp/script.sh" \
    >"$tmp/lab.txt" 2>&1 || rc=$?
wait "$deb" || rc=$?
deb=
for f in "$tmp/deb.txt" "$tmp/lab.txt"; do
    python3 - "$f" <<'PY'
import json, sys
sec = None
probe = None
def pct(m):
    t = sum(m.values()) or 1
    return " ".join(f"{n}:{v * 100 / t:.0f}%" for n, v in sorted(m.items()))
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("@@"):
        sec = line[2:]
        if sec.startswith("kernel") or sec.startswith("jobs"):
            print(f"== {sec}")
        continue
    if sec and sec.startswith("jobs") and not line.startswith("lab/guest"):
        print("  " + line)
        continue
    if not line.startswith("{") or sec is None:
        continue
    r = json.loads(line)
    if sec.startswith("probe"):
        probe = r
        continue
    mode = sec.split()[1]
    tl = probe["timeline"]
    tasks = {t["pid"]: t for t in r["tasks"]}
    print(f"-- {mode}: placed {pct(probe['placement']['pages_per_node'])}, workload {probe['timing']['total_ns'] / 1e9:.1f} s, "
          f"pages migrated (vmstat) {tl['points'][-1]['vmstat'].get('numa_pages_migrated')}, "
          f"trace events lost {r['lost_events']}")
    for t in probe["threads"]:
        n = t["numa"]
        fp = sum((f.get("task_private") or 0) for f in n["faults"].values())
        fs = sum((f.get("task_shared") or 0) for f in n["faults"].values())
        tr = tasks.get(t["tid"], {})
        na = tr.get("numa", {})
        print(f"   thread {t['index']} tid {t['tid']}: group {n['numa_group_id']}, preferred "
              f"{n['numa_preferred_nid']}, faults private {fp} shared {fs}, time "
              f"{pct(t['residency']['node_ns'])}, cross-node moves {t['migrations']['cross_node']}, "
              f"NUMA moves {na.get('move_numa')} swaps {na.get('swap_numa')} "
              f"stuck {na.get('stick_numa')}")
    pts = tl["points"]
    for i, a in enumerate(tl["arrays"]):
        last = next((p["pages"][i] for p in reversed(pts)
                     if sum(p["pages"][i].values()) * 10 >= 9 * (sum(p["pages"][i].values()) + p["unplaced"][i])
                     and p["pages"][i]), {})
        # settled: as numalab's timeline::settled_ns (under 1% of the
        # array a second changed node, for at least 3 intervals to the end)
        ok = [p for p in pts if p["pages"][i] and p["unplaced"][i] * 10 <= sum(p["pages"][i].values()) + p["unplaced"][i]]
        settled = ok[0]["t_ns"] if ok else None
        for x, y in zip(ok, ok[1:]):
            moved = sum(max(0, v - x["pages"][i].get(n, 0)) for n, v in y["pages"][i].items())
            tot = max(1, sum(y["pages"][i].values()))
            dt = max(1, y["t_ns"] - x["t_ns"]) / 1e9
            if moved / tot / dt > 0.01:
                settled = None
            elif settled is None:
                settled = x["t_ns"]
        quiet = sum(1 for p in ok if settled is not None and p["t_ns"] > settled)
        when = f"settled at {settled / 1e9:.1f} s" if settled is not None and quiet >= 3 else "not settled"
        print(f"   array {a}: start {pct(pts[0]['pages'][i])}, end {pct(last)}, {when}")
PY
done
echo "bench: done in $(($(date +%s) - start)) s, exit $rc"
exit "$rc"
