//! The background load, exactly as `numalab load` makes it: one pinned
//! worker per CPU, busy for `percent` of every period, each starting at
//! its phase ([`LoadPhases::offsets_ns`]: by default worker k, in CPU order,
//! k/n of a period late). Nothing about it depends on the
//! probes, so the load is a closed form: whether a CPU's worker is busy at
//! a time, when it last woke, and every worker's transitions in the order
//! they come ([`Transitions`]).

use super::machine::Machine;
use crate::load::LoadPhases;

#[derive(Debug, Clone)]
pub struct LoadModel {
    pub period_ns: f64,
    /// Busy part of each period, ns (0: no load; period: always busy).
    pub busy_ns: f64,
    /// Phase of each CPU's worker, ns in [0, period).
    pub phase: Vec<f64>,
}

impl LoadModel {
    /// The default load: staggered phases.
    pub fn new(m: &Machine, percent: f64, period_ns: f64) -> LoadModel {
        LoadModel::shaped(m, percent, period_ns, LoadPhases::Staggered, 0)
    }

    /// A load with the phases `phases` draws with `seed`.
    pub fn shaped(
        m: &Machine,
        percent: f64,
        period_ns: f64,
        phases: LoadPhases,
        seed: u64,
    ) -> LoadModel {
        let places = crate::load::Place::of(&m.topo, m.ids.iter().copied());
        let phase = phases.offsets_ns(&places, seed, period_ns);
        LoadModel {
            period_ns,
            busy_ns: period_ns * (percent / 100.0).clamp(0.0, 1.0),
            phase,
        }
    }

    /// `t` modulo the period, in [0, period) (floor division: rem_euclid
    /// calls fmod, which dominated the simulator's profile).
    fn wrap(&self, t: f64) -> f64 {
        let r = t - floor(t / self.period_ns) * self.period_ns;
        if r >= self.period_ns {
            0.0
        } else {
            r.max(0.0)
        }
    }

    /// How long each worker sleeps a period, ns; infinite when it never
    /// runs or never sleeps (no wake-up to measure an idle period by).
    pub fn idle_gap_ns(&self) -> f64 {
        if self.busy_ns <= 0.0 || self.busy_ns >= self.period_ns {
            f64::INFINITY
        } else {
            self.period_ns - self.busy_ns
        }
    }

    /// Whether CPU `c`'s worker is busy at load time `t`.
    pub fn busy(&self, c: usize, t: f64) -> bool {
        self.wrap(t - self.phase[c]) < self.busy_ns
    }

    /// The last time at or before load time `t` at which CPU `c`'s worker
    /// began its busy part.
    pub fn last_busy_start(&self, c: usize, t: f64) -> f64 {
        t - self.wrap(t - self.phase[c])
    }
}

/// floor() without a libm call (a portable x86-64 build has no SSE4.1
/// rounding instruction, and floor was a tenth of the simulator's time);
/// exact for the magnitudes of simulated times.
#[inline]
pub fn floor(x: f64) -> f64 {
    let q = x as i64 as f64;
    if q > x {
        q - 1.0
    } else {
        q
    }
}

/// Times closer than this (ns) are the same instant.
pub const EPS: f64 = 1e-3;

/// Every worker's transitions (it starts or stops its busy part), in the
/// order they happen: the load repeats each period, so the next one is a
/// step along a list sorted once, not a search or a heap (on the 128-CPU
/// EPYC they were a third of the several-probe engine's time as heap
/// events).
#[derive(Debug, Clone)]
pub struct Transitions {
    /// (offset within the period, CPU), sorted.
    at: Vec<(f64, usize)>,
    period_ns: f64,
    /// The next transition: its period's start (load time) and its index.
    base: f64,
    next: usize,
}

impl Transitions {
    /// The transitions after load time `t`.
    pub fn new(load: &LoadModel, t: f64) -> Transitions {
        let mut at: Vec<(f64, usize)> = if load.busy_ns <= 0.0 || load.busy_ns >= load.period_ns {
            Vec::new()
        } else {
            (0..load.phase.len())
                .flat_map(|c| {
                    let p = load.phase[c];
                    [(p, c), ((p + load.busy_ns) % load.period_ns, c)]
                })
                .collect()
        };
        at.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let base = floor(t / load.period_ns) * load.period_ns;
        let next = at.partition_point(|&(o, _)| base + o <= t + EPS);
        let mut tr = Transitions {
            at,
            period_ns: load.period_ns,
            base,
            next,
        };
        tr.wrap();
        tr
    }

    fn wrap(&mut self) {
        if self.next >= self.at.len() && !self.at.is_empty() {
            self.next = 0;
            self.base += self.period_ns;
        }
    }

    /// The next transition: (load time, CPU); None without a duty cycle.
    pub fn peek(&self) -> Option<(f64, usize)> {
        self.at.get(self.next).map(|&(o, c)| (self.base + o, c))
    }

    /// Steps past the next transition.
    pub fn pop(&mut self) {
        self.next += 1;
        self.wrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    fn machine() -> Machine {
        Machine::new(&presets::find("xeon-8167m-2n").unwrap().topology()).unwrap()
    }

    #[test]
    fn transitions_come_in_time_order_and_each_flips_its_worker() {
        let m = machine();
        for phases in [LoadPhases::Staggered, LoadPhases::Random] {
            let l = LoadModel::shaped(&m, 60.0, 20_618_000.0, phases, 3);
            let start = 3_000_000.0;
            let mut tr = Transitions::new(&l, start);
            let mut t = start;
            let mut seen = vec![0; m.len()];
            // Two periods: every worker wakes and sleeps twice.
            while let Some((at, c)) = tr.peek() {
                if at > start + 2.0 * l.period_ns {
                    break;
                }
                assert!(at > t - EPS, "{at} after {t}");
                assert_ne!(l.busy(c, at - 1.0), l.busy(c, at + 1.0), "CPU {c} at {at}");
                if l.busy(c, at + 1.0) {
                    assert!((l.last_busy_start(c, at + 1.0) - at).abs() < 1e-3);
                }
                seen[c] += 1;
                t = at;
                tr.pop();
            }
            assert!(seen.iter().all(|&k| k == 4), "{seen:?}");
        }
        // No duty cycle, no transitions.
        for pct in [0.0, 100.0] {
            let l = LoadModel::new(&m, pct, 20_618_000.0);
            assert_eq!(Transitions::new(&l, 0.0).peek(), None);
        }
    }
}
