//! A [`Comparison`] as text, Markdown, CSV (one line per row and OTHER run,
//! serialized from [`CsvLine`] so header and fields cannot drift) or JSON
//! (schema [`super::SCHEMA`]).

use super::{Comparison, RowCmp, Side, Versus};
use crate::report::Format;
use serde::Serialize;
use std::fmt::Write;

pub fn render(c: &Comparison, format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Text => text(c),
        Format::Markdown => markdown(c),
        Format::Csv => csv(c)?,
        Format::Json => {
            let mut s = serde_json::to_string_pretty(c)?;
            s.push('\n');
            s
        }
    })
}

/// The rule behind the marks and columns, printed under every table.
fn legend(c: &Comparison) -> Vec<String> {
    let source = if c.moves_source == "trace" {
        "the kernel's trace (sched_migrate_task)"
    } else {
        "the probe's own sampling of its CPU (not traced)"
    };
    vec![
        format!(
            "* significant: Welch's two-sided p, Holm-Bonferroni over each OTHER's compared \
             rows at alpha = {}: sort p ascending, reject while p_(i) <= alpha/(m-i+1).",
            c.alpha
        ),
        "change = (OTHER-BASE)/BASE*100 of the mean time (the probe's timed loop, s, \
         ±95% CI half-width); g = Hedges' g = J*(mean_O-mean_B)/s_pooled, \
         J = 1-3/(4(n_B+n_O)-9), positive: OTHER slower."
            .into(),
        format!(
            "xnode: mean cross-node moves per sample; on-mem: mean % of time on the \
             memory's node; BASE>OTHER, from {source}."
        ),
    ]
}

fn t(s: &Side) -> String {
    match s.ci95_s {
        Some(ci) => format!("{:.3} ±{:.3}", s.mean_s, ci),
        None => format!("{:.3}", s.mean_s),
    }
}

fn p(v: &Versus) -> String {
    let mark = if v.significant { "*" } else { "" };
    match v.p {
        Some(p) if p < 1e-4 => format!("<0.0001{mark}"),
        Some(p) => format!("{p:.4}{mark}"),
        None => "-".into(),
    }
}

fn g(v: &Versus) -> String {
    v.hedges_g.map_or("-".into(), |g| format!("{g:+.2}"))
}

fn pair(a: Option<f64>, b: Option<f64>, prec: usize) -> String {
    let f = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.prec$}"));
    format!("{}>{}", f(a), f(b))
}

fn summary_line(c: &Comparison, run: usize) -> String {
    let s = &c.summaries[run - 1];
    let ratio = s.geomean_ratio.map_or("-".into(), |r| {
        format!("{r:.4} ({:+.1}%)", (r - 1.0) * 100.0)
    });
    format!(
        "{}: geometric mean of OTHER/BASE over {} rows {ratio}; significantly faster: {}, \
         slower: {}",
        c.runs[run].dir, s.rows, s.faster, s.slower
    )
}

fn run_lines(c: &Comparison) -> Vec<String> {
    c.runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{} {}: kernel {}, {} CPUs, {}, nodes A={} B={}, load {}%, {} samples{}",
                if i == 0 {
                    "BASE ".to_string()
                } else {
                    format!("OTHER{i}")
                },
                r.dir,
                r.kernel.as_deref().unwrap_or("unknown"),
                r.num_cpus,
                r.backend,
                r.node_a,
                r.node_b,
                r.load,
                r.samples_recorded,
                if r.traced { ", traced" } else { "" }
            )
        })
        .collect()
}

fn text(c: &Comparison) -> String {
    let mut out = String::new();
    for l in run_lines(c) {
        let _ = writeln!(out, "{l}");
    }
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let pw = c.rows.iter().map(|r| r.params.len()).max().unwrap_or(10);
    for run in 1..c.runs.len() {
        let _ = writeln!(
            out,
            "\nOTHER{run} {} vs BASE {}",
            c.runs[run].dir, c.runs[0].dir
        );
        let head = format!(
            "{:<pw$} {:>3} {:>14} {:>3} {:>14} {:>8} {:>8} {:>6} {:>11} {:>12}",
            "Parameters", "n", "BASE s", "n", "OTHER s", "change", "p", "g", "xnode", "on-mem"
        );
        let _ = writeln!(out, "{head}\n{}", "-".repeat(head.chars().count()));
        for r in &c.rows {
            let v = &r.versus[run - 1];
            let _ = writeln!(
                out,
                "{:<pw$} {:>3} {:>14} {:>3} {:>14} {:>+7.1}% {:>8} {:>6} {:>11} {:>12}",
                r.params,
                r.base.n,
                t(&r.base),
                v.other.n,
                t(&v.other),
                v.change_pct,
                p(v),
                g(v),
                pair(r.base.cross_node, v.other.cross_node, 1),
                pair(r.base.on_mem_node_pct, v.other.on_mem_node_pct, 1)
            );
        }
        let _ = writeln!(out, "summary: {}", summary_line(c, run));
    }
    out.push('\n');
    for l in legend(c) {
        let _ = writeln!(out, "{l}");
    }
    if !c.not_compared.is_empty() {
        out.push_str("\nNot compared:\n");
        for n in &c.not_compared {
            let _ = writeln!(out, "  {}: {}", n.params, n.why);
        }
    }
    out
}

