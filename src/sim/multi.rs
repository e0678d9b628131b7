//! The engine: any number of probes (one for a `run` sample, N for
//! `numalab jobs --backend sim`) among the pinned load workers, as a
//! discrete-event simulation over a heap of events ordered by (time,
//! sequence), the load's own transitions taken in their fixed order
//! ([`super::load::Transitions`]) beside it.
//!
//! Every CPU has a runqueue ([`rq`]): the entity running (`curr`) and the
//! runnable ones waiting, taking turns as 6.12's EEVDF gives them to
//! equal-weight CPU-bound tasks (the running one keeps the CPU to the first
//! tick past its deadline). A worker joins its CPU's queue when its duty
//! cycle starts and leaves when it ends. Probes ([`task`]) run their phases
//! (warm-up, timed passes) at the cache model's speed for where their pages
//! are and whether their SMT sibling is busy, pay for the caches their
//! moves leave cold as they refill them, and fault and migrate pages as
//! NUMA balancing has them do.
//!
//! What moves them ([`super::multi_lb`]): exec placement on the idlest CPU
//! (sched_balance_exec), newly-idle balancing when a CPU runs out of work,
//! periodic balancing at each tick (busy CPUs at busy_factor times their
//! domains' intervals, then the nohz idle balancer over the idle ones, in
//! the kernel's order), active balancing of a running probe, and NUMA
//! balancing's task_numa_migrate (a move to an idle CPU of the preferred
//! node, or a swap with a probe that prefers ours).

use super::balance::NewIdleStats;
use super::cold::ColdCaches;
use super::load::LoadModel;
use super::machine::Machine;
use super::multi_gate::NewIdleGate;
use super::numa::{MemPolicy, Numa, NumaKnobs};
use super::profile::Profile;
use super::rng::Rng;
use super::sample::{Cause, Move};
use crate::load::LoadPolicy;
use crate::sys::numa::PolicyScope;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One job: where it may run, where its memory goes, its forced node.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub allowed: Vec<usize>,
    pub mem: MemPolicy,
    pub forced: Option<usize>,
    /// `--first-touch start`: it may run anywhere until its warm-up has
    /// touched the buffer, and binds to `allowed` only then (the RFC's
    /// order); false: bound from exec.
    pub touch_first: bool,
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
    /// The draw of the machine's noise: job k's time per access is scaled
    /// by `Profile::speed_factor(noise_seed, k)`.
    pub noise_seed: u64,
}

/// What happened to one job.
#[derive(Debug, Clone, Default)]
pub struct JobResult {
    pub moves: Vec<Move>,
    /// On-CPU time per CPU position, ns.
    pub run_ns: Vec<u64>,
    /// On-CPU time per CPU position during the timed loop, ns.
    pub run_ns_loop: Vec<u64>,
    pub start_cpu: usize,
    pub end_cpu: usize,
    /// The CPU and the time its timed loop started.
    pub loop_start_cpu: Option<usize>,
    pub loop_start_ns: u64,
    pub warm_up_ns: u64,
    pub iterations_ns: Vec<u64>,
    pub end_ns: u64,
    /// Buffer pages per node index after warm-up and at exit.
    pub pages_after_warm_up: Vec<u64>,
    pub pages_at_end: Vec<u64>,
    pub numa_scan_seq: u64,
    pub numa_pages_migrated: u64,
    /// NUMA faults per node index, and their total.
    pub numa_faults: Vec<u64>,
    pub total_numa_faults: u64,
    pub preferred: Option<usize>,
    pub move_numa: u64,
    pub swap_numa: u64,
    pub stick_numa: u64,
    /// Its load-balancing moves per domain level of the CPU that took it,
    /// as /proc/schedstat counts them ([`super::multi_lb::count_move`]):
    /// `gained`, `hot_gained` and `alb_pushed`.
    pub balance: Vec<crate::analysis::schedstat::Counters>,
}

#[derive(Debug, Clone, Default)]
pub struct JobsResult {
    pub jobs: Vec<JobResult>,
    pub wall_ns: u64,
    pub events: u64,
    /// Set when the engine stopped short because the model ran away (see
    /// [`RUNAWAY_MOVES_PER_MS`]): the result is not one, and the caller
    /// fails the run with this reason.
    pub runaway: Option<String>,
}

/// Events one run may take before the engine gives up on it as a model
/// bug rather than a result.
const MAX_EVENTS: u64 = 2_000_000_000;

/// Moves of one job per simulated millisecond past which a run is a
/// runaway model, not a result (a real kernel makes a few a millisecond at
/// the very most), once there are at least [`RUNAWAY_MOVES_MIN`].
const RUNAWAY_MOVES_PER_MS: f64 = 100.0;
const RUNAWAY_MOVES_MIN: f64 = 100_000.0;

