//! Issue 8: what a command will write and the memory it will need are
//! checked before the work, not after it. Bad output paths, another run's
//! files in `--out`, a probe size of 0 or beyond what the machine can give:
//! exit 2 naming the path (or the size, what is available and where that
//! number came from), and nothing left behind. Write errors that can only
//! happen during the work (the disk fills up) name the path.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::numalab;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The bug: `run --out X` where X held another run's samples.jsonl but no
/// run.json adopted it and reported "16/16" from the other run's data.
#[test]
fn run_does_not_adopt_a_foreign_samples_file() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("X");
    std::fs::create_dir(&x).unwrap();
    for f in ["samples.jsonl", "report.txt"] {
        std::fs::write(x.join(f), "{}\n").unwrap();
        let (code, err) = numalab(
            &["run", "--samples", "1", "--out", x.to_str().unwrap()],
            tmp.path(),
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&format!("{}", x.join(f).display())), "{err}");
        assert_eq!(names(&x), vec![f.to_string()], "nothing written");
        std::fs::remove_file(x.join(f)).unwrap();
    }
    assert_eq!(names(tmp.path()), vec!["X".to_string()], "no journal");
}

/// The bug: `run --size 0 --out X` created X, then failed in the probe,
/// and every retry was refused because X "already holds a run".
#[test]
fn run_with_a_bad_probe_size_leaves_no_run_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("X");
    let xs = x.to_str().unwrap();
    for (size, needle) in [
        ("0", "at least one page"),
        ("100", "at least one page"),
        ("1000T", "is available"),
    ] {
        let (code, err) = numalab(&["run", "--size", size, "--out", xs], tmp.path());
        assert_eq!(code, 2, "--size {size}: {err}");
        assert!(err.contains(needle), "--size {size}: {err}");
        assert!(!x.exists(), "--size {size} left {xs}");
    }
    assert!(names(tmp.path()).is_empty(), "no journal");
}

