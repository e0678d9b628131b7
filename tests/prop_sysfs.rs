//! Property tests for the topology readers: the sysfs/procfs tree behind
//! [`sysfs::read_topology`] (CPU and node lists, cpuinfo, node distance,
//! node and system meminfo, cache and topology files, /proc/self/status)
//! the topology JSON of `--topology FILE` ([`Topology::from_json`]), and
//! the memory limits of `proc/meminfo` and the cgroup files
//! ([`memory::available`]).
//!
//! The real trees in tests/fixtures/topo/*/root are copied once to a
//! temporary directory; each case mutates one file (edits, arbitrary text,
//! or removal), reads the tree, and restores the file. Properties: no
//! panic, a bounded time, and parse errors that carry the file's path and
//! its (offending) content.

mod prop_common;

use numalab::probe::memory;
use numalab::topology::sysfs::{read_topology, SysRoot, SysfsError};
use numalab::topology::{presets, Topology};
use prop_common::{apply, config, edits, noisy_text, runner, within, Edit};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every fixture root copied under one temporary directory, plus `nonuma`:
/// the 2-node tree without node directories (a kernel without NUMA, read
/// from /proc/meminfo), and each tree's files.
struct Trees {
    _dir: tempfile::TempDir,
    roots: Vec<(PathBuf, Vec<PathBuf>)>,
}

const PROC_MEMINFO: &str = "MemTotal:        8123456 kB\nMemFree:         4123456 kB\n\
MemAvailable:    6000000 kB\nBuffers:          100000 kB\nHugePages_Total:       0\n";

fn trees() -> Trees {
    let dir = tempfile::tempdir().unwrap();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topo");
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("root").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in &names {
        copy_tree(&base.join(n).join("root"), &dir.path().join(n));
    }
    let nonuma = dir.path().join("nonuma");
    copy_tree(&base.join("2node/root"), &nonuma);
    std::fs::remove_dir_all(nonuma.join("sys/devices/system/node")).unwrap();
    std::fs::write(nonuma.join("proc/meminfo"), PROC_MEMINFO).unwrap();
    names.push("nonuma".into());
    let roots = names
        .iter()
        .map(|n| {
            let root = dir.path().join(n);
            let mut f = Vec::new();
            files(&root, &mut f);
            f.sort();
            // Every tree must read as it is.
            read_topology(&SysRoot::new(&root)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (root, f)
        })
        .collect();
    Trees { _dir: dir, roots }
}

/// Puts a file back as it was when dropped (also when a case panics).
struct Restore(PathBuf, Vec<u8>);
impl Drop for Restore {
    fn drop(&mut self) {
        std::fs::write(&self.0, &self.1).unwrap();
    }
}

#[derive(Debug, Clone)]
enum Change {
    Edit(Vec<Edit>),
    Replace(String),
    Remove,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => edits().prop_map(Change::Edit),
        2 => noisy_text().prop_map(Change::Replace),
        1 => Just(Change::Remove),
    ]
}

fn check(root: &Path, file: &Path, content: Option<&str>) {
    let sys = SysRoot::new(root);
    let r = within(Duration::from_secs(5), "read_topology", || {
        read_topology(&sys)
    });
    match r {
        Ok(t) => {
            // What was read is a consistent machine that survives JSON.
            let back = Topology::from_json(&t.to_json(), "round trip").unwrap();
            assert_eq!(back, t);
        }
        Err(SysfsError::Parse {
            path,
            content: shown,
            reason,
        }) => {
            // Only `file` changed, so only it can be malformed.
            assert_eq!(path, file, "{reason}");
            let c = content.expect("a removed file cannot be malformed");
            assert!(c.contains(&shown), "{shown:?} is not from {c:?}");
            assert!(!reason.is_empty());
        }
        Err(SysfsError::Read { path, .. }) => assert!(path.starts_with(root), "{path:?}"),
        Err(SysfsError::Topology(e)) => {
            assert!(e.source_desc.contains(&root.display().to_string()), "{e}")
        }
    }
}