/// A runnable entity of a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ent {
    Worker,
    Task(usize),
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
    /// CPU `c`'s worker wakes or sleeps (Some: which, as planned).
    Load(usize, Option<bool>),
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
    /// The load as this sample sees it ([`LoadModel::for_sample`]).
    pub load: LoadModel,
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
    /// CPUs running two or more tasks now.
    pub crowded: usize,
    /// The root domain's overload flag: set when a CPU gets a second task,
    /// set from the CPUs at each root-level balance attempt
    /// (set_rd_overloaded()); newly-idle balancing runs only while it is
    /// set.
    pub overloaded: bool,
    /// avg_idle and the domains' costs: newly-idle balancing's gate.
    pub gate: NewIdleGate,
    alive: usize,
    ticks: u64,
    events: u64,
    /// Simulated time past which the run is stopped as a runaway.
    limit_ns: f64,
    runaway: Option<String>,
    /// The load's transitions, in order ([`super::load::Transitions`]).
    transitions: super::load::Transitions,
    /// The CPUs in the order a tick balances them (kept to reuse).
    order: Vec<usize>,
    /// Which CPUs are idle, and which are on an idle core, as bits.
    pub idle: IdleBits,
    /// The load's duty cycle (busy share of a period).
    pub duty: f64,
    /// Every span's counts, and the spans each CPU is in.
    pub span_count: Vec<SpanCount>,
    spans_of: Vec<Vec<usize>>,
    /// Each domain's balance interval, whole ticks, by [busy][relaxed]: a
    /// busy CPU's is busy_factor (16) times longer, and a relaxed one (the
    /// domain's last periodic attempt found balance) twice
    /// (sched_balance_rq() doubles `balance_interval` up to `max_interval`,
    /// twice `min_interval`, and an unbalanced attempt sets it back).
    pub interval_ns: Vec<[[f64; 2]; 2]>,
    /// Per (CPU, level): whether its interval is the doubled one.
    pub relaxed: Vec<Vec<bool>>,
    /// Per CPU, idle and busy: the first time any of its domains is due
    /// (the least of last balance plus interval over its levels), so a tick
    /// passes over a CPU with nothing due in one comparison. Only periodic
    /// balancing moves `last_balance` and `relaxed`, and it sets this anew
    /// for each CPU it balanced ([`super::multi_lb::set_due`]).
    pub due_at: Vec<[f64; 2]>,
}

