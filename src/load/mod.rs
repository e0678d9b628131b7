//! Constant CPU-only background load: one worker thread pinned on each CPU of
//! a list, each busy for `percent` of every period and asleep for the rest.
//!
//! When each worker's busy part starts is the load's [`LoadPhases`]:
//! staggered in CPU order (the default), at seeded random offsets, or
//! spread over the topology so every node, LLC and core is equally loaded
//! at every instant ([`spread`]). The phases decide which CPU goes idle
//! next while another task waits, and whether the nodes take turns being
//! busy, so they shape how a floating task moves (docs/sim.md, "The load's
//! shape").
//!
//! Workers are threads of the calling process, so they die with it whatever
//! kills it (SIGKILL included): a load can never be orphaned. Phases are
//! spread so the workers do not beat in step. Each worker sleeps to
//! absolute deadlines with a 1 ns timer slack, so the duty cycle does not
//! drift.
//!
//! The period defaults to [`DEFAULT_PERIOD_MS`] = 20.618 ms, not 20: a period
//! that is a whole number of scheduler ticks (4 ms at HZ=250) keeps each
//! CPU's tick at one fixed phase of the duty cycle, so tick-sampled
//! accounting (/proc/stat, and the scheduler's own load tracking at each
//! tick) sees a biased share: measured here, 37% and 23% on two CPUs for a
//! 30% load at 20 ms, 30.1% and 30.3% at 20.618 ms. A period with a
//! golden-ratio-like fraction of a tick sweeps the phase evenly. [`Load`] stops and joins its workers on
//! drop, which lets `run` wrap each sample in a load with a scope.

pub mod procstat;
pub mod spread;

use crate::topology::Topology;
pub use spread::Place;

/// Default duty-cycle period (ms); see the module notes.
pub const DEFAULT_PERIOD_MS: f64 = 20.618;

/// serde: a record without a load period had the default one.
pub fn default_period_ms() -> f64 {
    DEFAULT_PERIOD_MS
}

/// The load period's accepted range, ms: shorter periods are mostly timer
/// overhead, longer ones stop looking like steady load to a probe.
pub const PERIOD_MS: std::ops::RangeInclusive<f64> = 0.1..=10_000.0;

/// Refuses a period outside [`PERIOD_MS`] (exit 2), naming it as `what`
/// (the option or spec field it came from).
pub fn check_period_ms(what: &str, ms: f64) -> anyhow::Result<()> {
    if PERIOD_MS.contains(&ms) {
        return Ok(());
    }
    Err(crate::error::usage(format!(
        "{what} {ms} ms: must be between {} and {} ms",
        PERIOD_MS.start(),
        PERIOD_MS.end()
    )))
}

/// serde: records leave the default period out.
pub fn is_default_period_ms(ms: &f64) -> bool {
    *ms == DEFAULT_PERIOD_MS
}

use crate::idset::IdSet;
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// Busy share of each period, 0-100.
    pub percent: f64,
    pub cpus: IdSet,
    pub period: Duration,
    pub policy: LoadPolicy,
    pub phases: LoadPhases,
    /// Seed of [`LoadPhases::Random`]'s offsets.
    pub seed: u64,
    /// Where each of `cpus` sits ([`LoadPhases::Spread`] orders by it).
    pub places: Vec<Place>,
}

impl LoadSpec {
    /// `percent` busy on each of `cpus` of `topo`, in periods of
    /// `period_ms`.
    pub fn new(
        topo: &Topology,
        percent: f64,
        cpus: IdSet,
        period_ms: f64,
        policy: LoadPolicy,
        phases: LoadPhases,
        seed: u64,
    ) -> LoadSpec {
        LoadSpec {
            places: Place::of(topo, cpus.iter()),
            percent,
            cpus,
            period: Duration::from_secs_f64(period_ms / 1000.0),
            policy,
            phases,
            seed,
        }
    }
}

