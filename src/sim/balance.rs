//! Load balancing decisions for the probe, after kernel/sched/fair.c 6.12:
//! update_sg_lb_stats / group_classify for the two groups that matter (the
//! puller's and the probe's), find_busiest_group's early exits,
//! calculate_imbalance with sibling_imbalance and adjust_numa_imbalance,
//! can_migrate_task with task_hot and migrate_degrades_locality, and the
//! nohz idle balancer's walk over idle CPUs.
//!
//! Only the probe can move: every worker is pinned. The balancer first
//! picks the busiest group as update_sd_pick_busiest() does, over every
//! group of the domain in the kernel's order (from the puller's, wrapping):
//! by group_classify() type (PELT's util and runnable against capacity,
//! group_smt_balance for SMT cores), then idle CPUs and tasks, ties kept
//! by the first met. When that is a group of workers the attempt ends
//! there: balanced, or sched_balance_find_src_rq() gives a CPU with one
//! pinned task, which sched_balance_rq() neither detaches from nor retries
//! past (its LBF_ALL_PINNED retry needs a CPU with two tasks), so the
//! attempt fails. Only when the probe's group is the busiest do its
//! numbers against the puller's decide, and then whether the probe may go.

use super::engine::{Cause, Engine};
use super::groups::GroupStats;
use super::groups::{busier, pelt_sums, Candidate};
use super::machine::LevelKind;
use super::numa_move::adjust_numa_imbalance;
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

