//! `numalab load --percent P` keeps every CPU within 2 points of P while it
//! runs. This file holds one test so nothing else in its process adds load
//! while it measures.
//!
//! Measured twice over the same window: each CPU's busy time in /proc/stat
//! (every task) and the load's own threads' CPU time by the CPU they run on
//! (/proc/PID/task/*/stat; the workers are pinned). The load's share is what
//! is checked; the difference is what the rest of the machine did. The
//! regression this guards against (`load_accuracy` failed CI with 32.5% on
//! one CPU for a 30% load, /proc/stat alone, on a machine quiet before the
//! window) was the rest of the machine, not the load: a window in which
//! others took more than OTHERS_MAX points of some CPU (they also take time
//! from the load's busy-on-wall-time workers) is measured again, and after
//! three such windows the check is skipped, visibly.

use numalab::load::procstat;
use numalab::sys::affinity::{parse_stat_cpu, parse_stat_cpu_ticks};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Busy points other tasks may take of a CPU in a window that counts.
const OTHERS_MAX: f64 = 2.0;

/// CPU time (user + system, USER_HZ ticks) of each thread of `pid`, with
/// the CPU it last ran on.
fn threads(pid: u32) -> BTreeMap<u32, (u32, u64)> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if let (Some(cpu), Some(ticks)) = (parse_stat_cpu(&text), parse_stat_cpu_ticks(&text)) {
            out.insert(tid, (cpu, ticks));
        }
    }
    out
}

/// The load's threads' busy percent per CPU between two readings, over
/// each CPU's total time in /proc/stat.
fn own_percent(
    t0: &BTreeMap<u32, (u32, u64)>,
    t1: &BTreeMap<u32, (u32, u64)>,
    a: &BTreeMap<u32, procstat::CpuTimes>,
    b: &BTreeMap<u32, procstat::CpuTimes>,
) -> BTreeMap<u32, f64> {
    let mut ticks: BTreeMap<u32, u64> = BTreeMap::new();
    for (tid, &(cpu, t)) in t1 {
        let before = t0.get(tid).map_or(0, |x| x.1);
        *ticks.entry(cpu).or_default() += t.saturating_sub(before);
    }
    b.iter()
        .filter_map(|(cpu, y)| {
            let total = y.total.checked_sub(a.get(cpu)?.total)?;
            let own = ticks.get(cpu).copied().unwrap_or(0);
            (total > 0).then(|| (*cpu, own as f64 * 100.0 / total as f64))
        })
        .collect()
}

/// One window of a load of `percent`: (busy per CPU from /proc/stat, the
/// load's own share of it).
fn window(percent: f64) -> (BTreeMap<u32, f64>, BTreeMap<u32, f64>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(["load", "--percent", &percent.to_string(), "--duration", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let (t0, a) = (threads(child.id()), procstat::read().unwrap());
    std::thread::sleep(Duration::from_secs(3));
    let (t1, b) = (threads(child.id()), procstat::read().unwrap());
    assert!(child.wait().unwrap().success());
    (
        procstat::busy_percent(&a, &b),
        own_percent(&t0, &t1, &a, &b),
    )
}

/// The load's own share per CPU of a window in which the rest of the
/// machine stayed within OTHERS_MAX points of quiet, trying up to three
/// windows.
fn measure(percent: f64) -> Option<BTreeMap<u32, f64>> {
    for attempt in 1..=3 {
        let (busy, own) = window(percent);
        let others: BTreeMap<u32, f64> = busy
            .iter()
            .map(|(c, p)| (*c, p - own.get(c).copied().unwrap_or(0.0)))
            .collect();
        eprintln!("load {percent}%, window {attempt}: busy {busy:?}, of it others {others:?}");
        assert!(
            !own.is_empty() && own.values().any(|p| *p > 0.0),
            "no CPU time of the load's threads seen"
        );
        if others.values().all(|p| *p <= OTHERS_MAX) {
            return Some(own);
        }
    }
    None
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
        let Some(own) = measure(percent) else {
            eprintln!(
                "SKIPPED: other tasks added more than {OTHERS_MAX} points to some CPU in three \
                 windows of a {percent}% load: this check needs a quiet machine"
            );
            return;
        };
        assert!(!own.is_empty());
        for (cpu, p) in &own {
            assert!(
                (p - percent).abs() <= 2.0,
                "CPU {cpu}: the load's threads ran {p:.1}% of the time for a {percent}% load \
                 (all: {own:?})"
            );
        }
    }
}
