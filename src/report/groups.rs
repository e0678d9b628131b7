//! What NUMA balancing did with a threaded probe (`run --threads`, each
//! sample's `probe.threads` and `probe.timeline`), per row: whether its
//! workers ended in one `numa_group`, how much of their NUMA faulting was
//! shared, where the shared array's pages ended (pseudo-interleaving
//! spreads them over the group's nodes) and when they settled, and the
//! pages migrated. These explain a row's time next to its placement: a
//! pinned row groups nothing and moves nothing; under NUMA balancing a
//! shared workload groups and spreads, a private one stays local.

use super::{mean, RowStats};
use crate::probe::record::ProbeRecord;
use crate::probe::timeline::{last_placed, settled_ns, SETTLED_PER_S};
use crate::run::record::SampleRecord;
use crate::table::{num, Table};
use serde::Serialize;
use std::collections::BTreeMap;

/// Over a row's threaded samples.
#[derive(Debug, Clone, Serialize)]
pub struct GroupsRow {
    pub n: usize,
    /// Samples in which every worker's group is known (a kernel with NUMA
    /// balancing's fields in /proc/PID/sched), and of those, the samples
    /// whose workers all ended in one numa_group (non-zero).
    pub group_known: usize,
    pub one_group: usize,
    /// Workers in a group with another worker, % of the workers (mean).
    pub grouped_pct: Option<f64>,
    /// Shared NUMA faults, % of the workers' NUMA faults (mean over the
    /// samples that took any).
    pub shared_faults_pct: Option<f64>,
    /// The shared array at the end: its busiest node's share of its pages
    /// (mean), and the nodes holding 10% or more (mean).
    pub shared_busiest_pct: Option<f64>,
    pub shared_nodes: Option<f64>,
    /// Samples whose shared array settled, and when (seconds after the
    /// release, mean over those).
    pub settled: usize,
    pub settled_s: Option<f64>,
    /// Pages NUMA balancing migrated while the workers ran (every task's,
    /// /proc/vmstat), mean.
    pub pages_migrated: Option<f64>,
}

/// One sample's account.
struct One {
    /// `None` when a worker's group is unknown.
    one_group: Option<bool>,
    grouped_pct: Option<f64>,
    shared_faults_pct: Option<f64>,
    shared_end: Option<(f64, usize)>,
    settled_s: Option<f64>,
    pages_migrated: Option<f64>,
}

fn one(p: &ProbeRecord) -> Option<One> {
    p.spec.threads?;
    let groups: Vec<Option<i32>> = p.threads.iter().map(|t| t.numa.numa_group_id).collect();
    let known: Vec<i32> = groups.iter().flatten().copied().collect();
    let mut members: BTreeMap<i32, usize> = BTreeMap::new();
    for g in known.iter().filter(|g| **g != 0) {
        *members.entry(*g).or_default() += 1;
    }
    let grouped = known
        .iter()
        .filter(|g| members.get(g).is_some_and(|k| *k >= 2))
        .count();
    let (private, shared) = p
        .threads
        .iter()
        .filter_map(|t| t.numa.fault_totals())
        .fold((0, 0), |(p, s), (tp, ts)| (p + tp, s + ts));
    let tl = p.timeline.as_ref();
    let shared_ix = tl.and_then(|t| t.arrays.iter().position(|a| a == "shared"));
    let shared_end = tl.zip(shared_ix).and_then(|(t, i)| {
        let pages = last_placed(t, i)?;
        let total: u64 = pages.values().sum();
        (total > 0).then(|| {
            let max = pages.values().max().copied().unwrap_or(0);
            let big = pages.values().filter(|&&k| k * 10 >= total).count();
            (max as f64 * 100.0 / total as f64, big)
        })
    });
    Some(One {
        one_group: (!known.is_empty() && known.len() == groups.len())
            .then(|| members.len() == 1 && known.iter().all(|g| *g != 0)),
        grouped_pct: (!known.is_empty()).then(|| grouped as f64 * 100.0 / known.len() as f64),
        shared_faults_pct: (private + shared > 0)
            .then(|| shared as f64 * 100.0 / (private + shared) as f64),
        shared_end,
        settled_s: tl
            .zip(shared_ix)
            .and_then(|(t, i)| settled_ns(t, i, SETTLED_PER_S))
            .map(|ns| ns as f64 / 1e9),
        pages_migrated: tl
            .and_then(|t| t.points.last())
            .and_then(|pt| pt.vmstat.get("numa_pages_migrated"))
            .map(|m| *m as f64),
    })
}

