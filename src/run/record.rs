//! Run records: `run.json` (metadata, spec, rows) and `samples.jsonl` (one
//! line per sample, flushed and fsynced before the next sample starts).
//!
//! Records are never lost: reading them ([`read_samples`]) is pure, it never
//! writes, and returns the records with everything it found wrong (see
//! [`SamplesFile`]). Only `run --resume` changes the file, and only to mend
//! its end ([`mend_tail`]): cut a torn final line, or add the newline a
//! complete final record lacks, which it says it does. Every I/O error
//! names its file.

use super::spec::{ExperimentSpec, Row};
use crate::probe::record::ProbeRecord;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

pub const RUN_SCHEMA: &str = "numalab.run/1";
pub const SAMPLE_SCHEMA: &str = "numalab.sample/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub schema: String,
    pub numalab_version: String,
    /// Where the results came from.
    pub backend: BackendKind,
    pub spec: ExperimentSpec,
    pub node_a: u32,
    pub node_b: u32,
    pub rows: Vec<Row>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub num_cpus: usize,
    pub topology_digest: String,
    /// Knob values when the run started (path -> value).
    pub knobs_at_start: BTreeMap<String, String>,
    pub planned_samples: u64,
    pub start_unix_s: u64,
    pub end_unix_s: Option<u64>,
    /// The simulated machine of a `sim` run (absent for host runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimMeta>,
    /// How PNID rows set the preferred node. Absent in records before it
    /// existed: those used the prctl.
    #[serde(default)]
    pub pnid_via: PnidVia,
}

/// Where a run's results come from (run.json `backend`; `run --backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// This machine, under real load.
    Host,
    /// The simulator (`crate::sim`), on a modelled machine.
    Sim,
    /// The test suite's scripted backend (tests/common/mock.rs); never a
    /// command-line choice.
    #[value(skip)]
    Mock,
}

/// How PNID rows set the preferred node (run.json `pnid_via`; `run
/// --pnid-via`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PnidVia {
    /// The kernel patch's prctl (PR_PREFERRED_NID).
    #[default]
    Prctl,
    /// The user-space homenode agent (`numalab home`).
    Agent,
    /// numalab's sched_ext scheduler (`numalab sched`).
    Sched,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Host => "host",
            BackendKind::Sim => "sim",
            BackendKind::Mock => "mock",
        })
    }
}

impl std::fmt::Display for PnidVia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PnidVia::Prctl => "prctl",
            PnidVia::Agent => "agent",
            PnidVia::Sched => "sched",
        })
    }
}

/// What a simulated run ran on: enough to resume it and to say what the
/// numbers are a prediction of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimMeta {
    /// [`crate::sim::MODEL_VERSION`] of the simulator that wrote it.
    pub model_version: u32,
    /// "preset NAME", "file PATH" or "this machine".
    pub topology_source: String,
    /// The simulated topology (`numalab topo --json` format).
    pub topology: serde_json::Value,
    /// The hardware profile, in full.
    pub profile: crate::sim::Profile,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub schema: String,
    pub row: usize,
    /// Index of this sample within its row (0..samples).
    pub sample: u32,
    /// Position in the run's order.
    pub seq: u64,
    /// Knob values in force for the sample.
    pub numa_balancing: Option<u8>,
    pub migration_cost_ns: Option<u64>,
    /// Every knob the run sets, as read when the sample started.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
    /// Knobs that changed under the sample (read again at its end): the
    /// report flags such samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs_changed: Vec<String>,
    /// The probe process's wall time, start to exit.
    pub wall_ns: u64,
    pub probe: ProbeRecord,
    /// The kernel's trace of the probe (`run --trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::record::SampleTrace>,
    /// Adaptive runs (`run --precision`): on the sample a row stopped at,
    /// why it stopped ([`crate::run::stop::RowStop`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<crate::run::stop::RowStop>,
    /// Load-balancing counters per domain level over the sample (`run
    /// --trace`): the kernel's /proc/schedstat, or the simulated probe's
    /// moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<crate::analysis::balance::SampleBalance>,
    /// `run --pnid-via sched`: numalab's scheduler's account of the probe
    /// over the sample (time on its homenode, steals and why, returns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<crate::sched::account::ProcessAccount>,
}

