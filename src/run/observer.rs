//! What a run tells whoever shows it: the steps of a run as events
//! (planned, a sample starts, a sample recorded, finished). The runner
//! (`crate::experiment::runner`) drives it and the reports implement it
//! (`crate::report::observer`), so neither imports the other, as a
//! scheduler is handed its exporter.

use super::record::{RunMeta, SampleRecord, SamplesFile};
use super::spec::Row;

/// Told every step of a run: writes the exports, shows progress.
pub trait RunObserver {
    /// Before the first new sample: the run, what reading its records found
    /// (`found.records` are counted; a torn tail in `found.torn` has just
    /// been cut off the file, a complete final record in
    /// `found.unterminated` has just had its newline added;
    /// `found.uncounted` stay in it) and how many samples are still to run.
    fn on_plan(&mut self, meta: &RunMeta, found: &SamplesFile, todo: u64) -> anyhow::Result<()>;
    /// A sample of `row` starts; `done` of `planned` are recorded.
    fn on_sample_start(&mut self, row: &Row, done: u64, planned: u64);
    /// A sample was recorded (appended, fsynced); `samples` are all counted.
    fn on_sample(&mut self, meta: &RunMeta, samples: &[SampleRecord]) -> anyhow::Result<()>;
    /// The run stopped (complete or interrupted), knobs restored, run.json
    /// final.
    fn on_finish(&mut self, meta: &RunMeta, samples: &[SampleRecord]) -> anyhow::Result<()>;
}
