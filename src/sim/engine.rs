//! One simulated sample: the probe (one CPU-bound task) among the pinned
//! load workers, from exec to exit, as a discrete-event simulation. Events
//! are ordered by (time, sequence): at each step every pending kind of
//! event proposes its next time and the earliest wins, ties going to the
//! lower sequence number (the order of [`Ev`]), so a seed gives one result.
//!
//! What moves the probe, after kernel/sched/fair.c (6.12):
//! - newly-idle balancing (sched_balance_newidle): a worker of a CPU the
//!   probe may use goes to sleep while the probe shares its CPU with that
//!   CPU's worker (the kernel's gate on the CPU's average idle time is
//!   taken as always open: see the NewIdle event);
//! - nohz idle balancing: the probe's CPU ticks with two tasks runnable and
//!   kicks the idle load balancer, which balances every idle CPU whose
//!   domains are due (interval = span weight in ms), in CPU order from the
//!   first idle CPU;
//! - at each attempt [`super::balance`] decides as find_busiest_group and
//!   calculate_imbalance do, and can_migrate_task refuses a running probe,
//!   a cache-hot one (waited less than migration_cost_ns since it last
//!   ran), or one whose move degrades NUMA locality, until the domain's
//!   failures pass cache_nice_tries; beyond cache_nice_tries + 2 the
//!   active balancer moves it even while it runs;
//! - NUMA balancing ([`super::numa`], scanned in `engine_numa.rs`):
//!   numa_migrate_preferred() asks [`super::numa_move`]'s
//!   task_numa_migrate() for a CPU on its preferred node, which the
//!   kernel grants only where the nodes stay balanced.
//!
//! While the probe shares a CPU, it and the worker alternate in slices of
//! the EEVDF base slice rounded up to a tick, the probe finishing the slice
//! it is in first. Its speed comes from the profile's cache model: the
//! node it runs on against where its pages are, its SMT sibling's worker,
//! and after each move the refill of the caches it left.

use super::balance::NewIdleStats;
use super::balance::{self, Kind};
use super::cold::ColdCaches;
use super::group_imb::{GroupImbalance, NewIdleAttempts};
use super::load::{IdleStarts, LoadModel};
use super::machine::Machine;
use super::numa::Numa;
use super::profile::Profile;
pub use super::rng::{hash3, Rng};
pub use super::sample::{Cause, Move, SampleResult, SampleSpec};
use crate::topology::Relation;

/// Events one sample may take before the engine gives up on it as a model
/// bug rather than a result.
const MAX_STEPS: u64 = 500_000_000;

/// Moves of the probe per simulated millisecond past which a sample is a
/// runaway model, not a result (a real kernel makes a few a millisecond at
/// the very most), once there are at least [`RUNAWAY_MOVES_MIN`].
const RUNAWAY_MOVES_PER_MS: f64 = 100.0;
const RUNAWAY_MOVES_MIN: f64 = 100_000.0;

/// Event kinds, in tie-break order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Phase,
    CurLoad,
    SiblingLoad,
    NewIdle,
    Tick,
    NumaScan,
}

/// The earliest proposed event: (time, kind), ties to the lower kind.
struct Next(f64, Ev);

impl Next {
    fn offer(&mut self, at: f64, ev: Ev) {
        if at < self.0 || (at == self.0 && ev < self.1) {
            self.0 = at;
            self.1 = ev;
        }
    }
}

enum Phase {
    WarmUp,
    Loop(u32),
    Done,
}

