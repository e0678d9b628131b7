//! The load balancer's own account of itself, from `/proc/schedstat`
//! (CONFIG_SCHEDSTATS; it counts only while `kernel.sched_schedstats` is 1).
//!
//! `show_schedstat()` in kernel/sched/stats.c writes a `version N` line, a
//! `timestamp` line, then per CPU a `cpuN ...` line followed by one line per
//! sched domain of that CPU, lowest level first:
//!
//! ```text
//! domain1 f 37 36 1 393 0 0 0 6 2 2 0 0 0 0 0 0 13 13 0 0 0 0 0 13 0 ...
//! ```
//!
//! After the domain's span (a hex CPU mask) come eight sched_balance_rq()
//! counters for each of the three kinds of balancing, then active
//! balancing, two unused exec/fork groups and three wake-up counters:
//! `lb_count lb_balanced lb_failed lb_imbalance lb_gained lb_hot_gained
//! lb_nobusyq lb_nobusyg` (x3), `alb_count alb_failed alb_pushed`,
//! `sbe_count sbe_balanced sbe_pushed sbf_count sbf_balanced sbf_pushed`,
//! `ttwu_wake_remote ttwu_move_affine ttwu_move_balance`.
//!
//! The three kinds come in `enum cpu_idle_type` order, which version 16
//! (Linux 6.6) changed: version 15 has idle, busy, newly idle; version 16
//! busy, idle, newly idle (Documentation/scheduler/sched-stats.rst). Version
//! 17 splits `lb_imbalance` in four and names each domain; it and any other
//! version are refused by name rather than misread.
//!
//! Why this matters to numalab: `lb_hot_gained` counts tasks pulled although
//! cache hot, which for a task leaving its preferred node means
//! migrate_degrades_locality() said "bad" and the domain's failures had
//! passed cache_nice_tries; `alb_pushed` counts active balancing, which
//! skips that test altogether. The trace sees only that a task moved.

use crate::idset::IdSet;
use std::collections::BTreeMap;

/// How a balance attempt was started (`enum cpu_idle_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BalanceKind {
    /// Periodic balancing by a CPU with a task running (`__CPU_NOT_IDLE`).
    Busy,
    /// Periodic balancing by an idle CPU, nohz balancing included.
    Idle,
    /// A CPU about to go idle.
    NewlyIdle,
}

impl BalanceKind {
    pub const ALL: [BalanceKind; 3] =
        [BalanceKind::Busy, BalanceKind::Idle, BalanceKind::NewlyIdle];

    pub fn name(self) -> &'static str {
        match self {
            BalanceKind::Busy => "busy",
            BalanceKind::Idle => "idle",
            BalanceKind::NewlyIdle => "newly idle",
        }
    }
}

/// sched_balance_rq()'s counters for one kind of balancing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LbCounters {
    /// Attempts.
    pub count: u64,
    /// Attempts that found nothing to do (or every task pinned).
    pub balanced: u64,
    /// Attempts that wanted to move and moved nothing.
    pub failed: u64,
    /// The imbalances found, summed (units depend on the migration type).
    pub imbalance: u64,
    /// Tasks pulled.
    pub gained: u64,
    /// Tasks pulled although cache hot (or leaving their preferred node).
    pub hot_gained: u64,
    /// A busiest group but no busiest runqueue in it.
    pub nobusyq: u64,
    /// No busiest group.
    pub nobusyg: u64,
}

impl LbCounters {
    fn from_fields(f: &[u64]) -> Self {
        LbCounters {
            count: f[0],
            balanced: f[1],
            failed: f[2],
            imbalance: f[3],
            gained: f[4],
            hot_gained: f[5],
            nobusyq: f[6],
            nobusyg: f[7],
        }
    }

    fn fields(&self) -> [u64; 8] {
        [
            self.count,
            self.balanced,
            self.failed,
            self.imbalance,
            self.gained,
            self.hot_gained,
            self.nobusyq,
            self.nobusyg,
        ]
    }
}

/// The counters of one domain of one CPU, or their sum over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// By [`BalanceKind`] in [`BalanceKind::ALL`] order.
    pub lb: [LbCounters; 3],
    pub alb_count: u64,
    pub alb_failed: u64,
    pub alb_pushed: u64,
    pub ttwu_wake_remote: u64,
    pub ttwu_move_affine: u64,
    pub ttwu_move_balance: u64,
}

impl Counters {
    pub fn lb(&self, kind: BalanceKind) -> &LbCounters {
        &self.lb[kind as usize]
    }

