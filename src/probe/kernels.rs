//! The probe's access kernels: tight loops over the buffer, run in chunks
//! so the caller can observe its own CPU between chunks.
//!
//! - `rand-rw`: per access, one xorshift64* step (the generator of
//!   shared/bench/refprobe.c: three shifts, one multiply), an index masked to
//!   the power-of-two word count (or reduced with Lemire's multiply-shift
//!   when the count is not a power of two), a 64-bit read, and a 64-bit write
//!   of `read + 1`. The read feeds the checksum, so no access can be skipped.
//! - `seq-rw`: every word in order, read then write `read + 1`.
//! - `gather-add`: `a[ix[i]] = a[ix[i]] + b[i]` over a random `ix[]`
//!   (the node-affine scheduler document's `affinity` test).
//! - `chase`: `p = next[p]` over a random cyclic permutation built with
//!   Sattolo's algorithm, so every load depends on the previous one.
//!
//! `unsafe` here is buffer code: indexes are in range by construction
//! (masked, multiply-shift reduced, or taken from a permutation of
//! `0..words`), and bounds checks would add instructions per access that the
//! C reference does not have.

use crate::sys::Buffer;
use serde::{Deserialize, Serialize};

/// The multiplier of xorshift64* (Vigna), as in refprobe.c.
const XS_MUL: u64 = 0x2545_F491_4F6C_DD1D;
/// refprobe.c's seed.
pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Random u64 read then write (default; the RFC's "most interesting" combo).
    RandRw,
    /// Every u64 in order, read then write.
    SeqRw,
    /// a[ix[i]] = a[ix[i]] + b[i] over a random ix[].
    GatherAdd,
    /// Dependent pointer chase over a random cyclic permutation.
    Chase,
}

impl Pattern {
    /// Accesses in one pass over a `bytes` buffer: one per u64 word, but
    /// gather-add splits the bytes between a[] (8 bytes an element), b[]
    /// and ix[] (16), so it has a third as many elements per byte. The one
    /// place this rule is written: the probe maps by it, the simulator
    /// counts by it.
    pub fn accesses_per_pass(self, bytes: u64) -> u64 {
        match self {
            Pattern::GatherAdd => (bytes / 24).max(1),
            _ => (bytes / 8).max(1),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pattern::RandRw => "rand-rw",
            Pattern::SeqRw => "seq-rw",
            Pattern::GatherAdd => "gather-add",
            Pattern::Chase => "chase",
        }
    }
}

#[inline(always)]
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(XS_MUL)
}

/// The buffers of one pattern and its position, ready to run.
pub struct Kernel {
    pattern: Pattern,
    /// Main array (`a` for gather-add, the permutation for chase).
    a: Buffer,
    /// gather-add only: `b[]` then `ix[]`, in one mapping.
    bix: Option<Buffer>,
    /// Elements touched per pass.
    n: usize,
    x: u64,
    pos: usize,
}

impl Kernel {
    /// Maps the buffers for `pattern` in `bytes` total, untouched, so the
    /// caller can set memory policy and THP advice first.
    pub fn map(pattern: Pattern, bytes: usize) -> std::io::Result<Kernel> {
        let (a, bix, n) = match pattern {
            Pattern::GatherAdd => {
                let n = pattern.accesses_per_pass(bytes as u64) as usize;
                (Buffer::map(n * 8)?, Some(Buffer::map(n * 16)?), n)
            }
            _ => {
                let a = Buffer::map(bytes)?;
                let n = a.words();
                (a, None, n)
            }
        };
        Ok(Kernel {
            pattern,
            a,
            bix,
            n,
            x: SEED,
            pos: 0,
        })
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }
    /// Accesses in one pass of the inner loop.
    pub fn accesses_per_pass(&self) -> usize {
        self.n
    }
    /// The mappings, for memory policy, THP advice and page read-back.
    pub fn buffers(&self) -> Vec<&Buffer> {
        std::iter::once(&self.a).chain(self.bix.as_ref()).collect()
    }
    pub fn total_bytes(&self) -> usize {
        self.buffers().iter().map(|b| b.bytes()).sum()
    }

    /// The untimed warm-up: writes every word once (first touch, under the
    /// memory policy already set) and builds `ix[]` or the permutation.
    pub fn warm_up(&mut self) {
        let n = self.n;
        match self.pattern {
            Pattern::RandRw | Pattern::SeqRw => {
                for (i, w) in self.a.as_mut_slice().iter_mut().enumerate() {
                    *w = i as u64;
                }
            }
            Pattern::GatherAdd => {
                for (i, w) in self.a.as_mut_slice().iter_mut().enumerate() {
                    *w = i as u64;
                }
                let mut x = SEED;
                let bix = self
                    .bix
                    .as_mut()
                    .expect("gather-add has b and ix")
                    .as_mut_slice();
                let (b, ix) = bix.split_at_mut(n);
                for i in 0..n {
                    b[i] = i as u64 & 0xff;
                    ix[i] = reduce(xorshift(&mut x), n) as u64;
                }
            }
            Pattern::Chase => {
                let a = self.a.as_mut_slice();
                for (i, w) in a.iter_mut().enumerate() {
                    *w = i as u64;
                }
                // Sattolo: a single cycle through every element.
                let mut x = SEED;
                for i in (1..n).rev() {
                    let j = reduce(xorshift(&mut x), i);
                    a.swap(i, j);
                }
            }
        }
        self.x = SEED;
        self.pos = 0;
    }

