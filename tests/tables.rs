//! Every format of the `report` and `jobs` tables from fixed records, as
//! insta snapshots (tests/snapshots/tables__*.snap; `compare`'s are in
//! tests/compare.rs). The inputs cover each kind of row: plain, noisy with
//! a knob changed under a sample and a placement mismatch, traced, skipped,
//! pending (the run is incomplete), and a block with a knob.
//!
//! Update after an intended change: `INSTA_UPDATE=always cargo test --test
//! tables`, then read the diff of the .snap files before committing.

use numalab::analysis::balance::SampleBalance;
use numalab::probe::record::ProbeRecord;
use numalab::report;
use numalab::run::jobs::{Job, JobsRecord, SCHEMA as JOBS_SCHEMA};
use numalab::run::record::{RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use numalab::run::spec::{Block, ExperimentSpec, PnidRef, Precision};
use numalab::run::stop::{self, StopReason};
use numalab::table::{Format, Render};
use numalab::topology::presets;
use numalab::trace::analyze::BalanceKinds;
use numalab::trace::record::SampleTrace;
use std::collections::BTreeMap;

/// A 2-node machine's counters: the node level (one node a span) pulled
/// 5 tasks, the NUMA level (two) `k` idle pulls (one hot), 2 busy, 1
/// newly idle and one active push.
fn balance(k: u64) -> SampleBalance {
    let level = |level: u64| {
        serde_json::json!({
            "level": level,
            "span_cpus": [2 * (level + 1)],
            "span_nodes": [level + 1],
            "attempts": {"busy": 9, "idle": 9, "newly_idle": 9},
            "failed": {"busy": 1, "idle": 1, "newly_idle": 1},
            "gained": {"busy": 0, "idle": 5, "newly_idle": 0},
            "hot_gained": {"busy": 0, "idle": 0, "newly_idle": 0},
            "active_pushed": 0,
        })
    };
    let mut json = serde_json::json!({"source": "schedstat", "levels": [level(0), level(1)]});
    json["levels"][1]["gained"] = serde_json::json!({"busy": 2, "idle": k, "newly_idle": 1});
    json["levels"][1]["hot_gained"]["idle"] = 1.into();
    json["levels"][1]["active_pushed"] = 1.into();
    serde_json::from_value(json).unwrap()
}

/// Rows: [00] NB 0 Mem A (plain), [01] NB 0 Mem F (noisy, a knob changed
/// under one sample, one placement mismatch); PNID A NB 1 with a knob:
/// [02] Mem A (skipped), [03] Mem F (pending: no samples yet); NB 1:
/// [04] and [05], traced (the kernel dropped events under [05]; only
/// [04] has the load balancer's counters).
fn run() -> (RunMeta, Vec<SampleRecord>) {
    let spec = ExperimentSpec {
        samples: 3,
        blocks: vec![
            Block {
                pnid: PnidRef::Num(-1),
                nb: 0,
                knobs: Default::default(),
            },
            Block {
                pnid: PnidRef::Role("A".into()),
                nb: 1,
                knobs: BTreeMap::from([(
                    "sched/numa_balancing/scan_delay_ms".to_string(),
                    "4294967295".to_string(),
                )]),
            },
            Block {
                pnid: PnidRef::Num(-1),
                nb: 1,
                knobs: Default::default(),
            },
        ],
        mem: vec!["A".into(), "F".into()],
        cpu: vec!["A".into()],
        ..Default::default()
    };
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    let mut rows = spec.rows(&topo).unwrap();
    rows[2].skip = Some("no PNID interface on this kernel".into());
    let meta = RunMeta {
        schema: RUN_SCHEMA.into(),
        numalab_version: "test".into(),
        backend: numalab::run::record::BackendKind::Mock,
        node_a: 0,
        node_b: 1,
        planned_samples: 15,
        rows,
        spec,
        kernel: Some("6.8.0-test".into()),
        cpu_model: Some("Test CPU @ 2.00GHz".into()),
        num_cpus: 4,
        topology_digest: "d1".into(),
        knobs_at_start: BTreeMap::from([(
            "/proc/sys/kernel/sched_migration_cost_ns".to_string(),
            "500000".to_string(),
        )]),
        start_unix_s: 1,
        end_unix_s: None,
        sim: None,
        pnid_via: Default::default(),
    };
    let probe: ProbeRecord =
        serde_json::from_str(include_str!("fixtures/probe-record-before-numa.json")).unwrap();
    let mut samples = Vec::new();
    let mut add = |row: usize, i: u32, secs: f64, f: &dyn Fn(&mut SampleRecord)| {
        let mut p = probe.clone();
        p.timing.total_ns = (secs * 1e9).round() as u64;
        p.migrations.cross_node = i as u64;
        p.observation.kernel_migrations = Some(2 * i as u64 + 1);
        p.residency.on_mem_node_pct = Some(100.0 - 10.0 * i as f64);
        // Waiting 4%, 8%, 12% of the loop (sample 0, 1, 2).
        let all = p.timing.total_ns;
        let wait = all / 25 * (i as u64 + 1);
        p.cpu_time = Some(numalab::probe::record::CpuTime {
            source: "schedstat".into(),
            run_ns: all - wait,
            wait_ns: wait,
            timeslices: Some(10 * i as u64 + 3),
        });
        let mut rec = SampleRecord {
            schema: SAMPLE_SCHEMA.into(),
            row,
            sample: i,
            seq: samples.len() as u64,
            numa_balancing: Some(0),
            migration_cost_ns: None,
            knobs: Default::default(),
            knobs_changed: Vec::new(),
            wall_ns: 1,
            probe: p,
            trace: None,
            stop: None,
            balance: None,
            sched: None,
        };
        f(&mut rec);
        samples.push(rec);
    };
    for (i, t) in [1.25, 1.5, 1.75].into_iter().enumerate() {
        add(0, i as u32, t, &|_| {});
    }
    for (i, t) in [2.0, 3.0, 2.5].into_iter().enumerate() {
        add(1, i as u32, t, &|r| {
            if r.sample == 1 {
                r.knobs_changed = vec!["/proc/sys/kernel/numa_balancing".into()];
                r.probe.placement.matches_request = false;
            }
        });
    }
    for row in [4, 5] {
        for (i, t) in [1.0, 1.125, 1.5].into_iter().enumerate() {
            add(row, i as u32, t, &|r| {
                let mut tr = SampleTrace {
                    task: Default::default(),
                    events: 100,
                    lost_events: if row == 5 { 7 } else { 0 },
                    missing_events: Vec::new(),
                };
                let m = &mut tr.task.migrations;
                m.same_core = 1;
                m.same_llc = 2;
                m.same_node = 3;
                m.cross_node = r.sample as u64 * 2;
                m.total = 6 + m.cross_node;
                m.to_mem_node = r.sample as u64;
                m.from_mem_node = r.sample as u64;
                tr.task.cross_node_causes.load_balance = r.sample as u64;
                // The probe's cross-node balancing by kind: the first
                // sample's none, then an idle pull, then a busy one too.
                tr.task.cross_node_balancing = Some(BalanceKinds {
                    idle: (r.sample > 0) as u64,
                    busy: (r.sample > 1) as u64,
                    ..Default::default()
                });
                tr.task.cross_node_causes.wakeup = r.sample as u64;
                tr.task.residency.on_mem_node_pct = Some(90.0 - 5.0 * r.sample as f64);
                r.trace = Some(tr);
                // [04] has the load balancer's counters (as /proc/schedstat
                // gives them), [05] was recorded before they existed.
                if row == 4 {
                    r.balance = Some(balance(r.sample as u64));
                }
                r.numa_balancing = Some(1);
            });
        }
    }
    (meta, samples)
}

fn report(f: Format) -> String {
    let (meta, samples) = run();
    let notes = vec!["samples.jsonl:9: row 2 sample 0 not counted: an example".to_string()];
    report::render_noted(&meta, &samples, &notes, f)
}

/// Without the domains' counters (no schedstats) and with no cross-node
/// balancing of the probe (one node, say), there is no balancing table.
#[test]
fn no_balancing_table_without_counters_or_crossings() {
    let (meta, mut samples) = run();
    for s in &mut samples {
        s.balance = None;
        if let Some(t) = &mut s.trace {
            t.task.cross_node_balancing = Some(BalanceKinds::default());
        }
    }
    for f in [Format::Text, Format::Markdown] {
        let out = report::render_noted(&meta, &samples, &[], f);
        assert!(!out.contains("Load balancer's cross-node moves"), "{out}");
        assert!(out.contains("Traced migrations"), "{out}");
    }
}

#[test]
fn report_text() {
    insta::assert_snapshot!(report(Format::Text));
}

#[test]
fn report_markdown() {
    insta::assert_snapshot!(report(Format::Markdown));
}

#[test]
fn report_csv() {
    insta::assert_snapshot!(report(Format::Csv));
}

#[test]
fn report_json() {
    insta::assert_snapshot!(report(Format::Json));
}

/// The run as an adaptive one (`run --precision 45 --min-samples 2
/// --max-samples 3`): the record of the sample each row stopped at carries
/// why, as the runner writes it.
fn adaptive_report(f: Format) -> String {
    let (mut meta, mut samples) = run();
    meta.spec.precision = Some(Precision {
        pct: 45.0,
        min_samples: 2,
        max_samples: 3,
    });
    let stops = stop::stops(&meta, &samples);
    // [00] 41.4% at n = 3; [01] 49.7% and [04], [05] 53.5%: out of samples.
    let reasons: Vec<(usize, StopReason, u32)> =
        stops.iter().map(|(r, s)| (*r, s.reason, s.n)).collect();
    assert_eq!(
        reasons,
        vec![
            (0, StopReason::Precision, 3),
            (1, StopReason::MaxSamples, 3),
            (4, StopReason::MaxSamples, 3),
            (5, StopReason::MaxSamples, 3)
        ]
    );
    for rec in samples.iter_mut() {
        if let Some(s) = stops.get(&rec.row).filter(|s| s.n == rec.sample + 1) {
            rec.stop = Some(s.clone());
        }
    }
    report::render(&meta, &samples, f)
}

#[test]
fn report_adaptive_text() {
    insta::assert_snapshot!(adaptive_report(Format::Text));
}

#[test]
fn report_adaptive_markdown() {
    insta::assert_snapshot!(adaptive_report(Format::Markdown));
}

#[test]
fn report_adaptive_csv() {
    insta::assert_snapshot!(adaptive_report(Format::Csv));
}

/// The CSV is the serialized row model: one line per row, every line as
/// many fields as the header (a column added in one place cannot shift
/// another), read back by the csv crate.
#[test]
fn report_csv_lines_have_the_headers_width() {
    let text = report(Format::Csv);
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head = r.headers().unwrap().clone();
    let recs: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
    assert_eq!(recs.len(), 6);
    for rec in &recs {
        assert_eq!(rec.len(), head.len());
    }
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    assert_eq!(&recs[1][col("noisy")], "true");
    assert_eq!(&recs[1][col("knobs_changed")], "1");
    assert_eq!(&recs[2][col("skipped")], "no PNID interface on this kernel");
    assert_eq!(&recs[5][col("traced_lost_events")], "21");
    assert_eq!(
        &recs[2][col("knobs")],
        "sched/numa_balancing/scan_delay_ms=4294967295"
    );
}

fn jobs() -> JobsRecord {
    let job = |k: u32, pct: &[(u32, f64)], most, start| Job {
        job: k,
        pid: 100 + k,
        node_pct: pct.iter().copied().collect::<BTreeMap<_, _>>(),
        max_pct: pct.iter().map(|p| p.1).fold(0.0, f64::max),
        most_node: Some(most),
        start_node: Some(start),
        mem_node: Some(start),
        user_s: 26.5 + k as f64,
        sys_s: 0.125,
        loop_s: 26.0,
        migrations: Default::default(),
        causes: Default::default(),
        residency_source: "kernel trace".into(),
        home_node: None,
        // One job from a kernel without schedstat.
        cpu_time: (k != 2).then(|| numalab::probe::record::CpuTime {
            source: "schedstat".into(),
            run_ns: 20_000_000_000,
            wait_ns: 1_000_000_000 * k as u64,
            timeslices: Some(900 + k as u64),
        }),
        sched: None,
    };
    JobsRecord {
        schema: JOBS_SCHEMA.into(),
        numalab_version: "test".into(),
        kernel: Some("6.8.0-test".into()),
        topology_digest: "d".into(),
        nodes: vec![0, 1, 2, 3],
        num_cpus: 16,
        n: 3,
        probe_args: vec!["--size".into(), "32M".into()],
        load: 50.0,
        elapsed_s: 30.0,
        average_user_s: 28.5,
        trace_events: 10,
        lost_events: 0,
        notes: vec!["an example note".into()],
        home: None,
        numa_balancing: None,
        load_policy: Default::default(),
        load_period_ms: numalab::load::DEFAULT_PERIOD_MS,
        load_phases: Default::default(),
        sim: None,
        jobs: vec![
            job(1, &[(0, 100.0)], 0, 0),
            job(2, &[(1, 37.5), (3, 62.5)], 3, 1),
            job(3, &[(0, 12.5), (1, 12.5), (2, 75.0)], 2, 2),
        ],
    }
}

#[test]
fn jobs_text() {
    insta::assert_snapshot!(jobs().text());
}

#[test]
fn jobs_markdown() {
    insta::assert_snapshot!(jobs().markdown());
}

#[test]
fn jobs_csv() {
    insta::assert_snapshot!(jobs().csv().unwrap());
}

#[test]
fn jobs_json() {
    insta::assert_snapshot!(jobs().json().unwrap());
}
