//! Several probes at once (`numalab jobs --backend sim`): N movable tasks
//! among the pinned load workers, as a discrete-event simulation over a
//! heap of events ordered by (time, sequence).
//!
//! The one-probe engine ([`super::engine`]) can treat the load as a closed
//! form because only the probe moves. Here probes compete with each other
//! for CPUs, so every CPU has a runqueue: the entity running (`curr`) and
//! the runnable ones waiting, served round-robin in slices of the EEVDF
//! base slice (what EEVDF gives equal-weight CPU-bound tasks). A worker
//! joins its CPU's queue when its duty cycle starts and leaves when it
//! ends. Probes run their phases (warm-up, timed passes) at the cache
//! model's speed for where their pages are and whether their SMT sibling
//! is busy, pay the refill of the caches they leave on every move, and
//! fault and migrate pages as NUMA balancing has them do.
//!
//! What moves them ([`super::multi_lb`]): exec placement on the idlest CPU
//! (sched_balance_exec), newly-idle balancing when a CPU runs out of work,
//! periodic balancing of every CPU at its domains' intervals (idle CPUs as
//! the nohz idle balancer does it for them, busy ones at busy_factor times
//! the interval), active balancing of a running probe, and NUMA balancing's
//! task_numa_migrate (a move to an idle CPU of the preferred node, or a
//! swap with a probe that prefers ours).

use super::balance::NewIdleStats;
use super::cold::ColdCaches;
use super::engine::{Cause, Move};
use super::load::LoadModel;
use super::machine::Machine;
use super::numa::{MemPolicy, Numa, NumaKnobs};
use super::profile::Profile;
use super::rng::{hash3, Rng};
use crate::load::LoadPolicy;
use crate::sys::numa::PolicyScope;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// One job: where it may run, where its memory goes, its forced node.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub allowed: Vec<usize>,
    pub mem: MemPolicy,
    pub forced: Option<usize>,
}

/// Everything one simulated `jobs` run needs; every job runs the same
/// probe.
#[derive(Debug, Clone)]
pub struct JobsSpec {
    pub jobs: Vec<Job>,
    pub numa: NumaKnobs,
    pub migration_cost_ns: f64,
    /// What each job's memory policy covers (the buffer, or the process).
    pub scope: PolicyScope,
    /// The load workers' memory policy: under MPOL_LOCAL none prefers a
    /// node.
    pub load_policy: LoadPolicy,
    pub buffer_bytes: u64,
    pub page_bytes: u64,
    pub accesses_per_iteration: u64,
    pub iterations: u32,
    pub seed: u64,
}

/// What happened to one job.
#[derive(Debug, Clone, Default)]
pub struct JobResult {
    pub moves: Vec<Move>,
    /// On-CPU time per CPU position, ns.
    pub run_ns: Vec<u64>,
    /// On-CPU time during the timed loop, ns.
    pub run_ns_loop: u64,
    pub start_cpu: usize,
    pub end_cpu: usize,
    pub warm_up_ns: u64,
    pub iterations_ns: Vec<u64>,
    pub end_ns: u64,
    /// Buffer pages per node index after warm-up.
    pub pages_after_warm_up: Vec<u64>,
    pub numa_pages_migrated: u64,
    pub total_numa_faults: u64,
    pub preferred: Option<usize>,
    pub move_numa: u64,
    pub swap_numa: u64,
    pub stick_numa: u64,
}

#[derive(Debug, Clone, Default)]
pub struct JobsResult {
    pub jobs: Vec<JobResult>,
    pub wall_ns: u64,
    pub events: u64,
}

/// A runnable entity of a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ent {
    Worker,
    Task(usize),
}

/// A CPU's runqueue.
#[derive(Debug, Clone, Default)]
pub struct Rq {
    pub curr: Option<Ent>,
    /// Runnable, not running, in the order they will run.
    pub queue: VecDeque<Ent>,
    picked_at: f64,
    /// Bumped whenever the slice timer is re-armed or cancelled.
    slice_gen: u64,
    slice_armed: bool,
    pub worker_busy: bool,
    /// Probes on this CPU (running or waiting).
    pub probes: usize,
}

