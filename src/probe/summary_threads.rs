//! The human summary of a threaded probe: one row per thread (its time,
//! moves, time per node, and NUMA balancing's view of it: preferred node,
//! group and since when, faults private and shared), then every array's
//! pages per node at the start and the end of the timeline, and when they
//! settled.

use super::record::ProbeRecord;
use super::timeline::{
    first_placed, group_since, last_placed, settled_ns, Timeline, QUIET_INTERVALS, SETTLED_PER_S,
};
use crate::table::Table;
use crate::units::fmt_size;
use std::collections::BTreeMap;
use std::fmt::Write;

fn pct_list(m: &BTreeMap<u32, f64>) -> String {
    m.iter()
        .filter(|(_, p)| **p >= 0.05)
        .map(|(n, p)| format!("{n}:{p:.0}%"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn pages_list(m: &BTreeMap<u32, u64>) -> String {
    let total: u64 = m.values().sum();
    if total == 0 {
        return "-".into();
    }
    m.iter()
        .map(|(n, p)| format!("{n}:{:.0}%", *p as f64 * 100.0 / total as f64))
        .collect::<Vec<_>>()
        .join(" ")
}

fn secs(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// The threads' table and the arrays' lines; empty for the classic probe.
pub fn threads_section(r: &ProbeRecord) -> String {
    let Some(t) = r.spec.threads else {
        return String::new();
    };
    let mut out = String::new();
    let (shared, own) = t.sharing.split(r.spec.size.bytes(), t.count);
    let (who, whos) = if t.processes {
        ("process", "processes")
    } else {
        ("thread", "threads")
    };
    let _ = writeln!(
        out,
        "{whos}: {}, sharing {} ({} shared, {} each own); time to the last {who}'s end",
        t.count,
        t.sharing,
        fmt_size(shared),
        fmt_size(own)
    );
    if t.processes && shared > 0 {
        out.push_str(&shmem_line(r, t.shm_numa_balancing));
    }
    let tl = r.timeline.as_ref();
    let mut table = Table::new()
        .right(if t.processes { "proc" } else { "thread" })
        .right(if t.processes { "pid" } else { "tid" })
        .right("loop")
        .right("ns/access")
        .right("moves")
        .right("cross-node")
        .left("time on nodes")
        .bar()
        .right("pref")
        .right("group")
        .left("since")
        .right("faults priv")
        .right("shared");
    for th in &r.threads {
        let n = &th.numa;
        let faults = n.fault_totals();
        let since = tl
            .and_then(|tl| group_since(tl, th.index as usize))
            .filter(|(g, _)| *g != 0)
            .map_or_else(|| "-".into(), |(_, at)| secs(at));
        let opt = |v: Option<i32>| v.map_or_else(|| "?".into(), |v| v.to_string());
        table.row(vec![
            th.index.to_string(),
            th.tid.to_string(),
            secs(th.total_ns),
            format!("{:.2}", th.ns_per_access),
            th.migrations.total.to_string(),
            th.migrations.cross_node.to_string(),
            pct_list(&th.residency.node_pct),
            opt(n.numa_preferred_nid),
            opt(n.numa_group_id),
            since,
            faults.map_or_else(|| "?".into(), |f| f.0.to_string()),
            faults.map_or_else(|| "?".into(), |f| f.1.to_string()),
        ]);
    }
    out.push_str(&table.text());
    out.push_str(&group_line(r, whos));
    if let Some(tl) = tl {
        out.push_str(&arrays_lines(tl));
    } else {
        out.push_str("timeline: off (--timeline-ms 0)\n");
    }
    out
}

/// What NUMA balancing made of the processes' shared memory, from their
/// shared faults: kernels differ on shared memory without a policy of its
/// own (6.1 never scans it; Debian's 6.12 scans it under the task's
/// policy), so the line says what this run shows, not what a kernel
/// should do.
fn shmem_line(r: &ProbeRecord, balancing: bool) -> String {
    let totals: Vec<(u64, u64)> = r
        .threads
        .iter()
        .filter_map(|t| t.numa.fault_totals())
        .collect();
    let known = !totals.is_empty();
    let shared: u64 = totals.iter().map(|t| t.1).sum();
    let policy = if balancing {
        "bound with MPOL_F_NUMA_BALANCING"
    } else {
        "no policy of its own"
    };
    let seen = match (known, shared) {
        (false, _) => "this kernel shows no NUMA faults".to_string(),
        (true, 0) => {
            if balancing {
                "the processes took no shared fault".to_string()
            } else {
                "NUMA balancing never scanned it (no shared fault: this kernel scans shared \
                 memory only under a policy of its own; --shm-numa-balancing gives it one)"
                    .to_string()
            }
        }
        (true, k) => format!("NUMA balancing scanned it ({k} shared faults)"),
    };
    format!("shared memory: MAP_SHARED, {policy}; {seen}\n")
}

/// Which threads NUMA balancing put in one group, from their final state.
fn group_line(r: &ProbeRecord, whos: &str) -> String {
    let mut groups: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for th in &r.threads {
        if let Some(g) = th.numa.numa_group_id {
            groups.entry(g).or_default().push(th.index);
        }
    }
    if groups.is_empty() {
        return "numa groups: not shown by this kernel (no NUMA balancing fields in \
                /proc/PID/sched)\n"
            .into();
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(g, ts)| {
            let list = ts
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(",");
            if *g == 0 {
                format!("none: {whos} {list}")
            } else {
                format!("group {g}: {whos} {list}")
            }
        })
        .collect();
    format!("numa groups at the end: {}\n", parts.join("; "))
}

/// Each array's pages per node at the first and last sample, and when it
/// settled; the pages NUMA balancing migrated over the run.
fn arrays_lines(tl: &Timeline) -> String {
    let mut out = String::new();
    let (Some(_), Some(last)) = (tl.points.first(), tl.points.last()) else {
        return "timeline: no sample taken\n".into();
    };
    let _ = writeln!(
        out,
        "arrays, pages per node (timeline: {} samples every {} ms):",
        tl.points.len(),
        tl.every_ms
    );
    let mut table = Table::new()
        .left("array")
        .left("at the start")
        .left("at the end")
        .left("settled");
    for (i, name) in tl.arrays.iter().enumerate() {
        let empty = BTreeMap::new();
        table.row(vec![
            name.clone(),
            pages_list(first_placed(tl, i).unwrap_or(&empty)),
            pages_list(last_placed(tl, i).unwrap_or(&empty)),
            match settled_ns(tl, i, SETTLED_PER_S) {
                Some(at) => format!("at {}", secs(at)),
                None if tl.points.len() <= QUIET_INTERVALS => "too few samples to say".into(),
                None => "no (still moving at the end)".into(),
            },
        ]);
    }
    out.push_str(&table.text());
    if let Some(m) = last.vmstat.get("numa_pages_migrated") {
        let _ = writeln!(
            out,
            "pages NUMA balancing migrated while the threads ran (vmstat, every task): {m}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(json: &str) -> ProbeRecord {
        serde_json::from_str(json).expect("a probe record")
    }

    /// The shared memory line says what the run showed: Debian's 6.1 in
    /// the 4-node guest never scanned plain shared memory (no shared
    /// fault), and scanned it under MPOL_F_NUMA_BALANCING.
    #[test]
    fn processes_say_whether_their_shared_memory_was_scanned() {
        let plain = rec(include_str!(
            "../../tests/fixtures/threads/probe-procs-plain-6.1.json"
        ));
        let s = threads_section(&plain);
        assert!(s.starts_with("processes: 4"), "{s}");
        assert!(
            s.contains("no policy of its own; NUMA balancing never scanned it"),
            "{s}"
        );
        assert!(s.contains("none: processes 0,1,2,3"), "{s}");
        let balanced = rec(include_str!(
            "../../tests/fixtures/threads/probe-procs-balanced-6.1.json"
        ));
        let s = threads_section(&balanced);
        assert!(
            s.contains("bound with MPOL_F_NUMA_BALANCING; NUMA balancing scanned it ("),
            "{s}"
        );
        assert!(s.contains(": processes 0,1,2,3"), "{s}");
        // Threads have no shared memory line.
        let private = rec(include_str!(
            "../../tests/fixtures/threads/probe-private-6.1.json"
        ));
        let s = threads_section(&private);
        assert!(
            s.starts_with("threads: 4") && !s.contains("shared memory:"),
            "{s}"
        );
    }
}
