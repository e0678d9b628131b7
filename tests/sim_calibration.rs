//! The simulator against what it is calibrated and validated on (the
//! numbers and their reading are in docs/sim-validation.md):
//! - the RFC's Intel table (../shared/seeds/preferred-node-affinity-rfc.txt,
//!   Xeon 8167M, 64 samples per row), as ratios of each row to row [00]:
//!   two values are fitted, the `xeon-8167m` profile's `memory.cpu_ns` and
//!   the RFC's probe size (which it does not give), on rows 00-05 (pinned
//!   remote/local, and floating with NB 0); the other 30 rows are
//!   predictions;
//! - the RFC's spread of each row's 64 samples: the profile's
//!   `noise.sample_cv` is fitted on the same four pinned rows as the time,
//!   and rows [00]-[05] are held near the RFC's spread;
//! - the lab's findings on a real kernel (docs/preferred-node.md: 2-node
//!   guest, 60% load, 16 MiB x 8 probe), in direction: the tolerance says
//!   how far the model is trusted, and the test prints every number.

mod common;

use common::run_samples as run;

/// Avg of each row, in order (the RFC's table, seconds).
const RFC_INTEL: [f64; 36] = [
    136.50, 168.78, 173.15, 165.95, 137.23, 179.90, 163.87, 168.96, 180.71, 135.68, 166.60, 171.97,
    164.01, 138.01, 177.07, 165.70, 165.18, 148.91, 135.63, 162.38, 129.20, 161.71, 135.72, 155.07,
    163.42, 165.90, 140.45, 135.26, 166.22, 157.91, 162.08, 136.86, 131.85, 163.64, 165.94, 145.28,
];

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

/// The RFC's experiment as far as its text and traces pin it down (the
/// reasoning is in docs/sim-validation.md, "Calibration"): samples as long as its
/// (row [00] took 136.5 s: 296 passes of the 58 MiB probe), memory bound
/// for the whole process (its bound rows with NB 1 behave as NB 0), and a
/// load NUMA balancing does not see (its NB 1 and PNID rows hold the probe
/// on its node, 7-236 cross-node moves against ~1500).
const RFC_EXPERIMENT: [&str; 13] = [
    "--size",
    "59392K",
    "--counts",
    "296",
    "--bind-scope",
    "process",
    "--load-policy",
    "local",
    "--preset",
    "xeon-8167m-2n",
    "--samples",
    "8",
    "--trace",
];

/// The RFC's sd of each row's 64 samples (seconds).
const RFC_INTEL_SD: [f64; 36] = [
    2.95, 2.58, 4.89, 1.57, 4.97, 3.73, 6.31, 3.74, 3.33, 2.93, 1.76, 3.70, 2.82, 1.22, 3.56, 2.41,
    5.99, 5.48, 2.07, 6.73, 3.28, 5.55, 3.10, 4.50, 5.04, 1.67, 5.81, 2.30, 2.65, 2.75, 3.37, 2.01,
    5.55, 2.74, 2.41, 3.60,
];

/// sd / mean of each row's loop times.
fn cv_per_row(s: &[serde_json::Value], rows: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| {
            let t: Vec<f64> = s
                .iter()
                .filter(|x| x["row"] == r)
                .map(|x| x["probe"]["timing"]["total_ns"].as_f64().unwrap())
                .collect();
            let n = t.len() as f64;
            let mean = t.iter().sum::<f64>() / n;
            let var = t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            var.sqrt() / mean
        })
        .collect()
}

/// Root mean square of some values.
fn rms(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
}

/// Rows the calibration fits: the pinned ones give remote/local, [02] and
/// [05] (floating, NB 0, memory bound) the cost of moving.
const FITTED: [usize; 6] = [0, 1, 3, 4, 2, 5];

