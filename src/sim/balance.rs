//! The load balancer's decisions that do not depend on how the engine
//! keeps its runqueues, after kernel/sched/fair.c 6.12: the kinds of
//! attempt and how a move is counted, sibling_imbalance(),
//! migrate_degrades_locality() and task_hot() (both halves of
//! can_migrate_task()'s locality test), should_we_balance()'s choice of
//! CPU (as the tests state it), and NI_RANDOM's newly-idle counters. [`super::multi_lb`] makes the
//! attempts.

use super::groups::GroupStats;
use super::machine::LevelKind;
use crate::analysis::schedstat::BalanceKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// sched_balance_newidle(): failures do not count.
    NewlyIdle,
    /// Periodic balance of an idle CPU (nohz idle balance).
    Idle,
    /// Periodic balance of a busy CPU (at busy_factor times the interval).
    Busy,
}

impl From<Kind> for BalanceKind {
    fn from(k: Kind) -> BalanceKind {
        match k {
            Kind::NewlyIdle => BalanceKind::NewlyIdle,
            Kind::Idle => BalanceKind::Idle,
            Kind::Busy => BalanceKind::Busy,
        }
    }
}

/// How a balance attempt moved the probe, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// detach_tasks() pulled it (lb_gained).
    Pulled,
    /// Pulled although cache hot or leaving its preferred node, because
    /// the domain's failures passed cache_nice_tries (lb_hot_gained too).
    PulledHot,
    /// The active balancer pushed it while it ran (alb_pushed).
    Pushed,
}

/// sibling_imbalance(): tasks to move so nr_running per core evens out;
/// none for a puller that is not idle (`!env->idle`: a busy CPU leaves a
/// group that is not overloaded to an idle one).
pub fn sibling_imbalance(busiest: &GroupStats, local: &GroupStats, dst_idle: bool) -> i64 {
    if !dst_idle || busiest.nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.cores.max(1) as i64, local.cores.max(1) as i64);
    if nb == nl {
        return (busiest.nr_running as i64 - local.nr_running as i64).max(0);
    }
    let mut imb = (nl * busiest.nr_running as i64 - nb * local.nr_running as i64).max(0);
    imb = (2 * imb + nl + nb) / (nl + nb);
    if imb <= 1 && local.nr_running == 0 && busiest.nr_running > 1 {
        imb = 2;
    }
    imb
}

/// should_we_balance()'s CPU of group span `group`: its first idle CPU on
/// an idle core (any idle CPU at the SMT level), else its first idle CPU,
/// else its first CPU. The engine finds it from bit sets
/// ([`super::multi::IdleBits::balancer`]); this walk over the group's CPUs
/// is the tests' statement of the rule they are checked against.
#[cfg(test)]
pub fn group_balancer(
    m: &super::machine::Machine,
    group: usize,
    smt_level: bool,
    idle: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut idle_smt = None;
    for &c in m.span(group) {
        if !idle(c) {
            continue;
        }
        if !smt_level && !m.siblings[c].iter().all(|&s| idle(s)) {
            idle_smt.get_or_insert(c);
            continue;
        }
        return Some(c);
    }
    idle_smt.or_else(|| m.span(group).first().copied())
}

/// migrate_degrades_locality() for a task with NUMA state `numa` moving
/// from node `sn` to node `dn` (6.12's int convention: 1 degrades, 0
/// improves, -1 no opinion, then task_hot decides). `src_all_prefer`:
/// the source runqueue's nr_running equals its nr_preferred_running.
pub fn locality(
    numa: &super::numa::Numa,
    sn: usize,
    dn: usize,
    numa_domain: bool,
    kind: Kind,
    src_all_prefer: bool,
) -> i32 {
    if !numa_domain || !numa.has_opinion() || sn == dn {
        return -1;
    }
    let pref = numa.preferred;
    if pref == Some(sn) {
        return if src_all_prefer { -1 } else { 1 };
    }
    if pref == Some(dn) {
        return 0;
    }
    // Leaving a core idle is often worse than degrading locality.
    if kind == Kind::Idle {
        return -1;
    }
    (numa.faults_on(dn) < numa.faults_on(sn)) as i32
}

/// task_hot() for a task that last ran `waited_ns` ago, balanced at a
/// domain of kind `level`: never at the SMT level ("SMT siblings share
/// cache": SD_SHARE_CPUCAPACITY), otherwise while it waited less than
/// migration_cost_ns (-1: always hot, 0: never). The buddy and core-cookie
/// cases do not arise here (NEXT_BUDDY is off, no core scheduling).
pub fn task_hot(level: LevelKind, waited_ns: f64, migration_cost_ns: f64) -> bool {
    if level == LevelKind::Smt {
        return false;
    }
    if migration_cost_ns < 0.0 {
        return true;
    }
    waited_ns < migration_cost_ns
}

/// sched_domain's proportional-newidle counters (NI_RANDOM's
/// update_newidle_stats()), one set per CPU's copy of a domain, from
/// sd_init()'s values: each sample starts from a domain just built, as
/// the kernel's counters carry no history the model could know.
#[derive(Debug, Clone, Copy)]
pub struct NewIdleStats {
    calls: u32,
    pub success: u32,
    pub ratio: u32,
}

impl Default for NewIdleStats {
    fn default() -> Self {
        // sd_init()'s starting values.
        NewIdleStats {
            calls: 512,
            success: 256,
            ratio: 512,
        }
    }
}

impl NewIdleStats {
    /// Calls counted (halved every 1024).
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// One more call with `success` weighted pulls; every 1024 calls the
    /// ratio is the success count, and both are halved.
    pub fn calls_plus(&mut self, success: u32) {
        self.calls += 1;
        self.success += success;
        if self.calls >= 1024 {
            self.ratio = self.success;
            self.calls /= 2;
            self.success /= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(weight: usize, cores: usize, nr: usize, idle: usize) -> GroupStats {
        GroupStats::new(weight, cores, nr, idle)
    }

    #[test]
    fn sibling_imbalance_normalises_by_cores() {
        // (2 x (4x4 - 2x2) + 4 + 2) / (4 + 2), as the kernel rounds it.
        assert_eq!(sibling_imbalance(&g(4, 2, 4, 0), &g(8, 4, 2, 6), true), 5);
        assert_eq!(sibling_imbalance(&g(2, 1, 2, 0), &g(2, 1, 0, 2), true), 2);
    }
}
