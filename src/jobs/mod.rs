//! `numalab jobs`: the node-affine scheduler document's multi-job test.
//!
//! N copies of the probe start at the same instant (held at a gate until
//! the tracer watches all of them), optionally under background load, and
//! run to the end. The kernel's trace gives each job's share of on-CPU time
//! per node, the node it ran on most and the node it started on; wait4(2)
//! gives its user time. The document reported exactly this table (% time on
//! each node, the max, most vs initial node, user time, average user time)
//! to show whether tasks stay on the node that holds their memory.

pub mod render;
pub mod simulated;

use crate::exec::{self, Ended};
use crate::probe::record::ProbeRecord;
use crate::sys::signals::Stop;
use crate::sys::state::Guard;
use crate::topology::Topology;
use crate::trace::analyze::{analyze, Causes, TaskTrace};
use crate::trace::live::LiveSpec;
use crate::trace::tracefs::Tracefs;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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
    pub causes: Causes,
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
    pub sim: Option<simulated::SimJobsMeta>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct JobsSpec {
    pub n: u32,
    /// What every job runs.
    pub probe: crate::probe::ProbeSpec,
    /// Background load percent on every CPU (0: none).
    pub load: f64,
    /// Trace with tracefs (else residency is the probes' self-observation).
    pub tracefs: Option<Tracefs>,
    pub buffer_kb: u32,
    /// Homenodes for the jobs (`--home`).
    pub home: Option<HomeSpec>,
    /// `--nb`: kernel.numa_balancing set for the jobs (through the guard).
    pub nb: Option<u8>,
    /// The load workers' memory policy.
    pub load_policy: crate::load::LoadPolicy,
    /// The load's period (ms) and phases, and the phases' seed.
    pub load_period_ms: f64,
    pub load_phases: crate::load::LoadPhases,
    pub seed: u64,
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

/// Each job's homenode: the given node, or for auto the node with the
/// most spare CPU left after the jobs already given one (each job counted
/// as one busy CPU), then free memory, as node_policy chose at exec.
fn homes(topo: &Topology, h: &HomeSpec, n: u32) -> anyhow::Result<Vec<u32>> {
    if let Some(node) = h.node {
        return Ok(vec![node; n as usize]);
    }
    let sys = crate::topology::sysfs::SysRoot::new("/");
    let (_, rooms) = crate::home::auto_node(&sys, topo, Duration::from_millis(250))?;
    Ok(crate::home::observe::assign_homes(&rooms, n as usize))
}

/// Each homenode with the jobs (indices) homed on it, nodes in order.
fn jobs_by_node(homes: &[u32]) -> Vec<(u32, Vec<usize>)> {
    let mut by: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, &node) in homes.iter().enumerate() {
        by.entry(node).or_default().push(i);
    }
    by.into_iter().collect()
}

