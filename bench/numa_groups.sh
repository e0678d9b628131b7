#!/usr/bin/env bash
# Which threads NUMA balancing groups (issue #29's first question): four
# threads under each mode of bench/numa_groups.c (shared, malloc,
# counters, mmap; 32 MiB each, 25 s) in the 4node-smt lab guest (4 nodes x
# 2 CPUs), NB on with its scan knobs at 100/100/400 ms so it acts within
# seconds, on Debian's 6.1 kernel and on the lab's 6.12 kernel, the two
# guests side by side (one host core each). Prints each thread's
# numa_group_id, preferred node, NUMA faults and migrated pages.
#
#   bash bench/numa_groups.sh
#
# 106 s on the 2-core machine with the lab kernel cached (2026-11-27; it is
# built first when it is not, 10-15 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then
    echo "usage: bash bench/numa_groups.sh (it takes no arguments)" >&2
    exit 2
fi
bash scripts/deps.sh
tmp=$(mktemp -d)
deb=
# The Debian guest runs in its own session (setsid): stopping the script
# stops it too.
trap '[ -z "$deb" ] || kill -TERM -- "-$deb" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
gcc -O2 -static -pthread -o "$tmp/numa_groups" bench/numa_groups.c
# The guest installs the program as /usr/bin/numalab (lab/guest --bin).
cat >"$tmp/script.sh" <<'SH'
D=/sys/kernel/debug/sched/numa_balancing
[ -d $D ] || mount -t debugfs none /sys/kernel/debug
echo 1 > /proc/sys/kernel/numa_balancing
echo 100 > $D/scan_delay_ms; echo 100 > $D/scan_period_min_ms; echo 400 > $D/scan_period_max_ms
echo "kernel $(uname -r), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
for m in shared malloc counters mmap; do
    numalab $m 4 32 25 | sed 's/ *: */=/g; s/numa_pages_migrated/migrated/; s/numa_preferred_nid/preferred/; s/total_numa_faults/faults/'
done
SH
start=$(date +%s)
kernel=$(bash lab/kernel/build | tail -n 1)
rc=0
setsid lab/guest --bin "$tmp/numa_groups" --timeout 400 4node-smt "$tmp/script.sh" \
    >"$tmp/deb.txt" 2>&1 &
deb=$!
lab/guest --bin "$tmp/numa_groups" --kernel "$kernel" --timeout 400 4node-smt "$tmp/script.sh" \
    >"$tmp/lab.txt" 2>&1 || rc=$?
wait "$deb" || rc=$?
deb=
grep -v '^lab/guest: ' "$tmp/deb.txt" "$tmp/lab.txt" | sed "s|^$tmp/||"
echo "bench: done in $(($(date +%s) - start)) s, exit $rc"
exit "$rc"