/// When each worker's busy part starts within the period.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum LoadPhases {
    /// Worker k (in CPU order) starts k/n of a period late: the CPUs go
    /// idle one after another in CPU order, evenly spaced.
    #[default]
    Staggered,
    /// Each worker at its own offset, drawn uniformly from a seeded
    /// generator: as load programs started independently, whose phases
    /// have no order.
    Random,
    /// In CPU order round the topology: consecutive phases go to the
    /// nodes in turn, then a node's LLCs, its cores, a core's threads, so
    /// every node's, LLC's and core's workers are evenly spaced over the
    /// period and each node carries the same load at every instant
    /// ([`spread`]).
    Spread,
}

impl LoadPhases {
    pub fn is_default(&self) -> bool {
        *self == LoadPhases::Staggered
    }

    /// The start offset of each worker (in CPU order, on the CPUs at
    /// `places`) within a period of `period_ns`, in [0, period_ns). The
    /// host's load and the simulator's both take their phases from here.
    pub fn offsets_ns(self, places: &[Place], seed: u64, period_ns: f64) -> Vec<f64> {
        let n = places.len();
        match self {
            LoadPhases::Staggered => (0..n)
                .map(|k| period_ns * k as f64 / n.max(1) as f64)
                .collect(),
            LoadPhases::Random => {
                // The run's seed also orders its samples: a constant
                // ("loadphas") gives the phases a stream of their own.
                let mut rng = crate::rng::SplitMix64::new(seed ^ 0x6c6f_6164_7068_6173);
                (0..n).map(|_| period_ns * rng.unit()).collect()
            }
            LoadPhases::Spread => spread::ranks(places)
                .into_iter()
                .map(|r| period_ns * r as f64 / n.max(1) as f64)
                .collect(),
        }
    }
}

/// The memory policy each worker runs under. It decides how NUMA balancing
/// sees the load, and through it how strongly the scheduler keeps another
/// task on its preferred node: migrate_degrades_locality() calls leaving
/// the preferred node bad only while the source runqueue runs a task that
/// does not prefer that node (nr_running > nr_preferred_running).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum LoadPolicy {
    /// The default (migrate-on-fault) policy: NUMA balancing scans a
    /// worker's stack, its hinting faults are all local, and once placed
    /// it prefers its own CPU's node.
    #[default]
    Default,
    /// MPOL_LOCAL, as under `numactl --localalloc`: the same placement, but
    /// not migrate-on-fault, so a worker takes no hinting faults and never
    /// prefers a node.
    Local,
}

impl LoadPolicy {
    pub fn is_default(&self) -> bool {
        *self == LoadPolicy::Default
    }
}

/// A running load; dropping it stops the workers.
pub struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    spec: LoadSpec,
}

