//! Records are never lost (issue 8): `report` never writes the records,
//! `run --resume` cuts only a torn final line and says so, every other bad
//! line is an error naming file and line with nothing changed, and
//! duplicates or unplanned records are reported, never silently counted.

mod common;

use common::mock::{self, Mock};
use numalab::experiment::runner;
use numalab::report::observer::ExportObserver;
use numalab::run::observer::RunObserver;
use numalab::run::record::{self, RunMeta, SampleRecord, SamplesFile};
use numalab::run::spec::{Block, ExperimentSpec, PnidRef, Row};
use numalab::sys::signals::Stop;
use numalab::topology::{presets, Topology};
use std::path::{Path, PathBuf};
use std::process::Command;

/// 2 rows x 8 samples = 16 planned.
fn spec() -> ExperimentSpec {
    ExperimentSpec {
        samples: 8,
        blocks: vec![Block {
            pnid: PnidRef::Num(-1),
            nb: 0,
            knobs: Default::default(),
        }],
        mem: vec!["A".into(), "B".into()],
        cpu: vec!["A".into()],
        ..Default::default()
    }
}

fn topo() -> Topology {
    presets::find("xeon-8167m-2n").unwrap().topology()
}

struct Run {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    journal: PathBuf,
    mock: Mock,
}

/// A run in a fresh directory, stopped after `n` samples.
fn run_until(n: usize) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let journal = tmp.path().join("restore.json");
    let mut mock = Mock::new(n);
    let meta = runner::create(&mock, &topo(), spec(), &dir).unwrap();
    assert_eq!(meta.planned_samples, 16);
    execute(
        &mut mock,
        &dir,
        &journal,
        &mut ExportObserver::new(&dir, false),
    )
    .unwrap();
    Run {
        _tmp: tmp,
        dir,
        journal,
        mock,
    }
}

fn execute(
    mock: &mut Mock,
    dir: &Path,
    journal: &Path,
    obs: &mut dyn RunObserver,
) -> anyhow::Result<runner::Outcome> {
    let stop = Stop::new();
    let tmp = journal.parent().unwrap();
    let (root, _) = mock::scratch_root(tmp);
    let mut guard = mock::guard(&tmp.join("state"), dir, &root);
    runner::execute(mock, &topo(), dir, &mut guard, &stop, obs)
}

