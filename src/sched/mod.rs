//! numalab's node-affine scheduler on sched_ext: what it is told
//! ([`Options`] -> the BPF object's [`Config`]), whether this kernel can run
//! it ([`check`]), loading and unloading it ([`loader`]), and what it counted
//! ([`account`]).
//!
//! The scheduler itself is BPF C in the `numalab-sched-bpf` crate
//! (sched-bpf/src/bpf/numalab_sched.bpf.c), where each mechanism of the
//! node-affine scheduler document is named; docs/sched.md describes it.
//! This module is user space: it turns the machine's topology into the
//! document's pool arrays and the distance delays, and reads the maps.

pub mod account;
pub mod check;
pub mod loader;

use crate::topology::Topology;
pub use numalab_sched_bpf::{mech, policy, Config, MAX_CPUS, MAX_NODES};

/// When a task without an explicit homenode gets one (the document's
/// `node_policy`, plus `none`: only the tasks numalab homes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodePolicy {
    None,
    /// node_policy 0: at exec; forks inherit the parent's.
    Exec,
    /// node_policy 1: at fork, when the child has its own mm (a process).
    ForkMm,
    /// node_policy 2: at every fork, threads too.
    Fork,
}

impl NodePolicy {
    pub fn parse(s: &str) -> Result<NodePolicy, String> {
        Ok(match s {
            "none" => NodePolicy::None,
            "exec" | "0" => NodePolicy::Exec,
            "fork-mm" | "1" => NodePolicy::ForkMm,
            "fork" | "2" => NodePolicy::Fork,
            _ => {
                return Err(format!(
                    "{s:?}: a node policy is none, exec (0), fork-mm (1) or fork (2)"
                ))
            }
        })
    }

    fn code(self) -> u32 {
        match self {
            NodePolicy::None => policy::NONE,
            NodePolicy::Exec => policy::EXEC,
            NodePolicy::ForkMm => policy::FORK_MM,
            NodePolicy::Fork => policy::FORK,
        }
    }
}

/// The mechanisms, by the names `--off` takes.
pub const MECHANISMS: &[(&str, u32)] = &[
    ("place", mech::PLACE),
    ("queue", mech::QUEUE),
    ("reattract", mech::REATTRACT),
    ("steal-delay", mech::STEAL_DELAY),
];

