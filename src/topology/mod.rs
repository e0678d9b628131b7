//! The machine's NUMA topology: a read-only tree Node -> LLC -> Core -> CPU
//! with flat lookup tables, built once from [`Facts`] and never mutated.
//!
//! Facts come from three places and all go through [`Topology::build`], so a
//! topology read from sysfs, a preset and a JSON file obey the same rules:
//! - [`sysfs`]: the running machine (or a fixture tree under another root);
//! - [`presets`]: machines from the seed documents;
//! - a JSON file written by `numalab topo --json` (schema [`SCHEMA`]),
//!   re-validated on load by rebuilding it from its own facts.
//!
//! A cache or core that straddles a node boundary (sub-NUMA clustering, odd
//! emulator setups) is split at the node boundary so the tree stays a tree;
//! the LLC keeps the full set of CPUs sharing the cache in `shared_cpus`, so
//! "same LLC" stays true to the hardware.

pub mod presets;
pub mod render;
pub mod sysfs;

use crate::idset::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version tag of the JSON topology document.
pub const SCHEMA: &str = "numalab.topology/1";

/// Where a topology came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// Read from sysfs/procfs under `root`.
    Sysfs { root: String },
    /// A built-in preset.
    Preset { name: String },
    /// Loaded from a JSON file.
    File { path: String },
}

/// What is known of one CPU before the tree is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFacts {
    pub id: u32,
    pub online: bool,
    pub node: Option<u32>,
    pub package: Option<u32>,
    pub core_id: Option<u32>,
    /// SMT siblings including the CPU itself (`thread_siblings_list`).
    pub siblings: Option<IdSet>,
    /// The last-level cache: level and the CPUs sharing it.
    pub llc: Option<CacheFacts>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheFacts {
    pub level: u8,
    pub cache_id: Option<u32>,
    pub shared: IdSet,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub id: u32,
    pub cpus: IdSet,
    pub mem_total: Option<u64>,
    pub mem_free: Option<u64>,
    /// Distances to every node, in ascending node-id order.
    pub distances: Vec<u32>,
}

/// Everything a topology is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub source: Source,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    /// False where the kernel has no /sys/devices/system/node (no NUMA).
    pub numa_available: bool,
    pub nodes: Vec<NodeFacts>,
    pub cpus: Vec<CpuFacts>,
    pub allowed_cpus: IdSet,
    pub allowed_mems: IdSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub schema: String,
    pub source: Source,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    pub numa_available: bool,
    pub nodes: Vec<Node>,
    /// Every known CPU (online and offline), ascending.
    pub cpus: Vec<Cpu>,
    pub allowed: Allowed,
    #[serde(skip)]
    index: Index,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub id: u32,
    /// Online CPUs of the node, as the node's `cpulist` gives them.
    pub cpus: IdSet,
    pub mem_total_bytes: Option<u64>,
    pub mem_free_bytes: Option<u64>,
    /// Distances to every node, in the order of `Topology::nodes`.
    pub distances: Vec<u32>,
    pub llcs: Vec<Llc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llc {
    /// Machine-wide index of this LLC (0..).
    pub index: usize,
    /// Cache level (3 or 2); `None` where the machine gave no cache facts and
    /// the whole node stands in for its LLC.
    pub level: Option<u8>,
    pub cache_id: Option<u32>,
    /// This node's CPUs in the cache.
    pub cpus: IdSet,
    /// Every CPU sharing the cache, across nodes if it straddles them.
    pub shared_cpus: IdSet,
    pub cores: Vec<Core>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Machine-wide index of this core (0..).
    pub index: usize,
    pub package: Option<u32>,
    pub core_id: Option<u32>,
    /// The core's hardware threads.
    pub cpus: IdSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub id: u32,
    pub online: bool,
    pub node: Option<u32>,
    pub package: Option<u32>,
    pub core_id: Option<u32>,
    /// Machine-wide core index (see [`Core::index`]); `None` when offline.
    pub core: Option<usize>,
    /// Machine-wide LLC index (see [`Llc::index`]); `None` when offline.
    pub llc: Option<usize>,
    /// SMT siblings including this CPU.
    pub smt_siblings: IdSet,
}