impl Load {
    /// Starts one pinned worker per CPU. `percent` outside 0-100 or an empty
    /// list is the caller's error to catch first (see `commands::load`).
    pub fn start(spec: &LoadSpec) -> std::io::Result<Load> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        let period_ns = spec.period.as_nanos() as f64;
        let offsets = spec.phases.offsets_ns(&spec.places, spec.seed, period_ns);
        let epoch = Instant::now();
        for (k, cpu) in spec.cpus.iter().enumerate() {
            let stop = stop.clone();
            let busy = spec.period.mul_f64(spec.percent.clamp(0.0, 100.0) / 100.0);
            let period = spec.period;
            let policy = spec.policy;
            let offset = Duration::from_nanos(offsets[k] as u64);
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name(format!("load-cpu{cpu}"))
                .spawn(move || {
                    let pinned = sys::set_affinity(0, &[cpu].into_iter().collect())
                        .map_err(|e| format!("pinning a load worker to CPU {cpu}: {e}"))
                        .and_then(|()| match policy {
                            LoadPolicy::Default => Ok(()),
                            LoadPolicy::Local => {
                                sys::numa::set_mempolicy(&sys::numa::Policy::Local).map_err(|e| {
                                    format!("MPOL_LOCAL for the load worker on CPU {cpu}: {e}")
                                })
                            }
                        });
                    let _ = tx.send(pinned);
                    sys::set_timer_slack_ns(1);
                    worker(&stop, epoch + offset, period, busy);
                })?;
            rx.recv()
                .unwrap_or_else(|_| Err("load worker died at start".into()))
                .map_err(std::io::Error::other)?;
            workers.push(handle);
        }
        Ok(Load {
            stop,
            workers,
            spec: spec.clone(),
        })
    }

    pub fn spec(&self) -> &LoadSpec {
        &self.spec
    }

    /// Stops the workers and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake sleepers at once, so stopping costs microseconds, not a period.
        for w in &self.workers {
            w.thread().unpark();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Sleeps until `t` unless stopped (parked, so [`Load::stop`] can wake it).
fn sleep_until(stop: &AtomicBool, t: Instant) {
    while !stop.load(Ordering::Relaxed) {
        match t.checked_duration_since(Instant::now()) {
            Some(d) if !d.is_zero() => std::thread::park_timeout(d),
            _ => return,
        }
    }
}

/// Busy-spins for `busy` of each period starting at `start`, sleeps the rest.
fn worker(stop: &AtomicBool, start: Instant, period: Duration, busy: Duration) {
    let mut next = start;
    sleep_until(stop, next);
    let mut spin = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let busy_end = next + busy;
        while Instant::now() < busy_end && !stop.load(Ordering::Relaxed) {
            // Pure CPU work: no memory traffic beyond this register.
            for _ in 0..64 {
                spin = std::hint::black_box(spin.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        next += period;
        let now = Instant::now();
        if next > now {
            sleep_until(stop, next);
        } else {
            // Fell behind (preempted): resynchronise instead of bursting.
            while next <= now {
                next += period;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_period_check_for_load_run_and_jobs() {
        for ok in [0.1, DEFAULT_PERIOD_MS, 10_000.0] {
            check_period_ms("--period-ms", ok).unwrap();
        }
        for bad in [0.0, 0.09, 10_000.5, f64::NAN, f64::INFINITY, -1.0] {
            let e = check_period_ms("--load-period-ms", bad).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            let m = crate::error::message(&e);
            assert!(
                m.contains("--load-period-ms") && m.contains("0.1 and 10000"),
                "{m}"
            );
        }
        let topo = crate::topology::presets::find("xeon-8167m-2n")
            .unwrap()
            .topology();
        let s = LoadSpec::new(
            &topo,
            60.0,
            IdSet::parse("0-3").unwrap(),
            100.0,
            LoadPolicy::Local,
            LoadPhases::Random,
            7,
        );
        assert_eq!(s.period, Duration::from_millis(100));
        assert_eq!((s.percent, s.seed, s.cpus.len()), (60.0, 7, 4));
    }

    /// `n` CPUs in one core: where they are does not matter to staggered
    /// and random phases.
    fn anywhere(n: usize) -> Vec<Place> {
        vec![
            Place {
                node: 0,
                llc: 0,
                core: 0
            };
            n
        ]
    }

    #[test]
    fn staggered_phases_spread_the_workers_evenly_in_cpu_order() {
        let o = LoadPhases::Staggered.offsets_ns(&anywhere(4), 9, 20e6);
        assert_eq!(o, vec![0.0, 5e6, 10e6, 15e6]);
    }

    #[test]
    fn random_phases_are_the_seeds_and_cover_the_period() {
        let period = 100e6;
        let a = LoadPhases::Random.offsets_ns(&anywhere(256), 7, period);
        assert_eq!(a, LoadPhases::Random.offsets_ns(&anywhere(256), 7, period));
        assert_ne!(a, LoadPhases::Random.offsets_ns(&anywhere(256), 8, period));
        assert!(a.iter().all(|&x| (0.0..period).contains(&x)));
        // Not in CPU order, and spread over the whole period: each quarter
        // holds a fair share (binomial(256, 1/4): mean 64, sd 7).
        assert!(a.windows(2).any(|w| w[1] < w[0]));
        for q in 0..4 {
            let lo = period * q as f64 / 4.0;
            let n = a
                .iter()
                .filter(|&&x| x >= lo && x < lo + period / 4.0)
                .count();
            assert!((34..=94).contains(&n), "quarter {q}: {n}");
        }
    }
}
