#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test,
# unit tests and the QEMU lab tests on multi-node guests. Set
# NUMALAB_REQUIRE_TOOLS=1 (CI does) to make a missing tool fail instead of
# skipping the tests that need it.
#
# With arguments, they go to `cargo test --release` as they are (one test
# binary, a name filter...). Without, the tests run in three phases:
#  1. every test binary but the lab's, as `cargo test` runs them;
#  2. the lab tests that must have the machine to themselves (a
#     tests/lab_*.rs whose first line is `//! test.sh: alone`: a
#     multi-threaded TCG guest, whose vCPUs take every host core), one by one;
#  3. the other lab tests, NUMALAB_LAB_LANES binaries at a time (default:
#     the CPU count), longest first, one test thread each.
# Why: a lab test spends its time in one QEMU guest, and TCG runs a guest on
# one host thread, so `cargo test` running them one binary after another
# left all but one core idle for most of the run (CI on 2 cores: 30 of its
# 35 minutes). One thread per binary keeps to one guest per lane, so no
# guest runs slower than a core. Timing-sensitive tests (load_accuracy) are
# in phase 1, with nothing beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${NUMALAB_LAB_LANES:-$(nproc)}
if ! [[ $lanes =~ ^[1-9][0-9]*$ ]]; then
    echo "test.sh: NUMALAB_LAB_LANES must be a whole number of 1 or more, not '$lanes'" >&2
    exit 2
fi
bash scripts/deps.sh

if (($#)); then
    exec cargo test --release "$@"
fi

cargo test --release --no-run

lab=() alone=() other=()
for f in tests/*.rs; do
    name=$(basename "$f" .rs)
    case $name in
        lab_*)
            if [ "$(head -n 1 "$f")" = "//! test.sh: alone" ]; then
                alone+=(--test "$name")
            else
                lab+=("$name")
            fi
            ;;
        *) other+=(--test "$name") ;;
    esac
done

echo "test.sh: phase 1: unit, integration and doc tests"
cargo test --release --lib --bins "${other[@]}"
cargo test --release --doc
if ((${#alone[@]})); then
    echo "test.sh: phase 2: lab tests that run alone"
    cargo test --release "${alone[@]}"
fi

# Longest first, by their times on CI's 2-core machine (lab_sim about
# 10 min, the others together about 9; lab_pnid takes 25 s with the lab
# kernel cached but builds it when it is not, 10-15 min, so it comes second,
# beside the first half of lab_sim, and the other PNID tests find the
# kernel built); a lab test not listed here runs after these.
#
# An entry NAME:FILTER runs only the tests of NAME whose names contain
# FILTER, and NAME:!FILTER all the others, so one long binary can take two
# lanes: lab_sim (about 10 min, four guests one after another) was most of
# phase 3 on its own while the other lane had finished. Both halves always
# together cover every test of the binary, new ones included.
order=(lab_sim:4node_smt lab_pnid lab_sim:!4node_smt lab_pnid_run lab_pnid_load lab_sched
    lab_trace lab_home lab_probe lab_run lab_topo lab_load_policy)
queue=()
for t in "${order[@]}"; do
    [ -e "tests/${t%%:*}.rs" ] && queue+=("$t")
done
for t in "${lab[@]}"; do
    [[ " ${queue[*]%%:*} " == *" $t "* ]] || queue+=("$t")
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
        local name=${t%%:*} filter=() log
        case $t in
            *:!*) filter=(--skip "${t#*:!}") ;;
            *:*) filter=("${t#*:}") ;;
        esac
        log="$work/${t//[:!]/_}.log"
        setsid cargo test --release --test "$name" -- --test-threads=1 "${filter[@]}" >"$log" 2>&1 &
        child=$!
        rc=0
        wait "$child" || rc=$?
        child=
        flock "$work/queue.lock" sh -c 'cat "$1"; echo "test.sh: lane $2: $3 exit $4 after $5 s"' _ \
            "$log" "$1" "$t" "$rc" "$(($(date +%s) - start))"
        echo "$t $rc" >>"$work/verdicts"
    done
}

echo "test.sh: phase 3: ${#queue[@]} lab test runs, $lanes at a time"
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
echo "test.sh: all ${#queue[@]} lab test runs passed"
