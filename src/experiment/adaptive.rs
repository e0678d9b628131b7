//! What runs next, fixed or adaptive (`run --precision P`).
//!
//! Fixed: every (row, sample) pair in one seeded shuffled order
//! ([`super::plan::order`]). Adaptive: round by round; round k gives every
//! row still sampling its sample k, the rows in a seeded shuffled order of
//! their own (the seed and k pick it), so drift still spreads over rows. A
//! row stops after its k-th sample (k >= `min_samples`) once the half-width
//! of its mean's 95% confidence interval (Student t, [`crate::stats`]) is
//! within P% of the mean, or at `max_samples` without it.
//!
//! Whether a row still samples depends on its own first samples only, so
//! the schedule is a function of the records: `--resume` rebuilds it from
//! them and continues with the same rule and order. The record of the
//! sample a row stops at carries why ([`RowStop`], written with the
//! sample in one line, so no crash can separate them).

use super::plan;
use super::record::{RunMeta, SampleRecord};
use super::spec::Precision;
use crate::rng::{shuffle, SplitMix64};
use crate::stats::Sample;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The CI95 half-width came within P% of the mean.
    Precision,
    /// `max_samples` reached without that.
    MaxSamples,
}

/// Why and when a row stopped sampling: carried by the record of its last
/// sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowStop {
    pub reason: StopReason,
    /// Samples of the row, this one included.
    pub n: u32,
    /// CI95 half-width / mean x 100 over those samples (the precision
    /// reached); `null` when undefined (mean 0).
    pub precision_pct: Option<f64>,
    /// The target P.
    pub target_pct: f64,
}

/// CI95 half-width as a percentage of the mean; `None` for fewer than two
/// values or a mean of 0.
pub fn precision_pct(times: &[f64]) -> Option<f64> {
    let s = Sample::new(times.to_vec()).ok()?;
    let ci = s.ci95_half_width()?;
    let m = s.mean();
    (m != 0.0).then(|| ci / m.abs() * 100.0)
}

/// Whether a row whose first samples took `times` stops after the last.
pub fn decide(p: &Precision, times: &[f64]) -> Option<RowStop> {
    let n = times.len() as u32;
    if n < p.min_samples {
        return None;
    }
    let reached = precision_pct(times);
    let reason = if reached.is_some_and(|r| r <= p.pct) {
        StopReason::Precision
    } else if n >= p.max_samples {
        StopReason::MaxSamples
    } else {
        return None;
    };
    Some(RowStop {
        reason,
        n,
        precision_pct: reached,
        target_pct: p.pct,
    })
}

/// A sample's time as the rule sees it: the probe's timed loop, seconds.
pub fn time_s(r: &SampleRecord) -> f64 {
    r.probe.timing.total_ns as f64 / 1e9
}

/// Each row's times by sample index, contiguous from sample 0 (a gap ends
/// the prefix: the rule only ever sees a row's first samples).
fn prefixes(records: &[SampleRecord]) -> BTreeMap<usize, Vec<f64>> {
    let mut by: BTreeMap<usize, BTreeMap<u32, f64>> = BTreeMap::new();
    for r in records {
        by.entry(r.row).or_default().insert(r.sample, time_s(r));
    }
    by.into_iter()
        .map(|(row, m)| {
            let v: Vec<f64> = m
                .iter()
                .enumerate()
                .take_while(|(i, (s, _))| **s == *i as u32)
                .map(|(_, (_, t))| *t)
                .collect();
            (row, v)
        })
        .collect()
}

/// Where a row with these first times stopped: the first k whose first k
/// samples meet the rule.
fn stopped_at(p: &Precision, times: &[f64]) -> Option<u32> {
    (p.min_samples as usize..=times.len())
        .find(|&k| decide(p, &times[..k]).is_some())
        .map(|k| k as u32)
}

/// The rows' stops as the rule finds them in `records`: row -> stop.
pub fn stops(meta: &RunMeta, records: &[SampleRecord]) -> BTreeMap<usize, RowStop> {
    let Some(p) = &meta.spec.precision else {
        return BTreeMap::new();
    };
    prefixes(records)
        .into_iter()
        .filter_map(|(row, t)| {
            let k = stopped_at(p, &t)? as usize;
            Some((row, decide(p, &t[..k])?))
        })
        .collect()
}

/// What runs next: (seq, (row, sample)).
pub enum Schedule {
    Fixed {
        todo: VecDeque<(u64, (usize, u32))>,
        planned: u64,
    },
    Adaptive {
        rule: Precision,
        seed: u64,
        runnable: Vec<usize>,
        n_rows: u64,
        round: u32,
        queue: VecDeque<(u64, (usize, u32))>,
    },
}

impl Schedule {
    /// The schedule of `meta`'s run with `records` already recorded.
    pub fn new(meta: &RunMeta, records: &[SampleRecord]) -> Schedule {
        match meta.spec.precision {
            None => {
                let done: BTreeSet<(usize, u32)> =
                    records.iter().map(|s| (s.row, s.sample)).collect();
                let order = plan::order(&meta.rows, meta.spec.samples, meta.spec.seed);
                Schedule::Fixed {
                    planned: order.len() as u64,
                    todo: order
                        .into_iter()
                        .enumerate()
                        .filter(|(_, p)| !done.contains(p))
                        .map(|(i, p)| (i as u64, p))
                        .collect(),
                }
            }
            Some(rule) => Schedule::Adaptive {
                rule,
                seed: meta.spec.seed,
                runnable: meta
                    .rows
                    .iter()
                    .filter(|r| r.skip.is_none())
                    .map(|r| r.id)
                    .collect(),
                n_rows: meta.rows.len() as u64,
                round: 0,
                queue: VecDeque::new(),
            },
        }
    }