impl<'a> Multi<'a> {
    pub fn new(m: &'a Machine, p: &'a Profile, load: &LoadModel, spec: &'a JobsSpec) -> Self {
        let load = load.for_sample(spec.seed);
        let mut rng = Rng::new(spec.seed);
        let shift = rng.unit() * load.period_ns;
        let tick_ns = 1e9 / p.kernel.hz as f64;
        // EEVDF base slice: 0.75 ms x (1 + log2(min(CPUs, 8)))
        // (sysctl_sched_base_slice, scaled as update_sysctl() does); the
        // tick enforces it ([`Multi::eevdf_switch`]).
        let factor = 1.0 + (m.len().clamp(1, 8) as f64).log2().floor();
        let slice_ns = 0.75e6 * factor;
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
                // Touching first, it runs anywhere until its warm-up ends.
                let mut allowed = vec![j.touch_first; m.len()];
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
                    .with_scope(spec.scope)
                    .with_hz(p.kernel.hz),
                    access_ns: vec![0.0; nodes],
                    dram_ns: vec![0.0; nodes],
                    warm_pages_done: 0.0,
                    buffer_pages,
                    noise_factor: p.speed_factor(spec.noise_seed, k as u64),
                    mem: j.mem.clone(),
                    cold: ColdCaches::default(),
                    res: JobResult {
                        run_ns: vec![0; m.len()],
                        run_ns_loop: vec![0; m.len()],
                        balance: vec![Default::default(); levels],
                        ..Default::default()
                    },
                }
            })
            .collect();
        Multi {
            m,
            p,
            gate: NewIdleGate::new(m, p, spec.migration_cost_ns, load.idle_gap_ns(), spec.seed),
            transitions: super::load::Transitions::new(&load, shift),
            duty: load.busy_share(),
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
            relaxed: vec![vec![false; levels]; m.len()],
            due_at: vec![[f64::NEG_INFINITY; 2]; m.len()],

            newidle: vec![vec![NewIdleStats::default(); levels]; m.len()],
            group_imbalance: vec![false; m.span_count()],
            crowded: 0,
            overloaded: false,
            alive: spec.jobs.len(),
            ticks: 0,
            events: 0,
            limit_ns: f64::INFINITY,
            runaway: None,
            order: Vec::new(),
            idle: IdleBits::new(m),
            span_count: (0..m.span_count())
                .map(|g| SpanCount {
                    idle_cpus: m.span(g).len(),
                    weight: m.span(g).len(),
                    cores: m.span_cores(g),
                    ..SpanCount::default()
                })
                .collect(),
            interval_ns: m
                .domains
                .iter()
                .map(|d| {
                    let iv = |f: f64| d.balance_interval_ns(tick_ns, f);
                    [[iv(1.0), iv(2.0)], [iv(16.0), iv(32.0)]]
                })
                .collect(),
            spans_of: {
                let mut v = vec![Vec::new(); m.len()];
                for g in 0..m.span_count() {
                    m.span(g).iter().for_each(|&c| v[c].push(g));
                }
                v
            },
        }
    }

    /// Sets or clears span `g`'s imbalance flag.
    pub fn flag_group(&mut self, g: usize, on: bool) {
        if on && !self.p.kernel.group_imbalance {
            return;
        }
        self.group_imbalance[g] = on;
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
                self.set_rq(c, true, 0);
                self.rqs[c].curr = Some(Ent::Worker);
                // Woken on an idle CPU, it has run since.
                self.rqs[c].picked_at = self.load.last_busy_start(c, self.shift) - self.shift;
            }
        }
        for i in 0..self.tasks.len() {
            super::multi_lb::exec_place(self, i);
        }
        // A job's whole work at the slowest access this machine has, a
        // hundred times over (times the jobs per CPU), and at least an
        // hour: a run not done by then made no progress (ia64-4n with the
        // CPU floating simulated 8 days without finishing its loop).
        let slowest = self
            .tasks
            .iter()
            .flat_map(|t| t.access_ns.iter().copied())
            .fold(1.0, f64::max);
        let work = self.spec.accesses_per_iteration as f64 * f64::from(self.spec.iterations.max(1));
        let crowd = (self.tasks.len() as f64 / self.m.len().max(1) as f64).max(1.0);
        self.limit_ns = (100.0 * work * slowest * crowd).max(3600e9);
        let first_tick = self.tick_ns;
        self.push(first_tick, Ev::Tick);
    }

    /// Handles up to `max` events; false once every job has exited, or
    /// the run was stopped as a runaway.
    pub fn advance(&mut self, max: u64) -> bool {
        for _ in 0..max {
            if self.alive == 0 || self.runaway.is_some() {
                return false;
            }
            // The load's next transition goes first at a tie (it is the
            // worker's own timer; the engine's events react to it).
            let load_at = self.transitions.peek();
            let load_first = match (load_at, self.heap.peek()) {
                (Some((lt, _)), Some(At(ha, _, _))) => lt - self.shift <= *ha,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return false,
            };
            let (at, ev) = match load_at {
                Some((lt, c)) if load_first => {
                    let busy = self.transitions.pop();
                    ((lt - self.shift).max(self.t), Ev::Load(c, busy))
                }
                _ => {
                    let At(at, _, ev) = self.heap.pop().expect("peeked");
                    (at, ev)
                }
            };
            self.events += 1;
            self.t = at;
            self.handle(ev);
            // Checked every 2^16 events, so the check costs nothing.
            if self.events % (1 << 16) == 0 {
                self.runaway = self.ran_away();
            }
        }
        self.alive > 0 && self.runaway.is_none()
    }

    pub fn result(self) -> JobsResult {
        JobsResult {
            wall_ns: self.t as u64,
            events: self.events,
            runaway: self.runaway,
            jobs: self.tasks.into_iter().map(|t| t.res).collect(),
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Load(c, planned) => {
                let busy = planned.unwrap_or_else(|| self.load.busy_after(c, self.lt(self.t)));
                if busy != self.rqs[c].worker_busy {
                    self.set_rq(c, busy, 0);
                    if busy {
                        self.join(c, Ent::Worker);
                        self.gate.woken(c, self.t);
                    } else {
                        self.leave(c, Ent::Worker);
                    }
                }
            }
            Ev::Slice(c, gen) => {
                if gen == self.rqs[c].slice_gen {
                    self.rqs[c].slice_armed = false;
                    if let Some(next) = self.rqs[c].queue.pop_front() {
                        let old = self.rqs[c].curr.expect("a slice ends on a busy CPU");
                        self.rqs[c].queue.push_back(old);
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
                let mut order = std::mem::take(&mut self.order);
                super::multi_lb::periodic(self, &mut order);
                self.order = order;
                let next = self.t + self.tick_ns;
                self.push(next, Ev::Tick);
            }
            Ev::Scan(i) => self.numa_scan(i),
        }
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
        let (sn, dn) = (self.m.node[from], self.m.node[to]);
        self.tasks[i].numa.moved(sn, dn);
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

#[path = "multi_rq.rs"]
mod rq;
pub use rq::{IdleBits, Rq, SpanCount};

#[path = "multi_task.rs"]
mod task;

#[cfg(test)]
#[path = "multi_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "one_tests.rs"]
mod one_tests;
