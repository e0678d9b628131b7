//! Several probes (`jobs --backend sim`) against a real kernel
//! (issue #10): `numalab jobs 2 --load 50 --size 8M --counts 3` twelve times
//! in the `2node` guest (2 nodes x 2 CPUs, the host's Debian kernel, NUMA
//! balancing on, traced), and the sim sixteen times (seeds 1-16) on the
//! same topology with the `lab-tcg` profile set as the guest's kernel is.
//!
//! The guest runs under multi-threaded TCG, each vCPU on its own host
//! thread, because single-threaded TCG runs one vCPU at a time: the
//! guest's CPUs then do not balance side by side, and the same jobs came
//! out with about half the moves and a third of the crossings, and 67-90%
//! of their time on their memory's node instead of 52-55%
//! (docs/sim-validation.md, "What the emulator does to the lab's
//! numbers"). Under multi-threaded TCG twelve guest runs of eight gave,
//! per batch: 49.9-59.8% on the memory's node, 23-39 moves and 10.4-22.2
//! crossings per job, a cross-node share of 0.42-0.59. The tolerances
//! below are that batch-to-batch spread, widened (15 points, 0.15 of share), with twelve
//! runs to a batch to narrow it; a sim that held its jobs as the kernel
//! seemed to under single-threaded TCG (67-90% on the memory's node) fails
//! them.
//!
//! How often the jobs move, as counts, is printed and not asserted: it
//! depends on the host that runs the vCPU threads. A factor of 2 held on
//! the hosts above, then failed on an AMD EPYC host under Linux 6.18 (the
//! stop-20 machine): 60.7 and 60.2 moves and 24.1 and 25.3 crossings per
//! job, and 94.5 and 49.0 with the binary that had passed there before,
//! against the sim's 26.4 and 14.2, while the time on the memory's node
//! (54.2-55.5%) and the cross-node share (0.40-0.52) stayed where they were.
//!
//! A measurement, not a CI test: `bash bench/sim_vs_lab.sh` runs it (and
//! [`sim_vs_lab`](../sim_vs_lab.rs)) before a change to the simulator's
//! model lands, and the note quotes what it printed. It runs with nothing
//! beside it: the guest's four vCPU threads take both host cores, and a
//! guest beside it would slow them unevenly, which changes what is
//! measured.

#[path = "../tests/common/mod.rs"]
mod common;

use common::lab;
use serde_json::Value;
use std::process::Command;

const LAB_RUNS: usize = 12;
const SIM_SEEDS: u64 = 16;
const JOB_ARGS: [&str; 7] = ["2", "--load", "50", "--size", "8M", "--counts", "3"];

/// Before anything runs, every event numalab traces is enabled in the
/// top-level buffer and in a second instance, both with recording off.
/// Each tracepoint then has two probes, and numalab's own instance adds and
/// removes a third, which the kernel does without patching code (a
/// tracepoint's static call and key change only between none, one and two
/// probes). Patching code while other vCPUs are busy is what wedges
/// multi-threaded TCG (lab/README.md): of nine guest runs of this script
/// without it one wedged, of twelve with it none.
const HOLD_TRACEPOINTS: &str = r#"
t=/sys/kernel/tracing
mkdir -p $t/instances/hold
for e in sched_migrate_task sched_switch sched_move_numa sched_swap_numa sched_stick_numa \
         sched_process_fork sched_process_exit; do
    echo 1 > $t/events/sched/$e/enable
    echo 1 > $t/instances/hold/events/sched/$e/enable
done
echo 0 > $t/tracing_on
echo 0 > $t/instances/hold/tracing_on
"#;

fn script() -> String {
    let mut s = String::from(HOLD_TRACEPOINTS);
    s.push_str("echo @@kernel; uname -r\necho @@features; cat /sys/kernel/debug/sched/features\n");
    for i in 1..=LAB_RUNS {
        s.push_str(&format!(
            "numalab jobs {} --format json -o /tmp/j{i}.json >/dev/null 2>/tmp/e{i} \
             || {{ echo \"jobs run {i} failed\"; cat /tmp/e{i}; }}\n\
             echo @@run{i}; cat /tmp/j{i}.json; echo\n",
            JOB_ARGS.join(" ")
        ));
    }
    s.push_str("echo @@end\n");
    s
}

