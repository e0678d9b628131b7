//! The simulator's machine noise (the profile's `noise.sample_cv`,
//! docs/sim-validation.md "Sample-to-sample spread"): it spreads a row's samples, it
//! is drawn per sample index so every row of a run shares it, and the
//! report says which spread a simulated run has.

mod common;

use std::path::Path;

/// Loop times of `row`, in sample order.
fn times(s: &[serde_json::Value], row: u64) -> Vec<f64> {
    let mut v: Vec<(u64, f64)> = s
        .iter()
        .filter(|r| r["row"] == row)
        .map(|r| {
            (
                r["sample"].as_u64().unwrap(),
                r["probe"]["timing"]["total_ns"].as_f64().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|x| x.1).collect()
}

/// Two pinned rows of the Xeon preset that differ only in NB, six samples.
fn two_pinned_rows(profile: &Path, out: &Path) -> Vec<serde_json::Value> {
    common::run_samples(
        &[
            "run",
            "--backend",
            "sim",
            "--preset",
            "xeon-8167m-2n",
            "--profile",
            profile.to_str().unwrap(),
            "--samples",
            "6",
            "--size",
            "32M",
            "--counts",
            "6",
            "--nb",
            "0,1",
            "--pnid=-1",
            "--mem",
            "A",
            "--cpu",
            "A",
        ],
        out,
    )
}

/// Sample k of every row draws the same factor (common random numbers):
/// two pinned rows that differ only in NB run sample by sample alike,
/// while their samples differ from each other by the noise.
#[test]
fn sample_k_of_every_row_runs_on_the_same_machine_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let noisy = common::xeon_profile(
        tmp.path(),
        "noisy.toml",
        "sample_cv = 0.023",
        "sample_cv = 0.2",
    );
    let out = tmp.path().join("r");
    let s = two_pinned_rows(&noisy, &out);
    let (a, b) = (times(&s, 0), times(&s, 1));
    assert_eq!((a.len(), b.len()), (6, 6));
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        // The model's own spread of so short a sample is a few percent;
        // independent draws at cv 0.2 would differ with an sd of 28%.
        assert!((x / y - 1.0).abs() < 0.05, "sample {k}: {x} vs {y}");
    }
    let (lo, hi) = a
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    assert!(hi / lo > 1.1, "six samples at cv 0.2 spread: {a:?}");
    let (code, rep, err) = common::numalab_out(&["report", out.to_str().unwrap()], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        rep.contains("Sim_noise: sample_cv 0.2 (profile xeon-8167m"),
        "{rep}"
    );
}

/// Without noise the report says the spread is the model's alone, and a
/// pinned row varies by its placement only (a few percent in samples this
/// short, under the 10% the noisy run above must exceed).
#[test]
fn without_noise_the_report_says_the_spread_is_the_models() {
    let tmp = tempfile::tempdir().unwrap();
    let quiet = common::xeon_profile(
        tmp.path(),
        "quiet.toml",
        "sample_cv = 0.023",
        "sample_cv = 0.0",
    );
    let out = tmp.path().join("r");
    let a = times(&two_pinned_rows(&quiet, &out), 0);
    let (lo, hi) = a
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    assert!(hi / lo < 1.1, "{a:?}");
    let (code, rep, err) = common::numalab_out(&["report", out.to_str().unwrap()], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        rep.contains("Sim_noise: none (profile xeon-8167m states no machine noise"),
        "{rep}"
    );
}

/// `compare` says when two simulated runs share their noise draws (the
/// same seed), and not when their seeds differ.
#[test]
fn compare_warns_when_two_simulated_runs_share_their_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let out = tmp.path().join(name);
        common::run_samples(
            &[
                "run",
                "--backend",
                "sim",
                "--preset",
                "xeon-8167m-2n",
                "--samples",
                "3",
                "--size",
                "32M",
                "--counts",
                "2",
                "--nb",
                "0",
                "--pnid=-1",
                "--mem",
                "A",
                "--cpu",
                "A",
                "--seed",
                seed,
            ],
            &out,
        );
        out.to_str().unwrap().to_string()
    };
    let (a, b, c) = (run("a", "1"), run("b", "1"), run("c", "2"));
    let compare = |x: &str, y: &str| {
        let (code, out, err) = common::numalab_out(&["compare", x, y], tmp.path());
        assert_eq!(code, 0, "{err}");
        out
    };
    let same = compare(&a, &b);
    assert!(
        same.contains("are simulated with the same seed (1)"),
        "{same}"
    );
    let other = compare(&a, &c);
    assert!(!other.contains("same seed"), "{other}");
}