/// The bug: `trace -o`, `jobs -o`, `topo --capture` and `run --out` found
/// out that they could not write only after the work.
#[test]
fn output_paths_are_checked_before_the_work() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("out.json");
    let missing = tmp.path().join("no/such/dir/out.json");
    let dir = tmp.path().to_str().unwrap();
    let (u, m, f) = (
        under.to_str().unwrap(),
        missing.to_str().unwrap(),
        file.to_str().unwrap(),
    );
    let trace_fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/trace/trace-cmd-report.txt"
    );
    for (args, path, needle) in [
        (vec!["trace", "-o", u, "--", "true"], u, "not a directory"),
        (vec!["trace", "-o", m, "--", "true"], m, "No such file"),
        (
            vec!["trace", "-o", dir, "--", "true"],
            dir,
            "is a directory",
        ),
        (
            vec!["trace", "--from", trace_fixture, "-o", "/dev/full"],
            "/dev/full",
            "not a regular file",
        ),
        (
            vec!["jobs", "2", "--no-trace", "-o", u],
            u,
            "not a directory",
        ),
        (
            vec!["jobs", "2", "--no-trace", "--out", m],
            m,
            "No such file",
        ),
        (vec!["topo", "--capture", u], u, "cannot be created"),
        (vec!["topo", "--capture", f], f, "not a directory"),
        (
            vec!["run", "--samples", "1", "--out", u],
            u,
            "cannot be created",
        ),
        (
            vec!["run", "--samples", "1", "--out", f],
            f,
            "not a directory",
        ),
    ] {
        let (code, err) = numalab(&args, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(path) && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    assert_eq!(names(tmp.path()), vec!["file".to_string()], "nothing left");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

/// A fixture machine (the 2-node lab guest) with 1 GiB available, a cgroup
/// limit of `cgroup_max` (if any) and node 1 with 256 MiB free.
fn fixture(tmp: &Path, cgroup_max: Option<&str>) -> PathBuf {
    let root = tmp.join("root");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/topo/2node/root"
    );
    let st = Command::new("cp")
        .args(["-r", src])
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    let w = |rel: &str, s: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w(
        "proc/meminfo",
        "MemTotal:        2097152 kB\nMemFree:          1500000 kB\nMemAvailable:    1048576 kB\n",
    );
    w(
        "sys/devices/system/node/node1/meminfo",
        "Node 1 MemTotal:       1048576 kB\nNode 1 MemFree:         262144 kB\nNode 1 MemUsed:         786432 kB\n",
    );
    if let Some(max) = cgroup_max {
        w("proc/self/cgroup", "0::/lab/job\n");
        w("sys/fs/cgroup/lab/job/memory.max", "max\n");
        w("sys/fs/cgroup/lab/memory.max", max);
    }
    root
}

/// The bug: `probe --size 1T` and `jobs 1024` drove the machine into the
/// OOM killer with no message.
#[test]
fn sizes_beyond_available_memory_exit_2_naming_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), None);
    let r = root.to_str().unwrap();
    let meminfo = format!("MemAvailable in {r}/proc/meminfo");
    let node1 = format!("MemFree of node 1 in {r}/sys/devices/system/node/node1/meminfo");
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    for (args, needles) in [
        (
            vec!["probe", "--size", "1T"],
            vec!["1 TiB asked", "1 GiB is available", meminfo.as_str()],
        ),
        (
            vec!["probe", "--size", "1000M"],
            vec!["1000 MiB asked", "64 MiB of that stays free"],
        ),
        // Float (no policy), preferred (falls back to any node) and
        // interleave buffers are held to what the whole machine has.
        (
            vec!["probe", "--preferred", "1", "--size", "1000M"],
            vec!["1000 MiB asked", meminfo.as_str()],
        ),
        (
            vec!["probe", "--interleave", "0,1", "--size", "1000M"],
            vec!["1000 MiB asked", meminfo.as_str()],
        ),
        (
            vec!["run", "--size", "2G", "--mem", "F", "--out", o],
            vec!["probe size 2G", meminfo.as_str()],
        ),
        (
            vec!["run", "--size", "2G", "--mem", "I", "--out", o],
            vec!["probe size 2G", meminfo.as_str()],
        ),
        (
            vec!["probe", "--membind", "1", "--size", "240M"],
            vec!["240 MiB asked", "256 MiB is available", node1.as_str()],
        ),
        (
            vec!["jobs", "1024", "--no-trace"],
            vec![
                "jobs: 1024 x (--size 32M + 8 MiB per process)",
                "40 GiB asked",
                meminfo.as_str(),
            ],
        ),
        (
            vec!["jobs", "8", "--no-trace", "--", "--membind", "1"],
            vec!["256 MiB asked", node1.as_str()],
        ),
        (
            vec!["run", "--size", "2G", "--out", o],
            vec!["probe size 2G", meminfo.as_str()],
        ),
        (
            vec!["run", "--size", "240M", "--mem", "B", "--out", o],
            vec!["240 MiB asked", node1.as_str()],
        ),
    ] {
        let mut full = vec!["--sysfs-root", r];
        full.extend(&args);
        let (code, err) = numalab(&full, tmp.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
        }
        assert!(!out.exists(), "{args:?} created the run directory");
    }
    // The cgroup's limit, when lower, is the one named.
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), Some("536870912\n"));
    let (code, err) = numalab(
        &[
            "--sysfs-root",
            root.to_str().unwrap(),
            "probe",
            "--size",
            "500M",
        ],
        tmp.path(),
    );
    assert_eq!(code, 2, "{err}");
    let cg = format!(
        "512 MiB is available ({}/sys/fs/cgroup/lab/memory.max)",
        root.display()
    );
    assert!(err.contains(&cg), "{err}");
}

/// Every I/O error names its path, ENOSPC included: a 4 KiB tmpfs in a
/// private mount namespace (`unshare -m`; tests run as root) fills up
/// during `topo --capture` and `trace -o`.
#[test]
fn enospc_names_the_path() {
    let probe = Command::new("unshare").args(["-m", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: cannot unshare a mount namespace here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let exe = env!("CARGO_BIN_EXE_numalab");
    let trace_fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/trace/trace-cmd-report.txt"
    );
    let script = format!(
        "mount -t tmpfs -o size=4k tmpfs {m} || exit 99
         {exe} topo --capture {m}/cap; echo \"capture rc=$?\" >&2
         rm -rf {m}/cap; head -c 4096 /dev/zero > {m}/fill 2>/dev/null
         {exe} trace --from {t} -o {m}/t.json >/dev/null; echo \"trace rc=$?\" >&2
         ls -A {m} >&2",
        m = mnt.display(),
        t = trace_fixture,
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("NUMALAB_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(99) {
        eprintln!("SKIPPED: cannot mount a tmpfs here: {err}");
        return;
    }
    eprintln!("{err}");
    let m = mnt.display().to_string();
    assert!(err.contains("capture rc=1"), "{err}");
    assert!(err.contains(&format!("writing {m}/cap/")), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("trace rc=1"), "{err}");
    assert!(err.contains(&format!("writing {m}/t.json")), "{err}");
    assert!(
        // `ls -A` lines: neither the old nor the current temp file name.
        err.lines()
            .all(|l| l != "t.json.tmp" && !l.starts_with(".t.json.tmp")),
        "temp file left: {err}"
    );
}
