//! `numalab compare` (issue 11): rows matched by parameters with nodes named
//! A/B per run (not by row number), the numbers against values worked out
//! here by hand, Holm marks, warnings, exit 2 on unusable input, every
//! format on one fixed input (insta snapshots), and that compare writes
//! nothing.

use numalab::compare;
use numalab::probe::record::ProbeRecord;
use numalab::run::record::{self, RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use numalab::run::spec::{Block, ExperimentSpec, PnidRef};
use numalab::table::Format;
use numalab::topology::presets;
use numalab::trace::record::SampleTrace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn block(pnid: i32, nb: u8) -> Block {
    Block {
        pnid: PnidRef::Num(pnid),
        nb,
        knobs: Default::default(),
    }
}

/// Writes a run (through the library's writers) whose rows come from
/// `spec` on a two-node preset; `times(params)` gives each row's sample
/// times in seconds, with params as the run's own `Row::params()`.
fn write_run(
    dir: &Path,
    spec: ExperimentSpec,
    kernel: &str,
    cross_node: u64,
    times: impl Fn(&str) -> Vec<f64>,
) {
    write_traced_run(dir, spec, kernel, cross_node, None, times)
}

/// [`write_run`] with `trace` in every record (as `run --trace` writes).
fn write_traced_run(
    dir: &Path,
    spec: ExperimentSpec,
    kernel: &str,
    cross_node: u64,
    trace: Option<SampleTrace>,
    times: impl Fn(&str) -> Vec<f64>,
) {
    let probe = include_str!("fixtures/probe-record-before-numa.json");
    write_run_of(dir, spec, kernel, cross_node, trace, probe, times)
}

/// [`write_traced_run`] with every sample's probe record `probe` (JSON).
fn write_run_of(
    dir: &Path,
    spec: ExperimentSpec,
    kernel: &str,
    cross_node: u64,
    trace: Option<SampleTrace>,
    probe: &str,
    times: impl Fn(&str) -> Vec<f64>,
) {
    std::fs::create_dir_all(dir).unwrap();
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    let rows = spec.rows(&topo).unwrap();
    let (a, b) = spec.resolve_nodes(&topo).unwrap();
    let meta = RunMeta {
        schema: RUN_SCHEMA.into(),
        numalab_version: "test".into(),
        backend: numalab::run::record::BackendKind::Sim,
        node_a: a,
        node_b: b,
        planned_samples: rows.len() as u64 * spec.samples as u64,
        rows: rows.clone(),
        spec,
        kernel: Some(kernel.into()),
        cpu_model: Some("Test CPU".into()),
        num_cpus: 4,
        topology_digest: "d1".into(),
        knobs_at_start: BTreeMap::new(),
        start_unix_s: 1,
        end_unix_s: Some(2),
        sim: None,
        pnid_via: Default::default(),
    };
    record::write_meta(dir, &meta).unwrap();
    let mut probe: ProbeRecord = serde_json::from_str(probe).unwrap();
    probe.migrations.cross_node = cross_node;
    let mut seq = 0;
    for row in &rows {
        for (i, t) in times(&row.params()).into_iter().enumerate() {
            let mut p = probe.clone();
            p.timing.total_ns = (t * 1e9).round() as u64;
            // Waiting a quarter of the loop, a fifth with a cross-node move.
            let wait = p.timing.total_ns / (4 + cross_node);
            p.cpu_time = Some(numalab::probe::record::CpuTime {
                source: "schedstat".into(),
                run_ns: p.timing.total_ns - wait,
                wait_ns: wait,
                timeslices: Some(7),
            });
            let rec = SampleRecord {
                schema: SAMPLE_SCHEMA.into(),
                row: row.id,
                sample: i as u32,
                seq,
                numa_balancing: Some(row.nb),
                migration_cost_ns: None,
                knobs: Default::default(),
                knobs_changed: Vec::new(),
                wall_ns: 1,
                probe: p,
                trace: trace.clone(),
                stop: None,
                balance: None,
                sched: None,
            };
            record::append_sample(dir, &rec, true).unwrap();
            seq += 1;
        }
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

fn numalab(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// BASE: the default 36 rows on nodes A=0 B=1, 3 samples each. OTHER:
/// only the (PNID -1, NB 1) block, on nodes A=1 B=0, so its "Mem: 1 CPU: 1"
/// row (its row 0) is BASE's "Mem: 0 CPU: 0" of NB 1 (BASE row 9).
fn two_runs(tmp: &Path) -> (PathBuf, PathBuf) {
    let (base, other) = (tmp.join("base"), tmp.join("other"));
    let spec = |blocks, nodes| ExperimentSpec {
        samples: 3,
        blocks,
        nodes,
        ..Default::default()
    };
    write_run(
        &base,
        spec(ExperimentSpec::default().blocks, vec![]),
        "6.8",
        2,
        |p| match p {
            "PNID: -1 NB: 1 Mem: 0 CPU: 0" => vec![1.0, 1.1, 1.2],
            "PNID: -1 NB: 1 Mem: 1 CPU: F" => vec![1.0, 2.0, 3.0],
            _ => vec![1.0, 2.0, 3.0],
        },
    );
    write_run(
        &other,
        spec(vec![block(-1, 1)], vec![1, 0]),
        "6.9-patched",
        5,
        |p| {
            match p {
                // A and B swapped: this is BASE's "Mem: 0 CPU: 0".
                "PNID: -1 NB: 1 Mem: 1 CPU: 1" => vec![2.0, 2.1, 2.2],
                // BASE's "Mem: 1 CPU: F".
                "PNID: -1 NB: 1 Mem: 0 CPU: F" => vec![4.0, 5.0, 6.0],
                _ => vec![1.0, 2.0, 3.0],
            }
        },
    );
    (base, other)
}

#[test]
fn rows_match_by_parameters_and_the_numbers_are_right() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, other) = two_runs(tmp.path());
    let runs = vec![
        compare::load(&base).unwrap(),
        compare::load(&other).unwrap(),
    ];
    let c = compare::compare(&runs).unwrap();
    assert_eq!(c.rows.len(), 9, "only the NB 1 block is in both");
    assert_eq!(c.not_compared.len(), 27);
    assert!(c.not_compared[0].why.contains("not in all runs"));
    let row = |params: &str| c.rows.iter().find(|r| r.params == params).unwrap();

    // A/A of NB 1: BASE row 9 [1.0,1.1,1.2] vs OTHER row 0 [2.0,2.1,2.2].
    // Means 1.1 and 2.1: change (2.1-1.1)/1.1*100 = 90.909%. s² = 0.01
    // each: t = 1/√(0.01/3·2) = 12.247449 (OTHER-BASE), df = 4, and with
    // the closed-form 4-df CDF, p = 1 - 1.5w + 0.5w³, w = √(150/154) =
    // 0.9869275: p = 0.00025522. g = 0.8·1/0.1 = 8.
    let aa = row("PNID: -1 NB: 1 Mem: A CPU: A");
    assert_eq!((aa.base.row, aa.versus[0].other.row), (9, 0));
    let v = &aa.versus[0];
    assert!(close(aa.base.mean_s, 1.1, 1e-12) && close(v.other.mean_s, 2.1, 1e-12));
    assert!(close(v.change_pct.unwrap(), 90.909091, 1e-5), "{v:?}");
    assert!(close(v.t.unwrap(), 12.247449, 1e-5), "{v:?}");
    assert!(close(v.p.unwrap(), 0.00025522, 1e-7), "{v:?}");
    assert!(close(v.hedges_g.unwrap(), 8.0, 1e-9), "{v:?}");
    // Holm over the 9 rows: the smallest p must be <= 0.05/9 = 0.005556.
    assert!(v.significant);
    assert!(close(v.holm_threshold.unwrap(), 0.05 / 9.0, 1e-15));
    assert_eq!(
        (aa.base.cross_node, v.other.cross_node),
        (Some(2.0), Some(5.0))
    );

    // B/F: [1,2,3] vs [4,5,6]: change +150%, p = 0.0213116 (see the stats
    // unit test), g = 2.4; second smallest p, threshold 0.05/8 = 0.00625:
    // not significant, and Holm stops there.
    let bf = row("PNID: -1 NB: 1 Mem: B CPU: F");
    let v = &bf.versus[0];
    assert!(close(v.change_pct.unwrap(), 150.0, 1e-9));
    assert!(close(v.p.unwrap(), 0.0213116, 1e-6), "{v:?}");
    assert!(close(v.hedges_g.unwrap(), 2.4, 1e-9));
    assert!(close(v.holm_threshold.unwrap(), 0.05 / 8.0, 1e-15));
    assert!(!v.significant);
    // Identical rows: t = 0, p = 1, change 0.
    let ff = row("PNID: -1 NB: 1 Mem: F CPU: F");
    assert!(close(ff.versus[0].p.unwrap(), 1.0, 1e-12));
    assert!(!ff.versus[0].significant);

    // Summary: ratios 2.1/1.1 and 2.5, seven of 1: (2.1/1.1·2.5)^(1/9).
    let s = &c.summaries[0];
    assert_eq!((s.rows, s.faster, s.slower), (9, 0, 1));
    let want = (2.1f64 / 1.1 * 2.5).powf(1.0 / 9.0);
    assert!(close(s.geomean_ratio.unwrap(), want, 1e-12));
    assert_eq!(c.moves_source, "probe");

    assert!(
        c.warnings.iter().any(|w| w.contains("kernel differs")
            && w.contains("6.8")
            && w.contains("6.9-patched")),
        "{:?}",
        c.warnings
    );
    assert!(!c.warnings.iter().any(|w| w.contains("cpu_model")));
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn compare_writes_nothing_and_warns_of_differences() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, other) = two_runs(tmp.path());
    let before = snapshot(tmp.path());
    let (b, o) = (base.to_str().unwrap(), other.to_str().unwrap());
    for f in ["text", "markdown", "csv", "json"] {
        let (code, out, err) = numalab(&["compare", b, o, "--format", f]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(
            out.contains("Mem: A CPU: A") || f == "csv" && out.contains(",A,A,"),
            "{out}"
        );
        assert!(err.contains("kernel differs"), "{err}");
    }
    assert_eq!(
        before,
        snapshot(tmp.path()),
        "compare changed the directory"
    );
}

#[test]
fn unusable_input_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, _) = two_runs(tmp.path());
    let b = base.to_str().unwrap();
    let (code, _, err) = numalab(&["compare", b]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("at least one OTHER") && err.contains(b),
        "{err}"
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, _, err) = numalab(&["compare", b, empty.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("empty/run.json"), "{err}");

    // NB 0 only against NB 1 only: no common row.
    let nb0 = tmp.path().join("nb0");
    let spec = ExperimentSpec {
        samples: 3,
        blocks: vec![block(-1, 0)],
        ..Default::default()
    };
    write_run(&nb0, spec, "6.8", 0, |_| vec![1.0, 2.0, 3.0]);
    let other = tmp.path().join("other");
    let (code, _, err) = numalab(&["compare", nb0.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no row matches") && err.contains("nb0"),
        "{err}"
    );

    // Matching rows with one sample each: nothing to compare, exit 2.
    let one = tmp.path().join("one");
    let spec = ExperimentSpec {
        samples: 3,
        blocks: vec![block(-1, 0)],
        ..Default::default()
    };
    write_run(&one, spec, "6.8", 0, |_| vec![1.0]);
    let (code, _, err) = numalab(&["compare", nb0.to_str().unwrap(), one.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 2 samples"), "{err}");
}

/// One block (PNID -1, NB 1), Mem A x CPU {A, F}, three samples a row:
/// A/A [1,2,3] s vs [4,5,6] s (p 0.0213 < 0.05/2 = 0.025: marked), A/F the
/// same in both (p = 1).
/// Two runs of one block (PNID -1, NB 1), memory on A, CPU on A and
/// floating: `base` and `other` give each row's sample times by its
/// parameters; compared.
fn two_rows(
    tmp: &Path,
    base_times: impl Fn(&str) -> Vec<f64>,
    other_times: impl Fn(&str) -> Vec<f64>,
) -> compare::Comparison {
    let spec = || ExperimentSpec {
        samples: 3,
        blocks: vec![block(-1, 1)],
        mem: vec!["A".into()],
        cpu: vec!["A".into(), "F".into()],
        ..Default::default()
    };
    let (base, other) = (tmp.join("base"), tmp.join("other"));
    write_run(&base, spec(), "6.8", 0, base_times);
    write_run(&other, spec(), "6.9", 1, other_times);
    let runs = vec![
        compare::load(&base).unwrap(),
        compare::load(&other).unwrap(),
    ];
    compare::compare(&runs).unwrap()
}

fn small(tmp: &Path) -> compare::Comparison {
    two_rows(
        tmp,
        |_| vec![1.0, 2.0, 3.0],
        |p| match p {
            "PNID: -1 NB: 1 Mem: 0 CPU: 0" => vec![4.0, 5.0, 6.0],
            _ => vec![1.0, 2.0, 3.0],
        },
    )
}

fn rendered(f: Format) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let c = small(tmp.path());
    numalab::table::Render::render(&c, f)
        .unwrap()
        .replace(tmp.path().to_str().unwrap(), "TMP")
}

// Every format of one fixed comparison, as insta snapshots
// (tests/snapshots/compare__*.snap).
#[test]
fn text_snapshot() {
    insta::assert_snapshot!(rendered(Format::Text));
}

#[test]
fn markdown_snapshot() {
    insta::assert_snapshot!(rendered(Format::Markdown));
}

#[test]
fn csv_snapshot() {
    insta::assert_snapshot!(rendered(Format::Csv));
}

#[test]
fn json_snapshot() {
    insta::assert_snapshot!(rendered(Format::Json));
}

#[test]
fn json_holds_every_number() {
    let v: serde_json::Value = serde_json::from_str(&rendered(Format::Json)).unwrap();
    assert_eq!(v["schema"], "numalab.compare/1");
    assert_eq!(v["runs"][0]["dir"], "TMP/base");
    assert_eq!(v["runs"][1]["kernel"], "6.9");
    assert_eq!(
        v["warnings"][0],
        "kernel differs: BASE TMP/base has 6.8, TMP/other has 6.9"
    );
    assert_eq!(v["moves_source"], "probe");
    let aa = &v["rows"][0];
    assert_eq!(aa["params"], "PNID: -1 NB: 1 Mem: A CPU: A");
    let vs = &aa["versus"][0];
    assert_eq!(vs["significant"], true);
    assert_eq!(vs["holm_threshold"], 0.025);
    assert_eq!(vs["change_pct"], 150.0);
    assert!(close(vs["p"].as_f64().unwrap(), 0.0213116, 1e-6));
    assert!(close(vs["hedges_g"].as_f64().unwrap(), 2.4, 1e-9));
    assert_eq!(vs["other"]["mean_s"], 5.0);
    assert_eq!(aa["base"]["n"], 3);
    let af = &v["rows"][1]["versus"][0];
    assert_eq!(
        (af["significant"].clone(), af["holm_threshold"].clone()),
        (false.into(), 0.05.into())
    );
    assert_eq!(v["summaries"][0]["slower"], 1);
    assert!(close(
        v["summaries"][0]["geomean_ratio"].as_f64().unwrap(),
        2.5f64.sqrt(),
        1e-12
    ));
}

/// Traced runs: moves and time on the memory's node come from the kernel
/// trace, not the probe's sampling; differing probe parameters warn.
#[test]
fn traced_runs_use_the_trace_and_probe_differences_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = || ExperimentSpec {
        samples: 2,
        blocks: vec![block(-1, 0)],
        mem: vec!["A".into()],
        cpu: vec!["F".into()],
        ..Default::default()
    };
    let trace = |cross, pct| {
        let mut t = SampleTrace {
            task: Default::default(),
            events: 10,
            lost_events: 0,
            missing_events: Vec::new(),
        };
        t.task.migrations.cross_node = cross;
        t.task.residency.on_mem_node_pct = Some(pct);
        Some(t)
    };
    let (base, other) = (tmp.path().join("base"), tmp.path().join("other"));
    write_traced_run(&base, spec(), "6.8", 9, trace(3, 80.0), |_| vec![1.0, 2.0]);
    let mut big = spec();
    big.probe.size = numalab::units::Size(512 << 20);
    write_traced_run(&other, big, "6.8", 9, trace(1, 95.0), |_| vec![1.0, 3.0]);
    let runs = vec![
        compare::load(&base).unwrap(),
        compare::load(&other).unwrap(),
    ];
    let c = compare::compare(&runs).unwrap();
    assert_eq!(c.moves_source, "trace");
    let r = &c.rows[0];
    assert_eq!(
        (r.base.cross_node, r.versus[0].other.cross_node),
        (Some(3.0), Some(1.0))
    );
    assert_eq!(
        (r.base.on_mem_node_pct, r.versus[0].other.on_mem_node_pct),
        (Some(80.0), Some(95.0))
    );
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].starts_with("probe parameters differ: BASE"),
        "{:?}",
        c.warnings
    );
    assert!(numalab::table::Render::render(&c, Format::Text)
        .unwrap()
        .contains("the kernel's trace"));
}

