//! A task's moves over time, at a fixed size whatever the run's length:
//! its life (a traced task's in the trace's window, a simulated one's whole
//! run) cut into ten equal parts, and in each the cross-node moves,
//! NUMA balancing's among them, and the share of the part the task spent
//! on its memory's node (where its moves had put it, running or waiting).
//!
//! Per-sample records keep no per-move list (a floating probe on a big
//! machine moves thousands of times a sample); this is what they keep
//! instead, so a lab run and a simulated one can be compared over time,
//! not only per sample: whether NUMA balancing's moves come early and the
//! task settles, or keep coming. Tenths, not seconds, because the lab's
//! emulator runs a sample several times slower than the simulator
//! (docs/sim-validation.md, "The emulator's time").

use super::migrations::Migration;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// How many parts the window is cut into.
pub const PARTS: usize = 10;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OverTime {
    /// The window's length, ns: each part is a tenth of it.
    pub span_ns: u64,
    /// Cross-node moves in each part.
    pub cross_node: [u64; PARTS],
    /// Of those, NUMA balancing's.
    pub cross_node_numa: [u64; PARTS],
    /// Percent of each part the task was on its memory's node; absent
    /// without a memory node or a first CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_mem_node_pct: Option<[f64; PARTS]>,
}

/// Part `k`'s bounds, ns from the window's start: [lo, hi).
fn bounds(k: usize, span_ns: u64) -> (u64, u64) {
    let at = |k: usize| (u128::from(span_ns) * k as u128 / PARTS as u128) as u64;
    (at(k), at(k + 1))
}

/// The part `t_ns` falls in (the window's end in the last).
fn part(t_ns: u64, span_ns: u64) -> usize {
    ((u128::from(t_ns) * PARTS as u128 / u128::from(span_ns.max(1))) as usize).min(PARTS - 1)
}

/// `moves` (each with whether NUMA balancing made it; `t_ns` from the
/// window's start, in time order) over a window of `span_ns`, for a task
/// first on `first_cpu` whose memory is on `mem_node`. None for an empty
/// window.
pub fn over_time(
    topo: &Topology,
    mem_node: Option<u32>,
    first_cpu: Option<u32>,
    span_ns: u64,
    moves: &[(Migration, bool)],
) -> Option<OverTime> {
    if span_ns == 0 {
        return None;
    }
    let node = |cpu: u32| topo.cpu(cpu).and_then(|c| c.node);
    let mut o = OverTime {
        span_ns,
        ..OverTime::default()
    };
    for (m, numa) in moves {
        let (a, b) = (node(m.from), node(m.to));
        if a.is_some() && b.is_some() && a != b {
            let k = part(m.t_ns, span_ns);
            o.cross_node[k] += 1;
            o.cross_node_numa[k] += u64::from(*numa);
        }
    }
    if let (Some(mem), Some(first)) = (mem_node, first_cpu) {
        let mut on = [0u64; PARTS];
        // Adds [from, to) to the parts it overlaps.
        let mut add = |from: u64, to: u64| {
            for (k, acc) in on.iter_mut().enumerate() {
                let (lo, hi) = bounds(k, span_ns);
                *acc += to.min(hi).saturating_sub(from.max(lo));
            }
        };
        let (mut at, mut here) = (0u64, node(first));
        for (m, _) in moves {
            let t = m.t_ns.min(span_ns);
            if here == Some(mem) {
                add(at, t);
            }
            at = at.max(t);
            here = node(m.to);
        }
        if here == Some(mem) {
            add(at, span_ns);
        }
        let mut pct = [0.0; PARTS];
        for (k, p) in pct.iter_mut().enumerate() {
            let (lo, hi) = bounds(k, span_ns);
            *p = on[k] as f64 * 100.0 / (hi - lo).max(1) as f64;
        }
        o.on_mem_node_pct = Some(pct);
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::presets;

    fn mv(t_ns: u64, from: u32, to: u32, numa: bool) -> (Migration, bool) {
        (Migration { t_ns, from, to }, numa)
    }

    #[test]
    fn moves_fall_in_their_tenth_and_time_on_the_memory_node_follows_them() {
        // Xeon: CPUs 0-25 and 52-77 on node 0, the rest on node 1.
        let t = presets::find("xeon-8167m-2n").unwrap().topology();
        let moves = [
            mv(50, 0, 1, false),    // same node: not counted
            mv(150, 1, 30, false),  // to node 1 in part 1
            mv(550, 30, 2, true),   // back to node 0 by NB in part 5
            mv(1000, 2, 31, false), // at the window's end: the last part
        ];
        let o = over_time(&t, Some(0), Some(0), 1000, &moves).unwrap();
        assert_eq!(o.cross_node, [0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(o.cross_node_numa, [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        let pct = o.on_mem_node_pct.unwrap();
        assert_eq!(pct[0], 100.0);
        assert_eq!(pct[1], 50.0, "left at 150");
        assert_eq!(&pct[2..5], &[0.0, 0.0, 0.0]);
        assert_eq!(pct[5], 50.0, "back at 550");
        assert_eq!(&pct[6..], &[100.0; 4]);
        // No memory node: no time on it; an empty window: nothing.
        assert!(over_time(&t, None, Some(0), 1000, &moves)
            .unwrap()
            .on_mem_node_pct
            .is_none());
        assert!(over_time(&t, Some(0), Some(0), 0, &moves).is_none());
    }
}