    /// Every counter, in one fixed order.
    fn fields(&self) -> [u64; 30] {
        let mut v = [0; 30];
        for (k, c) in self.lb.iter().enumerate() {
            v[8 * k..8 * k + 8].copy_from_slice(&c.fields());
        }
        v[24..].copy_from_slice(&[
            self.alb_count,
            self.alb_failed,
            self.alb_pushed,
            self.ttwu_wake_remote,
            self.ttwu_move_affine,
            self.ttwu_move_balance,
        ]);
        v
    }

    fn from_fields(f: &[u64; 30]) -> Counters {
        let lb = |k: usize| LbCounters::from_fields(&f[8 * k..8 * k + 8]);
        Counters {
            lb: [lb(0), lb(1), lb(2)],
            alb_count: f[24],
            alb_failed: f[25],
            alb_pushed: f[26],
            ttwu_wake_remote: f[27],
            ttwu_move_affine: f[28],
            ttwu_move_balance: f[29],
        }
    }

    /// Tasks moved at this level by any balancing: pulled or pushed (an
    /// active push is in `lb_gained` too, as an idle CPU's: the stopper
    /// balances with `.idle = CPU_IDLE`).
    pub fn moved(&self) -> u64 {
        self.lb.iter().map(|c| c.gained).sum::<u64>()
    }
}

/// One CPU's counters for one of its domains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainStats {
    pub cpu: u32,
    /// 0 for the CPU's lowest domain.
    pub level: usize,
    pub span: IdSet,
    pub counters: Counters,
}

/// A parsed `/proc/schedstat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedstat {
    pub version: u32,
    /// Jiffies when it was written.
    pub timestamp: u64,
    pub domains: Vec<DomainStats>,
}

/// Counters per domain field after the span.
const DOMAIN_FIELDS: usize = 36;

/// Parses the text of `/proc/schedstat`.
pub fn parse(text: &str) -> Result<Schedstat, String> {
    let mut lines = text.lines();
    let version = lines
        .next()
        .and_then(|l| l.strip_prefix("version "))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or("no `version N` first line")?;
    // Where the busy, idle and newly-idle columns are.
    let order: [usize; 3] = match version {
        15 => [1, 0, 2],
        16 => [0, 1, 2],
        v => {
            return Err(format!(
                "schedstat version {v}: only versions 15 and 16 (Linux 2.6.x-6.12) are understood"
            ))
        }
    };
    let timestamp = lines
        .next()
        .and_then(|l| l.strip_prefix("timestamp "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or("no `timestamp N` second line")?;
    let mut domains = Vec::new();
    let mut cpu: Option<u32> = None;
    for (n, line) in lines.enumerate() {
        let bad = |why: &str| format!("line {}: {why}: {line:?}", n + 3);
        let mut w = line.split_whitespace();
        let Some(head) = w.next() else { continue };
        if let Some(c) = head.strip_prefix("cpu") {
            cpu = Some(c.parse().map_err(|_| bad("bad CPU number"))?);
        } else if let Some(level) = head.strip_prefix("domain") {
            let cpu = cpu.ok_or_else(|| bad("a domain before any CPU"))?;
            let level: usize = level.parse().map_err(|_| bad("bad domain number"))?;
            let span = hex_mask(w.next().ok_or_else(|| bad("no CPU mask"))?)
                .ok_or_else(|| bad("bad CPU mask"))?;
            let f: Vec<u64> = w
                .map(|x| x.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad("a counter that is not a number"))?;
            if f.len() != DOMAIN_FIELDS {
                return Err(bad(&format!(
                    "{} counters, version {version} has {DOMAIN_FIELDS}",
                    f.len()
                )));
            }
            // The 30 kept counters in `Counters::fields` order: the three
            // kinds of balancing in BalanceKind order, then active balancing
            // (24-26) and the wake-up counters (33-35; 27-32 are the
            // unused exec/fork groups).
            let mut kept = [0u64; 30];
            for (k, &col) in order.iter().enumerate() {
                kept[8 * k..8 * k + 8].copy_from_slice(&f[8 * col..8 * col + 8]);
            }
            kept[24..27].copy_from_slice(&f[24..27]);
            kept[27..30].copy_from_slice(&f[33..36]);
            domains.push(DomainStats {
                cpu,
                level,
                span,
                counters: Counters::from_fields(&kept),
            });
        }
    }
    if domains.is_empty() {
        return Err("no domain lines (a kernel without CONFIG_SMP?)".into());
    }
    Ok(Schedstat {
        version,
        timestamp,
        domains,
    })
}

/// A `%*pb` CPU mask: hex, most significant 32-bit group first, groups
/// separated by commas.
fn hex_mask(s: &str) -> Option<IdSet> {
    let mut set = IdSet::new();
    let groups: Vec<&str> = s.split(',').collect();
    for (i, g) in groups.iter().rev().enumerate() {
        let v = u32::from_str_radix(g, 16).ok()?;
        for b in 0..32 {
            if v >> b & 1 == 1 {
                set.insert(i as u32 * 32 + b);
            }
        }
    }
    Some(set)
}

/// The counters' growth from `before` to `after`, per (CPU, level). The two
/// must come from one boot with the same domains: a CPU hotplug or a
/// rebuilt domain tree in between is an error, not a difference.
pub fn delta(before: &Schedstat, after: &Schedstat) -> Result<Vec<DomainStats>, String> {
    if before.version != after.version || before.domains.len() != after.domains.len() {
        return Err("the sched domains changed between the two readings".into());
    }
    before
        .domains
        .iter()
        .zip(&after.domains)
        .map(|(b, a)| {
            if (b.cpu, b.level, &b.span) != (a.cpu, a.level, &a.span) {
                return Err(format!(
                    "the sched domains changed between the two readings (CPU {} domain{})",
                    a.cpu, a.level
                ));
            }
            let mut f = [0u64; 30];
            for ((d, x), y) in f
                .iter_mut()
                .zip(b.counters.fields())
                .zip(a.counters.fields())
            {
                *d = y.checked_sub(x).ok_or_else(|| {
                    format!("a counter went back (CPU {} domain{})", a.cpu, a.level)
                })?;
            }
            Ok(DomainStats {
                counters: Counters::from_fields(&f),
                ..a.clone()
            })
        })
        .collect()
}

/// A domain level's span sizes, in CPUs and in nodes: the distinct counts
/// met, ascending. Built the same way from /proc/schedstat ([`by_level`])
/// and from the simulator's domains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans {
    pub cpus: Vec<usize>,
    /// Empty when no CPU's node was known. A level whose spans all hold two
    /// or more moves tasks between nodes: its groups are the level below's
    /// spans, each within a node or a set of nodes.
    pub nodes: Vec<usize>,
}

impl Spans {
    /// Notes one span of `cpus` CPUs on `nodes` nodes (0: not known).
    pub fn note(&mut self, cpus: usize, nodes: usize) {
        if !self.cpus.contains(&cpus) {
            self.cpus.push(cpus);
        }
        if nodes > 0 && !self.nodes.contains(&nodes) {
            self.nodes.push(nodes);
        }
    }

    /// Both lists ascending, once every span is noted.
    pub fn sort(&mut self) {
        self.cpus.sort_unstable();
        self.nodes.sort_unstable();
    }
}

/// The counters of every CPU's domain at one level added up, with the
/// sizes of the spans seen there (one size on a symmetric machine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelTotals {
    pub level: usize,
    pub spans: Spans,
    pub counters: Counters,
}

