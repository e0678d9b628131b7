//! Built-in machines from the seed documents, built from their stated facts.
//!
//! Where a document does not state a fact, the preset says what it assumed
//! (in its description) or leaves it unknown (memory sizes print as
//! `<not available>`, as numactl prints a node whose size it cannot read).
//! CPU numbering follows what Linux does on such machines: on SMT machines
//! the first hardware thread of every core is numbered first, socket by
//! socket, then the second threads in the same order.

use super::{CacheFacts, CpuFacts, Facts, NodeFacts, Source, Topology};
use crate::idset::IdSet;

pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    build: fn() -> Shape,
}

/// A machine described by its parts; turned into [`Facts`] by [`Shape::facts`].
struct Shape {
    cpu_model: Option<&'static str>,
    /// Per node: CPUs, package, memory total and free in MB.
    nodes: Vec<(IdSet, u32, Option<u64>, Option<u64>)>,
    distances: Vec<Vec<u32>>,
    /// Last-level caches: level and CPUs.
    llcs: Vec<(u8, IdSet)>,
    /// Cores: their hardware threads.
    cores: Vec<IdSet>,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "xeon-8167m-2n",
        description: "Intel Xeon Platinum 8167M, 2 sockets x 26 cores x 2 threads = 104 CPUs, \
                      one LLC per node (the RFC's test machine); distances 10/21 assumed \
                      (typical 2-socket SLIT), memory not stated",
        build: xeon_8167m,
    },
    Preset {
        name: "epyc-7551-8n",
        description: "AMD EPYC 7551, 2 sockets, 8 nodes of 16 CPUs, each node two LLCs of \
                      4 cores x 2 threads = 128 CPUs; distances 10 local, 16 same socket, \
                      32 across sockets; memory not stated",
        build: epyc_7551,
    },
    Preset {
        name: "ia64-4n",
        description: "IA64 machine of the node-affine scheduler document: 4 nodes of 4 CPUs, \
                      16 CPUs, no SMT, a cache per CPU; distances 10 on the node, 15 same \
                      supernode (nodes 0-1, 2-3), 20 other supernode; memory not stated",
        build: ia64_4n,
    },
    Preset {
        name: "hp-dl580-gen8",
        description: "HP ProLiant DL580 Gen8, 4-socket Ivy Bridge EX, 15 cores per socket, \
                      Hyper-Threading off (as in the slides): 4 nodes, 60 CPUs, numactl -H \
                      sizes and distances from the slides",
        build: hp_dl580,
    },
    Preset {
        name: "hp-dl980-g7",
        description: "HP ProLiant DL980 G7, 8-socket Westmere EX, 10 CPUs per node: 8 nodes, \
                      80 CPUs, numactl -H sizes and distance matrix from the slides",
        build: hp_dl980,
    },
    Preset {
        name: "ivybridge-ex-8s",
        description: "8-socket Ivy Bridge EX prototype server, 15 CPUs per node: 8 nodes, \
                      120 CPUs, numactl -H sizes and distance matrix from the slides",
        build: ivb_ex_8s,
    },
];

/// Looks a preset up by name.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    pub fn topology(&self) -> Topology {
        Topology::build((self.build)().facts(self.name))
            .unwrap_or_else(|e| panic!("preset {} is inconsistent: {e}", self.name))
    }
}

fn range(lo: u32, hi_incl: u32) -> IdSet {
    (lo..=hi_incl).collect()
}

impl Shape {
    fn facts(self, name: &str) -> Facts {
        let mut cpus = Vec::new();
        for (n, (node_cpus, package, _, _)) in self.nodes.iter().enumerate() {
            for id in node_cpus.iter() {
                let core_pos = self.cores.iter().position(|c| c.contains(id));
                let core = core_pos.map(|p| self.cores[p].clone());
                // core_id: position of the core among its package's cores.
                let core_id = core_pos.map(|p| {
                    self.cores[..p]
                        .iter()
                        .filter(|c| {
                            let first = c.first().unwrap_or(0);
                            self.nodes
                                .iter()
                                .any(|(nc, pk, _, _)| pk == package && nc.contains(first))
                        })
                        .count() as u32
                });
                let llc = self
                    .llcs
                    .iter()
                    .enumerate()
                    .find(|(_, (_, s))| s.contains(id));
                cpus.push(CpuFacts {
                    id,
                    online: true,
                    node: Some(n as u32),
                    package: Some(*package),
                    core_id,
                    siblings: core,
                    llc: llc.map(|(i, (level, s))| CacheFacts {
                        level: *level,
                        cache_id: Some(i as u32),
                        shared: s.clone(),
                    }),
                });
            }
        }
        let all_cpus: IdSet = cpus.iter().map(|c| c.id).collect();
        let nodes: Vec<NodeFacts> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(n, (c, _, total, free))| NodeFacts {
                id: n as u32,
                cpus: c.clone(),
                mem_total: total.map(|mb| mb << 20),
                mem_free: free.map(|mb| mb << 20),
                distances: self.distances[n].clone(),
            })
            .collect();
        Facts {
            source: Source::Preset {
                name: name.to_string(),
            },
            cpu_model: self.cpu_model.map(str::to_string),
            kernel: None,
            numa_available: true,
            allowed_mems: nodes.iter().map(|n| n.id).collect(),
            nodes,
            cpus,
            allowed_cpus: all_cpus,
        }
    }
}

fn uniform_distances(n: usize, remote: u32) -> Vec<Vec<u32>> {
    (0..n)
        .map(|i| (0..n).map(|j| if i == j { 10 } else { remote }).collect())
        .collect()
}

