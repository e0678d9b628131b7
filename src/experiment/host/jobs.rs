//! `numalab jobs` on this machine: N probe processes started at the same
//! instant (held at a gate until the tracer watches all of them), beside
//! the host backend's background load, run to the end. The kernel's trace
//! gives each job's share of on-CPU time per node, the node it ran on most
//! and the node it started on (without tracing, the probe's own sampled
//! observation); wait4(2) gives its user time. With `--home`, each job's
//! memory is preferred on its homenode and its CPUs follow the agent, hard
//! pinning, or numalab's scheduler.

use super::Host;
use crate::exec::{self, Ended};
use crate::probe::record::ProbeRecord;
use crate::run::jobs::{HomeCpu, HomeSpec, Job, JobsRecord, JobsSpec, SCHEMA};
use crate::sys::signals::Stop;
use crate::sys::state::Guard;
use crate::topology::Topology;
use crate::trace::analyze::{analyze, Causes, TaskTrace};
use anyhow::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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

/// Runs the jobs on `host`'s machine ([`crate::experiment::backend::Backend::jobs`]).
pub(super) fn run(
    host: &Host,
    spec: &JobsSpec,
    guard: &mut Guard,
    stop: &Stop,
    progress: &mut dyn FnMut(u32, u32, f64),
) -> anyhow::Result<JobsRecord> {
    let (topo, exe) = (&host.topo, &host.exe);
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
    let load = if host.load_spec.percent > 0.0 {
        Some(crate::load::Load::start(&host.load_spec).context("starting the background load")?)
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
            let mut argv: Vec<std::ffi::OsString> = vec![exe.into()];
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
        trace: host.trace.as_ref().map(|(tfs, live)| (tfs, live.clone())),
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
    let batch = exec::run(exe, &commands, opts, guard, stop, |done, n, t| {
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
            // A threaded probe's main task only waits: its threads'
            // own observation is the job's (the trace follows the pid).
            let traced_job = traced.get(&j.pid).filter(|_| rec.threads.is_empty());
            let (res, migrations, causes, source) = match traced_job {
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
                    if rec.threads.is_empty() {
                        "self-observed"
                    } else {
                        "self-observed by its threads"
                    },
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
        // The load as the jobs ran beside it: the backend's.
        load: host.load_spec.percent,
        elapsed_s,
        average_user_s,
        trace_events: captured.as_ref().map_or(0, |c| c.events.len() as u64),
        lost_events: captured.as_ref().map_or(0, |c| c.lost_events),
        notes,
        jobs: rows,
        home: spec.home.as_ref().map(HomeSpec::label),
        numa_balancing,
        load_policy: host.load_spec.policy,
        load_period_ms: host.load_spec.period_ms,
        load_phases: host.load_spec.phases,
        sim: None,
    })
}
