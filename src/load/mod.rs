//! Constant CPU-only background load: one worker thread pinned on each CPU of
//! a list, each busy for `percent` of every period and asleep for the rest.
//!
//! When each worker's busy part starts is the load's [`LoadPhases`]:
//! staggered in CPU order (the default), at seeded random offsets, or
//! spread over the topology so every node, LLC and core is equally loaded
//! at every instant ([`spread`]). The phases decide which CPU goes idle
//! next while another task waits, and whether the nodes take turns being
//! busy, so they shape how a floating task moves (docs/sim-validation.md, "The load's
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
use crate::sys::stop_page::{StopFlag, StopPage};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// Busy share of each period, 0-100.
    pub percent: f64,
    pub cpus: IdSet,
    /// The duty cycle's period, ms, as given: the simulator takes it as it
    /// is, the workers as a [`Duration`] ([`LoadSpec::period`]).
    pub period_ms: f64,
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
            period_ms,
            policy,
            phases,
            seed,
        }
    }

    /// The duty cycle's period (whole nanoseconds).
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(self.period_ms / 1000.0)
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
    stop: Arc<StopPage>,
    workers: Vec<JoinHandle<()>>,
    spec: LoadSpec,
    /// CLOCK_MONOTONIC (tracefs' `mono` clock) at the load's epoch, ns:
    /// worker k's periods start at it plus its phase offset, so a trace
    /// of the workers can be laid against their plan.
    epoch_mono_ns: u64,
}

impl Load {
    /// The load's epoch on CLOCK_MONOTONIC, ns ([`Load::epoch_mono_ns`]'s field).
    pub fn epoch_mono_ns(&self) -> u64 {
        self.epoch_mono_ns
    }

    /// Starts one pinned worker per CPU. `percent` outside 0-100 or an empty
    /// list is the caller's error to catch first (see `commands::load`).
    pub fn start(spec: &LoadSpec) -> std::io::Result<Load> {
        // Under MPOL_LOCAL every page a worker touches carries that policy
        // as its own (the stop page here, each worker's stack below), so no
        // scan by a default-policy thread of this process (the main thread
        // of `load`, `run` or `jobs`) can give a worker a hinting fault:
        // vma_policy_mof() otherwise takes the scanning thread's policy.
        let local = sys::numa::Policy::Local;
        let stop = Arc::new(StopPage::map(
            (spec.policy == LoadPolicy::Local).then_some(&local),
        )?);
        // Built before the first worker, so an error part-way (a CPU that
        // cannot be pinned) drops it: the workers started so far are
        // stopped and joined, none is left spinning unpinned.
        let mut load = Load {
            stop,
            workers: Vec::new(),
            spec: spec.clone(),
            epoch_mono_ns: 0,
        };
        let period_ns = spec.period().as_nanos() as f64;
        let offsets = spec.phases.offsets_ns(&spec.places, spec.seed, period_ns);
        // Instant is CLOCK_MONOTONIC on Linux but keeps its value private:
        // read between two reads of the clock, it is their midpoint, to
        // within their distance. An emulator can run other vCPUs between
        // two instructions, so the reads are retried until close.
        let (mut epoch, mut best) = (Instant::now(), u64::MAX);
        for _ in 0..20 {
            let a = sys::mono_ns();
            let e = Instant::now();
            let b = sys::mono_ns();
            if b - a < best {
                (epoch, best) = (e, b - a);
                load.epoch_mono_ns = a + (b - a) / 2;
            }
            if best < 20_000 {
                break;
            }
        }
        for (k, cpu) in spec.cpus.iter().enumerate() {
            let stop = load.stop.clone();
            let busy = spec
                .period()
                .mul_f64(spec.percent.clamp(0.0, 100.0) / 100.0);
            let period = spec.period();
            let policy = spec.policy;
            let offset = Duration::from_nanos(offsets[k] as u64);
            let (tx, rx) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name(format!("load-cpu{cpu}"))
                .spawn(move || {
                    let placed = place_worker(cpu, policy);
                    let ok = placed.is_ok();
                    let _ = tx.send(placed);
                    if ok {
                        sys::set_timer_slack_ns(1);
                        worker(stop.flag(), epoch + offset, period, busy);
                    }
                })?;
            load.workers.push(handle);
            rx.recv()
                .unwrap_or_else(|_| Err("load worker died at start".into()))
                .map_err(std::io::Error::other)?;
        }
        Ok(load)
    }

