//! The report's row model: one flat [`ReportRow`] per row of the run, from
//! which the CSV (serialized as is: the header is the field names), the
//! text and the Markdown tables are all built ([`crate::table`]). A column
//! is added here, once; new fields go at the end so the CSV's existing
//! columns keep their positions.

use super::RowStats;
use crate::table::{num, Table};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ReportRow {
    pub row: usize,
    pub pnid: i32,
    pub nb: u8,
    pub mem: String,
    pub cpu: String,
    pub migration_cost_ns: Option<u64>,
    pub n: usize,
    pub avg_s: Option<f64>,
    pub max_s: Option<f64>,
    pub min_s: Option<f64>,
    pub stdv_s: Option<f64>,
    /// Half-width of the mean's 95% confidence interval.
    pub ci95_s: Option<f64>,
    pub cv: Option<f64>,
    pub cross_node_mean: Option<f64>,
    pub kernel_migrations_mean: Option<f64>,
    pub on_mem_node_pct_mean: Option<f64>,
    pub noisy: bool,
    pub knobs_changed: usize,
    pub skipped: Option<String>,
    pub traced_n: Option<usize>,
    pub traced_same_core: Option<f64>,
    pub traced_same_llc: Option<f64>,
    pub traced_same_node: Option<f64>,
    pub traced_cross_node: Option<f64>,
    pub traced_to_mem_node: Option<f64>,
    pub traced_from_mem_node: Option<f64>,
    pub traced_away_pct: Option<f64>,
    pub r_cross_time: Option<f64>,
    pub p_cross_time: Option<f64>,
    pub r_away_time: Option<f64>,
    pub p_away_time: Option<f64>,
    // Columns the CSV lacked before the row model (the text showed them).
    /// The block's other knobs, `name=value` separated by spaces.
    pub knobs: String,
    pub placement_mismatches: usize,
    pub traced_moves: Option<f64>,
    pub traced_cross_load_balance: Option<f64>,
    pub traced_cross_wakeup: Option<f64>,
    pub traced_cross_numa_balancing: Option<f64>,
    pub traced_lost_events: Option<u64>,
    // Adaptive sampling (`run --precision`).
    /// The precision reached: ci95_s / avg_s x 100.
    pub precision_pct: Option<f64>,
    /// Why the row stopped sampling: `precision` or `max_samples`; empty
    /// while it still samples and in fixed runs.
    pub stop_reason: Option<crate::run::stop::StopReason>,
    /// Position in the run's order of the sample it stopped at.
    pub stop_seq: Option<u64>,
    // The load balancer's cross-node moves per sample (`run --trace`).
    /// Samples with counters; `schedstat` (every task) or `sim` (the probe).
    pub lb_n: Option<usize>,
    pub lb_source: Option<String>,
    pub lb_cross_moved: Option<f64>,
    pub lb_cross_busy: Option<f64>,
    pub lb_cross_idle: Option<f64>,
    pub lb_cross_newly_idle: Option<f64>,
    pub lb_cross_pushed: Option<f64>,
    pub lb_cross_hot: Option<f64>,
    /// The probe's own cross-node load-balancing moves per sample by kind,
    /// from its trace (over `traced_cross_lb_n` samples).
    pub traced_cross_lb_n: Option<usize>,
    pub traced_cross_lb_busy: Option<f64>,
    pub traced_cross_lb_idle: Option<f64>,
    pub traced_cross_lb_newly_idle: Option<f64>,
    pub traced_cross_lb_pushed: Option<f64>,
    pub traced_cross_lb_unknown: Option<f64>,
    /// The loop's time waiting for a CPU, % of running plus waiting.
    pub wait_pct_mean: Option<f64>,
}

