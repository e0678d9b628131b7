//! Reports, rebuilt from the records alone (run.json + samples.jsonl), in
//! one exporter file per format. Real and simulated runs share this path.
//! JSON carries the per-row statistics ([`RowStats`]) whole; the text,
//! Markdown and CSV tables are views of one flat row model
//! ([`rows::ReportRow`]) through the one table writer ([`crate::table`]).
//!
//! Each row's time is the probe's timed loop (`timing.total_ns`) in seconds,
//! as the RFC's table gives it. Beyond the RFC's columns: the 95% confidence
//! interval of the mean, the mean cross-node migrations per sample (sampled
//! by the probe), the mean kernel-counted migrations, the mean share of time
//! on the memory's node, the mean share of the loop spent waiting for a CPU
//! (behind the load; on a host as the kernel's schedstat counts it), and a
//! `noisy` flag on rows whose coefficient of variation exceeds [`NOISY_CV`].
//!
//! Records that are in the file but not counted (duplicates, unplanned
//! rows) come as notes: text, Markdown and JSON reports carry them as
//! warnings (CSV holds the rows only), so nothing is left out silently.

pub mod balance;
pub mod csv;
pub mod fit;
pub mod groups;
pub mod jobs;
pub mod json;
pub mod markdown;
pub mod observer;
pub mod rows;
pub mod sched;
pub mod text;
pub mod traced;

use crate::run::record::{self, RunMeta, SampleRecord};
use crate::run::spec::Row;
use crate::stats::{Sample, Summary};
use crate::table::{Format, Render};
use serde::Serialize;
use std::path::Path;

/// Rows with s/x̄ above this are flagged noisy (the RFC's rows sit at 1-4%).
pub const NOISY_CV: f64 = 0.05;

#[derive(Debug, Clone, Serialize)]
pub struct RowStats {
    pub row: Row,
    pub n: usize,
    /// Seconds.
    pub time: Option<Summary>,
    pub cross_node_mean: Option<f64>,
    pub kernel_migrations_mean: Option<f64>,
    pub on_mem_node_pct_mean: Option<f64>,
    /// The timed loop's time waiting for a CPU, as % of its time running
    /// or waiting (`cpu_time`), over the samples that have it.
    pub wait_pct_mean: Option<f64>,
    pub noisy: bool,
    pub placement_mismatches: usize,
    /// Samples whose knobs (numa_balancing, migration_cost_ns) changed
    /// under them: something outside numalab changed the system mid-sample.
    pub knobs_changed: usize,
    /// The kernel-traced breakdown (`run --trace`).
    pub traced: Option<traced::TracedRow>,
    /// The load balancer's cross-node moves (`run --trace`).
    pub balance: Option<balance::BalanceRow>,
    /// numalab's scheduler's account of the probe (`run --pnid-via sched`);
    /// left out of the JSON report for rows without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched: Option<sched::SchedRow>,
    /// NUMA balancing's groups, faults and spread of a threaded probe
    /// (`run --threads`); left out for rows without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<groups::GroupsRow>,
    /// The precision reached: the time's CI95 half-width as % of its mean.
    pub precision_pct: Option<f64>,
    /// Adaptive runs: why and after how many samples the row stopped
    /// (`None` while it still samples, and in fixed runs).
    pub stop: Option<crate::run::stop::RowStop>,
    /// Position in the run's order of the sample the row stopped at.
    pub stop_seq: Option<u64>,
}

/// An optional section of the text report: its caption and table, or
/// nothing when the table has no row (no row of the run has the data).
pub(super) fn text_section(caption: &str, t: &crate::table::Table) -> String {
    if t.is_empty() {
        return String::new();
    }
    format!("\n{caption}\n{}", t.text())
}

/// The same section of the Markdown report, under its `title`.
pub(super) fn markdown_section(title: &str, caption: &str, t: &crate::table::Table) -> String {
    if t.is_empty() {
        return String::new();
    }
    format!("\n## {title}\n\n{caption}\n\n{}", t.markdown())
}

pub(super) fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub fn row_stats(meta: &RunMeta, samples: &[SampleRecord]) -> Vec<RowStats> {
    meta.rows
        .iter()
        .map(|row| {
            let mine: Vec<&SampleRecord> = samples.iter().filter(|s| s.row == row.id).collect();
            RowStats::of(row.clone(), &mine)
        })
        .collect()
}

impl RowStats {
    /// One row's statistics over its samples (`mine`, all of this row).
    pub fn of(row: Row, mine: &[&SampleRecord]) -> RowStats {
        let times: Vec<f64> = mine
            .iter()
            .map(|s| s.probe.timing.total_ns as f64 / 1e9)
            .collect();
        let precision_pct = crate::run::stop::precision_pct(&times);
        let time = Sample::new(times).ok().map(|s| s.summary());
        let stopped = mine.iter().rev().find(|s| s.stop.is_some());
        let cross: Vec<f64> = mine
            .iter()
            .map(|s| s.probe.migrations.cross_node as f64)
            .collect();
        let kern: Vec<f64> = mine
            .iter()
            .filter_map(|s| s.probe.observation.kernel_migrations.map(|k| k as f64))
            .collect();
        let on: Vec<f64> = mine
            .iter()
            .filter_map(|s| s.probe.residency.on_mem_node_pct)
            .collect();
        let wait: Vec<f64> = mine
            .iter()
            .filter_map(|s| s.probe.cpu_time.as_ref().and_then(|c| c.wait_pct()))
            .collect();
        RowStats {
            n: mine.len(),
            noisy: time.as_ref().is_some_and(|t| t.n >= 2 && t.cv > NOISY_CV),
            time,
            cross_node_mean: mean(&cross),
            kernel_migrations_mean: mean(&kern),
            on_mem_node_pct_mean: mean(&on),
            wait_pct_mean: mean(&wait),
            placement_mismatches: mine
                .iter()
                .filter(|s| !s.probe.placement.matches_request)
                .count(),
            knobs_changed: mine.iter().filter(|s| !s.knobs_changed.is_empty()).count(),
            traced: traced::traced_row(mine),
            balance: balance::balance_row(mine),
            sched: sched::sched_row(mine),
            groups: groups::groups_row(mine),
            row,
            precision_pct,
            stop: stopped.and_then(|s| s.stop.clone()),
            stop_seq: stopped.map(|s| s.seq),
        }
    }
}