pub fn meta_path(dir: &Path) -> PathBuf {
    dir.join("run.json")
}
pub fn samples_path(dir: &Path) -> PathBuf {
    dir.join("samples.jsonl")
}

/// Files a run directory holds besides run.json: a directory with any of
/// them but no run.json holds another run's data (or half of one).
pub const RUN_FILES: [&str; 5] = [
    "samples.jsonl",
    "report.txt",
    "report.md",
    "report.csv",
    "report.json",
];

/// `dir` can take a new run: no run in it, no other run's files (a new run
/// must not adopt a foreign samples.jsonl), and it is or can be made a
/// writable directory. Looks only; nothing is created.
pub fn check_new_run_dir(dir: &Path) -> anyhow::Result<()> {
    if meta_path(dir).exists() {
        return Err(crate::error::usage(format!(
            "{} already holds a run: use --resume {} to continue it, or another --out",
            dir.display(),
            dir.display()
        )));
    }
    if let Some(f) = RUN_FILES.iter().map(|f| dir.join(f)).find(|p| p.exists()) {
        return Err(crate::error::usage(format!(
            "--out {}: {} exists but run.json does not: it is not this run's, and a new \
             run will not adopt it; move it away or choose another --out",
            dir.display(),
            f.display()
        )));
    }
    crate::paths::check_output_dir(dir, "--out", &[])
}

/// The one atomic, durable writer ([`crate::sys::state::write_atomic`]).
pub use crate::sys::state::write_atomic;

pub fn write_meta(dir: &Path, meta: &RunMeta) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(meta)?;
    text.push('\n');
    write_atomic(&meta_path(dir), text.as_bytes())
}

pub fn read_meta(dir: &Path) -> anyhow::Result<RunMeta> {
    let p = meta_path(dir);
    let text = crate::input::read_input_text(&p, "run record", crate::input::RECORD_LIMIT)
        .map_err(|e| {
            crate::error::usage(format!(
                "{e} (is {} a numalab run directory?)",
                dir.display()
            ))
        })?;
    let meta: RunMeta = serde_json::from_str(&text).map_err(|e| {
        crate::error::usage(format!("{}: not a numalab run record: {e}", p.display()))
    })?;
    if meta.schema != RUN_SCHEMA {
        return Err(crate::error::usage(format!(
            "{}: schema {:?}, expected {RUN_SCHEMA:?}",
            p.display(),
            meta.schema
        )));
    }
    // --resume plans rows x samples from this file: bound it as a spec is.
    super::spec::check_size(meta.rows.len() as u64, meta.spec.samples)
        .map_err(|e| crate::error::usage(format!("{}: {e}", p.display())))?;
    Ok(meta)
}

/// A line of samples.jsonl (1-based) that is not a sample record.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub line: usize,
    pub error: String,
}

/// The final line without its newline that is not a sample record: a
/// write cut short by a crash (the writer puts record and newline in one
/// write). Never counted. (A final line that is a complete record without
/// its newline, as an editor may leave it, is counted:
/// [`SamplesFile::unterminated`].)
#[derive(Debug, Clone, PartialEq)]
pub struct TornTail {
    pub line: usize,
    /// Where it starts: the length of the complete lines before it.
    pub offset: u64,
    pub bytes: u64,
}

/// A record that is not counted, with why: a (row, sample) pair an earlier
/// line holds, or a pair the run does not plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Uncounted {
    pub line: usize,
    pub row: usize,
    pub sample: u32,
    pub why: String,
}

/// What reading samples.jsonl found. Nothing in the file is changed.
#[derive(Debug, Clone, Default)]
pub struct SamplesFile {
    pub path: PathBuf,
    /// The file's length when read.
    pub len: u64,
    /// The records counted: valid, planned, first of their (row, sample).
    pub records: Vec<SampleRecord>,
    pub torn: Option<TornTail>,
    /// The final line (1-based) is a complete sample record but lacks its
    /// newline: it is read as any other line, and `run --resume` adds the
    /// newline before appending ([`mend_tail`]).
    pub unterminated: Option<usize>,
    /// Complete lines that are not sample records.
    pub bad: Vec<BadLine>,
    /// Duplicates (the first line of a pair counts, later ones do not) and
    /// records of rows or sample indices the run does not plan.
    pub uncounted: Vec<Uncounted>,
}

