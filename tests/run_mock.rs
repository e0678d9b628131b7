//! The experiment runner on a mock backend: interrupted runs resume to
//! exactly the planned samples with no duplicates, knobs changed through the
//! journal are restored after every stop, a torn record line is dropped, and
//! reports rebuild from records alone.

mod common;

use common::mock::{self, Mock};
use numalab::experiment::runner;
use numalab::report;
use numalab::report::observer::ExportObserver;
use numalab::run::plan;
use numalab::run::record::{self};
use numalab::run::spec::ExperimentSpec;
use numalab::sys::signals::Stop;
use numalab::sys::state::{self, Journal};
use numalab::table::Format;
use numalab::topology::presets;
use std::collections::BTreeSet;

#[test]
fn interrupted_run_resumes_to_exactly_the_plan_and_restores_knobs() {
    let topo = presets::find("xeon-8167m-2n").unwrap().topology();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (root, knob) = mock::scratch_root(tmp.path());
    let state_dir = tmp.path().join("state");
    let journal = state::journal_path(&state_dir);
    let guard = |dir: &std::path::Path| mock::guard(&state_dir, dir, &root);
    let spec = ExperimentSpec {
        samples: 3,
        ..Default::default()
    };
    let mut mock = Mock::new(20);
    // One sample sees a knob change under it (as if an admin wrote
    // numa_balancing mid-sample): the report must flag its row.
    mock.knob_change_at = Some(5);
    let meta = runner::create(&mock, &topo, spec.clone(), &dir).unwrap();
    // PNID rows are skipped (no interface): 2 blocks x 9 rows x 3 samples.
    assert_eq!(meta.planned_samples, 54);
    assert_eq!(meta.rows.iter().filter(|r| r.skip.is_some()).count(), 18);

    let stop = Stop::new();
    let mut g = guard(&dir);
    let mut obs = ExportObserver::new(&dir, false);
    let out = runner::execute(&mut mock, &topo, &dir, &mut g, &stop, &mut obs).unwrap();
    drop(g);
    assert_eq!(out.done, 20);
    assert_eq!(out.interrupted.map(|i| i.exit_code()), Some(130));
    assert_eq!(
        std::fs::read_to_string(&knob).unwrap().trim(),
        "0",
        "knob restored"
    );
    assert!(
        Journal::read(&journal).unwrap().is_none(),
        "journal removed after restore"
    );
    let meta = record::read_meta(&dir).unwrap();
    let partial = report::render(
        &meta,
        &record::read_samples(&dir, &meta).unwrap().records,
        Format::Text,
    );
    assert!(partial.contains("(incomplete)"), "{partial}");

    // A crash mid-write leaves half a line: it is dropped on resume.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(record::samples_path(&dir))
        .unwrap();
    f.write_all(b"{\"schema\":\"numalab.sample/1\",\"row\":")
        .unwrap();
    drop(f);

    let stop = Stop::new();
    mock.stop_after = usize::MAX;
    let mut g = guard(&dir);
    let out = runner::execute(&mut mock, &topo, &dir, &mut g, &stop, &mut obs).unwrap();
    drop(g);
    assert_eq!(out.done, 54);
    let found = record::read_samples(&dir, &meta).unwrap();
    assert!(found.torn.is_none() && found.bad.is_empty() && found.uncounted.is_empty());
    let samples = found.records;
    let pairs: BTreeSet<(usize, u32)> = samples.iter().map(|s| (s.row, s.sample)).collect();
    // Each sample's numa_balancing is what the backend had in force.
    let meta = record::read_meta(&dir).unwrap();
    for smp in &samples {
        assert_eq!(
            smp.numa_balancing,
            Some(meta.rows[smp.row].nb),
            "row {}",
            smp.row
        );
    }
    assert_eq!(pairs.len(), 54, "no duplicates");
    let meta = record::read_meta(&dir).unwrap();
    let planned: BTreeSet<(usize, u32)> = plan::order(&meta.rows, 3, meta.spec.seed)
        .into_iter()
        .collect();
    assert_eq!(pairs, planned);
    assert!(meta.end_unix_s.is_some());
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");

    // Reports rebuild from the records; the table keeps the RFC's row format.
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert_eq!(text, report::render(&meta, &samples, Format::Text));
    assert!(text.contains("NumSamples: 3\n"), "{text}");
    assert!(text.contains("Row       Avg   max   min  stdv | Test Parameters\n"));
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("knobs-changed x1"))
        .collect();
    assert_eq!(flagged.len(), 1, "one row flagged: {text}");
    let changed = samples
        .iter()
        .filter(|s| !s.knobs_changed.is_empty())
        .count();
    assert_eq!(changed, 1, "the record keeps which knob changed");
    let row9 = text.lines().find(|l| l.starts_with("[09] ")).unwrap();
    assert!(row9.ends_with("| PNID: -1 NB: 1 Mem: 0 CPU: 0"), "{row9}");
    let row18 = text.lines().find(|l| l.starts_with("[18] ")).unwrap();
    assert!(
        row18.contains(" skipped ")
            && row18.contains("| PNID: 0 NB: 1 Mem: 0 CPU: 0 (no PNID interface"),
        "{text}"
    );
    let csv = report::render(&meta, &samples, Format::Csv);
    assert_eq!(csv.lines().count(), 37);
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&meta, &samples, Format::Json)).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 36);

    // A second run into the same directory is refused.
    let e = runner::create(&mock, &topo, spec, &dir).err().unwrap();
    assert_eq!(numalab::error::exit_code(&e), 2);
}