    /// Runs `count` accesses and returns a value depending on all of them.
    #[inline]
    pub fn run(&mut self, count: usize) -> u64 {
        match self.pattern {
            Pattern::RandRw if self.n.is_power_of_two() => self.rand_rw::<true>(count),
            Pattern::RandRw => self.rand_rw::<false>(count),
            Pattern::SeqRw => self.seq_rw(count),
            Pattern::GatherAdd => self.gather_add(count),
            Pattern::Chase => self.chase(count),
        }
    }

    #[inline(never)]
    fn rand_rw<const POW2: bool>(&mut self, count: usize) -> u64 {
        let p = self.a.as_mut_slice().as_mut_ptr();
        let (n, mask) = (self.n, self.n as u64 - 1);
        let mut x = self.x;
        let mut sum = 0u64;
        for _ in 0..count {
            let r = xorshift(&mut x);
            let j = if POW2 {
                (r & mask) as usize
            } else {
                reduce(r, n)
            };
            // SAFETY: j < n (masked to a power of two n, or reduced into
            // 0..n), and p points at n initialised words.
            unsafe {
                let v = *p.add(j);
                *p.add(j) = v.wrapping_add(1);
                sum = sum.wrapping_add(v);
            }
        }
        self.x = x;
        sum
    }

    #[inline(never)]
    fn seq_rw(&mut self, count: usize) -> u64 {
        let a = self.a.as_mut_slice();
        let mut sum = 0u64;
        let mut left = count;
        while left > 0 {
            let end = (self.pos + left).min(a.len());
            for w in &mut a[self.pos..end] {
                let v = *w;
                *w = v.wrapping_add(1);
                sum = sum.wrapping_add(v);
            }
            left -= end - self.pos;
            self.pos = if end == a.len() { 0 } else { end };
        }
        sum
    }

    #[inline(never)]
    fn gather_add(&mut self, count: usize) -> u64 {
        let n = self.n;
        let a = self.a.as_mut_slice().as_mut_ptr();
        let bix = self
            .bix
            .as_ref()
            .expect("gather-add has b and ix")
            .as_slice();
        let (b, ix) = bix.split_at(n);
        let mut i = self.pos;
        for _ in 0..count {
            let k = ix[i] as usize;
            // SAFETY: every ix[] entry was reduced into 0..n in warm_up.
            unsafe {
                *a.add(k) = (*a.add(k)).wrapping_add(b[i]);
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        self.pos = i;
        // SAFETY: pos < n.
        unsafe { *a.add(self.pos) }
    }

    #[inline(never)]
    fn chase(&mut self, count: usize) -> u64 {
        let a = self.a.as_slice().as_ptr();
        let mut p = self.pos;
        for _ in 0..count {
            // SAFETY: the array is a permutation of 0..n built in warm_up.
            p = unsafe { *a.add(p) } as usize;
        }
        self.pos = p;
        p as u64
    }
}

/// Lemire's multiply-shift: maps a uniform u64 onto 0..n without division.
#[inline(always)]
fn reduce(r: u64, n: usize) -> usize {
    ((r as u128 * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_visits_every_element_once_per_pass() {
        let mut k = Kernel::map(Pattern::Chase, 8 * 1000).unwrap();
        k.warm_up();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            seen.insert(k.run(1));
        }
        assert_eq!(seen.len(), 1000);
        assert_eq!(k.run(0), 0, "after one full cycle we are back at 0");
    }

    #[test]
    fn rand_rw_writes_exactly_one_increment_per_access() {
        for words in [1024usize, 1000] {
            let mut k = Kernel::map(Pattern::RandRw, words * 8).unwrap();
            k.warm_up();
            let before: u64 = k.a.as_slice().iter().sum();
            k.run(5000);
            let after: u64 = k.a.as_slice().iter().sum();
            assert_eq!(after - before, 5000, "words {words}");
        }
    }

    #[test]
    fn rand_rw_index_stream_matches_refprobe() {
        // refprobe.c: same seed, same xorshift64* step, index = r & mask.
        let mut x = SEED;
        let r = xorshift(&mut x);
        let mut cx: u64 = 0x9E3779B97F4A7C15;
        cx ^= cx >> 12;
        cx ^= cx << 25;
        cx ^= cx >> 27;
        assert_eq!(r, cx.wrapping_mul(0x2545F4914F6CDD1D));
    }

    #[test]
    fn seq_and_gather_touch_the_expected_amount() {
        let mut k = Kernel::map(Pattern::SeqRw, 8 * 100).unwrap();
        k.warm_up();
        k.run(250);
        let s: u64 = k.a.as_slice().iter().sum();
        assert_eq!(s, (0..100).sum::<u64>() + 250);

        let mut g = Kernel::map(Pattern::GatherAdd, 24 * 64).unwrap();
        g.warm_up();
        let before: u64 = g.a.as_slice().iter().sum();
        g.run(64);
        let after: u64 = g.a.as_slice().iter().sum();
        let b: u64 = (0..64u64).map(|i| i & 0xff).sum();
        assert_eq!(after - before, b);
    }
}
