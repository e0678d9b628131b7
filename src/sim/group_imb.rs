//! sched_group_capacity's `imbalance` flag for the one-probe engine, after
//! kernel/sched/fair.c (6.12) sched_balance_rq():
//!
//! - set when an attempt at a domain with a parent met a task it may not
//!   move for affinity (LBF_SOME_PINNED) and imbalance is left: the flag
//!   goes on the parent's first group, `sd_parent->groups`, which is the
//!   puller's own domain span. Every worker is pinned, so an attempt that
//!   finds the probe's CPU busiest (the probe and its worker) and leaves
//!   the probe (running, cache hot, or degrading locality) sets it;
//! - read by group_classify(): a flagged group that is not overloaded is
//!   group_imbalanced, which update_sd_pick_busiest() ranks above every
//!   other type but overloaded, and sched_balance_find_src_group() then
//!   balances by force, one task (see [`super::balance::try_pull`]);
//! - cleared when an attempt at that same level by one of the group's CPUs
//!   ends balanced (out_balanced).
//!
//! Only the probe's CPU ever holds two tasks, so a flag is only ever set on
//! a group holding the probe. The engine simulates the attempts that could
//! pull the probe; the other attempts that would end balanced and clear a
//! flag are counted here, in closed form: a newly-idle attempt of another
//! CPU of the group while the probe runs alone (nothing to pull), the
//! probe's own CPU's periodic balance (busy_factor times the interval),
//! and the group's CPUs once the probe has left it (left out: the few
//! milliseconds until they next balance).
//!
//! Modelled only when the profile's `kernel.group_imbalance` is on (off by
//! default: docs/sim-validation.md, "The group imbalance flag", says what it does to
//! the calibration and why).

use super::balance::NewIdleStats;
use super::load::LoadModel;
use super::machine::Machine;
use super::rng::hash3;

/// One flagged group: its span, the level whose attempts clear it (the
/// span is that level's domain), and when it was set.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flag {
    span: usize,
    level: usize,
    set_ns: f64,
}

#[derive(Debug, Clone, Default)]
pub struct GroupImbalance {
    /// The profile's `kernel.group_imbalance`: when off, nothing is ever
    /// flagged.
    enabled: bool,
    flags: Vec<Flag>,
    /// When the probe last stopped sharing its CPU (sample time).
    share_end_ns: Option<f64>,
}

impl GroupImbalance {
    pub fn new(enabled: bool) -> Self {
        GroupImbalance {
            enabled,
            ..Default::default()
        }
    }

    pub fn set(&mut self, span: usize, level: usize, t: f64) {
        if !self.enabled {
            return;
        }
        match self.flags.iter_mut().find(|f| f.span == span) {
            Some(f) => f.set_ns = t,
            None => self.flags.push(Flag {
                span,
                level,
                set_ns: t,
            }),
        }
    }

    pub fn clear(&mut self, span: usize) {
        self.flags.retain(|f| f.span != span);
    }

    /// Whether group `span` is flagged at `t`, the probe being on `cur`:
    /// a flag outlives no periodic balance of the probe's own CPU at its
    /// level (the CPU is busy, so busy_factor 16 times the interval).
    pub fn is_set(&mut self, m: &Machine, span: usize, cur: usize, t: f64, tick_ns: f64) -> bool {
        let Some(i) = self.flags.iter().position(|f| f.span == span) else {
            return false;
        };
        let f = self.flags[i];
        let d = m.cpu_domains[cur].get(f.level).copied();
        let iv = d.map_or(0.0, |d| m.domains[d].balance_interval_ns(tick_ns, 16.0));
        let grid = |x: f64| super::load::floor(x / iv);
        if iv > 0.0 && grid(f.set_ns) < grid(t) {
            self.flags.swap_remove(i);
            return false;
        }
        true
    }

    /// The probe moved to `to`: groups it left are balanced by their own
    /// CPUs' next attempts.
    pub fn moved(&mut self, m: &Machine, to: usize) {
        self.flags
            .retain(|f| m.span(f.span).binary_search(&to).is_ok());
    }

    /// The probe stopped sharing its CPU at `t`.
    pub fn share_ended(&mut self, t: f64) {
        self.share_end_ns = Some(t);
    }

    /// The probe shares its CPU again at `t`: a CPU of a flagged group
    /// that went idle meanwhile made a newly-idle attempt that found
    /// nothing waiting and cleared the flag, if it made one at the flag's
    /// level ([`NewIdleAttempts::made_at`]).
    pub fn share_started(
        &mut self,
        m: &Machine,
        load: &LoadModel,
        shift: f64,
        cur: usize,
        t: f64,
        newidle: &NewIdleAttempts,
    ) {
        let Some(from) = self.share_end_ns.take() else {
            return;
        };
        self.flags.retain(|f| {
            !m.span(f.span).iter().any(|&c| {
                c != cur
                    && load.last_idle_start(c, t + shift).is_some_and(|at| {
                        at - shift > from.max(f.set_ns) && newidle.made_at(c, f.level, at)
                    })
            })
        });
    }

    /// Whether any group is flagged (for callers that can skip work).
    pub fn any(&self) -> bool {
        !self.flags.is_empty()
    }
}

/// Whether a CPU's newly-idle balance reaches a level, as the engine's
/// NewIdle event decides it: at every idle entry (the avg_idle gate is
/// open, see the engine's NewIdle handler); with NI_RANDOM, with
/// probability (1 + ratio)/1024, drawn from the seed, the CPU, the level
/// and the idle period.
pub struct NewIdleAttempts<'a> {
    pub seed: u64,
    pub period_ns: f64,
    pub ni_random: bool,
    /// NI_RANDOM's state per (CPU, level).
    pub stats: &'a [Vec<NewIdleStats>],
}

impl NewIdleAttempts<'_> {
    /// An attempt of CPU `c` at `level` for its idle period starting at
    /// load time `at`.
    pub fn made_at(&self, c: usize, level: usize, at: f64) -> bool {
        if !self.ni_random {
            return true;
        }
        let k = super::load::floor(at / self.period_ns) as u64;
        let u = hash3(self.seed ^ 0x16B1_A5CE, (c * 64 + level) as u64, k);
        let ratio = self.stats[c].get(level).map_or(0, |st| st.ratio);
        u * 1024.0 <= (1 + ratio) as f64
    }
}
