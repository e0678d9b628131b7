//! A [`Comparison`] as JSON (schema [`super::SCHEMA`], the whole document)
//! or as tables: text, Markdown and CSV are views of one row model,
//! [`CmpRow`] (a row against one OTHER run), the CSV serialized from it and
//! the text and Markdown tables through [`crate::table`].

use super::{Comparison, RowCmp, Versus};
use crate::table::{Render, Table};
use serde::Serialize;
use std::fmt::Write;

impl Render for Comparison {
    fn text(&self) -> String {
        text(self)
    }
    fn markdown(&self) -> String {
        markdown(self)
    }
    fn csv(&self) -> anyhow::Result<String> {
        csv(self)
    }
    fn json(&self) -> anyhow::Result<String> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }
}

/// The rule behind the marks and columns, printed under every table.
fn legend(c: &Comparison) -> Vec<String> {
    let source = if c.moves_source == "trace" {
        "the kernel's trace (sched_migrate_task)"
    } else {
        "the probe's own sampling of its CPU (not traced)"
    };
    let mut lines = vec![
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
        "waiting: mean % of the timed loop the probe waited for a CPU (its schedstat \
         run_delay; the sim's own account), BASE>OTHER."
            .into(),
    ];
    if threaded(c) {
        lines.push(
            "one group: % of samples whose threads (or processes) all ended in one \
             numa_group; busiest: the shared array's busiest node's % of its pages at the end \
             (100: not spread); BASE>OTHER."
                .into(),
        );
    }
    lines
}

/// Whether any row on either side is a threaded probe's.
fn threaded(c: &Comparison) -> bool {
    c.rows.iter().any(|r| {
        r.base.one_group_pct.is_some() || r.versus.iter().any(|v| v.other.one_group_pct.is_some())
    })
}

fn time(mean: f64, ci: Option<f64>) -> String {
    match ci {
        Some(ci) => format!("{mean:.3} ±{ci:.3}"),
        None => format!("{mean:.3}"),
    }
}

fn p(r: &CmpRow) -> String {
    let mark = if r.significant { "*" } else { "" };
    match r.p {
        Some(p) if p < 1e-4 => format!("<0.0001{mark}"),
        Some(p) => format!("{p:.4}{mark}"),
        None => "-".into(),
    }
}

fn pair(a: Option<f64>, b: Option<f64>, prec: usize) -> String {
    let f = |x: Option<f64>| crate::table::num(x, prec, "-");
    format!("{}>{}", f(a), f(b))
}

/// The rows against OTHER `run`, as a table.
fn table(c: &Comparison, run: usize) -> Table {
    let mut t = Table::new()
        .left("Parameters")
        .right("n")
        .right("BASE s")
        .right("n")
        .right("OTHER s")
        .right("change")
        .right("p")
        .right("g")
        .right("xnode")
        .right("on-mem")
        .right("waiting");
    let threaded = threaded(c);
    if threaded {
        t = t.right("one group").right("busiest");
    }
    for r in &c.rows {
        let l = row(c, r, &r.versus[run - 1]);
        let mut cells = vec![
            l.params.to_string(),
            l.base_n.to_string(),
            time(l.base_mean_s, l.base_ci95_s),
            l.other_n.to_string(),
            time(l.other_mean_s, l.other_ci95_s),
            l.change_pct.map_or("-".into(), |c| format!("{c:+.1}%")),
            p(&l),
            l.hedges_g.map_or("-".into(), |g| format!("{g:+.2}")),
            pair(l.base_cross_node, l.other_cross_node, 1),
            pair(l.base_on_mem_node_pct, l.other_on_mem_node_pct, 1),
            pair(l.base_wait_pct, l.other_wait_pct, 1),
        ];
        if threaded {
            cells.push(pair(l.base_one_group_pct, l.other_one_group_pct, 0));
            cells.push(pair(
                l.base_shared_busiest_pct,
                l.other_shared_busiest_pct,
                0,
            ));
        }
        t.row(cells);
    }
    t
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
    for run in 1..c.runs.len() {
        let _ = writeln!(
            out,
            "\nOTHER{run} {} vs BASE {}",
            c.runs[run].dir, c.runs[0].dir
        );
        out.push_str(&table(c, run).text());
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
        out.push_str(&table(c, run).markdown().replace('*', "\\*"));
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

/// The row model: a row against one OTHER run.
#[derive(Debug, Serialize)]
pub struct CmpRow<'a> {
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
    pub change_pct: Option<f64>,
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
    pub base_wait_pct: Option<f64>,
    pub other_wait_pct: Option<f64>,
    pub base_one_group_pct: Option<f64>,
    pub other_one_group_pct: Option<f64>,
    pub base_shared_busiest_pct: Option<f64>,
    pub other_shared_busiest_pct: Option<f64>,
}

pub fn row<'a>(c: &'a Comparison, r: &'a RowCmp, v: &'a Versus) -> CmpRow<'a> {
    CmpRow {
        base_dir: &c.runs[0].dir,
        other_dir: &c.runs[v.run].dir,
        params: &r.params,
        pnid: &r.key.pnid,
        nb: r.key.nb,
        mem: &r.key.mem,
        cpu: &r.key.cpu,
        migration_cost_ns: r.key.migration_cost_ns,
        knobs: crate::run::knobs::label(&r.key.knobs),
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
        base_wait_pct: r.base.wait_pct,
        other_wait_pct: v.other.wait_pct,
        base_one_group_pct: r.base.one_group_pct,
        other_one_group_pct: v.other.one_group_pct,
        base_shared_busiest_pct: r.base.shared_busiest_pct,
        other_shared_busiest_pct: v.other.shared_busiest_pct,
    }
}

fn csv(c: &Comparison) -> anyhow::Result<String> {
    let lines =
        (1..c.runs.len()).flat_map(|run| c.rows.iter().map(move |r| row(c, r, &r.versus[run - 1])));
    crate::table::csv(lines)
}
