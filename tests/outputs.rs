//! An output is never one of the command's inputs (the second reliability
//! floor): `trace --from t.txt -o t.txt` replaced its own input, exit 0.
//! `plot` into a run directory is in tests/plot.rs.

mod common;

use common::numalab;

/// Regression: `trace --from t.txt -o t.txt` replaced its input with the
/// record.
#[test]
fn trace_from_t_txt_to_t_txt_is_refused_and_the_input_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/trace/perf-script.txt"
    );
    let input = tmp.path().join("t.txt");
    std::fs::copy(fixture, &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let link = tmp.path().join("same.txt");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let i = input.to_str().unwrap();
    for out in [i, link.to_str().unwrap()] {
        let (code, err) = numalab(&["trace", "--from", i, "-o", out], tmp.path());
        assert_eq!(code, 2, "{out}: {err}");
        assert!(err.contains("is also the input --from"), "{err}");
        assert_eq!(std::fs::read(&input).unwrap(), before, "the input changed");
    }
}

/// `topo --capture` into the tree it reads (`--sysfs-root`) would mix the
/// copy with the original: refused before reading.
#[test]
fn topo_capture_into_its_own_sysfs_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/topo/2node");
    let copy = tmp.path().join("root");
    let status = std::process::Command::new("cp")
        .args(["-r", root, copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let c = copy.to_str().unwrap();
    let (code, err) = numalab(&["--sysfs-root", c, "topo", "--capture", c], tmp.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is also the input --sysfs-root"), "{err}");
}

/// Regression: `topo --capture /proc/nonexistent/x` exited 1 after it began
/// writing (access(2) calls /proc writable for root); now exit 2 first.
#[test]
fn topo_capture_under_proc_is_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, err) = numalab(&["topo", "--capture", "/proc/nonexistent/x"], tmp.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("procfs"), "{err}");
}
