//! `numalab sched` refuses what it cannot do, before anything changes: a
//! kernel without sched_ext (a fixture tree captured from a 2-node guest of
//! Debian's 6.1, which has none), and bad options, each with exit 2 and a
//! message naming what is wrong, and no state directory left behind. The
//! scheduler itself runs in tests/lab_sched.rs.

mod common;

use common::numalab;

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/topo/2node/root",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_kernel_without_sched_ext_is_exit_2_naming_it() {
    let state = tempfile::tempdir().unwrap();
    let st = state.path().join("state");
    let root = fixture();
    let (rc, err) = numalab(&["--sysfs-root", &root, "sched", "--duration", "1"], &st);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("has no sched_ext"), "{err}");
    assert!(err.contains("CONFIG_SCHED_CLASS_EXT"), "{err}");
    assert!(!st.exists(), "a refusal made the state directory");
}

#[test]
fn bad_sched_options_exit_2_before_any_change() {
    let state = tempfile::tempdir().unwrap();
    let st = state.path().join("state");
    let root = fixture();
    for (args, needle) in [
        (vec!["sched", "--home", "1"], "--home homes a command"),
        (vec!["sched", "--", "true"], "--home N|auto"),
        (vec!["sched", "--policy", "often"], "--policy \"often\""),
        (
            vec!["sched", "--off", "steal"],
            "the mechanisms are place, queue",
        ),
        (vec!["sched", "--home", "7", "--", "true"], "no node 7"),
        (
            vec!["sched", "--home", "x", "--", "true"],
            "give a node id or `auto`",
        ),
        (
            vec!["sched", "--steal-delay", "5", "--steal-delay-busy", "1"],
            "--steal-delay-busy 1",
        ),
        (vec!["sched", "--slice", "0"], "--slice 0"),
        (vec!["sched", "--duration", "0"], "not a positive number"),
        (vec!["sched", "--pid", "1"], "invalid value '1' for '--pid"),
        (
            vec!["sched", "--home", "0", "--pid", "999999999"],
            "no process 999999999",
        ),
    ] {
        let mut full = vec!["--sysfs-root", root.as_str()];
        full.extend(args.iter());
        let (rc, err) = numalab(&full, &st);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(!st.exists(), "a refusal made the state directory");
}
