//! The RFC's table, then what it lacked.

use super::{header, RowStats};
use crate::run::record::{RunMeta, SampleRecord};
use std::fmt::Write;

pub fn render(
    meta: &RunMeta,
    samples: &[SampleRecord],
    stats: &[RowStats],
    notes: &[String],
) -> String {
    let mut out = String::new();
    for (k, v) in header(meta) {
        let _ = writeln!(out, "{k}: {v}");
    }
    let _ = writeln!(
        out,
        "Nodes: A={} B={}  Backend: {}  Samples recorded: {}{}",
        meta.node_a,
        meta.node_b,
        meta.backend,
        super::recorded(meta, samples),
        if meta.end_unix_s.is_some() {
            ""
        } else {
            " (incomplete)"
        }
    );
    for n in notes {
        let _ = writeln!(out, "warning: {n}");
    }
    let rows = super::rows::rows(stats);
    out.push('\n');
    out.push_str(&super::rows::rfc_table(stats).text());
    out.push('\n');
    out.push_str(&super::rows::extra_table(&rows, meta.spec.precision.is_some()).text());
    out.push_str(&super::traced::render_text(&rows, samples));
    out.push_str(&super::balance::render_text(&rows));
    out.push_str(&super::sched::render_text(stats));
    out.push_str(&super::groups::render_text(stats));
    out
}
