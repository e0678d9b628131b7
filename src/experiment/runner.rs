//! Running (or resuming) an experiment: plan, knobs, samples, records.
//!
//! What is shown and exported is the caller's: the runner hands every step
//! to a [`RunObserver`] (reports, progress), as a scheduler is handed its
//! exporter, so this layer never imports `crate::report`.
//!
//! Resuming reads the records first ([`record::read_samples`]): a bad line
//! before the last is an error and nothing changes; a torn final line is
//! cut off, and a complete final record without its newline gets one (the
//! observer is told either way), before anything is appended;
//! duplicates of a (row, sample) pair and records of unplanned rows stay in
//! the file but are not counted, so a pair never counts twice, and the
//! observer gets them as lasting notes for every report.

use super::adaptive::Schedule;
use super::backend::{skip_reason, Backend, Sampled};
use crate::error::usage;
use crate::run::observer::RunObserver;
use crate::run::record::{self, RunMeta, SampleRecord, RUN_SCHEMA, SAMPLE_SCHEMA};
use crate::run::spec::ExperimentSpec;
use crate::sys::signals::{Interrupted, Stop};
use crate::sys::state::{self, Guard};
use crate::topology::Topology;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Records are fsynced per sample unless samples come faster than this.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

#[derive(Debug)]
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
    record::check_new_run_dir(dir)?;
    let caps = backend.capabilities();
    // Knob values are checked against what the knobs hold now, before the
    // first change.
    for blk in &spec.blocks {
        crate::run::knobs::check_values(&blk.knobs, |p| backend.read_knob(p))?;
    }
    for r in rows.iter_mut() {
        r.skip = skip_reason(r, &caps, a, b, topo, &|p| backend.knob_writable(p));
    }
    let runnable = rows.iter().filter(|r| r.skip.is_none()).count() as u64;
    let mut knob_paths = vec![
        state::NUMA_BALANCING.to_string(),
        state::MIGRATION_COST.into(),
    ];
    for r in &rows {
        knob_paths.extend(super::backend::row_knobs(r)?.into_keys());
    }
    let mut knobs = std::collections::BTreeMap::new();
    for k in knob_paths {
        if let Some(v) = backend.read_knob(&k) {
            knobs.insert(k, v.trim().to_string());
        }
    }
    let meta = RunMeta {
        schema: RUN_SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        backend: backend.kind(),
        pnid_via: backend.pnid_via(),
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
        sim: None,
    };
    let mut meta = meta;
    backend.describe(&mut meta);
    std::fs::create_dir_all(dir)
        .map_err(|e| usage(format!("cannot create {}: {e}", dir.display())))?;
    record::write_meta(dir, &meta)?;
    Ok(meta)
}

/// Runs every planned sample not yet in `dir`'s records, telling `observer`.
pub fn execute(
    backend: &mut dyn Backend,
    topo: &Topology,
    dir: &Path,
    guard: &mut Guard,
    stop: &Stop,
    observer: &mut dyn RunObserver,
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
    let found = record::read_samples(dir, &meta)?;
    found.require_clean()?;
    record::mend_tail(&found)?;
    // Fixed or adaptive (`--precision`), rebuilt from the records.
    let mut schedule = Schedule::new(&meta, &found.records);
    let planned = schedule.planned(&found.records);
    observer.on_plan(
        &meta,
        &found,
        planned.saturating_sub(found.records.len() as u64),
    )?;
    let mut samples = found.records;
    let started = Instant::now();
    let (mut probe_wall, mut probe_loop) = (0u64, 0u64);
    let mut last_sync = Instant::now() - SYNC_EVERY;
    while let Some((seq, (row_id, sample))) = schedule.next(&samples) {
        // A backend that works ahead learns what comes next, this sample
        // first (a no-op for the host).
        let mut ahead = vec![(row_id, sample)];
        ahead.extend(schedule.upcoming());
        backend.plan(&meta.rows, &ahead);
        if stop.is_set() {
            break;
        }
        let row = meta.rows[row_id].clone();
        observer.on_sample_start(&row, samples.len() as u64, schedule.planned(&samples));
        backend.prepare(&row, guard)?;
        let Sampled {
            probe,
            wall_ns,
            trace,
            numa_balancing,
            knobs,
            knobs_changed,
            balance,
            sched,
        } = match backend.sample(&row, &meta.spec, stop, guard) {
            Ok(v) => v,
            Err(e) if e.is::<Interrupted>() => break,
            Err(e) => return Err(e),
        };
        probe_wall += wall_ns;
        probe_loop += probe.timing.total_ns;
        let time_s = probe.timing.total_ns as f64 / 1e9;
        let row_stop = schedule.stop_with(&samples, row_id, sample, time_s);
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
            stop: row_stop,
            balance,
            sched,
        };
        // Each sample reaches the disk before the next starts, unless
        // samples come faster than every SYNC_EVERY (the simulator): then
        // at most that much work is lost to a crash, and recomputed.
        let sync = last_sync.elapsed() >= SYNC_EVERY;
        record::append_sample(dir, &rec, sync)?;
        if sync {
            last_sync = Instant::now();
        }
        samples.push(rec);
        observer.on_sample(&meta, &samples)?;
    }
    record::sync_samples(dir)?;
    let run_wall_ns = started.elapsed().as_nanos() as u64;
    guard.restore()?;
    let planned = schedule.planned(&samples);
    if samples.len() as u64 >= planned && meta.end_unix_s.is_none() {
        meta.end_unix_s = Some(now_s());
        record::write_meta(dir, &meta)?;
    }
    observer.on_finish(&meta, &samples)?;
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
