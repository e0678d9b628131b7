//! The report as Markdown tables.

use super::{header, RowStats};
use crate::run::record::{RunMeta, SampleRecord};
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
        "- **Nodes**: A={} B={}; backend {}; samples {}\n",
        meta.node_a,
        meta.node_b,
        meta.backend,
        super::recorded(meta, samples)
    );
    for n in notes {
        let _ = writeln!(out, "> **warning**: {n}\n");
    }
    let rows = super::rows::rows(stats);
    out.push_str(&super::rows::markdown_table(&rows, meta.spec.precision.is_some()).markdown());
    let traced = super::rows::traced_table(&rows);
    if !traced.is_empty() {
        out.push_str("\n## Traced migrations\n\n");
        out.push_str(super::traced::CAPTION);
        out.push_str("\n\n");
        out.push_str(&traced.markdown());
        out.push_str(&format!("\n{}\n", super::traced::all_samples_line(samples)));
    }
    out.push_str(&super::markdown_section(
        "Load balancing across nodes",
        super::balance::CAPTION,
        &super::rows::balance_table(&rows),
    ));
    out.push_str(&super::sched::render_markdown(stats));
    out.push_str(&super::groups::render_markdown(stats));
    out
}