/// Runs the jobs; `progress(done, n, elapsed)` after each poll.
pub fn run(
    topo: &Topology,
    spec: &JobsSpec,
    guard: &mut Guard,
    stop: &Stop,
    mut progress: impl FnMut(u32, u32, f64),
) -> anyhow::Result<JobsRecord> {
    let exe = std::env::current_exe().context("finding the numalab executable")?;
    if let Some(v) = spec.nb {
        guard.set(crate::sys::state::NUMA_BALANCING, &v.to_string())?;
    }
    let numa_balancing = guard
        .read(crate::sys::state::NUMA_BALANCING)
        .ok()
        .and_then(|v| v.trim().parse::<u8>().ok());
    // The scheduler before the load, so everything starts under it.
    let mut sched = match &spec.home {
        Some(HomeSpec {
            cpu: HomeCpu::Sched,
            ..
        }) => {
            let cfg = crate::sched::build_config(topo, &crate::sched::Options::default())
                .map_err(crate::error::usage)?;
            Some(crate::sched::loader::Scheduler::load(&cfg, false)?)
        }
        _ => None,
    };
    let load = if spec.load > 0.0 {
        Some(crate::load::Load::start(&crate::load::LoadSpec::new(
            topo,
            spec.load,
            topo.allowed.cpus.intersection(&topo.online_cpus()),
            spec.load_period_ms,
            spec.load_policy,
            spec.load_phases,
            spec.seed,
        ))?)
    } else {
        None
    };
    let options = spec.probe.options();
    let job_homes = match &spec.home {
        Some(h) => Some(homes(topo, h, spec.n)?),
        None => None,
    };
    let commands: Vec<Vec<std::ffi::OsString>> = (0..spec.n as usize)
        .map(|i| {
            let mut p = spec.probe.clone();
            if let (Some(h), Some(homes)) = (&spec.home, &job_homes) {
                p.mem = crate::probe::MemPlacement::Preferred(homes[i]);
                if h.cpu == HomeCpu::Pin {
                    p.cpu = crate::probe::CpuPlacement::Node(homes[i]);
                }
            }
            let mut argv: Vec<std::ffi::OsString> = vec![exe.clone().into()];
            argv.extend(p.child_argv().iter().map(Into::into));
            argv
        })
        .collect();
    // One agent per homenode, following that node's jobs.
    let mut agents: Vec<(crate::home::Agent, Vec<usize>)> = Vec::new();
    if let (
        Some(HomeSpec {
            cpu: HomeCpu::Agent,
            ..
        }),
        Some(homes),
    ) = (&spec.home, &job_homes)
    {
        for (node, jobs) in jobs_by_node(homes) {
            let agent = crate::home::Agent::new(
                crate::topology::sysfs::SysRoot::new("/"),
                node,
                crate::home::home_cpus(topo, "--home", node)?,
                crate::home::Thresholds::default(),
                Duration::from_millis(crate::home::EXPERIMENT_WINDOW_MS),
                None,
            );
            agents.push((agent, jobs));
        }
    }
    let opts = exec::Options {
        trace: spec.tracefs.as_ref().map(|tfs| {
            (
                tfs,
                LiveSpec {
                    buffer_kb: spec.buffer_kb,
                    follow_forks: false,
                    pages_every: None,
                    cpus: topo.online_cpus().iter().collect(),
                },
            )
        }),
        agents: agents.iter_mut().map(|(a, j)| (a, j.clone())).collect(),
        sched_homes: match (&sched, &job_homes) {
            (Some(s), Some(homes)) => jobs_by_node(homes)
                .into_iter()
                .map(|(node, jobs)| (s, node, jobs))
                .collect(),
            _ => Vec::new(),
        },
        ..Default::default()
    };
    let batch = exec::run(&exe, &commands, opts, guard, stop, |done, n, t| {
        progress(done as u32, n as u32, t.as_secs_f64())
    })?;
    drop(load);
    let mut sched_note = None;
    let mut sched_account = None;
    if let Some(s) = sched.as_mut() {
        s.detach_checked().context("the jobs")?;
        let a = s.account()?;
        sched_note = Some(a.summary());
        sched_account = Some(a);
    }
    if batch.ended != Ended::Exited {
        return Err(stop.interrupted().into());
    }
    let elapsed_s = batch.elapsed.as_secs_f64();
    let captured = batch.captured;
    let jobs = batch.children;
    let pids: BTreeSet<u32> = jobs.iter().map(|j| j.pid).collect();
    let mut records = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        if !j.reaped.success() {
            anyhow::bail!(
                "job {} (pid {}) failed ({}): {}",
                i + 1,
                j.pid,
                j.reaped.describe(),
                j.stderr_text()
            );
        }
        let rec: ProbeRecord = serde_json::from_slice(&j.stdout)
            .with_context(|| format!("parsing job {}'s record", i + 1))?;
        records.push(rec);
    }

    let mut notes = Vec::new();
    if let Some(n) = sched_note {
        notes.push(format!("numalab's scheduler: {n}"));
    }
    if let Some(v) = spec.nb {
        notes.push(format!(
            "kernel.numa_balancing was set to {v} for the jobs (--nb) and put back after"
        ));
    }
    let traced: BTreeMap<u32, TaskTrace> = match &captured {
        Some(c) => {
            let mem: BTreeMap<u32, Option<u32>> = jobs
                .iter()
                .zip(&records)
                .map(|(j, r)| (j.pid, r.placement.mem_node))
                .collect();
            analyze(topo, &c.events, &pids, false, c.window, &|p| {
                mem.get(&p).copied().flatten()
            })
            .into_iter()
            .map(|t| (t.pid, t))
            .collect()
        }
        None => {
            notes.push(
                "not traced (--no-trace): time per node is each probe's own sampled \
                 observation of its timed loop"
                    .into(),
            );
            BTreeMap::new()
        }
    };
    if let Some(c) = &captured {
        if c.lost_events > 0 {
            notes.push(format!(
                "the kernel dropped {} trace events: raise --buffer-kb",
                c.lost_events
            ));
        }
    }
    let rows: Vec<Job> = jobs
        .iter()
        .zip(&records)
        .enumerate()
        .map(|(i, (j, rec))| {
            let r = j.reaped;
            let (res, migrations, causes, source) = match traced.get(&j.pid) {
                Some(t) => (
                    t.residency.clone(),
                    t.migrations.clone(),
                    t.causes,
                    "kernel trace",
                ),
                None => (
                    rec.residency.clone(),
                    rec.migrations_whole.clone(),
                    Causes::default(),
                    "self-observed",
                ),
            };
            Job {
                job: i as u32 + 1,
                pid: j.pid,
                max_pct: res.node_pct.values().copied().fold(0.0, f64::max),
                node_pct: res.node_pct.clone(),
                most_node: res.most_node,
                start_node: res.start_node,
                mem_node: rec.placement.mem_node,
                user_s: r.user_ns as f64 / 1e9,
                sys_s: r.sys_ns as f64 / 1e9,
                loop_s: rec.timing.total_ns as f64 / 1e9,
                migrations,
                causes,
                residency_source: source.into(),
                home_node: job_homes.as_ref().map(|h| h[i]),
                cpu_time: rec.cpu_time.clone(),
                sched: sched_account.as_ref().and_then(|a| a.of_process(j.pid)),
            }
        })
        .collect();
    if let Some(h) = &spec.home {
        let on_home: Vec<f64> = rows
            .iter()
            .filter_map(|j| Some(j.node_pct.get(&j.home_node?).copied().unwrap_or(0.0)))
            .collect();
        let c = agents
            .iter()
            .fold(crate::home::Counts::default(), |mut c, (a, _)| {
                c.narrowed += a.counts.narrowed;
                c.widened += a.counts.widened;
                c
            });
        notes.push(format!(
            "homenodes ({}, CPUs: {}): jobs' time on their homenode {:.1}% on average{}",
            h.node.map_or("auto".to_string(), |n| format!("node {n}")),
            h.cpu.name(),
            on_home.iter().sum::<f64>() / on_home.len().max(1) as f64,
            if h.cpu == HomeCpu::Agent {
                format!("; agent: {} narrowed, {} widened", c.narrowed, c.widened)
            } else {
                String::new()
            }
        ));
    }
    let average_user_s = rows.iter().map(|j| j.user_s).sum::<f64>() / rows.len().max(1) as f64;
    Ok(JobsRecord {
        schema: SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        kernel: topo.kernel.clone(),
        topology_digest: topo.digest(),
        nodes: topo.node_ids().iter().collect(),
        num_cpus: topo.online_cpus().len(),
        n: spec.n,
        // The options, as the table's header shows them (no `probe --json`).
        probe_args: options,
        load: spec.load,
        elapsed_s,
        average_user_s,
        trace_events: captured.as_ref().map_or(0, |c| c.events.len() as u64),
        lost_events: captured.as_ref().map_or(0, |c| c.lost_events),
        notes,
        jobs: rows,
        home: spec.home.as_ref().map(HomeSpec::label),
        numa_balancing,
        load_policy: spec.load_policy,
        load_period_ms: spec.load_period_ms,
        load_phases: spec.load_phases,
        sim: None,
    })
}

/// Reads a record written by `numalab jobs --out` (or `--format json`).
pub fn read_record(path: &std::path::Path) -> anyhow::Result<JobsRecord> {
    let text = crate::input::read_input_text(path, "jobs record", crate::input::RECORD_LIMIT)?;
    let rec: JobsRecord = serde_json::from_str(&text).map_err(|e| {
        crate::error::usage(format!(
            "{}: not a numalab jobs record: {e}",
            path.display()
        ))
    })?;
    if rec.schema != SCHEMA {
        return Err(crate::error::usage(format!(
            "{}: schema {:?}, expected {SCHEMA:?}",
            path.display(),
            rec.schema
        )));
    }
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
