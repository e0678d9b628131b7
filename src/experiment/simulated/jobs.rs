//! `numalab jobs N --backend sim`: the multi-job test on a simulated
//! machine ([`crate::sim::multi`]), turned into the same [`JobsRecord`] a
//! traced host run gives, so the table, its formats, `--from` and `plot`
//! work on it unchanged.
//!
//! The simulated kernel is the one `run --backend sim` simulates (6.12 with
//! our PNID patch, its default knobs; NUMA balancing on unless `--nb 0`). A job's time per
//! node is its simulated on-CPU time, its migrations every move the
//! simulator made (classified by the topology as the trace's are), its
//! "user time" its on-CPU time (fault handling and page migration are
//! charged to it there too: the model has no user/system split).

use crate::analysis::{self, Segment};
use crate::load::LoadSpec;
use crate::probe::{CpuPlacement, MemPlacement, ThpMode};
use crate::run::jobs::{HomeCpu, HomeSpec, Job, JobsRecord, JobsSpec, SimJobsMeta, SCHEMA};
use crate::sim::multi::{self, JobResult, Multi};
use crate::sim::numa::{MemPolicy, NumaKnobs};
use crate::sim::{Cause, Machine, Profile, MODEL_VERSION};
use crate::topology::Topology;
use crate::trace::analyze::Causes;

/// sysctl_sched_migration_cost's default, ns (as `run --backend sim`).
const MIGRATION_COST_NS: f64 = 500_000.0;

fn node_index(m: &Machine, id: u32) -> anyhow::Result<usize> {
    m.node_ids.iter().position(|&n| n == id).ok_or_else(|| {
        crate::error::usage(format!("node {id} has no CPUs in the simulated machine"))
    })
}

/// Homenodes on the simulated machine: the given node, or for auto the
/// node_policy choice with every CPU as idle as the load leaves it.
fn homes(m: &Machine, h: &HomeSpec, n: u32, load: f64) -> Vec<u32> {
    if let Some(node) = h.node {
        return vec![node; n as usize];
    }
    let rooms: Vec<crate::home::observe::NodeRoom> = m
        .node_ids
        .iter()
        .enumerate()
        .map(|(k, &node)| crate::home::observe::NodeRoom {
            node,
            idle_cpus: m.node_cpus[k].len() as f64 * (1.0 - load / 100.0),
            free_bytes: u64::MAX,
        })
        .collect();
    crate::home::observe::assign_homes(&rooms, n as usize)
}

/// Checks what the simulator cannot do before any work.
pub fn check(home: Option<&HomeSpec>) -> anyhow::Result<()> {
    if let Some(HomeSpec {
        cpu: c @ (HomeCpu::Agent | HomeCpu::Sched),
        ..
    }) = home
    {
        return Err(crate::error::usage(format!(
            "--home-cpu {} runs on this machine's kernel; with --backend sim \
             use --home-cpu pin or float (or the simulated kernel's PNID: -- --pnid N)",
            c.name()
        )));
    }
    Ok(())
}

