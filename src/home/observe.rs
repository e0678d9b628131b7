//! What the agent reads of the machine, all through [`SysRoot`] so tests
//! run on fixture trees: the task tree (`/proc/PID/task`, each thread's
//! `children`), run and wait times (`/proc/PID/task/TID/schedstat`), a
//! task's own CPUs (`Cpus_allowed_list` in its `status`), per-CPU idle time
//! (`/proc/stat`) and per-node free memory (`nodeN/meminfo`).

use crate::idset::IdSet;
use crate::load::procstat::{self, CpuTimes};
use crate::topology::sysfs::SysRoot;
use std::collections::BTreeMap;

/// Threads of process `pid` (empty when it is gone).
pub fn threads(sys: &SysRoot, pid: i32) -> Vec<i32> {
    sys.list(&format!("proc/{pid}/task"))
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Child processes thread `tid` of `pid` started (`children`, a kernel
/// with CONFIG_PROC_CHILDREN; `None` without that file).
pub fn children(sys: &SysRoot, pid: i32, tid: i32) -> Option<Vec<i32>> {
    let text = sys
        .read_opt(&format!("proc/{pid}/task/{tid}/children"))
        .ok()??;
    Some(
        text.split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect(),
    )
}

/// Thread `tid`'s run and wait times; `None` when it is gone.
pub fn schedstat(sys: &SysRoot, pid: i32, tid: i32) -> Option<(u64, u64)> {
    let text = sys
        .read_opt(&format!("proc/{pid}/task/{tid}/schedstat"))
        .ok()??;
    crate::analysis::schedstat::parse_task_schedstat(&text).map(|t| (t.run_ns, t.wait_ns))
}

/// The CPU thread `tid` last ran on (`stat` field 39); `None` when gone.
pub fn last_cpu(sys: &SysRoot, pid: i32, tid: i32) -> Option<u32> {
    let text = sys
        .read_opt(&format!("proc/{pid}/task/{tid}/stat"))
        .ok()??;
    crate::sys::affinity::parse_stat_cpu(&text)
}

/// Thread `tid`'s allowed CPUs (`Cpus_allowed_list`, which the user's
/// cpuset and any earlier sched_setaffinity shaped).
pub fn cpus_allowed(sys: &SysRoot, pid: i32, tid: i32) -> Option<IdSet> {
    let text = sys
        .read_opt(&format!("proc/{pid}/task/{tid}/status"))
        .ok()??;
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|v| IdSet::parse(v.trim()).ok())
}

/// Per-CPU busy and total time.
pub fn cpu_times(sys: &SysRoot) -> anyhow::Result<BTreeMap<u32, CpuTimes>> {
    Ok(procstat::parse(&sys.read("proc/stat")?))
}

/// Idle CPU capacity of `cpus` between two readings: the sum of their
/// idle shares (a CPU missing from either reading counts as busy).
pub fn idle_cpus(a: &BTreeMap<u32, CpuTimes>, b: &BTreeMap<u32, CpuTimes>, cpus: &IdSet) -> f64 {
    let busy = procstat::busy_percent(a, b);
    cpus.iter()
        .filter_map(|c| busy.get(&c))
        .map(|p| (100.0 - p).clamp(0.0, 100.0) / 100.0)
        .sum()
}

/// Each CPU's idle share (0..1) between two readings.
pub fn idle_shares(a: &BTreeMap<u32, CpuTimes>, b: &BTreeMap<u32, CpuTimes>) -> BTreeMap<u32, f64> {
    procstat::busy_percent(a, b)
        .into_iter()
        .map(|(c, p)| (c, ((100.0 - p) / 100.0).clamp(0.0, 1.0)))
        .collect()
}

/// The largest idle share among `cpus` (0 when none was measured).
pub fn idlest(shares: &BTreeMap<u32, f64>, cpus: &IdSet) -> f64 {
    cpus.iter()
        .filter_map(|c| shares.get(&c))
        .fold(0.0, |m: f64, x| m.max(*x))
}

/// The busy shares of `cpus` summed (CPUs' worth of busy time), and how
/// many of them were measured.
pub fn busy_cpus(shares: &BTreeMap<u32, f64>, cpus: &IdSet) -> (f64, f64) {
    cpus.iter()
        .filter_map(|c| shares.get(&c))
        .fold((0.0, 0.0), |(b, n), idle| (b + (1.0 - idle), n + 1.0))
}

/// Of `groups` (nodes' CPUs), the one least busy per CPU: its busy shares
/// summed and its measured CPUs; (0, 0) when none was measured.
pub fn least_busy(shares: &BTreeMap<u32, f64>, groups: &[IdSet]) -> (f64, f64) {
    groups
        .iter()
        .map(|g| busy_cpus(shares, g))
        .filter(|&(_, n)| n > 0.0)
        .min_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))
        .unwrap_or((0.0, 0.0))
}