impl Rq {
    pub fn nr_running(&self) -> usize {
        self.worker_busy as usize + self.probes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    WarmUp,
    Loop(u32),
    Done,
}

pub struct Task {
    pub cpu: usize,
    pub allowed: Vec<bool>,
    phase: Phase,
    work_left: f64,
    phase_start: f64,
    /// When it started running (while it is its CPU's curr).
    since: f64,
    /// When it last stopped running (task_hot's exec_start).
    pub last_ran: f64,
    gen: u64,
    pub numa: Numa,
    access_ns: Vec<f64>,
    dram_ns: Vec<f64>,
    warm_pages_done: f64,
    buffer_pages: usize,
    /// Its own machine noise on its time per access (1: none).
    noise_factor: f64,
    mem: MemPolicy,
    /// The caches its moves left cold, paid for as it refills them.
    cold: ColdCaches,
    pub res: JobResult,
}

impl Task {
    pub fn alive(&self) -> bool {
        self.phase != Phase::Done
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Load(usize),
    Slice(usize, u64),
    Done(usize, u64),
    NewIdle(usize),
    Tick,
    Scan(usize),
}

/// A heap entry: earliest time first, then the lower sequence number.
struct At(f64, u64, Ev);

impl PartialEq for At {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for At {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// The simulator's state for one jobs run.
pub struct Multi<'a> {
    pub m: &'a Machine,
    pub p: &'a Profile,
    pub load: &'a LoadModel,
    pub spec: &'a JobsSpec,
    pub rng: Rng,
    shift: f64,
    tick_ns: f64,
    slice_ns: f64,
    pub t: f64,
    pub rqs: Vec<Rq>,
    pub tasks: Vec<Task>,
    heap: BinaryHeap<At>,
    seq: u64,
    /// Failed balance attempts and the last periodic balance per (CPU,
    /// level).
    pub failed: Vec<Vec<u32>>,
    pub last_balance: Vec<Vec<f64>>,
    pub newidle: Vec<Vec<NewIdleStats>>,
    /// sched_group_capacity's `imbalance` flag, per span
    /// ([`super::multi_lb::try_balance`]); never set unless the profile's
    /// `kernel.group_imbalance` is on.
    pub group_imbalance: Vec<bool>,
    /// How many spans are flagged.
    pub flagged: usize,
    /// Probes waiting (runnable, not running) anywhere.
    pub waiting: usize,
    alive: usize,
    ticks: u64,
    events: u64,
}

impl<'a> Multi<'a> {
    pub fn new(m: &'a Machine, p: &'a Profile, load: &'a LoadModel, spec: &'a JobsSpec) -> Self {
        let mut rng = Rng::new(spec.seed);
        let shift = rng.unit() * load.period_ns;
        let tick_ns = 1e9 / p.kernel.hz as f64;
        // EEVDF base slice: 0.75 ms x (1 + log2(min(CPUs, 8))), enforced at
        // the tick (as the one-probe engine has it).
        let factor = 1.0 + (m.len().clamp(1, 8) as f64).log2().floor();
        let slice_ns = ((0.75e6 * factor) / tick_ns).ceil() * tick_ns;
        let levels = m.cpu_domains.iter().map(|d| d.len()).max().unwrap_or(0);
        let nodes = m.node_ids.len();
        let page_bytes = spec.page_bytes.max(4096);
        let buffer_pages = spec.buffer_bytes.div_ceil(page_bytes).max(1) as usize;
        let other = (p.kernel.other_pages as u64 * 4096)
            .div_ceil(page_bytes)
            .max(1) as usize;
        let tasks = spec
            .jobs
            .iter()
            .enumerate()
            .map(|(k, j)| {
                let mut allowed = vec![false; m.len()];
                j.allowed.iter().for_each(|&c| allowed[c] = true);
                Task {
                    cpu: 0,
                    allowed,
                    phase: Phase::WarmUp,
                    work_left: buffer_pages as f64,
                    phase_start: 0.0,
                    since: 0.0,
                    last_ran: 0.0,
                    gen: 0,
                    numa: Numa::new(
                        spec.numa.clone(),
                        nodes,
                        buffer_pages,
                        other,
                        page_bytes / 4096,
                        &j.mem,
                        j.forced,
                    )
                    .with_scope(spec.scope),
                    access_ns: vec![0.0; nodes],
                    dram_ns: vec![0.0; nodes],
                    warm_pages_done: 0.0,
                    buffer_pages,
                    noise_factor: p.speed_factor(spec.seed, k as u64),
                    mem: j.mem.clone(),
                    cold: ColdCaches::default(),
                    res: JobResult {
                        run_ns: vec![0; m.len()],
                        ..Default::default()
                    },
                }
            })
            .collect();
        Multi {
            m,
            p,
            load,
            spec,
            rng,
            shift,
            tick_ns,
            slice_ns,
            t: 0.0,
            rqs: vec![Rq::default(); m.len()],
            tasks,
            heap: BinaryHeap::new(),
            seq: 0,
            failed: vec![vec![0; levels]; m.len()],
            last_balance: vec![vec![f64::NEG_INFINITY; levels]; m.len()],
            newidle: vec![vec![NewIdleStats::default(); levels]; m.len()],
            group_imbalance: vec![false; m.span_count()],
            flagged: 0,
            waiting: 0,
            alive: spec.jobs.len(),
            ticks: 0,
            events: 0,
        }
    }