fn markdown(c: &Comparison) -> String {
    let mut out = String::from("# numalab compare\n\n");
    for l in run_lines(c) {
        let _ = writeln!(out, "- {l}");
    }
    if !c.warnings.is_empty() {
        out.push('\n');
        for w in &c.warnings {
            let _ = writeln!(out, "> **warning:** {w}");
        }
    }
    for run in 1..c.runs.len() {
        let _ = writeln!(
            out,
            "\n## OTHER{run} `{}` vs BASE `{}`\n",
            c.runs[run].dir, c.runs[0].dir
        );
        out.push_str(
            "| Parameters | n | BASE s | n | OTHER s | change | p | g | xnode | on-mem |\n\
             |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for r in &c.rows {
            let v = &r.versus[run - 1];
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:+.1}% | {} | {} | {} | {} |",
                r.params,
                r.base.n,
                t(&r.base),
                v.other.n,
                t(&v.other),
                v.change_pct,
                p(v).replace('*', "\\*"),
                g(v),
                pair(r.base.cross_node, v.other.cross_node, 1),
                pair(r.base.on_mem_node_pct, v.other.on_mem_node_pct, 1)
            );
        }
        let _ = writeln!(out, "\nSummary: {}", summary_line(c, run));
    }
    out.push('\n');
    for l in legend(c) {
        let _ = writeln!(out, "{}\n", l.replace('*', "\\*"));
    }
    if !c.not_compared.is_empty() {
        out.push_str("Not compared:\n\n");
        for n in &c.not_compared {
            let _ = writeln!(out, "- {}: {}", n.params, n.why);
        }
    }
    out
}

/// One CSV line: a row against one OTHER run.
#[derive(Debug, Serialize)]
pub struct CsvLine<'a> {
    pub base_dir: &'a str,
    pub other_dir: &'a str,
    pub params: &'a str,
    pub pnid: &'a str,
    pub nb: u8,
    pub mem: &'a str,
    pub cpu: &'a str,
    pub migration_cost_ns: Option<u64>,
    pub knobs: String,
    pub base_row: usize,
    pub other_row: usize,
    pub base_n: usize,
    pub base_mean_s: f64,
    pub base_ci95_s: Option<f64>,
    pub other_n: usize,
    pub other_mean_s: f64,
    pub other_ci95_s: Option<f64>,
    pub change_pct: f64,
    pub t: Option<f64>,
    pub df: Option<f64>,
    pub p: Option<f64>,
    pub hedges_g: Option<f64>,
    pub holm_threshold: Option<f64>,
    pub significant: bool,
    pub moves_source: &'a str,
    pub base_cross_node: Option<f64>,
    pub other_cross_node: Option<f64>,
    pub base_on_mem_node_pct: Option<f64>,
    pub other_on_mem_node_pct: Option<f64>,
}

fn csv_line<'a>(c: &'a Comparison, r: &'a RowCmp, v: &'a Versus) -> CsvLine<'a> {
    CsvLine {
        base_dir: &c.runs[0].dir,
        other_dir: &c.runs[v.run].dir,
        params: &r.params,
        pnid: &r.key.pnid,
        nb: r.key.nb,
        mem: &r.key.mem,
        cpu: &r.key.cpu,
        migration_cost_ns: r.key.migration_cost_ns,
        knobs: crate::experiment::knobs::label(&r.key.knobs),
        base_row: r.base.row,
        other_row: v.other.row,
        base_n: r.base.n,
        base_mean_s: r.base.mean_s,
        base_ci95_s: r.base.ci95_s,
        other_n: v.other.n,
        other_mean_s: v.other.mean_s,
        other_ci95_s: v.other.ci95_s,
        change_pct: v.change_pct,
        t: v.t,
        df: v.df,
        p: v.p,
        hedges_g: v.hedges_g,
        holm_threshold: v.holm_threshold,
        significant: v.significant,
        moves_source: &c.moves_source,
        base_cross_node: r.base.cross_node,
        other_cross_node: v.other.cross_node,
        base_on_mem_node_pct: r.base.on_mem_node_pct,
        other_on_mem_node_pct: v.other.on_mem_node_pct,
    }
}

fn csv(c: &Comparison) -> anyhow::Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    for run in 1..c.runs.len() {
        for r in &c.rows {
            w.serialize(csv_line(c, r, &r.versus[run - 1]))?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}