fn numalab(args: &[&str]) -> (i32, String, String) {
    // A private state directory: these runs never meet another test's lock.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .env("NUMALAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn samples_file(r: &Run) -> PathBuf {
    record::samples_path(&r.dir)
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Replaces line `n` (1-based) of the file with `text`.
fn replace_line(p: &Path, n: usize, text: &str) {
    let mut l = lines(p);
    l[n - 1] = text.to_string();
    std::fs::write(p, l.join("\n") + "\n").unwrap();
}

/// What the observer was told.
#[derive(Default)]
struct Seen {
    found: Option<SamplesFile>,
    finished: usize,
}

impl RunObserver for Seen {
    fn on_plan(&mut self, _: &RunMeta, found: &SamplesFile, _: u64) -> anyhow::Result<()> {
        self.found = Some(found.clone());
        Ok(())
    }
    fn on_sample_start(&mut self, _: &Row, _: u64, _: u64) {}
    fn on_sample(&mut self, _: &RunMeta, _: &[SampleRecord]) -> anyhow::Result<()> {
        Ok(())
    }
    fn on_finish(&mut self, _: &RunMeta, s: &[SampleRecord]) -> anyhow::Result<()> {
        self.finished = s.len();
        Ok(())
    }
}

/// The bug: a garbage line 5 of 16 left 4 lines (11 records deleted), exit 0.
#[test]
fn report_never_truncates_records_on_a_bad_line() {
    let r = run_until(usize::MAX);
    let p = samples_file(&r);
    assert_eq!(lines(&p).len(), 16);
    replace_line(&p, 5, "garbage");
    let before = std::fs::read(&p).unwrap();
    let (code, _, err) = numalab(&["report", r.dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{}:5:", p.display())), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(
        std::fs::read(&p).unwrap(),
        before,
        "the records are untouched"
    );
}

#[test]
fn report_ignores_a_torn_final_line_with_a_warning_and_keeps_it() {
    let r = run_until(usize::MAX);
    let p = samples_file(&r);
    let mut data = std::fs::read(&p).unwrap();
    data.extend_from_slice(b"{\"schema\":\"numalab.sample/1\",\"row\":");
    std::fs::write(&p, &data).unwrap();
    let (code, out, err) = numalab(&["report", r.dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(":17: torn final line"), "{err}");
    assert!(out.contains("Samples recorded: 16/16"), "{out}");
    assert_eq!(std::fs::read(&p).unwrap(), data, "report never writes");
}

#[test]
fn report_warns_about_duplicates_and_unplanned_rows_and_does_not_count_them() {
    let r = run_until(usize::MAX);
    let p = samples_file(&r);
    let mut l = lines(&p);
    let first: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    let mut foreign = first.clone();
    foreign["row"] = 99.into();
    l.push(l[0].clone());
    l.push(foreign.to_string());
    std::fs::write(&p, l.join("\n") + "\n").unwrap();
    let before = std::fs::read(&p).unwrap();
    let (code, out, err) = numalab(&["report", r.dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Samples recorded: 16/16"), "{out}");
    let dup = format!(
        ":17: row {} sample {} not counted: duplicate of line 1",
        first["row"], first["sample"]
    );
    assert!(out.contains(&dup) && err.contains(&dup), "{out}\n{err}");
    assert!(
        out.contains(":18: row 99 sample") && out.contains("the run has no row 99"),
        "{out}"
    );
    let (_, json, _) = numalab(&["report", r.dir.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["samples_recorded"], 16);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 2);
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn resume_refuses_a_bad_line_before_the_last_and_changes_nothing() {
    let mut r = run_until(6);
    let p = samples_file(&r);
    replace_line(&p, 3, "{\"schema\":\"numalab.sample/1\"}");
    let before = std::fs::read(&p).unwrap();
    // The command: refused before anything (knobs, tracing, journal) changes.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(["run", "--resume", r.dir.to_str().unwrap()])
        .env("NUMALAB_STATE_DIR", state.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:3:", p.display())), "{err}");
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    // The library: no sample runs, nothing is written.
    let calls = r.mock.calls;
    r.mock.stop_after = usize::MAX;
    let e = execute(&mut r.mock, &r.dir, &r.journal, &mut Seen::default()).unwrap_err();
    assert_eq!(numalab::error::exit_code(&e), 2, "{e}");
    assert_eq!(r.mock.calls, calls);
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn resume_cuts_only_a_torn_final_line_and_says_so() {
    let mut r = run_until(6);
    let p = samples_file(&r);
    let good = std::fs::read(&p).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(&good[..40]); // half a record, no newline
    std::fs::write(&p, &torn).unwrap();
    r.mock.stop_after = usize::MAX;
    let mut seen = Seen::default();
    let out = execute(&mut r.mock, &r.dir, &r.journal, &mut seen).unwrap();
    let t = seen.found.unwrap().torn.expect("the observer is told");
    assert_eq!((t.line, t.offset, t.bytes), (7, good.len() as u64, 40));
    assert_eq!(out.done, 16);
    let now = std::fs::read(&p).unwrap();
    assert_eq!(
        &now[..good.len()],
        &good[..],
        "complete lines kept as they were"
    );
    assert_eq!(lines(&p).len(), 16);
}

#[test]
fn resume_counts_a_duplicate_once_and_keeps_it_in_the_file() {
    let mut r = run_until(6);
    let p = samples_file(&r);
    let mut l = lines(&p);
    l.push(l[0].clone());
    std::fs::write(&p, l.join("\n") + "\n").unwrap();
    r.mock.stop_after = usize::MAX;
    let calls = r.mock.calls;
    let mut obs = ExportObserver::new(&r.dir, false);
    let out = execute(&mut r.mock, &r.dir, &r.journal, &mut obs).unwrap();
    assert_eq!(out.done, 16, "the duplicate is not a 17th sample");
    assert_eq!(r.mock.calls - calls, 10, "its pair is not run again either");
    let all = lines(&p);
    assert_eq!(all.len(), 17, "nothing dropped");
    assert_eq!(all[6], all[0]);
    let text = std::fs::read_to_string(r.dir.join("report.txt")).unwrap();
    assert!(text.contains("Samples recorded: 16/16"), "{text}");
    assert!(
        text.contains(":7: row") && text.contains("duplicate of line 1"),
        "{text}"
    );
}
