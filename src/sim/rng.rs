//! The simulator's random numbers: the crate's SplitMix64
//! ([`crate::rng`]) seeded per sample (mixed with a constant so a sample's
//! stream differs from the run order's for the same number), and a stable
//! hash for per-event jitter (the same event gets the same value however
//! often its time is proposed).

use crate::rng::SplitMix64;

#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed ^ 0x5DEE_CE66_D1CE_4E5B))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0.unit()
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
}

/// A stable pseudo-random value for (seed, a, b): the same event always
/// gets the same jitter however often its time is proposed.
pub fn hash3(seed: u64, a: u64, b: u64) -> f64 {
    let mut r = Rng::new(seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(29));
    r.unit()
}
