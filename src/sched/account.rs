//! The scheduler's own account, as numalab reports it: per node and per
//! homed task, how much of the time tasks ran on their homenode, how often
//! they were placed on an idle home CPU, queued at home, called back
//! (re-attraction) and taken by another node (steals, by distance), and
//! their queueing delay. Built from the BPF maps' raw counters
//! ([`numalab_sched_bpf`]), printed as tables and written as JSON
//! (docs/sched-schema.md, schema `numalab-sched/1`).

use crate::table::{num, Table};
use numalab_sched_bpf::{c_str, NodeAcct, Stats, TaskAcct};
use serde::{Deserialize, Serialize};

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
    /// Of `stolen_from`: taken before their own wait reached the steal
    /// delay, because this node had been backlogged that long.
    pub stolen_backlog: u64,
    /// Slices a runaway homed here went on running where it was, as a guest.
    pub guest_kept: u64,
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
    pub stolen_backlog: u64,
    pub guest_kept: u64,
    /// Times it waited in a queue, their mean and longest wait.
    pub waits: u64,
    pub wait_mean_ms: Option<f64>,
    pub wait_max_ms: f64,
}

/// A steal count at one SLIT distance.
#[derive(Debug, Clone, Serialize)]
pub struct Steals {
    pub distance: u32,
    pub count: u64,
}

/// One process's threads under the scheduler, summed: what a run's sample
/// records of its probe (`run --pnid-via sched`; docs/run-schema.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessAccount {
    pub home: i32,
    pub threads: u32,
    pub ran_ms: f64,
    pub on_home_pct: Option<f64>,
    pub runs: u64,
    pub runs_home: u64,
    pub placed_idle: u64,
    /// Times another node took one of its threads from the home queue, and
    /// of those, the ones its home's backlog allowed before the thread's
    /// own wait reached the steal delay.
    pub stolen: u64,
    pub stolen_backlog: u64,
    /// Slices it went on running away from home as a guest.
    pub guest_kept: u64,
    /// Times it came back home after running away.
    pub reattracted: u64,
    pub wait_mean_ms: Option<f64>,
    pub wait_max_ms: f64,
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
                stolen_backlog: a.stolen_backlog,
                guest_kept: a.guest_kept,
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
                    stolen_backlog: t.stolen_backlog,
                    guest_kept: t.guest_kept,
                    waits: t.waits,
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

    /// The account of one process's threads (a run's probe), summed; None
    /// when none of them ran homed.
    pub fn of_process(&self, tgid: u32) -> Option<ProcessAccount> {
        let mine: Vec<&TaskReport> = self
            .tasks
            .iter()
            .filter(|t| t.tgid as i64 == tgid as i64)
            .collect();
        let first = mine.first()?;
        let sum = |f: fn(&TaskReport) -> u64| mine.iter().map(|t| f(t)).sum::<u64>();
        let (ran, home) = mine.iter().fold((0.0, 0.0), |(r, h), t| {
            let here = usize::try_from(t.home)
                .ok()
                .and_then(|h| t.node_ms.get(h))
                .copied()
                .unwrap_or(0.0);
            (r + t.node_ms.iter().sum::<f64>(), h + here)
        });
        let waits: Vec<(f64, u64)> = mine
            .iter()
            .filter_map(|t| t.wait_mean_ms.map(|m| (m, t.waits)))
            .collect();
        let wait_n: u64 = waits.iter().map(|w| w.1).sum();
        Some(ProcessAccount {
            home: first.home,
            threads: mine.len() as u32,
            ran_ms: ran,
            on_home_pct: (ran > 0.0).then(|| home * 100.0 / ran),
            runs: sum(|t| t.runs),
            runs_home: sum(|t| t.runs_home),
            placed_idle: sum(|t| t.placed_idle),
            stolen: sum(|t| t.stolen),
            stolen_backlog: sum(|t| t.stolen_backlog),
            guest_kept: sum(|t| t.guest_kept),
            reattracted: sum(|t| t.reattracted),
            wait_mean_ms: (wait_n > 0)
                .then(|| waits.iter().map(|(m, n)| m * *n as f64).sum::<f64>() / wait_n as f64),
            wait_max_ms: mine.iter().map(|t| t.wait_max_ms).fold(0.0, f64::max),
        })
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
            .right("backlog")
            .right("kept away")
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
                n.stolen_backlog.to_string(),
                n.guest_kept.to_string(),
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
            .right("backlog")
            .right("kept away")
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
                k.stolen_backlog.to_string(),
                k.guest_kept.to_string(),
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

    #[test]
    fn a_process_account_sums_its_threads_and_only_its_threads() {
        let mut a1 = task(1, &[100, 900]);
        a1.stolen = 2;
        a1.stolen_backlog = 1;
        a1.runs = 10;
        let mut a2 = task(1, &[0, 1000]);
        a2.waits = 6;
        a2.wait_ns = 6_000_000;
        a2.wait_max_ns = 4_000_000;
        let mut other = task(1, &[1000, 0]);
        other.tgid = 8;
        let a = Account::new(
            vec![NodeAcct::default(), NodeAcct::default()],
            vec![(11, a1), (12, a2), (13, other)],
            &Stats::zeroed(),
        );
        let p = a.of_process(7).expect("two threads of 7");
        assert_eq!(p.threads, 2);
        assert_eq!(p.home, 1);
        assert!(
            (p.on_home_pct.unwrap() - 95.0).abs() < 1e-9,
            "1900 of 2000 ns at home"
        );
        assert_eq!((p.stolen, p.stolen_backlog, p.runs), (2, 1, 10));
        // 2 waits of 1.5 ms and 6 of 1 ms: 1.125 ms each on average.
        assert!(
            (p.wait_mean_ms.unwrap() - 1.125).abs() < 1e-9,
            "{:?}",
            p.wait_mean_ms
        );
        assert_eq!(p.wait_max_ms, 4.0);
        assert!(a.of_process(9).is_none());
    }
}