    /// Sets or clears span `g`'s imbalance flag.
    pub fn flag_group(&mut self, g: usize, on: bool) {
        if on && !self.p.kernel.group_imbalance {
            return;
        }
        if self.group_imbalance[g] != on {
            self.group_imbalance[g] = on;
            if on {
                self.flagged += 1;
            } else {
                self.flagged -= 1;
            }
        }
    }

    /// Load time of simulated time `t`.
    pub fn lt(&self, t: f64) -> f64 {
        t + self.shift
    }

    pub fn migration_cost_ns(&self) -> f64 {
        self.spec.migration_cost_ns
    }

    fn push(&mut self, at: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(At(at.max(self.t), self.seq, ev));
    }

    /// Whether a CPU has anything running.
    pub fn cpu_busy(&self, c: usize) -> bool {
        self.rqs[c].curr.is_some()
    }

    /// Whether a worker prefers its own node by now
    /// ([`NumaKnobs::workers_prefer_own_node`]).
    pub fn workers_prefer_own_node(&self) -> bool {
        self.spec
            .numa
            .workers_prefer_own_node(self.spec.load_policy, self.t)
    }

    /// Runs every job to its exit.
    pub fn run(mut self) -> JobsResult {
        self.begin();
        while self.advance(u64::MAX) {}
        self.result()
    }

    /// The workers as the load has them at time 0, the jobs exec'd.
    pub fn begin(&mut self) {
        for c in 0..self.m.len() {
            let busy = self.load.busy(c, self.lt(0.0));
            if busy {
                self.rqs[c].worker_busy = true;
                self.rqs[c].curr = Some(Ent::Worker);
                self.rqs[c].picked_at = -self.rng.unit() * self.slice_ns;
            }
            self.schedule_load(c);
        }
        for i in 0..self.tasks.len() {
            super::multi_lb::exec_place(self, i);
        }
        let first_tick = self.tick_ns;
        self.push(first_tick, Ev::Tick);
    }

    /// Handles up to `max` events; false once every job has exited.
    pub fn advance(&mut self, max: u64) -> bool {
        for _ in 0..max {
            if self.alive == 0 || self.events > 2_000_000_000 {
                // (The second: a model bug, not a result.)
                return false;
            }
            let Some(At(at, _, ev)) = self.heap.pop() else {
                return false;
            };
            self.events += 1;
            self.t = at;
            self.handle(ev);
        }
        self.alive > 0
    }

    pub fn result(self) -> JobsResult {
        JobsResult {
            wall_ns: self.t as u64,
            events: self.events,
            jobs: self.tasks.into_iter().map(|t| t.res).collect(),
        }
    }

    /// Probes queued behind another entity, counted from the queues (what
    /// `waiting` must equal).
    pub fn queued_probes(&self) -> usize {
        self.rqs
            .iter()
            .flat_map(|rq| rq.queue.iter())
            .filter(|e| matches!(e, Ent::Task(_)))
            .count()
    }

    fn schedule_load(&mut self, c: usize) {
        let next = self.load.next_transition(c, self.lt(self.t)) - self.shift;
        if next.is_finite() {
            self.push(next, Ev::Load(c));
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Load(c) => {
                let busy = self.load.busy(c, self.lt(self.t) + 1e-6);
                if busy != self.rqs[c].worker_busy {
                    self.rqs[c].worker_busy = busy;
                    if busy {
                        self.join(c, Ent::Worker);
                    } else {
                        self.leave(c, Ent::Worker);
                    }
                }
                self.schedule_load(c);
            }
            Ev::Slice(c, gen) => {
                if gen == self.rqs[c].slice_gen {
                    self.rqs[c].slice_armed = false;
                    if let Some(next) = self.q_pop(c) {
                        let old = self.rqs[c].curr.expect("a slice ends on a busy CPU");
                        self.q_push(c, old);
                        self.set_curr(c, Some(next));
                    }
                }
            }
            Ev::Done(i, gen) => {
                if gen == self.tasks[i].gen && self.tasks[i].alive() {
                    self.settle(i);
                    self.end_phase(i);
                }
            }
            Ev::NewIdle(c) => super::multi_lb::newidle(self, c),
            Ev::Tick => {
                self.ticks += 1;
                super::multi_lb::periodic(self, self.ticks as usize);
                let next = self.t + self.tick_ns;
                self.push(next, Ev::Tick);
            }
            Ev::Scan(i) => self.numa_scan(i),
        }
    }

    /// Running tasks on the SMT siblings of `c` (their speed depends on
    /// whether `c` runs anything).
    fn sibling_tasks(&self, c: usize) -> Vec<usize> {
        if self.p.cpu.smt_share >= 1.0 {
            return Vec::new();
        }
        self.m.siblings[c]
            .iter()
            .filter_map(|&s| match self.rqs[s].curr {
                Some(Ent::Task(j)) => Some(j),
                _ => None,
            })
            .collect()
    }

