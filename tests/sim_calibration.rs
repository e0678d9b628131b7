//! The simulator against what it is calibrated and validated on (the
//! numbers and their reading are in docs/sim.md):
//! - the RFC's Intel table (../shared/seeds/preferred-node-affinity-rfc.txt,
//!   Xeon 8167M, 64 samples per row), as ratios of each row to row [00]
//!   since the RFC does not give its probe's size: the `xeon-8167m`
//!   profile's calibrated values are `memory.cpu_ns` (from rows 00,01,03,04)
//!   and nothing else, so the other 32 rows are predictions;
//! - the lab's findings on a real kernel (docs/preferred-node.md: 2-node
//!   guest, 60% load, 16 MiB x 8 probe), in direction: the tolerance says
//!   how far the model is trusted, and the test prints every number.

use std::path::Path;
use std::process::Command;

/// Avg of each row, in order (the RFC's table, seconds).
const RFC_INTEL: [f64; 36] = [
    136.50, 168.78, 173.15, 165.95, 137.23, 179.90, 163.87, 168.96, 180.71, 135.68, 166.60, 171.97,
    164.01, 138.01, 177.07, 165.70, 165.18, 148.91, 135.63, 162.38, 129.20, 161.71, 135.72, 155.07,
    163.42, 165.90, 140.45, 135.26, 166.22, 157.91, 162.08, 136.86, 131.85, 163.64, 165.94, 145.28,
];

fn run(args: &[&str], out: &Path) -> Vec<serde_json::Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(out.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Per row: mean loop time (s) and mean cross-node moves.
fn per_row(s: &[serde_json::Value], rows: usize) -> Vec<(f64, f64)> {
    (0..rows)
        .map(|r| {
            let v: Vec<&serde_json::Value> = s.iter().filter(|x| x["row"] == r).collect();
            assert!(!v.is_empty(), "row {r} has samples");
            let n = v.len() as f64;
            let t = v
                .iter()
                .map(|x| x["probe"]["timing"]["total_ns"].as_f64().unwrap())
                .sum::<f64>();
            let x = v
                .iter()
                .map(|x| {
                    x["trace"]["task"]["migrations"]["cross_node"]
                        .as_f64()
                        .unwrap()
                })
                .sum::<f64>();
            (t / n / 1e9, x / n)
        })
        .collect()
}

#[test]
fn intel_profile_against_the_rfc_table() {
    let tmp = tempfile::tempdir().unwrap();
    let s = run(
        &[
            "run",
            "--backend",
            "sim",
            "--preset",
            "xeon-8167m-2n",
            "--samples",
            "8",
            "--trace",
        ],
        &tmp.path().join("x"),
    );
    let rows = per_row(&s, 36);
    let base = rows[0].0;
    let mut errs = Vec::new();
    eprintln!("row   sim/[00]  RFC/[00]   error  sim xnode/sample");
    for (i, (t, x)) in rows.iter().enumerate() {
        let (sim, rfc) = (t / base, RFC_INTEL[i] / RFC_INTEL[0]);
        let err = sim / rfc - 1.0;
        errs.push(err.abs());
        eprintln!(
            "[{i:02}]  {sim:7.3}  {rfc:8.3}  {:+6.1}%  {x:8.1}",
            100.0 * err
        );
    }
    // Rows pinned on both sides: placement is fixed, so the profile's
    // latencies alone decide; these must agree closely.
    for i in [0, 1, 3, 4, 9, 10, 12, 13, 18, 19, 21, 22, 27, 28, 30, 31] {
        assert!(
            errs[i] < 0.05,
            "pinned row [{i:02}] off by {:.1}%",
            100.0 * errs[i]
        );
    }
    // Mem F with the CPU pinned ([06] [07] [15] [16] [24] [25] [33] [34]):
    // numalab's probe binds its CPU before it touches its buffer, so first
    // touch puts the memory on the CPU's node and these rows run local; the
    // RFC's run as if remote (its probe allocated before binding). A
    // difference of probes, not of the model: left out of the summary.
    let probe_differs = [6, 7, 15, 16, 24, 25, 33, 34];
    for &i in &probe_differs {
        assert!(
            rows[i].0 < base * 1.1,
            "[{i:02}] runs with local memory here"
        );
    }
    let mut sorted: Vec<f64> = errs
        .iter()
        .enumerate()
        .filter(|(i, _)| !probe_differs.contains(i))
        .map(|(_, e)| *e)
        .collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let max = sorted[sorted.len() - 1];
    eprintln!(
        "28 rows: median |error| {:.1}%, max {:.1}%",
        100.0 * median,
        100.0 * max
    );
    assert!(median < 0.10, "median error {:.1}%", 100.0 * median);
    assert!(max < 0.30, "max error {:.1}%", 100.0 * max);
    // The RFC's central observation: memory bound, CPU floating, is as bad
    // as or worse than pinned away from the memory ([02] vs [00] and [01]).
    assert!(rows[2].0 > rows[0].0 * 1.05, "[02] is slower than [00]");
    assert!(
        rows[2].1 > 50.0 && rows[0].1 < 3.0,
        "[02] crosses nodes, [00] does not"
    );
}

#[test]
fn lab_findings_in_direction() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("cells.toml");
    std::fs::write(
        &spec,
        r#"samples = 16
load = 60
mem = ["A", "F"]
cpu = ["F"]
[[blocks]]
pnid = -1
nb = 1
[[blocks]]
pnid = -1
nb = 0
[[blocks]]
pnid = "A"
nb = 1
[[blocks]]
pnid = "A"
nb = 0
[probe]
size = "16M"
counts = 8
"#,
    )
    .unwrap();
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/topo/2node/root"
    );
    let s = run(
        &[
            "--sysfs-root",
            root,
            "run",
            "--backend",
            "sim",
            "--profile",
            "lab-tcg",
            "--spec",
            spec.to_str().unwrap(),
            "--trace",
        ],
        &tmp.path().join("lab"),
    );
    // Rows: [00] -1/1 A, [01] -1/1 F, [02] -1/0 A, [03] -1/0 F,
    //       [04] A/1 A, [05] A/1 F, [06] A/0 A, [07] A/0 F.
    let r = per_row(&s, 8);
    for (i, (t, x)) in r.iter().enumerate() {
        eprintln!("[{i:02}] {t:6.2} s  {x:7.1} cross-node moves per sample");
    }
    // (a) a forced node cuts cross-node moves with NB on (lab: by 20-40%).
    assert!(
        r[4].1 < r[0].1 * 0.95,
        "(a) PNID A {} vs -1 {}",
        r[4].1,
        r[0].1
    );
    // (c) with NB off the forced node does nothing (lab: no effect).
    let ratio = r[6].1 / r[2].1;
    assert!(
        (0.85..1.15).contains(&ratio),
        "(c) PNID A/NB 0 vs -1/NB 0: {ratio:.2}"
    );
    // (b) both floating, NB off moves across nodes no more than NB on
    // (lab: 12-30% fewer).
    assert!(
        r[3].1 <= r[1].1 * 1.02,
        "(b) NB 0 {} vs NB 1 {}",
        r[3].1,
        r[1].1
    );
}