#[test]
fn intel_profile_against_the_rfc_table() {
    // The preset as it is: its machine noise is drawn per sample index and
    // shared by the rows, so the ratios keep the model's expectation.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec!["run", "--backend", "sim"];
    args.extend(RFC_EXPERIMENT);
    let s = run(&args, &tmp.path().join("x"));
    let rows = per_row(&s, 36);
    let base = rows[0].0;
    let ratio = |i: usize| rows[i].0 / base;
    let rfc = |i: usize| RFC_INTEL[i] / RFC_INTEL[0];
    let mut errs = Vec::new();
    eprintln!("row   sim/[00]  RFC/[00]   error  sim xnode/sample");
    for (i, (_, x)) in rows.iter().enumerate() {
        let err = ratio(i) / rfc(i) - 1.0;
        errs.push(err.abs());
        eprintln!(
            "[{i:02}]  {:7.3}  {:8.3}  {:+6.1}%  {x:8.1}{}",
            ratio(i),
            rfc(i),
            100.0 * err,
            if FITTED.contains(&i) {
                "  (fitted)"
            } else {
                ""
            }
        );
    }
    eprintln!("[00] loop: {base:.1} s (the RFC's: 136.5 s)");
    // Rows pinned on both sides: placement is fixed, so the profile's
    // latencies alone decide; these must agree closely.
    for i in [0, 1, 3, 4, 9, 10, 12, 13, 18, 19, 21, 22, 27, 28, 30, 31] {
        assert!(
            errs[i] < 0.05,
            "pinned row [{i:02}] off by {:.1}%",
            100.0 * errs[i]
        );
    }
    // The fit itself: [02] and [05] together.
    let fit = (ratio(2) + ratio(5)) / (rfc(2) + rfc(5)) - 1.0;
    assert!(fit.abs() < 0.02, "[02]+[05] off by {:.1}%", 100.0 * fit);
    // Mem F with the CPU pinned ([06] [07] [15] [16] [24] [25] [33] [34]):
    // numalab's probe binds its CPU before it touches its buffer, so first
    // touch puts the memory on the CPU's node and these rows run local; the
    // RFC's run as if remote, NB 1 or not. A difference of probes the RFC
    // does not explain: left out of the summary.
    let probe_differs = [6, 7, 15, 16, 24, 25, 33, 34];
    for &i in &probe_differs {
        assert!(ratio(i) < 1.1, "[{i:02}] runs with local memory here");
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
    let within = sorted.iter().filter(|e| **e < 0.05).count();
    eprintln!(
        "28 rows: median |error| {:.1}%, max {:.1}%, {within} within 5%",
        100.0 * median,
        100.0 * max
    );
    assert!(median < 0.04, "median error {:.1}%", 100.0 * median);
    assert!(max < 0.12, "max error {:.1}%", 100.0 * max);
    // The RFC's findings. Memory bound, CPU floating, is worse than pinned
    // away from the memory:
    assert!(
        ratio(2) > ratio(1) && ratio(5) > ratio(3),
        "float with memory bound is slower than pinned remote"
    );
    // PNID with NB beats NB alone when memory is bound:
    assert!(
        ratio(20) < ratio(11) * 0.9 && ratio(32) < ratio(14) * 0.9,
        "PNID on the memory's node beats NB alone"
    );
    // NB helps when both float:
    assert!(ratio(17) < ratio(8) * 0.9, "NB helps when both float");
    // The traces (two samples each in the RFC): floating rows with NB 0
    // cross nodes 1500-1738 times; a forced node cuts that to 7-12. Model 8
    // crosses 2.2-2.5 times as often (docs/sim-validation.md, "Model 8"):
    // which CPU takes a waiting probe depends on when its worker's EEVDF
    // turn ends against the tick and the load's phases, and the RFC's load
    // is not numalab's (its traces move the probe within its core a tenth
    // as often). A known gap, printed; the assertion holds the order of
    // magnitude.
    for i in [2, 8] {
        eprintln!(
            "[{i:02}] crosses nodes {:.0} times per sample (the RFC's traces: 1500-1738)",
            rows[i].1
        );
        assert!(
            (750.0..5200.0).contains(&rows[i].1),
            "[{i:02}] crosses nodes {:.0} times per sample (RFC: 1500-1738)",
            rows[i].1
        );
    }
    // The RFC's cut is 99% (7-12 against 1344-1499); models 4-7 cut about
    // 90%, model 8 over 99% (docs/sim-validation.md, "Outside 5%"); printed,
    // and the assertion holds the finding that the forced node removes
    // most crossings.
    eprintln!(
        "PNID's cut of cross-node moves: [20] {:.0} vs [11] {:.0} per sample ({:.1}%; the RFC's traces: 7-12 vs 1344-1499)",
        rows[20].1,
        rows[11].1,
        100.0 * rows[20].1 / rows[11].1
    );
    assert!(
        rows[20].1 < rows[11].1 * 0.25,
        "PNID cuts cross-node moves: [20] {:.0} vs [11] {:.0}",
        rows[20].1,
        rows[11].1
    );
}

/// The spread of the samples of rows [00]-[05] (NB 0, PNID -1, memory
/// on node 0 or 1, CPU pinned to either node or floating), with the
/// preset's noise: the pinned rows' is the fitted `noise.sample_cv`; the
/// floating rows add what the model's own placement varies, which the RFC
/// shows more of (docs/sim-validation.md, "Sample-to-sample spread"). The six rows
/// share their 16 draws, so this is one 16-sample estimate of the noise,
/// plus each row's own spread.
#[test]
fn the_samples_spread_as_the_rfcs() {
    let tmp = tempfile::tempdir().unwrap();
    // The RFC's experiment without --samples and --trace, rows [00]-[05].
    let rows = |samples: &'static str, extra: &[&'static str]| {
        let mut a = vec!["run", "--backend", "sim"];
        a.extend(&RFC_EXPERIMENT[..10]);
        a.extend(["--samples", samples, "--pnid=-1", "--nb", "0"]);
        a.extend(["--mem", "0,1", "--cpu", "0,1,F"]);
        a.extend(extra);
        a
    };
    let s = run(&rows("16", &[]), &tmp.path().join("x"));
    // Rows: mem 0 x cpu 0,1,F, then mem 1 x cpu 0,1,F: the RFC's [00]-[05].
    let cv = cv_per_row(&s, 6);
    let rfc_cv = |i: usize| RFC_INTEL_SD[i] / RFC_INTEL[i];
    for (i, c) in cv.iter().enumerate() {
        eprintln!(
            "[{i:02}] sd/mean {:.2}% (RFC {:.2}%)",
            100.0 * c,
            100.0 * rfc_cv(i)
        );
    }
    let sim = rms(cv.iter().copied());
    let rfc = rms((0..6).map(rfc_cv));
    eprintln!(
        "root mean square over [00]-[05]: {:.2}% (RFC {:.2}%)",
        100.0 * sim,
        100.0 * rfc
    );
    assert!(
        (0.67..1.5).contains(&(sim / rfc)),
        "spread {:.2}% against the RFC's {:.2}%",
        100.0 * sim,
        100.0 * rfc
    );
    // Without the profile's noise a pinned probe's time hardly varies: the
    // spread above is the profile's, not the model's.
    // Without the profile's noise (the preset's file, its one line changed).
    let profile = common::xeon_profile(
        tmp.path(),
        "xeon-noiseless.toml",
        "sample_cv = 0.023",
        "sample_cv = 0.0",
    );
    let mut quiet = rows("4", &[]);
    quiet.extend(["--profile", profile.to_str().unwrap()]);
    let cv = cv_per_row(&run(&quiet, &tmp.path().join("quiet")), 6);
    for i in [0, 1, 3, 4] {
        eprintln!("[{i:02}] without noise: sd/mean {:.3}%", 100.0 * cv[i]);
        assert!(cv[i] < 0.005, "[{i:02}] varies by {:.2}%", 100.0 * cv[i]);
    }
}

