//! Building the tree from facts, and the way back.

use super::{
    Allowed, CacheFacts, Core, Cpu, CpuFacts, Facts, Index, Llc, Node, NodeFacts, Source, Topology,
    TopologyError, SCHEMA,
};
use crate::idset::IdSet;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn build(facts: Facts) -> Result<Topology, TopologyError> {
    let desc = match &facts.source {
        Source::Sysfs { root } => format!("sysfs under {root}"),
        Source::Preset { name } => format!("preset {name}"),
        Source::File { path } => format!("file {path}"),
    };
    let fail = |reason: String| TopologyError {
        source_desc: desc.clone(),
        reason,
    };

    let mut node_facts = facts.nodes.clone();
    node_facts.sort_by_key(|n| n.id);
    if node_facts.is_empty() {
        return Err(fail("no NUMA node".into()));
    }
    if let Some(w) = node_facts.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(fail(format!("node {} listed twice", w[0].id)));
    }
    let n_nodes = node_facts.len();
    let no_distances = node_facts.iter().all(|n| n.distances.is_empty());
    for n in &node_facts {
        if !no_distances && n.distances.len() != n_nodes {
            return Err(fail(format!(
                "node {} has {} distances for {} nodes",
                n.id,
                n.distances.len(),
                n_nodes
            )));
        }
    }

    if !no_distances {
        check_distances(&node_facts).map_err(fail)?;
    }

    let mut cpu_facts = facts.cpus.clone();
    cpu_facts.sort_by_key(|c| c.id);
    if let Some(w) = cpu_facts.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(fail(format!("CPU {} listed twice", w[0].id)));
    }

    // CPU -> node, from the nodes' CPU lists and the CPUs' own claims.
    let mut node_of: BTreeMap<u32, u32> = BTreeMap::new();
    for n in &node_facts {
        for c in n.cpus.iter() {
            if let Some(other) = node_of.insert(c, n.id) {
                return Err(fail(format!(
                    "CPU {c} is listed in both node {other} and node {}",
                    n.id
                )));
            }
        }
    }
    for c in &mut cpu_facts {
        match (c.node, node_of.get(&c.id)) {
            (Some(a), Some(&b)) if a != b => {
                return Err(fail(format!(
                    "CPU {} claims node {a} but node {b} lists it",
                    c.id
                )))
            }
            (None, Some(&b)) => c.node = Some(b),
            _ => {}
        }
        if let Some(n) = c.node {
            if node_facts.binary_search_by_key(&n, |f| f.id).is_err() {
                return Err(fail(format!(
                    "CPU {} is on node {n}, which does not exist",
                    c.id
                )));
            }
        }
        if c.online && c.node.is_none() {
            return Err(fail(format!("online CPU {} belongs to no node", c.id)));
        }
    }

    // Group each node's online CPUs into LLCs, then cores.
    let mut nodes = Vec::with_capacity(n_nodes);
    let mut llc_index = 0usize;
    let mut core_index = 0usize;
    let mut cpu_llc: BTreeMap<u32, usize> = BTreeMap::new();
    let mut cpu_core: BTreeMap<u32, usize> = BTreeMap::new();
    for nf in &node_facts {
        let members: Vec<&CpuFacts> = cpu_facts
            .iter()
            .filter(|c| c.online && c.node == Some(nf.id))
            .collect();
        // key: (level, cache_id, shared set) or None for "whole node".
        let mut groups: BTreeMap<u32, (Option<&CacheFacts>, IdSet)> = BTreeMap::new();
        let mut key_first: BTreeMap<(Option<u8>, Option<u32>, IdSet), u32> = BTreeMap::new();
        for c in &members {
            let key = match &c.llc {
                Some(l) => (Some(l.level), l.cache_id, l.shared.clone()),
                None => (None, None, IdSet::new()),
            };
            let first = *key_first.entry(key).or_insert(c.id);
            let g = groups
                .entry(first)
                .or_insert((c.llc.as_ref(), IdSet::new()));
            g.1.insert(c.id);
        }
        let mut llcs = Vec::new();
        for (_first, (cache, cpus)) in groups {
            let mut cores = Vec::new();
            let mut seen = BTreeSet::new();
            for cpu in cpus.iter() {
                if seen.contains(&cpu) {
                    continue;
                }
                let cf = members.iter().find(|c| c.id == cpu).expect("member");
                let threads = match &cf.siblings {
                    Some(s) => {
                        if !s.contains(cpu) {
                            return Err(fail(format!(
                                "CPU {cpu}'s SMT siblings {s} do not include itself"
                            )));
                        }
                        s.intersection(&cpus)
                    }
                    None => [cpu].into_iter().collect(),
                };
                for t in threads.iter() {
                    seen.insert(t);
                    cpu_core.insert(t, core_index);
                    cpu_llc.insert(t, llc_index);
                }
                cores.push(Core {
                    index: core_index,
                    package: cf.package,
                    core_id: cf.core_id,
                    cpus: threads,
                });
                core_index += 1;
            }
            let (level, cache_id, shared) = match cache {
                Some(c) => {
                    if !cpus.is_subset(&c.shared) {
                        return Err(fail(format!(
                            "CPUs {cpus} are grouped under a cache shared by {} only",
                            c.shared
                        )));
                    }
                    (Some(c.level), c.cache_id, c.shared.clone())
                }
                None => (None, None, cpus.clone()),
            };
            llcs.push(Llc {
                index: llc_index,
                level,
                cache_id,
                cpus,
                shared_cpus: shared,
                cores,
            });
            llc_index += 1;
        }
        nodes.push(Node {
            id: nf.id,
            cpus: nf.cpus.clone(),
            mem_total_bytes: nf.mem_total,
            mem_free_bytes: nf.mem_free,
            distances: nf.distances.clone(),
            llcs,
        });
    }

    let cpus: Vec<Cpu> = cpu_facts
        .iter()
        .map(|c| Cpu {
            id: c.id,
            online: c.online,
            node: c.node,
            package: c.package,
            core_id: c.core_id,
            core: cpu_core.get(&c.id).copied(),
            llc: cpu_llc.get(&c.id).copied(),
            smt_siblings: c
                .siblings
                .clone()
                .unwrap_or_else(|| [c.id].into_iter().collect()),
        })
        .collect();

    let mut topo = Topology {
        schema: SCHEMA.to_string(),
        source: facts.source,
        cpu_model: facts.cpu_model,
        kernel: facts.kernel,
        numa_available: facts.numa_available,
        nodes,
        cpus,
        allowed: Allowed {
            cpus: facts.allowed_cpus,
            mems: facts.allowed_mems,
        },
        index: Index::default(),
    };
    topo.index = index(&topo);
    Ok(topo)
}

