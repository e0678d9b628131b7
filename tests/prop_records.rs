//! Property tests for the documents numalab reads back: TOML experiment
//! specs ([`ExperimentSpec::from_toml`] and the rows they expand to) and
//! the JSON records (`run.json` [`RunMeta`], `samples.jsonl`
//! [`SampleRecord`], the probe record [`ProbeRecord`], the trace record
//! [`TraceRecord`], the jobs record) and the state journal
//! (`restore.json`, [`Journal::read`], which `numalab restore` replays).
//!
//! Properties: no panic on arbitrary or mutated documents; errors name the
//! file (or spec origin); a spec never expands to more rows or samples
//! than a run can hold (no allocation the text does not justify); in a
//! torn `samples.jsonl` exactly the complete lines count; a journal reads
//! only when every path it names is on the restore allowlist, else it is
//! refused (exit 2) naming the file, whatever its bytes.

mod prop_common;

use numalab::probe::record::ProbeRecord;
use numalab::run::record::{self, RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use numalab::run::spec::{ExperimentSpec, MAX_ROWS, MAX_SAMPLES};
use numalab::sys::state::{allowed_instance, allowed_knob, Journal};
use numalab::topology::{presets, Topology};
use numalab::trace::record::TraceRecord;
use prop_common::{apply, apply_bytes, config, config_scaled, edits, noisy_text, within};
use proptest::prelude::*;
use std::time::Duration;

const PROBE: &str = include_str!("fixtures/probe-record-before-numa.json");

const SPECS: &[&str] = &[
    "samples = 3\nmem = [\"A\", \"I\"]\n[probe]\nsize = \"64M\"\n",
    "nodes = [0, 1]\nsamples = 64\nload = 60.0\nseed = 7\nmigration_cost_ns = [500000, 5000000]\n\
     mem = [\"A\", \"B\", \"F\"]\ncpu = [\"A\", \"B\", \"F\"]\ntrace = true\n\n\
     [[blocks]]\npnid = -1\nnb = 0\n\n[[blocks]]\npnid = \"A\"\nnb = 1\n\n\
     [probe]\npattern = \"chase\"\nsize = \"1G\"\ncounts = 4\nthp = \"off\"\nobserve_every = 4096\n",
    "cpu = [\"0\", \"1\"]\nmem = [\"1\"]\n[[blocks]]\npnid = 1\nnb = 1\n",
    "samples = 32\n[precision]\npct = 2.5\nmin_samples = 4\nmax_samples = 32\n",
    "[[blocks]]\npnid = \"A\"\nnb = 1\nknobs = { \"sched/numa_balancing/scan_delay_ms\" = \"4294967295\", \
     \"kernel.numa_balancing_promote_rate_limit_MBps\" = \"65536\" }\n",
];

fn topo() -> Topology {
    presets::find("xeon-8167m-2n").unwrap().topology()
}

fn run_meta() -> RunMeta {
    let spec = ExperimentSpec::default();
    let t = topo();
    RunMeta {
        schema: RUN_SCHEMA.into(),
        numalab_version: "0.1.0".into(),
        backend: numalab::run::record::BackendKind::Sim,
        rows: spec.rows(&t).unwrap(),
        spec,
        node_a: 0,
        node_b: 1,
        kernel: Some("6.18.0".into()),
        cpu_model: None,
        num_cpus: 4,
        topology_digest: t.digest(),
        knobs_at_start: [(
            "/proc/sys/kernel/numa_balancing".to_string(),
            "1".to_string(),
        )]
        .into(),
        planned_samples: 2304,
        start_unix_s: 1_700_000_000,
        end_unix_s: None,
        sim: None,
        pnid_via: Default::default(),
    }
}

fn sample(seq: u64) -> SampleRecord {
    SampleRecord {
        schema: SAMPLE_SCHEMA.into(),
        row: seq as usize % 36,
        sample: seq as u32,
        seq,
        numa_balancing: Some(1),
        migration_cost_ns: None,
        knobs: Default::default(),
        knobs_changed: Vec::new(),
        wall_ns: 1_000_000 + seq,
        probe: serde_json::from_str(PROBE).unwrap(),
        trace: None,
        stop: None,
        balance: None,
        sched: None,
    }
}

fn trace_record() -> String {
    let v = serde_json::json!({
        "schema": "numalab.trace/1", "numalab_version": "0.1.0", "source": "file",
        "what": "t.txt", "kernel": null, "topology_digest": "x",
        "window": serde_json::to_value(numalab::trace::analyze::Window::default()).unwrap(),
        "events": 3, "lost_events": 0, "missing_events": ["sched_stick_numa"], "notes": [],
        "pages": {"7": {"0": 4096}},
        "tasks": [serde_json::to_value(numalab::trace::analyze::TaskTrace::default()).unwrap()],
    });
    let text = v.to_string();
    serde_json::from_str::<TraceRecord>(&text).unwrap();
    text
}

/// Every JSON reader on one text: Ok or Err, never a panic.
fn all_json(text: &str) {
    let _ = serde_json::from_str::<RunMeta>(text);
    let _ = serde_json::from_str::<SampleRecord>(text);
    let _ = serde_json::from_slice::<SampleRecord>(text.as_bytes());
    let _ = serde_json::from_str::<ProbeRecord>(text);
    let _ = serde_json::from_str::<TraceRecord>(text);
    let _ = serde_json::from_str::<numalab::run::jobs::JobsRecord>(text);
    if let Ok(s) = serde_json::from_str::<ExperimentSpec>(text) {
        check_rows(&s);
    }
}

/// Expanding a spec is quick and bounded, or a usage error.
fn check_rows(s: &ExperimentSpec) {
    let t = topo();
    match within(Duration::from_secs(2), "rows", || s.rows(&t)) {
        Ok(rows) => {
            assert!(rows.len() as u64 <= MAX_ROWS);
            assert!(rows.len() as u64 * s.samples as u64 <= MAX_SAMPLES);
            let costs = s.migration_cost_ns.len().max(1);
            assert_eq!(
                rows.len(),
                costs * s.blocks.len() * s.mem.len() * s.cpu.len()
            );
            assert!(rows.iter().enumerate().all(|(i, r)| r.id == i));
        }
        Err(e) => assert_eq!(numalab::error::exit_code(&e), 2, "{e}"),
    }
}

fn check_toml(text: &str) {
    match ExperimentSpec::from_toml(text, "lab/spec.toml") {
        Ok(s) => check_rows(&s),
        Err(e) => {
            assert!(e.to_string().contains("spec lab/spec.toml"), "{e}");
            assert_eq!(numalab::error::exit_code(&e), 2);
        }
    }
}

proptest! {
    #![proptest_config(config("prop_records"))]

    #[test]
    fn toml_specs_never_panic(text in noisy_text()) {
        check_toml(&text);
    }

    #[test]
    fn mutated_toml_specs(seed in prop::sample::select(SPECS), e in edits()) {
        check_toml(&apply(seed, &e));
    }

}

proptest! {
    // Large specs take a while to parse in debug builds: fewer cases.
    #![proptest_config(config_scaled("prop_records", 100))]

    #[test]
    fn specs_with_large_dimensions_are_bounded(
        n_mem in 1usize..3000, n_cpu in 1usize..3000, n_blocks in 1usize..300,
        n_costs in 0usize..300, samples in prop_oneof![1u32..100, any::<u32>()],
    ) {
        let list = |n: usize, v: &str| vec![format!("\"{v}\""); n].join(",");
        let blocks = "[[blocks]]\npnid = -1\nnb = 0\n".repeat(n_blocks);
        let costs = vec!["1000"; n_costs].join(",");
        let text = format!(
            "samples = {samples}\nmem = [{}]\ncpu = [{}]\nmigration_cost_ns = [{costs}]\n{blocks}",
            list(n_mem, "A"), list(n_cpu, "F"),
        );
        check_toml(&text);
    }

}

proptest! {
    #![proptest_config(config("prop_records"))]

    #[test]
    fn json_records_never_panic(text in noisy_text()) {
        all_json(&text);
    }

    #[test]
    fn mutated_json_records(which in 0usize..4, e in edits()) {
        let seed = match which {
            0 => serde_json::to_string_pretty(&run_meta()).unwrap(),
            1 => serde_json::to_string(&sample(3)).unwrap(),
            2 => PROBE.to_string(),
            _ => trace_record(),
        };
        all_json(&apply(&seed, &e));
    }

    #[test]
    fn torn_samples_file_keeps_its_complete_lines(
        n in 0usize..6, tail in prop_oneof![noisy_text(), Just(String::new())],
        cut in any::<prop::sample::Index>(), junk in proptest::option::of(noisy_text()),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let meta = run_meta();
        let mut good = String::new();
        for i in 0..n {
            good.push_str(&serde_json::to_string(&sample(i as u64)).unwrap());
            good.push('\n');
        }
        // A complete line that is not a record, somewhere in the middle.
        let junk = junk
            .map(|j| j.replace('\n', " "))
            .filter(|j| serde_json::from_str::<SampleRecord>(j).is_err());
        if let Some(j) = &junk {
            good.push_str(j);
            good.push('\n');
        }
        // A torn last record: a prefix of a real one, or junk, no newline.
        let full = serde_json::to_string(&sample(99)).unwrap();
        let torn = if tail.is_empty() {
            full[..cut.index(full.len())].to_string()
        } else {
            tail.replace('\n', " ")
        };
        let path = record::samples_path(dir.path());
        std::fs::write(&path, format!("{good}{torn}")).unwrap();
        let found = record::read_samples(dir.path(), &meta).unwrap();
        prop_assert_eq!(found.records.len(), n);
        prop_assert_eq!(found.bad.len(), junk.is_some() as usize);
        if junk.is_some() {
            let e = found.require_clean().unwrap_err();
            prop_assert!(e.to_string().contains("samples.jsonl"), "{}", e);
            prop_assert_eq!(numalab::error::exit_code(&e), 2);
        }
        match &found.torn {
            Some(t) => {
                prop_assert_eq!((t.offset, t.bytes), (good.len() as u64, torn.len() as u64));
            }
            None => prop_assert!(torn.is_empty()),
        }
        // Cutting the torn tail leaves exactly the complete lines.
        record::mend_tail(&found).unwrap();
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), good.len() as u64);
    }

    #[test]
    fn bad_run_json_names_the_file(e in edits()) {
        let dir = tempfile::tempdir().unwrap();
        let text = apply(&serde_json::to_string_pretty(&run_meta()).unwrap(), &e);
        std::fs::write(record::meta_path(dir.path()), &text).unwrap();
        if let Err(err) = record::read_meta(dir.path()) {
            prop_assert!(err.to_string().contains("run.json"), "{}", err);
            prop_assert_eq!(numalab::error::exit_code(&err), 2);
        }
    }
}

