//! Run records: `run.json` (metadata, spec, rows) and `samples.jsonl` (one
//! line per sample, flushed and fsynced before the next sample starts).

use super::spec::{ExperimentSpec, Row};
use crate::probe::record::ProbeRecord;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

pub const RUN_SCHEMA: &str = "numalab.run/1";
pub const SAMPLE_SCHEMA: &str = "numalab.sample/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub schema: String,
    pub numalab_version: String,
    /// "host" or "sim".
    pub backend: String,
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
    /// The probe process's wall time, start to exit.
    pub wall_ns: u64,
    pub probe: ProbeRecord,
    /// The kernel's trace of the probe (`run --trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::record::SampleTrace>,
}

pub fn meta_path(dir: &Path) -> PathBuf {
    dir.join("run.json")
}
pub fn samples_path(dir: &Path) -> PathBuf {
    dir.join("samples.jsonl")
}

/// Writes a file atomically (temp file, fsync, rename), so readers and
/// crashes never see half of it.
pub fn write_atomic(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

pub fn write_meta(dir: &Path, meta: &RunMeta) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(meta)?;
    text.push('\n');
    write_atomic(&meta_path(dir), text.as_bytes())
}

pub fn read_meta(dir: &Path) -> anyhow::Result<RunMeta> {
    let p = meta_path(dir);
    let text = std::fs::read_to_string(&p).map_err(|e| {
        crate::error::usage(format!(
            "{}: {e} (is {} a numalab run directory?)",
            p.display(),
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

/// Reads every complete sample line. A torn last line (a crash mid-write)
/// is dropped and the file truncated to the last complete line.
pub fn read_samples(dir: &Path) -> anyhow::Result<Vec<SampleRecord>> {
    let p = samples_path(dir);
    let f = match std::fs::File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    let mut out = Vec::new();
    let mut good_bytes = 0u64;
    let mut torn = false;
    for (i, line) in std::io::BufReader::new(f).split(b'\n').enumerate() {
        let line = line?;
        match serde_json::from_slice::<SampleRecord>(&line) {
            Ok(r) => {
                out.push(r);
                good_bytes += line.len() as u64 + 1;
            }
            Err(e) => {
                torn = true;
                eprintln!(
                    "numalab: {} line {}: dropped an incomplete record ({e})",
                    p.display(),
                    i + 1
                );
                break;
            }
        }
    }
    if torn {
        let f = std::fs::OpenOptions::new().write(true).open(&p)?;
        f.set_len(good_bytes)?;
    }
    Ok(out)
}

/// Appends one sample as a JSON line and fsyncs it.
pub fn append_sample(dir: &Path, rec: &SampleRecord) -> anyhow::Result<()> {
    let p = samples_path(dir);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .with_context(|| format!("opening {}", p.display()))?;
    let mut line = serde_json::to_vec(rec)?;
    line.push(b'\n');
    f.write_all(&line)?;
    f.sync_data()?;
    Ok(())
}