/// The part of the machine this process may use (its cpuset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowed {
    pub cpus: IdSet,
    pub mems: IdSet,
}

/// Flat lookup tables, derived from the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Index {
    /// cpu id -> position in `cpus`.
    cpu_pos: BTreeMap<u32, usize>,
    /// node id -> position in `nodes`.
    node_pos: BTreeMap<u32, usize>,
    /// llc index -> (node position, position in node.llcs).
    llc_pos: Vec<(usize, usize)>,
}

/// Facts that do not form a consistent machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inconsistent topology ({source_desc}): {reason}")]
pub struct TopologyError {
    pub source_desc: String,
    pub reason: String,
}

/// How two CPUs relate, closest first: the classes migrations are counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Relation {
    SameCpu,
    /// SMT siblings of one core.
    SameCore,
    /// Different cores sharing the last-level cache.
    SameLlc,
    /// Same node, different LLC.
    SameNode,
    CrossNode,
    /// One side is unknown to the topology (offline, or not in the model).
    Unknown,
}

impl Topology {
    /// Builds and validates the tree from facts.
    pub fn build(facts: Facts) -> Result<Topology, TopologyError> {
        build::build(facts)
    }

    /// The facts this topology was built from (inverse of [`Topology::build`]).
    pub fn to_facts(&self) -> Facts {
        build::to_facts(self)
    }

