//! What the background load looks like to NUMA balancing, on a real kernel
//! (the 2-node guest, the default lab kernel). The simulator's model of
//! migrate_degrades_locality() rests on it: with the default policy each
//! `numalab load` worker (a pinned thread touching only its stack) comes to
//! prefer its own CPU's node, so it counts in nr_preferred_running and a
//! task leaving its preferred node is not held back; under `--policy local`
//! (MPOL_LOCAL, not migrate-on-fault) a worker takes no hinting faults and
//! never prefers a node, and the preferred node then protects
//! (docs/sim-validation.md, "What the load looks like to NUMA balancing").
//!
//! It once failed in CI: an MPOL_LOCAL worker took 2 faults. Another
//! thread of the load's process (default policy) had scanned, and a VMA
//! without a policy of its own is judged by the scanner's; the workers'
//! stacks and stop flag now carry MPOL_LOCAL themselves (src/load,
//! `mpol_local_worker_stacks_carry_the_policy_whoever_scans`).

mod common;

use common::lab;

const SCRIPT: &str = r#"
echo 1 > /proc/sys/kernel/numa_balancing
# Scans start after 1 s of a task's CPU time plus a scan period: shortened
# so 8 s of 60% load sees several placements.
D=/sys/kernel/debug/sched/numa_balancing
[ -d $D ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
echo 200 > $D/scan_delay_ms; echo 200 > $D/scan_period_min_ms
echo "knobs $(cat $D/scan_delay_ms) $(cat $D/scan_period_min_ms)"
# The load runs until it is read and TERMed (its normal end, exit 0): with
# a fixed --duration 10 against `sleep 8`, a slow emulator read the last
# workers after they had exited (CI, a loaded host: "can't open
# /proc/118/task/123/comm"). --duration only bounds a script gone wrong.
for pol in default local; do
    echo @@$pol
    numalab load --percent 60 --duration 120 --policy $pol >/dev/null 2>&1 &
    P=$!
    sleep 8
    for t in /proc/$P/task/*; do
        case $(cat $t/comm) in
        load-cpu*)
            cpu=$(cat $t/comm | sed 's/load-cpu//')
            node=$(ls -d /sys/devices/system/cpu/cpu$cpu/node[0-9]* | sed 's/.*node//')
            echo "worker $cpu $node $(awk '$1 == "numa_preferred_nid" { print $3 }' $t/sched) $(awk '$1 == "total_numa_faults" { print $3 }' $t/sched)"
            ;;
        esac
    done
    kill $P; wait $P; echo "rc=$?"
done
echo @@end
"#;

/// (cpu, cpu's node, preferred nid, total NUMA faults) per worker.
fn workers(section: &str) -> Vec<(u32, i64, i64, u64)> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("worker "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 4, "worker line {l:?}");
            (
                w[0].parse().unwrap(),
                w[1].parse().unwrap(),
                w[2].parse().unwrap(),
                w[3].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn load_workers_prefer_their_own_node_unless_under_mpol_local() {
    let Some(run) = lab::run_on(None, "2node", SCRIPT, 300) else {
        return;
    };
    eprintln!("--- guest output ---\n{}--- end ---", run.output);
    let s = run.finished();
    for pol in ["default", "local"] {
        assert!(s[pol].contains("rc=0"), "load --policy {pol}: {}", s[pol]);
    }
    let dflt = workers(&s["default"]);
    let local = workers(&s["local"]);
    assert_eq!(dflt.len(), 4, "one worker per guest CPU: {}", s["default"]);
    assert_eq!(local.len(), 4, "one worker per guest CPU: {}", s["local"]);
    // Default policy: hinting faults on its own stack, all local, make a
    // worker prefer its CPU's node.
    for &(cpu, node, pref, faults) in &dflt {
        assert!(faults > 0, "default worker on CPU {cpu} has no NUMA faults");
        assert_eq!(pref, node, "default worker on CPU {cpu}");
    }
    // MPOL_LOCAL: never scanned, no faults, no preferred node.
    for &(cpu, _, pref, faults) in &local {
        assert_eq!(faults, 0, "MPOL_LOCAL worker on CPU {cpu} took NUMA faults");
        assert_eq!(pref, -1, "MPOL_LOCAL worker on CPU {cpu}");
    }
}
