//! `numalab plot` (issue 11): the command on run directories written
//! through the library's writers (the RFC's 36 rows, traced and not), on a
//! `numalab jobs -o` record, and on two runs for the compare view. Each SVG
//! must parse as XML, carry its title and axis labels, and hold one label
//! per row; bad input exits 2 with nothing written; run directories are
//! never written.
//!
//! `NUMALAB_PLOT_KEEP=DIR` copies the SVGs the tests draw into DIR, to look
//! at them (render with e.g. `rsvg-convert`).

use numalab::probe::record::ProbeRecord;
use numalab::run::jobs::{Job, JobsRecord};
use numalab::run::record::{self, RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use numalab::run::spec::{Block, ExperimentSpec, PnidRef};
use numalab::topology::presets;
use numalab::trace::record::SampleTrace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A deterministic stream in [0, 1) (SplitMix64), so runs look measured.
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64
    }
}

/// Writes a run on a two-node preset: `samples` per row, row times around
/// a base that depends on where memory and CPU are, and, when `traced`, a
/// kernel trace per sample whose cross-node moves lengthen the time.
fn write_run(dir: &Path, spec: ExperimentSpec, seed: u64, slow: f64, traced: bool) -> usize {
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
        spec: spec.clone(),
        kernel: Some("6.12-test".into()),
        cpu_model: Some("Test CPU".into()),
        num_cpus: 8,
        topology_digest: "d1".into(),
        knobs_at_start: BTreeMap::new(),
        start_unix_s: 1,
        end_unix_s: Some(2),
        sim: None,
        pnid_via: Default::default(),
    };
    record::write_meta(dir, &meta).unwrap();
    let probe: ProbeRecord =
        serde_json::from_str(include_str!("fixtures/probe-record-before-numa.json")).unwrap();
    let mut noise = Noise(seed);
    let mut seq = 0;
    for row in &rows {
        let remote = row.mem_label() != row.cpu_label();
        let base = slow * if remote { 1.35 } else { 1.0 } + row.nb as f64 * 0.05;
        for i in 0..spec.samples {
            let cross = (noise.next() * if row.nb == 1 { 8.0 } else { 3.0 }) as u64;
            let t = base * (1.0 + 0.03 * (noise.next() - 0.5)) + cross as f64 * 0.01;
            let mut p = probe.clone();
            p.timing.total_ns = (t * 1e9).round() as u64;
            let trace = traced.then(|| {
                let mut tr = SampleTrace {
                    task: Default::default(),
                    events: 100,
                    lost_events: 0,
                    missing_events: Vec::new(),
                };
                let m = &mut tr.task.migrations;
                m.same_core = (noise.next() * 4.0) as u64;
                m.same_llc = (noise.next() * 20.0) as u64;
                m.same_node = (noise.next() * 6.0) as u64;
                m.cross_node = cross;
                m.total = m.same_core + m.same_llc + m.same_node + cross;
                tr.task.residency.on_mem_node_pct = Some(100.0 - cross as f64 * 5.0);
                tr
            });
            let rec = SampleRecord {
                schema: SAMPLE_SCHEMA.into(),
                row: row.id,
                sample: i,
                seq,
                numa_balancing: Some(row.nb),
                migration_cost_ns: None,
                knobs: Default::default(),
                knobs_changed: Vec::new(),
                wall_ns: 1,
                probe: p,
                trace,
                stop: None,
                balance: None,
                sched: None,
            };
            record::append_sample(dir, &rec, true).unwrap();
            seq += 1;
        }
    }
    rows.len()
}

fn rfc(samples: u32) -> ExperimentSpec {
    ExperimentSpec {
        samples,
        ..Default::default()
    }
}

