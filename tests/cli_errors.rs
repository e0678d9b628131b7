//! Bad input fails with exit 2, a message naming what is wrong, and nothing
//! changed: no run directory, no journal, knobs as they were.

use std::process::Command;

fn numalab(args: &[&str], state: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .env("NUMALAB_STATE_DIR", state)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_run_specs_exit_2_before_any_change() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let out_s = out.to_str().unwrap();
    let bad_toml = tmp.path().join("bad.toml");
    std::fs::write(&bad_toml, "samples = [oops\n").unwrap();
    let nb_before = std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok();
    for (args, needle) in [
        (
            vec!["run", "--samples", "0", "--out", out_s],
            "samples must be at least 1",
        ),
        (
            vec!["run", "--nodes", "0,7", "--out", out_s],
            "node 7 does not exist",
        ),
        (
            vec!["run", "--nb", "5", "--out", out_s],
            "blocks: empty dimension",
        ),
        (vec!["run", "--mem", "Q", "--out", out_s], "mem value \"Q\""),
        (vec!["run", "--load", "150", "--out", out_s], "load 150"),
        (
            vec!["run", "--spec", bad_toml.to_str().unwrap(), "--out", out_s],
            "bad.toml",
        ),
        (
            vec!["run", "--resume", "/nonexistent-numalab-run"],
            "run.json",
        ),
        (vec!["report", "/nonexistent-numalab-run"], "run.json"),
        (vec!["probe", "--interleave", "0,9"], "token \"9\""),
        (vec!["topo", "--nodes", "x"], "token \"x\""),
    ] {
        let (code, err) = numalab(&args, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
        assert!(!out.exists(), "{args:?} created the run directory");
        assert!(
            !tmp.path().join("restore.json").exists(),
            "{args:?} wrote a journal"
        );
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/numa_balancing").ok(),
        nb_before
    );
}

#[test]
fn restore_without_journal_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("restore")
        .env("NUMALAB_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn example_spec_parses_to_the_rfc_default() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rfc.toml")).unwrap();
    let spec = numalab::experiment::spec::ExperimentSpec::from_toml(&text, "rfc.toml").unwrap();
    assert_eq!(spec, numalab::experiment::spec::ExperimentSpec::default());
}
