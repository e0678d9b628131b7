//! What runs next, fixed or adaptive (`run --precision P`).
//!
//! Fixed: every (row, sample) pair in one seeded shuffled order
//! ([`crate::run::plan::order`]). Adaptive: round by round; round k gives every
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

use crate::rng::{shuffle, SplitMix64};
use crate::run::plan;
use crate::run::record::{RunMeta, SampleRecord};
use crate::run::spec::Precision;
use crate::run::stop::{decide, prefixes, stopped_at, RowStop};
use std::collections::{BTreeSet, VecDeque};

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
    use crate::run::stop::{precision_pct, StopReason};

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
