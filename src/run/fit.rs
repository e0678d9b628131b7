//! Recorded runs as `numalab sim fit` reads them: every row whose CPU is
//! bound to a node becomes a [`crate::sim::fit::Observation`], its samples'
//! time per access on a CPU, and where their memory was against where they
//! ran (SLIT distances from the record's pages per node and time per node,
//! so a row that did not get the placement it asked for is read as it
//! ran). Floating rows are the ones a fitted profile predicts; they are
//! listed, not fitted. Reads only.

use super::record::{self, RunMeta, SampleRecord};
use super::spec::{Row, RowCpu};
use crate::error::usage;
use crate::probe::record::ProbeRecord;
use crate::sim::fit::Observation;
use crate::stats::Sample;
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the runs gave the fit.
#[derive(Debug, Default)]
pub struct FitInput {
    pub obs: Vec<Observation>,
    /// Rows not fitted, and why (floating CPU, threaded probe, too few
    /// samples...): `DIR [NN] params: why`.
    pub left_out: Vec<String>,
    /// Warnings about the records (torn lines, samples without CPU time).
    pub warnings: Vec<String>,
    /// Kernel releases the runs were made on (host runs).
    pub kernels: Vec<String>,
    /// The run directories, as the profile's sources name them.
    pub dirs: Vec<PathBuf>,
    /// Each run's record and machine, and for each observation its run
    /// (index) and row: what the simulator needs to run the row again.
    pub runs: Vec<(RunMeta, Topology)>,
    pub rows: Vec<(usize, Row)>,
}

/// Reads every run in `dirs`. `topology_for(meta, dir)` gives the machine a
/// host run was recorded on (checked against its digest by the caller's
/// function); a simulated run carries its own.
pub fn read_runs(
    dirs: &[PathBuf],
    topology_for: &mut dyn FnMut(&RunMeta, &Path) -> anyhow::Result<Topology>,
) -> anyhow::Result<FitInput> {
    let mut out = FitInput::default();
    for dir in dirs {
        let meta = record::read_meta(dir)?;
        let topo = match &meta.sim {
            Some(sim) => Topology::from_json(
                &sim.topology.to_string(),
                &format!("{} (simulated topology)", dir.display()),
            )?,
            None => topology_for(&meta, dir)?,
        };
        let found = record::read_samples(dir, &meta)?;
        out.warnings.extend(
            found
                .notes()
                .into_iter()
                .map(|n| format!("{}: {n}", dir.display())),
        );
        if let (None, Some(k)) = (&meta.sim, &meta.kernel) {
            if !out.kernels.contains(k) {
                out.kernels.push(k.clone());
            }
        }
        let mut by_row: BTreeMap<usize, Vec<&SampleRecord>> = BTreeMap::new();
        for s in &found.records {
            by_row.entry(s.row).or_default().push(s);
        }
        for row in &meta.rows {
            let label = format!("{} [{:02}] {}", dir.display(), row.id, row.params());
            let samples = by_row.get(&row.id).map(Vec::as_slice).unwrap_or(&[]);
            match observe(&meta, &topo, row, samples, &label) {
                Ok((o, warn)) => {
                    out.warnings.extend(warn);
                    out.obs.push(o);
                    out.rows.push((out.runs.len(), row.clone()));
                }
                Err(why) => out.left_out.push(format!("{label}: {why}")),
            }
        }
        out.dirs.push(dir.clone());
        out.runs.push((meta, topo));
    }
    Ok(out)
}

