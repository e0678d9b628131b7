//! The topology reader on sysfs trees captured from the lab guests
//! (tests/fixtures/topo/NAME: the files numalab read, and what the guest's
//! numactl and sysfs said), so every lab topology is covered without
//! booting anything. Refresh with `NUMALAB_UPDATE_FIXTURES=1 cargo test
//! --release --test lab_topo`.

mod common;

use common::{check_json_against_facts, compare_numactl, parse_cpu_facts};
use numalab::idset::IdSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Vec<PathBuf> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topo");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{}: {e}", base.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("root").is_dir())
        .collect();
    v.sort();
    v
}

fn numalab(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("--sysfs-root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_captured_topology_matches_its_guest() {
    let all = fixtures();
    for name in [
        "2node",
        "2node-offline",
        "2node-cpuset",
        "4node-smt",
        "2node-smt",
        "8node-dl980",
        "memonly",
        "interleaved",
    ] {
        assert!(
            all.iter().any(|p| p.ends_with(name)),
            "fixture {name} missing: run the lab tests with NUMALAB_UPDATE_FIXTURES=1"
        );
    }
    for dir in all {
        let root = dir.join("root");
        let (code, text, err) = numalab(&root, &["topo"]);
        assert_eq!(code, 0, "{}: {err}", dir.display());
        compare_numactl(
            &text,
            &read(&dir.join("numactl-before.txt")),
            &read(&dir.join("numactl-after.txt")),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let (code, json, err) = numalab(&root, &["topo", "--json"]);
        assert_eq!(code, 0, "{err}");
        check_json_against_facts(&json, &parse_cpu_facts(&read(&dir.join("facts.txt"))))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
}

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topo")
        .join(name)
        .join("root")
}

#[test]
fn smt_fixture_pairs_threads_and_offline_fixture_lists_the_cpu() {
    let (_, json, _) = numalab(&fixture("4node-smt"), &["topo", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for c in v["cpus"].as_array().unwrap() {
        let siblings = IdSet::parse(c["smt_siblings"].as_str().unwrap()).unwrap();
        assert_eq!(siblings.len(), 2, "{c}");
    }
    let (_, text, _) = numalab(&fixture("2node-offline"), &["topo"]);
    assert!(text.contains("offline CPUs: 3"), "{text}");
    let (_, text, _) = numalab(&fixture("memonly"), &["topo"]);
    assert!(text.contains("no CPUs (memory only)"), "{text}");
}

#[test]
fn machine_without_node_directory_is_one_node() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixture("2node"), &root);
    std::fs::remove_dir_all(root.join("sys/devices/system/node")).unwrap();
    std::fs::write(
        root.join("proc/meminfo"),
        "MemTotal:        1024000 kB\nMemFree:          512000 kB\n",
    )
    .unwrap();
    let (code, text, err) = numalab(&root, &["topo"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("available: 1 nodes (0)\nnode 0 cpus: 0 1 2 3\nnode 0 size: 1000 MB\nnode 0 free: 500 MB\n"), "{text}");
    assert!(text.contains("no /sys/devices/system/node"), "{text}");
}

#[test]
fn regression_malformed_distance_names_path_and_content() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&fixture("2node"), &root);
    std::fs::write(
        root.join("sys/devices/system/node/node1/distance"),
        "20 ten\n",
    )
    .unwrap();
    let (code, _, err) = numalab(&root, &["topo"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("node1/distance") && err.contains("20 ten"),
        "{err}"
    );
}
