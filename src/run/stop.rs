//! When a row stops sampling under `run --precision P`, and why: the
//! rule as a pure function of a row's first sample times. It is part of
//! the run's data model because the record of the sample a row stops at
//! carries the stop ([`RowStop`]), and reports read it back; the runner's
//! schedule (`crate::experiment::adaptive`) applies the same rule.

use super::record::{RunMeta, SampleRecord};
use super::spec::Precision;
use crate::stats::Sample;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
pub(crate) fn prefixes(records: &[SampleRecord]) -> BTreeMap<usize, Vec<f64>> {
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
pub(crate) fn stopped_at(p: &Precision, times: &[f64]) -> Option<u32> {
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