/// One row as an observation, or why it is none.
fn observe(
    meta: &RunMeta,
    topo: &Topology,
    row: &Row,
    samples: &[&SampleRecord],
    label: &str,
) -> Result<(Observation, Vec<String>), String> {
    if let Some(why) = &row.skip {
        return Err(format!("skipped by the run ({why})"));
    }
    if meta.spec.probe.threads.is_some() {
        return Err("a threaded probe: the fit reads one task's time per access".into());
    }
    if !matches!(row.cpu, RowCpu::Node(_)) {
        return Err("CPU floats: a row to predict, not to fit".into());
    }
    let mut points = Vec::new();
    let mut no_cpu_time = 0usize;
    for s in samples {
        match sample_point(topo, &s.probe) {
            Some(p) => points.push(p),
            None => no_cpu_time += 1,
        }
    }
    let n = points.len();
    if n < 2 {
        return Err(format!(
            "{n} usable sample{} (the fit needs two or more a row{})",
            if n == 1 { "" } else { "s" },
            if no_cpu_time > 0 {
                format!(
                    "; {no_cpu_time} without CPU time or pages: a kernel without \
                     CONFIG_SCHED_INFO, or no page was found"
                )
            } else {
                String::new()
            }
        ));
    }
    let mut warn = Vec::new();
    if no_cpu_time > 0 {
        warn.push(format!(
            "{label}: {no_cpu_time} sample(s) without CPU time or pages left out"
        ));
    }
    let o = observation(label, meta.spec.probe.size.bytes(), &points)
        .ok_or_else(|| "no usable sample".to_string())?;
    Ok((o, warn))
}

/// One sample as the fit reads it: on-CPU ns per access in the timed
/// loop, and the observation of that sample alone.
pub type Point = (f64, Observation);

/// A probe record as a [`Point`]; `None` without CPU time (no
/// CONFIG_SCHED_INFO), pages or accesses.
pub fn sample_point(topo: &Topology, p: &ProbeRecord) -> Option<Point> {
    let accesses = p.timing.accesses_per_iteration * p.timing.iterations_ns.len() as u64;
    let ct = p.cpu_time.as_ref().filter(|_| accesses > 0)?;
    let shares = distance_shares(topo, p)?;
    let t = ct.run_ns as f64 / accesses as f64;
    let m = &p.migrations;
    Some((
        t,
        Observation {
            label: String::new(),
            ws: p.spec.size.bytes(),
            ns_per_access: Sample::new(vec![t]).ok()?,
            dist_share: shares,
            speed_factor: 1.0,
            llc_moves: m.same_llc as f64 / accesses as f64,
            node_moves: (m.same_node + m.cross_node) as f64 / accesses as f64,
        },
    ))
}

/// The row's observation from its samples' points: their times, and the
/// mean of their shares and moves.
pub fn observation(label: &str, ws: u64, points: &[Point]) -> Option<Observation> {
    let n = points.len() as f64;
    let mut shares: BTreeMap<u32, f64> = BTreeMap::new();
    for (_, o) in points {
        for (d, v) in &o.dist_share {
            *shares.entry(*d).or_default() += v / n;
        }
    }
    Some(Observation {
        label: label.to_string(),
        ws,
        ns_per_access: Sample::new(points.iter().map(|p| p.0).collect()).ok()?,
        dist_share: shares,
        speed_factor: 1.0,
        llc_moves: points.iter().map(|p| p.1.llc_moves).sum::<f64>() / n,
        node_moves: points.iter().map(|p| p.1.node_moves).sum::<f64>() / n,
    })
}

/// The share of a sample's memory at each SLIT distance from the CPU,
/// weighting each node it ran on by its time there; `None` without pages
/// or time.
fn distance_shares(topo: &Topology, p: &ProbeRecord) -> Option<BTreeMap<u32, f64>> {
    let pages: u64 = p.placement.pages_per_node.values().sum();
    let ran: u64 = p.residency.node_ns.values().sum();
    if pages == 0 || ran == 0 {
        return None;
    }
    let mut out = BTreeMap::new();
    for (&cn, &t) in &p.residency.node_ns {
        for (&mn, &pg) in &p.placement.pages_per_node {
            let d = topo.distance(cn, mn)?;
            *out.entry(d).or_insert(0.0) += (t as f64 / ran as f64) * (pg as f64 / pages as f64);
        }
    }
    Some(out)
}

/// The topology a host run was recorded on: `given` (a `numalab topo
/// --json` file) or this machine's, whichever has the run's digest.
pub fn check_recorded_on(
    meta: &RunMeta,
    dir: &Path,
    topo: &Topology,
    what: &str,
) -> anyhow::Result<()> {
    if meta.topology_digest != topo.digest() {
        return Err(usage(format!(
            "{} was recorded on another machine (topology {}, {what} {}): pass that \
             machine's `numalab topo --json` with --topology",
            dir.display(),
            meta.topology_digest,
            topo.digest()
        )));
    }
    Ok(())
}