/// A journal as a run that traced, mounted debugfs and placed a task
/// leaves it (every field set), the seed of the mutations below.
const JOURNAL: &str = r#"{"pid":4242,"run_dir":"runs/r",
 "originals":{"/proc/sys/kernel/numa_balancing":"1","/sys/kernel/debug/sched/migration_cost_ns":"500000"},
 "mounted_debugfs":true,"tracefs_instances":["/sys/kernel/tracing/instances/numalab-4242"],
 "mounted_tracefs":"/sys/kernel/tracing","root":"/",
 "affinity":{"4243":{"tgid":4242,"start_time":12345,"cpus":"0-3"}}}"#;

/// `Journal::read` on `bytes`: a journal whose every path is allowed, or a
/// usage error (exit 2) naming the file; quick either way.
fn check_journal(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    std::fs::write(&path, bytes).unwrap();
    match within(Duration::from_secs(2), "journal", || Journal::read(&path)) {
        Ok(Some(j)) => {
            prop_assert!(j.originals.keys().all(|k| allowed_knob(k)), "{:?}", j);
            prop_assert!(j.tracefs_instances.iter().all(|i| allowed_instance(i)));
            prop_assert!(j.check().is_ok());
        }
        Ok(None) => prop_assert!(false, "the journal exists"),
        Err(e) => {
            prop_assert_eq!(numalab::error::exit_code(&e), 2, "{}", e);
            prop_assert!(e.to_string().contains(&path.display().to_string()), "{}", e);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config("prop_records"))]

    #[test]
    fn journals_never_panic(text in noisy_text()) {
        check_journal(text.as_bytes())?;
    }

    #[test]
    fn mutated_journals_read_only_allowed_paths(e in edits()) {
        check_journal(&apply_bytes(JOURNAL.as_bytes(), &e))?;
    }
}