/// A run's report: its records, their statistics per row, and warnings
/// about the records (`notes`), in every [`Format`] ([`Render`]).
pub struct Report<'a> {
    meta: &'a RunMeta,
    samples: &'a [SampleRecord],
    notes: &'a [String],
    stats: Vec<RowStats>,
}

impl<'a> Report<'a> {
    pub fn new(meta: &'a RunMeta, samples: &'a [SampleRecord], notes: &'a [String]) -> Self {
        Report {
            meta,
            samples,
            notes,
            stats: row_stats(meta, samples),
        }
    }
}

impl Render for Report<'_> {
    fn text(&self) -> String {
        text::render(self.meta, self.samples, &self.stats, self.notes)
    }
    fn markdown(&self) -> String {
        markdown::render(self.meta, self.samples, &self.stats, self.notes)
    }
    fn csv(&self) -> anyhow::Result<String> {
        Ok(csv::render(&self.stats))
    }
    fn json(&self) -> anyhow::Result<String> {
        Ok(json::render(
            self.meta,
            self.samples,
            &self.stats,
            self.notes,
        ))
    }
}

/// Renders a report in `format`.
pub fn render(meta: &RunMeta, samples: &[SampleRecord], format: Format) -> String {
    render_noted(meta, samples, &[], format)
}

/// Renders a report in `format` with warnings about the records (`notes`).
pub fn render_noted(
    meta: &RunMeta,
    samples: &[SampleRecord],
    notes: &[String],
    format: Format,
) -> String {
    Report::new(meta, samples, notes)
        .render(format)
        .expect("a report's rows serialize")
}

/// Rewrites every export in `dir` (atomically), so an interrupted run still
/// leaves valid reports.
pub fn write_exports(
    dir: &Path,
    meta: &RunMeta,
    samples: &[SampleRecord],
    notes: &[String],
) -> anyhow::Result<()> {
    let report = Report::new(meta, samples, notes);
    for f in Format::ALL {
        let name = match f {
            Format::Text => "report.txt",
            Format::Markdown => "report.md",
            Format::Csv => "report.csv",
            Format::Json => "report.json",
        };
        let text = report.render(f)?;
        record::write_atomic(&dir.join(name), text.as_bytes())?;
    }
    Ok(())
}

/// Samples recorded of planned: `12/36`, or for an adaptive run, whose
/// plan is an upper bound, `12 of at most 36`.
pub fn recorded(meta: &RunMeta, samples: &[SampleRecord]) -> String {
    match meta.spec.precision {
        Some(_) => format!("{} of at most {}", samples.len(), meta.planned_samples),
        None => format!("{}/{}", samples.len(), meta.planned_samples),
    }
}

/// The RFC's header values.
pub fn header(meta: &RunMeta) -> Vec<(&'static str, String)> {
    let costs: Vec<String> = if meta.spec.migration_cost_ns.is_empty() {
        vec![meta
            .knobs_at_start
            .get(crate::sys::state::MIGRATION_COST)
            .cloned()
            .unwrap_or_else(|| "unknown (not changed)".into())]
    } else {
        meta.spec
            .migration_cost_ns
            .iter()
            .map(|c| c.to_string())
            .collect()
    };
    let samples = match &meta.spec.precision {
        Some(p) => format!(
            "{}-{} (adaptive: a row stops once its CI95 half-width is within {}% of its mean)",
            p.min_samples, p.max_samples, p.pct
        ),
        None => meta.spec.samples.to_string(),
    };
    let mut h = vec![
        ("NumSamples", samples),
        (
            "Kernel",
            meta.kernel.clone().unwrap_or_else(|| "unknown".into()),
        ),
        ("Load", format!("{}", meta.spec.load)),
        (
            "CPU_Model",
            meta.cpu_model.clone().unwrap_or_else(|| "unknown".into()),
        ),
        ("NUM_CPUS", meta.num_cpus.to_string()),
        ("migration_cost_ns", costs.join(", ")),
    ];
    // A simulated run's spread is the profile's noise plus the model's own
    // (docs/sim-validation.md, "Sample-to-sample spread"): say which, since without
    // noise its intervals are far narrower than a machine's.
    if let Some(sim) = &meta.sim {
        let cv = sim.profile.noise.sample_cv;
        h.push((
            "Sim_noise",
            if cv > 0.0 {
                format!(
                    "sample_cv {cv} (profile {}: the machine's spread, shared by the rows per sample index)",
                    sim.profile.name
                )
            } else {
                format!(
                    "none (profile {} states no machine noise: the spread is the model's alone)",
                    sim.profile.name
                )
            },
        ));
    }
    // Only when it is not the kernel patch, so earlier reports read the same.
    use crate::run::record::PnidVia;
    let via = match meta.pnid_via {
        PnidVia::Prctl => None,
        PnidVia::Sched => {
            Some("numalab's sched_ext node-affine scheduler, the probe homed on the PNID node")
        }
        PnidVia::Agent => Some("user-space homenode agent, soft CPU affinity"),
    };
    if let Some(how) = via {
        h.push(("PNID_via", format!("{} ({how})", meta.pnid_via)));
    }
    h
}
