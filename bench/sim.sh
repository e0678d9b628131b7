#!/usr/bin/env bash
# Simulator speed (issue 10 targets, on this 2-core machine):
#  1. the RFC's full matrix, 36 rows x 36 samples, on the EPYC 7551 preset:
#     under 10 s wall;
#  2. a synthetic 1024-CPU, 16-node machine (2 sockets x 8 nodes x 4 LLCs x
#     8 cores x 2 threads, SLIT 10/16/32): at least 1000x real time, i.e.
#     simulated probe seconds per wall second.
#  3. `jobs --backend sim` (no target yet, reported): 256 jobs on the EPYC
#     preset and 1024 jobs on the synthetic machine, both under 50% load,
#     as simulated job-seconds (the jobs' CPU time) per wall second.
#
#   bash bench/sim.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=target/release/numalab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== EPYC 7551 (8 nodes, 128 CPUs): 36 rows x 36 samples"
start=$(date +%s.%N)
$bin run --backend sim --preset epyc-7551-8n --samples 36 --out "$tmp/epyc" >"$tmp/epyc.txt" 2>/dev/null
end=$(date +%s.%N)
wall=$(python3 -c "print(f'{$end - $start:.2f}')")
grep '^orchestration:' "$tmp/epyc.txt"
python3 -c "w=$wall; print(('PASS' if w < 10 else 'FAIL') + f'  36 x 36 EPYC samples in {w:.2f} s (< 10 s)')"

echo "== synthetic 1024 CPUs, 16 nodes"
python3 - "$tmp/big.json" <<'PY'
import json, sys
nodes, llcs_per_node, cores_per_llc, threads = 16, 4, 8, 2
cores_total = nodes * llcs_per_node * cores_per_llc
ncpu = cores_total * threads
def cpu_of(core, t):  # Linux numbering: first threads of all cores, then the second ones
    return core + t * cores_total
node_list, cpus = [], []
core_index = llc_index = 0
for n in range(nodes):
    sock = n // 8
    llcs = []
    for l in range(llcs_per_node):
        cores = []
        llc_cpus = []
        for c in range(cores_per_llc):
            ids = [cpu_of(core_index, t) for t in range(threads)]
            llc_cpus += ids
            cores.append({"index": core_index, "package": sock, "core_id": core_index % (cores_total // 2),
                          "cpus": ",".join(map(str, ids))})
            for t in range(threads):
                cpus.append({"id": ids[t], "online": True, "node": n, "package": sock,
                             "core_id": core_index % (cores_total // 2), "core": core_index,
                             "llc": llc_index, "smt_siblings": ",".join(map(str, ids))})
            core_index += 1
        s = ",".join(map(str, sorted(llc_cpus)))
        llcs.append({"index": llc_index, "level": 3, "cache_id": llc_index, "cpus": s, "shared_cpus": s, "cores": cores})
        llc_index += 1
    ncpus = sorted(c for l in llcs for co in l["cores"] for c in map(int, co["cpus"].split(",")))
    dist = [10 if m == n else (16 if m // 8 == sock else 32) for m in range(nodes)]
    node_list.append({"id": n, "cpus": ",".join(map(str, ncpus)), "mem_total_bytes": None,
                      "mem_free_bytes": None, "distances": dist, "llcs": llcs})
cpus.sort(key=lambda c: c["id"])
topo = {"schema": "numalab.topology/1", "source": {"kind": "file", "path": "bench/sim.sh"},
        "cpu_model": "synthetic 1024-CPU, 16-node machine", "kernel": None, "numa_available": True,
        "nodes": node_list, "cpus": cpus, "allowed": {"cpus": f"0-{ncpu-1}", "mems": f"0-{nodes-1}"}}
json.dump(topo, open(sys.argv[1], "w"))
PY
start=$(date +%s.%N)
$bin run --backend sim --topology "$tmp/big.json" --samples 4 --nb 0,1 --pnid=-1,A \
    --out "$tmp/big" >"$tmp/big.txt" 2>"$tmp/big.err" || { cat "$tmp/big.err"; exit 1; }
end=$(date +%s.%N)
line=$(grep '^orchestration:' "$tmp/big.txt")
echo "$line"
python3 - "$start" "$end" "$line" <<'PY'
import re, sys
wall = float(sys.argv[2]) - float(sys.argv[1])
sim = float(re.search(r"simulated probes ([0-9.]+) s", sys.argv[3]).group(1))
x = sim / wall
print(("PASS" if x >= 1000 else "FAIL") + f"  {sim:.0f} simulated s in {wall:.2f} s wall = {x:.0f}x real time (>= 1000x)")
PY

jobs_bench() { # NAME ARGS...: one simulated jobs run, timed
    local name=$1; shift
    local start end
    start=$(date +%s.%N)
    $bin jobs --backend sim --format json "$@" >"$tmp/$name.json" 2>/dev/null
    end=$(date +%s.%N)
    python3 - "$start" "$end" "$tmp/$name.json" "$name" <<'PY'
import json, sys
wall = float(sys.argv[2]) - float(sys.argv[1])
r = json.load(open(sys.argv[3]))
cpu = sum(j["user_s"] for j in r["jobs"])
print(f"{sys.argv[4]}: {r['n']} jobs, {r['elapsed_s']:.2f} simulated s elapsed, "
      f"{cpu:.0f} job-seconds in {wall:.2f} s wall = {cpu / wall:.0f}x real time "
      f"({r['sim']['events']} events)")
PY
}
echo "== jobs --backend sim"
jobs_bench epyc-256 256 --preset epyc-7551-8n --load 50
jobs_bench big-1024 1024 --topology "$tmp/big.json" --load 50 --size 8M
