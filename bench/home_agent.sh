#!/usr/bin/env bash
# The cost of the `numalab home` agent (issue 12 target: < 0.5% of one CPU
# for 100 followed tasks), for DURATION seconds (default 20) each:
# - sleep: a python3 program with 100 threads that wake every 10 ms (the
#   agent's steady cost of following and measuring threads);
# - busy: 100 busy-loop shell processes on a homenode of one CPU (python
#   threads would take turns on the GIL and hardly wait): every task waits,
#   so the agent also widens and narrows.
# The agent's own CPU time comes from its summary line (getrusage over the
# watch, as `numalab home` prints it).
#
#   bash bench/home_agent.sh [DURATION] [extra numalab home options]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
dur=${1:-20}
shift || true
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
prog='
import threading, time, sys
go = threading.Event()
def work():
    go.wait()  # all 100 start first (busy threads would starve the starter)
    while time.time() < end:
        time.sleep(0.01)
ts = [threading.Thread(target=work) for _ in range(100)]
for t in ts: t.start()
end = time.time() + float(sys.argv[2])
go.set()
for t in ts: t.join()
'
fail=0
busy='for i in $(seq 100); do (while [ ! -e "$1" ]; do :; done) & done; sleep "$2"; touch "$1"; wait'
for kind in sleep busy; do
    if [ "$kind" = sleep ]; then
        cmd=(python3 -c "$prog" sleep "$dur")
        extra=()
    else
        cmd=(sh -c "$busy" sh "$state/stop" "$dur")
        extra=(--cpus 0)
    fi
    line=$(NUMALAB_STATE_DIR=$state target/release/numalab home --node 0 "${extra[@]}" "$@" \
        -- "${cmd[@]}" 2>&1 | grep '^home: node' | tail -1)
    echo "$kind: $line"
    share=$(sed -E 's/.* = ([0-9.]+)% of one CPU.*/\1/' <<<"$line")
    threads=$(sed -E 's/.*at most ([0-9]+) at once.*/\1/' <<<"$line")
    python3 - "$kind" "$share" "$threads" <<'PY' || fail=1
import sys
kind, share, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
per100 = share / max(threads, 1) * 100
ok = per100 < 0.5
print(("PASS" if ok else "FAIL") + f"  {kind}: agent {share:.3f}% of one CPU for {threads} threads"
      f" = {per100:.3f}% per 100 threads (< 0.5%)")
sys.exit(0 if ok else 1)
PY
done
exit $fail
