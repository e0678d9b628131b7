//! Knobs per block: a spec names them per block, rows carry them, the host
//! backend sets them through the journal for each row and puts them back
//! for rows of blocks that do not name them; bad names and values exit 2
//! before anything changes.

use numalab::experiment::backend::Backend;
use numalab::experiment::host::Host;
use numalab::run::spec::ExperimentSpec;
use numalab::sys::state::{self, Guard, Journal, StateLock};
use numalab::topology::presets;
use std::path::Path;

const SPEC: &str = r#"
samples = 1
mem = ["A"]
cpu = ["A"]

[[blocks]]
pnid = -1
nb = 1
knobs = { "sched/numa_balancing/scan_delay_ms" = "4294967295", "sched/numa_balancing/scan_period_min_ms" = "4294967295" }

[[blocks]]
pnid = -1
nb = 1
"#;

#[test]
fn rows_carry_their_blocks_knobs_and_label_them() {
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    let spec = ExperimentSpec::from_toml(SPEC, "test.toml").unwrap();
    let rows = spec.rows(&topo).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].knobs.len(), 2);
    assert!(rows[1].knobs.is_empty());
    assert_eq!(
        rows[0].params(),
        "PNID: -1 NB: 1 Mem: 0 CPU: 0 sched/numa_balancing/scan_delay_ms=4294967295 \
         sched/numa_balancing/scan_period_min_ms=4294967295"
    );
    assert_eq!(rows[1].params(), "PNID: -1 NB: 1 Mem: 0 CPU: 0");
    // The spec round-trips through run.json with its knobs.
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<ExperimentSpec>(&json).unwrap(), spec);
}

#[test]
fn unknown_knobs_and_bad_values_are_spec_errors_naming_them() {
    for (knob, needle) in [
        (r#""kernel.core_pattern" = "x""#, "kernel.core_pattern"),
        (
            r#""kernel.numa_balancing" = "1""#,
            "set NB with the block's `nb`",
        ),
        (r#""sched/migration_cost_ns" = "1""#, "migration_cost_ns"),
        (
            r#""kernel.sched_schedstats" = "0""#,
            "`run --trace` turns it on",
        ),
        (
            r#""sched/../tracing/tracing_on" = "0""#,
            "not a knob numalab changes",
        ),
        (
            r#""sched/numa_balancing/scan_delay_ms" = "1 0""#,
            "one word",
        ),
    ] {
        let text = format!("[[blocks]]\npnid = -1\nnb = 1\nknobs = {{ {knob} }}\n");
        let e = ExperimentSpec::from_toml(&text, "bad.toml")
            .and_then(|s| s.check())
            .unwrap_err();
        assert_eq!(numalab::error::exit_code(&e), 2, "{knob}");
        assert!(e.to_string().contains(needle), "{knob}: {e}");
    }
}

fn write(root: &Path, path: &str, value: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, value).unwrap();
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

const DELAY: &str = "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms";
const PMIN: &str = "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms";

/// SPEC's rows on the Xeon preset, and a guard over a scratch tree whose
/// NB is 0 and scan knobs 1000.
struct Scratch {
    _tmp: tempfile::TempDir,
    topo: numalab::topology::Topology,
    root: std::path::PathBuf,
    rows: Vec<numalab::run::spec::Row>,
    state_dir: std::path::PathBuf,
    guard: Guard,
}

fn scratch() -> Scratch {
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    let rows = ExperimentSpec::from_toml(SPEC, "t.toml")
        .unwrap()
        .rows(&topo)
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write(&root, state::NUMA_BALANCING, "0\n");
    write(&root, DELAY, "1000\n");
    write(&root, PMIN, "1000\n");
    let state_dir = tmp.path().join("state");
    let guard = Guard::with_root(
        StateLock::acquire(&state_dir, "test").unwrap(),
        Path::new("run"),
        &root,
    );
    Scratch {
        _tmp: tmp,
        topo,
        root,
        rows,
        state_dir,
        guard,
    }
}

#[test]
fn host_sets_each_rows_knobs_and_puts_back_what_the_next_row_lacks() {
    let Scratch {
        _tmp,
        topo,
        root,
        rows,
        state_dir,
        mut guard,
    } = scratch();
    let (delay, pmin) = (DELAY, PMIN);
    let load0 = numalab::run::spec::ExperimentSpec {
        load: 0.0,
        ..Default::default()
    }
    .load_spec(&topo, topo.online_cpus());
    let mut host = Host::new(&topo, load0, None).unwrap();

    host.prepare(&rows[0], &mut guard).unwrap();
    assert_eq!(read(&root, delay), "4294967295");
    assert_eq!(read(&root, pmin), "4294967295");
    assert_eq!(read(&root, state::NUMA_BALANCING), "1");
    let j = Journal::read(&state::journal_path(&state_dir))
        .unwrap()
        .unwrap();
    assert_eq!(j.originals[delay], "1000\n", "journaled before the change");

    host.prepare(&rows[1], &mut guard).unwrap();
    assert_eq!(
        read(&root, delay),
        "1000",
        "the next row runs with the original"
    );
    assert_eq!(read(&root, pmin), "1000");
    assert_eq!(read(&root, state::NUMA_BALANCING), "1");

    host.prepare(&rows[0], &mut guard).unwrap();
    drop(guard);
    assert_eq!(read(&root, delay), "1000", "restored at the end");
    assert_eq!(read(&root, state::NUMA_BALANCING), "0");
    assert!(!state::journal_path(&state_dir).exists());
}

#[test]
fn the_no_fault_example_spec_parses_with_its_scan_knobs() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/pnid-nofault.toml"
    ))
    .unwrap();
    let spec = ExperimentSpec::from_toml(&text, "pnid-nofault.toml").unwrap();
    spec.check().unwrap();
    assert_eq!(spec.blocks.len(), 4);
    assert_eq!(spec.blocks[2].knobs.len(), 3);
    assert!(spec.blocks.iter().filter(|b| b.knobs.is_empty()).count() == 3);
}

