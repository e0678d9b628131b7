//! The RFC's table, then what it lacked.

use super::{header, RowStats};
use crate::experiment::record::{RunMeta, SampleRecord};
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
        "Nodes: A={} B={}  Backend: {}  Samples recorded: {}/{}{}",
        meta.node_a,
        meta.node_b,
        meta.backend,
        samples.len(),
        meta.planned_samples,
        if meta.end_unix_s.is_some() {
            ""
        } else {
            " (incomplete)"
        }
    );
    for n in notes {
        let _ = writeln!(out, "warning: {n}");
    }
    out.push_str("\nAvg max min stdv | Test Parameters\n");
    out.push_str(&"-".repeat(70));
    out.push('\n');
    let mut last_block = None;
    for s in stats {
        if last_block.is_some() && last_block != Some(s.row.block) {
            out.push('\n');
        }
        last_block = Some(s.row.block);
        match (&s.row.skip, &s.time) {
            (Some(why), _) => {
                let _ = writeln!(
                    out,
                    "[{:02}] skipped | {} ({why})",
                    s.row.id,
                    s.row.params()
                );
            }
            (None, Some(t)) => {
                let _ = writeln!(
                    out,
                    "[{:02}] {:.2} {:.2} {:.2} {:.2} | {}",
                    s.row.id,
                    t.mean,
                    t.max,
                    t.min,
                    t.stddev,
                    s.row.params()
                );
            }
            (None, None) => {
                let _ = writeln!(out, "[{:02}] pending | {}", s.row.id, s.row.params());
            }
        }
    }
    out.push_str("\nRow   n    ±95%CI  xnode/sample  migr/sample  on-mem-node  flags\n");
    out.push_str(&"-".repeat(70));
    out.push('\n');
    let f = |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or_else(|| "-".into());
    for s in stats.iter().filter(|s| s.row.skip.is_none()) {
        let mut flags = Vec::new();
        if s.noisy {
            flags.push("noisy".to_string());
        }
        if s.placement_mismatches > 0 {
            flags.push(format!("placement-mismatch x{}", s.placement_mismatches));
        }
        if s.knobs_changed > 0 {
            flags.push(format!("knobs-changed x{}", s.knobs_changed));
        }
        let _ = writeln!(
            out,
            "[{:02}] {:>3} {:>9} {:>13} {:>12} {:>12}  {}",
            s.row.id,
            s.n,
            s.time
                .as_ref()
                .and_then(|t| t.ci95)
                .map(|c| format!("±{c:.2}"))
                .unwrap_or_else(|| "-".into()),
            f(s.cross_node_mean, 1),
            f(s.kernel_migrations_mean, 1),
            s.on_mem_node_pct_mean
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_else(|| "-".into()),
            flags.join(" ")
        );
    }
    out.push_str(&super::traced::render_text(stats, samples));
    out
}