/// Parses `--off`'s list into the bits left on.
pub fn mechanisms_without(off: &[String]) -> Result<u32, String> {
    let mut on = mech::ALL;
    for name in off {
        let Some((_, bit)) = MECHANISMS.iter().find(|(n, _)| n == name) else {
            return Err(format!(
                "{name:?}: the mechanisms are {}",
                MECHANISMS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        on &= !bit;
    }
    Ok(on)
}

/// The names of the mechanisms that are on.
pub fn mechanism_names(bits: u32) -> Vec<&'static str> {
    MECHANISMS
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect()
}

/// What the scheduler is told, in user terms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Options {
    pub node_policy: NodePolicy,
    /// [`mech`] bits.
    #[serde(serialize_with = "ser_mechanisms")]
    pub mechanisms: u32,
    /// The steal delay at SLIT distance 10 on an idle machine; distance d
    /// waits d/10 times it (the document: 2, 3, 4 ms at distances 10, 15,
    /// 20 under low load).
    pub steal_delay_ms: f64,
    /// The same when the machine is busy (as many runnable tasks as CPUs);
    /// between the two the delay grows with the load (the document: 132,
    /// 199, 265 ms at average load).
    pub steal_delay_busy_ms: f64,
    pub slice_ms: f64,
    /// Period of the scan that wakes thieves and calls runaways home;
    /// `None`: half the shortest steal delay, at least 0.5 ms.
    pub scan_ms: Option<f64>,
}

fn ser_mechanisms<S: serde::Serializer>(bits: &u32, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    mechanism_names(*bits).serialize(s)
}

impl Default for Options {
    fn default() -> Self {
        Options {
            node_policy: NodePolicy::None,
            mechanisms: mech::ALL,
            steal_delay_ms: 2.0,
            steal_delay_busy_ms: 132.0,
            slice_ms: 5.0,
            scan_ms: None,
        }
    }
}

impl Options {
    /// Range checks, before anything is loaded.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=10_000.0).contains(&self.steal_delay_ms) {
            return Err(format!(
                "--steal-delay {}: give 0 to 10000 ms",
                self.steal_delay_ms
            ));
        }
        if !(self.steal_delay_ms..=60_000.0).contains(&self.steal_delay_busy_ms) {
            return Err(format!(
                "--steal-delay-busy {}: give {} (the idle delay) to 60000 ms",
                self.steal_delay_busy_ms, self.steal_delay_ms
            ));
        }
        if !(0.05..=1000.0).contains(&self.slice_ms) {
            return Err(format!("--slice {}: give 0.05 to 1000 ms", self.slice_ms));
        }
        if let Some(s) = self.scan_ms {
            if !(0.1..=1000.0).contains(&s) {
                return Err(format!("--scan {s}: give 0.1 to 1000 ms"));
            }
        }
        Ok(())
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// The BPF object's configuration for this machine: the document's pool
/// arrays (node -> CPUs in compressed-row form), each CPU's node, the SLIT
/// distances, the steal delay for each pair of nodes and each node's other
/// nodes nearest first. Errors name what does not fit (too many CPUs or
/// nodes, a node id beyond the scheduler's range).
pub fn build_config(topo: &Topology, o: &Options) -> Result<Config, String> {
    let mut c: Config = bytemuck::Zeroable::zeroed();
    let max_node = topo.nodes.iter().map(|n| n.id).max().unwrap_or(0) as usize;
    if max_node >= MAX_NODES {
        return Err(format!(
            "this machine has node {max_node}; the scheduler handles node ids below {MAX_NODES}"
        ));
    }
    let online: Vec<(u32, u32)> = topo
        .cpus
        .iter()
        .filter(|c| c.online)
        .filter_map(|c| c.node.map(|n| (c.id, n)))
        .collect();
    let max_cpu = topo.cpus.iter().map(|c| c.id).max().unwrap_or(0) as usize;
    if max_cpu >= MAX_CPUS {
        return Err(format!(
            "this machine has CPU {max_cpu}; the scheduler handles CPU ids below {MAX_CPUS}"
        ));
    }
    if online.is_empty() {
        return Err("the topology has no online CPU with a node".into());
    }
    c.nr_cpus = max_cpu as u32 + 1;
    c.nr_online = online.len() as u32;
    c.nr_nodes = max_node as u32 + 1;
    c.node_policy = o.node_policy.code();
    c.mechanisms = o.mechanisms;
    c.slice_ns = ms_to_ns(o.slice_ms);
    c.cpu_node = [-1; MAX_CPUS];
    for &(cpu, node) in &online {
        c.cpu_node[cpu as usize] = node as i32;
    }
    // Compressed rows: node n's CPUs at node_cpus[node_first[n]..node_first[n+1]].
    let mut k = 0usize;
    for n in 0..c.nr_nodes {
        c.node_first[n as usize] = k as u32;
        for &(cpu, node) in &online {
            if node == n {
                c.node_cpus[k] = cpu as i32;
                k += 1;
            }
        }
    }
    c.node_first[c.nr_nodes as usize] = k as u32;
    // Distances, by node id (the topology orders them like its node list).
    for (i, a) in topo.nodes.iter().enumerate() {
        for (j, b) in topo.nodes.iter().enumerate() {
            let d = a
                .distances
                .get(j)
                .copied()
                .unwrap_or(if i == j { 10 } else { 20 });
            c.distance[a.id as usize][b.id as usize] = d;
        }
    }
    let base = ms_to_ns(o.steal_delay_ms);
    let busy = ms_to_ns(o.steal_delay_busy_ms);
    let mut shortest = u64::MAX;
    for from in 0..c.nr_nodes as usize {
        for to in 0..c.nr_nodes as usize {
            if from == to {
                continue;
            }
            let d = c.distance[from][to].max(10) as u64;
            let delay = base * d / 10;
            c.steal_delay_ns[from][to] = delay;
            c.steal_delay_busy_ns[from][to] = busy * d / 10;
            shortest = shortest.min(delay);
        }
    }
    for n in 0..c.nr_nodes as usize {
        let mut others: Vec<usize> = (0..c.nr_nodes as usize)
            .filter(|&m| m != n && c.node_first[m + 1] > c.node_first[m])
            .collect();
        others.sort_by_key(|&m| (c.distance[n][m], m));
        // Nodes without CPUs still get an entry (never taken: their queue is empty).
        let rest: Vec<usize> = (0..c.nr_nodes as usize)
            .filter(|&m| m != n && !others.contains(&m))
            .collect();
        for (i, m) in others.into_iter().chain(rest).enumerate() {
            c.steal_order[n][i] = m as u32;
        }
    }
    c.timer_ns = match o.scan_ms {
        Some(ms) => ms_to_ns(ms),
        None if shortest == u64::MAX || shortest == 0 => 1_000_000,
        None => (shortest / 2).max(500_000),
    };
    Ok(c)
}

/// Everything `run --pnid-via sched`, `jobs --home-cpu sched` and
/// `numalab sched` check before anything changes: this kernel and user can
/// load the scheduler now ([`check::can_load`]), and this machine fits it
/// ([`build_config`]). Err is the reason, for an exit-2 message.
pub fn preflight(
    sys: &crate::topology::sysfs::SysRoot,
    topo: &Topology,
    o: &Options,
) -> Result<Config, String> {
    let cfg = build_config(topo, o)?;
    let euid = rustix::process::geteuid().as_raw();
    check::can_load(sys, euid)?;
    Ok(cfg)
}

#[cfg(test)]
mod tests;