impl ReportRow {
    pub fn of(s: &RowStats) -> ReportRow {
        let t = s.time.as_ref();
        let tr = s.traced.as_ref();
        let tf = |f: fn(&super::traced::TracedRow) -> f64| tr.map(f);
        let lb = s.balance.as_ref();
        let lf = |f: fn(&super::balance::BalanceRow) -> f64| lb.map(f);
        let kinds = tr.and_then(|t| t.cross_balancing);
        let kf = |f: fn(&super::traced::CrossKinds) -> f64| kinds.as_ref().map(f);
        ReportRow {
            row: s.row.id,
            pnid: s.row.pnid,
            nb: s.row.nb,
            mem: s.row.mem_label(),
            cpu: s.row.cpu_label(),
            migration_cost_ns: s.row.migration_cost_ns,
            n: s.n,
            avg_s: t.map(|t| t.mean),
            max_s: t.map(|t| t.max),
            min_s: t.map(|t| t.min),
            stdv_s: t.map(|t| t.stddev),
            ci95_s: t.and_then(|t| t.ci95),
            cv: t.map(|t| t.cv),
            cross_node_mean: s.cross_node_mean,
            kernel_migrations_mean: s.kernel_migrations_mean,
            on_mem_node_pct_mean: s.on_mem_node_pct_mean,
            noisy: s.noisy,
            knobs_changed: s.knobs_changed,
            skipped: s.row.skip.clone(),
            traced_n: tr.map(|t| t.n),
            traced_same_core: tf(|t| t.same_core),
            traced_same_llc: tf(|t| t.same_llc),
            traced_same_node: tf(|t| t.same_node),
            traced_cross_node: tf(|t| t.cross_node),
            traced_to_mem_node: tf(|t| t.to_mem_node),
            traced_from_mem_node: tf(|t| t.from_mem_node),
            traced_away_pct: tr.and_then(|t| t.away_pct),
            r_cross_time: tr.and_then(|t| t.r_cross_time.map(|c| c.r)),
            p_cross_time: tr.and_then(|t| t.r_cross_time.map(|c| c.p)),
            r_away_time: tr.and_then(|t| t.r_away_time.map(|c| c.r)),
            p_away_time: tr.and_then(|t| t.r_away_time.map(|c| c.p)),
            knobs: crate::run::knobs::label(&s.row.knobs),
            placement_mismatches: s.placement_mismatches,
            traced_moves: tf(|t| t.moves),
            traced_cross_load_balance: tf(|t| t.cross_load_balance),
            traced_cross_wakeup: tf(|t| t.cross_wakeup),
            traced_cross_numa_balancing: tf(|t| t.cross_numa_balancing),
            traced_lost_events: tr.map(|t| t.lost_events),
            precision_pct: s.precision_pct,
            stop_reason: s.stop.as_ref().map(|s| s.reason),
            stop_seq: s.stop_seq,
            lb_n: lb.map(|b| b.n),
            lb_source: lb.map(|b| source_label(b.source).to_string()),
            lb_cross_moved: lf(|b| b.moved),
            lb_cross_busy: lf(|b| b.busy),
            lb_cross_idle: lf(|b| b.idle),
            lb_cross_newly_idle: lf(|b| b.newly_idle),
            lb_cross_pushed: lf(|b| b.pushed),
            lb_cross_hot: lf(|b| b.hot),
            traced_cross_lb_n: kinds.map(|k| k.n),
            traced_cross_lb_busy: kf(|k| k.busy),
            traced_cross_lb_idle: kf(|k| k.idle),
            traced_cross_lb_newly_idle: kf(|k| k.newly_idle),
            traced_cross_lb_pushed: kf(|k| k.pushed),
            traced_cross_lb_unknown: kf(|k| k.unknown),
            wait_pct_mean: s.wait_pct_mean,
        }
    }

    /// `precision` / `max-samples` for a row that stopped, `sampling`
    /// for one that has not yet.
    pub fn stopped(&self) -> String {
        use crate::run::stop::StopReason;
        match self.stop_reason {
            Some(StopReason::Precision) => "precision".into(),
            Some(StopReason::MaxSamples) => "max-samples".into(),
            None => "sampling".into(),
        }
    }

    /// `[07]`, as the RFC numbers rows.
    pub fn label(&self) -> String {
        format!("[{:02}]", self.row)
    }

    /// What is unusual about the row: noisy, samples whose placement did
    /// not match the request, samples whose knobs changed under them.
    pub fn flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.noisy {
            v.push("noisy".to_string());
        }
        if self.placement_mismatches > 0 {
            v.push(format!("placement-mismatch x{}", self.placement_mismatches));
        }
        if self.knobs_changed > 0 {
            v.push(format!("knobs-changed x{}", self.knobs_changed));
        }
        v
    }
}

