//! The order samples run in: every (row, sample) pair of the runnable rows,
//! shuffled with a seeded Fisher–Yates over SplitMix64, so slow drift of the
//! machine (thermal, background daemons, memory fragmentation) spreads over
//! all rows instead of landing on one. The same seed gives the same order,
//! which is what `--resume` relies on.

use super::spec::Row;

/// SplitMix64 (Steele, Lea, Flood 2014): a small, well-mixed seeded PRNG.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The run's sample order as (row id, sample index).
pub fn order(rows: &[Row], samples: u32, seed: u64) -> Vec<(usize, u32)> {
    let mut v: Vec<(usize, u32)> = rows
        .iter()
        .filter(|r| r.skip.is_none())
        .flat_map(|r| (0..samples).map(move |s| (r.id, s)))
        .collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::spec::{RowCpu, RowMem};

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
