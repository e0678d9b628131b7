//! The engine's runqueues ([`super`]): what each CPU runs
//! and queues, EEVDF's turns between them, the counts every span keeps
//! for the balancer, and the idle CPUs as bit sets. A child module of
//! [`super`], so it shares the engine's private state.

use super::{Ent, Ev, Multi};
use crate::sim::machine::Machine;
use crate::sim::rng::hash3;
use std::collections::VecDeque;

/// A span's counts, kept as its CPUs' runqueues change, so a balance
/// attempt reads a group's numbers without walking its CPUs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpanCount {
    /// Runnable entities (workers with their duty cycle on, and probes).
    pub nr_running: usize,
    /// CPUs with nothing runnable.
    pub idle_cpus: usize,
    pub probes: usize,
    /// CPUs with at least one probe.
    pub probe_cpus: usize,
    /// Its CPUs and cores (fixed).
    pub weight: usize,
    pub cores: usize,
}

/// The idle CPUs, and the CPUs of wholly idle cores, as bit sets over CPU
/// positions, with each span's CPUs as one too: should_we_balance()'s CPU
/// of a group (its first CPU on an idle core, else its first idle CPU) is
/// the lowest bit of an AND, where walking a node's CPUs was a fifth of the
/// engine's time on the 128-CPU EPYC.
#[derive(Debug, Clone)]
pub struct IdleBits {
    idle: Vec<u64>,
    core_idle: Vec<u64>,
    spans: Vec<Vec<u64>>,
}

impl IdleBits {
    pub(super) fn new(m: &Machine) -> IdleBits {
        let words = m.len().div_ceil(64);
        let mut all = vec![0u64; words];
        (0..m.len()).for_each(|c| all[c / 64] |= 1 << (c % 64));
        let spans = (0..m.span_count())
            .map(|g| {
                let mut v = vec![0u64; words];
                m.span(g).iter().for_each(|&c| v[c / 64] |= 1 << (c % 64));
                v
            })
            .collect();
        IdleBits {
            idle: all.clone(),
            core_idle: all,
            spans,
        }
    }

    fn get(bits: &[u64], c: usize) -> bool {
        bits[c / 64] >> (c % 64) & 1 == 1
    }

    fn put(bits: &mut [u64], c: usize, on: bool) {
        if on {
            bits[c / 64] |= 1 << (c % 64);
        } else {
            bits[c / 64] &= !(1 << (c % 64));
        }
    }

    /// CPU `c` went idle or stopped being idle.
    pub(super) fn set_idle(&mut self, m: &Machine, c: usize, idle: bool) {
        Self::put(&mut self.idle, c, idle);
        let core = idle && m.siblings[c].iter().all(|&s| Self::get(&self.idle, s));
        Self::put(&mut self.core_idle, c, core);
        for &s in &m.siblings[c] {
            Self::put(&mut self.core_idle, s, core);
        }
    }

    /// Appends to `out` the CPUs with something runnable, in CPU order,
    /// then the idle ones in the nohz idle balancer's order: from the one
    /// after the first idle CPU, wrapping, that CPU last (see
    /// [`super::super::multi_lb::periodic`]). Returns how many are busy.
    pub fn tick_order(&self, n: usize, out: &mut Vec<usize>) -> usize {
        // The CPU positions word `w` holds (the last word may be partial).
        let ones = |w: usize| match n - w * 64 {
            v if v >= 64 => u64::MAX,
            v => (1u64 << v) - 1,
        };
        let mut push = |idle: bool| {
            for (w, &i) in self.idle.iter().enumerate() {
                let mut x = if idle { i } else { !i } & ones(w);
                while x != 0 {
                    out.push(w * 64 + x.trailing_zeros() as usize);
                    x &= x - 1;
                }
            }
            out.len()
        };
        let busy = push(false);
        push(true);
        // No idle CPU comes before the first one, so "from the one after
        // it, wrapping, itself last" is the idle CPUs in order with the
        // first moved to the end.
        if out.len() > busy {
            out[busy..].rotate_left(1);
        }
        busy
    }

    /// The lowest CPU of span `g` in `bits`.
    fn first(&self, bits: &[u64], g: usize) -> Option<usize> {
        self.spans[g]
            .iter()
            .zip(bits)
            .enumerate()
            .find_map(|(w, (&a, &b))| {
                let x = a & b;
                (x != 0).then(|| w * 64 + x.trailing_zeros() as usize)
            })
    }

    /// should_we_balance()'s CPU of group span `g` ([`super::balance::group_balancer`]).
    pub fn balancer(&self, m: &Machine, g: usize, smt_level: bool) -> Option<usize> {
        let on_idle_core = if smt_level {
            &self.idle
        } else {
            &self.core_idle
        };
        self.first(on_idle_core, g)
            .or_else(|| self.first(&self.idle, g))
            .or_else(|| m.span(g).first().copied())
    }
}