/// The seed journal reads back as it was written.
#[test]
fn seed_journal_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    std::fs::write(&path, JOURNAL).unwrap();
    let j = Journal::read(&path).unwrap().unwrap();
    assert_eq!(j.originals.len(), 2);
    assert_eq!(j.affinity.len(), 1);
}

/// Found by the journal properties: a journal that was not UTF-8 (a torn
/// or overwritten file) was an I/O error (exit 1, "stream did not contain
/// valid UTF-8") instead of a corrupt journal (exit 2) like any other.
#[test]
fn journal_that_is_not_utf8_is_corrupt_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    std::fs::write(&path, b"{\"pid\":1,\xff}").unwrap();
    let e = Journal::read(&path).unwrap_err();
    assert_eq!(numalab::error::exit_code(&e), 2, "{e}");
    assert!(e.to_string().contains("is corrupt"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

/// Found by this file's properties: `mem` and `cpu` lists of 3000 entries
/// each (a 30 kB spec) expanded to 9 million rows times every block and
/// cost before anything checked the size; now a usage error up front.
#[test]
fn spec_with_huge_row_product_is_an_error_not_an_allocation() {
    let list = |n: usize, v: &str| vec![format!("\"{v}\""); n].join(",");
    let text = format!("mem = [{}]\ncpu = [{}]\n", list(3000, "A"), list(3000, "F"));
    let s = ExperimentSpec::from_toml(&text, "t").unwrap();
    let e = within(Duration::from_secs(1), "rows", || s.rows(&topo())).unwrap_err();
    assert_eq!(numalab::error::exit_code(&e), 2);
    assert!(e.to_string().contains("rows"), "{e}");
}

/// Found by this file's properties: `samples = 4294967295` planned a run
/// of 36 x 4294967295 samples, and the sample order is one Vec of them;
/// the same from a hand-edited run.json on --resume.
#[test]
fn spec_with_absurd_sample_count_is_an_error_not_an_allocation() {
    let s = ExperimentSpec::from_toml("samples = 4294967295", "t").unwrap();
    let e = s.rows(&topo()).unwrap_err();
    assert_eq!(numalab::error::exit_code(&e), 2);
    assert!(e.to_string().contains("samples"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let mut meta = run_meta();
    meta.spec.samples = u32::MAX;
    record::write_meta(dir.path(), &meta).unwrap();
    let e = record::read_meta(dir.path()).unwrap_err();
    assert!(e.to_string().contains("run.json"), "{e}");
    assert_eq!(numalab::error::exit_code(&e), 2);
}

/// Deeply nested documents: an error, not a stack overflow.
#[test]
fn deeply_nested_toml_and_json_are_errors_not_stack_overflows() {
    for depth in [1_000, 100_000] {
        let toml = format!("samples = {}1{}", "[".repeat(depth), "]".repeat(depth));
        assert!(ExperimentSpec::from_toml(&toml, "deep.toml").is_err());
        let toml = format!("probe = {}", "{ a = ".repeat(depth));
        assert!(ExperimentSpec::from_toml(&toml, "deep.toml").is_err());
        let json = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        all_json(&json);
        assert!(Topology::from_json(&json, "deep.json").is_err());
        let json = format!("{{\"spec\":{}", "{\"a\":".repeat(depth));
        all_json(&json);
    }
}

/// The seeds are real, valid specs (so mutations start from the inside).
#[test]
fn seed_specs_are_valid() {
    for text in SPECS {
        let s = ExperimentSpec::from_toml(text, "seed").unwrap_or_else(|e| panic!("{e}"));
        s.rows(&topo()).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}
