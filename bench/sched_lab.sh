#!/usr/bin/env bash
# The evaluation of numalab's sched_ext scheduler (docs/sched.md), in lab
# guests on the lab kernel (6.12 with SCHED_CLASS_EXT and the PNID patch),
# so the scheduler, the kernel patch and the agent are compared on one
# kernel. Prints the tables docs/sched.md quotes.
#
#   bash bench/sched_lab.sh cell [SAMPLES]   # the RFC's cell (a), 2node guest
#   bash bench/sched_lab.sh jobs [REPEATS]   # the node-affine test, 4node-smt guest
#   bash bench/sched_lab.sh cost [SECONDS]   # pipe ping-pong, default scheduler vs ours
#   bash bench/sched_lab.sh rfc [SAMPLES]    # all 36 RFC rows, PNID rows through ours
#
# cell: (guest TOPO, default 2node; 4node-smt for SMT siblings)
#   Mem A, CPU F (float) and CPU A (pin), 60% load, NB 0 and NB 1, PNID
#   -1 and A, once with the PNID rows through the kernel patch (prctl), once
#   through the agent, once through the scheduler; 16 MiB x 4 passes,
#   SAMPLES per row (default 6). Then `numalab compare` of the patch's PNID
#   rows against the agent's and the scheduler's. About 7 min for 6 samples.
# jobs: the document's 24 jobs on 16 CPUs over 4 nodes, scaled to the guest:
#   12 gather-add jobs (16 MiB, 3 passes) on 8 CPUs over 4 nodes, each job
#   homed (auto), under float (no home), pin, agent and the scheduler;
#   REPEATS rounds (default 2). About 1 min a round. COUNTS=N makes each job
#   N passes instead of 3 (longer jobs: a steal at the end of the run, when
#   one node's jobs are done before another's, is then a smaller share of
#   a job's life).
# cost: two threads passing a byte through two pipes (bench/pingpong.c: many short sleeps and
#   wake-ups, no NUMA sensitivity) for SECONDS (default 10) under the
#   kernel's scheduler and under ours, in the 2node guest; round trips/s.
# rfc: the RFC's whole matrix (36 rows, 60% load, 16 MiB x 4 passes) with
#   --pnid-via sched, SAMPLES per row (default 2), in the 2node guest: every
#   row runs, none skipped.
#
# Memory latency is uniform under emulation: these runs show placement and
# the scheduler's decisions, not NUMA cost (lab/README.md).
set -euo pipefail
# One block, read whole before it runs: editing this file during a long run
# (or checking out another version) cannot change what the run does.
{
cd "$(dirname "$0")/.."
what=${1:-cell}
arg=${2:-}
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release -q --target x86_64-unknown-linux-gnu
export NUMALAB_BIN=$PWD/target/x86_64-unknown-linux-gnu/release/numalab
script=$(mktemp)
trap 'rm -f "$script"' EXIT
start=$SECONDS

case $what in
cell)
    samples=${arg:-6}
    cat >"$script" <<EOF
set -e
spec() { # spec FILE PNID...: cell (a) and its pinned neighbour, NB 0 and 1
    f=\$1; shift
    {
        echo "samples = $samples"; echo "load = 60"; echo "seed = 7"
        echo 'mem = ["A"]'; echo 'cpu = ["F", "A"]'
        for p in "\$@"; do for nb in 0 1; do
            printf '[[blocks]]\npnid = %s\nnb = %s\n' "\$p" "\$nb"
        done; done
        printf '[probe]\npattern = "rand-rw"\nsize = "16M"\ncounts = 4\n'
    } > "\$f"
}
spec /tmp/all.toml -1 '"A"'
spec /tmp/pnid.toml '"A"'
numalab run --spec /tmp/all.toml --out /tmp/prctl >/dev/null 2>/tmp/prctl.err || { cat /tmp/prctl.err; exit 1; }
numalab run --spec /tmp/pnid.toml --pnid-via agent --out /tmp/agent >/dev/null 2>/tmp/agent.err || { cat /tmp/agent.err; exit 1; }
numalab run --spec /tmp/pnid.toml --pnid-via sched --out /tmp/sched >/dev/null 2>/tmp/sched.err || { cat /tmp/sched.err; exit 1; }
for r in prctl agent sched; do
    echo "== \$r"
    numalab report /tmp/\$r
done
echo "== compare: the kernel patch's PNID rows against the agent's and the scheduler's"
numalab compare /tmp/prctl /tmp/agent /tmp/sched
EOF
    timeout=$((600 + samples * 600))
    topo=${TOPO:-2node}
    ;;
jobs)
    repeats=${arg:-2}
    counts=${COUNTS:-3}
    cat >"$script" <<EOF
set -e
for i in \$(seq $repeats); do
    for how in none pin agent sched; do
        echo "== \$how round \$i"
        if [ \$how = none ]; then
            numalab jobs 12 --size 16M --counts $counts --format markdown
        else
            numalab jobs 12 --size 16M --counts $counts --home auto --home-cpu \$how --format markdown
        fi
    done
done
EOF
    timeout=$((600 + repeats * counts * 200))
    topo=4node-smt
    ;;
cost)
    secs=${arg:-10}
    pp=$(mktemp -d)
    gcc -static -O2 -pthread -o "$pp/pingpong" bench/pingpong.c
    bin=$(base64 -w0 "$pp/pingpong")
    rm -rf "$pp"
    cat >"$script" <<EOF
echo '$bin' | base64 -d > /tmp/pingpong; chmod 755 /tmp/pingpong
for round in 1 2 3; do
    echo "== default scheduler"; /tmp/pingpong $secs
    numalab sched --duration $((secs + 60)) >/dev/null 2>&1 &
    i=0
    while [ "\$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ \$i -lt 300 ]; do
        sleep 0.1; i=\$((i + 1))
    done
    echo "== numalab sched"; /tmp/pingpong $secs
    kill -INT \$!; wait \$! || true
done
EOF
    timeout=$((300 + secs * 10))
    topo=2node
    ;;
rfc)
    samples=${arg:-2}
    cat >"$script" <<EOF
set -e
numalab run --pnid-via sched --samples $samples --size 16M --counts 4 --out /tmp/rfc >/dev/null 2>/tmp/rfc.err || { cat /tmp/rfc.err; exit 1; }
numalab report /tmp/rfc
EOF
    timeout=$((600 + samples * 1200))
    topo=2node
    ;;
*)
    echo "usage: bash bench/sched_lab.sh cell|jobs|cost|rfc [N]" >&2
    exit 2
    ;;
esac

lab/guest --kernel pnid --timeout "$timeout" "$topo" "$script"
echo "bench/sched_lab.sh $what: $((SECONDS - start)) s"
exit
}
