//! Migration classes and residency.
//!
//! A migration from CPU `a` to CPU `b` is classified by the closest level
//! they share ([`Relation`]): same core (SMT siblings), same LLC, same node,
//! or cross-node. Cross-node moves are further split into moves *to* the
//! memory's node, *from* it, and neither, and counted by SLIT distance.
//!
//! Residency: given the segments of time a task ran on each CPU, the share
//! of the total on each node and LLC, the node it started on, and the node it
//! spent most time on.

use crate::topology::{Relation, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One move of a task from one CPU to another at `t_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    pub t_ns: u64,
    pub from: u32,
    pub to: u32,
}

/// Counts per class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationCounts {
    pub total: u64,
    pub same_core: u64,
    pub same_llc: u64,
    pub same_node: u64,
    pub cross_node: u64,
    /// Cross-node moves onto the memory's node.
    pub to_mem_node: u64,
    /// Cross-node moves off the memory's node.
    pub from_mem_node: u64,
    /// Cross-node moves by SLIT distance between the two nodes.
    pub cross_by_distance: BTreeMap<u32, u64>,
    /// Moves involving a CPU the topology does not know.
    pub unknown: u64,
}

/// Classifies every migration on `topo`; `mem_node` is where the task's
/// memory is (if one node holds it).
pub fn classify(topo: &Topology, mem_node: Option<u32>, moves: &[Migration]) -> MigrationCounts {
    let mut c = MigrationCounts::default();
    for m in moves {
        c.total += 1;
        match topo.relation(m.from, m.to) {
            Relation::SameCpu => c.total -= 1,
            Relation::SameCore => c.same_core += 1,
            Relation::SameLlc => c.same_llc += 1,
            Relation::SameNode => c.same_node += 1,
            Relation::CrossNode => {
                c.cross_node += 1;
                let (a, b) = (topo.node_of_cpu(m.from), topo.node_of_cpu(m.to));
                if let (Some(a), Some(b)) = (a, b) {
                    if mem_node == Some(b) {
                        c.to_mem_node += 1;
                    }
                    if mem_node == Some(a) {
                        c.from_mem_node += 1;
                    }
                    if let Some(d) = topo.distance(a, b) {
                        *c.cross_by_distance.entry(d).or_default() += 1;
                    }
                }
            }
            Relation::Unknown => c.unknown += 1,
        }
    }
    c
}

/// Time a task spent on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub cpu: u32,
    pub ns: u64,
}

/// Where a task's run time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Residency {
    pub total_ns: u64,
    /// Node id -> nanoseconds.
    pub node_ns: BTreeMap<u32, u64>,
    /// Node id -> percent of `total_ns`.
    pub node_pct: BTreeMap<u32, f64>,
    /// LLC index -> percent of `total_ns`.
    pub llc_pct: BTreeMap<usize, f64>,
    pub start_node: Option<u32>,
    /// The node with the most time (lowest id on ties).
    pub most_node: Option<u32>,
    /// Percent of time on the memory's node, when it is known.
    pub on_mem_node_pct: Option<f64>,
}

/// Sums segments into per-node and per-LLC shares.
pub fn residency(topo: &Topology, mem_node: Option<u32>, segments: &[Segment]) -> Residency {
    let mut r = Residency::default();
    let mut llc_ns: BTreeMap<usize, u64> = BTreeMap::new();
    for s in segments {
        r.total_ns += s.ns;
        if let Some(cpu) = topo.cpu(s.cpu) {
            if let Some(n) = cpu.node {
                *r.node_ns.entry(n).or_default() += s.ns;
                if r.start_node.is_none() {
                    r.start_node = Some(n);
                }
            }
            if let Some(l) = cpu.llc {
                *llc_ns.entry(l).or_default() += s.ns;
            }
        }
    }
    let pct = |ns: u64| {
        if r.total_ns == 0 {
            0.0
        } else {
            ns as f64 * 100.0 / r.total_ns as f64
        }
    };
    r.node_pct = r.node_ns.iter().map(|(&n, &ns)| (n, pct(ns))).collect();
    r.llc_pct = llc_ns.iter().map(|(&l, &ns)| (l, pct(ns))).collect();
    r.most_node = r
        .node_ns
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(&n, _)| n);
    r.on_mem_node_pct = mem_node.map(|m| pct(r.node_ns.get(&m).copied().unwrap_or(0)));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    fn mv(from: u32, to: u32) -> Migration {
        Migration { t_ns: 0, from, to }
    }

    #[test]
    fn classifies_on_epyc_levels_and_distances() {
        let t = presets::find("epyc-7551-8n").unwrap().topology();
        // node 0 = CPUs 0-7,64-71 (LLCs 0-3+64-67, 4-7+68-71); node 1 = 8-15,72-79;
        // node 4 (other socket) = 32-39,96-103.
        let moves = [
            mv(0, 64),  // SMT sibling
            mv(0, 1),   // same CCX
            mv(0, 4),   // same node, other CCX
            mv(0, 8),   // node 0 -> 1, distance 16, from mem node 0
            mv(8, 0),   // back, to mem node
            mv(0, 32),  // node 0 -> 4, distance 32
            mv(5, 5),   // not a move
            mv(0, 999), // unknown CPU
        ];
        let c = classify(&t, Some(0), &moves);
        assert_eq!(
            (
                c.total,
                c.same_core,
                c.same_llc,
                c.same_node,
                c.cross_node,
                c.unknown
            ),
            (7, 1, 1, 1, 3, 1)
        );
        assert_eq!((c.to_mem_node, c.from_mem_node), (1, 2));
        assert_eq!(c.cross_by_distance, BTreeMap::from([(16, 2), (32, 1)]));
    }

    #[test]
    fn residency_sums_to_total_and_finds_most_node() {
        let t = presets::find("xeon-8167m-2n").unwrap().topology();
        let segs = [
            Segment { cpu: 30, ns: 100 }, // node 1
            Segment { cpu: 0, ns: 300 },  // node 0
            Segment { cpu: 52, ns: 100 }, // node 0
        ];
        let r = residency(&t, Some(1), &segs);
        assert_eq!(r.total_ns, 500);
        assert_eq!(r.start_node, Some(1));
        assert_eq!(r.most_node, Some(0));
        assert!((r.node_pct[&0] - 80.0).abs() < 1e-9);
        assert!((r.on_mem_node_pct.unwrap() - 20.0).abs() < 1e-9);
        let sum: f64 = r.node_pct.values().sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }
}