/// Free memory of a node in bytes (`MemFree` of `nodeN/meminfo`).
pub fn node_free_bytes(sys: &SysRoot, node: u32) -> Option<u64> {
    let text = sys
        .read_opt(&format!("sys/devices/system/node/node{node}/meminfo"))
        .ok()??;
    text.lines().find_map(|l| {
        let (_, rest) = l.split_once("MemFree:")?;
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// A candidate homenode at start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeRoom {
    pub node: u32,
    /// Idle CPU capacity over the sampling window.
    pub idle_cpus: f64,
    pub free_bytes: u64,
}

/// `--node auto`: the node with the most spare CPU, then the most free
/// memory, as the node-affine scheduler's node_policy chose a homenode at
/// exec (the least loaded node). Spare CPU is compared in quarter CPUs so
/// measurement noise does not hide a real difference in free memory.
/// Ties: the lowest node id. `None` without candidates.
pub fn choose_node(rooms: &[NodeRoom]) -> Option<u32> {
    rooms
        .iter()
        .filter(|r| r.idle_cpus.is_finite())
        .max_by(|a, b| {
            let q = |r: &NodeRoom| (r.idle_cpus * 4.0).round() as i64;
            q(a).cmp(&q(b))
                .then(a.free_bytes.cmp(&b.free_bytes))
                .then(b.node.cmp(&a.node))
        })
        .map(|r| r.node)
}

/// Homenodes for `n` jobs started at once (`jobs --home auto`): each job
/// in turn gets the node with the most spare CPU left, counting the jobs
/// already given one as one busy CPU each; then free memory; then the
/// lowest id.
pub fn assign_homes(rooms: &[NodeRoom], n: usize) -> Vec<u32> {
    let mut left: Vec<NodeRoom> = rooms.to_vec();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let Some(node) = choose_node(&left) else {
            break;
        };
        out.push(node);
        if let Some(r) = left.iter_mut().find(|r| r.node == node) {
            r.idle_cpus -= 1.0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(node: u32, idle: f64, free_gb: u64) -> NodeRoom {
        NodeRoom {
            node,
            idle_cpus: idle,
            free_bytes: free_gb << 30,
        }
    }

    #[test]
    fn auto_takes_spare_cpu_then_free_memory_then_the_lowest_id() {
        assert_eq!(choose_node(&[room(0, 1.0, 8), room(1, 3.0, 1)]), Some(1));
        assert_eq!(choose_node(&[room(0, 2.0, 1), room(1, 2.05, 4)]), Some(1));
        assert_eq!(choose_node(&[room(0, 2.0, 4), room(1, 2.0, 4)]), Some(0));
        assert_eq!(choose_node(&[]), None);
    }

    #[test]
    fn jobs_spread_over_the_nodes_with_room() {
        let r = [
            room(0, 4.0, 8),
            room(1, 4.0, 8),
            room(2, 1.0, 8),
            room(3, 4.0, 8),
        ];
        let h = assign_homes(&r, 6);
        assert_eq!(h, vec![0, 1, 3, 0, 1, 3]);
        let h = assign_homes(&r, 12);
        for node in 0..4 {
            let k = h.iter().filter(|x| **x == node).count();
            assert!(if node == 2 { k == 0 || k == 1 } else { k >= 3 }, "{h:?}");
        }
        assert!(assign_homes(&[], 3).is_empty());
    }

    #[test]
    fn reads_a_fixture_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("proc/10/task/11");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::create_dir_all(tmp.path().join("proc/10/task/10")).unwrap();
        std::fs::write(t.join("schedstat"), "1500 250 7\n").unwrap();
        std::fs::write(t.join("children"), "20 21 ").unwrap();
        std::fs::write(t.join("status"), "Name:\tx\nCpus_allowed_list:\t0-2,5\n").unwrap();
        let n = tmp.path().join("sys/devices/system/node/node1");
        std::fs::create_dir_all(&n).unwrap();
        std::fs::write(
            n.join("meminfo"),
            "Node 1 MemTotal: 100 kB\nNode 1 MemFree:  64 kB\n",
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("proc/stat"),
            "cpu0 0 0 0 100 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\n",
        )
        .unwrap();
        let sys = SysRoot::new(tmp.path());
        assert_eq!(threads(&sys, 10), vec![10, 11]);
        assert_eq!(threads(&sys, 99), Vec::<i32>::new());
        assert_eq!(children(&sys, 10, 11), Some(vec![20, 21]));
        assert_eq!(children(&sys, 10, 10), None);
        assert_eq!(schedstat(&sys, 10, 11), Some((1500, 250)));
        assert_eq!(cpus_allowed(&sys, 10, 11).unwrap().to_string(), "0-2,5");
        assert_eq!(node_free_bytes(&sys, 1), Some(64 * 1024));
        let a = cpu_times(&sys).unwrap();
        let b = procstat::parse("cpu0 50 0 0 150 0 0 0 0\ncpu1 0 0 0 200 0 0 0 0\n");
        let idle = idle_cpus(&a, &b, &"0-1".parse().unwrap());
        assert!((idle - 1.5).abs() < 1e-9, "{idle}");
        let shares = idle_shares(&a, &b);
        assert!((idlest(&shares, &"0".parse().unwrap()) - 0.5).abs() < 1e-9);
        assert!((idlest(&shares, &"0-1".parse().unwrap()) - 1.0).abs() < 1e-9);
        assert_eq!(idlest(&shares, &"7".parse().unwrap()), 0.0);
    }
}