/// Every knob value is tried (set, then put straight back) before a run
/// starts; afterwards each knob holds what it held and nothing is journaled
/// once the guard ends.
#[test]
fn knob_values_are_tried_and_put_straight_back() {
    let Scratch {
        _tmp,
        root,
        rows,
        state_dir,
        mut guard,
        ..
    } = scratch();
    let (delay, pmin) = (DELAY, PMIN);
    numalab::experiment::backend::try_knob_values(&rows, &mut guard).unwrap();
    assert_eq!(read(&root, delay), "1000", "put back after the try");
    assert_eq!(read(&root, pmin), "1000");
    assert_eq!(read(&root, state::NUMA_BALANCING), "0");
    let j = Journal::read(&state::journal_path(&state_dir))
        .unwrap()
        .unwrap();
    assert_eq!(j.originals[delay], "1000\n", "journaled before the try");
    drop(guard);
    assert!(!state::journal_path(&state_dir).exists());
}

/// Regression: a knob value the kernel refuses
/// (`kernel.numa_balancing_promote_rate_limit_MBps=-5`) failed the run after
/// its directory was made, and neither a retry nor --resume could go on.
/// Now exit 2 before the run directory exists, the knob as it was.
#[test]
fn a_knob_value_the_kernel_refuses_is_exit_2_before_the_run_directory() {
    let knob = "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps";
    let Ok(before) = std::fs::read_to_string(knob) else {
        println!("SKIPPED: this kernel has no {knob}");
        return;
    };
    if !numalab::sys::state::writable(knob) {
        println!("SKIPPED: {knob} is not writable here (not root)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(["run", "--quick", "--samples", "1", "--load", "0", "--knob"])
        .arg("kernel.numa_balancing_promote_rate_limit_MBps=-5")
        .arg("--out")
        .arg(&out)
        .env("NUMALAB_STATE_DIR", tmp.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("= -5: the kernel refuses it"), "{err}");
    assert!(!out.exists(), "the run directory was made");
    assert_eq!(std::fs::read_to_string(knob).unwrap(), before);
    assert!(!state::journal_path(&tmp.path().join("state")).exists());
}

/// Regression: `--knob X=1 --knob X=2` took the last value silently.
#[test]
fn a_knob_named_twice_on_the_command_line_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(["run", "--backend", "sim", "--samples", "1"])
        .args(["--knob", "sched/numa_balancing/scan_delay_ms=10"])
        .args(["--knob", "sched/numa_balancing/scan_delay_ms=20"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("named twice"), "{err}");
    assert!(!out.exists());
}
