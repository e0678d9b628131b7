//! Load balancing among several probes ([`super::multi`]), after
//! kernel/sched/fair.c 6.12: update_sg_lb_stats / group_classify,
//! update_sd_pick_busiest, sched_balance_find_src_group with
//! calculate_imbalance (migrate_task, migrate_util, migrate_load),
//! sched_balance_find_src_rq, detach_tasks with can_migrate_task (affinity,
//! task_on_cpu, task_hot, migrate_degrades_locality, the cache_nice_tries
//! override), active balancing, newly-idle balancing with NI_RANDOM,
//! should_we_balance and exec placement (task_numa_migrate is
//! [`super::multi_numa`]).
//!
//! The busiest group is picked as update_sd_pick_busiest() does, over every
//! group of the domain from the puller's, wrapping ([`super::groups::busier`]);
//! when it holds no probe the puller may take, the attempt ends balanced or
//! failed there, as sched_balance_rq() does with a CPU of one pinned task.
//!
//! With the profile's `kernel.group_imbalance` (off by default, see
//! docs/sim-validation.md, "The group imbalance flag"), affinity leaves a mark one level up, as sched_balance_rq()
//! leaves it: an attempt that met a task it may not move (every worker is
//! pinned) and left imbalance flags its parent domain's local group
//! (`sd_parent->groups->sgc->imbalance`); group_classify() calls a flagged
//! group imbalanced, which only an overloaded group outranks as the
//! busiest, and which is balanced by force, one task; the next attempt at
//! that level by one of the group's CPUs that ends balanced clears it. So
//! a probe left behind its worker (running, or hot) is taken by another
//! core or node sooner than its group's numbers alone would say.
//!
//! Periodic balancing runs each CPU up its domains as
//! sched_balance_domains() does: a domain is tried when its interval (for
//! the CPU's state now; doubled after a balanced attempt, back to its
//! minimum after an unbalanced one) has passed, and a CPU that
//! should_we_balance() turns away at a level tries no level above it in
//! that pass.
//!
//! Left out, and why: load is PELT's long-run value (1 per probe, the duty
//! cycle per worker); misfit and asym-packing groups (none on these
//! machines' symmetric CPUs) are not modelled; exec placement takes the
//! least loaded CPU of the node with the most idle CPUs.

use super::balance::{self, sibling_imbalance, Kind, Moved};
use super::groups::{busier, pelt_sums, Candidate, GroupStats, GroupType};
use super::machine::{Domain, LevelKind};
use super::multi::{Ent, Multi};
use super::numa_move::adjust_numa_imbalance;
use super::sample::Cause;
use crate::analysis::schedstat::BalanceKind;

/// A group's numbers, with its long-run load (in tasks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub g: GroupStats,
    pub load: f64,
}

impl Stats {
    fn avg_load(&self) -> f64 {
        self.load / self.g.weight.max(1) as f64
    }
}

/// group_classify() for symmetric CPUs: has_spare 0, fully_busy 1,
/// overloaded 2.
pub fn group_type(g: &GroupStats) -> u8 {
    match g.nr_running.cmp(&g.weight) {
        std::cmp::Ordering::Greater => 2,
        std::cmp::Ordering::Equal => 1,
        std::cmp::Ordering::Less => 0,
    }
}

/// What calculate_imbalance() decided: how to count and how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Imbalance {
    /// migrate_task: this many tasks.
    Tasks(f64),
    /// migrate_util: this much spare capacity, in CPUs.
    Util(f64),
    /// migrate_load: this much load, in tasks.
    Load(f64),
}

