//! `numalab load --percent P` keeps every CPU within 2 points of P, measured
//! from /proc/stat while it runs. This file holds one test so nothing else in
//! its process adds load while it measures.

use numalab::load::procstat;
use std::process::{Command, Stdio};
use std::time::Duration;

fn measure(percent: f64) -> std::collections::BTreeMap<u32, f64> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(["load", "--percent", &percent.to_string(), "--duration", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let a = procstat::read().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let b = procstat::read().unwrap();
    assert!(child.wait().unwrap().success());
    procstat::busy_percent(&a, &b)
}

/// Busy share per CPU over one second with no load of ours running.
fn baseline() -> std::collections::BTreeMap<u32, f64> {
    let a = procstat::read().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let b = procstat::read().unwrap();
    procstat::busy_percent(&a, &b)
}

#[test]
fn every_cpu_carries_the_requested_load_within_two_points() {
    // /proc/stat counts every task: on a machine already busy (another
    // build, a test run beside this one) the measure says nothing about
    // the load, so the check is skipped, visibly, rather than failed.
    let idle = baseline();
    if let Some((cpu, p)) = idle.iter().find(|(_, p)| **p > 10.0) {
        eprintln!(
            "SKIPPED: the machine is busy before the load starts (CPU {cpu} {p:.0}% busy; \
             all: {idle:?}): this check needs a quiet machine"
        );
        return;
    }
    for percent in [30.0, 75.0] {
        let busy = measure(percent);
        eprintln!("load {percent}%: measured busy per CPU {busy:?}");
        assert!(!busy.is_empty());
        for (cpu, p) in &busy {
            assert!(
                (p - percent).abs() <= 2.0,
                "CPU {cpu} carried {p:.1}% for a {percent}% load (all: {busy:?})"
            );
        }
    }
}
