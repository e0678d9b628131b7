//! The background load, exactly as `numalab load` makes it: one pinned
//! worker per CPU, busy for `percent` of every period, each starting at
//! its phase ([`LoadPhases::offsets_ns`]: by default worker k, in CPU order,
//! k/n of a period late). Nothing about it depends on the
//! probes, so the load is a closed form: whether a CPU's worker is busy at
//! a time, when it last woke, and every worker's transitions in the order
//! they come ([`Transitions`]).
//!
//! Under an emulator the shape is not the plan's ([`Reshape`], the lab
//! profile's `emulator` section): one host thread runs the vCPUs in turn,
//! so a spinning worker sees its busy part's end late (and, late by a
//! whole idle part, spins on into the next period's busy part), and a
//! sleeping one wakes late. Each CPU's lateness in each period is a draw
//! from the measured distributions, from the sample's seed, so the load
//! stays a closed form of time.

use super::machine::Machine;
use super::rng::quantile;
use crate::load::LoadPhases;
use std::collections::BinaryHeap;

#[derive(Debug, Clone)]
pub struct LoadModel {
    pub period_ns: f64,
    /// Busy part of each period, ns (0: no load; period: always busy).
    pub busy_ns: f64,
    /// Phase of each CPU's worker, ns in [0, period).
    pub phase: Vec<f64>,
    /// What an emulator does to the plan; None: the plan, as on hardware.
    /// Set by [`LoadModel::reshaped`] only, with `shape`.
    reshape: Option<Reshape>,
    /// The reshaped load's busy share and mean idle part
    /// ([`LoadModel::reshaped_shape`]), drawn once: every sample's are the
    /// same.
    shape: Option<(f64, f64)>,
}