/// sched_balance_find_src_group()'s verdict and calculate_imbalance() for
/// the puller's `local` group against `busiest`, `sd_avg` being the
/// domain's average load per CPU. None: balanced.
pub fn decide(
    local: &Stats,
    busiest: &Stats,
    sd_avg: f64,
    dom: &Domain,
    kind: Kind,
) -> Option<Imbalance> {
    let (l, b) = (&local.g, &busiest.g);
    if b.nr_running == 0 {
        return None;
    }
    let (lt, bt) = (group_type(l), group_type(b));
    if lt > bt {
        return None;
    }
    if lt == 2
        && (local.avg_load() >= busiest.avg_load()
            || local.avg_load() >= sd_avg
            || 100.0 * busiest.avg_load() <= dom.imbalance_pct as f64 * local.avg_load())
    {
        return None;
    }
    let idle = kind != Kind::Busy;
    let forced = dom.prefer_sibling && lt == 0 && sibling_imbalance(b, l, idle) > 1;
    if !forced && bt != 2 {
        if kind == Kind::Busy {
            return None;
        }
        if b.weight > 1 && l.idle_cpus <= b.idle_cpus + 1 {
            return None;
        }
        if b.nr_running == 1 {
            return None;
        }
    }
    // calculate_imbalance()
    let shares_llc = matches!(dom.kind, LevelKind::Smt | LevelKind::Mc);
    if lt == 0 {
        if bt > 1 && !shares_llc {
            let spare = l.idle_cpus as f64;
            return Some(if spare > 0.0 {
                Imbalance::Util(spare)
            } else {
                Imbalance::Tasks(1.0)
            });
        }
        let mut imb = if b.weight == 1 || dom.prefer_sibling {
            sibling_imbalance(b, l, idle)
        } else {
            (l.idle_cpus as i64 - b.idle_cpus as i64).max(0)
        };
        if dom.is_numa() {
            imb = adjust_numa_imbalance(imb, l.nr_running as i64 + 1, dom.imb_numa_nr);
        }
        imb >>= 1;
        return (imb > 0).then_some(Imbalance::Tasks(imb as f64));
    }
    if lt < 2 && (local.avg_load() >= busiest.avg_load() || local.avg_load() >= sd_avg) {
        return None;
    }
    let amount = ((busiest.avg_load() - sd_avg) * b.weight as f64)
        .min((sd_avg - local.avg_load()) * l.weight as f64);
    (amount > 0.0).then_some(Imbalance::Load(amount))
}

/// A span's numbers now.
#[inline]
pub fn stats(e: &Multi, span: usize) -> Stats {
    let n = e.span_count[span];
    Stats {
        g: GroupStats {
            weight: n.weight,
            cores: n.cores,
            nr_running: n.nr_running,
            idle_cpus: n.idle_cpus,
        },
        load: n.probes as f64 + e.duty * n.weight as f64,
    }
}

/// The probes on CPU `c`, waiting ones in the order detach_tasks() meets
/// them (least recently run first), the running one last.
fn probes_on(e: &Multi, c: usize) -> Vec<usize> {
    let mut w: Vec<usize> = e.rqs[c]
        .queue
        .iter()
        .filter_map(|x| match x {
            Ent::Task(i) => Some(*i),
            Ent::Worker => None,
        })
        .collect();
    w.sort_by(|&a, &b| e.tasks[a].last_ran.total_cmp(&e.tasks[b].last_ran));
    if let Some(Ent::Task(i)) = e.rqs[c].curr {
        w.push(i);
    }
    w
}

/// should_we_balance() with this engine's idle CPUs ([`super::multi::IdleBits`]).
fn balancer(e: &Multi, smt_level: bool, g: usize) -> Option<usize> {
    e.idle.balancer(e.m, g, smt_level)
}

/// The PELT sums of a span ([`pelt_sums`]).
#[inline]
fn pelt(e: &Multi, span: usize) -> (f64, f64) {
    let n = e.span_count[span];
    pelt_sums(n.weight, e.duty, n.probe_cpus, n.probes)
}

/// out_balanced: the attempt found balance (or another CPU balances for
/// the group), so it clears the parent group's imbalance flag ("only if
/// other tasks got a chance to move") and forgets the domain's failures.
fn balanced(e: &mut Multi, x: usize, level: usize) -> bool {
    if let Some(pg) = e.m.parent_group(x, level) {
        e.flag_group(pg, false);
    }
    e.failed[x][level] = 0;
    false
}

