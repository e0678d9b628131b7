#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test,
# unit tests and the QEMU lab tests on multi-node guests. Set
# NUMALAB_REQUIRE_TOOLS=1 (CI does) to make a missing tool fail instead of
# skipping the tests that need it.
#
# With arguments, they go to `cargo test --release --target HOST` as they
# are (one test binary, a name filter...). Without, the tests run in two phases:
#  1. every test binary but the lab's, as `cargo test` runs them;
#  2. the lab tests (tests/lab_*.rs), NUMALAB_LAB_LANES binaries at a time
#     (default: the CPU count), one test thread each.
# Why: a lab test spends its time in one QEMU guest, and TCG runs a guest on
# one host thread, so `cargo test` running them one binary after another
# left all but one core idle for most of the run (CI on 2 cores: 30 of its
# 35 minutes). One thread per binary keeps to one guest per lane, so no
# guest runs slower than a core. Timing-sensitive tests (load_accuracy) are
# in phase 1, with nothing beside them. The simulator's measurements
# against lab guests are benchmarks (bench/sim_vs_lab.sh), not tests.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${NUMALAB_LAB_LANES:-$(nproc)}
if ! [[ $lanes =~ ^[1-9][0-9]*$ ]]; then
    echo "test.sh: NUMALAB_LAB_LANES must be a whole number of 1 or more, not '$lanes'" >&2
    exit 2
fi
bash scripts/deps.sh

# One build for the host and the lab: the tests and the numalab they run
# are linked statically (crt-static, with the target named so that build
# scripts and proc macros stay dynamic), so the lab's guests take that
# numalab as it is (tests/common/lab.rs) instead of a second release build
# of it (nearly two minutes on CI's 2 cores), and the tests run the
# one-file binary a user copies onto a lab machine.
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
triple=$(rustc -vV | sed -n 's/^host: //p')
test=(cargo test --release --target "$triple")

if (($#)); then
    exec "${test[@]}" "$@"
fi

"${test[@]}" --no-run

lab=() other=()
for f in tests/*.rs; do
    name=$(basename "$f" .rs)
    case $name in
        lab_*) lab+=("$name") ;;
        *) other+=(--test "$name") ;;
    esac
done

echo "test.sh: phase 1: unit, integration and doc tests"
"${test[@]}" --lib --bins "${other[@]}"
"${test[@]}" --doc

# lab_pnid first: on a fresh machine it builds the lab kernel (10-15 min;
# 25 s with it cached) while the other lane runs the tests on Debian's
# kernel; the other PNID-kernel tests come after those, so they find the
# kernel built instead of waiting for it in a lane. With the kernel cached
# there is nothing to wait for, and the whole queue goes longest first, so
# the longest (lab_pnid_run) does not start last and run alone at the end
# (it did, in 1036 s, against 2 x 500 s of work). Times on CI's 2-core
# machine with the kernel cached: lab_pnid_run 220-330 s, lab_topo 70-150,
# lab_run 90-110, lab_pnid_load 80-105, lab_sched 70-80, lab_groups 65,
# lab_trace 40-50, lab_probe 30, lab_load_policy 25, lab_pnid 25,
# lab_sim_fit 20, lab_first_touch 15, lab_home 15. A lab test not listed
# here runs after these.
kernel_cached() {
    local key dir
    key=$(bash lab/kernel/build --print-key 2>/dev/null) || return 1
    # shellcheck source=../lab/cache-lib.sh
    dir=$(source lab/cache-lib.sh && lab_cache_dir lab 2>/dev/null) || return 1
    [[ -f $dir/kernel-pnid-$key/bzImage ]]
}
if kernel_cached; then
    order=(lab_pnid_run lab_topo lab_run lab_pnid_load lab_sched lab_groups lab_trace
        lab_probe lab_load_policy lab_pnid lab_sim_fit lab_first_touch lab_home)
else
    order=(lab_pnid lab_run lab_topo lab_groups lab_trace lab_probe lab_load_policy
        lab_sim_fit lab_first_touch lab_home lab_pnid_run lab_pnid_load lab_sched)
fi
queue=()
for t in "${order[@]}"; do
    [ -e "tests/$t.rs" ] && queue+=("$t")
done
for t in "${lab[@]}"; do
    [[ " ${queue[*]} " == *" $t "* ]] || queue+=("$t")
done

work=$(mktemp -d "${TMPDIR:-/tmp}/numalab-test.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

printf '%s\n' "${queue[@]}" >"$work/queue"
: >"$work/queue.lock"

# One lane: takes the next test binary off the queue (under a lock), runs
# it with its output in a file, prints that output whole when it ends (so
# lanes do not interleave), records the verdict, and goes on until the
# queue is empty.
lane() {
    local t start rc child=
    # Each test binary runs in its own session (setsid), so a stopped lane
    # takes its cargo, test binary and QEMU guest with it.
    trap '[ -z "$child" ] || kill -TERM -- "-$child" 2>/dev/null; exit 143' TERM
    while :; do
        t=$(flock "$work/queue.lock" sh -c \
            'q="$1"; head -n 1 "$q"; tail -n +2 "$q" >"$q.rest"; mv "$q.rest" "$q"' _ "$work/queue")
        [ -n "$t" ] || return 0
        echo "test.sh: lane $1: $t started"
        start=$(date +%s)
        local log="$work/$t.log"
        setsid "${test[@]}" --test "$t" -- --test-threads=1 >"$log" 2>&1 &
        child=$!
        rc=0
        wait "$child" || rc=$?
        child=
        flock "$work/queue.lock" sh -c 'cat "$1"; echo "test.sh: lane $2: $3 exit $4 after $5 s"' _ \
            "$log" "$1" "$t" "$rc" "$(($(date +%s) - start))"
        echo "$t $rc" >>"$work/verdicts"
    done
}

echo "test.sh: phase 2: ${#queue[@]} lab test binaries, $lanes at a time"
: >"$work/verdicts"
for ((i = 1; i <= lanes; i++)); do
    lane "$i" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
pids=()

failed=$(awk '$2 != 0 { print $1 }' "$work/verdicts")
ran=$(wc -l <"$work/verdicts")
if [ -n "$failed" ] || [ "$ran" -ne "${#queue[@]}" ]; then
    echo "test.sh: lab tests failed: ${failed:-(a lane stopped early)}" >&2
    exit 1
fi
echo "test.sh: all ${#queue[@]} lab test binaries passed"
