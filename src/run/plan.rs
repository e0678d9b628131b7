//! The order samples run in: every (row, sample) pair of the runnable rows,
//! shuffled with a seeded Fisher–Yates over SplitMix64, so slow drift of the
//! machine (thermal, background daemons, memory fragmentation) spreads over
//! all rows instead of landing on one. The same seed gives the same order,
//! which is what `--resume` relies on.

use super::spec::Row;

pub use crate::rng::SplitMix64;

/// The run's sample order as (row id, sample index).
pub fn order(rows: &[Row], samples: u32, seed: u64) -> Vec<(usize, u32)> {
    let mut v: Vec<(usize, u32)> = rows
        .iter()
        .filter(|r| r.skip.is_none())
        .flat_map(|r| (0..samples).map(move |s| (r.id, s)))
        .collect();
    crate::rng::shuffle(&mut v, seed);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::spec::{RowCpu, RowMem};

    fn row(id: usize, skip: bool) -> Row {
        Row {
            id,
            block: 0,
            pnid: -1,
            nb: 0,
            mem: RowMem::Float,
            cpu: RowCpu::Float,
            migration_cost_ns: None,
            knobs: Default::default(),
            needs_two_nodes: false,
            skip: skip.then(|| "no".into()),
        }
    }

    #[test]
    fn order_is_a_seeded_permutation_of_runnable_pairs() {
        let rows = [row(0, false), row(1, true), row(2, false)];
        let a = order(&rows, 5, 7);
        let b = order(&rows, 5, 7);
        assert_eq!(a, b);
        assert_eq!(a.len(), 10);
        let mut sorted = a.clone();
        sorted.sort();
        let want: Vec<(usize, u32)> = [0, 2]
            .iter()
            .flat_map(|&r| (0..5).map(move |s| (r, s)))
            .collect();
        assert_eq!(sorted, want);
        assert_ne!(a, want, "shuffled");
        assert_ne!(order(&rows, 5, 8), a);
    }
}