/// Moves the probe to `x` for a balance attempt of `kind` at `level` of
/// `x`'s domains, counting it where sched_balance_rq() and
/// active_load_balance_cpu_stop() count it in /proc/schedstat. The latter
/// balances as an idle CPU (its lb_env has `.idle = CPU_IDLE`), so
/// detach_one_task() counts a push in `lb_gained[CPU_IDLE]` as well as in
/// `alb_pushed`, whatever kind of attempt kicked it.
pub fn count_move(e: &mut Engine, x: usize, level: usize, kind: Kind, how: Moved) {
    e.move_to(x, Cause::LoadBalance);
    let c = &mut e.res.balance[level];
    match how {
        Moved::Pushed => {
            c.alb_pushed += 1;
            c.lb[BalanceKind::Idle as usize].gained += 1;
        }
        Moved::Pulled | Moved::PulledHot => {
            let k = BalanceKind::from(kind) as usize;
            c.lb[k].gained += 1;
            c.lb[k].hot_gained += (how == Moved::PulledHot) as u64;
        }
    }
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

/// Whether balancing a domain with these two groups moves a task from the
/// busiest to the local one (find_busiest_group + calculate_imbalance for
/// an idle destination).
pub fn imbalanced(
    local: &GroupStats,
    busiest: &GroupStats,
    prefer_sibling: bool,
    numa: Option<u32>,
) -> bool {
    if busiest.overloaded() {
        // Local has spare capacity: migrate_util / one task to an idle CPU.
        return local.has_spare();
    }
    // Only idle CPUs pull in this engine.
    let sib = sibling_imbalance(busiest, local, true);
    let forced = prefer_sibling && local.has_spare() && sib > 1;
    if !forced {
        if busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1 {
            return false;
        }
        if busiest.nr_running <= 1 {
            return false;
        }
    }
    let mut imb = if busiest.weight == 1 || prefer_sibling {
        sib
    } else {
        (local.idle_cpus as i64 - busiest.idle_cpus as i64).max(0)
    };
    if let Some(imb_numa_nr) = numa {
        // Keep a pair of tasks local while the destination is lightly
        // loaded.
        imb = adjust_numa_imbalance(imb, local.nr_running as i64 + 1, imb_numa_nr);
    }
    (imb >> 1) >= 1
}

/// update_sd_lb_stats()'s busiest group of domain `d` for puller `x`,
/// whose group is `lg`: the kernel compares every group, not the probe's
/// alone. On an SMT machine's LLC a core of two busy workers is as busy as
/// the probe's, and the first met is kept; the puller then finds a CPU with
/// one pinned task and gives up, or finds the domain balanced. Domains of
/// two groups have only one candidate.
fn busiest_group(
    e: &Engine,
    d: usize,
    lg: usize,
    kind: Kind,
    t: f64,
    flagged: Option<usize>,
) -> Option<usize> {
    let groups = &e.m.domains[d].groups;
    if groups.len() <= 2 {
        return groups.iter().copied().find(|&g| g != lg);
    }
    let start = groups.iter().position(|&g| g == lg)?;
    let pct = e.m.domains[d].imbalance_pct;
    let duty = e.load.busy_ns / e.load.period_ns;
    let mut best: Option<(usize, Candidate)> = None;
    for k in 1..groups.len() {
        let g = groups[(start + k) % groups.len()];
        let span = e.m.span(g);
        let probe = span.binary_search(&e.cur).is_ok();
        let (util, runnable) = pelt_sums(span.len(), duty, probe as usize, probe as usize);
        let c = Candidate::new(
            stats(e, g, probe, t),
            util,
            runnable,
            pct,
            e.m.is_core(g),
            kind != Kind::Busy,
            e.p.kernel.smt_balance,
        )
        .flagged(flagged == Some(g));
        if best.as_ref().is_none_or(|(_, b)| busier(&c, b)) && c.g.nr_running > 0 {
            best = Some((g, c));
        }
    }
    best.map(|(g, _)| g)
}

fn stats(e: &Engine, span: usize, has_probe: bool, t: f64) -> GroupStats {
    let weight = e.m.span(span).len();
    let busy = e.busy_count(span, t);
    GroupStats {
        weight,
        cores: e.m.span_cores(span),
        nr_running: busy + has_probe as usize,
        // The probe only ever waits on a CPU whose worker is busy.
        idle_cpus: weight - busy.min(weight),
    }
}

/// should_we_balance(): of a group, only its first idle CPU on an idle
/// core (else its first idle CPU, else its first CPU) runs the periodic
/// balance of a domain; newly-idle balancing is open to all. The answer
/// holds for the whole group at one instant, so it is kept per (group,
/// time): a nohz pass asks it of every idle CPU.
fn balancer(e: &mut Engine, x: usize, level: usize, group: usize, t: f64) -> Option<usize> {
    if let Some(&(at, c)) = e.balancer_cache.get(&group) {
        if at == t {
            return c;
        }
    }
    let smt_level = matches!(e.m.domains[e.m.cpu_domains[x][level]].kind, LevelKind::Smt);
    let c = group_balancer(e.m, group, smt_level, |c| c != e.cur && !e.busy(c, t));
    e.balancer_cache.insert(group, (t, c));
    c
}

/// should_we_balance()'s CPU of group span `group`: its first idle CPU on
/// an idle core (any idle CPU at the SMT level), else its first idle CPU,
/// else its first CPU.
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

/// migrate_degrades_locality(): 1 degrades, 0 improves, -1 no opinion.
fn degrades_locality(e: &Engine, src: usize, dst: usize, numa_domain: bool, kind: Kind) -> i32 {
    // Leaving the preferred node is no worse than staying when every task on
    // the source CPU prefers its node: the worker does once NUMA balancing
    // has placed it.
    let all_prefer = e.workers_prefer_own_node(e.t);
    locality(
        &e.numa,
        e.m.node[src],
        e.m.node[dst],
        numa_domain,
        kind,
        all_prefer,
    )
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

/// One balance attempt by CPU `x` at its domain of level `level` (an index
/// into the machine's `cpu_domains[x]`): pulls the probe when the kernel
/// would. It keeps the imbalance flag of `x`'s domain span
/// ([`GroupImbalance`]): an ending in balance clears it, leaving the probe
/// behind its pinned worker sets it.
pub fn try_pull(e: &mut Engine, x: usize, level: usize, kind: Kind) -> bool {
    let t = e.t;
    let cur = e.cur;
    if !e.sharing() || !e.allowed[x] || x == cur {
        return false;
    }
    let d = e.m.cpu_domains[x][level];
    let dom = &e.m.domains[d];
    // The probe's group in x's domain, looked up in the domain, not at the
    // same level of the probe's CPU: CPUs' hierarchies differ in depth
    // where nodes do (a node of one CPU has no MC level; asymmetric
    // distances give NUMA levels of different spans).
    let lg = e.m.cpu_group[x][level];
    let Some(bg) = e.m.group_of(d, cur) else {
        return false;
    };
    if lg == bg {
        return false;
    }
    let pg = e.m.parent_group(x, level);
    // out_balanced: a balanced domain forgets its failures, and clears the
    // flag of the puller's group one level up.
    let balanced = |e: &mut Engine| {
        e.failed[x][level] = 0;
        if let Some(pg) = pg {
            e.imb.clear(pg);
        }
        false
    };
    if kind == Kind::Idle && balancer(e, x, level, lg, t) != Some(x) {
        // Another CPU of the group balances for it: out_balanced.
        return balanced(e);
    }
    let local = stats(e, lg, false, t);
    let numa = dom.is_numa().then_some(dom.imb_numa_nr);
    let (prefer_sibling, nice, is_numa) = (dom.prefer_sibling, dom.cache_nice_tries, dom.is_numa());
    let level_kind = dom.kind;
    let periodic = kind == Kind::Idle;
    // Only the probe's groups are ever flagged.
    let tick = e.tick_ns();
    let flagged = e.imb.is_set(e.m, bg, cur, t, tick).then_some(bg);
    match busiest_group(e, d, lg, kind, t, flagged) {
        Some(g) if g == bg => {}
        other => {
            // The busiest group holds only pinned workers: balanced, or
            // sched_balance_find_src_rq() gives a CPU with one pinned task,
            // nothing moves and the attempt counts as failed.
            let imb = other
                .is_some_and(|g| imbalanced(&local, &stats(e, g, false, t), prefer_sibling, numa));
            if !imb {
                return balanced(e);
            } else if periodic {
                e.failed[x][level] += 1;
            }
            return false;
        }
    }
    let busiest = stats(e, bg, true, t);
    // A flagged busiest group is balanced by force, one task (the
    // group_imbalanced cases of sched_balance_find_src_group() and
    // calculate_imbalance()).
    if flagged.is_none() && !imbalanced(&local, &busiest, prefer_sibling, numa) {
        return balanced(e);
    }
    // detach_tasks() meets the pinned worker (LBF_SOME_PINNED): if the
    // probe stays, the imbalance is left and `x`'s group is flagged.
    let left_behind = |e: &mut Engine| {
        if let Some(pg) = pg {
            e.imb.set(pg, level, t);
        }
    };
    let failed = e.failed[x][level];
    if e.probe_running(t) {
        // can_migrate_task: task_on_cpu. The active balancer takes it
        // once the failures pass cache_nice_tries + 2 (counted first).
        left_behind(e);
        if periodic {
            e.failed[x][level] += 1;
        }
        if e.failed[x][level] > nice + 2 {
            e.failed[x][level] = 0;
            count_move(e, x, level, kind, Moved::Pushed);
            return true;
        }
        return false;
    }
    let degrade = degrades_locality(e, cur, x, is_numa, kind);
    let hot = match degrade {
        -1 => task_hot(level_kind, t - e.last_ran(t), e.migration_cost_ns()),
        v => v == 1,
    };
    // A hot probe goes once the domain's failures (counted by periodic
    // balancing, read by newly-idle balancing too) pass cache_nice_tries.
    if !hot || failed > nice {
        e.failed[x][level] = 0;
        let how = if hot { Moved::PulledHot } else { Moved::Pulled };
        count_move(e, x, level, kind, how);
        return true;
    }
    left_behind(e);
    if periodic {
        e.failed[x][level] += 1;
    }
    false
}

/// The probe's CPU ticks with two runnable tasks: nohz_balancer_kick()
/// wakes the first idle CPU, which balances each idle CPU whose domains are
/// due (from the one after it, wrapping, itself last). Only a CPU the probe
/// may use, at the lowest level that spans the probe's CPU, can take it
/// (lower levels do not see it; higher ones have it in the local group), so
/// only those attempts are made.
pub fn nohz_idle_balance(e: &mut Engine) {
    let t = e.t;
    let n = e.m.len();
    let cur = e.cur;
    let Some(ilb) = (0..n).find(|&c| c != cur && !e.busy(c, t)) else {
        return;
    };
    let tick = 1e9 / e.p.kernel.hz as f64;
    // From the CPU after the balancer, wrapping (no division per CPU).
    for y in (ilb + 1..n).chain(0..=ilb) {
        if y == cur || !e.allowed[y] {
            continue;
        }
        let Some(level) = e.m.common_level(y, cur) else {
            continue;
        };
        // Whether the domain is due before whether the CPU is idle: most
        // are not due, and the table lookup is cheaper than the load's
        // closed form (a third of the 1024-CPU benchmark's time was here).
        if t < e.next_balance[y][level] || e.busy(y, t) {
            continue;
        }
        // Intervals are whole jiffies.
        let d = e.m.cpu_domains[y][level];
        let iv = e.m.domains[d].balance_interval_ns(tick, 1.0);
        e.next_balance[y][level] = t + iv;
        if try_pull(e, y, level, Kind::Idle) {
            return;
        }
    }
}

/// sched_domain's proportional-newidle counters (update_newidle_stats).
#[derive(Debug, Clone, Copy)]
pub struct NewIdleStats {
    calls: u32,
    pub success: u32,
    pub ratio: u32,
    /// Load time up to which calls are counted; None: not yet, and the
    /// load has run long before the sample (start from a long history).
    upto: Option<f64>,
}

impl Default for NewIdleStats {
    fn default() -> Self {
        // sd_init()'s starting values.
        NewIdleStats {
            calls: 512,
            success: 256,
            ratio: 512,
            upto: None,
        }
    }
}

impl NewIdleStats {
    /// One more call with `success` weighted pulls.
    pub fn calls_plus(&mut self, success: u32) {
        self.calls += 1;
        self.success += success;
        if self.calls >= 1024 {
            self.ratio = self.success;
            self.calls /= 2;
            self.success /= 2;
        }
    }

    /// Counts the failed calls of the idle periods since last time.
    pub fn catch_up(&mut self, lt: f64, period: f64) {
        let from = self.upto.unwrap_or(lt - 60e9);
        let mut k = super::load::floor((lt - from) / period).max(0.0) as u64;
        self.upto = Some(from + k as f64 * period);
        while k > 0 {
            let step = k.min((1024 - self.calls.min(1023)) as u64);
            self.calls += step as u32;
            k -= step;
            if self.calls >= 1024 {
                self.ratio = self.success;
                self.calls /= 2;
                self.success /= 2;
            }
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
    fn an_overloaded_cpu_gives_to_an_idle_sibling() {
        // SMT level: groups are single CPUs; the probe's CPU has 2 tasks.
        assert!(imbalanced(&g(1, 1, 0, 1), &g(1, 1, 2, 0), false, None));
    }

    #[test]
    fn a_core_pulls_only_when_it_is_idle_as_a_whole() {
        // MC level of an SMT machine: groups are cores of 2 CPUs.
        assert!(imbalanced(&g(2, 1, 0, 2), &g(2, 1, 2, 1), true, None));
        assert!(!imbalanced(&g(2, 1, 1, 1), &g(2, 1, 2, 1), true, None));
    }

    #[test]
    fn numa_level_needs_two_more_runnable_tasks() {
        // Two nodes of 52 CPUs, prefer_sibling from the LLC child.
        assert!(!imbalanced(
            &g(52, 26, 30, 22),
            &g(52, 26, 31, 21),
            true,
            Some(2)
        ));
        assert!(imbalanced(
            &g(52, 26, 29, 23),
            &g(52, 26, 31, 21),
            true,
            Some(2)
        ));
        // A lightly loaded destination keeps a small imbalance.
        assert!(!imbalanced(
            &g(52, 26, 0, 52),
            &g(52, 26, 2, 51),
            true,
            Some(2)
        ));
    }

    #[test]
    fn upper_numa_level_evens_idle_cpus() {
        assert!(!imbalanced(
            &g(64, 32, 38, 26),
            &g(64, 32, 39, 25),
            false,
            Some(4)
        ));
        assert!(imbalanced(
            &g(64, 32, 35, 29),
            &g(64, 32, 39, 25),
            false,
            Some(4)
        ));
    }

    #[test]
    fn sibling_imbalance_normalises_by_cores() {
        // (2 x (4x4 - 2x2) + 4 + 2) / (4 + 2), as the kernel rounds it.
        assert_eq!(sibling_imbalance(&g(4, 2, 4, 0), &g(8, 4, 2, 6), true), 5);
        assert_eq!(sibling_imbalance(&g(2, 1, 2, 0), &g(2, 1, 0, 2), true), 2);
    }
}