/// The jobs test's record for `n` jobs on `nodes` nodes, as `jobs -o`
/// writes it (through serde, like `JobsRecord`'s `Render::json`).
fn write_jobs(path: &Path, n: u32, nodes: u32) {
    let mut noise = Noise(7);
    let jobs = (1..=n)
        .map(|j| {
            let home = j % nodes;
            let stay = 55.0 + noise.next() * 45.0;
            let node_pct: BTreeMap<u32, f64> = (0..nodes)
                .map(|k| {
                    let p = if k == home {
                        stay
                    } else {
                        (100.0 - stay) / (nodes - 1) as f64
                    };
                    (k, p)
                })
                .collect();
            Job {
                job: j,
                pid: 4000 + j,
                max_pct: stay,
                node_pct,
                most_node: Some(home),
                start_node: Some((home + (j % 3 == 0) as u32) % nodes),
                mem_node: Some(home),
                user_s: 3.0 + noise.next(),
                sys_s: 0.1,
                loop_s: 3.0,
                migrations: Default::default(),
                causes: Default::default(),
                residency_source: "kernel trace".into(),
                home_node: None,
                cpu_time: None,
                sched: None,
            }
        })
        .collect();
    let rec = JobsRecord {
        schema: numalab::run::jobs::SCHEMA.into(),
        numalab_version: "test".into(),
        kernel: Some("6.12-test".into()),
        topology_digest: "d1".into(),
        nodes: (0..nodes).collect(),
        num_cpus: 16,
        n,
        probe_args: vec!["--pattern".into(), "gather-add".into()],
        load: 0.0,
        elapsed_s: 5.0,
        average_user_s: 3.5,
        trace_events: 1000,
        lost_events: 0,
        notes: Vec::new(),
        home: None,
        numa_balancing: None,
        load_policy: Default::default(),
        load_period_ms: numalab::load::DEFAULT_PERIOD_MS,
        load_phases: Default::default(),
        sim: None,
        jobs,
    };
    std::fs::write(path, numalab::table::Render::json(&rec).unwrap()).unwrap();
}

