//! The run's observer ([`RunObserver`]) for the command line: it writes the
//! exports (report.txt, .md, .csv, .json) when the run starts, after every
//! sample and at the end, so an interrupted run still leaves valid reports;
//! it says on stderr what reading the records found (a torn final line cut
//! off, a final record's missing newline added, records not counted); and on a terminal it draws a progress bar
//! (`indicatif`): the row running, samples done of planned, elapsed, ETA.

use crate::run::observer::RunObserver;
use crate::run::record::{RunMeta, SampleRecord, SamplesFile};
use crate::run::spec::Row;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// `[07] PNID: -1 NB: 1 Mem: 0 CPU: F | sample 12/36 | 41s | ETA 1m`
fn style() -> ProgressStyle {
    ProgressStyle::with_template("[{prefix}] {msg} | sample {pos}/{len} | {elapsed} | ETA {eta}")
        .expect("a valid template")
}

pub struct ExportObserver {
    dir: PathBuf,
    /// Lasting warnings about the records, carried by every export.
    notes: Vec<String>,
    progress: bool,
    bar: Option<ProgressBar>,
    /// When the exports were last rewritten.
    exported: Option<std::time::Instant>,
}

/// Exports are rewritten after a sample at most this often (and always at
/// the end): a host sample takes seconds, so each one still shows at once,
/// while a simulated run of thousands of samples does not spend its time
/// rewriting reports.
const EXPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(1000);

impl ExportObserver {
    /// Exports into `dir`; a progress bar only when `progress`.
    pub fn new(dir: &Path, progress: bool) -> Self {
        ExportObserver {
            dir: dir.to_path_buf(),
            notes: Vec::new(),
            progress,
            bar: None,
            exported: None,
        }
    }

    /// Exports into `dir`; a progress bar when stderr is a terminal.
    pub fn for_terminal(dir: &Path) -> Self {
        Self::new(dir, std::io::stderr().is_terminal())
    }

    fn say(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }
}

impl RunObserver for ExportObserver {
    fn on_plan(&mut self, meta: &RunMeta, found: &SamplesFile, todo: u64) -> anyhow::Result<()> {
        if let Some(t) = &found.torn {
            self.say(&format!(
                "run: cut the torn final line {} ({} bytes, no trailing newline: a write cut \
                 short by a crash) off {}; its sample runs again",
                t.line,
                t.bytes,
                found.path.display()
            ));
        }
        if let Some(line) = found.unterminated {
            self.say(&format!(
                "run: added the missing newline after the complete final record {line} of {}; \
                 it is kept and counted",
                found.path.display()
            ));
        }
        self.notes = found.notes();
        for n in &self.notes {
            self.say(&format!("warning: {n}"));
        }
        super::write_exports(&self.dir, meta, &found.records, &self.notes)?;
        if self.progress && todo > 0 {
            let bar = ProgressBar::with_draw_target(
                Some(meta.planned_samples),
                ProgressDrawTarget::stderr(),
            )
            .with_style(style());
            bar.set_position(found.records.len() as u64);
            bar.reset_eta();
            self.bar = Some(bar);
        }
        Ok(())
    }

    fn on_sample_start(&mut self, row: &Row, done: u64, planned: u64) {
        if let Some(b) = &self.bar {
            // An adaptive run's plan shrinks as rows stop.
            b.set_length(planned);
            b.set_prefix(format!("{:02}", row.id));
            b.set_message(row.params());
            b.set_position(done);
        }
    }

    fn on_sample(&mut self, meta: &RunMeta, samples: &[SampleRecord]) -> anyhow::Result<()> {
        if let Some(b) = &self.bar {
            b.set_position(samples.len() as u64);
        }
        if self.exported.is_some_and(|t| t.elapsed() < EXPORT_EVERY) {
            return Ok(());
        }
        self.exported = Some(std::time::Instant::now());
        super::write_exports(&self.dir, meta, samples, &self.notes)
    }

    fn on_finish(&mut self, meta: &RunMeta, samples: &[SampleRecord]) -> anyhow::Result<()> {
        self.end_bar();
        super::write_exports(&self.dir, meta, samples, &self.notes)
    }
}

impl ExportObserver {
    /// Leaves the bar's last state on screen and ends its line, so what
    /// follows (the table, or an error) starts on a line of its own.
    fn end_bar(&mut self) {
        if let Some(b) = self.bar.take() {
            b.abandon();
            eprintln!();
        }
    }
}

impl Drop for ExportObserver {
    fn drop(&mut self) {
        self.end_bar();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_progress_template_is_valid() {
        let bar = indicatif::ProgressBar::hidden().with_style(super::style());
        bar.set_prefix("07");
        bar.set_message("PNID: -1 NB: 1 Mem: 0 CPU: F");
        bar.set_length(36);
        bar.set_position(12);
    }
}
