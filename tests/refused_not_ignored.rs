//! Options that would be ignored are refused (the second reliability
//! floor): a user who adds `--samples 5` to `run --resume`, or `-o` to
//! `jobs --from`, learns it did nothing instead of trusting it did.

mod common;

use common::{numalab, numalab_out};

/// Regression: `run --resume D --samples 5 --size 1G --load 50 --seed 9`
/// ignored all four without a word, while `--out` was refused.
#[test]
fn run_resume_with_samples_size_load_seed_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("run");
    let ds = d.to_str().unwrap();
    let (rc, err) = numalab(
        &[
            "run",
            "--backend",
            "sim",
            "--samples",
            "1",
            "--nb",
            "0",
            "--out",
            ds,
        ],
        tmp.path(),
    );
    assert_eq!(rc, 0, "{err}");
    let before = std::fs::read(d.join("samples.jsonl")).unwrap();
    for extra in [
        &["--samples", "5"][..],
        &["--size", "1G"],
        &["--load", "50"],
        &["--seed", "9"],
        &["--knob", "sched/numa_balancing/scan_delay_ms=10"],
        &["--trace"],
        &["--quick"],
    ] {
        let mut args = vec!["run", "--resume", ds];
        args.extend_from_slice(extra);
        let (rc, err) = numalab(&args, tmp.path());
        assert_eq!(rc, 2, "{extra:?}: {err}");
        assert!(err.contains(extra[0]), "{extra:?}: {err}");
        assert!(err.contains("--resume"), "{extra:?}: {err}");
    }
    assert_eq!(std::fs::read(d.join("samples.jsonl")).unwrap(), before);
}

/// Two short simulated jobs on the Xeon preset.
const JOBS_SIM: [&str; 8] = [
    "jobs",
    "2",
    "--backend",
    "sim",
    "--preset",
    "xeon-8167m-2n",
    "--counts",
    "2",
];

/// A simulated jobs record, written with -o.
fn jobs_record(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("jobs.json");
    let mut args = JOBS_SIM.to_vec();
    args.extend(["-o", out.to_str().unwrap()]);
    let (rc, _, err) = numalab_out(&args, dir);
    assert_eq!(rc, 0, "{err}");
    out
}

/// Regression: `jobs --from X -o Y` ignored `-o` (and every option that
/// shapes jobs).
#[test]
fn jobs_from_x_with_out_y_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = jobs_record(tmp.path());
    let r = rec.to_str().unwrap();
    let y = tmp.path().join("y.json");
    for extra in [
        &["-o", y.to_str().unwrap()][..],
        &["--size", "64M"],
        &["--home", "0"],
        &["--nb", "0"],
    ] {
        let mut args = vec!["jobs", "--from", r];
        args.extend_from_slice(extra);
        let (rc, _, err) = numalab_out(&args, tmp.path());
        assert_eq!(rc, 2, "{extra:?}: {err}");
        assert!(err.contains("--from"), "{extra:?}: {err}");
    }
    assert!(!y.exists());
    let (rc, _, err) = numalab_out(&["jobs", "--from", r, "--format", "csv"], tmp.path());
    assert_eq!(rc, 0, "--format goes with --from: {err}");
}

/// Regression: `jobs --from` a record with no jobs printed an empty table,
/// exit 0 (plot refused the same file).
#[test]
fn jobs_from_a_record_without_jobs_is_exit_2_not_an_empty_table() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = jobs_record(tmp.path());
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    v["jobs"] = serde_json::json!([]);
    std::fs::write(&rec, v.to_string()).unwrap();
    let (rc, out, err) = numalab_out(&["jobs", "--from", rec.to_str().unwrap()], tmp.path());
    assert_eq!(rc, 2, "{out}{err}");
    assert!(err.contains("holds no job"), "{err}");
    assert!(out.is_empty(), "{out}");
}

/// jobs parses the probe options after `--` once, typed (no argv written
/// back and parsed again): jobs' own options given there again are refused
/// by name, placement options are taken.
#[test]
fn jobs_options_repeated_after_the_dash_dash_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    for (opt, val) in [("--size", "1G"), ("--counts", "3"), ("--pattern", "chase")] {
        let (rc, _, err) = numalab_out(
            &["jobs", "2", "--backend", "sim", "--", opt, val],
            tmp.path(),
        );
        assert_eq!(rc, 2, "{opt}: {err}");
        assert!(err.contains(&format!("{opt} after `--`")), "{err}");
    }
    let mut args = JOBS_SIM.to_vec();
    args.extend(["--", "--membind", "1"]);
    let (rc, out, err) = numalab_out(&args, tmp.path());
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("--counts 2") && out.contains("--membind 1"),
        "{out}"
    );
}
