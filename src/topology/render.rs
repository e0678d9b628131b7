//! Text views of a topology.
//!
//! [`numactl_hardware`] reproduces `numactl --hardware` (numactl 2.0.x,
//! `hardware()` and `print_distances()` in numactl.c) line for line: the
//! `available:` line, per node its CPUs, size and free memory in MB
//! (bytes >> 20, `<not available>` when unknown), and the distance matrix
//! with `% 3d ` cells. [`structure`] adds what numactl does not show: per
//! node its LLCs, cores and SMT threads.

use super::Topology;
use crate::idset::IdSet;
use std::fmt::Write;

fn mb(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{} MB", b >> 20),
        None => "<not available>".to_string(),
    }
}

/// C's `printf("% 3d ", v)`: a sign column (space for non-negative), padded to 3.
fn cell(v: i64) -> String {
    let s = if v < 0 {
        v.to_string()
    } else {
        format!(" {v}")
    };
    format!("{s:>3} ")
}

/// The block `numactl --hardware` prints for this machine.
pub fn numactl_hardware(t: &Topology) -> String {
    let mut out = String::new();
    let ids = t.node_ids();
    let _ = writeln!(out, "available: {} nodes ({})", ids.len(), ids);
    for n in &t.nodes {
        let _ = writeln!(out, "node {} cpus:{}", n.id, n.cpus.spaced());
        let _ = writeln!(out, "node {} size: {}", n.id, mb(n.mem_total_bytes));
        let _ = writeln!(out, "node {} free: {}", n.id, mb(n.mem_free_bytes));
    }
    // numactl checks the distance from the last node to the first.
    let has_distances = t
        .nodes
        .last()
        .and_then(|n| n.distances.first())
        .is_some_and(|&d| d != 0);
    if !has_distances {
        out.push_str("No distance information available.\n");
        return out;
    }
    out.push_str("node distances:\nnode ");
    for n in &t.nodes {
        out.push_str(&cell(n.id as i64));
    }
    out.push('\n');
    for n in &t.nodes {
        out.push_str(&cell(n.id as i64));
        out.pop();
        out.push_str(": ");
        for d in &n.distances {
            out.push_str(&cell(*d as i64));
        }
        out.push('\n');
    }
    out
}

/// The structure numactl does not show, compactly, for the nodes in `show`.
pub fn structure(t: &Topology, show: &IdSet) -> String {
    let mut out = String::new();
    let online = t.online_cpus();
    let cores = t.cores().count();
    let llcs = t.llcs().count();
    let max_threads = t.cores().map(|c| c.cpus.len()).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "machine: {} nodes, {} packages, {} LLCs, {} cores, {} online CPUs{}",
        t.nodes.len(),
        t.packages().len(),
        llcs,
        cores,
        online.len(),
        if max_threads > 1 {
            format!(" ({max_threads} threads per core)")
        } else {
            String::new()
        }
    );
    if let Some(m) = &t.cpu_model {
        let _ = writeln!(out, "cpu model: {m}");
    }
    if let Some(k) = &t.kernel {
        let _ = writeln!(out, "kernel: {k}");
    }
    if !t.numa_available {
        out.push_str(
            "note: this kernel has no /sys/devices/system/node (no NUMA); \
             shown as one node holding every CPU and all memory\n",
        );
    }
    let offline = t.offline_cpus();
    if !offline.is_empty() {
        let _ = writeln!(out, "offline CPUs: {offline}");
    }
    if let Some(note) = t.cpuset_note() {
        let _ = writeln!(out, "note: {note}");
    }
    for n in t.nodes.iter().filter(|n| show.contains(n.id)) {
        let packages: IdSet = n
            .llcs
            .iter()
            .flat_map(|l| l.cores.iter())
            .filter_map(|c| c.package)
            .collect();
        if n.llcs.is_empty() {
            let _ = writeln!(out, "node {}: no CPUs (memory only)", n.id);
            continue;
        }
        let _ = writeln!(
            out,
            "node {}: package {}, {} LLC{}",
            n.id,
            if packages.is_empty() {
                "?".to_string()
            } else {
                packages.to_string()
            },
            n.llcs.len(),
            if n.llcs.len() == 1 { "" } else { "s" }
        );
        for l in &n.llcs {
            let level = match l.level {
                Some(lv) => format!("L{lv}"),
                None => "LLC (no cache facts; node-wide)".to_string(),
            };
            let id = l.cache_id.map(|i| format!(" id {i}")).unwrap_or_default();
            let spans = if l.shared_cpus != l.cpus {
                format!(
                    " (cache shared with CPUs {} across nodes)",
                    l.shared_cpus.difference(&l.cpus)
                )
            } else {
                String::new()
            };
            let threads: IdSet = l.cores.iter().map(|c| c.cpus.len() as u32).collect();
            let shape = if threads.len() == 1 {
                let t = threads.first().unwrap_or(1);
                format!(
                    "{} x {}",
                    plural(l.cores.len(), "core"),
                    plural(t as usize, "thread")
                )
            } else {
                format!(
                    "{}, {}",
                    plural(l.cores.len(), "core"),
                    plural(l.cpus.len(), "CPU")
                )
            };
            let _ = writeln!(out, "  {level}{id}: CPUs {}: {shape}{spans}", l.cpus);
            if threads.last().unwrap_or(1) > 1 {
                let groups: Vec<String> = l.cores.iter().map(|c| c.cpus.to_string()).collect();
                wrap_into(&mut out, "    SMT: ", &groups, 100);
            }
        }
    }
    out
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// One line per CPU in `cpus`: where it sits in the tree.
pub fn cpu_table(t: &Topology, cpus: &IdSet) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    let mut out = String::from("  cpu  node  package  core_id  core  llc  online  smt_siblings\n");
    for id in cpus.iter() {
        let Some(c) = t.cpu(id) else { continue };
        let _ = writeln!(
            out,
            "{:>5} {:>5} {:>8} {:>8} {:>5} {:>4}  {:<6}  {}",
            c.id,
            opt(c.node.map(|v| v.to_string())),
            opt(c.package.map(|v| v.to_string())),
            opt(c.core_id.map(|v| v.to_string())),
            opt(c.core.map(|v| v.to_string())),
            opt(c.llc.map(|v| v.to_string())),
            if c.online { "yes" } else { "no" },
            c.smt_siblings
        );
    }
    out
}

/// Writes words after `prefix`, separated by spaces, wrapped at `width`.
fn wrap_into(out: &mut String, prefix: &str, words: &[String], width: usize) {
    let indent = " ".repeat(prefix.len());
    let mut line = prefix.to_string();
    let mut empty = true;
    for w in words {
        if !empty && line.len() + 1 + w.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.clone();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(w);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_match_printf_space_flag() {
        assert_eq!(cell(0), "  0 ");
        assert_eq!(cell(10), " 10 ");
        assert_eq!(cell(100), " 100 ");
        assert_eq!(cell(7), "  7 ");
    }
}