fn numalab(args: &[&Path]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .arg("plot")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// Every file under `dir` with its bytes: to see that nothing changed.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The SVG's text elements, trimmed (parsing it as XML on the way).
fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

fn keep(files: &[PathBuf]) {
    if let Some(dir) = std::env::var_os("NUMALAB_PLOT_KEEP") {
        std::fs::create_dir_all(&dir).unwrap();
        for f in files {
            std::fs::copy(f, Path::new(&dir).join(f.file_name().unwrap())).unwrap();
        }
    }
}

/// `[NN] PNID: ...`: a row label.
fn is_row(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 5 && b[0] == b'[' && b[1].is_ascii_digit() && b[2].is_ascii_digit() && b[3] == b']'
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn a_traced_36_row_run_gives_the_table_and_both_traced_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("rfc");
    let n = write_run(&run, rfc(8), 1, 1.0, true);
    assert_eq!(n, 36);
    let before = snapshot(&run);
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = numalab(&[&run, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    let files: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "rfc-times.svg",
            "rfc-migrations.svg",
            "rfc-time-vs-moves.svg"
        ]
    );
    keep(&files);
    assert_eq!(snapshot(&run), before, "plot wrote into the run directory");

    let t = texts(&read(&out.join("rfc-times.svg")));
    assert!(
        t.iter().any(|s| s.starts_with("Probe time per row")),
        "{t:?}"
    );
    assert!(t.contains(&"time of the probe's timed loop (s)".to_string()));
    for label in ["sample", "quartiles and median", "mean"] {
        assert!(t.contains(&label.to_string()), "legend {label}: {t:?}");
    }
    // One label per row, [00]..[35], each once, as the report writes them.
    let rows: Vec<&String> = t.iter().filter(|s| is_row(s)).collect();
    assert_eq!(rows.len(), 36, "{rows:?}");
    assert_eq!(rows[0], "[00] PNID: -1 NB: 0 Mem: 0 CPU: 0");
    assert_eq!(rows[35], "[35] PNID: 1 NB: 1 Mem: F CPU: F");

    let t = texts(&read(&out.join("rfc-migrations.svg")));
    assert!(t
        .iter()
        .any(|s| s.starts_with("Migrations per sample by level")));
    for level in [
        "same core (SMT sibling)",
        "same LLC",
        "same node, other LLC",
        "cross node",
    ] {
        assert!(t.contains(&level.to_string()), "legend {level}: {t:?}");
    }
    assert_eq!(t.iter().filter(|s| is_row(s)).count(), 36);
    assert!(t.iter().any(|s| s.starts_with("migrations per sample")));

    let t = texts(&read(&out.join("rfc-time-vs-moves.svg")));
    let title = t
        .iter()
        .find(|s| s.starts_with("Time vs cross-node moves"))
        .unwrap();
    // The generator makes time grow with cross-node moves: a clear r.
    assert!(
        title.contains("r = +0.") && title.contains("288 traced samples"),
        "{title}"
    );
    assert!(t.contains(&"cross-node moves in the sample (kernel trace, count)".to_string()));
    assert!(t.contains(&"time of the probe's timed loop (s)".to_string()));
    // One legend entry per block: four blocks of nine rows.
    assert_eq!(
        t.iter().filter(|s| s.contains(": n = 72, r = ")).count(),
        4,
        "{t:?}"
    );
}

#[test]
fn an_untraced_run_gives_the_table_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plain");
    write_run(&run, rfc(3), 2, 1.0, false);
    let out = tmp.path().join("p");
    let (code, stdout, stderr) = numalab(&[&run, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(out.join("plain-times.svg").is_file());
    assert!(!out.join("plain-migrations.svg").exists());
}

#[test]
fn jobs_record_gives_a_heatmap_with_a_line_per_job() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("jobs24.json");
    write_jobs(&rec, 24, 4);
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = numalab(&[&rec, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    let f = out.join("jobs24-residency.svg");
    assert_eq!(stdout.trim(), f.display().to_string());
    keep(std::slice::from_ref(&f));
    let t = texts(&read(&f));
    assert!(t.iter().any(|s| s.starts_with("Where each job ran")));
    assert_eq!(t.iter().filter(|s| s.starts_with("job ")).count(), 24);
    for node in 0..4 {
        assert!(t.contains(&format!("node {node}")), "{t:?}");
    }
    assert!(t.contains(&"NUMA node".to_string()));
    // 24 x 4 cells, each with its percentage.
    let cells = t
        .iter()
        .filter(|s| s.parse::<f64>().is_ok_and(|v| (0.0..=100.0).contains(&v)) && s.contains('.'))
        .count();
    assert_eq!(cells, 96, "{t:?}");
}

#[test]
fn two_runs_give_the_compare_view_with_compares_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("before"), tmp.path().join("after"));
    write_run(&a, rfc(6), 3, 1.0, false);
    // Only the NB 1 blocks, 20% slower: compare matches 27 rows.
    let nb1 = ExperimentSpec {
        samples: 6,
        blocks: ExperimentSpec::default()
            .blocks
            .into_iter()
            .filter(|b| b.nb == 1)
            .collect(),
        ..Default::default()
    };
    write_run(&b, nb1, 4, 1.2, false);
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = numalab(&[&a, &b, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let f = out.join("compare.svg");
    keep(std::slice::from_ref(&f));
    let t = texts(&read(&f));
    assert!(t
        .iter()
        .any(|s| s.starts_with("Compare: mean time per row")));
    assert!(t.contains(&"mean time of the probe's timed loop (s), ±95% CI".to_string()));
    let rows: Vec<&String> = t.iter().filter(|s| is_row(s)).collect();
    assert_eq!(rows.len(), 27, "{rows:?}");
    assert_eq!(rows[0], "[09] PNID: -1 NB: 1 Mem: A CPU: A");
    // Every row of the slower run is marked with its change.
    assert_eq!(
        t.iter()
            .filter(|s| s.ends_with('%') || s.ends_with("% *"))
            .count(),
        27
    );
    assert!(
        t.iter().any(|s| s.ends_with("% *")),
        "some row significant: {t:?}"
    );
}

fn block(pnid: i32, nb: u8) -> Block {
    Block {
        pnid: PnidRef::Num(pnid),
        nb,
        knobs: Default::default(),
    }
}

#[test]
fn bad_inputs_exit_2_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    write_run(&good, rfc(2), 5, 1.0, false);
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let no_samples = tmp.path().join("nosamples");
    std::fs::create_dir(&no_samples).unwrap();
    std::fs::copy(good.join("run.json"), no_samples.join("run.json")).unwrap();
    // A line that is not a sample record before the last one.
    let bad_line = tmp.path().join("badline");
    write_run(&bad_line, rfc(2), 5, 1.0, false);
    let text = std::fs::read_to_string(bad_line.join("samples.jsonl")).unwrap();
    std::fs::write(bad_line.join("samples.jsonl"), format!("garbage\n{text}")).unwrap();
    let a_file = tmp.path().join("a-file");
    std::fs::write(&a_file, "x").unwrap();
    let not_jobs = tmp.path().join("notes.txt");
    std::fs::write(&not_jobs, "hello").unwrap();
    // Shares no row with `good`: its rows run at another migration cost.
    let other = tmp.path().join("other");
    let spec = ExperimentSpec {
        samples: 2,
        blocks: vec![block(-1, 1)],
        migration_cost_ns: vec![500_000],
        ..Default::default()
    };
    write_run(&other, spec, 6, 1.0, false);
    let before = snapshot(tmp.path());
    let out = tmp.path().join("out");
    let inside = good.join("plots");
    let cases: Vec<(Vec<&Path>, &str)> = vec![
        (vec![&empty], "run.json"),
        (vec![&good, &no_samples], "no samples"),
        (vec![&good, &not_jobs], "not a numalab jobs record"),
        (vec![&bad_line], "samples.jsonl:1: not a sample record"),
        (
            vec![&good, Path::new("-o"), &a_file],
            "exists and is not a directory",
        ),
        (
            vec![&good, Path::new("/nonexistent/run")],
            "/nonexistent/run",
        ),
        (vec![&good, &other], "no row matches"),
        (
            vec![&good, Path::new("-o"), &inside],
            "inside the run directory",
        ),
    ];
    for (args, want) in cases {
        let mut args = args;
        if !args.contains(&Path::new("-o")) {
            args.extend([Path::new("-o"), &out]);
        }
        let (code, _, stderr) = numalab(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(snapshot(tmp.path()), before, "{args:?} wrote something");
        assert!(!out.exists());
    }
    // No input at all: clap's usage error, also 2.
    let (code, _, _) = numalab(&[]);
    assert_eq!(code, 2);
}

/// Regression: `plot RUN1 -o RUN2` (or `RUN2/figs`) wrote into another
/// run's directory; any run directory is refused, not only the inputs'.
#[test]
fn plot_run1_into_run2_is_refused_as_a_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (run1, run2) = (tmp.path().join("run1"), tmp.path().join("run2"));
    write_run(&run1, rfc(2), 5, 1.0, false);
    write_run(&run2, rfc(2), 6, 1.0, false);
    let before = snapshot(tmp.path());
    for out in [run2.clone(), run2.join("figs"), run2.join("a/b")] {
        let (code, _, stderr) = numalab(&[&run1, Path::new("-o"), &out]);
        assert_eq!(code, 2, "{out:?}: {stderr}");
        assert!(stderr.contains("inside the run directory"), "{stderr}");
        assert!(stderr.contains("run2"), "{stderr}");
        assert_eq!(snapshot(tmp.path()), before, "-o {out:?} wrote something");
    }
    // Beside the runs is fine.
    let (code, _, stderr) = numalab(&[&run1, Path::new("-o"), &tmp.path().join("figs")]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn same_named_runs_get_distinct_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("x/run"), tmp.path().join("y/run"));
    write_run(&a, rfc(2), 8, 1.0, false);
    write_run(&b, rfc(2), 9, 1.0, false);
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = numalab(&[&a, &b, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| Path::new(l).file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(names, ["run-times.svg", "run-2-times.svg", "compare.svg"]);
}

/// 200 jobs: lanes shrink, every k-th job is labelled and the cells carry
/// no numbers (they would not fit), which the footnote says.
#[test]
fn many_jobs_thin_the_labels_and_drop_the_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("jobs200.json");
    write_jobs(&rec, 200, 2);
    let out = tmp.path().join("out");
    let (code, _, stderr) = numalab(&[&rec, Path::new("-o"), &out]);
    assert_eq!(code, 0, "{stderr}");
    let f = out.join("jobs200-residency.svg");
    keep(std::slice::from_ref(&f));
    let t = texts(&read(&f));
    let labels = t.iter().filter(|s| s.starts_with("job ")).count();
    // Lanes of 640/200 = 6 px; 12/1.24 px labels: every 2nd job.
    assert_eq!(labels, 100, "{t:?}");
    assert!(t
        .iter()
        .any(|s| s.contains("numbers left out: too many jobs")));
}