impl SamplesFile {
    /// Bad lines are an error (exit 2) that names the file and every line
    /// (the first ten); nothing has been changed.
    pub fn require_clean(&self) -> anyhow::Result<()> {
        if self.bad.is_empty() {
            return Ok(());
        }
        let mut msg = String::new();
        for b in self.bad.iter().take(10) {
            msg.push_str(&format!(
                "\n  {}:{}: not a sample record: {}",
                self.path.display(),
                b.line,
                b.error
            ));
        }
        if self.bad.len() > 10 {
            msg.push_str(&format!("\n  ... and {} more", self.bad.len() - 10));
        }
        Err(crate::error::usage(format!(
            "{}: {} bad line(s) before the last one; nothing was changed. Records are \
             never dropped: fix or remove the line(s), then retry{msg}",
            self.path.display(),
            self.bad.len()
        )))
    }

    /// The torn final line, said as a warning.
    pub fn torn_warning(&self) -> Option<String> {
        self.torn.as_ref().map(|t| {
            format!(
                "{}:{}: torn final line ({} bytes, no trailing newline: a write cut short), \
                 not counted",
                self.path.display(),
                t.line,
                t.bytes
            )
        })
    }

    /// One lasting note per uncounted record, for reports.
    pub fn notes(&self) -> Vec<String> {
        self.uncounted
            .iter()
            .map(|u| {
                format!(
                    "{}:{}: row {} sample {} not counted: {}",
                    self.path.display(),
                    u.line,
                    u.row,
                    u.sample,
                    u.why
                )
            })
            .collect()
    }
}

