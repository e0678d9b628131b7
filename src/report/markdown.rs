//! The report as Markdown tables.

use super::{header, RowStats};
use crate::experiment::record::{RunMeta, SampleRecord};
use std::fmt::Write;

pub fn render(
    meta: &RunMeta,
    samples: &[SampleRecord],
    stats: &[RowStats],
    notes: &[String],
) -> String {
    let mut out = String::from("# numalab run\n\n");
    for (k, v) in header(meta) {
        let _ = writeln!(out, "- **{k}**: {v}");
    }
    let _ = writeln!(
        out,
        "- **Nodes**: A={} B={}; backend {}; samples {}/{}\n",
        meta.node_a,
        meta.node_b,
        meta.backend,
        samples.len(),
        meta.planned_samples
    );
    for n in notes {
        let _ = writeln!(out, "> **warning**: {n}\n");
    }
    out.push_str("| Row | PNID | NB | Mem | CPU | n | Avg (s) | max | min | stdv | ±95% CI | x-node/sample | migr/sample | on mem node | notes |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let f = |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or_default();
    for s in stats {
        let t = s.time.as_ref();
        let notes = match &s.row.skip {
            Some(why) => format!("skipped: {why}"),
            None => {
                let mut v = Vec::new();
                if s.noisy {
                    v.push("noisy".to_string());
                }
                if s.knobs_changed > 0 {
                    v.push(format!("knobs changed under {} samples", s.knobs_changed));
                }
                v.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "| [{:02}] | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.row.id,
            s.row.pnid,
            s.row.nb,
            s.row.mem_label(),
            s.row.cpu_label(),
            s.n,
            f(t.map(|t| t.mean), 2),
            f(t.map(|t| t.max), 2),
            f(t.map(|t| t.min), 2),
            f(t.map(|t| t.stddev), 2),
            f(t.and_then(|t| t.ci95), 2),
            f(s.cross_node_mean, 1),
            f(s.kernel_migrations_mean, 1),
            s.on_mem_node_pct_mean
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_default(),
            notes
        );
    }
    let traced = super::traced::render_text(stats, samples);
    if !traced.is_empty() {
        out.push_str("\n## Traced migrations\n\n```text");
        out.push_str(&traced);
        out.push_str("```\n");
    }
    out
}