/// Threaded runs: each side's share of samples ending in one numa_group
/// and its shared array's busiest node, in the JSON and, with a legend,
/// as two more columns of the table. BASE: four processes on plain shared
/// memory (6.1: never scanned, no group, all on one node); OTHER: the same
/// under MPOL_F_NUMA_BALANCING (one group, spread). Records from the
/// 4-node lab guest.
#[test]
fn threaded_runs_compare_their_groups_and_spread() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = || ExperimentSpec {
        samples: 2,
        blocks: vec![block(-1, 1)],
        mem: vec!["F".into()],
        cpu: vec!["F".into()],
        ..Default::default()
    };
    let (base, other) = (tmp.path().join("base"), tmp.path().join("other"));
    let plain = include_str!("fixtures/threads/probe-procs-plain-6.1.json");
    let balanced = include_str!("fixtures/threads/probe-procs-balanced-6.1.json");
    write_run_of(&base, spec(), "6.1", 0, None, plain, |_| vec![1.0, 1.1]);
    write_run_of(&other, spec(), "6.1", 0, None, balanced, |_| vec![2.0, 2.2]);
    let runs = vec![
        compare::load(&base).unwrap(),
        compare::load(&other).unwrap(),
    ];
    let c = compare::compare(&runs).unwrap();
    let r = &c.rows[0];
    let o = &r.versus[0].other;
    assert_eq!(
        (r.base.one_group_pct, o.one_group_pct),
        (Some(0.0), Some(100.0))
    );
    assert_eq!(r.base.shared_busiest_pct, Some(100.0));
    let spread = o.shared_busiest_pct.unwrap();
    assert!(spread < 100.0, "balanced: {spread}");
    let text = numalab::table::Render::render(&c, Format::Text).unwrap();
    assert!(
        text.contains("one group") && text.contains("0>100"),
        "{text}"
    );
    let json = numalab::table::Render::render(&c, Format::Json).unwrap();
    assert!(json.contains("\"one_group_pct\""), "{json}");
    // A classic run's comparison has neither column nor legend line.
    let classic = numalab::table::Render::render(&small(&tmp.path().join("c")), Format::Text);
    assert!(!classic.unwrap().contains("one group"));
}

/// Regression: rows whose BASE time is 0 printed `NaN%` (OTHER 0 too) and
/// `+inf%` in the change column. Now `-` in the tables, empty in CSV and
/// `null` in JSON; a row with BASE time > 0 keeps its change.
#[test]
fn zero_times_print_no_nan_or_inf() {
    let tmp = tempfile::tempdir().unwrap();
    let zero_or = |k: f64| {
        move |p: &str| match p {
            "PNID: -1 NB: 1 Mem: 0 CPU: 0" => vec![0.0, 0.0, 0.0],
            _ => vec![k, 2.0 * k, 3.0 * k],
        }
    };
    let c = two_rows(tmp.path(), zero_or(1.0), zero_or(2.0));
    let changes: Vec<Option<f64>> = c.rows.iter().map(|r| r.versus[0].change_pct).collect();
    assert!(changes.contains(&None), "{changes:?}");
    assert!(changes.contains(&Some(100.0)), "{changes:?}");
    for f in [Format::Text, Format::Markdown, Format::Csv, Format::Json] {
        let out = numalab::table::Render::render(&c, f).unwrap();
        for bad in ["NaN", "nan", "inf"] {
            assert!(!out.contains(bad), "{f:?} prints {bad}:\n{out}");
        }
    }
}
