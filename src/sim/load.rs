//! The background load, exactly as `numalab load` makes it: one pinned
//! worker per CPU, busy for `percent` of every period, each starting at
//! its phase ([`LoadPhases::offsets_ns`]: by default worker k, in CPU order,
//! k/n of a period late). Nothing about it depends on the
//! probe, so the load is a closed form: whether a CPU's worker is busy at a
//! time, how many workers of a span are busy (a binary search over the
//! span's sorted phases), and when the next worker of a set goes to sleep.

use super::machine::Machine;
use crate::load::LoadPhases;

#[derive(Debug, Clone)]
pub struct LoadModel {
    pub period_ns: f64,
    /// Busy part of each period, ns (0: no load; period: always busy).
    pub busy_ns: f64,
    /// Phase of each CPU's worker, ns in [0, period).
    pub phase: Vec<f64>,
    /// Per span id, its CPUs' phases sorted.
    span_phases: Vec<Vec<f64>>,
}

impl LoadModel {
    /// The default load: staggered phases.
    pub fn new(m: &Machine, percent: f64, period_ns: f64, spans: usize) -> LoadModel {
        LoadModel::shaped(m, percent, period_ns, LoadPhases::Staggered, 0, spans)
    }

    /// A load with the phases `phases` draws with `seed`.
    pub fn shaped(
        m: &Machine,
        percent: f64,
        period_ns: f64,
        phases: LoadPhases,
        seed: u64,
        spans: usize,
    ) -> LoadModel {
        let places = crate::load::Place::of(&m.topo, m.ids.iter().copied());
        let phase = phases.offsets_ns(&places, seed, period_ns);
        let span_phases = (0..spans)
            .map(|s| {
                let mut v: Vec<f64> = m.span(s).iter().map(|&c| phase[c]).collect();
                v.sort_by(f64::total_cmp);
                v
            })
            .collect();
        LoadModel {
            period_ns,
            busy_ns: period_ns * (percent / 100.0).clamp(0.0, 1.0),
            phase,
            span_phases,
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

    /// Whether CPU `c`'s worker is busy at load time `t`.
    pub fn busy(&self, c: usize, t: f64) -> bool {
        self.wrap(t - self.phase[c]) < self.busy_ns
    }

    /// Busy workers of span `s` at load time `t`.
    pub fn busy_count(&self, s: usize, t: f64) -> usize {
        let v = &self.span_phases[s];
        if self.busy_ns <= 0.0 {
            return 0;
        }
        if self.busy_ns >= self.period_ns {
            return v.len();
        }
        // Busy when phase is in (x - busy, x], wrapping below zero.
        let x = self.wrap(t);
        let lo = x - self.busy_ns;
        let upto = |p: f64| v.partition_point(|&q| q <= p);
        if lo >= 0.0 {
            upto(x) - upto(lo)
        } else {
            upto(x) + (v.len() - upto(lo + self.period_ns))
        }
    }

    /// The last time at or before load time `t` at which CPU `c`'s worker
    /// went to sleep (its CPU went idle); None without a duty cycle.
    pub fn last_idle_start(&self, c: usize, t: f64) -> Option<f64> {
        if self.busy_ns <= 0.0 || self.busy_ns >= self.period_ns {
            return None;
        }
        Some(t - self.wrap(t - self.phase[c] - self.busy_ns))
    }

    /// The next time after `t` at which CPU `c`'s worker starts or stops
    /// (at least a picosecond later, so rounding never repeats a transition).
    pub fn next_transition(&self, c: usize, t: f64) -> f64 {
        if self.busy_ns <= 0.0 || self.busy_ns >= self.period_ns {
            return f64::INFINITY;
        }
        let r = self.wrap(t - self.phase[c]);
        let base = t - r;
        [self.busy_ns, self.period_ns, self.period_ns + self.busy_ns]
            .into_iter()
            .map(|o| base + o)
            .find(|&at| at > t + EPS)
            .unwrap_or(base + 2.0 * self.period_ns)
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

/// When the workers of a set of CPUs go to sleep (their CPU goes idle), in
/// phase order: the newly-idle balancing opportunities of that set.
#[derive(Debug, Clone)]
pub struct IdleStarts {
    /// (offset of the idle start within the period, CPU), sorted.
    starts: Vec<(f64, usize)>,
    period_ns: f64,
    /// The last query: (period start, offset, index): times only grow, so
    /// the next query usually walks on from there instead of searching.
    cursor: Option<(f64, f64, usize)>,
}

impl IdleStarts {
    pub fn new(load: &LoadModel, cpus: &[usize]) -> IdleStarts {
        let mut starts: Vec<(f64, usize)> = if load.busy_ns <= 0.0 || load.busy_ns >= load.period_ns
        {
            Vec::new()
        } else {
            cpus.iter()
                .map(|&c| ((load.phase[c] + load.busy_ns) % load.period_ns, c))
                .collect()
        };
        starts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        IdleStarts {
            starts,
            period_ns: load.period_ns,
            cursor: None,
        }
    }

    /// The first idle start strictly after `t` of a CPU other than `skip`.
    pub fn next_after(&mut self, t: f64, skip: usize) -> Option<(f64, usize)> {
        let n = self.starts.len();
        if n == 0 || (n == 1 && self.starts[0].1 == skip) {
            return None;
        }
        let x = (t - floor(t / self.period_ns) * self.period_ns).max(0.0);
        let base = t - x;
        let i = match self.cursor {
            Some((b, x0, i0)) if b == base && x >= x0 => {
                let mut i = i0;
                while i < n && self.starts[i].0 <= x + EPS {
                    i += 1;
                }
                i
            }
            _ => self.starts.partition_point(|&(o, _)| o <= x + EPS),
        };
        self.cursor = Some((base, x, i));
        for k in 0..n + 1 {
            let j = (i + k) % n;
            let wraps = ((i + k) / n) as f64;
            let (o, c) = self.starts[j];
            if c != skip {
                return Some((base + o + wraps * self.period_ns, c));
            }
        }
        None
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
    fn busy_count_matches_per_cpu_busy() {
        let m = machine();
        let spans = m.span_count();
        for pct in [0.0, 1.0, 60.0, 99.0, 100.0] {
            let l = LoadModel::new(&m, pct, 20_618_000.0, spans);
            for t in [0.0, 1.0, 5_000_000.0, 19_999_999.0, 123_456_789.0, -7.0] {
                for s in 0..spans {
                    let want = m.span(s).iter().filter(|&&c| l.busy(c, t)).count();
                    assert_eq!(l.busy_count(s, t), want, "pct {pct} t {t} span {s}");
                }
            }
        }
    }

    #[test]
    fn transitions_and_idle_starts_agree_with_busy() {
        let m = machine();
        let l = LoadModel::new(&m, 60.0, 20_618_000.0, 1);
        let all: Vec<usize> = (0..m.len()).collect();
        let mut idle = IdleStarts::new(&l, &all);
        let mut t = 3_000_000.0;
        for _ in 0..200 {
            let (at, c) = idle.next_after(t, 5).unwrap();
            assert!(at > t && c != 5);
            assert!(
                l.busy(c, at - 1.0) && !l.busy(c, at + 1.0),
                "CPU {c} goes idle at {at}"
            );
            let nt = l.next_transition(c, at - 1.0);
            assert!((nt - at).abs() < 1e-3);
            t = at;
        }
    }
}