fn source_label(s: crate::analysis::balance::Source) -> &'static str {
    match s {
        crate::analysis::balance::Source::Schedstat => "schedstat",
        crate::analysis::balance::Source::Sim => "sim",
    }
}

pub fn rows(stats: &[RowStats]) -> Vec<ReportRow> {
    stats.iter().map(ReportRow::of).collect()
}

/// The RFC's table: `[07] Avg max min stdv | Test Parameters`, a gap
/// between blocks.
pub fn rfc_table(stats: &[RowStats]) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("Avg")
        .right("max")
        .right("min")
        .right("stdv")
        .bar()
        .left("Test Parameters");
    let mut last_block = None;
    for s in stats {
        if last_block.is_some_and(|b| b != s.row.block) {
            t.gap();
        }
        last_block = Some(s.row.block);
        let r = ReportRow::of(s);
        let f = |v: Option<f64>| num(v, 2, "");
        let (avg, params) = match (&r.skipped, r.avg_s) {
            (Some(why), _) => ("skipped".into(), format!("{} ({why})", s.row.params())),
            (None, None) => ("pending".into(), s.row.params()),
            (None, avg) => (f(avg), s.row.params()),
        };
        t.row(vec![
            r.label(),
            avg,
            f(r.max_s),
            f(r.min_s),
            f(r.stdv_s),
            params,
        ]);
    }
    t
}

/// What the RFC's table lacked, for the rows that run: n, the CI, the
/// precision reached (CI as % of the mean), with `adaptive` why the row
/// stopped, moves, time on the memory's node, time waiting for a CPU, flags.
pub fn extra_table(rows: &[ReportRow], adaptive: bool) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("n")
        .right("±95%CI")
        .right("±%mean");
    if adaptive {
        t = t.left("stopped");
    }
    let mut t = t
        .right("xnode/sample")
        .right("migr/sample")
        .right("on-mem-node")
        .right("waiting")
        .left("flags");
    for r in rows.iter().filter(|r| r.skipped.is_none()) {
        let mut cells = vec![
            r.label(),
            r.n.to_string(),
            r.ci95_s.map_or("-".into(), |c| format!("±{c:.2}")),
            r.precision_pct.map_or("-".into(), |p| format!("±{p:.1}%")),
        ];
        if adaptive {
            cells.push(r.stopped());
        }
        cells.extend([
            num(r.cross_node_mean, 1, "-"),
            num(r.kernel_migrations_mean, 1, "-"),
            r.on_mem_node_pct_mean
                .map_or("-".into(), |p| format!("{p:.1}%")),
            r.wait_pct_mean.map_or("-".into(), |p| format!("{p:.1}%")),
            r.flags().join(" "),
        ]);
        t.row(cells);
    }
    t
}

/// Every column of both text tables in one, for Markdown.
pub fn markdown_table(rows: &[ReportRow], adaptive: bool) -> Table {
    let mut t = Table::new()
        .left("Row")
        .left("PNID")
        .left("NB")
        .left("Mem")
        .left("CPU")
        .right("n")
        .right("Avg (s)")
        .right("max")
        .right("min")
        .right("stdv")
        .right("±95% CI")
        .right("±% of mean");
    if adaptive {
        t = t.left("stopped");
    }
    let mut t = t
        .right("x-node/sample")
        .right("migr/sample")
        .right("on mem node")
        .right("waiting for CPU")
        .left("notes");
    for r in rows {
        let f = |v: Option<f64>, p| num(v, p, "");
        let mut notes = Vec::new();
        if !r.knobs.is_empty() {
            notes.push(r.knobs.clone());
        }
        match &r.skipped {
            Some(why) => notes.push(format!("skipped: {why}")),
            None => notes.extend(r.flags()),
        }
        let mut cells = vec![
            r.label(),
            r.pnid.to_string(),
            r.nb.to_string(),
            r.mem.clone(),
            r.cpu.clone(),
            r.n.to_string(),
            f(r.avg_s, 2),
            f(r.max_s, 2),
            f(r.min_s, 2),
            f(r.stdv_s, 2),
            f(r.ci95_s, 2),
            r.precision_pct
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_default(),
        ];
        if adaptive {
            cells.push(if r.skipped.is_some() {
                String::new()
            } else {
                r.stopped()
            });
        }
        cells.extend([
            f(r.cross_node_mean, 1),
            f(r.kernel_migrations_mean, 1),
            r.on_mem_node_pct_mean
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_default(),
            r.wait_pct_mean
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_default(),
            notes.join(", "),
        ]);
        t.row(cells);
    }
    t
}