/// The kernel's own rules for a SLIT (slit_valid() in
/// drivers/acpi/numa/srat.c, the device tree's of_numa_parse_distance_map
/// and numa_set_distance() agree): a node is at LOCAL_DISTANCE (10) from
/// itself, every other node is farther than that, and a distance fits a
/// byte with 255 meaning "unreachable" (a SLIT holding it is ignored). A
/// matrix breaking them is one no kernel reports, and the simulator's sched
/// domains (one NUMA level per distance above 10) would leave CPUs in no
/// common domain. Asymmetric matrices are real (some firmware has them) and
/// the simulator copes, so they pass.
fn check_distances(nodes: &[NodeFacts]) -> Result<(), String> {
    const LOCAL: u32 = 10;
    const UNREACHABLE: u32 = 255;
    for a in nodes {
        for (b, &d) in nodes.iter().zip(&a.distances) {
            let at = format!("node {}'s distance to node {} (entry {d})", a.id, b.id);
            if a.id == b.id && d != LOCAL {
                return Err(format!(
                    "{at}: a node's distance to itself must be {LOCAL} (LOCAL_DISTANCE)"
                ));
            }
            if a.id != b.id && d <= LOCAL {
                return Err(format!(
                    "{at}: a distance to another node must be greater than the local {LOCAL}"
                ));
            }
            if d >= UNREACHABLE {
                return Err(format!(
                    "{at}: distances must be at most 254 (255 means unreachable, \
                     and the kernel refuses such a table)"
                ));
            }
        }
    }
    Ok(())
}

pub(super) fn index(t: &Topology) -> Index {
    let mut idx = Index::default();
    for (p, c) in t.cpus.iter().enumerate() {
        idx.cpu_pos.insert(c.id, p);
    }
    for (p, n) in t.nodes.iter().enumerate() {
        idx.node_pos.insert(n.id, p);
        for (l, _) in n.llcs.iter().enumerate() {
            idx.llc_pos.push((p, l));
        }
    }
    idx
}

pub(super) fn to_facts(t: &Topology) -> Facts {
    let llc_of = |i: Option<usize>| -> Option<CacheFacts> {
        let llc = t.llc(i?)?;
        Some(CacheFacts {
            level: llc.level?,
            cache_id: llc.cache_id,
            shared: llc.shared_cpus.clone(),
        })
    };
    Facts {
        source: t.source.clone(),
        cpu_model: t.cpu_model.clone(),
        kernel: t.kernel.clone(),
        numa_available: t.numa_available,
        nodes: t
            .nodes
            .iter()
            .map(|n| NodeFacts {
                id: n.id,
                cpus: n.cpus.clone(),
                mem_total: n.mem_total_bytes,
                mem_free: n.mem_free_bytes,
                distances: n.distances.clone(),
            })
            .collect(),
        cpus: t
            .cpus
            .iter()
            .map(|c| CpuFacts {
                id: c.id,
                online: c.online,
                node: c.node,
                package: c.package,
                core_id: c.core_id,
                siblings: Some(c.smt_siblings.clone()),
                llc: llc_of(c.llc),
            })
            .collect(),
        allowed_cpus: t.allowed.cpus.clone(),
        allowed_mems: t.allowed.mems.clone(),
    }
}
