//! What the load balancer's own counters add to a traced report (`run
//! --trace`, the `balance` field of each sample): per row, the tasks moved
//! per sample by the domain levels that cross nodes, by kind of balancing
//! (busy, idle, newly idle, active push) and how many of the pulls took a
//! cache-hot task. On a real kernel the counts are /proc/schedstat's, for
//! every task of the machine; a simulated run counts its probe's moves
//! alone. The source is shown with the numbers, so the two are never read
//! as the same thing; beside them, the probe's own cross-node balancing
//! moves by kind, as its trace tells them
//! ([`crate::trace::analyze::BalanceKinds`]), which a real run's counters
//! cannot single out.

use crate::analysis::balance::Source;
use crate::run::record::SampleRecord;
use serde::Serialize;

/// Means per sample over a row's samples that have counters for a level
/// crossing nodes.
#[derive(Debug, Clone, Serialize)]
pub struct BalanceRow {
    pub n: usize,
    pub source: Source,
    pub moved: f64,
    pub busy: f64,
    pub idle: f64,
    pub newly_idle: f64,
    pub pushed: f64,
    /// Pulled although cache hot (any kind).
    pub hot: f64,
}

/// The row's cross-node balancing, `None` when no sample has it (untraced,
/// one node, a kernel without schedstats, records from before it).
pub fn balance_row(samples: &[&SampleRecord]) -> Option<BalanceRow> {
    let got: Vec<(Source, crate::analysis::balance::Moves)> = samples
        .iter()
        .filter_map(|s| {
            let b = s.balance.as_ref()?;
            Some((b.source, b.cross_node()?))
        })
        .collect();
    let (source, _) = *got.first()?;
    let n = got.len() as f64;
    let m = |f: &dyn Fn(&crate::analysis::balance::Moves) -> u64| {
        got.iter().map(|(_, x)| f(x) as f64).sum::<f64>() / n
    };
    Some(BalanceRow {
        n: got.len(),
        source,
        moved: m(&|x| x.moved()),
        busy: m(&|x| x.gained.busy),
        idle: m(&|x| x.gained.idle),
        newly_idle: m(&|x| x.gained.newly_idle),
        pushed: m(&|x| x.active_pushed),
        hot: m(&|x| x.hot_gained.total()),
    })
}

pub const CAPTION: &str = "Load balancer's cross-node moves per sample: by the sched domains \
     spanning nodes (schedstat counts every task of the machine, sim the probe alone), then the \
     probe's own by kind, from its trace (`pushed`: by its CPU's stopper)";

/// The balancing section of the text report, or nothing without counters.
pub fn render_text(rows: &[super::rows::ReportRow]) -> String {
    super::text_section(CAPTION, &super::rows::balance_table(rows))
}