/// The same table with numalab's own experiment (its default 256 MiB x 4
/// probe, memory bound with mbind, the default load): the workers prefer
/// their nodes (tests/lab_load_policy.rs shows it on a real kernel), so a
/// preferred node, forced or from NUMA balancing, holds nothing.
#[test]
fn with_numalabs_load_a_preferred_node_does_not_hold_the_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = [
        "--samples",
        "4",
        "--trace",
        "--pnid=-1,A",
        "--nb",
        "1",
        "--mem",
        "0,F",
        "--cpu",
        "F",
    ];
    let s = run(
        &[&common::SIM_XEON_RUN[..], &rows].concat(),
        &tmp.path().join("x"),
    );
    // Rows: [0] -1 M0, [1] -1 MF, [2] A=0 M0, [3] A=0 MF (all NB 1, CPU F).
    let r = per_row(&s, 4);
    for (i, (t, x)) in r.iter().enumerate() {
        eprintln!("[{i}] {t:6.2} s  {x:7.1} cross-node moves per sample");
    }
    for (i, (_, x)) in r.iter().enumerate() {
        assert!(*x > 50.0, "row {i} crosses nodes {x:.0} times");
    }
    assert!(r[2].1 > r[0].1 * 0.5, "PNID 0 barely changes the moves");
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
