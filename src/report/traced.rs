//! What `run --trace` adds to a report: per row, the kernel-traced
//! migrations broken down as the RFC's author did by hand (same-core /
//! same-LLC / same-node / cross-node, to / from the memory's node) plus
//! their causes, and how each sample's cross-node migrations and time away
//! from the memory's node correlate with its time ([`crate::stats::correlation`]:
//! Pearson's r with its two-sided p-value), per row and over all samples.

use crate::run::record::SampleRecord;
use crate::stats::{correlation, Correlation};
use serde::Serialize;

/// Means per sample of a row's traced samples.
#[derive(Debug, Clone, Serialize)]
pub struct TracedRow {
    pub n: usize,
    pub moves: f64,
    pub same_core: f64,
    pub same_llc: f64,
    pub same_node: f64,
    pub cross_node: f64,
    pub to_mem_node: f64,
    pub from_mem_node: f64,
    /// Cross-node moves by cause.
    pub cross_numa_balancing: f64,
    pub cross_wakeup: f64,
    pub cross_load_balance: f64,
    /// Cross-node load-balancing moves by kind of balancing, over the
    /// samples whose traces tell them (`None` when none does).
    pub cross_balancing: Option<CrossKinds>,
    /// Percent of on-CPU time away from the memory's node.
    pub away_pct: Option<f64>,
    pub lost_events: u64,
    /// Cross-node moves vs time, and time away vs time.
    pub r_cross_time: Option<Correlation>,
    pub r_away_time: Option<Correlation>,
}

/// Means per sample of [`crate::trace::analyze::BalanceKinds`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CrossKinds {
    pub n: usize,
    pub busy: f64,
    pub idle: f64,
    pub newly_idle: f64,
    pub pushed: f64,
    pub unknown: f64,
}

fn cross_kinds(tr: &[&crate::trace::record::SampleTrace]) -> Option<CrossKinds> {
    let k: Vec<crate::trace::analyze::BalanceKinds> = tr
        .iter()
        .filter_map(|t| t.task.cross_node_balancing)
        .collect();
    let m =
        |f: fn(&crate::trace::analyze::BalanceKinds) -> u64| mean(k.iter().map(|x| f(x) as f64));
    (!k.is_empty()).then(|| CrossKinds {
        n: k.len(),
        busy: m(|x| x.busy),
        idle: m(|x| x.idle),
        newly_idle: m(|x| x.newly_idle),
        pushed: m(|x| x.pushed),
        unknown: m(|x| x.unknown),
    })
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

fn time_s(s: &SampleRecord) -> f64 {
    s.probe.timing.total_ns as f64 / 1e9
}

fn away(s: &SampleRecord) -> Option<f64> {
    s.trace
        .as_ref()?
        .task
        .residency
        .on_mem_node_pct
        .map(|p| 100.0 - p)
}

/// (cross-node vs time, away vs time) over `samples` that have a trace.
pub fn correlations(samples: &[&SampleRecord]) -> (Option<Correlation>, Option<Correlation>) {
    let traced: Vec<&&SampleRecord> = samples.iter().filter(|s| s.trace.is_some()).collect();
    let cross: Vec<f64> = traced
        .iter()
        .map(|s| s.trace.as_ref().unwrap().task.migrations.cross_node as f64)
        .collect();
    let t: Vec<f64> = traced.iter().map(|s| time_s(s)).collect();
    let (aw, ta): (Vec<f64>, Vec<f64>) = traced
        .iter()
        .filter_map(|s| Some((away(s)?, time_s(s))))
        .unzip();
    (correlation(&cross, &t), correlation(&aw, &ta))
}

/// The traced breakdown of one row's samples; `None` when none is traced.
pub fn traced_row(samples: &[&SampleRecord]) -> Option<TracedRow> {
    let tr: Vec<&crate::trace::record::SampleTrace> =
        samples.iter().filter_map(|s| s.trace.as_ref()).collect();
    if tr.is_empty() {
        return None;
    }
    let m = |f: fn(&crate::trace::record::SampleTrace) -> u64| mean(tr.iter().map(|t| f(t) as f64));
    let aw: Vec<f64> = samples.iter().filter_map(|s| away(s)).collect();
    let (r_cross_time, r_away_time) = correlations(samples);
    Some(TracedRow {
        n: tr.len(),
        moves: m(|t| t.task.migrations.total),
        same_core: m(|t| t.task.migrations.same_core),
        same_llc: m(|t| t.task.migrations.same_llc),
        same_node: m(|t| t.task.migrations.same_node),
        cross_node: m(|t| t.task.migrations.cross_node),
        to_mem_node: m(|t| t.task.migrations.to_mem_node),
        from_mem_node: m(|t| t.task.migrations.from_mem_node),
        cross_numa_balancing: m(|t| t.task.cross_node_causes.numa_balancing),
        cross_wakeup: m(|t| t.task.cross_node_causes.wakeup),
        cross_load_balance: m(|t| t.task.cross_node_causes.load_balance),
        cross_balancing: cross_kinds(&tr),
        away_pct: (!aw.is_empty()).then(|| mean(aw.into_iter())),
        lost_events: tr.iter().map(|t| t.lost_events).sum(),
        r_cross_time,
        r_away_time,
    })
}

pub const CAPTION: &str = "Traced migrations per sample (kernel sched_migrate_task; cross-node by \
     cause: load balance / wake-up / NUMA balancing)";

fn fmt_r(c: &Option<Correlation>) -> String {
    match c {
        Some(c) if c.p < 0.001 => format!("{:+.2} (p<0.001)", c.r),
        Some(c) => format!("{:+.2} (p {:.3})", c.r, c.p),
        None => "-".into(),
    }
}

/// How cross-node moves and time away correlate with time over all samples.
pub fn all_samples_line(samples: &[SampleRecord]) -> String {
    let all: Vec<&SampleRecord> = samples.iter().collect();
    let (c, a) = correlations(&all);
    format!(
        "all samples: r(cross-node moves, time) {}; r(time away from memory's node, time) {}",
        fmt_r(&c),
        fmt_r(&a)
    )
}

/// The traced section of the text report, or nothing without traces.
pub fn render_text(rows: &[super::rows::ReportRow], samples: &[SampleRecord]) -> String {
    let t = super::rows::traced_table(rows);
    if t.is_empty() {
        return String::new();
    }
    format!("\n{CAPTION}\n{}{}\n", t.text(), all_samples_line(samples))
}