    /// Parses a JSON document of schema [`SCHEMA`] and validates it by
    /// rebuilding it from its own facts.
    pub fn from_json(text: &str, origin: &str) -> Result<Topology, TopologyError> {
        let err = |reason: String| TopologyError {
            source_desc: origin.to_string(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(err(format!("schema {other:?}, expected {SCHEMA:?}"))),
            None => return Err(err(format!("no \"schema\" field (expected {SCHEMA:?})"))),
        }
        let mut parsed: Topology =
            serde_json::from_value(value).map_err(|e| err(format!("bad field: {e}")))?;
        if let Some(bad) = parsed.cpus.iter().find(|c| {
            c.llc
                .is_some_and(|i| i >= parsed.nodes.iter().map(|n| n.llcs.len()).sum())
        }) {
            return Err(err(format!(
                "CPU {} names LLC {:?}, which does not exist",
                bad.id, bad.llc
            )));
        }
        parsed.index = build::index(&parsed);
        let rebuilt = Topology::build(parsed.to_facts()).map_err(|e| err(e.reason))?;
        if rebuilt != parsed {
            return Err(err(
                "the tree does not follow from its own CPU and node facts \
                 (edit a topology by regenerating it, not by hand-editing indexes)"
                    .into(),
            ));
        }
        Ok(rebuilt)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("topology serializes")
    }

    pub fn node_ids(&self) -> IdSet {
        self.nodes.iter().map(|n| n.id).collect()
    }
    /// Nodes that have at least one online CPU.
    pub fn cpu_node_ids(&self) -> IdSet {
        self.nodes
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .map(|n| n.id)
            .collect()
    }
    pub fn online_cpus(&self) -> IdSet {
        self.cpus
            .iter()
            .filter(|c| c.online)
            .map(|c| c.id)
            .collect()
    }
    /// The online CPUs this process may run on (its cpuset): where the
    /// background load of `load`, `run` and `jobs` runs on this machine.
    pub fn usable_cpus(&self) -> IdSet {
        self.allowed.cpus.intersection(&self.online_cpus())
    }
    pub fn offline_cpus(&self) -> IdSet {
        self.cpus
            .iter()
            .filter(|c| !c.online)
            .map(|c| c.id)
            .collect()
    }
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.index.node_pos.get(&id).map(|&p| &self.nodes[p])
    }
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.index.cpu_pos.get(&id).map(|&p| &self.cpus[p])
    }
    pub fn llc(&self, index: usize) -> Option<&Llc> {
        let &(n, l) = self.index.llc_pos.get(index)?;
        Some(&self.nodes[n].llcs[l])
    }
    pub fn llcs(&self) -> impl Iterator<Item = &Llc> {
        self.nodes.iter().flat_map(|n| n.llcs.iter())
    }
    pub fn cores(&self) -> impl Iterator<Item = &Core> {
        self.llcs().flat_map(|l| l.cores.iter())
    }
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.cpu(cpu).and_then(|c| c.node)
    }
    /// SLIT distance from node `a` to node `b`.
    pub fn distance(&self, a: u32, b: u32) -> Option<u32> {
        let pa = *self.index.node_pos.get(&a)?;
        let pb = *self.index.node_pos.get(&b)?;
        self.nodes[pa].distances.get(pb).copied()
    }
    /// Packages (sockets) that have online CPUs.
    pub fn packages(&self) -> IdSet {
        self.cpus.iter().filter_map(|c| c.package).collect()
    }

    /// How CPU `b` relates to CPU `a`.
    pub fn relation(&self, a: u32, b: u32) -> Relation {
        if a == b {
            return Relation::SameCpu;
        }
        let (Some(ca), Some(cb)) = (self.cpu(a), self.cpu(b)) else {
            return Relation::Unknown;
        };
        if ca.core.is_some() && ca.core == cb.core {
            return Relation::SameCore;
        }
        if let Some(llc) = ca.llc.and_then(|i| self.llc(i)) {
            if llc.level.is_some() && llc.shared_cpus.contains(b) {
                return Relation::SameLlc;
            }
        }
        match (ca.node, cb.node) {
            (Some(x), Some(y)) if x == y => Relation::SameNode,
            (Some(_), Some(_)) => Relation::CrossNode,
            _ => Relation::Unknown,
        }
    }

    /// A short stable digest of the structure (nodes, CPUs, cores, caches,
    /// distances; not memory sizes, which drift): 16 hex digits of FNV-1a 64.
    pub fn digest(&self) -> String {
        let mut canon = String::new();
        for n in &self.nodes {
            canon += &format!("n{}:{}:{:?};", n.id, n.cpus, n.distances);
            for l in &n.llcs {
                canon += &format!("l{:?}:{}:{};", l.level, l.cpus, l.shared_cpus);
                for c in &l.cores {
                    canon += &format!("c{:?}:{};", c.package, c.cpus);
                }
            }
        }
        canon += &format!("off:{}", self.offline_cpus());
        format!("{:016x}", fnv1a64(canon.as_bytes()))
    }

    /// A sentence saying how the process's cpuset hides part of the machine,
    /// or `None` when it may use all of it.
    pub fn cpuset_note(&self) -> Option<String> {
        let online = self.online_cpus();
        let mem_nodes: IdSet = self
            .nodes
            .iter()
            .filter(|n| n.mem_total_bytes.unwrap_or(1) > 0)
            .map(|n| n.id)
            .collect();
        let hidden_cpus = online.difference(&self.allowed.cpus);
        let hidden_mems = mem_nodes.difference(&self.allowed.mems);
        if hidden_cpus.is_empty() && hidden_mems.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !hidden_cpus.is_empty() {
            parts.push(format!(
                "CPUs {} of online {} (CPUs {} hidden)",
                self.allowed.cpus, online, hidden_cpus
            ));
        }
        if !hidden_mems.is_empty() {
            parts.push(format!(
                "memory nodes {} of {} (nodes {} hidden)",
                self.allowed.mems, mem_nodes, hidden_mems
            ));
        }
        Some(format!(
            "this process's cpuset allows only {}",
            parts.join(" and ")
        ))
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

mod build;
