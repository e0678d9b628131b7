//! The human summary of a probe record.

use super::record::{CpuTime, NumaReport, ProbeRecord};
use super::{CpuPlacement, MemPlacement};
use crate::analysis::MigrationCounts;
use crate::topology::Topology;
use crate::units::fmt_size;
use std::fmt::Write;

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

pub fn counts_line(c: &MigrationCounts) -> String {
    let mut s = format!(
        "{} total: same-core {}, same-LLC {}, same-node {}, cross-node {}",
        c.total, c.same_core, c.same_llc, c.same_node, c.cross_node
    );
    if c.cross_node > 0 {
        let _ = write!(
            s,
            " (to memory node {}, from it {}; by distance {})",
            c.to_mem_node,
            c.from_mem_node,
            c.cross_by_distance
                .iter()
                .map(|(d, n)| format!("{d}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if c.unknown > 0 {
        let _ = write!(s, ", unknown CPU {}", c.unknown);
    }
    s
}

pub fn summary(r: &ProbeRecord, topo: &Topology) -> String {
    let mut out = String::new();
    let s = &r.spec;
    let t = &r.timing;
    // Under --min-time the passes run are more than --counts asked.
    let passes = t.iterations_ns.len();
    let _ = writeln!(
        out,
        "probe: {}, {} buffer, {} iteration{} of {} accesses{}, pid {}",
        s.pattern.name(),
        fmt_size(s.size.bytes()),
        passes,
        if passes == 1 { "" } else { "s" },
        t.accesses_per_iteration,
        s.min_time_ns
            .map(|ns| format!(" (--min-time {} s)", ns as f64 / 1e9))
            .unwrap_or_default(),
        r.pid
    );
    let cpu = match &s.cpu {
        CpuPlacement::Float => "float".to_string(),
        CpuPlacement::Node(n) => format!("cpunodebind {n}"),
    };
    let mem = match &s.mem {
        MemPlacement::Float => "float (first touch)".to_string(),
        MemPlacement::Bind(n) => format!("membind {n}"),
        MemPlacement::Preferred(n) => format!("preferred {n}"),
        MemPlacement::Interleave(ns) => format!("interleave {ns}"),
    };
    let _ = writeln!(out, "request: cpu {cpu}; memory {mem}");
    if let Some(p) = &r.pnid {
        let _ = writeln!(
            out,
            "pnid: set {} via prctl({}) [{:?}], read back {:?} ({})",
            p.requested, p.interface.option, p.interface.layout, p.read_back, p.interface.evidence
        );
    }
    let total_pages: u64 =
        r.placement.pages_per_node.values().sum::<u64>() + r.placement.pages_unplaced;
    let pages: Vec<String> = r
        .placement
        .pages_per_node
        .iter()
        .map(|(n, p)| {
            format!(
                "node {n}: {p} ({:.1}%)",
                *p as f64 * 100.0 / total_pages.max(1) as f64
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "pages ({} each): {}{}",
        fmt_size(r.placement.page_size),
        pages.join(", "),
        if r.placement.pages_unplaced > 0 {
            format!(", unplaced: {}", r.placement.pages_unplaced)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "thp: advice {}, system {}, AnonHugePages {} kB",
        r.thp.advice,
        r.thp.system_enabled.as_deref().unwrap_or("?"),
        r.thp
            .anon_huge_kb
            .map(|k| k.to_string())
            .unwrap_or_else(|| "?".into())
    );
    if r.placement.matches_request {
        let _ = writeln!(out, "placement: matches the request");
    } else {
        for m in &r.placement.mismatches {
            let _ = writeln!(out, "WARNING: PLACEMENT DOES NOT MATCH THE REQUEST: {m}");
        }
    }
    let its = &t.iterations_ns;
    let (min, max) = (
        its.iter().min().copied().unwrap_or(0),
        its.iter().max().copied().unwrap_or(0),
    );
    let _ = writeln!(
        out,
        "time: total {}, per iteration avg {} min {} max {}, {:.2} ns/access (warm-up {})",
        secs(t.total_ns),
        secs(t.total_ns / its.len().max(1) as u64),
        secs(min),
        secs(max),
        t.ns_per_access,
        secs(t.warm_up_ns)
    );
    let node = |c: u32| {
        topo.node_of_cpu(c)
            .map(|n| format!("node {n}"))
            .unwrap_or_else(|| "node ?".into())
    };
    let o = &r.observation;
    // A threaded record's observation is thread 0's; its table has each
    // thread's, and the lines below are over every thread.
    let threaded = !r.threads.is_empty();
    if threaded {
        let _ = writeln!(out, "cpu: threads seen on CPUs {}", r.placement.seen_cpus);
    } else {
        let _ = writeln!(
            out,
            "cpu: started on CPU {} ({}), ended on CPU {} ({}); seen on CPUs {}",
            o.start_cpu,
            node(o.start_cpu),
            o.end_cpu,
            node(o.end_cpu),
            r.placement.seen_cpus
        );
    }
    if o.enabled {
        let _ = writeln!(
            out,
            "cpu changes in the timed loop (checked every {} accesses): {}",
            o.check_every_accesses,
            counts_line(&r.migrations)
        );
        let _ = writeln!(
            out,
            "cpu changes over the whole run: {}",
            counts_line(&r.migrations_whole)
        );
        if let Some(k) = o.kernel_migrations.filter(|_| !threaded) {
            let _ = writeln!(
                out,
                "kernel-counted migrations over the whole run (se.nr_migrations): {k} \
                 (sampling saw {}; the rest moved and came back between checks)",
                r.migrations_whole.total
            );
        }
        let res: Vec<String> = r
            .residency
            .node_pct
            .iter()
            .map(|(n, p)| format!("node {n} {p:.1}%"))
            .collect();
        let mem_node = s.requested_mem_node().or(r.placement.mem_node);
        let _ = writeln!(
            out,
            "time on each node: {}{}",
            res.join(", "),
            match (mem_node, r.residency.on_mem_node_pct) {
                (Some(m), Some(p)) => format!(" (memory node {m}: {p:.1}%)"),
                _ => String::new(),
            }
        );
    } else {
        out.push_str("self-observation: off (--observe-every 0)\n");
    }
    if let Some(c) = &r.cpu_time {
        out.push_str(&cpu_time_line(c));
    }
    if let Some(n) = &r.numa {
        if threaded {
            // The sched part is thread 0's: every thread's is in the table.
            let process = NumaReport {
                sched: Default::default(),
                ..n.clone()
            };
            out.push_str(&numa_lines(&process));
        } else {
            out.push_str(&numa_lines(n));
        }
    }
    out.push_str(&super::summary_threads::threads_section(r));
    out
}

/// `cpu: ran 9.800 s, waited 0.200 s for a CPU (2.0%), 412 timeslices`.
pub fn cpu_time_line(c: &CpuTime) -> String {
    format!(
        "cpu: ran {}, waited {} for a CPU ({:.1}%){}\n",
        secs(c.run_ns),
        secs(c.wait_ns),
        c.wait_pct().unwrap_or(0.0),
        c.timeslices
            .map(|n| format!(", {n} timeslices"))
            .unwrap_or_default()
    )
}

/// One line of the kernel's NUMA-balancing statistics (and one of notes,
/// if a source failed); empty when there is nothing to show.
pub fn numa_lines(n: &NumaReport) -> String {
    let opt = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let mut parts = Vec::new();
    let s = &n.sched;
    if !s.is_empty() {
        let mut p = format!(
            "numa: preferred nid {}",
            s.numa_preferred_nid
                .map_or_else(|| "?".to_string(), |v| v.to_string())
        );
        if let Some(f) = s.numa_preferred_nid_force {
            let _ = write!(p, " (forced {f})");
        }
        let _ = write!(p, ", faults {}", opt(s.total_numa_faults));
        if let Some(node) = s.current_node {
            let _ = write!(
                p,
                " ({} on current node {node})",
                opt(s.faults_on_current_node())
            );
        }
        let _ = write!(p, ", pages migrated {}", opt(s.numa_pages_migrated));
        parts.push(p);
    }
    let d = &n.vmstat_delta;
    if !d.is_empty() {
        let get = |k: &str| {
            d.get(k)
                .map_or_else(|| "?".to_string(), |v| format!("+{v}"))
        };
        parts.push(format!(
            "{}vmstat: hint faults {} (local {}), pages migrated {}",
            if s.is_empty() { "numa " } else { "" },
            get("numa_hint_faults"),
            get("numa_hint_faults_local"),
            get("numa_pages_migrated")
        ));
    }
    let mut out = String::new();
    if !parts.is_empty() {
        let _ = writeln!(out, "{}", parts.join("; "));
    }
    if !n.notes.is_empty() {
        let _ = writeln!(out, "numa statistics incomplete: {}", n.notes.join("; "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{parse_proc_sched_numa, parse_vmstat_numa, vmstat_delta};

    #[test]
    fn numa_line_only_when_there_is_something() {
        assert_eq!(numa_lines(&NumaReport::default()), "");
        let sched = parse_proc_sched_numa(
            "numa_pages_migrated                          :                    0\n\
             numa_preferred_nid                           :                   -1\n\
             total_numa_faults                            :                    0\n\
             current_node=0, numa_group_id=0\n\
             numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0\n",
        );
        let before = parse_vmstat_numa("numa_hint_faults 10\nnuma_hint_faults_local 4\n");
        let after = parse_vmstat_numa(
            "numa_hint_faults 15\nnuma_hint_faults_local 6\nnuma_pages_migrated 1\n",
        );
        let n = NumaReport {
            sched: sched.clone(),
            vmstat_delta: vmstat_delta(&before, &after),
            notes: vec![],
        };
        assert_eq!(
            numa_lines(&n),
            "numa: preferred nid -1, faults 0 (0 on current node 0), pages migrated 0; \
             vmstat: hint faults +5 (local +2), pages migrated ?\n"
        );
        let only_vmstat = NumaReport {
            sched: Default::default(),
            ..n.clone()
        };
        assert!(numa_lines(&only_vmstat).starts_with("numa vmstat: hint faults +5"));
        let only_sched = NumaReport {
            sched,
            vmstat_delta: Default::default(),
            notes: vec!["reading /proc/vmstat: Permission denied (os error 13)".into()],
        };
        assert_eq!(
            numa_lines(&only_sched),
            "numa: preferred nid -1, faults 0 (0 on current node 0), pages migrated 0\n\
             numa statistics incomplete: reading /proc/vmstat: Permission denied (os error 13)\n"
        );
    }
}