fn fmt_r(r: Option<f64>, p: Option<f64>) -> String {
    match (r, p) {
        (Some(r), Some(p)) if p < 0.001 => format!("{r:+.2} (p<0.001)"),
        (Some(r), Some(p)) => format!("{r:+.2} (p {p:.3})"),
        _ => "-".into(),
    }
}

/// The traced breakdown (`run --trace`) of the rows that have one; empty
/// without traces.
pub fn traced_table(rows: &[ReportRow]) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("n")
        .right("moves")
        .right("core")
        .right("LLC")
        .right("node")
        .right("xnode")
        .right("to-mem")
        .right("from-mem")
        .right("xLB/xWU/xNB")
        .right("away")
        .right("r(xnode,t)")
        .right("r(away,t)")
        .left("lost");
    for r in rows {
        let Some(n) = r.traced_n else { continue };
        let f = |v: Option<f64>| num(v, 1, "-");
        t.row(vec![
            r.label(),
            n.to_string(),
            f(r.traced_moves),
            f(r.traced_same_core),
            f(r.traced_same_llc),
            f(r.traced_same_node),
            f(r.traced_cross_node),
            f(r.traced_to_mem_node),
            f(r.traced_from_mem_node),
            format!(
                "{}/{}/{}",
                f(r.traced_cross_load_balance),
                f(r.traced_cross_wakeup),
                f(r.traced_cross_numa_balancing)
            ),
            r.traced_away_pct.map_or("-".into(), |a| format!("{a:.1}%")),
            fmt_r(r.r_cross_time, r.p_cross_time),
            fmt_r(r.r_away_time, r.p_away_time),
            match r.traced_lost_events {
                Some(l) if l > 0 => format!("LOST {l} events"),
                _ => String::new(),
            },
        ]);
    }
    t
}

/// The load balancer's cross-node moves of the rows that have them, the
/// domains' counters then the probe's own from its trace; empty without.
pub fn balance_table(rows: &[ReportRow]) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("n")
        .left("source")
        .right("moved")
        .right("busy")
        .right("idle")
        .right("newly-idle")
        .right("pushed")
        .right("hot")
        .right("probe n")
        .right("busy")
        .right("idle")
        .right("newly-idle")
        .right("pushed")
        .right("unknown");
    for r in rows {
        // Without the domains' counters, a row shows only if its probe
        // crossed nodes by balancing (not on a one-node machine).
        let probe_crossed = [
            r.traced_cross_lb_busy,
            r.traced_cross_lb_idle,
            r.traced_cross_lb_newly_idle,
            r.traced_cross_lb_pushed,
            r.traced_cross_lb_unknown,
        ]
        .iter()
        .any(|v| v.is_some_and(|v| v > 0.0));
        if r.lb_n.is_none() && !probe_crossed {
            continue;
        }
        let f = |v: Option<f64>| num(v, 1, "-");
        t.row(vec![
            r.label(),
            r.lb_n.map_or("-".into(), |n| n.to_string()),
            r.lb_source.clone().unwrap_or_else(|| "-".into()),
            f(r.lb_cross_moved),
            f(r.lb_cross_busy),
            f(r.lb_cross_idle),
            f(r.lb_cross_newly_idle),
            f(r.lb_cross_pushed),
            f(r.lb_cross_hot),
            r.traced_cross_lb_n.map_or("-".into(), |n| n.to_string()),
            f(r.traced_cross_lb_busy),
            f(r.traced_cross_lb_idle),
            f(r.traced_cross_lb_newly_idle),
            f(r.traced_cross_lb_pushed),
            f(r.traced_cross_lb_unknown),
        ]);
    }
    t
}