/// Moves job `i` to `x` for a balance attempt of `kind` at `level` of `x`'s
/// domains, counting it where sched_balance_rq() and
/// active_load_balance_cpu_stop() count it in /proc/schedstat. The latter
/// balances as an idle CPU (its lb_env has `.idle = CPU_IDLE`), so
/// detach_one_task() counts a push in `lb_gained[CPU_IDLE]` as well as in
/// `alb_pushed`, whatever kind of attempt kicked it.
pub fn count_move(e: &mut Multi, i: usize, x: usize, level: usize, kind: Kind, how: Moved) {
    e.move_task(i, x, Cause::LoadBalance);
    let c = &mut e.tasks[i].res.balance[level];
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

/// One balance attempt by CPU `x` at its domain `level`; true when it
/// moved a probe.
pub fn try_balance(e: &mut Multi, x: usize, level: usize, kind: Kind) -> bool {
    balance_rq(e, x, level, kind, &mut Pass::default())
}

/// What an attempt tells the loop over a CPU's domains besides whether it
/// moved a probe.
#[derive(Debug, Clone, Copy)]
struct Pass {
    /// sched_balance_domains()'s `continue_balancing`.
    cont: bool,
    /// The move was the stopper's push (active balancing), for which
    /// sched_balance_rq() returns 0 moved.
    pushed: bool,
}

impl Default for Pass {
    fn default() -> Self {
        Pass {
            cont: true,
            pushed: false,
        }
    }
}

/// sched_balance_rq(): one attempt, which clears `continue_balancing` when
/// should_we_balance() turns `x` away (another CPU balances for its group),
/// so that sched_balance_domains() tries no higher level in this pass.
fn balance_rq(e: &mut Multi, x: usize, level: usize, kind: Kind, pass: &mut Pass) -> bool {
    let d = e.m.cpu_domains[x][level];
    let dom = &e.m.domains[d];
    let lg = e.m.cpu_group[x][level];
    let smt_level = matches!(dom.kind, LevelKind::Smt);
    // A core's other threads run one pinned worker each at most, and a
    // group of one task is never the one balanced from: with no probe on
    // the core the attempt ends balanced (this is most attempts, so it is
    // answered before any group is counted). Its CPU is not turned away
    // first: an SMT domain's local group is the CPU alone.
    let probes = e.span_count[dom.span].probes;
    if smt_level && probes == 0 {
        return balanced(e, x, level);
    }
    if kind != Kind::NewlyIdle && balancer(e, smt_level, lg) != Some(x) {
        pass.cont = false;
        return balanced(e, x, level);
    }
    // A newly-idle attempt where there is no probe to take changes nothing
    // once the domain's failures are nil and no group can be flagged: it
    // ends balanced (clearing what is already clear) or finds nothing to
    // move (and newly-idle failures are not counted).
    if kind == Kind::NewlyIdle
        && probes == 0
        && e.failed[x][level] == 0
        && !e.p.kernel.group_imbalance
    {
        return false;
    }
    // update_sd_lb_stats(): every group once, met from the puller's own,
    // wrapping; the domain's average, the busiest and the local group all
    // come from them. At the root domain it also sets the root domain's
    // overload flag from them (set_rd_overloaded()).
    if level + 1 == e.m.cpu_domains[x].len() {
        e.overloaded = e.crowded > 0;
    }
    let groups = &dom.groups;
    let start = groups.iter().position(|&g| g == lg).unwrap_or(0);
    let n = groups.len();
    let local = stats(e, lg);
    let (mut total, mut weight) = (local.load, local.g.weight);
    let candidate = |g: usize, s: &Stats| {
        let (util, runnable) = pelt(e, g);
        Candidate::new(
            s.g,
            util,
            runnable,
            dom.imbalance_pct,
            e.m.is_core(g),
            kind != Kind::Busy,
            e.p.kernel.smt_balance,
        )
        .flagged(e.group_imbalance[g])
    };
    let mut best: Option<(usize, Stats, Candidate)> = None;
    for k in 1..n {
        let g = groups[(start + k) % n];
        let s = stats(e, g);
        total += s.load;
        weight += s.g.weight;
        if s.g.nr_running == 0 {
            continue;
        }
        let c = candidate(g, &s);
        if best.as_ref().is_none_or(|(_, _, b)| busier(&c, b)) {
            best = Some((g, s, c));
        }
    }
    let sd_avg = total / weight.max(1) as f64;
    let Some((bg, busiest, bc)) = best else {
        return balanced(e, x, level);
    };
    // Only a flagged local group is classified again (its PELT sums decide
    // whether it is overloaded instead).
    let local_imbalanced =
        e.group_imbalance[lg] && candidate(lg, &local).ty == GroupType::Imbalanced;
    let imb = if bc.ty == GroupType::Imbalanced {
        // "If the busiest group is imbalanced the below checks don't work
        // because they assume all things are equal": force_balance, one
        // task (calculate_imbalance's group_imbalanced case).
        Imbalance::Tasks(1.0)
    } else if local_imbalanced && bc.ty != GroupType::Overloaded {
        // The local group is busier than the busiest.
        return balanced(e, x, level);
    } else {
        match decide(&local, &busiest, sd_avg, dom, kind) {
            Some(imb) => imb,
            None => return balanced(e, x, level),
        }
    };
    let nice = dom.cache_nice_tries;
    let is_numa = dom.is_numa();
    let level_kind = dom.kind;
    // The group a failure for affinity flags; None when the profile does
    // not model the flag, so the checks below cost nothing then.
    let flag =
        e.m.parent_group(x, level)
            .filter(|_| e.p.kernel.group_imbalance);
    // sched_balance_find_src_rq(): the CPU with the most tasks among those
    // with a probe the puller may take. A group of pinned tasks only gives
    // a CPU the balancer can take nothing from.
    // (A group with no probe has none to walk for.)
    let cands: &[usize] = if e.span_count[bg].probes > 0 {
        e.m.span(bg)
    } else {
        &[]
    };
    let src = cands
        .iter()
        .copied()
        .filter(|&c| e.rqs[c].probes > 0 && probes_on(e, c).iter().any(|&i| e.tasks[i].allowed[x]))
        .max_by(|&a, &b| {
            e.rqs[a]
                .nr_running()
                .cmp(&e.rqs[b].nr_running())
                .then(b.cmp(&a))
        });
    let Some(src) = src else {
        if let Imbalance::Util(_) = imb {
            // It skips CPUs of one task: no busiest CPU, out_balanced.
            return balanced(e, x, level);
        }
        // A CPU of two or more tasks, all pinned away from `x`: detach_tasks
        // met them (LBF_SOME_PINNED), and the parent group is flagged
        // before the LBF_ALL_PINNED retry gives up.
        if let Some(pg) = flag {
            if e.m.span(bg).iter().any(|&c| e.rqs[c].nr_running() > 1) {
                e.flag_group(pg, true);
            }
        }
        if kind != Kind::NewlyIdle {
            e.failed[x][level] += 1;
        }
        return false;
    };
    let failed = e.failed[x][level];
    let (sn, dn) = (e.m.node[src], e.m.node[x]);
    let mut left = match imb {
        Imbalance::Tasks(v) | Imbalance::Util(v) | Imbalance::Load(v) => v,
    };
    let mut moved = 0;
    let mut active_candidate = None;
    // detach_tasks() runs on a source of two or more tasks, and
    // can_migrate_task() checks affinity first, so a worker there (always
    // pinned) or a probe pinned away from `x` sets LBF_SOME_PINNED.
    let some_pinned = flag.is_some()
        && e.rqs[src].nr_running() > 1
        && (e.rqs[src].worker_busy || probes_on(e, src).iter().any(|&i| !e.tasks[i].allowed[x]));
    for i in probes_on(e, src) {
        if !e.tasks[i].allowed[x] {
            continue;
        }
        if e.rqs[src].curr == Some(Ent::Task(i)) {
            active_candidate = Some(i);
            continue;
        }
        // migrate_degrades_locality() needs to know whether every task on
        // the source prefers its node.
        let rq = &e.rqs[src];
        let preferring = probes_on(e, src)
            .iter()
            .filter(|&&j| e.tasks[j].numa.preferred == Some(sn))
            .count()
            + (rq.worker_busy && e.workers_prefer_own_node()) as usize;
        let all_prefer = rq.nr_running() == preferring;
        let verdict = balance::locality(&e.tasks[i].numa, sn, dn, is_numa, kind, all_prefer);
        let hot = match verdict {
            -1 => balance::task_hot(level_kind, e.t - e.tasks[i].last_ran, e.migration_cost_ns()),
            v => v == 1,
        };
        // The domain's failures (counted by periodic balancing, read by
        // every kind) override a hot task past cache_nice_tries.
        if hot && failed <= nice {
            continue;
        }
        if let Imbalance::Load(_) = imb {
            // A task's load, shifted right by the failures, must fit.
            if 1.0 / f64::powi(2.0, failed.min(30) as i32) > left {
                continue;
            }
        }
        let how = if hot { Moved::PulledHot } else { Moved::Pulled };
        count_move(e, i, x, level, kind, how);
        moved += 1;
        left -= 1.0;
        if left <= 0.0 || (kind != Kind::Busy && e.rqs[src].nr_running() <= 1) {
            break;
        }
    }
    // "We failed to reach balance because of affinity": the parent group
    // is flagged while imbalance is left after detach_tasks().
    if let Some(pg) = flag {
        if some_pinned && left > 0.0 {
            e.flag_group(pg, true);
        }
    }
    if moved > 0 {
        e.failed[x][level] = 0;
        return true;
    }
    if kind != Kind::NewlyIdle {
        e.failed[x][level] += 1;
    }
    // imbalanced_active_balance(): the stopper moves the running probe,
    // from any kind of attempt; a pinned running task stops it.
    if let (Imbalance::Tasks(_), Some(i)) = (imb, active_candidate) {
        if e.failed[x][level] > nice + 2 {
            e.failed[x][level] = 0;
            count_move(e, i, x, level, kind, Moved::Pushed);
            pass.pushed = true;
            return true;
        }
    }
    false
}

/// sched_balance_newidle() on CPU `x`, which has just gone idle.
pub fn newidle(e: &mut Multi, x: usize) {
    if e.rqs[x].curr.is_some() {
        // A task came in the meantime: it did not go idle.
        e.gate.pulled(x);
        return;
    }
    // It balances only while the root domain is overloaded (a CPU has had
    // two tasks since its root domain last looked: get_rd_overloaded()),
    // and counts nothing otherwise.
    if !e.overloaded {
        return;
    }
    // It stops at the first domain whose max_newidle_lb_cost is above the
    // CPU's avg_idle (nil on hardware: [`super::multi_gate`]).
    for level in 0..e.m.cpu_domains[x].len() {
        if !e.gate.open(x, level) {
            return;
        }
        let mut pass = Pass::default();
        let moved = if e.p.kernel.ni_random {
            // NI_RANDOM: a 1024-sided die against 1 + newidle_ratio; a
            // miss is a call without success, a balance a call whose pull
            // (not the stopper's push, which sched_balance_rq() does not
            // count as moved) weighs the inverse of its odds
            // (update_newidle_stats()).
            let u = e.rng.below(1024) as u32;
            let weight = 1 + e.newidle[x][level].ratio;
            if u > weight {
                e.newidle[x][level].calls_plus(0);
                continue;
            }
            let moved = balance_rq(e, x, level, Kind::NewlyIdle, &mut pass);
            let w = (1024 + weight / 2) / weight;
            let pulled = moved && !pass.pushed;
            e.newidle[x][level].calls_plus(w * pulled as u32);
            moved
        } else {
            balance_rq(e, x, level, Kind::NewlyIdle, &mut pass)
        };
        if e.rqs[x].curr.is_some() {
            e.gate.pulled(x);
            return;
        }
        if moved {
            return;
        }
    }
}

/// One tick of periodic balancing, in the kernel's order: each busy CPU
/// from its own tick (sched_balance_trigger, in CPU order here, as the
/// ticks are simultaneous), then the nohz idle balancer, kicked from a busy
/// CPU's tick (any LLC with two busy CPUs kicks it, so with a load it runs
/// whenever an idle CPU is due), which is the first idle CPU and balances
/// every idle CPU from the one after it, wrapping, itself last
/// (_nohz_idle_balance's for_each_cpu_wrap). A CPU balances each domain
/// whose interval has passed, busy ones at busy_factor (16) times it, up
/// to the first level whose should_we_balance() turns it away.
pub fn periodic(e: &mut Multi, order: &mut Vec<usize>) {
    order.clear();
    let busy = e.idle.tick_order(e.m.len(), order);
    for (k, &c) in order.iter().enumerate() {
        let mut kind = if k >= busy && e.rqs[c].nr_running() == 0 {
            Kind::Idle
        } else {
            Kind::Busy
        };
        if e.t < e.due_at[c][(kind == Kind::Busy) as usize] {
            continue;
        }
        // sched_balance_domains(): up the levels until one turns the CPU
        // away (should_we_balance(): another CPU balances for its group),
        // after which it tries no higher level this pass.
        let mut pass = Pass::default();
        for level in 0..e.m.cpu_domains[c].len() {
            if !pass.cont {
                break;
            }
            let state = (kind == Kind::Busy) as usize;
            // rebalance_domains(): due when the interval for the CPU's
            // state now (busy_factor times longer while busy) has passed
            // since the domain was last balanced.
            let d = e.m.cpu_domains[c][level];
            let iv = e.interval_ns[d][state][e.relaxed[c][level] as usize];
            if e.t < e.last_balance[c][level] + iv {
                continue;
            }
            e.last_balance[c][level] = e.t;
            let moved = balance_rq(e, c, level, kind, &mut pass);
            // Balanced (or given up on a pinned running task past the
            // active balancer's threshold: out_one_pinned), the domain's
            // interval doubles; unbalanced, it is back to its minimum.
            let failed = e.failed[c][level];
            let nice = e.m.domains[d].cache_nice_tries;
            e.relaxed[c][level] = !moved && (failed == 0 || failed > nice + 2);
            // A pull may have made the CPU busy: it goes on up as one
            // ("idle = idle_cpu(cpu)" after a move), not stopping there.
            if moved && e.rqs[c].nr_running() > 0 {
                kind = Kind::Busy;
            }
        }
        set_due(e, c);
    }
}

/// Sets CPU `c`'s [`Multi::due_at`] from its domains' last balance and
/// intervals.
pub fn set_due(e: &mut Multi, c: usize) {
    let mut due = [f64::INFINITY; 2];
    for (level, &d) in e.m.cpu_domains[c].iter().enumerate() {
        let iv = &e.interval_ns[d];
        let relaxed = e.relaxed[c][level] as usize;
        for (state, at) in due.iter_mut().enumerate() {
            *at = at.min(e.last_balance[c][level] + iv[state][relaxed]);
        }
    }
    e.due_at[c] = due;
}

/// sched_balance_exec(): job `i` starts on the least loaded CPU of the
/// node with the most idle CPUs (ties drawn), then sets its own affinity
/// if that CPU is not allowed.
pub fn exec_place(e: &mut Multi, i: usize) {
    let nodes = e.m.node_cpus.len();
    let idle_in = |e: &Multi, n: usize| {
        e.m.node_cpus[n]
            .iter()
            .filter(|&&c| e.rqs[c].nr_running() == 0)
            .count()
    };
    let most = (0..nodes).map(|n| idle_in(e, n)).max().unwrap_or(0);
    let best_nodes: Vec<usize> = (0..nodes).filter(|&n| idle_in(e, n) == most).collect();
    let node = best_nodes[e.rng.below(best_nodes.len())];
    let least = e.m.node_cpus[node]
        .iter()
        .map(|&c| e.rqs[c].nr_running())
        .min()
        .unwrap_or(0);
    let cands: Vec<usize> = e.m.node_cpus[node]
        .iter()
        .copied()
        .filter(|&c| e.rqs[c].nr_running() == least)
        .collect();
    let start = cands[e.rng.below(cands.len())];
    e.start(i, start);
    if !e.tasks[i].allowed[start] {
        e.bind_move(i);
    }
}
