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

/// The value at `u` in [0, 1) of a distribution given by evenly spaced
/// quantiles `q` (the least first, the greatest last), linear between
/// them; 0 when there are none. Fed a uniform draw, it draws from that
/// distribution (the profile's measured ones).
pub fn quantile(q: &[f64], u: f64) -> f64 {
    match q.len() {
        0 => 0.0,
        1 => q[0],
        n => {
            let x = u.clamp(0.0, 1.0) * (n - 1) as f64;
            let i = (x as usize).min(n - 2);
            q[i] + (q[i + 1] - q[i]) * (x - i as f64)
        }
    }
}

/// A stable pseudo-random value for (seed, a, b): the same event always
/// gets the same jitter however often its time is proposed.
pub fn hash3(seed: u64, a: u64, b: u64) -> f64 {
    let mut r = Rng::new(seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(29));
    r.unit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_their_points() {
        let q = [1.0, 2.0, 4.0];
        assert_eq!(quantile(&q, 0.0), 1.0);
        assert_eq!(quantile(&q, 0.25), 1.5);
        assert_eq!(quantile(&q, 0.5), 2.0);
        assert_eq!(quantile(&q, 0.75), 3.0);
        assert!(quantile(&q, 0.999_999) < 4.0 && quantile(&q, 0.999_999) > 3.99);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
        assert_eq!(quantile(&[], 0.3), 0.0);
    }
}