/// One socket per node, no SMT, one LLC per socket.
fn simple_sockets(
    cpus_per_node: u32,
    mem: &[(u64, u64)],
    distances: Vec<Vec<u32>>,
    model: &'static str,
) -> Shape {
    let n = mem.len() as u32;
    let nodes = (0..n)
        .map(|i| {
            let c = range(i * cpus_per_node, (i + 1) * cpus_per_node - 1);
            let (t, f) = mem[i as usize];
            (c, i, Some(t), Some(f))
        })
        .collect::<Vec<_>>();
    Shape {
        cpu_model: Some(model),
        llcs: nodes.iter().map(|(c, _, _, _)| (3, c.clone())).collect(),
        cores: (0..n * cpus_per_node)
            .map(|c| [c].into_iter().collect())
            .collect(),
        nodes,
        distances,
    }
}

fn xeon_8167m() -> Shape {
    let (sockets, cores, smt_offset) = (2u32, 26u32, 52u32);
    let mut nodes = Vec::new();
    let mut core_sets = Vec::new();
    for s in 0..sockets {
        let first = range(s * cores, (s + 1) * cores - 1);
        let second = range(smt_offset + s * cores, smt_offset + (s + 1) * cores - 1);
        nodes.push((first.union(&second), s, None, None));
        for c in 0..cores {
            core_sets.push(
                [s * cores + c, smt_offset + s * cores + c]
                    .into_iter()
                    .collect(),
            );
        }
    }
    Shape {
        cpu_model: Some("Intel(R) Xeon(R) Platinum 8167M CPU @ 2.00GHz"),
        llcs: nodes.iter().map(|(c, _, _, _)| (3, c.clone())).collect(),
        nodes,
        distances: uniform_distances(2, 21),
        cores: core_sets,
    }
}

fn epyc_7551() -> Shape {
    // 64 cores (8 per node, 4 per CCX); thread 2 of core k is CPU 64 + k.
    let core = |k: u32| -> IdSet { [k, 64 + k].into_iter().collect() };
    let nodes = (0..8u32)
        .map(|n| {
            let cpus = (8 * n..8 * n + 8).fold(IdSet::new(), |acc, k| acc.union(&core(k)));
            (cpus, n / 4, None, None)
        })
        .collect();
    let llcs = (0..16u32)
        .map(|x| {
            (
                3,
                (4 * x..4 * x + 4).fold(IdSet::new(), |acc, k| acc.union(&core(k))),
            )
        })
        .collect();
    let distances = (0..8u32)
        .map(|i| {
            (0..8u32)
                .map(|j| match (i == j, i / 4 == j / 4) {
                    (true, _) => 10,
                    (false, true) => 16,
                    (false, false) => 32,
                })
                .collect()
        })
        .collect();
    Shape {
        cpu_model: Some("AMD EPYC 7551 32-Core Processor"),
        nodes,
        distances,
        llcs,
        cores: (0..64).map(core).collect(),
    }
}

fn ia64_4n() -> Shape {
    let nodes = (0..4u32)
        .map(|n| (range(4 * n, 4 * n + 3), n, None, None))
        .collect();
    let distances = (0..4u32)
        .map(|i| {
            (0..4u32)
                .map(|j| match (i == j, i / 2 == j / 2) {
                    (true, _) => 10,
                    (false, true) => 15,
                    (false, false) => 20,
                })
                .collect()
        })
        .collect();
    Shape {
        cpu_model: None,
        nodes,
        distances,
        llcs: (0..16).map(|c| (3, [c].into_iter().collect())).collect(),
        cores: (0..16).map(|c| [c].into_iter().collect()).collect(),
    }
}

fn hp_dl580() -> Shape {
    simple_sockets(
        15,
        &[
            (262040, 249261),
            (262144, 252060),
            (262144, 250441),
            (262144, 250080),
        ],
        uniform_distances(4, 21),
        "Intel Xeon Ivy Bridge EX (model not stated)",
    )
}

fn hp_dl980() -> Shape {
    let rows = [
        [10, 12, 17, 17, 19, 19, 19, 19],
        [12, 10, 17, 17, 19, 19, 19, 19],
        [17, 17, 10, 12, 19, 19, 19, 19],
        [17, 17, 12, 10, 19, 19, 19, 19],
        [19, 19, 19, 19, 10, 12, 17, 17],
        [19, 19, 19, 19, 12, 10, 17, 17],
        [19, 19, 19, 19, 17, 17, 10, 12],
        [19, 19, 19, 19, 17, 17, 12, 10],
    ];
    simple_sockets(
        10,
        &[
            (262133, 250463),
            (262144, 256316),
            (262144, 256439),
            (262144, 255403),
            (262144, 256546),
            (262144, 256036),
            (262144, 256468),
            (262144, 255232),
        ],
        rows.iter().map(|r| r.to_vec()).collect(),
        "Intel Xeon Westmere EX (model not stated)",
    )
}

fn ivb_ex_8s() -> Shape {
    let distances = (0..8usize)
        .map(|i| {
            (0..8usize)
                .map(|j| match (i == j, i / 2 == j / 2) {
                    (true, _) => 10,
                    (false, true) => 16,
                    (false, false) => 30,
                })
                .collect()
        })
        .collect();
    simple_sockets(
        15,
        &[
            (130956, 125414),
            (131071, 126712),
            (131072, 126612),
            (131072, 125383),
            (131072, 126479),
            (131072, 125298),
            (131072, 126913),
            (131072, 124509),
        ],
        distances,
        "Intel Xeon Ivy Bridge EX (model not stated)",
    )
}
