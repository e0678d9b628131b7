//! The threaded probe's workers as processes (`probe --threads N
//! --processes`) leave nothing behind: not when a worker fails (the others
//! are called off and reaped, the error named, exit 1), not when the probe
//! itself is killed with SIGKILL mid-run (its workers and its timeline
//! process die with it). The record's shape is tests/probe_threads.rs's;
//! what NUMA balancing does with shared memory needs several nodes:
//! tests/lab_groups.rs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A mark only this test's processes carry in their environment (forked
/// and spawned children inherit it).
fn mark(test: &str) -> String {
    format!(
        "{test}-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    )
}

/// Live processes whose environment carries `NUMALAB_TEST_MARK=mark`.
fn marked(mark: &str) -> Vec<u32> {
    let want = format!("NUMALAB_TEST_MARK={mark}");
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // A zombie's environ reads empty: a reaped or dying process is gone.
        let Ok(env) = std::fs::read(Path::new("/proc").join(pid.to_string()).join("environ"))
        else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_failing_worker_process_calls_off_the_others_and_none_is_left() {
    // Every worker sets a preferred node through a prctl option no kernel
    // has: each fails before it is ready.
    let m = mark("failing");
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args([
            "probe",
            "--threads",
            "4",
            "--processes",
            "--size",
            "8M",
            "--pnid",
            "0",
            "--pnid-prctl",
            "1000",
            "--json",
        ])
        .env("NUMALAB_TEST_MARK", &m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("setting the preferred node"), "{err}");
    assert!(
        o.stdout.is_empty(),
        "no record: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    wait_until("worker processes gone", Duration::from_secs(5), || {
        marked(&m).is_empty()
    });
}

#[test]
fn killing_the_probe_kills_its_worker_processes_and_timeline() {
    let m = mark("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args([
            "probe",
            "--threads",
            "3",
            "--processes",
            "--sharing",
            "mix:50",
            "--size",
            "12M",
            "--counts",
            "1",
            "--min-time",
            "60",
            "--json",
        ])
        .env("NUMALAB_TEST_MARK", &m)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The probe, three workers and the timeline process.
    wait_until(
        "the probe's five processes",
        Duration::from_secs(20),
        || marked(&m).len() >= 5,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("worker processes gone", Duration::from_secs(5), || {
        marked(&m).is_empty()
    });
}