/// What a batch of jobs records says, per job.
#[derive(Debug)]
struct Batch {
    jobs: usize,
    /// Mean % of a job's time on its memory's node.
    on_mem_pct: f64,
    moves: f64,
    crossings: f64,
    /// Cross-node moves over all moves, pooled.
    share: f64,
}

fn batch(records: &[Value]) -> Batch {
    let (mut n, mut pct, mut moves, mut cross) = (0usize, 0.0, 0.0, 0.0);
    for r in records {
        for j in r["jobs"].as_array().expect("jobs") {
            let mem = j["mem_node"].as_u64().expect("a job's memory node");
            pct += j["node_pct"][mem.to_string()].as_f64().unwrap_or(0.0);
            moves += j["migrations"]["total"].as_f64().unwrap();
            cross += j["migrations"]["cross_node"].as_f64().unwrap();
            n += 1;
        }
    }
    assert!(n > 0, "no jobs in {} records", records.len());
    Batch {
        jobs: n,
        on_mem_pct: pct / n as f64,
        moves: moves / n as f64,
        crossings: cross / n as f64,
        share: if moves > 0.0 { cross / moves } else { 0.0 },
    }
}

fn sim_records(profile: &std::path::Path) -> Vec<Value> {
    let root = lab::repo().join("tests/fixtures/topo/2node/root");
    (1..=SIM_SEEDS)
        .map(|seed| {
            let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
                .arg("--sysfs-root")
                .arg(&root)
                .arg("jobs")
                .args(JOB_ARGS)
                .args(["--backend", "sim", "--format", "json", "--profile"])
                .arg(profile)
                .args(["--seed", &seed.to_string()])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect()
}

#[test]
fn jobs_engine_matches_two_jobs_on_the_2node_guest() {
    let Some(run) = lab::run_multi_threaded("2node", &script(), 180) else {
        return;
    };
    let s = run.finished();
    let kernel = s["kernel"].trim().to_string();
    let ni_random = s["features"].split_whitespace().any(|f| f == "NI_RANDOM");
    let lab_records: Vec<Value> = (1..=LAB_RUNS)
        .map(|i| {
            let text = &s[&format!("run{i}")];
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("jobs run {i}: {e}:\n{}", run.output))
        })
        .collect();
    for r in &lab_records {
        assert_eq!(
            r["numa_balancing"], 1,
            "the guest runs with NUMA balancing on"
        );
        assert_eq!(r["lost_events"], 0, "the trace lost events: {r}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let profile = lab::lab_tcg_profile(tmp.path(), ni_random, lab::has_smt_balance(&kernel));
    // The profile's load lateness is single-threaded TCG's; this guest runs
    // multi-threaded.
    lab::without_emulator(&profile);
    let lab = batch(&lab_records);
    let sim = batch(&sim_records(&profile));
    eprintln!(
        "2node, `jobs {}`: guest {kernel} (multi-threaded TCG, NI_RANDOM {ni_random}) vs sim (lab-tcg)",
        JOB_ARGS.join(" ")
    );
    for (name, b) in [("lab", &lab), ("sim", &sim)] {
        eprintln!(
            "  {name}: {} jobs, {:.1}% on the memory's node, {:.1} moves and {:.1} crossings per job, \
             cross-node share {:.2}",
            b.jobs, b.on_mem_pct, b.moves, b.crossings, b.share
        );
    }

    // Both sides move the jobs, and across nodes.
    assert!(
        lab.crossings >= 1.0 && sim.crossings >= 1.0,
        "{lab:?} {sim:?}"
    );
    assert!(
        (lab.on_mem_pct - sim.on_mem_pct).abs() <= 15.0,
        "time on the memory's node: lab {:.1}%, sim {:.1}%",
        lab.on_mem_pct,
        sim.on_mem_pct
    );
    assert!(
        (lab.share - sim.share).abs() <= 0.15,
        "cross-node share of moves: lab {:.2}, sim {:.2}",
        lab.share,
        sim.share
    );
    // Counts depend on the host's scheduling of the vCPU threads (see the
    // module notes): printed for the record only.
    for (what, l, m) in [
        ("moves per job", lab.moves, sim.moves),
        ("crossings per job", lab.crossings, sim.crossings),
    ] {
        eprintln!("  {what}: sim / lab {:.2}", m / l);
    }
}
