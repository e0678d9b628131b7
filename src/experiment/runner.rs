//! Running (or resuming) an experiment: plan, knobs, samples, records,
//! reports, progress.

use super::backend::{skip_reason, Backend, Sampled};
use super::plan;
use super::record::{self, RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use super::spec::ExperimentSpec;
use crate::error::usage;
use crate::report;
use crate::sys::signals::{Interrupted, Stop};
use crate::sys::state::{self, Guard};
use crate::topology::Topology;
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub struct Outcome {
    pub dir: PathBuf,
    pub planned: u64,
    pub done: u64,
    pub run_wall_ns: u64,
    pub probe_wall_ns: u64,
    pub probe_loop_ns: u64,
    /// Set when a stop signal ended the run early.
    pub interrupted: Option<Interrupted>,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Plans a new run in `dir`: rows, skips, metadata. Nothing on the system
/// changes here.
pub fn create(
    backend: &dyn Backend,
    topo: &Topology,
    spec: ExperimentSpec,
    dir: &Path,
) -> anyhow::Result<RunMeta> {
    let mut rows = spec.rows(topo)?;
    let (a, b) = spec.resolve_nodes(topo)?;
    if record::meta_path(dir).exists() {
        return Err(usage(format!(
            "{} already holds a run: use --resume {} to continue it, or another --out",
            dir.display(),
            dir.display()
        )));
    }
    let caps = backend.capabilities();
    for r in rows.iter_mut() {
        r.skip = skip_reason(r, &caps, a, b, topo);
    }
    let runnable = rows.iter().filter(|r| r.skip.is_none()).count() as u64;
    let mut knobs = std::collections::BTreeMap::new();
    for k in [state::NUMA_BALANCING, state::MIGRATION_COST] {
        if let Ok(v) = std::fs::read_to_string(k) {
            knobs.insert(k.to_string(), v.trim().to_string());
        }
    }
    let meta = RunMeta {
        schema: RUN_SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        backend: backend.name().into(),
        planned_samples: runnable * spec.samples as u64,
        spec,
        node_a: a,
        node_b: b,
        rows,
        kernel: topo.kernel.clone(),
        cpu_model: topo.cpu_model.clone(),
        num_cpus: topo.online_cpus().len(),
        topology_digest: topo.digest(),
        knobs_at_start: knobs,
        start_unix_s: now_s(),
        end_unix_s: None,
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("cannot create {}: {e}", dir.display())))?;
    record::write_meta(dir, &meta)?;
    report::write_exports(dir, &meta, &[])?;
    Ok(meta)
}

/// Runs every planned sample not yet in `dir`'s records.
pub fn execute(
    backend: &mut dyn Backend,
    topo: &Topology,
    dir: &Path,
    guard: &mut Guard,
    stop: &Stop,
) -> anyhow::Result<Outcome> {
    let mut meta = record::read_meta(dir)?;
    if meta.topology_digest != topo.digest() {
        return Err(usage(format!(
            "{} was recorded on another machine (topology {} here {}): resume it there",
            dir.display(),
            meta.topology_digest,
            topo.digest()
        )));
    }
    let mut samples = record::read_samples(dir)?;
    let done: BTreeSet<(usize, u32)> = samples.iter().map(|s| (s.row, s.sample)).collect();
    let order = plan::order(&meta.rows, meta.spec.samples, meta.spec.seed);
    let todo: Vec<(u64, (usize, u32))> = order
        .iter()
        .enumerate()
        .filter(|(_, p)| !done.contains(p))
        .map(|(i, p)| (i as u64, *p))
        .collect();
    let planned = order.len() as u64;
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let (mut probe_wall, mut probe_loop) = (0u64, 0u64);
    let total_todo = todo.len();
    for (k, (seq, (row_id, sample))) in todo.into_iter().enumerate() {
        if stop.is_set() {
            break;
        }
        let row = meta.rows[row_id].clone();
        if tty {
            let elapsed = started.elapsed().as_secs_f64();
            let eta = if k > 0 {
                elapsed / k as f64 * (total_todo - k) as f64
            } else {
                f64::NAN
            };
            eprint!(
                "\r\x1b[K[{:02}] {} | sample {}/{} | {} | ETA {}",
                row.id,
                row.params(),
                samples.len() + 1,
                planned,
                fmt_dur(elapsed),
                if eta.is_nan() {
                    "?".into()
                } else {
                    fmt_dur(eta)
                }
            );
        }
        backend.prepare(&row, guard)?;
        let Sampled {
            probe,
            wall_ns,
            trace,
            numa_balancing,
            knobs,
            knobs_changed,
        } = match backend.sample(&row, &meta.spec, stop, guard) {
            Ok(v) => v,
            Err(e) if e.is::<Interrupted>() => break,
            Err(e) => return Err(e),
        };
        probe_wall += wall_ns;
        probe_loop += probe.timing.total_ns;
        let rec = SampleRecord {
            schema: SAMPLE_SCHEMA.into(),
            row: row_id,
            sample,
            seq,
            numa_balancing,
            migration_cost_ns: row.migration_cost_ns,
            knobs,
            knobs_changed,
            wall_ns,
            probe,
            trace,
        };
        record::append_sample(dir, &rec)?;
        samples.push(rec);
        report::write_exports(dir, &meta, &samples)?;
    }
    if tty {
        eprintln!();
    }
    let run_wall_ns = started.elapsed().as_nanos() as u64;
    guard.restore()?;
    if samples.len() as u64 >= planned && meta.end_unix_s.is_none() {
        meta.end_unix_s = Some(now_s());
        record::write_meta(dir, &meta)?;
        report::write_exports(dir, &meta, &samples)?;
    }
    Ok(Outcome {
        dir: dir.to_path_buf(),
        planned,
        done: samples.len() as u64,
        run_wall_ns,
        probe_wall_ns: probe_wall,
        probe_loop_ns: probe_loop,
        interrupted: stop.is_set().then(|| stop.interrupted()),
    })
}

fn fmt_dur(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