/// Runs the jobs on the simulated machine `m` (built from `topo`;
/// `source` says where it came from) with `profile`, beside the
/// background load `load` ([`crate::experiment::backend::Backend::jobs`]).
pub(super) fn run(
    m: &Machine,
    topo: &Topology,
    source: &str,
    profile: &Profile,
    load: &LoadSpec,
    s: &JobsSpec,
) -> anyhow::Result<JobsRecord> {
    check(s.home.as_ref())?;
    // The simulated kernel's NUMA balancing is on unless --nb 0.
    let nb = s.nb.unwrap_or(1);
    let job_homes = s.home.as_ref().map(|h| homes(m, h, s.n, load.percent));
    let mut jobs = Vec::with_capacity(s.n as usize);
    for i in 0..s.n as usize {
        let mut p = s.probe.clone();
        if let (Some(h), Some(homes)) = (&s.home, &job_homes) {
            p.mem = MemPlacement::Preferred(homes[i]);
            if h.cpu == HomeCpu::Pin {
                p.cpu = CpuPlacement::Node(homes[i]);
            }
        }
        let allowed = match p.cpu {
            CpuPlacement::Float => (0..m.len()).collect(),
            CpuPlacement::Node(n) => m.node_cpus[node_index(m, n)?].clone(),
        };
        let mem = match &p.mem {
            MemPlacement::Float => MemPolicy::Float,
            // A preferred node with room takes every page at first touch,
            // and NUMA balancing does not scan a VMA under a policy without
            // MPOL_F_MOF, so it places exactly as binding does.
            MemPlacement::Bind(n) | MemPlacement::Preferred(n) => {
                MemPolicy::Bind(node_index(m, *n)?)
            }
            MemPlacement::Interleave(set) => MemPolicy::Interleave(
                set.iter()
                    .map(|n| node_index(m, n))
                    .collect::<anyhow::Result<_>>()?,
            ),
        };
        let forced = match p.pnid {
            Some(n) if n >= 0 => Some(node_index(m, n as u32)?),
            _ => None,
        };
        jobs.push(multi::Job {
            allowed,
            mem,
            forced,
            touch_first: !s.probe.first_touch.is_placed(),
        });
    }
    let period = load.period_ms * 1e6;
    let model =
        crate::sim::load::LoadModel::shaped(m, load.percent, period, load.phases, load.seed)
            .reshaped(profile.emulator.reshape(m.len()));
    let spec = multi::JobsSpec {
        jobs,
        numa: NumaKnobs {
            enabled: nb > 0,
            ..NumaKnobs::default()
        },
        migration_cost_ns: MIGRATION_COST_NS,
        scope: s.probe.bind_scope,
        load_policy: load.policy,
        buffer_bytes: s.probe.size.bytes(),
        page_bytes: if s.probe.thp == ThpMode::On {
            2 << 20
        } else {
            4096
        },
        accesses_per_iteration: s.probe.pattern.accesses_per_pass(s.probe.size.bytes()),
        iterations: s.probe.counts,
        seed: s.seed,
        noise_seed: s.seed,
    };
    let res = Multi::new(m, profile, &model, &spec).run();
    if let Some(why) = &res.runaway {
        anyhow::bail!("the simulation ran away, a model bug, not a result: {why}");
    }
    let rows: Vec<Job> = res
        .jobs
        .iter()
        .enumerate()
        .map(|(i, r)| job_row(topo, m, i, r, job_homes.as_ref().map(|h| h[i])))
        .collect();
    let mut notes = vec![format!(
        "simulated: {} on {} ({} events, seed {}); NUMA balancing {}; \
         memory bandwidth and shared-cache contention between jobs are not modelled",
        crate::sim::kernel_label(profile),
        source,
        res.events,
        s.seed,
        if nb > 0 { "on" } else { "off (--nb 0)" }
    )];
    if let Some(h) = &s.home {
        let on_home: Vec<f64> = rows
            .iter()
            .filter_map(|j| Some(j.node_pct.get(&j.home_node?).copied().unwrap_or(0.0)))
            .collect();
        notes.push(format!(
            "homenodes ({}, CPUs: {}): jobs' time on their homenode {:.1}% on average",
            h.node.map_or("auto".to_string(), |n| format!("node {n}")),
            h.cpu.name(),
            on_home.iter().sum::<f64>() / on_home.len().max(1) as f64,
        ));
    }
    let average_user_s = rows.iter().map(|j| j.user_s).sum::<f64>() / rows.len().max(1) as f64;
    Ok(JobsRecord {
        schema: SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        kernel: Some(crate::sim::kernel_label(profile)),
        topology_digest: topo.digest(),
        nodes: m.node_ids.clone(),
        num_cpus: m.len(),
        n: s.n,
        probe_args: s.probe.options(),
        // The load as the jobs ran beside it: the backend's.
        load: load.percent,
        elapsed_s: res.wall_ns as f64 / 1e9,
        average_user_s,
        trace_events: 0,
        lost_events: 0,
        notes,
        jobs: rows,
        home: s.home.as_ref().map(HomeSpec::label),
        numa_balancing: Some(nb),
        load_policy: load.policy,
        load_period_ms: load.period_ms,
        load_phases: load.phases,
        sim: Some(SimJobsMeta {
            model_version: MODEL_VERSION,
            topology_source: source.to_string(),
            profile: profile.name.clone(),
            seed: s.seed,
            events: res.events,
        }),
    })
}

/// One job's row from what the simulator saw.
fn job_row(topo: &Topology, m: &Machine, i: usize, r: &JobResult, home: Option<u32>) -> Job {
    let id = |c: usize| m.ids[c];
    let mem_node = crate::sim::majority_node(&r.pages_after_warm_up).map(|n| m.node_ids[n]);
    let moves = crate::sim::migrations(m, &r.moves);
    // The start CPU's segment first: residency's start node is its node.
    let mut segments: Vec<Segment> = r
        .run_ns
        .iter()
        .enumerate()
        .filter(|(_, &ns)| ns > 0)
        .map(|(c, &ns)| Segment { cpu: id(c), ns })
        .collect();
    if let Some(pos) = segments.iter().position(|s| s.cpu == id(r.start_cpu)) {
        let s = segments.remove(pos);
        segments.insert(0, s);
    }
    let mut res = analysis::residency(topo, mem_node, &segments);
    res.start_node = Some(m.node_ids[m.node[r.start_cpu]]);
    let mut causes = Causes::default();
    for mv in &r.moves {
        match mv.cause {
            Cause::NumaBalancing => causes.numa_balancing += 1,
            Cause::LoadBalance | Cause::Affinity => causes.load_balance += 1,
        }
    }
    let cpu_ns: u64 = r.run_ns.iter().sum();
    let loop_ns: u64 = r.iterations_ns.iter().sum();
    Job {
        job: i as u32 + 1,
        pid: 0,
        max_pct: res.node_pct.values().copied().fold(0.0, f64::max),
        node_pct: res.node_pct.clone(),
        most_node: res.most_node,
        start_node: res.start_node,
        mem_node,
        user_s: cpu_ns as f64 / 1e9,
        sys_s: 0.0,
        loop_s: loop_ns as f64 / 1e9,
        migrations: analysis::classify(topo, mem_node, &moves),
        causes,
        residency_source: "simulator".into(),
        home_node: home,
        cpu_time: Some(crate::probe::record::CpuTime {
            source: "sim".into(),
            run_ns: r.run_ns_loop.iter().sum::<u64>().min(loop_ns),
            wait_ns: loop_ns.saturating_sub(r.run_ns_loop.iter().sum()),
            timeslices: None,
        }),
        sched: None,
    }
}