/// Reads samples.jsonl without changing it: every counted record, plus a
/// torn final line, bad lines, duplicates and unplanned records (see
/// [`SamplesFile`]). A missing file is an empty run.
pub fn read_samples(dir: &Path, meta: &RunMeta) -> anyhow::Result<SamplesFile> {
    let path = samples_path(dir);
    // Bounded, regular files only; unreadable records are bad input
    // (exit 2), not a failed run.
    let data = match crate::input::read_input(&path, "records", crate::input::STREAM_LIMIT) {
        Ok(d) => d,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut out = SamplesFile {
        path,
        len: data.len() as u64,
        ..Default::default()
    };
    let planned: BTreeSet<usize> = meta
        .rows
        .iter()
        .filter(|r| r.skip.is_none())
        .map(|r| r.id)
        .collect();
    let mut first: HashMap<(usize, u32), usize> = HashMap::new();
    let mut offset = 0u64;
    let mut rest = &data[..];
    let mut line = 0;
    while !rest.is_empty() {
        line += 1;
        let text = match rest.iter().position(|&b| b == b'\n') {
            Some(nl) => {
                let text = &rest[..nl];
                offset += nl as u64 + 1;
                rest = &rest[nl + 1..];
                text
            }
            // No newline: a complete record is kept (only its newline is
            // missing); anything else is a torn write.
            None if is_sample_record(rest) => {
                out.unterminated = Some(line);
                std::mem::take(&mut rest)
            }
            None => {
                out.torn = Some(TornTail {
                    line,
                    offset,
                    bytes: rest.len() as u64,
                });
                break;
            }
        };
        let rec = match serde_json::from_slice::<SampleRecord>(text) {
            Ok(r) if r.schema == SAMPLE_SCHEMA => r,
            Ok(r) => {
                let error = format!("schema {:?}, expected {SAMPLE_SCHEMA:?}", r.schema);
                out.bad.push(BadLine { line, error });
                continue;
            }
            Err(e) => {
                out.bad.push(BadLine {
                    line,
                    error: e.to_string(),
                });
                continue;
            }
        };
        let key = (rec.row, rec.sample);
        let why = if let Some(f) = first.get(&key) {
            Some(format!("duplicate of line {f}"))
        } else if !planned.contains(&rec.row) {
            Some(match meta.rows.get(rec.row) {
                Some(r) => format!(
                    "row {} is not planned in this run ({})",
                    r.id,
                    r.skip.as_deref().unwrap_or("skipped")
                ),
                None => format!(
                    "the run has no row {} (rows 0-{})",
                    rec.row,
                    meta.rows.len().saturating_sub(1)
                ),
            })
        } else if rec.sample >= meta.spec.samples {
            Some(format!(
                "sample index beyond the run's {} samples per row",
                meta.spec.samples
            ))
        } else {
            None
        };
        match why {
            Some(why) => out.uncounted.push(Uncounted {
                line,
                row: rec.row,
                sample: rec.sample,
                why,
            }),
            None => {
                first.insert(key, line);
                out.records.push(rec);
            }
        }
    }
    Ok(out)
}

/// Whether `line` is a whole sample record of this schema.
fn is_sample_record(line: &[u8]) -> bool {
    serde_json::from_slice::<SampleRecord>(line).is_ok_and(|r| r.schema == SAMPLE_SCHEMA)
}

/// Mends the end of the file [`read_samples`] read, and changes nothing
/// else: cuts a torn final line off, or adds the newline a complete final
/// record lacks (so the next append starts a line of its own). It refuses
/// when the file changed since it was read.
pub fn mend_tail(found: &SamplesFile) -> anyhow::Result<()> {
    if found.torn.is_none() && found.unterminated.is_none() {
        return Ok(());
    }
    let p = &found.path;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .with_context(|| format!("opening {}", p.display()))?;
    let len = f
        .metadata()
        .with_context(|| format!("reading {}", p.display()))?
        .len();
    if len != found.len {
        anyhow::bail!(
            "{} changed while it was read ({} bytes, now {len}): is another numalab writing it?",
            p.display(),
            found.len
        );
    }
    match &found.torn {
        Some(t) => f
            .set_len(t.offset)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cutting the torn final line off {}", p.display())),
        None => {
            let mut f = f;
            f.seek(std::io::SeekFrom::End(0))
                .and_then(|_| f.write_all(b"\n"))
                .and_then(|_| f.sync_all())
                .with_context(|| format!("ending the complete final record of {}", p.display()))
        }
    }
}

/// Appends one sample as a JSON line and fsyncs it.
pub fn append_sample(dir: &Path, rec: &SampleRecord, sync: bool) -> anyhow::Result<()> {
    let p = samples_path(dir);
    let mut line = serde_json::to_vec(rec)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .and_then(|mut f| {
            f.write_all(&line)?;
            if sync {
                f.sync_data()?;
            }
            Ok(())
        })
        .with_context(|| format!("appending a sample to {}", p.display()))
}

/// Flushes the records to disk (after appends without `sync`).
pub fn sync_samples(dir: &Path) -> anyhow::Result<()> {
    let p = samples_path(dir);
    match std::fs::File::open(&p) {
        Ok(f) => f.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
    .with_context(|| format!("syncing {}", p.display()))
}

/// A sample of row `row` with a real probe record and nothing else: for
/// unit tests of the code that reads records.
#[cfg(test)]
impl SampleRecord {
    pub(crate) fn fixture(row: usize) -> SampleRecord {
        SampleRecord {
            schema: SAMPLE_SCHEMA.into(),
            row,
            sample: 0,
            seq: 0,
            numa_balancing: None,
            migration_cost_ns: None,
            knobs: Default::default(),
            knobs_changed: Vec::new(),
            wall_ns: 1,
            probe: serde_json::from_str(include_str!(
                "../../tests/fixtures/probe-record-before-numa.json"
            ))
            .expect("the fixture is a probe record"),
            trace: None,
            stop: None,
            balance: None,
            sched: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let dir = file.join("run"); // under a file: ENOTDIR on every write
        let e = write_atomic(&dir.join("report.txt"), b"r").unwrap_err();
        assert!(format!("{e:#}").contains("file/run/report.txt"), "{e:#}");
        let rec = SampleRecord::fixture(0);
        let e = append_sample(&dir, &rec, true).unwrap_err();
        assert!(format!("{e:#}").contains("file/run/samples.jsonl"), "{e:#}");
        let found = SamplesFile {
            path: samples_path(&dir),
            torn: Some(TornTail {
                line: 1,
                offset: 0,
                bytes: 3,
            }),
            ..Default::default()
        };
        let e = mend_tail(&found).unwrap_err();
        assert!(format!("{e:#}").contains("file/run/samples.jsonl"), "{e:#}");
    }
}