    fn q_push(&mut self, c: usize, e: Ent) {
        self.waiting += matches!(e, Ent::Task(_)) as usize;
        self.rqs[c].queue.push_back(e);
    }

    fn q_pop(&mut self, c: usize) -> Option<Ent> {
        let e = self.rqs[c].queue.pop_front();
        self.waiting -= matches!(e, Some(Ent::Task(_))) as usize;
        e
    }

    fn q_remove(&mut self, c: usize, e: Ent) {
        let q = &mut self.rqs[c].queue;
        let before = q.len();
        q.retain(|&x| x != e);
        if q.len() < before && matches!(e, Ent::Task(_)) {
            self.waiting -= 1;
        }
    }

    /// Makes `ent` the running entity of CPU `c` (None: idle); the caller
    /// has put the old one where it goes.
    fn set_curr(&mut self, c: usize, ent: Option<Ent>) {
        let old = self.rqs[c].curr;
        let sibs = if old.is_some() != ent.is_some() {
            self.sibling_tasks(c)
        } else {
            Vec::new()
        };
        sibs.iter().for_each(|&j| self.settle(j));
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
        sibs.iter().for_each(|&j| self.schedule_done(j));
        if !self.rqs[c].queue.is_empty() {
            self.arm_slice(c, self.t + self.slice_ns);
        }
        if ent.is_none() {
            self.idle_now(c);
        }
    }

    fn arm_slice(&mut self, c: usize, at: f64) {
        let rq = &mut self.rqs[c];
        rq.slice_gen += 1;
        rq.slice_armed = true;
        let gen = rq.slice_gen;
        self.push(at, Ev::Slice(c, gen));
    }

    /// `ent` becomes runnable on CPU `c`.
    pub fn join(&mut self, c: usize, ent: Ent) {
        if let Ent::Task(i) = ent {
            self.rqs[c].probes += 1;
            self.tasks[i].cpu = c;
        }
        if self.rqs[c].curr.is_none() {
            self.set_curr(c, Some(ent));
            return;
        }
        self.q_push(c, ent);
        if !self.rqs[c].slice_armed {
            // The running entity finishes the slice it is in.
            let s = self.slice_ns;
            let ran = (self.t - self.rqs[c].picked_at).max(0.0);
            let at = self.rqs[c].picked_at + (super::load::floor(ran / s) + 1.0) * s;
            self.arm_slice(c, at);
        }
    }

    /// `ent` stops being runnable on CPU `c`.
    pub fn leave(&mut self, c: usize, ent: Ent) {
        if let Ent::Task(i) = ent {
            self.settle(i);
            self.rqs[c].probes -= 1;
        }
        if self.rqs[c].curr == Some(ent) {
            let next = self.q_pop(c);
            self.set_curr(c, next);
        } else {
            self.q_remove(c, ent);
            if self.rqs[c].queue.is_empty() {
                self.rqs[c].slice_gen += 1;
                self.rqs[c].slice_armed = false;
            }
        }
    }

    /// CPU `c` just went idle: newly-idle balancing after the profile's
    /// wake-up jitter (as the one-probe engine times it).
    fn idle_now(&mut self, c: usize) {
        // Nothing waits, nothing can be pulled; but while a group is flagged
        // the attempt still matters, since ending balanced clears the flag.
        if self.waiting == 0 && self.flagged == 0 {
            return;
        }
        let k = super::load::floor(self.lt(self.t) / self.load.period_ns) as u64;
        let u = hash3(self.spec.seed, c as u64, k);
        let j = -self.p.kernel.wakeup_jitter_us * 1e3 * (1.0 - u).ln();
        self.push(self.t + j, Ev::NewIdle(c));
    }

    /// Moves task `i` to CPU `to` now.
    pub fn move_task(&mut self, i: usize, to: usize, cause: Cause) {
        let from = self.tasks[i].cpu;
        if from == to {
            return;
        }
        self.settle(i);
        self.tasks[i].res.moves.push(Move {
            t_ns: self.t as u64,
            from,
            to,
            cause,
        });
        if cause == Cause::NumaBalancing {
            self.tasks[i].res.move_numa += 1;
        }
        // The misses made where it was are owed at that node's speed;
        // from here on it refills what the move left cold.
        self.pay_cold(i);
        self.tasks[i].cold.cool(self.m.relation(from, to));
        self.leave(from, Ent::Task(i));
        // ENQUEUE_MIGRATED zeroes exec_start: cold until it runs again.
        self.tasks[i].last_ran = f64::NEG_INFINITY;
        self.join(to, Ent::Task(i));
    }
}

#[path = "multi_task.rs"]
mod task;

#[cfg(test)]
#[path = "multi_tests.rs"]
mod tests;
