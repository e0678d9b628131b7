//! `numalab home`: a preferred node without a patched kernel.
//!
//! The node-affine scheduler gave each task a homenode where its memory is
//! and re-attracted it there; the PNID patch (docs/preferred-node.md) lets
//! user space force the scheduler's preferred node. Both need a patched
//! kernel. This module gives the same behaviour from user space on any
//! kernel:
//! - memory: the command numalab starts gets MPOL_PREFERRED (or MPOL_BIND)
//!   on the homenode before it execs ([`launch`]); a running task's policy
//!   cannot be changed from outside (set_mempolicy acts on the caller), so
//!   for `--pid` only its existing pages can be moved (migrate_pages);
//! - CPU: soft affinity by an agent ([`agent`]) that narrows every thread's
//!   allowed CPUs to the homenode's, widens a thread that waits too long
//!   there, and narrows it back when the homenode has room
//!   ([`policy`], the thresholds and their defaults).
//!
//! Every mask change goes through the state guard: journaled before the
//! first change, restored on every exit path and by `numalab restore`.

pub mod agent;
pub mod launch;
pub mod observe;
pub mod policy;

pub use agent::{Agent, Counts, Placer};
pub use policy::Thresholds;

/// The default window between two measurements.
pub const DEFAULT_WINDOW_MS: u64 = 500;

/// The window under `run --pnid-via agent` and `jobs --home`: samples last
/// seconds, so the agent reacts within a few hundred ms.
pub const EXPERIMENT_WINDOW_MS: u64 = 200;

use crate::error::usage;
use crate::idset::IdSet;
use crate::topology::sysfs::SysRoot;
use crate::topology::Topology;
use std::time::Duration;

/// Whether `--pid PID` may be followed: not init (pid 1: it and its
/// descendants are nearly every task on the system), not a kernel thread
/// (no user memory, affinity the kernel manages; PF_KTHREAD, or a child of
/// kthreadd, pid 2), and running. Reads /proc through `sys`.
pub fn check_attachable(sys: &SysRoot, pid: i32) -> anyhow::Result<()> {
    if pid == 1 {
        return Err(usage(
            "--pid 1: that is init; following it and its descendants would take up nearly \
             every task on the system: give the pid of the workload",
        ));
    }
    let stat = sys
        .read(&format!("proc/{pid}/stat"))
        .map_err(|_| usage(format!("--pid: no process {pid} is running")))?;
    let (comm, ppid, kthread) = crate::sys::affinity::parse_stat_identity(&stat)
        .ok_or_else(|| usage(format!("--pid {pid}: unreadable /proc/{pid}/stat")))?;
    if kthread || ppid == 2 || pid == 2 {
        return Err(usage(format!(
            "--pid {pid} ({comm}) is a kernel thread: it has no user memory and the kernel \
             manages its CPUs; the agent homes user tasks only"
        )));
    }
    Ok(())
}

/// The CPUs of `node` a homed task may be narrowed to (online CPUs of the
/// node within numalab's own cpuset), or a usage error naming why none.
/// `opt` is the option the user gave the node with (`--node`, `--home`), so
/// the message blames what the user typed.
pub fn home_cpus(topo: &Topology, opt: &str, node: u32) -> anyhow::Result<IdSet> {
    let n = topo.node(node).ok_or_else(|| {
        usage(format!(
            "{opt} {node}: no such node (nodes: {})",
            topo.node_ids()
        ))
    })?;
    let cpus = n.cpus.intersection(&topo.allowed.cpus);
    if cpus.is_empty() {
        return Err(usage(format!(
            "{opt} {node}: the node has no CPUs this process may use (node CPUs {:?}, \
             allowed {})",
            n.cpus.to_string(),
            topo.allowed.cpus
        )));
    }
    Ok(cpus)
}

/// `--node auto`: samples /proc/stat over `sample` and picks the node
/// with the most spare CPU, then free memory ([`observe::choose_node`]).
/// Returns the node and what was measured.
pub fn auto_node(
    sys: &SysRoot,
    topo: &Topology,
    sample: Duration,
) -> anyhow::Result<(u32, Vec<observe::NodeRoom>)> {
    let a = observe::cpu_times(sys)?;
    std::thread::sleep(sample);
    let b = observe::cpu_times(sys)?;
    let rooms: Vec<observe::NodeRoom> = topo
        .node_ids()
        .iter()
        .filter_map(|n| {
            let cpus = home_cpus(topo, "--home", n).ok()?;
            Some(observe::NodeRoom {
                node: n,
                idle_cpus: observe::idle_cpus(&a, &b, &cpus),
                free_bytes: observe::node_free_bytes(sys, n)
                    .or(topo.node(n)?.mem_free_bytes)
                    .unwrap_or(0),
            })
        })
        .collect();
    let node = observe::choose_node(&rooms)
        .ok_or_else(|| usage("--node auto: no node has CPUs this process may use"))?;
    Ok((node, rooms))
}