#[test]
fn mutated_sysfs_trees_read_or_fail_with_path_and_content() {
    let t = trees();
    let strategy = (
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        change(),
    );
    runner("prop_sysfs", 1000)
        .run(&strategy, |(tree, file, ch)| {
            let (root, files) = &t.roots[tree.index(t.roots.len())];
            let f = &files[file.index(files.len())];
            let orig = std::fs::read(f).unwrap();
            let _restore = Restore(f.clone(), orig.clone());
            let new = match &ch {
                Change::Edit(e) => Some(apply(&String::from_utf8_lossy(&orig), e)),
                Change::Replace(s) => Some(s.clone()),
                Change::Remove => None,
            };
            match &new {
                Some(s) => std::fs::write(f, s).unwrap(),
                None => std::fs::remove_file(f).unwrap(),
            }
            check(root, f, new.as_deref());
            Ok(())
        })
        .unwrap();
}

/// Lists in the files the kernel writes as lists, with nasty numbers.
#[test]
fn huge_values_in_list_and_number_files() {
    let t = trees();
    let strategy = (
        any::<prop::sample::Index>(),
        prop::sample::select(
            &[
                "cpulist",
                "online",
                "present",
                "distance",
                "meminfo",
                "core_id",
                "physical_package_id",
                "level",
                "id",
                "shared_cpu_list",
                "thread_siblings_list",
            ][..],
        ),
        prop::collection::vec(prop::sample::select(prop_common::NASTY_NUMBERS), 1..6),
        prop::sample::select(&[" ", ",", "-", "\n", "Node 0 MemTotal: ", " kB\n"][..]),
    );
    runner("prop_sysfs", 500)
        .run(&strategy, |(tree, name, nums, sep)| {
            let (root, files) = &t.roots[tree.index(t.roots.len())];
            let Some(f) = files
                .iter()
                .find(|p| p.file_name().is_some_and(|n| n == name))
            else {
                return Ok(());
            };
            let orig = std::fs::read(f).unwrap();
            let _restore = Restore(f.clone(), orig);
            let text = if name == "meminfo" {
                nums.iter()
                    .map(|n| format!("Node 0 MemTotal: {n} kB\nNode 0 MemFree: {n} kB\n"))
                    .collect()
            } else {
                nums.join(sep)
            };
            std::fs::write(f, &text).unwrap();
            check(root, f, Some(&text));
            Ok(())
        })
        .unwrap();
}

/// Node meminfo sizes of any magnitude: bytes, or a parse error naming
/// the line, never an overflow.
#[test]
fn node_meminfo_sizes_of_any_magnitude() {
    let t = trees();
    let (root, files) = &t.roots[0];
    let f = files
        .iter()
        .find(|p| p.ends_with("node0/meminfo"))
        .unwrap()
        .clone();
    let _restore = Restore(f.clone(), std::fs::read(&f).unwrap());
    let value = prop_oneof![
        prop::sample::select(prop_common::NASTY_NUMBERS).prop_map(str::to_string),
        any::<u64>().prop_map(|v| v.to_string()),
        (0u64..1 << 40).prop_map(|v| v.to_string()),
    ];
    runner("prop_sysfs", 250)
        .run(&(value.clone(), value), |(total, free)| {
            let text = format!("Node 0 MemTotal: {total} kB\nNode 0 MemFree: {free} kB\n");
            std::fs::write(&f, &text).unwrap();
            check(root, &f, Some(&text));
            if let Ok(topo) = read_topology(&SysRoot::new(root)) {
                let kb = |v: &str| v.parse::<u64>().ok().and_then(|k| k.checked_mul(1024));
                prop_assert_eq!(topo.nodes[0].mem_total_bytes, kb(&total));
                prop_assert_eq!(topo.nodes[0].mem_free_bytes, kb(&free));
            }
            Ok(())
        })
        .unwrap();
}

fn seeds() -> Vec<String> {
    presets::PRESETS
        .iter()
        .map(|p| p.topology().to_json())
        .collect()
}