    /// The samples already decided to come after the last one `next` gave
    /// (the rest of a fixed run; the rest of an adaptive round), in order:
    /// what a backend that works ahead (the simulator) may prepare.
    pub fn upcoming(&self) -> Vec<(usize, u32)> {
        match self {
            Schedule::Fixed { todo, .. } => todo.iter().map(|(_, p)| *p).collect(),
            Schedule::Adaptive { queue, .. } => queue.iter().map(|(_, p)| *p).collect(),
        }
    }

    /// The next sample to run, given every record so far; `None` when the
    /// run is complete.
    pub fn next(&mut self, records: &[SampleRecord]) -> Option<(u64, (usize, u32))> {
        match self {
            Schedule::Fixed { todo, .. } => todo.pop_front(),
            Schedule::Adaptive {
                rule,
                seed,
                runnable,
                n_rows,
                round,
                queue,
            } => loop {
                let have = prefixes(records);
                while let Some(next) = queue.pop_front() {
                    let (row, sample) = next.1;
                    if have.get(&row).is_none_or(|t| t.len() <= sample as usize) {
                        return Some(next);
                    }
                }
                if *round >= rule.max_samples {
                    return None;
                }
                let r = *round;
                let mut active: Vec<usize> = runnable
                    .iter()
                    .copied()
                    .filter(|row| {
                        let t = have.get(row).map_or(&[][..], |v| &v[..]);
                        stopped_at(rule, &t[..t.len().min(r as usize)]).is_none()
                    })
                    .collect();
                if active.is_empty() {
                    return None;
                }
                shuffle(&mut active, round_seed(*seed, r));
                *queue = active
                    .into_iter()
                    .enumerate()
                    .map(|(i, row)| (r as u64 * *n_rows + i as u64, (row, r)))
                    .collect();
                *round += 1;
            },
        }
    }

    /// Samples the run takes at most, counting `records`: every planned
    /// pair (fixed); the recorded ones plus what the rows still sampling
    /// may take up to `max_samples` (adaptive).
    pub fn planned(&self, records: &[SampleRecord]) -> u64 {
        match self {
            Schedule::Fixed { planned, .. } => *planned,
            Schedule::Adaptive { rule, runnable, .. } => {
                let have = prefixes(records);
                let counted = records.len() as u64;
                let more: u64 = runnable
                    .iter()
                    .map(|row| {
                        let t = have.get(row).map_or(&[][..], |v| &v[..]);
                        match stopped_at(rule, t) {
                            Some(_) => 0,
                            None => (rule.max_samples as usize).saturating_sub(t.len()) as u64,
                        }
                    })
                    .sum();
                counted + more
            }
        }
    }

    /// The stop the rule finds for `row` once `time` (of sample `sample`)
    /// is added to `records`; `None` for fixed runs and rows still sampling.
    pub fn stop_with(
        &self,
        records: &[SampleRecord],
        row: usize,
        sample: u32,
        time: f64,
    ) -> Option<RowStop> {
        let Schedule::Adaptive { rule, .. } = self else {
            return None;
        };
        let mut t = prefixes(records).remove(&row).unwrap_or_default();
        if t.len() != sample as usize {
            return None;
        }
        t.push(time);
        decide(rule, &t)
    }
}

/// The seed of round `r`'s order: the run's seed mixed with the round, so
/// each round has its own order and the same seed gives the same orders.
fn round_seed(seed: u64, r: u32) -> u64 {
    SplitMix64::new(seed ^ (r as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pct: f64, min: u32, max: u32) -> Precision {
        Precision {
            pct,
            min_samples: min,
            max_samples: max,
        }
    }

    #[test]
    fn precision_pct_is_the_t_based_ci_over_the_mean() {
        // [1, 2, 3]: mean 2, s = 1, t(0.975, 2) = 4.302653: 4.302653/√3/2.
        let p = precision_pct(&[1.0, 2.0, 3.0]).unwrap();
        assert!(
            (p - 4.302653 / 3f64.sqrt() / 2.0 * 100.0).abs() < 1e-4,
            "{p}"
        );
        assert_eq!(precision_pct(&[1.0]), None);
        assert_eq!(precision_pct(&[0.0, 0.0]), None);
    }

    #[test]
    fn rows_stop_at_min_when_precise_else_at_max() {
        let r = rule(2.0, 3, 5);
        assert_eq!(decide(&r, &[1.0, 1.0]), None, "below min");
        let s = decide(&r, &[1.0, 1.001, 1.002]).unwrap();
        assert_eq!((s.reason, s.n), (StopReason::Precision, 3));
        assert!(s.precision_pct.unwrap() < 2.0);
        assert_eq!(decide(&r, &[1.0, 2.0, 3.0, 1.0]), None);
        let s = decide(&r, &[1.0, 2.0, 3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.reason, s.n), (StopReason::MaxSamples, 5));
        assert!(s.precision_pct.unwrap() > 2.0);
    }

    #[test]
    fn round_orders_are_seeded_and_differ_by_round() {
        let mut a: Vec<usize> = (0..20).collect();
        let mut b = a.clone();
        let mut c = a.clone();
        shuffle(&mut a, round_seed(1, 0));
        shuffle(&mut b, round_seed(1, 0));
        shuffle(&mut c, round_seed(1, 1));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut sorted = c.clone();
        sorted.sort();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    }
}
