//! What numalab's scheduler says of the probe in a run through it (`run
//! --pnid-via sched`, each sample's `sched` field): per row, means per
//! sample of its share of time on the homenode, how often another node took
//! it (and how many of those its home's backlog allowed before its own wait
//! reached the steal delay), the slices it went on running away as a guest,
//! its returns home, and its queueing delay. These explain the row's
//! cross-node moves: each steal is one move away, each return one back.

use super::{mean, RowStats};
use crate::run::record::SampleRecord;
use crate::table::{num, Table};
use serde::Serialize;

/// Means per sample over a row's samples that carry the account.
#[derive(Debug, Clone, Serialize)]
pub struct SchedRow {
    pub n: usize,
    pub home: i32,
    pub on_home_pct: Option<f64>,
    pub stolen: f64,
    pub stolen_backlog: f64,
    pub guest_kept: f64,
    pub reattracted: f64,
    pub placed_idle: f64,
    pub wait_mean_ms: Option<f64>,
    pub wait_max_ms: f64,
}

/// The row's account, `None` when no sample has one (rows not through the
/// scheduler, records from before it).
pub fn sched_row(samples: &[&SampleRecord]) -> Option<SchedRow> {
    let got: Vec<_> = samples.iter().filter_map(|s| s.sched.as_ref()).collect();
    let first = got.first()?;
    let m = |f: fn(&crate::sched::account::ProcessAccount) -> f64| {
        mean(&got.iter().map(|a| f(a)).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    Some(SchedRow {
        n: got.len(),
        home: first.home,
        on_home_pct: mean(&got.iter().filter_map(|a| a.on_home_pct).collect::<Vec<_>>()),
        stolen: m(|a| a.stolen as f64),
        stolen_backlog: m(|a| a.stolen_backlog as f64),
        guest_kept: m(|a| a.guest_kept as f64),
        reattracted: m(|a| a.reattracted as f64),
        placed_idle: m(|a| a.placed_idle as f64),
        wait_mean_ms: mean(
            &got.iter()
                .filter_map(|a| a.wait_mean_ms)
                .collect::<Vec<_>>(),
        ),
        wait_max_ms: got.iter().map(|a| a.wait_max_ms).fold(0.0, f64::max),
    })
}

pub const CAPTION: &str = "numalab's scheduler's account of the probe, per sample: its share of \
     time on the homenode; taken by another node (of those, allowed by the home's backlog before \
     its own wait reached the steal delay); slices it went on running away as a guest; returns \
     home; placed on an idle home CPU; its wait in a queue (mean of means, longest)";

/// The rows that ran through the scheduler; empty when none did.
pub fn table(stats: &[RowStats]) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("n")
        .right("home")
        .right("on home %")
        .right("stolen")
        .right("backlog")
        .right("kept away")
        .right("came back")
        .right("placed idle")
        .right("wait ms")
        .right("max ms");
    for s in stats {
        let Some(r) = &s.sched else { continue };
        t.row(vec![
            format!("[{:02}]", s.row.id),
            r.n.to_string(),
            r.home.to_string(),
            num(r.on_home_pct, 1, "-"),
            format!("{:.1}", r.stolen),
            format!("{:.1}", r.stolen_backlog),
            format!("{:.1}", r.guest_kept),
            format!("{:.1}", r.reattracted),
            format!("{:.1}", r.placed_idle),
            num(r.wait_mean_ms, 3, "-"),
            format!("{:.3}", r.wait_max_ms),
        ]);
    }
    t
}

/// The scheduler's section of the text report, or nothing.
pub fn render_text(stats: &[RowStats]) -> String {
    super::text_section(CAPTION, &table(stats))
}

/// The scheduler's section of the Markdown report, or nothing.
pub fn render_markdown(stats: &[RowStats]) -> String {
    super::markdown_section("numalab's scheduler", CAPTION, &table(stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::account::ProcessAccount;

    fn sample(row: usize, acct: Option<ProcessAccount>) -> SampleRecord {
        SampleRecord {
            sched: acct,
            ..SampleRecord::fixture(row)
        }
    }

    fn acct(stolen: u64, backlog: u64, on_home: Option<f64>, wait: Option<f64>) -> ProcessAccount {
        ProcessAccount {
            home: 1,
            threads: 1,
            ran_ms: 100.0,
            on_home_pct: on_home,
            runs: 10,
            runs_home: 10 - stolen,
            placed_idle: 2,
            stolen,
            stolen_backlog: backlog,
            guest_kept: 1,
            reattracted: stolen,
            wait_mean_ms: wait,
            wait_max_ms: 3.0 * stolen as f64,
        }
    }

    #[test]
    fn a_rows_account_is_the_mean_of_its_samples_that_have_one() {
        let a = sample(0, Some(acct(2, 1, Some(90.0), Some(1.0))));
        let b = sample(0, Some(acct(4, 4, None, Some(3.0))));
        let none = sample(0, None);
        let r = sched_row(&[&a, &none, &b]).expect("two samples have it");
        assert_eq!(r.n, 2);
        assert_eq!(r.home, 1);
        assert_eq!(r.stolen, 3.0);
        assert_eq!(r.stolen_backlog, 2.5);
        assert_eq!(
            r.on_home_pct,
            Some(90.0),
            "the sample without a share is left out"
        );
        assert_eq!(r.wait_mean_ms, Some(2.0));
        assert_eq!(r.wait_max_ms, 12.0, "the longest, not a mean");
        assert!(sched_row(&[&none]).is_none());
    }

    #[test]
    fn only_rows_through_the_scheduler_get_a_line_and_no_run_gets_an_empty_section() {
        let meta_rows = |accts: Vec<Option<ProcessAccount>>| -> Vec<RowStats> {
            accts
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    let s = sample(i, a);
                    let row = crate::run::spec::Row {
                        id: i,
                        block: 0,
                        pnid: 1,
                        nb: 0,
                        mem: crate::run::spec::RowMem::Node(1),
                        cpu: crate::run::spec::RowCpu::Float,
                        migration_cost_ns: None,
                        knobs: Default::default(),
                        needs_two_nodes: true,
                        skip: None,
                    };
                    RowStats::of(row, &[&s])
                })
                .collect()
        };
        let stats = meta_rows(vec![None, Some(acct(2, 1, Some(90.0), Some(1.0)))]);
        let text = render_text(&stats);
        assert!(text.contains("[01]") && !text.contains("[00]"), "{text}");
        assert!(text.contains("90.0"), "{text}");
        assert!(render_markdown(&stats).contains("## numalab's scheduler"));
        assert_eq!(render_text(&meta_rows(vec![None, None])), "");
    }
}