/// The simulator's state for one sample.
pub struct Engine<'a> {
    pub m: &'a Machine,
    pub p: &'a Profile,
    pub load: &'a LoadModel,
    spec: &'a SampleSpec,
    idle_starts: IdleStarts,
    pub allowed: Vec<bool>,
    rng: Rng,
    /// Load time = sample time + shift.
    shift: f64,
    tick_ns: f64,
    slice_ns: f64,
    pub t: f64,
    pub cur: usize,
    /// Current sharing episode: (start, the probe's remaining slice).
    share: Option<(f64, f64)>,
    pub numa: Numa,
    access_ns: Vec<f64>,
    dram_ns: Vec<f64>,
    /// Failed balance attempts per (CPU, domain index in its list).
    pub failed: Vec<Vec<u32>>,
    pub next_balance: Vec<Vec<f64>>,
    /// NI_RANDOM state per (CPU, level): calls, weighted successes, ratio,
    /// and the load time its calls were last counted to.
    newidle: Vec<Vec<NewIdleStats>>,
    /// The pending idle start while the probe waits: (load time, CPU, CPU
    /// skipped). It stays pending until its newly-idle event fires, even
    /// when another event (its SMT sibling's own transition) lands on it.
    next_idle_memo: Option<(f64, usize, usize)>,
    /// The load time of the last idle start whose newly-idle event fired in
    /// this sharing episode: the next one is searched from there, so one
    /// that began while that event's wake-up jitter ran is not skipped.
    idle_consumed: Option<f64>,
    /// The probe was moved onto a busy CPU and has not run there yet: the
    /// enqueue with ENQUEUE_MIGRATED zeroed its exec_start, so it is cold.
    migrated_waiting: bool,
    /// should_we_balance()'s answer per group span, with the time asked.
    pub balancer_cache: std::collections::HashMap<usize, (f64, Option<usize>)>,
    /// Groups flagged imbalanced by failed attempts ([`GroupImbalance`]).
    pub imb: GroupImbalance,
    pub(super) res: SampleResult,
    phase: Phase,
    work_left: f64,
    phase_start: f64,
    warm_pages_done: f64,
    buffer_pages: usize,
    /// This sample's machine noise on the time per access (1: none).
    noise_factor: f64,
    /// The caches its moves left cold, paid for as it refills them.
    cold: ColdCaches,
}