proptest! {
    #![proptest_config(config("prop_sysfs"))]

    #[test]
    fn topology_json_never_panics(
        seed in prop::sample::select(seeds()), e in edits(), junk in noisy_text(), raw in any::<bool>(),
    ) {
        let text = if raw { junk } else { apply(&seed, &e) };
        match within(Duration::from_secs(5), "from_json", || Topology::from_json(&text, "t.json")) {
            Ok(t) => prop_assert_eq!(Topology::from_json(&t.to_json(), "again").unwrap(), t),
            Err(e) => prop_assert_eq!(e.source_desc, "t.json"),
        }
    }
}

/// Found by this file's properties: `Node 0 MemTotal: 18014398509481984 kB`
/// overflowed `kb * 1024` (a panic in debug builds, a wrong size in
/// release); now a parse error naming the file and the line.
#[test]
fn node_meminfo_huge_kb_is_an_error_not_an_overflow() {
    let t = trees();
    let (root, files) = &t.roots[0];
    let f = files.iter().find(|p| p.ends_with("node0/meminfo")).unwrap();
    let _restore = Restore(f.clone(), std::fs::read(f).unwrap());
    std::fs::write(f, "Node 0 MemTotal: 18014398509481984 kB\n").unwrap();
    match read_topology(&SysRoot::new(root)) {
        Err(SysfsError::Parse { path, content, .. }) => {
            assert_eq!(&path, f);
            assert!(content.contains("18014398509481984"));
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// The same in /proc/meminfo (no NUMA): the size is unknown, not a panic.
#[test]
fn proc_meminfo_huge_kb_is_unknown_not_an_overflow() {
    let t = trees();
    let (root, _) = t.roots.iter().find(|(r, _)| r.ends_with("nonuma")).unwrap();
    let f = root.join("proc/meminfo");
    let _restore = Restore(f.clone(), std::fs::read(&f).unwrap());
    std::fs::write(&f, "MemTotal: 18014398509481984 kB\nMemFree: 5 kB\n").unwrap();
    let topo = read_topology(&SysRoot::new(root)).unwrap();
    assert_eq!(topo.nodes[0].mem_total_bytes, None);
    assert_eq!(topo.nodes[0].mem_free_bytes, Some(5120));
}

const CGROUP: &str = "0::/user.slice/user-0.slice/session-1.scope\n";
const CGROUP_V1: &str = "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n";

/// A memory limit of any text: bytes and the file it came from, or
/// nothing; never a panic. A request is refused only past a limit read.
#[test]
fn memory_limits_of_any_text() {
    let number = prop_oneof![
        prop::sample::select(prop_common::NASTY_NUMBERS).prop_map(str::to_string),
        any::<u64>().prop_map(|v| v.to_string()),
        Just("max".to_string()),
    ];
    let strategy = (
        number.clone(),
        number,
        prop::sample::select(&[CGROUP, CGROUP_V1][..]),
        edits(),
        noisy_text(),
        any::<u64>(),
    );
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    runner("prop_sysfs", 250)
        .run(&strategy, |(avail, max, cgroup, e, junk, bytes)| {
            let dir = tempfile::tempdir().unwrap();
            let w = |rel: &str, s: &str| {
                let p = dir.path().join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, s).unwrap();
            };
            w(
                "proc/meminfo",
                &format!("MemTotal: 8000000 kB\nMemAvailable: {avail} kB\n{junk}"),
            );
            w("proc/self/cgroup", &apply(cgroup, &e));
            w("sys/fs/cgroup/user.slice/memory.max", &max);
            w("sys/fs/cgroup/memory/docker/memory.limit_in_bytes", &max);
            let sys = SysRoot::new(dir.path());
            match memory::available(&sys) {
                Ok(Some(l)) => {
                    prop_assert!(
                        l.source.contains(&dir.path().display().to_string()),
                        "{:?}",
                        l
                    )
                }
                Ok(None) => {}
                // An unreadable path (a NUL in proc/self/cgroup): named.
                Err(SysfsError::Read { path, .. }) => prop_assert!(path.starts_with(dir.path())),
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
            if let Err(e) = memory::check(&sys, &topo, "probe --size", bytes, Some(0)) {
                prop_assert_eq!(numalab::error::exit_code(&e), 2);
                let m = format!("{e:#}");
                prop_assert!(m.contains("probe --size") || m.contains("cgroup"), "{}", m);
            }
            Ok(())
        })
        .unwrap();
}
