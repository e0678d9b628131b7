//! The backend seam: a backend runs one sample of a row (`numalab run`) or
//! a batch of jobs (`numalab jobs`) on its machine. The host backend
//! ([`crate::experiment::host`]) runs fresh `numalab probe` processes
//! under the row's placement beside the background load on every CPU; the
//! simulator ([`crate::experiment::simulated`]) simulates them on a model
//! of a machine; tests use a mock that makes records without touching the
//! machine, so the runner (order, resume, records, reports) is tested
//! anywhere. Both commands make their backend the same way and read its
//! records the same way, whichever it is.

use crate::analysis::balance::SampleBalance;
use crate::probe::record::ProbeRecord;
use crate::probe::{CpuPlacement, MemPlacement, ProbeSpec};
use crate::run::jobs::{JobsRecord, JobsSpec};
use crate::run::record::{BackendKind, PnidVia};
use crate::run::spec::{ExperimentSpec, Row, RowCpu, RowMem};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard};
use crate::topology::Topology;
use crate::trace::record::SampleTrace;
use std::collections::BTreeMap;

/// What a backend can change, deciding which rows are skipped and why.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// Current kernel.numa_balancing, if the kernel has it.
    pub numa_balancing: Option<u8>,
    pub can_set_numa_balancing: bool,
    /// Current migration_cost_ns, if readable.
    pub migration_cost_ns: Option<u64>,
    pub can_set_migration_cost: bool,
    /// Err(reason) when --pnid cannot be used.
    pub pnid: Result<String, String>,
}

pub trait Backend {
    /// Which backend this is (recorded in run.json).
    fn kind(&self) -> BackendKind;
    /// How PNID rows set the preferred node: "prctl" (the kernel patch),
    /// "agent" (`numalab home`'s soft affinity, any kernel) or "sched"
    /// (numalab's sched_ext scheduler).
    fn pnid_via(&self) -> PnidVia {
        PnidVia::Prctl
    }
    fn capabilities(&self) -> Capabilities;
    /// The current content of knob `path` (a system path), if readable.
    fn read_knob(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
    /// Whether knob `path` can be set by this backend.
    fn knob_writable(&self, path: &str) -> bool {
        state::writable(path)
    }
    /// Adds what the backend knows about itself to a new run's metadata.
    fn describe(&self, _meta: &mut crate::run::record::RunMeta) {}
    /// Told the rows and the (row, sample) pairs still to run, in order,
    /// before the first sample (the simulator batches samples ahead).
    fn plan(&mut self, _rows: &[Row], _todo: &[(usize, u32)]) {}
    /// Sets the row's knobs (journaled in `guard`).
    fn prepare(&mut self, row: &Row, guard: &mut Guard) -> anyhow::Result<()>;
    /// Runs one sample. When `stop` is set it abandons the sample and
    /// returns [`crate::sys::signals::Interrupted`]. State it changes is
    /// journaled in `guard`.
    fn sample(
        &mut self,
        row: &Row,
        spec: &ExperimentSpec,
        stop: &Stop,
        guard: &mut Guard,
    ) -> anyhow::Result<Sampled>;
    /// Runs a batch of jobs (`numalab jobs`): `spec.n` probes started at
    /// the same instant, to their end, beside the backend's background
    /// load, and returns their table. `progress(done, n, elapsed_s)` is
    /// called as they finish. When `stop` is set it abandons the batch and
    /// returns [`crate::sys::signals::Interrupted`]. State it changes is
    /// journaled in `guard`.
    fn jobs(
        &mut self,
        spec: &JobsSpec,
        stop: &Stop,
        guard: &mut Guard,
        progress: &mut dyn FnMut(u32, u32, f64),
    ) -> anyhow::Result<JobsRecord>;
}

/// One sample's results.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub probe: ProbeRecord,
    /// The probe process's wall time, start to exit.
    pub wall_ns: u64,
    /// The kernel's trace of the probe, when the spec asks for it.
    pub trace: Option<SampleTrace>,
    /// kernel.numa_balancing as the backend had it during the sample.
    pub numa_balancing: Option<u8>,
    /// Every knob the run sets, as read when the sample started (path ->
    /// value): what the sample really ran under.
    pub knobs: BTreeMap<String, String>,
    /// Knobs whose value at the sample's end differed from its start:
    /// something outside numalab changed them under the sample.
    pub knobs_changed: Vec<String>,
    /// Load-balancing counters over the sample, when traced.
    pub balance: Option<SampleBalance>,
    /// The scheduler's account of the probe (`--pnid-via sched` rows).
    pub sched: Option<crate::sched::account::ProcessAccount>,
}

