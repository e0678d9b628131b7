//! The simulator's random numbers: SplitMix64, seeded per sample, and a
//! stable hash for per-event jitter (the same event gets the same value
//! however often its time is proposed). Small and fast; a crate would add
//! nothing here but a dependency.

/// A small, fast, seedable generator (SplitMix64 output function).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// A stable pseudo-random value for (seed, a, b): the same event always
/// gets the same jitter however often its time is proposed.
pub fn hash3(seed: u64, a: u64, b: u64) -> f64 {
    let mut r = Rng::new(seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(29));
    r.unit()
}
