//! The scheduler's own account, as numalab reports it: per node and per
//! homed task, how much of the time tasks ran on their homenode, how often
//! they were placed on an idle home CPU, queued at home, called back
//! (re-attraction) and taken by another node (steals, by distance), and
//! their queueing delay. Built from the BPF maps' raw counters
//! ([`numalab_sched_bpf`]), printed as tables and written as JSON
//! (docs/sched-schema.md, schema `numalab-sched/1`).

use crate::table::{num, Table};
use numalab_sched_bpf::{c_str, NodeAcct, Stats, TaskAcct};
use serde::Serialize;

pub const SCHEMA: &str = "numalab-sched/1";

/// Why sched_ext stopped the scheduler (`struct scx_exit_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    /// `enum scx_exit_kind`: 64 unregistered by user space (numalab's own
    /// unload), 1024 and up errors (1026: the watchdog found a stall).
    pub kind: u64,
    pub code: i64,
    pub reason: String,
    pub message: String,
}

impl ExitInfo {
    /// Whether it stopped on an error rather than being unloaded.
    pub fn is_error(&self) -> bool {
        self.kind >= 1024
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn pct(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

/// One node's account.
#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    pub node: u32,
    /// Tasks homed here: time running here, and elsewhere.
    pub home_ms: f64,
    pub away_ms: f64,
    /// Share of the time tasks homed here ran here.
    pub on_home_pct: Option<f64>,
    /// Tasks homed elsewhere running here, and tasks without a homenode.
    pub guest_ms: f64,
    pub free_ms: f64,
    pub runs_home: u64,
    pub runs_away: u64,
    pub placed_idle: u64,
    pub queued_home: u64,
    pub reattract_kicks: u64,
    pub reattracted: u64,
    pub stolen_from: u64,
    pub stole: u64,
    pub stole_free: u64,
    pub wait_mean_ms: Option<f64>,
    pub wait_max_ms: f64,
    pub homed_at_exec: u64,
    pub homed_at_fork: u64,
}

/// One homed thread's account.
#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub tid: u32,
    pub tgid: i32,
    pub comm: String,
    pub home: i32,
    /// Time running on each node, by node id.
    pub node_ms: Vec<f64>,
    pub on_home_pct: Option<f64>,
    pub runs: u64,
    pub runs_home: u64,
    pub placed_idle: u64,
    pub reattracted: u64,
    pub stolen: u64,
    pub wait_mean_ms: Option<f64>,
    pub wait_max_ms: f64,
}

/// A steal count at one SLIT distance.
#[derive(Debug, Clone, Serialize)]
pub struct Steals {
    pub distance: u32,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Account {
    pub nodes: Vec<NodeReport>,
    pub tasks: Vec<TaskReport>,
    pub steals_by_distance: Vec<Steals>,
    /// Homed threads beyond the task map's room (their node totals count).
    pub tasks_untracked: u64,
    pub scan_runs: u64,
}

impl Account {
    pub fn new(nodes: Vec<NodeAcct>, tasks: Vec<(u32, TaskAcct)>, stats: &Stats) -> Account {
        let nr = nodes.len();
        let nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, a)| NodeReport {
                node: i as u32,
                home_ms: ms(a.home_ns),
                away_ms: ms(a.away_ns),
                on_home_pct: pct(a.home_ns, a.home_ns + a.away_ns),
                guest_ms: ms(a.guest_ns),
                free_ms: ms(a.free_ns),
                runs_home: a.runs_home,
                runs_away: a.runs_away,
                placed_idle: a.placed_idle,
                queued_home: a.queued_home,
                reattract_kicks: a.reattract_kicks,
                reattracted: a.reattracted,
                stolen_from: a.stolen_from,
                stole: a.stole,
                stole_free: a.stole_free,
                wait_mean_ms: (a.waits > 0).then(|| ms(a.wait_ns) / a.waits as f64),
                wait_max_ms: ms(a.wait_max_ns),
                homed_at_exec: a.homed_at_exec,
                homed_at_fork: a.homed_at_fork,
            })
            .collect();
        let mut tasks: Vec<TaskReport> = tasks
            .into_iter()
            .map(|(tid, t)| {
                let total: u64 = t.node_ns[..nr].iter().sum();
                let home = usize::try_from(t.home).ok().filter(|&h| h < nr);
                TaskReport {
                    tid,
                    tgid: t.tgid,
                    comm: c_str(&t.comm),
                    home: t.home,
                    node_ms: t.node_ns[..nr].iter().map(|&n| ms(n)).collect(),
                    on_home_pct: home.and_then(|h| pct(t.node_ns[h], total)),
                    runs: t.runs,
                    runs_home: t.runs_home,
                    placed_idle: t.placed_idle,
                    reattracted: t.reattracted,
                    stolen: t.stolen,
                    wait_mean_ms: (t.waits > 0).then(|| ms(t.wait_ns) / t.waits as f64),
                    wait_max_ms: ms(t.wait_max_ns),
                }
            })
            .collect();
        tasks.sort_by_key(|t| (t.tgid, t.tid));
        let steals_by_distance = stats
            .steals_by_distance
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(d, &c)| Steals {
                distance: d as u32,
                count: c,
            })
            .collect();
        Account {
            nodes,
            tasks,
            steals_by_distance,
            tasks_untracked: stats.tasks_untracked,
            scan_runs: stats.timer_runs,
        }
    }

    /// Homed threads that ran at all, and those of them that spent at least
    /// `share` percent of their running time on one node.
    pub fn tasks_on_one_node(&self, share: f64) -> (usize, usize) {
        let ran: Vec<&TaskReport> = self
            .tasks
            .iter()
            .filter(|t| t.node_ms.iter().sum::<f64>() > 0.0)
            .collect();
        let kept = ran
            .iter()
            .filter(|t| {
                let total: f64 = t.node_ms.iter().sum();
                t.node_ms.iter().any(|&m| m * 100.0 >= share * total)
            })
            .count();
        (ran.len(), kept)
    }

    /// "distance: count" of each distance steals happened at.
    pub fn steals_text(&self) -> String {
        self.steals_by_distance
            .iter()
            .map(|s| format!("{}: {}", s.distance, s.count))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One line of what the scheduler did: homed threads and their time at
    /// home, placements, steals (by distance), call-backs and returns.
    pub fn summary(&self) -> String {
        let sum = |f: fn(&NodeReport) -> u64| self.nodes.iter().map(f).sum::<u64>();
        let (home, away) = self
            .nodes
            .iter()
            .fold((0.0, 0.0), |(h, w), n| (h + n.home_ms, w + n.away_ms));
        let (ran, kept) = self.tasks_on_one_node(95.0);
        format!(
            "{} homed threads, {:.1}% of their time on their homenode, {kept} of {ran} \
             >= 95% on one node; {} placed on an idle home CPU, {} queued at home, {} stolen{}, \
             {} called back, {} came back",
            self.tasks.len(),
            if home + away > 0.0 {
                home * 100.0 / (home + away)
            } else {
                0.0
            },
            sum(|n| n.placed_idle),
            sum(|n| n.queued_home),
            sum(|n| n.stolen_from),
            if self.steals_by_distance.is_empty() {
                String::new()
            } else {
                format!(" (by distance {})", self.steals_text())
            },
            sum(|n| n.reattract_kicks),
            sum(|n| n.reattracted),
        )
    }

    /// The per-node table.
    pub fn node_table(&self) -> Table {
        let mut t = Table::new()
            .right("node")
            .right("on home %")
            .right("home ms")
            .right("away ms")
            .right("guest ms")
            .right("free ms")
            .bar()
            .right("placed idle")
            .right("queued")
            .right("called back")
            .right("came back")
            .right("stolen")
            .right("stole")
            .bar()
            .right("wait mean ms")
            .right("wait max ms");
        for n in &self.nodes {
            t.row(vec![
                n.node.to_string(),
                num(n.on_home_pct, 1, "-"),
                format!("{:.1}", n.home_ms),
                format!("{:.1}", n.away_ms),
                format!("{:.1}", n.guest_ms),
                format!("{:.1}", n.free_ms),
                n.placed_idle.to_string(),
                n.queued_home.to_string(),
                n.reattract_kicks.to_string(),
                n.reattracted.to_string(),
                n.stolen_from.to_string(),
                (n.stole + n.stole_free).to_string(),
                num(n.wait_mean_ms, 3, "-"),
                format!("{:.3}", n.wait_max_ms),
            ]);
        }
        t
    }

    /// The per-task table, at most `limit` rows (the longest-running first).
    pub fn task_table(&self, limit: usize) -> Table {
        let mut t = Table::new()
            .right("tid")
            .left("comm")
            .right("home")
            .right("on home %")
            .right("ran ms")
            .right("runs")
            .right("came back")
            .right("stolen")
            .right("wait mean ms");
        let mut v: Vec<&TaskReport> = self.tasks.iter().collect();
        v.sort_by(|a, b| {
            let (x, y): (f64, f64) = (a.node_ms.iter().sum(), b.node_ms.iter().sum());
            y.total_cmp(&x).then(a.tid.cmp(&b.tid))
        });
        for k in v.into_iter().take(limit) {
            t.row(vec![
                k.tid.to_string(),
                k.comm.clone(),
                k.home.to_string(),
                num(k.on_home_pct, 1, "-"),
                format!("{:.1}", k.node_ms.iter().sum::<f64>()),
                k.runs.to_string(),
                k.reattracted.to_string(),
                k.stolen.to_string(),
                num(k.wait_mean_ms, 3, "-"),
            ]);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    fn task(home: i32, node_ns: &[u64]) -> TaskAcct {
        let mut t = TaskAcct::zeroed();
        t.home = home;
        t.tgid = 7;
        t.comm[..4].copy_from_slice(b"job\0");
        t.node_ns[..node_ns.len()].copy_from_slice(node_ns);
        t.waits = 2;
        t.wait_ns = 3_000_000;
        t
    }

    #[test]
    fn shares_and_means_come_from_the_raw_counters() {
        let mut stats = Stats::zeroed();
        stats.steals_by_distance[20] = 3;
        let n0 = NodeAcct {
            home_ns: 900,
            away_ns: 100,
            waits: 0,
            ..Default::default()
        };
        let a = Account::new(
            vec![n0, NodeAcct::default()],
            vec![(11, task(0, &[950, 50])), (12, task(1, &[500, 500]))],
            &stats,
        );
        assert_eq!(a.nodes[0].on_home_pct, Some(90.0));
        assert_eq!(a.nodes[1].on_home_pct, None, "nothing homed there ran");
        assert_eq!(a.nodes[0].wait_mean_ms, None);
        assert_eq!(a.tasks[0].comm, "job");
        assert_eq!(a.tasks[0].on_home_pct, Some(95.0));
        assert_eq!(a.tasks[0].wait_mean_ms, Some(1.5));
        assert_eq!(a.steals_by_distance.len(), 1);
        assert_eq!(a.steals_by_distance[0].distance, 20);
        // One of the two spent 95% on one node.
        assert_eq!(a.tasks_on_one_node(95.0), (2, 1));
        assert_eq!(a.tasks_on_one_node(50.0), (2, 2));
        let line = a.summary();
        assert!(
            line.starts_with("2 homed threads, 90.0% of their time on their homenode, 1 of 2"),
            "{line}"
        );
        assert!(line.contains("0 stolen (by distance 20: 3)"), "{line}");
    }
}