impl<'a> Engine<'a> {
    pub fn new(
        m: &'a Machine,
        p: &'a Profile,
        load: &'a LoadModel,
        spec: &'a SampleSpec,
    ) -> Engine<'a> {
        let mut rng = Rng::new(spec.seed);
        let shift = rng.unit() * load.period_ns;
        let tick_ns = 1e9 / p.kernel.hz as f64;
        // EEVDF base slice: 0.75 ms x (1 + log2(min(CPUs, 8))), enforced at
        // the tick.
        let factor = 1.0 + (m.len().clamp(1, 8) as f64).log2().floor();
        let slice_ns = ((0.75e6 * factor) / tick_ns).ceil() * tick_ns;
        // Touching first, the probe runs anywhere until its warm-up ends.
        let all: Vec<usize> = (0..m.len()).collect();
        let allowed_now = if spec.touch_first {
            &all
        } else {
            &spec.allowed
        };
        let mut allowed = vec![false; m.len()];
        allowed_now.iter().for_each(|&c| allowed[c] = true);
        let nodes = m.node_ids.len();
        let page_bytes = spec.page_bytes.max(4096);
        let buffer_pages = spec.buffer_bytes.div_ceil(page_bytes).max(1) as usize;
        let other = (p.kernel.other_pages as u64 * 4096)
            .div_ceil(page_bytes)
            .max(1) as usize;
        let numa = Numa::new(
            spec.numa.clone(),
            nodes,
            buffer_pages,
            other,
            page_bytes / 4096,
            &spec.mem,
            spec.forced,
        )
        .with_scope(spec.scope);
        let levels = m.cpu_domains.iter().map(|d| d.len()).max().unwrap_or(0);
        Engine {
            idle_starts: IdleStarts::new(load, allowed_now),
            m,
            p,
            load,
            spec,
            allowed,
            rng,
            shift,
            tick_ns,
            slice_ns,
            t: 0.0,
            cur: 0,
            share: None,
            numa,
            access_ns: vec![0.0; nodes],
            dram_ns: vec![0.0; nodes],
            failed: vec![vec![0; levels]; m.len()],
            next_balance: vec![vec![0.0; levels]; m.len()],
            newidle: vec![vec![NewIdleStats::default(); levels]; m.len()],
            balancer_cache: std::collections::HashMap::new(),
            imb: GroupImbalance::new(p.kernel.group_imbalance),
            next_idle_memo: None,
            idle_consumed: None,
            migrated_waiting: false,
            res: SampleResult {
                run_ns: vec![0; m.len()],
                run_ns_loop: vec![0; m.len()],
                balance: vec![Default::default(); levels],
                ..Default::default()
            },
            phase: Phase::WarmUp,
            work_left: buffer_pages as f64,
            phase_start: 0.0,
            warm_pages_done: 0.0,
            buffer_pages,
            noise_factor: p.speed_factor(spec.noise_seed, 0),
            cold: ColdCaches::default(),
        }
    }

    /// Load time of sample time `t`.
    pub fn lt(&self, t: f64) -> f64 {
        t + self.shift
    }

    pub fn busy(&self, c: usize, t: f64) -> bool {
        self.load.busy(c, self.lt(t))
    }

    pub fn busy_count(&self, span: usize, t: f64) -> usize {
        self.load.busy_count(span, self.lt(t))
    }

    /// Whether the probe is on its CPU (not waiting behind the worker).
    pub fn probe_running(&self, t: f64) -> bool {
        match self.share {
            None => true,
            Some((s0, first)) => {
                let dt = t - s0;
                if dt < first {
                    return true;
                }
                super::load::floor((dt - first) / self.slice_ns) as u64 % 2 == 1
            }
        }
    }

    /// When the probe last stopped running (for task_hot), while waiting.
    pub fn last_ran(&self, t: f64) -> f64 {
        match self.share {
            None => t,
            Some((s0, first)) => {
                let dt = t - s0;
                if dt < first {
                    return t;
                }
                let k = super::load::floor((dt - first) / self.slice_ns);
                if k == 0.0 && self.migrated_waiting {
                    // Not run since the move: exec_start is 0.
                    return f64::NEG_INFINITY;
                }
                s0 + first + k * self.slice_ns
            }
        }
    }

    /// Whether the load's workers prefer their own node by `t`
    /// ([`NumaKnobs::workers_prefer_own_node`]).
    pub fn workers_prefer_own_node(&self, t: f64) -> bool {
        self.numa
            .knobs
            .workers_prefer_own_node(self.spec.load_policy, t)
    }

    pub fn migration_cost_ns(&self) -> f64 {
        self.spec.migration_cost_ns
    }

    pub fn tick_ns(&self) -> f64 {
        self.tick_ns
    }

    pub fn sharing(&self) -> bool {
        self.share.is_some()
    }

    /// Time per access and mean DRAM latency from each node, for where
    /// the pages are now.
    pub(super) fn recompute_access(&mut self) {
        let per_node = self.numa.buffer_pages_per_node().to_vec();
        super::access_by_node(
            self.p,
            self.m,
            &per_node,
            self.spec.buffer_bytes,
            self.noise_factor,
            &mut self.dram_ns,
            &mut self.access_ns,
        );
    }

    /// The probe's progress per ns now: accesses (or pages in warm-up).
    fn speed(&self) -> f64 {
        let share = if self.sharing() { 0.5 } else { 1.0 };
        let smt = if self.m.siblings[self.cur]
            .iter()
            .any(|&s| self.busy(s, self.t))
        {
            self.p.cpu.smt_share
        } else {
            1.0
        };
        match self.phase {
            Phase::WarmUp => self.p.kernel.touch_pages_per_us / 1000.0 * share * smt,
            Phase::Loop(_) => share * smt / self.access_ns[self.m.node[self.cur]],
            Phase::Done => 0.0,
        }
    }

    /// Starts or ends a sharing episode, keeping the imbalance flags'
    /// bookkeeping: between episodes the probe's groups balance.
    fn set_share(&mut self, share: Option<(f64, f64)>) {
        match (self.share.is_some(), share.is_some()) {
            (true, false) => self.imb.share_ended(self.t),
            (false, true) if self.imb.any() => {
                let newidle = NewIdleAttempts {
                    seed: self.spec.seed,
                    period_ns: self.load.period_ns,
                    ni_random: self.p.kernel.ni_random,
                    stats: &self.newidle,
                };
                let (m, load, shift, cur, t) = (self.m, self.load, self.shift, self.cur, self.t);
                self.imb.share_started(m, load, shift, cur, t, &newidle);
            }
            _ => {}
        }
        self.share = share;
        // A new episode (or none) searches idle starts afresh.
        self.next_idle_memo = None;
        self.idle_consumed = None;
        self.migrated_waiting = false;
    }

    /// Assigns first-touch nodes to warm-up pages touched so far.
    fn place_warm_pages(&mut self, upto: f64) {
        let from = self.warm_pages_done as usize;
        let to = (upto as usize).min(self.buffer_pages);
        let other = self.numa.other_pages;
        let nodes = self.m.node_ids.len();
        for i in from..to {
            let node = self.spec.mem.first_touch(i, self.m.node[self.cur]);
            self.numa.place(other + i, node.min(nodes - 1));
        }
        self.warm_pages_done = upto.max(self.warm_pages_done);
    }

    /// Runs the sample to the probe's exit.
    pub fn run(mut self) -> SampleResult {
        let a: Vec<usize> = (0..self.m.len()).filter(|&c| self.allowed[c]).collect();
        // Exec places the task on an idle CPU (sched_balance_exec picks the
        // idlest); then the probe sets its own affinity.
        let idle: Vec<usize> = (0..self.m.len()).filter(|&c| !self.busy(c, 0.0)).collect();
        let start = if idle.is_empty() {
            self.rng.below(self.m.len())
        } else {
            idle[self.rng.below(idle.len())]
        };
        self.cur = start;
        self.res.start_cpu = start;
        let other = self.numa.other_pages;
        let start_node = self.m.node[start];
        (0..other).for_each(|p| self.numa.place(p, start_node));
        if self.busy(start, 0.0) {
            self.set_share(Some((0.0, 0.0)));
        }
        if !self.allowed[start] {
            self.bind_move(&a);
        }
        self.recompute_access();
        // The probe's whole work at the slowest access this machine has,
        // a hundred times over, and at least an hour: a sample not done by
        // then made no progress (ia64-4n with the CPU floating simulated
        // 8 days without finishing its loop, its moves list growing until
        // memory ran out).
        let slowest = self.access_ns.iter().copied().fold(1.0, f64::max);
        let work = self.spec.accesses_per_iteration as f64 * f64::from(self.spec.iterations.max(1));
        let limit_ns = (100.0 * work * slowest).max(3600e9);
        let mut guard = 0u64;
        while !matches!(self.phase, Phase::Done) {
            if self.t > limit_ns {
                self.res.runaway = Some(format!(
                    "the probe's loop not done after {:.0} s simulated, a hundred times its \
                     work at the slowest access",
                    self.t / 1e9
                ));
                break;
            }
            guard += 1;
            if guard > MAX_STEPS {
                self.res.runaway = Some(format!(
                    "{guard} events without the probe finishing ({:.3} s simulated)",
                    self.t / 1e9
                ));
                break;
            }
            // The kernel cannot move one task more than a few times a
            // millisecond (each move is a scheduler decision on a tick or
            // a wake-up); a model that does moves the probe back and forth
            // at no cost in time, and its moves list grows until memory
            // runs out (24 GB in 8 minutes, ia64-4n with the CPU floating).
            // Checked every 2^16 events, so the check costs nothing.
            if guard % (1 << 16) == 0 {
                let moves = self.res.moves.len() as f64;
                if moves > RUNAWAY_MOVES_MIN && moves > RUNAWAY_MOVES_PER_MS * self.t / 1e6 {
                    self.res.runaway = Some(format!(
                        "{} moves of the probe in {:.3} ms simulated (a ping-pong no kernel makes)",
                        self.res.moves.len(),
                        self.t / 1e6
                    ));
                    break;
                }
            }
            self.step();
        }
        self.res.end_cpu = self.cur;
        self.res.wall_ns = self.t as u64;
        self.res.pages_at_end = self.numa.buffer_pages_per_node().to_vec();
        self.res.numa_scan_seq = self.numa.scan_seq;
        self.res.numa_pages_migrated = self.numa.pages_migrated;
        self.res.numa_faults = self.numa.faults().to_vec();
        self.res.total_numa_faults = self.numa.total_faults;
        self.res.preferred = self.numa.preferred;
        self.res.events = guard;
        self.res
    }

    fn step(&mut self) {
        let t = self.t;
        let v = self.speed();
        let mut next = Next(
            if v > 0.0 {
                t + self.work_left.max(0.0) / v
            } else {
                f64::INFINITY
            },
            Ev::Phase,
        );
        next.offer(
            self.load.next_transition(self.cur, self.lt(t)) - self.shift,
            Ev::CurLoad,
        );
        if self.p.cpu.smt_share < 1.0 {
            for &s in &self.m.siblings[self.cur] {
                next.offer(
                    self.load.next_transition(s, self.lt(t)) - self.shift,
                    Ev::SiblingLoad,
                );
            }
        }
        let mut newidle_cpu = None;
        if self.sharing() {
            // The next idle start after t is the same until it passes (or
            // the probe moves): most steps reuse it instead of a search.
            let lt = self.lt(t);
            let upcoming = match self.next_idle_memo {
                Some((at, c, skip)) if skip == self.cur => Some((at, c)),
                _ => {
                    let from = self.idle_consumed.unwrap_or(lt);
                    let n = self.idle_starts.next_after(from, self.cur);
                    self.next_idle_memo = n.map(|(at, c)| (at, c, self.cur));
                    n
                }
            };
            if let Some((at, c)) = upcoming {
                let raw = at;
                let k = super::load::floor(at / self.load.period_ns) as u64;
                let u = hash3(self.spec.seed, c as u64, k);
                let j = -self.p.kernel.wakeup_jitter_us * 1e3 * (1.0 - u).ln();
                let at = (at - self.shift + j).max(t);
                newidle_cpu = Some((c, raw));
                next.offer(at, Ev::NewIdle);
            }
            next.offer(
                (super::load::floor(t / self.tick_ns) + 1.0) * self.tick_ns,
                Ev::Tick,
            );
        }
        if self.numa.knobs.enabled && matches!(self.phase, Phase::Loop(_) | Phase::WarmUp) {
            next.offer(self.numa.next_scan_ns.max(t), Ev::NumaScan);
        }
        let best = (next.0, next.1);
        let (at, ev) = best;
        let dt = (at - t).max(0.0);
        // Progress and residency over [t, at).
        let run_share = if self.sharing() { 0.5 } else { 1.0 };
        self.res.run_ns[self.cur] += (dt * run_share) as u64;
        if matches!(self.phase, Phase::Loop(_)) {
            self.res.run_ns_loop[self.cur] += (dt * run_share) as u64;
        }
        self.work_left -= v * dt;
        let warm_up = matches!(self.phase, Phase::WarmUp);
        let lines = super::cold::lines_per_unit(warm_up, self.spec.page_bytes);
        self.cold.advance(v * dt, lines);
        if matches!(self.phase, Phase::WarmUp) {
            let done = self.buffer_pages as f64 - self.work_left.max(0.0);
            self.place_warm_pages(done);
        }
        self.t = at;
        match ev {
            // The pass's misses after a move are part of it: the pass ends
            // once they are paid too.
            Ev::Phase if self.pay_cold() >= 0.5 => {}
            Ev::Phase => self.end_phase(),
            Ev::CurLoad => {
                let share = if self.busy(self.cur, at + 1e-6) {
                    // The probe finishes the slice it is in, then alternates.
                    Some((at, self.rng.unit() * self.slice_ns))
                } else {
                    None
                };
                self.set_share(share);
            }
            Ev::SiblingLoad => {}
            Ev::NewIdle => {
                let (x, raw) = newidle_cpu.expect("newidle event has a CPU");
                self.next_idle_memo = None;
                self.idle_consumed = Some(raw);
                // Every idle entry makes a newly-idle balance. The kernel
                // skips it while `avg_idle` (the CPU's idle periods, capped
                // at twice max(migration_cost_ns, the costliest balance)) is
                // below the domain's `max_newidle_lb_cost`, the longest a
                // newly-idle balance there took: microseconds on hardware.
                // The model takes that cost as nil, so any idle period
                // opens the gate (migration_cost_ns only raises the cap);
                // a load with no idle periods has no idle starts at all.
                if !self.busy(x, at) {
                    if let Some(level) = self.m.common_level(x, self.cur) {
                        if self.p.kernel.ni_random {
                            let period = self.load.period_ns;
                            let lt = self.lt(at);
                            let u = self.rng.below(1024) as u32;
                            let st = &mut self.newidle[x][level];
                            // Every idle period of x made one call here; all
                            // but the ones simulated found nothing to pull.
                            st.catch_up(lt, period);
                            st.calls_plus(0);
                            let weight = 1 + st.ratio;
                            if u <= weight {
                                let pulled = balance::try_pull(self, x, level, Kind::NewlyIdle);
                                let w = (1024 + weight / 2) / weight;
                                let st = &mut self.newidle[x][level];
                                // The roll's own call was counted above.
                                st.success += w * pulled as u32;
                            }
                        } else {
                            balance::try_pull(self, x, level, Kind::NewlyIdle);
                        }
                    }
                }
                // Past this worker's idle start, whatever happened.
                self.t = at + 1e-3;
            }
            Ev::Tick => balance::nohz_idle_balance(self),
            Ev::NumaScan => self.numa_scan(),
        }
        if self.share.is_some() && !self.busy(self.cur, self.t) {
            self.set_share(None);
        }
    }

    fn end_phase(&mut self) {
        let t = self.t;
        let was_warm_up = matches!(self.phase, Phase::WarmUp);
        match self.phase {
            Phase::WarmUp => {
                self.place_warm_pages(self.buffer_pages as f64);
                self.res.warm_up_ns = (t - self.phase_start) as u64;
                self.res.pages_after_warm_up = self.numa.buffer_pages_per_node().to_vec();
                self.res.loop_start_ns = t as u64;
                self.res.loop_start_cpu = Some(self.cur);
                self.recompute_access();
                let dram = self.dram_ns[self.m.node[self.cur]];
                self.cold.forgive(self.p, self.spec.buffer_bytes, dram);
                self.phase = Phase::Loop(0);
            }
            Phase::Loop(i) => {
                self.res.iterations_ns.push((t - self.phase_start) as u64);
                self.phase = if i + 1 >= self.spec.iterations {
                    Phase::Done
                } else {
                    Phase::Loop(i + 1)
                };
            }
            Phase::Done => return,
        }
        self.phase_start = t;
        self.work_left = self.spec.accesses_per_iteration as f64;
        if was_warm_up && self.spec.touch_first {
            // After the loop's work is set, so the move's refill is owed
            // by the loop.
            self.bind_after_touch();
        }
    }

    /// The relation of two CPU positions (for the balancer's tests).
    pub fn relation(&self, a: usize, b: usize) -> Relation {
        self.m.relation(a, b)
    }
}

#[path = "engine_move.rs"]
mod moves;

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
