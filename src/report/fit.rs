//! `numalab sim fit`'s report: each fitted row against the model, each
//! parameter with its error and where it came from, the rows left to
//! predict, in every [`Format`](crate::table::Format).

use crate::sim::fit::{Fit, RowFit};
use crate::table::{self, Render, Table};
use serde::Serialize;

pub const SCHEMA: &str = "numalab.fit/1";

/// A fit and what it was made from.
#[derive(Debug, Serialize)]
pub struct FitReport {
    pub schema: &'static str,
    /// The profile file written.
    pub out: String,
    pub base: String,
    pub runs: Vec<String>,
    pub fit: Fit,
    /// Rows not fitted, and why.
    pub left_out: Vec<String>,
    pub warnings: Vec<String>,
}

fn shares(r: &RowFit) -> String {
    r.dist_share
        .iter()
        .filter(|(_, s)| **s >= 0.005)
        .map(|(d, s)| format!("{d}:{:.0}%", s * 100.0))
        .collect::<Vec<_>>()
        .join(" ")
}

impl FitReport {
    fn rows_table(&self) -> Table {
        let mut t = Table::new()
            .left("row")
            .right("n")
            .right("ns/access")
            .right("±95%")
            .right("fit")
            .right("error")
            .left("memory at distance");
        for r in &self.fit.rows {
            t.row(vec![
                r.label.clone(),
                r.n.to_string(),
                format!("{:.2}", r.measured),
                table::num(r.ci95, 2, "-"),
                format!("{:.2}", r.predicted),
                // No "-0.0%": a rounding's sign says nothing.
                format!(
                    "{:+.1}%",
                    if r.error_pct.abs() < 0.05 {
                        0.0
                    } else {
                        r.error_pct
                    }
                ),
                shares(r),
            ]);
        }
        t
    }

    fn params_table(&self) -> Table {
        let f = &self.fit;
        let mut t = Table::new()
            .left("parameter")
            .right("value")
            .right("SE")
            .left("from");
        let se = |s: Option<f64>| table::num(s, 2, "-");
        t.row(vec![
            "memory.cpu_ns".into(),
            format!("{:.2}", f.cpu_ns.value),
            se(f.cpu_ns.se),
            if f.cpu_ns.se.is_some() {
                "fitted".into()
            } else {
                "set to 0: the local latency holds it (note below)".into()
            },
        ]);
        t.row(vec![
            "memory.local_ns".into(),
            format!("{:.2}", f.local_ns.value),
            se(f.local_ns.se),
            if f.local_ns.se.is_some() {
                "fitted".into()
            } else {
                format!("kept from {}", self.base)
            },
        ]);
        for r in &f.remote {
            t.row(vec![
                format!("memory.remote_ns.{}", r.distance),
                format!("{:.2}", r.ns.value),
                se(r.ns.se),
                format!("fitted: {:.3} ± {:.3} x local", r.ratio, r.ratio_se),
            ]);
        }
        t.row(vec![
            "noise.sample_cv".into(),
            format!("{:.4}", f.sample_cv),
            "-".into(),
            "fitted: RMS of the rows' sd/mean".into(),
        ]);
        t
    }

    fn lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(c) = self.fit.chi2_dof {
            v.push(format!(
                "chi-square per degree of freedom {c:.2}{}",
                if c > 1.0 {
                    ": the rows scatter about the model more than their own spread; errors scaled up by its root"
                } else {
                    ""
                }
            ));
        }
        v.extend(self.fit.notes.iter().cloned());
        v.extend(self.warnings.iter().map(|w| format!("warning: {w}")));
        v
    }

    fn heading(&self) -> String {
        format!(
            "Profile {} fitted on base {} from {} pinned row(s) of {}; written to {}",
            self.fit.profile.name,
            self.base,
            self.fit.rows.len(),
            self.runs.join(", "),
            self.out
        )
    }

    fn predict_hint(&self) -> String {
        format!(
            "numalab run --backend sim --profile {} --like DIR  (then numalab compare DIR SIMDIR)",
            self.out
        )
    }
}

#[derive(Serialize)]
struct CsvRow<'a> {
    row: &'a str,
    n: usize,
    ns_per_access: f64,
    ci95: Option<f64>,
    predicted: f64,
    error_pct: f64,
    memory_at_distance: String,
}

impl Render for FitReport {
    fn text(&self) -> String {
        let mut s = format!("{}\n\n", self.heading());
        s.push_str(&self.rows_table().text());
        s.push('\n');
        s.push_str(&self.params_table().text());
        for l in self.lines() {
            s.push_str(&format!("\n{l}"));
        }
        if !self.left_out.is_empty() {
            s.push_str(&format!(
                "\n\nNot fitted (predict them: {}):\n",
                self.predict_hint()
            ));
            for l in &self.left_out {
                s.push_str(&format!("  {l}\n"));
            }
        } else {
            s.push('\n');
        }
        s
    }

    fn markdown(&self) -> String {
        let mut s = format!("{}\n\n", self.heading());
        s.push_str(&self.rows_table().markdown());
        s.push('\n');
        s.push_str(&self.params_table().markdown());
        for l in self.lines() {
            s.push_str(&format!("\n- {l}"));
        }
        if !self.left_out.is_empty() {
            s.push_str(&format!(
                "\n\nNot fitted (predict them: `{}`):\n\n",
                self.predict_hint()
            ));
            for l in &self.left_out {
                s.push_str(&format!("- {}\n", l.replace('|', "\\|")));
            }
        } else {
            s.push('\n');
        }
        s
    }

    fn csv(&self) -> anyhow::Result<String> {
        table::csv(self.fit.rows.iter().map(|r| CsvRow {
            row: &r.label,
            n: r.n,
            ns_per_access: r.measured,
            ci95: r.ci95,
            predicted: r.predicted,
            error_pct: r.error_pct,
            memory_at_distance: shares(r),
        }))
    }

    fn json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }
}