    pub fn spec(&self) -> &LoadSpec {
        &self.spec
    }

    /// Stops the workers and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        // Wakes sleepers at once, so stopping costs microseconds, not a period.
        self.stop.flag().set();
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

/// Pins the calling worker to `cpu` and gives it the load's memory policy.
fn place_worker(cpu: u32, policy: LoadPolicy) -> Result<(), String> {
    sys::set_affinity(0, &[cpu].into_iter().collect())
        .map_err(|e| format!("pinning a load worker to CPU {cpu}: {e}"))?;
    let local = sys::numa::Policy::Local;
    match policy {
        // A stack glibc reuses may still carry an earlier MPOL_LOCAL
        // worker's policy. Best effort: where mbind(2) fails (no
        // CONFIG_NUMA, a seccomp filter) no earlier worker can have set one.
        LoadPolicy::Default => {
            let _ = sys::numa::mbind_own_stack(None);
            Ok(())
        }
        LoadPolicy::Local => sys::numa::set_mempolicy(&local)
            .and_then(|()| sys::numa::mbind_own_stack(Some(&local)))
            .map_err(|e| format!("MPOL_LOCAL for the load worker on CPU {cpu}: {e}")),
    }
}

/// Busy-spins for `busy` of each period starting at `start`, sleeps the rest.
fn worker(stop: StopFlag, start: Instant, period: Duration, busy: Duration) {
    let mut next = start;
    stop.sleep_until(next);
    let mut spin = 0u64;
    while !stop.is_set() {
        let busy_end = next + busy;
        while Instant::now() < busy_end && !stop.is_set() {
            // Pure CPU work: no memory traffic beyond this register.
            for _ in 0..64 {
                spin = std::hint::black_box(spin.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let (at, sleep) = resume(next + period, Instant::now(), period, busy);
        next = at;
        if sleep {
            stop.sleep_until(next);
        }
    }
}

/// Where a worker whose next period starts at `next` goes on at `now`:
/// the start of the period whose busy part it is in (and spins to that
/// part's end, false), or else the next period's start, which it sleeps to
/// (true). A worker that fell behind (kept off its CPU past a period's
/// start) neither bursts to catch up nor spins into the idle part: its
/// busy parts stay where the duty cycle puts them. Regression: it used to
/// spin from `now` to the end of the next period's busy part, which under
/// the lab's emulator, where a vCPU waits milliseconds for its turn, kept
/// a 60% load's CPUs 72-83% busy (schedstat run time, docs/sim-validation.md,
/// "The newly-idle gate").
fn resume(next: Instant, now: Instant, period: Duration, busy: Duration) -> (Instant, bool) {
    if next > now {
        return (next, true);
    }
    // The last period start at or before now.
    let behind = now.duration_since(next);
    let whole = behind.as_nanos() / period.as_nanos().max(1);
    let start = next + period * u32::try_from(whole).unwrap_or(u32::MAX);
    if now < start + busy {
        (start, false)
    } else {
        (start + period, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_fell_behind_sleeps_to_the_next_period_instead_of_spinning_through_it() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let (period, busy) = (ms(20), ms(12));
        // On time: sleep to the next period's start.
        assert_eq!(
            resume(t0 + ms(20), t0 + ms(13), period, busy),
            (t0 + ms(20), true)
        );
        // 5 ms into the next period: spin to its busy part's end.
        assert_eq!(
            resume(t0 + ms(20), t0 + ms(25), period, busy),
            (t0 + ms(20), false)
        );
        // Past that period's busy part: sleep to the one after.
        assert_eq!(
            resume(t0 + ms(20), t0 + ms(35), period, busy),
            (t0 + ms(40), true)
        );
        // Three periods behind, in a busy part: that period's start.
        assert_eq!(
            resume(t0 + ms(20), t0 + ms(81), period, busy),
            (t0 + ms(80), false)
        );
        // Exactly at a period's start: its busy part.
        assert_eq!(
            resume(t0 + ms(20), t0 + ms(60), period, busy),
            (t0 + ms(60), false)
        );
    }

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
        assert_eq!(s.period(), Duration::from_millis(100));
        assert_eq!((s.percent, s.seed, s.cpus.len()), (60.0, 7, 4));
    }

    /// The load tests start workers in this process and look them up by
    /// name in /proc/self/task: one at a time.
    static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn spec_on(cpus: &str, policy: LoadPolicy) -> LoadSpec {
        let cpus = IdSet::parse(cpus).unwrap();
        LoadSpec {
            percent: 0.0,
            places: anywhere(cpus.len()),
            cpus,
            period_ms: 20.0,
            policy,
            phases: LoadPhases::Staggered,
            seed: 1,
        }
    }

    /// (tid, name) of this process's threads.
    fn threads() -> Vec<(u32, String)> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                Some((
                    e.file_name().to_str()?.parse().ok()?,
                    comm.trim().to_string(),
                ))
            })
            .collect()
    }

    /// The memory policy numa_maps shows for the mapping holding the stack
    /// pointer of thread `tid`, asleep in a system call.
    fn stack_policy(tid: u32) -> String {
        let syscall = format!("/proc/self/task/{tid}/syscall");
        let sp = (0..500)
            .find_map(|_| {
                let text = std::fs::read_to_string(&syscall).unwrap();
                // "NR arg1 .. arg6 SP PC" while blocked, "running" else.
                let f: Vec<&str> = text.split_whitespace().collect();
                if f.len() == 9 {
                    return usize::from_str_radix(f[7].trim_start_matches("0x"), 16).ok();
                }
                std::thread::sleep(Duration::from_millis(2));
                None
            })
            .expect("the worker never slept");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = maps
            .lines()
            .find_map(|l| {
                let (lo, hi) = l.split_whitespace().next()?.split_once('-')?;
                let (lo, hi) = (
                    usize::from_str_radix(lo, 16).ok()?,
                    usize::from_str_radix(hi, 16).ok()?,
                );
                (lo..hi).contains(&sp).then_some(lo)
            })
            .expect("no mapping holds the stack pointer");
        let numa_maps = std::fs::read_to_string("/proc/self/numa_maps").unwrap();
        numa_maps
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                let lo = usize::from_str_radix(w.next()?, 16).ok()?;
                (lo == start).then(|| w.next().unwrap_or("").to_string())
            })
            .expect("numa_maps lacks the stack's mapping")
    }

    /// The lab flake of `load_workers_prefer_their_own_node_unless_under_
    /// mpol_local`: an MPOL_LOCAL worker took hinting faults, because its
    /// policy was only its thread's, and task_numa_work() run by another
    /// thread (default policy) judges a VMA without a policy of its own by
    /// the scanner's. Each worker's stack now carries MPOL_LOCAL itself.
    #[test]
    fn mpol_local_worker_stacks_carry_the_policy_whoever_scans() {
        let _one = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        if !std::path::Path::new("/proc/self/numa_maps").exists() {
            eprintln!("SKIP: no /proc/self/numa_maps (kernel without CONFIG_NUMA)");
            return;
        }
        for (policy, want) in [
            (LoadPolicy::Local, "local"),
            (LoadPolicy::Default, "default"),
        ] {
            let load = Load::start(&spec_on("0", policy)).unwrap();
            let (tid, _) = threads()
                .into_iter()
                .find(|(_, name)| name == "load-cpu0")
                .expect("no load-cpu0 thread");
            assert_eq!(stack_policy(tid), want, "{policy:?}");
            load.stop();
        }
    }

    /// A CPU that cannot be pinned failed the start but left the workers
    /// started before it running, and its own worker spinning unpinned.
    #[test]
    fn a_worker_that_cannot_be_pinned_leaves_no_worker_running() {
        let _one = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        let e = Load::start(&spec_on("0,4095", LoadPolicy::Default))
            .err()
            .expect("CPU 4095 pinned");
        assert!(e.to_string().contains("CPU 4095"), "{e}");
        let left: Vec<_> = threads()
            .into_iter()
            .filter(|(_, n)| n.starts_with("load-cpu"))
            .collect();
        assert!(left.is_empty(), "workers left running: {left:?}");
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
