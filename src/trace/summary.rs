//! The human summary of a trace: per task, its migrations by topology level
//! and cause (load balancing's by the kind of balancing), what NUMA
//! balancing did, and where its time and memory were.

use super::analyze::{BalanceKinds, Causes, TaskTrace};
use super::record::TraceRecord;
use crate::analysis::MigrationCounts;
use crate::units::fmt_size;
use std::fmt::Write;

fn pct_list(m: &std::collections::BTreeMap<u32, f64>, prefix: &str) -> String {
    m.iter()
        .map(|(k, v)| format!("{prefix}{k} {v:.1}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line of migration classes.
pub fn migrations_line(m: &MigrationCounts) -> String {
    let mut s = format!(
        "{} moves: same-core {}, same-LLC {}, same-node {}, cross-node {}",
        m.total, m.same_core, m.same_llc, m.same_node, m.cross_node
    );
    if m.cross_node > 0 {
        let d = m
            .cross_by_distance
            .iter()
            .map(|(d, n)| format!("{n} at distance {d}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            s,
            " (to mem node {}, from it {}; {d})",
            m.to_mem_node, m.from_mem_node
        );
    }
    if m.unknown > 0 {
        let _ = write!(s, ", {} with unknown CPUs", m.unknown);
    }
    s
}

fn causes_line(c: &Causes) -> String {
    format!(
        "load balance {}, wake-up {}, NUMA balancing {}{}",
        c.load_balance,
        c.wakeup,
        c.numa_balancing,
        unknown(c.unknown)
    )
}

/// `, unknown N` when some were.
fn unknown(n: u64) -> String {
    if n > 0 {
        format!(", unknown {n}")
    } else {
        String::new()
    }
}

fn kinds_line(k: &BalanceKinds) -> String {
    format!(
        "busy {}, idle {}, newly idle {}, pushed by a stopper {}{}",
        k.busy,
        k.idle,
        k.newly_idle,
        k.pushed,
        unknown(k.unknown)
    )
}

fn task(out: &mut String, t: &TaskTrace, rec: &TraceRecord) {
    let mem = t
        .mem_node
        .map_or("unknown".to_string(), |n| format!("node {n}"));
    let parent = t
        .parent
        .map_or(String::new(), |p| format!(", child of {p}"));
    let _ = writeln!(
        out,
        "task {}{parent}: memory on {mem}{}",
        t.pid,
        if t.exited { ", exited" } else { "" }
    );
    let _ = writeln!(
        out,
        "  migrations: {} ({} sched_migrate_task events)",
        migrations_line(&t.migrations),
        t.migrate_events
    );
    if t.migrations.total > 0 {
        let _ = writeln!(out, "  causes: {}", causes_line(&t.causes));
        if let Some(k) = t.balancing.filter(|k| k.total() > 0) {
            let _ = writeln!(out, "  load balancing by kind: {}", kinds_line(&k));
        }
        if t.migrations.cross_node > 0 {
            let _ = writeln!(
                out,
                "  cross-node causes: {}",
                causes_line(&t.cross_node_causes)
            );
            if let Some(k) = t.cross_node_balancing.filter(|k| k.total() > 0) {
                let _ = writeln!(
                    out,
                    "  cross-node load balancing by kind: {}",
                    kinds_line(&k)
                );
            }
        }
    }
    let n = &t.numa;
    if n.move_numa + n.swap_numa + n.stick_numa > 0 {
        let _ = writeln!(
            out,
            "  NUMA balancing: {} moves, {} swaps decided, {} times stuck",
            n.move_numa, n.swap_numa, n.stick_numa
        );
    }
    let r = &t.residency;
    if r.total_ns > 0 {
        let _ = writeln!(
            out,
            "  on CPU {:.3} s: {}; started on node {}, most on node {}{}",
            r.total_ns as f64 / 1e9,
            pct_list(&r.node_pct, "node "),
            r.start_node.map_or("?".into(), |n| n.to_string()),
            r.most_node.map_or("?".into(), |n| n.to_string()),
            r.on_mem_node_pct
                .map_or(String::new(), |p| format!("; {p:.1}% on its memory's node")),
        );
        if r.llc_pct.len() > 1 {
            let llc: std::collections::BTreeMap<u32, f64> =
                r.llc_pct.iter().map(|(&k, &v)| (k as u32, v)).collect();
            let _ = writeln!(out, "  by LLC: {}", pct_list(&llc, "LLC "));
        }
    } else {
        let _ = writeln!(out, "  never seen on a CPU in the window");
    }
    if let Some(p) = rec.pages.get(&t.pid) {
        let total: u64 = p.values().sum();
        let list = p
            .iter()
            .map(|(n, b)| {
                format!(
                    "node {n} {} ({:.1}%)",
                    fmt_size(*b),
                    *b as f64 * 100.0 / total.max(1) as f64
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "  memory (numa_maps, last seen): {list}");
    }
}

/// The whole summary.
pub fn summary(rec: &TraceRecord) -> String {
    let mut out = String::new();
    let secs = (rec.window.end_ns.saturating_sub(rec.window.start_ns)) as f64 / 1e9;
    let _ = writeln!(
        out,
        "trace of {} ({}): {} task(s), {:.3} s, {} events{}",
        rec.what,
        rec.source,
        rec.tasks.len(),
        secs,
        rec.events,
        if rec.lost_events > 0 {
            format!(
                ", {} LOST (buffer full: raise --buffer-kb)",
                rec.lost_events
            )
        } else {
            ", none lost".to_string()
        }
    );
    for n in &rec.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for t in &rec.tasks {
        task(&mut out, t, rec);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::analyze::Window;

    fn record(t: TaskTrace) -> TraceRecord {
        TraceRecord {
            schema: "numalab.trace/1".into(),
            numalab_version: "test".into(),
            source: "file".into(),
            what: "t.txt".into(),
            kernel: None,
            topology_digest: "d".into(),
            window: Window {
                start_ns: 0,
                end_ns: 1_000_000_000,
            },
            events: 10,
            lost_events: 0,
            missing_events: Vec::new(),
            notes: Vec::new(),
            pages: Default::default(),
            tasks: vec![t],
        }
    }

    #[test]
    fn balancing_kinds_are_shown_where_the_task_was_balanced() {
        let mut t = TaskTrace {
            pid: 7,
            ..Default::default()
        };
        t.migrations.total = 5;
        t.migrations.cross_node = 2;
        t.causes.load_balance = 5;
        t.cross_node_causes.load_balance = 2;
        t.balancing = Some(BalanceKinds {
            busy: 1,
            idle: 2,
            newly_idle: 1,
            pushed: 1,
            unknown: 0,
        });
        t.cross_node_balancing = Some(BalanceKinds {
            idle: 1,
            unknown: 1,
            ..Default::default()
        });
        let s = summary(&record(t.clone()));
        assert!(
            s.contains(
                "  load balancing by kind: busy 1, idle 2, newly idle 1, pushed by a stopper 1\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("  cross-node load balancing by kind: busy 0, idle 1, newly idle 0, pushed by a stopper 0, unknown 1\n"),
            "{s}"
        );
        // A trace read before the kinds were counted, or none balanced.
        t.balancing = None;
        t.cross_node_balancing = Some(BalanceKinds::default());
        let s = summary(&record(t));
        assert!(!s.contains("by kind"), "{s}");
    }
}