/// Every knob `row` runs under, by system path: NB, migration_cost_ns when
/// the row has one, and the block's other knobs.
pub fn row_knobs(row: &Row) -> anyhow::Result<BTreeMap<String, String>> {
    let mut k = BTreeMap::from([(state::NUMA_BALANCING.to_string(), row.nb.to_string())]);
    if let Some(c) = row.migration_cost_ns {
        k.insert(state::MIGRATION_COST.to_string(), c.to_string());
    }
    for (name, value) in &row.knobs {
        let p = crate::run::knobs::path(name).map_err(crate::error::usage)?;
        k.insert(p, value.clone());
    }
    Ok(k)
}

/// Tries every knob value the spec's rows set (each set, then put straight
/// back) before a host run starts: a value the kernel refuses
/// (`kernel.numa_balancing_promote_rate_limit_MBps=-5`) is bad input, exit
/// 2, found before the run directory exists, not at its block's first
/// sample, where neither a retry nor `--resume` could get past it. Knobs
/// this system cannot write are left to the planner's skip reasons.
pub fn try_knob_values(rows: &[Row], guard: &mut Guard) -> anyhow::Result<()> {
    let mut tried = std::collections::BTreeSet::new();
    for row in rows {
        for (path, value) in row_knobs(row)? {
            if !guard.writable(&path) || !tried.insert((path.clone(), value.clone())) {
                continue;
            }
            guard.try_value(&path, &value).map_err(|e| {
                let why = e.root_cause().to_string();
                crate::error::usage(format!(
                    "knob {path} = {value}: the kernel refuses it ({why}); nothing was run"
                ))
            })?;
        }
    }
    Ok(())
}

/// The knobs a run sets, read now (absent ones left out).
pub fn read_knobs(
    paths: &[&str],
    read: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    paths
        .iter()
        .filter_map(|p| read(p).map(|v| (p.to_string(), v.trim().to_string())))
        .collect()
}

/// The knobs whose values differ between two readings.
pub fn changed_knobs(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<String> {
    before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Why `row` cannot run with `caps` on `topo`, if it cannot;
/// `knob_writable` says whether a knob's system path can be set here.
pub fn skip_reason(
    row: &Row,
    caps: &Capabilities,
    a: u32,
    b: u32,
    topo: &Topology,
    knob_writable: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if a == b && row.needs_two_nodes {
        return Some(format!("single-node machine: node B is node A ({a})"));
    }
    if let RowCpu::Node(n) = row.cpu {
        if topo.node(n).is_none_or(|x| x.cpus.is_empty()) {
            return Some(format!("node {n} has no CPUs"));
        }
    }
    if row.pnid >= 0 {
        if let Err(why) = &caps.pnid {
            return Some(format!("no PNID interface: {why}"));
        }
    }
    match caps.numa_balancing {
        None => return Some("this kernel has no kernel.numa_balancing".into()),
        Some(cur) if cur != row.nb && !caps.can_set_numa_balancing => {
            return Some(format!(
                "needs numa_balancing={} (now {cur}) and {} is not writable (not root?)",
                row.nb,
                state::NUMA_BALANCING
            ))
        }
        _ => {}
    }
    for (name, value) in &row.knobs {
        match crate::run::knobs::path(name) {
            Ok(p) if knob_writable(&p) => {}
            Ok(p) => {
                return Some(format!(
                    "needs {name}={value} and {p} is not writable here (not root, no debugfs, \
                     a kernel without that knob, or debugfs locked down)"
                ))
            }
            Err(why) => return Some(why),
        }
    }
    if let Some(want) = row.migration_cost_ns {
        match caps.migration_cost_ns {
            Some(cur) if cur == want => {}
            _ if caps.can_set_migration_cost => {}
            _ => {
                return Some(format!(
                "needs migration_cost_ns={want} and {} is not writable (not root, or no debugfs)",
                state::MIGRATION_COST
            ))
            }
        }
    }
    None
}

/// The probe a sample of `row` runs: the spec's probe under the row's CPU,
/// memory and PNID placement (no prctl layout: the backend adds its own).
pub fn probe_spec(row: &Row, spec: &ExperimentSpec) -> ProbeSpec {
    let p = &spec.probe;
    ProbeSpec {
        pattern: p.pattern,
        size: p.size,
        counts: p.counts,
        min_time_ns: None,
        cpu: match row.cpu {
            RowCpu::Node(n) => CpuPlacement::Node(n),
            RowCpu::Float => CpuPlacement::Float,
        },
        mem: match &row.mem {
            RowMem::Node(n) => MemPlacement::Bind(*n),
            RowMem::Interleave(s) => MemPlacement::Interleave(s.clone()),
            RowMem::Float => MemPlacement::Float,
        },
        pnid: (row.pnid >= 0).then_some(row.pnid),
        pnid_prctl: None,
        thp: p.thp,
        observe_every: p.observe_every,
        bind_scope: p.bind_scope,
        threads: p.threads,
        first_touch: p.first_touch,
    }
}