/// The row's account, `None` when no sample is a threaded probe's.
pub fn groups_row(samples: &[&SampleRecord]) -> Option<GroupsRow> {
    let got: Vec<One> = samples.iter().filter_map(|s| one(&s.probe)).collect();
    if got.is_empty() {
        return None;
    }
    let m = |f: fn(&One) -> Option<f64>| mean(&got.iter().filter_map(f).collect::<Vec<_>>());
    Some(GroupsRow {
        n: got.len(),
        group_known: got.iter().filter(|o| o.one_group.is_some()).count(),
        one_group: got.iter().filter(|o| o.one_group == Some(true)).count(),
        grouped_pct: m(|o| o.grouped_pct),
        shared_faults_pct: m(|o| o.shared_faults_pct),
        shared_busiest_pct: m(|o| o.shared_end.map(|e| e.0)),
        shared_nodes: m(|o| o.shared_end.map(|e| e.1 as f64)),
        settled: got.iter().filter(|o| o.settled_s.is_some()).count(),
        settled_s: m(|o| o.settled_s),
        pages_migrated: m(|o| o.pages_migrated),
    })
}

pub const CAPTION: &str = "NUMA balancing and the threaded probe, per sample: samples whose \
     workers all ended in one numa_group (of those whose groups the kernel shows); workers grouped with another, %; shared faults, % of \
     the workers' NUMA faults; the shared array at the end: its busiest node's share and the \
     nodes holding 10% or more (pseudo-interleaving spreads it over the group's nodes); samples \
     where it settled (under 1% of its pages a second moving) and when, s after the release; \
     pages NUMA balancing migrated (every task's)";

/// The threaded rows; empty when none is.
pub fn table(stats: &[RowStats]) -> Table {
    let mut t = Table::new()
        .left("Row")
        .right("n")
        .right("one group")
        .right("grouped %")
        .right("shared faults %")
        .right("busiest node %")
        .right("nodes >=10%")
        .right("settled")
        .right("at s")
        .right("pages migrated");
    for s in stats {
        let Some(r) = &s.groups else { continue };
        t.row(vec![
            format!("[{:02}]", s.row.id),
            r.n.to_string(),
            if r.group_known == 0 {
                "-".into()
            } else {
                format!("{}/{}", r.one_group, r.group_known)
            },
            num(r.grouped_pct, 0, "-"),
            num(r.shared_faults_pct, 1, "-"),
            num(r.shared_busiest_pct, 0, "-"),
            num(r.shared_nodes, 1, "-"),
            format!("{}/{}", r.settled, r.n),
            num(r.settled_s, 1, "-"),
            num(r.pages_migrated, 0, "-"),
        ]);
    }
    t
}

/// The threaded rows' section of the text report, or nothing.
pub fn render_text(stats: &[RowStats]) -> String {
    super::text_section(CAPTION, &table(stats))
}

