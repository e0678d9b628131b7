//! `numalab report DIR`: every report from the records alone. It never
//! writes: a bad line before the last is an error (exit 2) naming the file
//! and line; a torn final line (a run writing now, or a crash) is ignored
//! with a warning; duplicates and records of unplanned rows are not counted
//! and are warned about on stderr and in the report itself (so the numbers
//! shown are never silently inflated, and the valid data stays reportable).

use crate::cli::ReportArgs;
use crate::report;
use crate::run::record;

pub fn run(a: &ReportArgs) -> anyhow::Result<()> {
    let meta = record::read_meta(&a.dir)?;
    let found = record::read_samples(&a.dir, &meta)?;
    found.require_clean()?;
    let notes = found.notes();
    for w in found.torn_warning().iter().chain(&notes) {
        eprintln!("warning: {w}");
    }
    print!(
        "{}",
        report::render_noted(&meta, &found.records, &notes, a.format)
    );
    Ok(())
}
