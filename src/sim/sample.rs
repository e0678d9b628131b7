//! What one simulated sample is asked ([`SampleSpec`]) and what it gives
//! ([`SampleResult`]: the probe's moves with their causes, its time per
//! CPU, its pages, NUMA balancing's and the load balancer's counts), shared
//! by the engine that runs it ([`super::one`]) and the backend that turns
//! it into records.

use super::numa::{MemPolicy, NumaKnobs};
use crate::load::LoadPolicy;
use crate::sys::numa::PolicyScope;

/// Why the probe moved (the trace's causes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Affinity,
    LoadBalance,
    NumaBalancing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub t_ns: u64,
    pub from: usize,
    pub to: usize,
    pub cause: Cause,
}

/// Everything one sample needs.
#[derive(Debug, Clone)]
pub struct SampleSpec {
    /// CPU positions the probe may run on (its affinity).
    pub allowed: Vec<usize>,
    pub mem: MemPolicy,
    /// The PNID patch's forced node (node index).
    pub forced: Option<usize>,
    pub numa: NumaKnobs,
    pub migration_cost_ns: f64,
    pub load_percent: f64,
    pub period_ns: f64,
    pub buffer_bytes: u64,
    pub page_bytes: u64,
    pub accesses_per_iteration: u64,
    pub iterations: u32,
    pub seed: u64,
    /// The draw of the machine's noise (`noise.sample_cv`): the sample's
    /// index in its row, not its row, so sample k of every row runs on
    /// the same machine state (common random numbers: the rows' ratios
    /// keep the model's expectation while each row spreads as the machine
    /// does).
    pub noise_seed: u64,
    /// What `mem` covers: the buffer, or the whole probe.
    pub scope: PolicyScope,
    /// The load workers' memory policy: under MPOL_LOCAL they never
    /// prefer a node.
    pub load_policy: LoadPolicy,
    /// `--first-touch start`: the probe may run anywhere until its
    /// warm-up has touched the buffer, and only then binds to `allowed`
    /// (the RFC's order); false: bound from exec.
    pub touch_first: bool,
}

#[derive(Debug, Clone, Default)]
pub struct SampleResult {
    pub moves: Vec<Move>,
    /// Running time per CPU position, ns: whole life, and the timed loop.
    pub run_ns: Vec<u64>,
    pub run_ns_loop: Vec<u64>,
    /// The CPU the timed loop started on.
    pub loop_start_cpu: Option<usize>,
    pub warm_up_ns: u64,
    pub iterations_ns: Vec<u64>,
    pub loop_start_ns: u64,
    pub wall_ns: u64,
    pub start_cpu: usize,
    pub end_cpu: usize,
    /// Buffer pages per node index after warm-up and at the end.
    pub pages_after_warm_up: Vec<u64>,
    pub pages_at_end: Vec<u64>,
    pub numa_scan_seq: u64,
    pub numa_pages_migrated: u64,
    pub numa_faults: Vec<u64>,
    pub total_numa_faults: u64,
    pub preferred: Option<usize>,
    pub move_numa: u64,
    pub stick_numa: u64,
    pub events: u64,
    /// Set when the engine stopped the sample short because the model ran
    /// away (see `multi::RUNAWAY_MOVES_PER_MS`): the result is not one,
    /// and the caller fails the run with this reason.
    pub runaway: Option<String>,
    /// The probe's load-balancing moves per domain level of the CPU that
    /// took it, as /proc/schedstat counts them ([`super::balance::count_move`]):
    /// only `gained`, `hot_gained` and `alb_pushed` are filled, since the
    /// engine makes only the attempts that can move the probe.
    pub balance: Vec<crate::analysis::schedstat::Counters>,
}