/// Sums `domains` per level, lowest first; `node_of` gives a CPU's node.
pub fn by_level(domains: &[DomainStats], node_of: impl Fn(u32) -> Option<u32>) -> Vec<LevelTotals> {
    let mut out: BTreeMap<usize, (Spans, [u64; 30])> = BTreeMap::new();
    for d in domains {
        let (spans, sum) = out
            .entry(d.level)
            .or_insert_with(|| (Spans::default(), [0; 30]));
        let nodes: std::collections::BTreeSet<u32> = d.span.iter().filter_map(&node_of).collect();
        spans.note(d.span.len(), nodes.len());
        for (s, x) in sum.iter_mut().zip(d.counters.fields()) {
            *s += x;
        }
    }
    out.into_iter()
        .map(|(level, (mut spans, sum))| {
            spans.sort();
            LevelTotals {
                level,
                spans,
                counters: Counters::from_fields(&sum),
            }
        })
        .collect()
}

/// One task's own line, `/proc/PID[/task/TID]/schedstat` (CONFIG_SCHED_INFO):
/// `proc_pid_schedstat()` in fs/proc/base.c prints `sum_exec_runtime`,
/// `run_delay` and `pcount`, cumulative over the task's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSchedstat {
    /// Time on a CPU, ns.
    pub run_ns: u64,
    /// Time runnable on a runqueue but not running, ns.
    pub wait_ns: u64,
    /// Times the task was put on a CPU.
    pub timeslices: u64,
}

/// `"<run_ns> <wait_ns> <timeslices>\n"`; `None` for anything else.
pub fn parse_task_schedstat(text: &str) -> Option<TaskSchedstat> {
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>());
    let t = TaskSchedstat {
        run_ns: it.next()?.ok()?,
        wait_ns: it.next()?.ok()?,
        timeslices: it.next()?.ok()?,
    };
    it.next().is_none().then_some(t)
}

#[cfg(test)]
#[path = "schedstat_tests.rs"]
mod tests;
