//! Messages blame what the user got wrong, by the name the user typed it
//! under (the second reliability floor's wrong-blame defects).

mod common;

use common::numalab;

/// Regression: `trace --pid -1` said `"" is not a pid` (the `-` was read as
/// a range with no start).
#[test]
fn trace_pid_minus_1_names_the_negative_pid_not_an_empty_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, err) = numalab(&["trace", "--pid=-1", "--duration", "1"], tmp.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("\"-1\" is not a pid"), "{err}");
    assert!(!err.contains("\"\""), "{err}");
}

/// Regression: `jobs --home 99` blamed `--node`, an option jobs does not
/// have.
#[test]
fn jobs_home_99_names_home_not_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, err) = numalab(&["jobs", "2", "--home", "99"], tmp.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--home 99: no such node"), "{err}");
    assert!(!err.contains("--node"), "{err}");
}

/// Regression: a state directory that is a file was blamed on root
/// ("changing system state needs root") even to root.
#[test]
fn a_state_dir_that_is_a_file_is_named_as_not_a_directory_not_a_root_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("state");
    std::fs::write(&file, "x").unwrap();
    let out = tmp.path().join("run");
    let (code, err) = numalab(&["run", "--quick", "--out", out.to_str().unwrap()], &file);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not a directory"), "{err}");
    assert!(!err.contains("needs root"), "{err}");
    assert!(!out.exists(), "a run directory was made");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}