/// A CPU's runqueue.
#[derive(Debug, Clone, Default)]
pub struct Rq {
    pub curr: Option<Ent>,
    /// Runnable, not running, in the order they will run.
    pub queue: VecDeque<Ent>,
    pub(super) picked_at: f64,
    /// Bumped whenever the slice timer is re-armed or cancelled.
    pub(super) slice_gen: u64,
    pub(super) slice_armed: bool,
    pub worker_busy: bool,
    /// Probes on this CPU (running or waiting).
    pub probes: usize,
}

impl Rq {
    pub fn nr_running(&self) -> usize {
        self.worker_busy as usize + self.probes
    }
}

impl Multi<'_> {
    /// Sets CPU `c`'s worker busy or not and changes its probes by
    /// `probes`, keeping the span counts.
    pub(super) fn set_rq(&mut self, c: usize, worker_busy: bool, probes: isize) {
        let rq = &mut self.rqs[c];
        let (nr0, p0) = (rq.nr_running(), rq.probes);
        rq.worker_busy = worker_busy;
        rq.probes = rq.probes.checked_add_signed(probes).expect("probes >= 0");
        let (nr1, p1) = (rq.nr_running(), rq.probes);
        if (nr0 == 0) != (nr1 == 0) {
            self.idle.set_idle(self.m, c, nr1 == 0);
        }
        if (nr0 >= 2) != (nr1 >= 2) {
            if nr1 >= 2 {
                self.crowded += 1;
                self.overloaded = true;
            } else {
                self.crowded -= 1;
            }
        }
        for &g in &self.spans_of[c] {
            let s = &mut self.span_count[g];
            s.nr_running = s.nr_running + nr1 - nr0;
            s.idle_cpus = s.idle_cpus + (nr1 == 0) as usize - (nr0 == 0) as usize;
            s.probes = s.probes + p1 - p0;
            s.probe_cpus = s.probe_cpus + (p1 > 0) as usize - (p0 > 0) as usize;
        }
    }

    /// The task running on each SMT sibling of `c` (their speed depends on
    /// whether `c` runs anything), handed to `f` one by one: no list is
    /// built, as this runs at every switch between running and idle.
    fn each_sibling_task(&mut self, c: usize, f: fn(&mut Self, usize)) {
        if self.p.cpu.smt_share >= 1.0 {
            return;
        }
        let m = self.m;
        for &s in &m.siblings[c] {
            if let Some(Ent::Task(j)) = self.rqs[s].curr {
                f(self, j);
            }
        }
    }

    /// Makes `ent` the running entity of CPU `c` (None: idle); the caller
    /// has put the old one where it goes.
    pub(super) fn set_curr(&mut self, c: usize, ent: Option<Ent>) {
        let old = self.rqs[c].curr;
        // Only `c`'s own runqueue changes here, so its siblings run the
        // same tasks before and after.
        let flips = old.is_some() != ent.is_some();
        if flips {
            self.each_sibling_task(c, Self::settle);
        }
        if let Some(Ent::Task(o)) = old {
            self.settle(o);
            self.tasks[o].last_ran = self.t;
        }
        let rq = &mut self.rqs[c];
        rq.curr = ent;
        rq.picked_at = self.t;
        rq.slice_gen += 1;
        rq.slice_armed = false;
        if let Some(Ent::Task(new)) = ent {
            self.tasks[new].since = self.t;
            self.schedule_done(new);
        }
        if flips {
            self.each_sibling_task(c, Self::schedule_done);
        }
        if !self.rqs[c].queue.is_empty() {
            let at = self.ceil_tick(self.t + self.slice_ns);
            self.arm_slice(c, at);
        }
        if ent.is_none() {
            self.idle_now(c);
        }
    }

    /// The first tick strictly after `t` (ticks are at whole multiples of
    /// the tick from time 0, on every CPU at once).
    pub(super) fn ceil_tick(&self, t: f64) -> f64 {
        (crate::sim::load::floor(t / self.tick_ns - 1e-9) + 1.0) * self.tick_ns
    }

    /// When CPU `c`'s running entity gives way to one that has just become
    /// runnable there, as 6.12's EEVDF decides it for equal-weight tasks
    /// with no lag (kernel/sched/fair.c): picked at `P`, the entity's
    /// deadline is `P` plus the base slice `b` (place_entity); update_curr()
    /// renews a passed deadline to now + `b` (update_deadline), which the
    /// tick does at every tick past it; until its first renewal the entity
    /// is protected (RUN_TO_PARITY's protect_slice). The arrival comes at
    /// the average vruntime with its own deadline one slice ahead, so:
    /// - before the deadline passes, the running entity keeps the CPU to
    ///   the first tick after it (renewed there, with two runnable: resched);
    /// - after it passed (the renewal is then made by the arrival's own
    ///   update_curr(), which takes the protection away and leaves the two
    ///   deadlines tied, and a tie goes to the queued entity), the arrival
    ///   runs at once.
    ///
    /// Which side of its deadline the running entity is on at an arrival
    /// decides whether a waiting probe is cold by the time an idle CPU looks
    /// for work (task_hot), so this phase sets how often the probe moves:
    /// with the base slice shorter than a tick (HZ=250) the running entity
    /// is past its deadline for the last part of every tick.
    pub(super) fn eevdf_switch(&self, c: usize) -> f64 {
        let b = self.slice_ns;
        let mut d = self.rqs[c].picked_at + b;
        // Renewals at ticks: R1 = ceil_tick(P + b), then every m ticks.
        let r1 = self.ceil_tick(d);
        if self.t >= r1 {
            let step = self.ceil_tick(r1 + b) - r1;
            let k = crate::sim::load::floor((self.t - r1) / step);
            d = r1 + k * step + b;
        }
        if self.t >= d {
            self.t
        } else {
            self.ceil_tick(d)
        }
    }

    pub(super) fn arm_slice(&mut self, c: usize, at: f64) {
        let rq = &mut self.rqs[c];
        rq.slice_gen += 1;
        rq.slice_armed = true;
        let gen = rq.slice_gen;
        self.push(at, Ev::Slice(c, gen));
    }

    /// `ent` becomes runnable on CPU `c`.
    pub fn join(&mut self, c: usize, ent: Ent) {
        if let Ent::Task(i) = ent {
            self.set_rq(c, self.rqs[c].worker_busy, 1);
            self.tasks[i].cpu = c;
        }
        if self.rqs[c].curr.is_none() {
            self.set_curr(c, Some(ent));
            return;
        }
        self.rqs[c].queue.push_back(ent);
        if !self.rqs[c].slice_armed {
            // The running entity finishes the slice it is in.
            let at = self.eevdf_switch(c);
            self.arm_slice(c, at);
        }
    }

    /// `ent` stops being runnable on CPU `c`.
    pub fn leave(&mut self, c: usize, ent: Ent) {
        if let Ent::Task(i) = ent {
            self.settle(i);
            self.set_rq(c, self.rqs[c].worker_busy, -1);
        }
        if self.rqs[c].curr == Some(ent) {
            let next = self.rqs[c].queue.pop_front();
            self.set_curr(c, next);
        } else {
            self.rqs[c].queue.retain(|&x| x != ent);
            if self.rqs[c].queue.is_empty() {
                self.rqs[c].slice_gen += 1;
                self.rqs[c].slice_armed = false;
            }
        }
    }

    /// CPU `c` just went idle: newly-idle balancing after the profile's
    /// wake-up jitter.
    pub(super) fn idle_now(&mut self, c: usize) {
        // Its idle_stamp is set on entry, balancing or not.
        self.gate.went_idle(c, self.t);
        // sched_balance_newidle() returns at once unless the root domain is
        // overloaded ([`Multi::overloaded`]).
        if !self.overloaded {
            return;
        }
        let k = crate::sim::load::floor(self.lt(self.t) / self.load.period_ns) as u64;
        let u = hash3(self.spec.seed, c as u64, k);
        let j = -self.p.kernel.wakeup_jitter_us * 1e3 * (1.0 - u).ln();
        self.push(self.t + j, Ev::NewIdle(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;
    use crate::topology::presets;

    /// The tick's order from the idle bits is the order the pass had when
    /// it walked the runqueues: busy CPUs ascending, then the idle ones
    /// from the one after the first idle CPU, wrapping, that CPU last.
    #[test]
    fn the_tick_order_from_the_idle_bits_is_the_walked_one() {
        for preset in ["xeon-8167m-2n", "epyc-7551-8n", "ia64-4n"] {
            let m = Machine::new(&presets::find(preset).unwrap().topology()).unwrap();
            let n = m.len();
            let mut rng = Rng::new(7);
            for round in 0..200 {
                let mut bits = IdleBits::new(&m);
                // Every share of idle CPUs, none and all included.
                let share = round as f64 / 199.0;
                let idle: Vec<bool> = (0..n).map(|_| rng.unit() < share).collect();
                (0..n).for_each(|c| bits.set_idle(&m, c, idle[c]));
                let mut want: Vec<usize> = (0..n).filter(|&c| !idle[c]).collect();
                let busy = want.len();
                if let Some(ilb) = (0..n).find(|&c| idle[c]) {
                    want.extend((ilb + 1..n).chain(0..=ilb).filter(|&c| idle[c]));
                }
                let mut got = Vec::new();
                assert_eq!(bits.tick_order(n, &mut got), busy, "{preset}");
                assert_eq!(got, want, "{preset}, round {round}");
            }
        }
    }
}
