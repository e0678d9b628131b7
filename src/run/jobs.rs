//! `numalab jobs`' data: what to run ([`JobsSpec`]) and what a run of it
//! gives ([`JobsRecord`], one [`Job`] a row), the same for a run on this
//! machine and a simulated one, so the table, its formats, `--from` and
//! `plot` read either. The runners are the backends'
//! (`crate::experiment::backend::Backend::jobs`); the table is
//! `crate::report::jobs`.
//!
//! N copies of the probe start at the same instant, optionally under
//! background load, and run to the end. Each job's row is its share of
//! on-CPU time per node, the node it ran on most and the node it started
//! on, and its user time: the table the node-affine scheduler document
//! reported to show whether tasks stay on the node that holds their memory.

use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "numalab.jobs/1";

/// One job's row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// 1-based, as the document numbers them.
    pub job: u32,
    pub pid: u32,
    /// Node -> percent of the job's on-CPU time.
    pub node_pct: BTreeMap<u32, f64>,
    pub max_pct: f64,
    pub most_node: Option<u32>,
    pub start_node: Option<u32>,
    /// Where its memory is (the probe's read-back after warm-up).
    pub mem_node: Option<u32>,
    pub user_s: f64,
    pub sys_s: f64,
    /// The probe's timed loop.
    pub loop_s: f64,
    pub migrations: crate::analysis::MigrationCounts,
    pub causes: crate::trace::analyze::Causes,
    /// "kernel trace" or "self-observed" (no tracing).
    pub residency_source: String,
    /// Its homenode (`--home`), absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_node: Option<u32>,
    /// Its timed loop's time on a CPU and waiting for one (the probe's
    /// `cpu_time`, docs/probe-schema.md); absent where the kernel keeps no
    /// schedstat, and in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time: Option<crate::probe::record::CpuTime>,
    /// `--home-cpu sched`: numalab's scheduler's account of the job (its
    /// time at home, steals and why, returns; docs/sched-schema.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<crate::sched::account::ProcessAccount>,
}

impl Job {
    /// Share of its timed loop spent runnable but waiting for a CPU, %.
    pub fn wait_pct(&self) -> Option<f64> {
        self.cpu_time.as_ref().and_then(|c| c.wait_pct())
    }
}

/// The whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsRecord {
    pub schema: String,
    pub numalab_version: String,
    pub kernel: Option<String>,
    pub topology_digest: String,
    /// Node ids of the machine, for the table's columns.
    pub nodes: Vec<u32>,
    pub num_cpus: usize,
    pub n: u32,
    /// The arguments each probe ran with.
    pub probe_args: Vec<String>,
    pub load: f64,
    pub elapsed_s: f64,
    pub average_user_s: f64,
    pub trace_events: u64,
    pub lost_events: u64,
    pub notes: Vec<String>,
    pub jobs: Vec<Job>,
    /// `--home` as given ("auto" or a node) and how CPUs followed it
    /// ("agent", "pin", "float", "sched"); absent without --home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// kernel.numa_balancing while the jobs ran (the simulated kernel's for
    /// --backend sim); absent where it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_balancing: Option<u8>,
    /// The load workers' memory policy; absent for the default.
    #[serde(default, skip_serializing_if = "crate::load::LoadPolicy::is_default")]
    pub load_policy: crate::load::LoadPolicy,
    /// The load's duty-cycle period, ms; absent for the default.
    #[serde(
        default = "crate::load::default_period_ms",
        skip_serializing_if = "crate::load::is_default_period_ms"
    )]
    pub load_period_ms: f64,
    /// When each load worker's busy part starts; absent for staggered.
    #[serde(default, skip_serializing_if = "crate::load::LoadPhases::is_default")]
    pub load_phases: crate::load::LoadPhases,
    /// `--backend sim`: the simulation behind the record; absent for a run
    /// on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimJobsMeta>,
}

/// What to run: `numalab jobs`' arguments resolved (`cli::resolve`), the
/// same for every backend.
#[derive(Debug, Clone)]
pub struct JobsSpec {
    pub n: u32,
    /// What every job runs.
    pub probe: crate::probe::ProbeSpec,
    /// Background load percent on every CPU (0: none).
    pub load: f64,
    /// Homenodes for the jobs (`--home`).
    pub home: Option<HomeSpec>,
    /// `--nb`: kernel.numa_balancing for the jobs (set through the guard on
    /// this machine); `None`: as the machine has it (the simulated
    /// kernel's default, on).
    pub nb: Option<u8>,
    /// The load workers' memory policy.
    pub load_policy: crate::load::LoadPolicy,
    /// The load's period (ms) and phases, and the seed of random phases
    /// (and of the simulation).
    pub load_period_ms: f64,
    pub load_phases: crate::load::LoadPhases,
    pub seed: u64,
}

impl JobsSpec {
    /// The background load the jobs run beside, on `cpus` of `topo`.
    pub fn load_spec(&self, topo: &Topology, cpus: crate::idset::IdSet) -> crate::load::LoadSpec {
        crate::load::LoadSpec::new(
            topo,
            self.load,
            cpus,
            self.load_period_ms,
            self.load_policy,
            self.load_phases,
            self.seed,
        )
    }
}

/// `jobs --home`: every job gets a homenode (one node for all, or chosen
/// per job like the node-affine scheduler's node_policy), its memory
/// preferred there, and its CPUs as `cpu` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeSpec {
    /// `None`: auto.
    pub node: Option<u32>,
    pub cpu: HomeCpu,
}

impl HomeSpec {
    /// The record's `home`: "auto" or the node, then how CPUs follow it.
    pub fn label(&self) -> String {
        format!(
            "{} {}",
            self.node.map_or("auto".into(), |n| n.to_string()),
            self.cpu.name()
        )
    }
}

/// How a job's CPUs follow its homenode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HomeCpu {
    /// The homenode agent's soft affinity (`numalab home`).
    Agent,
    /// Hard pinning to the homenode (numactl --cpunodebind).
    Pin,
    /// No CPU placement: only the memory is on the homenode.
    Float,
    /// numalab's sched_ext node-affine scheduler, loaded for the batch,
    /// each job homed on its node (Linux 6.12+ with sched_ext).
    Sched,
}

impl HomeCpu {
    pub fn name(self) -> &'static str {
        match self {
            HomeCpu::Agent => "agent",
            HomeCpu::Pin => "pin",
            HomeCpu::Float => "float",
            HomeCpu::Sched => "sched",
        }
    }
}

/// What a simulated jobs record says about the simulation (`sim`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJobsMeta {
    pub model_version: u32,
    /// "preset NAME", "file PATH" or "this machine".
    pub topology_source: String,
    pub profile: String,
    pub seed: u64,
    /// Events the simulation handled.
    pub events: u64,
}

/// Reads a record written by `numalab jobs --out` (or `--format json`).
pub fn read_record(path: &std::path::Path) -> anyhow::Result<JobsRecord> {
    let rec: JobsRecord =
        crate::paths::read_json_record(path, "jobs record", SCHEMA, |r: &JobsRecord| {
            r.schema.as_str()
        })?;
    // A run makes at least one job; a record without any was cut or made
    // by hand, and an empty table would pass for a result.
    if rec.jobs.is_empty() {
        return Err(crate::error::usage(format!(
            "{}: the jobs record holds no job",
            path.display()
        )));
    }
    Ok(rec)
}