/// How late an emulated worker's transitions come, per CPU and period:
/// its busy part ends `stop_late_ns` past the plan (a draw of those
/// quantiles, the least first), and after an idle part it wakes
/// `wake_late_ns` past its period's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Reshape {
    pub stop_late_ns: Vec<f64>,
    pub wake_late_ns: Vec<f64>,
    /// The draws' stream (the sample's seed: [`LoadModel::for_sample`]).
    pub seed: u64,
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
            reshape: None,
            shape: None,
        }
    }

    /// This load as an emulator reshapes it (None: as planned).
    pub fn reshaped(mut self, reshape: Option<Reshape>) -> LoadModel {
        // A load always busy or never busy has no transitions to move.
        let cycles = self.busy_ns > 0.0 && self.busy_ns < self.period_ns;
        self.reshape = reshape.filter(|_| cycles);
        self.shape = self.reshape.as_ref().map(|r| self.reshaped_shape(r));
        self
    }

    /// The load one sample sees: its reshaping drawn from the sample's
    /// own seed.
    pub fn for_sample(&self, seed: u64) -> LoadModel {
        let mut l = self.clone();
        if let Some(r) = &mut l.reshape {
            r.seed = seed;
        }
        l
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
    /// Reshaped, the mean idle part ([`LoadModel::reshaped_shape`]).
    pub fn idle_gap_ns(&self) -> f64 {
        if self.busy_ns <= 0.0 || self.busy_ns >= self.period_ns {
            return f64::INFINITY;
        }
        match self.shape {
            None => self.period_ns - self.busy_ns,
            Some((_, idle)) => idle,
        }
    }

    /// The share of the time a worker is busy (PELT's long-run view of it):
    /// the plan's, or a reshaped load's own.
    pub fn busy_share(&self) -> f64 {
        match self.shape {
            None => (self.busy_ns / self.period_ns).clamp(0.0, 1.0),
            Some((busy, _)) => busy,
        }
    }

    /// A reshaped load's busy share and mean idle part (infinite when no
    /// idle part ends), over 4096 periods of one worker drawn from a
    /// stream of their own, so every sample's load is described alike.
    fn reshaped_shape(&self, r: &Reshape) -> (f64, f64) {
        let r = Reshape {
            seed: 0x0073_6861_7065,
            ..r.clone()
        };
        let periods = 4096;
        let (mut busy, mut idle, mut parts) = (0.0, 0.0, 0);
        // Where the last busy part ended, in ns from period 0's start.
        let mut ended: Option<f64> = None;
        for k in 0..periods {
            let (wake, stop) = self.busy_part(&r, 0, k);
            if stop <= wake {
                continue;
            }
            let s = k as f64 * self.period_ns;
            busy += stop - wake;
            if let Some(e) = ended {
                if s + wake > e + EPS {
                    idle += s + wake - e;
                    parts += 1;
                }
            }
            ended = Some(s + stop);
        }
        let mean = if parts == 0 {
            f64::INFINITY
        } else {
            idle / parts as f64
        };
        (busy / (periods as f64 * self.period_ns), mean)
    }

    /// CPU `c`'s period at load time `t`: its index and `t`'s offset in it.
    fn period_of(&self, c: usize, t: f64) -> (i64, f64) {
        let x = t - self.phase[c];
        let k = floor(x / self.period_ns);
        let w = x - k * self.period_ns;
        if w >= self.period_ns {
            (k as i64 + 1, 0.0)
        } else {
            (k as i64, w.max(0.0))
        }
    }

    /// Reshaped: whether CPU `c`'s worker spins through period `k`'s idle
    /// part: it saw its busy part's end only after the next period began,
    /// having had a busy part (woken past it, the worker slept at once:
    /// `load::resume`). The wake-up is late only after an idle part, so
    /// this looks back over the periods woken past their busy part
    /// (rare: 64 in a row is taken as an idle part before them).
    fn no_idle_part(&self, r: &Reshape, c: usize, k: i64) -> bool {
        for j in (k - 64..=k).rev() {
            if self.drawn_stop(r, c, j) < self.period_ns {
                return false;
            }
            if self.drawn_wake(r, c, j) < self.busy_ns {
                return true;
            }
            // Its busy part is there only if the period before ran on
            // into it.
        }
        false
    }

    /// Reshaped: how late CPU `c`'s worker wakes in period `k` after an
    /// idle part.
    fn drawn_wake(&self, r: &Reshape, c: usize, k: i64) -> f64 {
        let u = super::rng::hash3(r.seed ^ 0x7761_6b65, c as u64, k as u64);
        quantile(&r.wake_late_ns, u).min(self.period_ns)
    }

    /// Reshaped: where in period `k` CPU `c`'s worker sees its busy part's
    /// end, as drawn (past the period: it spins on into the next).
    fn drawn_stop(&self, r: &Reshape, c: usize, k: i64) -> f64 {
        let u = super::rng::hash3(r.seed ^ 0x7374_6f70, c as u64, k as u64);
        self.busy_ns + quantile(&r.stop_late_ns, u)
    }

    /// Reshaped: period `k`'s busy part of CPU `c`, as offsets [wake, stop)
    /// in the period (stop = the period: it runs on into the next).
    fn busy_part(&self, r: &Reshape, c: usize, k: i64) -> (f64, f64) {
        let wake = if self.no_idle_part(r, c, k - 1) {
            0.0
        } else {
            self.drawn_wake(r, c, k)
        };
        if wake >= self.busy_ns {
            // Woken past its busy part: it sleeps on to the next period
            // (`load::resume`).
            return (wake, wake);
        }
        (wake, self.drawn_stop(r, c, k).min(self.period_ns))
    }

    /// Whether CPU `c`'s worker is busy at load time `t`.
    pub fn busy(&self, c: usize, t: f64) -> bool {
        match &self.reshape {
            None => self.wrap(t - self.phase[c]) < self.busy_ns,
            Some(r) => {
                let (k, w) = self.period_of(c, t);
                self.busy_in(r, c, k, w)
            }
        }
    }

    /// Whether CPU `c`'s worker is busy just after load time `t` (the
    /// state a transition at `t` leaves). Reshaped, the step past `t` is
    /// taken in the period's offset, not in `t`: at an hour's simulated
    /// time a nanosecond's millionth is below `t`'s precision, and a
    /// transition's own time lands on either side of its boundary.
    pub fn busy_after(&self, c: usize, t: f64) -> bool {
        match &self.reshape {
            None => self.busy(c, t + 1e-6),
            Some(r) => {
                let (mut k, mut w) = self.period_of(c, t);
                w += 0.01;
                if w >= self.period_ns {
                    (k, w) = (k + 1, w - self.period_ns);
                }
                self.busy_in(r, c, k, w)
            }
        }
    }

    /// Reshaped: busy at offset `w` of period `k`.
    fn busy_in(&self, r: &Reshape, c: usize, k: i64, w: f64) -> bool {
        let (wake, stop) = self.busy_part(r, c, k);
        w >= wake && w < stop
    }

    /// The time at or before load time `t` at which CPU `c`'s worker,
    /// busy at `t`, began its busy part.
    pub fn last_busy_start(&self, c: usize, t: f64) -> f64 {
        let Some(r) = &self.reshape else {
            return t - self.wrap(t - self.phase[c]);
        };
        // A busy part runs on through the periods with no idle part
        // (bounded as `no_idle_part`'s look-back: 64 in a row is a draw's
        // rarity).
        let (mut k, _) = self.period_of(c, t);
        for _ in 0..64 {
            if !self.no_idle_part(r, c, k - 1) {
                break;
            }
            k -= 1;
        }
        let (wake, _) = self.busy_part(r, c, k);
        (self.phase[c] + k as f64 * self.period_ns + wake).min(t)
    }

    /// Reshaped: the first time after load time `t` at which CPU `c`'s
    /// worker changes state.
    fn next_flip(&self, r: &Reshape, c: usize, t: f64) -> f64 {
        let now = self.busy_after(c, t);
        let (k0, w0) = self.period_of(c, t);
        for k in k0..k0 + 10_000 {
            let s = self.phase[c] + k as f64 * self.period_ns;
            let (wake, stop) = self.busy_part(r, c, k);
            // The state after each boundary, read at its offset.
            for w in [0.0, wake, stop] {
                let after = w + 0.01;
                if (k > k0 || w > w0 + 0.01)
                    && s + w > t
                    && w < self.period_ns
                    && (after >= wake && after < stop) != now
                {
                    return s + w;
                }
            }
        }
        f64::INFINITY
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
/// order they happen: the planned load repeats each period, so the next
/// one is a step along a list sorted once, not a search or a heap (on the 128-CPU
/// EPYC they were a third of the several-probe engine's time as heap
/// events). A reshaped load does not repeat: each CPU's next transition
/// is found from its draws and kept in a heap.
#[derive(Debug, Clone)]
pub struct Transitions {
    /// Reshaped, the load's transitions are not periodic: each CPU's next
    /// one, earliest first, and the load they come from.
    reshaped: Option<(LoadModel, BinaryHeap<Next>)>,
    /// (offset within the period, CPU, whether the worker is busy after
    /// it), sorted: the planned transition says what it is, so the engine
    /// does not work it out again from the time (a division and a floor per
    /// transition: 6% of the EPYC's time, measured).
    at: Vec<(f64, usize, bool)>,
    period_ns: f64,
    /// The next transition: its period's start (load time) and its index.
    base: f64,
    next: usize,
}

impl Transitions {
    /// The transitions after load time `t`.
    pub fn new(load: &LoadModel, t: f64) -> Transitions {
        if let Some(r) = &load.reshape {
            // Late past every idle part the workers never sleep; woken
            // past every busy part, they never run.
            let share = load.busy_share();
            let heap = if share >= 1.0 || share <= 0.0 {
                BinaryHeap::new()
            } else {
                (0..load.phase.len())
                    .map(|c| Next(load.next_flip(r, c, t), c))
                    .collect()
            };
            return Transitions {
                reshaped: Some((load.clone(), heap)),
                at: Vec::new(),
                period_ns: load.period_ns,
                base: 0.0,
                next: 0,
            };
        }
        let mut at: Vec<(f64, usize, bool)> =
            if load.busy_ns <= 0.0 || load.busy_ns >= load.period_ns {
                Vec::new()
            } else {
                (0..load.phase.len())
                    .flat_map(|c| {
                        let p = load.phase[c];
                        [
                            (p, c, true),
                            ((p + load.busy_ns) % load.period_ns, c, false),
                        ]
                    })
                    .collect()
            };
        at.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let base = floor(t / load.period_ns) * load.period_ns;
        let next = at.partition_point(|&(o, _, _)| base + o <= t + EPS);
        let mut tr = Transitions {
            reshaped: None,
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
        if let Some((_, heap)) = &self.reshaped {
            return heap.peek().filter(|n| n.0.is_finite()).map(|n| (n.0, n.1));
        }
        self.at.get(self.next).map(|&(o, c, _)| (self.base + o, c))
    }

    /// Steps past the next transition; the planned load says whether its
    /// worker is busy after it (a reshaped one leaves that to
    /// [`LoadModel::busy_after`]: None).
    pub fn pop(&mut self) -> Option<bool> {
        if let Some((load, heap)) = &mut self.reshaped {
            if let Some(Next(t, c)) = heap.pop() {
                let r = load.reshape.as_ref().expect("reshaped");
                heap.push(Next(load.next_flip(r, c, t), c));
            }
            return None;
        }
        let busy = self.at.get(self.next).map(|a| a.2);
        self.next += 1;
        self.wrap();
        busy
    }
}

/// A CPU's next transition in a heap: the earliest first, then the lower
/// CPU.
#[derive(Debug, Clone, Copy)]
struct Next(f64, usize);

impl PartialEq for Next {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Next {}
impl PartialOrd for Next {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Next {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
