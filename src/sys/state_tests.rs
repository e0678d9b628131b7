//! The state journal, the lock, the allowlist and the atomic writer, on
//! scratch trees.

use super::*;

#[test]
fn the_allowlist_takes_scheduler_knobs_only() {
    for ok in [
        NUMA_BALANCING,
        "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps",
        "/proc/sys/kernel/sched_autogroup_enabled",
        MIGRATION_COST,
        "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms",
    ] {
        assert!(allowed_knob(ok), "{ok}");
    }
    for bad in [
        "/etc/passwd",
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/kernel/sched_x/../../core_pattern",
        "/sys/kernel/debug/sched/../tracing/trace",
        "/sys/kernel/debug/sched",
        "/sys/kernel/debug/sched/",
        "proc/sys/kernel/numa_balancing",
        "/proc/sys/vm/drop_caches",
    ] {
        assert!(!allowed_knob(bad), "{bad}");
    }
    assert!(allowed_instance("/sys/kernel/tracing/instances/numalab-42"));
    assert!(allowed_instance(
        "/sys/kernel/debug/tracing/instances/numalab-7"
    ));
    for bad in [
        "/sys/kernel/tracing/instances/other",
        "/sys/kernel/tracing/instances/numalab-",
        "/sys/kernel/tracing/instances/numalab-1/../../events",
        "/tmp/instances/numalab-1",
    ] {
        assert!(!allowed_instance(bad), "{bad}");
    }
}

#[test]
fn restore_refuses_a_journal_naming_a_path_off_the_allowlist() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let j = Journal {
        originals: BTreeMap::from([(victim.display().to_string(), "x".into())]),
        ..Journal::empty(Path::new("/"), Path::new(""))
    };
    let p = tmp.path().join("restore.json");
    std::fs::write(&p, serde_json::to_string(&j).unwrap()).unwrap();
    let err = Journal::read(&p).unwrap_err();
    assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
    assert!(err.to_string().contains("not a knob"), "{err}");
    assert!(j.restore().is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

#[test]
fn a_second_lock_holder_is_refused_with_the_first_ones_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let a = StateLock::acquire(tmp.path(), "numalab run").unwrap();
    let err = StateLock::acquire(tmp.path(), "numalab trace").unwrap_err();
    assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("pid {}: numalab run", std::process::id())),
        "{msg}"
    );
    drop(a);
    StateLock::acquire(tmp.path(), "numalab trace").unwrap();
}

#[test]
fn guard_journals_before_the_change_and_restores_on_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let knob = root.join("proc/sys/kernel/numa_balancing");
    std::fs::create_dir_all(knob.parent().unwrap()).unwrap();
    std::fs::write(&knob, "0\n").unwrap();
    let state = tmp.path().join("state");
    let lock = StateLock::acquire(&state, "test").unwrap();
    let mut g = Guard::with_root(lock, Path::new("runs/x"), &root);
    g.set(NUMA_BALANCING, "1").unwrap();
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1");
    let j = Journal::read(&journal_path(&state)).unwrap().unwrap();
    assert_eq!(j.originals[NUMA_BALANCING], "0\n");
    assert!(g.set("/etc/hostname", "x").is_err());
    drop(g);
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), "0");
    assert!(!journal_path(&state).exists());
}

#[test]
fn write_atomic_names_the_path_and_leaves_no_temp_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a.json");
    write_atomic(&p, b"one").unwrap();
    write_atomic(&p, b"two").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
    let bad = tmp.path().join("a.json/inside");
    let err = write_atomic(&bad, b"x").unwrap_err();
    assert!(format!("{err:#}").contains("a.json"), "{err:#}");
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
}
