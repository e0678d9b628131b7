//! [`LoadPhases::Spread`](super::LoadPhases::Spread): phases that keep every
//! node, LLC and core of the machine equally loaded at every instant.
//!
//! Why: staggering the workers in CPU order puts the phases of one node's
//! CPUs together wherever Linux numbers a node's CPUs as a block (or as two
//! blocks, SMT siblings half the CPUs apart, as on the RFC's Xeon and
//! EPYC). Nodes then take turns being the busy one: at 60% load the most
//! and least idle nodes differ by 8 CPUs on average on both machines, and
//! by up to 11 on the Xeon, every period; the NUMA-level balancer sees a
//! node imbalance the load itself makes. Spread phases order the workers
//! so that consecutive phases go round the nodes first, then the LLCs of a
//! node, then the cores of an LLC, then a core's threads: each node's (and
//! each LLC's) phases are then evenly spaced over the period, its busy
//! count constant to within one, and a core's threads half a period apart.

use crate::topology::Topology;
use std::collections::BTreeMap;

/// Where a worker's CPU sits: node, LLC and core (machine-wide indexes; a
/// CPU the topology does not place counts as a node, LLC and core of its
/// own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub node: u32,
    pub llc: usize,
    pub core: usize,
}

impl Place {
    /// The places of `cpus`, in their order.
    pub fn of(topo: &Topology, cpus: impl IntoIterator<Item = u32>) -> Vec<Place> {
        cpus.into_iter()
            .map(|id| {
                let c = topo.cpu(id);
                // Offline or unknown CPUs get ids no real one has.
                let own = usize::MAX / 2 + id as usize;
                Place {
                    node: c.and_then(|c| c.node).unwrap_or(u32::MAX / 2 + id),
                    llc: c.and_then(|c| c.llc).unwrap_or(own),
                    core: c.and_then(|c| c.core).unwrap_or(own),
                }
            })
            .collect()
    }
}

/// Each worker's rank in the spread order (0 first): workers sorted by
/// their thread's position in its core, then the core's position in its
/// LLC, the LLC's in its node, the node's, and last their own position,
/// each position counted among the workers' places only.
pub fn ranks(places: &[Place]) -> Vec<usize> {
    // Position of a child among its parent's children, in id order.
    fn positions<K: Ord + Copy, C: Ord + Copy>(
        pairs: impl Iterator<Item = (K, C)>,
    ) -> BTreeMap<(K, C), usize> {
        let mut by_parent: BTreeMap<K, Vec<C>> = BTreeMap::new();
        for (k, c) in pairs {
            let v = by_parent.entry(k).or_default();
            if !v.contains(&c) {
                v.push(c);
            }
        }
        let mut out = BTreeMap::new();
        for (k, mut v) in by_parent {
            v.sort();
            for (i, c) in v.into_iter().enumerate() {
                out.insert((k, c), i);
            }
        }
        out
    }
    let node_pos = positions(places.iter().map(|p| ((), p.node)));
    let llc_pos = positions(places.iter().map(|p| (p.node, p.llc)));
    let core_pos = positions(places.iter().map(|p| (p.llc, p.core)));
    let mut threads: BTreeMap<usize, usize> = BTreeMap::new();
    let keys: Vec<(usize, usize, usize, usize, usize)> = places
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = threads.entry(p.core).or_insert(0);
            let thread = *t;
            *t += 1;
            (
                thread,
                core_pos[&(p.llc, p.core)],
                llc_pos[&(p.node, p.llc)],
                node_pos[&((), p.node)],
                i,
            )
        })
        .collect();
    let mut order: Vec<usize> = (0..places.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let mut rank = vec![0; places.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    /// Most minus least idle CPUs over the nodes at each of `steps` instants
    /// of a period, for workers busy `duty` of it at `offsets` (fractions).
    fn node_spread(places: &[Place], offsets: &[f64], duty: f64, steps: usize) -> (f64, usize) {
        let nodes: std::collections::BTreeSet<u32> = places.iter().map(|p| p.node).collect();
        let (mut sum, mut worst) = (0usize, 0usize);
        for s in 0..steps {
            let x = s as f64 / steps as f64;
            let idle: Vec<usize> = nodes
                .iter()
                .map(|&n| {
                    places
                        .iter()
                        .zip(offsets)
                        .filter(|(p, &o)| p.node == n && (x - o).rem_euclid(1.0) >= duty)
                        .count()
                })
                .collect();
            let d = idle.iter().max().unwrap() - idle.iter().min().unwrap();
            sum += d;
            worst = worst.max(d);
        }
        (sum as f64 / steps as f64, worst)
    }

    fn offsets(ranks: &[usize]) -> Vec<f64> {
        ranks
            .iter()
            .map(|&r| r as f64 / ranks.len() as f64)
            .collect()
    }

    #[test]
    fn staggered_phases_make_the_nodes_take_turns_and_spread_ones_do_not() {
        for (preset, staggered_mean) in [("xeon-8167m-2n", 8.0), ("epyc-7551-8n", 7.0)] {
            let topo = presets::find(preset).unwrap().topology();
            let places = Place::of(&topo, topo.cpus.iter().map(|c| c.id));
            let n = places.len();
            let staggered: Vec<f64> = (0..n).map(|k| k as f64 / n as f64).collect();
            let (mean, _) = node_spread(&places, &staggered, 0.6, 2000);
            assert!(mean > staggered_mean, "{preset}: staggered {mean}");
            let (mean, worst) = node_spread(&places, &offsets(&ranks(&places)), 0.6, 2000);
            assert!(worst <= 1 && mean <= 1.0, "{preset}: spread {mean} {worst}");
        }
    }

    #[test]
    fn spread_order_goes_round_the_nodes_then_llcs_then_cores_then_threads() {
        // EPYC: 8 nodes of 2 LLCs of 4 cores of 2 threads; CPU c and c+64
        // are a core's threads, node n has CPUs 8n-8n+7 and 64+8n-64+8n+7.
        let topo = presets::find("epyc-7551-8n").unwrap().topology();
        let places = Place::of(&topo, topo.cpus.iter().map(|c| c.id));
        let r = ranks(&places);
        // The first ranks: the first core of each node's first LLC.
        let first: Vec<u32> = (0..8)
            .map(|k| topo.cpus[r.iter().position(|&x| x == k).unwrap()].id)
            .collect();
        assert_eq!(first, vec![0, 8, 16, 24, 32, 40, 48, 56]);
        // Then each node's second LLC, and a core's threads half the
        // machine apart.
        assert_eq!(topo.cpus[r.iter().position(|&x| x == 8).unwrap()].id, 4);
        assert_eq!(r[64], r[0] + 64);
        // Every node's ranks are evenly spaced: 8 apart.
        for n in 0..8u32 {
            let mut v: Vec<usize> = (0..places.len())
                .filter(|&i| places[i].node == n)
                .map(|i| r[i])
                .collect();
            v.sort();
            assert!(v.windows(2).all(|w| w[1] - w[0] == 8), "node {n}: {v:?}");
        }
    }

    #[test]
    fn unplaced_cpus_are_their_own_nodes() {
        let topo = presets::find("xeon-8167m-2n").unwrap().topology();
        let p = Place::of(&topo, [0, 9999]);
        assert_eq!(p[0].node, 0);
        assert_ne!(p[1].node, 0);
        assert_eq!(ranks(&p), vec![0, 1]);
    }
}