/// The threaded rows' section of the Markdown report, or nothing.
pub fn render_markdown(stats: &[RowStats]) -> String {
    super::markdown_section("NUMA balancing's groups", CAPTION, &table(stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threaded probes' records from the 4node-smt guest on Debian's 6.1
    /// (4 workers, 16 MiB, 6 s, NUMA balancing on, scan knobs 100/100/400).
    const BALANCED: &str =
        include_str!("../../tests/fixtures/threads/probe-procs-balanced-6.1.json");
    const PLAIN: &str = include_str!("../../tests/fixtures/threads/probe-procs-plain-6.1.json");
    const PRIVATE: &str = include_str!("../../tests/fixtures/threads/probe-private-6.1.json");

    fn sample(row: usize, json: &str) -> SampleRecord {
        SampleRecord {
            probe: serde_json::from_str(json).expect("a probe record"),
            ..SampleRecord::fixture(row)
        }
    }

    #[test]
    fn processes_on_balanced_shared_memory_are_one_group_and_plain_ones_none() {
        let b = groups_row(&[&sample(0, BALANCED)]).expect("threaded");
        assert_eq!((b.n, b.group_known, b.one_group), (1, 1, 1));
        assert_eq!(b.grouped_pct, Some(100.0));
        let f = b.shared_faults_pct.expect("faults");
        assert!(f > 0.0 && f < 100.0, "{f}");
        assert!(b.shared_busiest_pct.is_some() && b.shared_nodes.unwrap() >= 1.0);
        assert!(b.pages_migrated.unwrap() > 0.0);

        // Never scanned on 6.1: no group, no shared fault, the shared
        // memory wholly on the node that first touched it.
        let p = groups_row(&[&sample(0, PLAIN)]).expect("threaded");
        assert_eq!(p.one_group, 0);
        assert_eq!(p.grouped_pct, Some(0.0));
        assert!(p.shared_faults_pct.unwrap_or(0.0) == 0.0, "{p:?}");
        assert_eq!(p.shared_busiest_pct, Some(100.0));
        assert_eq!(p.shared_nodes, Some(1.0));

        // Both in one row: the means and counts over the two.
        let both = groups_row(&[&sample(0, BALANCED), &sample(0, PLAIN)]).unwrap();
        assert_eq!((both.n, both.one_group), (2, 1));
        assert_eq!(both.grouped_pct, Some(50.0));
    }

    /// A worker whose group the kernel does not show makes the sample's
    /// group outcome unknown, not "never grouped".
    #[test]
    fn an_unknown_group_is_not_counted_as_ungrouped() {
        let mut s = sample(0, BALANCED);
        s.probe.threads[2].numa.numa_group_id = None;
        let r = groups_row(&[&s, &sample(0, PLAIN)]).unwrap();
        assert_eq!((r.n, r.group_known, r.one_group), (2, 1, 0));
        let mut only = sample(0, BALANCED);
        for t in only.probe.threads.iter_mut() {
            t.numa.numa_group_id = None;
        }
        let r = groups_row(&[&only]).unwrap();
        assert_eq!((r.group_known, r.one_group, r.grouped_pct), (0, 0, None));
    }

    #[test]
    fn private_threads_have_no_shared_array_and_a_classic_probe_no_account() {
        let r = groups_row(&[&sample(0, PRIVATE)]).expect("threaded");
        assert_eq!(r.one_group, 0);
        assert_eq!(r.shared_busiest_pct, None, "no shared array");
        assert_eq!((r.settled, r.settled_s), (0, None));
        assert!(groups_row(&[&SampleRecord::fixture(0)]).is_none());
    }

    #[test]
    fn only_threaded_rows_get_a_line() {
        let stats: Vec<RowStats> = [None, Some(BALANCED)]
            .into_iter()
            .enumerate()
            .map(|(i, json)| {
                let s = json.map_or_else(|| SampleRecord::fixture(i), |j| sample(i, j));
                let row = crate::run::spec::Row {
                    id: i,
                    block: 0,
                    pnid: -1,
                    nb: 1,
                    mem: crate::run::spec::RowMem::Float,
                    cpu: crate::run::spec::RowCpu::Float,
                    migration_cost_ns: None,
                    knobs: Default::default(),
                    needs_two_nodes: false,
                    skip: None,
                };
                RowStats::of(row, &[&s])
            })
            .collect();
        let text = render_text(&stats);
        assert!(text.contains("[01]") && !text.contains("[00]"), "{text}");
        assert!(text.contains("1/1"), "{text}");
        assert!(render_markdown(&stats).contains("## NUMA balancing's groups"));
        assert_eq!(render_text(&stats[..1]), "");
    }
}
