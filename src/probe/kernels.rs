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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// The mappings of one pattern: `a` (the permutation for chase), and for
/// gather-add `b[]` then `ix[]` in a second mapping.
pub struct Arrays {
    pattern: Pattern,
    a: Buffer,
    bix: Option<Buffer>,
    /// Elements: a[]'s words (b[]'s and ix[]'s for gather-add).
    n: usize,
}

impl Arrays {
    /// Maps the arrays for `pattern` in `bytes` total, untouched, so the
    /// caller can set memory policy and THP advice first; each mapping
    /// starts at and spans a multiple of `align` (a page, or the huge page
    /// size for buffers of their own: see [`Buffer::map_aligned`]).
    pub fn map(pattern: Pattern, bytes: usize, align: usize) -> std::io::Result<Arrays> {
        Arrays::map_with(pattern, bytes, |b| {
            if align <= 4096 {
                Buffer::map(b)
            } else {
                Buffer::map_aligned(b, align)
            }
        })
    }

    /// As [`map`](Arrays::map), in shared memory (shmem) that processes
    /// forked afterwards share.
    pub fn map_shmem(pattern: Pattern, bytes: usize) -> std::io::Result<Arrays> {
        Arrays::map_with(pattern, bytes, Buffer::map_shmem)
    }

    fn map_with(
        pattern: Pattern,
        bytes: usize,
        map: impl Fn(usize) -> std::io::Result<Buffer>,
    ) -> std::io::Result<Arrays> {
        let n = pattern.accesses_per_pass(bytes as u64) as usize;
        let (a, bix) = match pattern {
            Pattern::GatherAdd => (map(n * 8)?, Some(map(n * 16)?)),
            _ => (map(n * 8)?, None),
        };
        Ok(Arrays { pattern, a, bix, n })
    }

    /// The mappings, for memory policy, THP advice and page read-back.
    pub fn buffers(&self) -> Vec<&Buffer> {
        std::iter::once(&self.a).chain(self.bix.as_ref()).collect()
    }

    /// The (address, bytes) ranges the pattern uses, for page read-back
    /// (an aligned mapping's tail past them is never touched).
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        let mut r = vec![(self.a.addr(), self.n * 8)];
        if let Some(m) = &self.bix {
            r.push((m.addr(), self.n * 16));
        }
        r
    }

    /// The untimed first touch: writes every word the pattern uses (under
    /// the memory policy already set) and builds `ix[]` or the permutation.
    pub fn init(&mut self) {
        let n = self.n;
        let a = &mut self.a.as_mut_slice()[..n];
        for (i, w) in a.iter_mut().enumerate() {
            *w = i as u64;
        }
        match self.pattern {
            Pattern::RandRw | Pattern::SeqRw => {}
            Pattern::GatherAdd => {
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
                // Sattolo: a single cycle through every element.
                let mut x = SEED;
                for i in (1..n).rev() {
                    let j = reduce(xorshift(&mut x), i);
                    a.swap(i, j);
                }
            }
        }
    }
}

/// Arrays that several threads' kernels work on at once, after one
/// [`Arrays::init`] by the thread that built them.
pub struct SharedArrays(Arrays);

// SAFETY: once shared, the words are reached only through the kernels'
// raw pointers with relaxed atomic loads and stores (`Relaxed` below), so
// threads touching the same word is no data race; the mappings live as
// long as the last Arc.
unsafe impl Sync for SharedArrays {}
// SAFETY: as above; the mappings are plain memory, owned by no thread.
unsafe impl Send for SharedArrays {}

impl SharedArrays {
    pub fn new(arrays: Arrays) -> SharedArrays {
        SharedArrays(arrays)
    }
    /// The ranges, for page read-back; never the buffers themselves, whose
    /// safe slices would alias the other threads' atomic writes.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        self.0.ranges()
    }
    /// Elements of a pass over the whole arrays.
    pub fn accesses_per_pass(&self) -> usize {
        self.0.n
    }
}

/// Who else may touch the kernel's words.
enum Words {
    Own(Arrays),
    Shared(Arc<SharedArrays>),
}

/// One thread's kernel: its arrays (its own, or shared) and its position.
pub struct Kernel {
    pattern: Pattern,
    words: Words,
    a: *mut u64,
    /// gather-add: b[] (the first `n` words of the second mapping) and ix[].
    b: *const u64,
    ix: *const u64,
    n: usize,
    x: u64,
    pos: usize,
    start: (u64, usize),
}

// SAFETY: the kernel's pointers are into mappings it owns (`Words::Own`,
// moved with it) or shares through an Arc and reaches only atomically.
unsafe impl Send for Kernel {}

/// The generator state and start position of thread `index` of `of`: the
/// classic single probe's for index 0; further threads start elsewhere
/// in the arrays and draw other random indexes, so threads on one array
/// do not walk it in lockstep.
fn start_of(index: usize, of: usize, n: usize) -> (u64, usize) {
    let x = if index == 0 {
        SEED
    } else {
        SEED.wrapping_add((index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)) | 1
    };
    (x, (index as u128 * n as u128 / of.max(1) as u128) as usize)
}

impl Kernel {
    /// A kernel over arrays of its own, mapped for `bytes` and untouched,
    /// so the caller can set memory policy and THP advice first.
    pub fn map(pattern: Pattern, bytes: usize) -> std::io::Result<Kernel> {
        Ok(Kernel::own(Arrays::map(pattern, bytes, 4096)?, 0, 1))
    }

    /// A kernel over `arrays`, mapped and not yet touched, as thread `index`
    /// of `of`: [`warm_up`](Kernel::warm_up) touches them first.
    pub fn own(arrays: Arrays, index: usize, of: usize) -> Kernel {
        let start = start_of(index, of, arrays.n);
        Kernel::new(Words::Own(arrays), start)
    }

    /// Thread `index` of `of` on arrays every thread shares (initialised).
    pub fn share(arrays: &Arc<SharedArrays>, index: usize, of: usize) -> Kernel {
        let start = start_of(index, of, arrays.0.n);
        Kernel::new(Words::Shared(arrays.clone()), start)
    }

    fn new(words: Words, start: (u64, usize)) -> Kernel {
        let arrays = match &words {
            Words::Own(a) => a,
            Words::Shared(s) => &s.0,
        };
        let (b, ix) = match &arrays.bix {
            Some(m) => {
                let p = m.as_ptr() as *const u64;
                // SAFETY: the second mapping holds 2n words: b[] then ix[].
                (p, unsafe { p.add(arrays.n) })
            }
            None => (std::ptr::null(), std::ptr::null()),
        };
        Kernel {
            pattern: arrays.pattern,
            a: arrays.a.as_ptr(),
            b,
            ix,
            n: arrays.n,
            x: start.0,
            pos: start.1,
            start,
            words,
        }
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }
    /// Accesses in one pass of the inner loop.
    pub fn accesses_per_pass(&self) -> usize {
        self.n
    }
    /// The mappings of arrays of its own, for memory policy, THP advice
    /// and page read-back; none for shared ones (see
    /// [`SharedArrays::ranges`]).
    pub fn buffers(&self) -> Vec<&Buffer> {
        match &self.words {
            Words::Own(a) => a.buffers(),
            Words::Shared(_) => Vec::new(),
        }
    }
    /// The (address, bytes) ranges the kernel's accesses cover.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        match &self.words {
            Words::Own(a) => a.ranges(),
            Words::Shared(s) => s.ranges(),
        }
    }
    pub fn total_bytes(&self) -> usize {
        self.buffers().iter().map(|b| b.bytes()).sum()
    }

    /// The untimed warm-up of arrays of its own (first touch, under the
    /// memory policy already set); shared arrays were initialised by the
    /// thread that built them.
    pub fn warm_up(&mut self) {
        if let Words::Own(a) = &mut self.words {
            a.init();
        }
        (self.x, self.pos) = self.start;
    }

    /// Runs `count` accesses and returns a value depending on all of them.
    #[inline]
    pub fn run(&mut self, count: usize) -> u64 {
        if matches!(self.words, Words::Shared(_)) {
            self.run_with::<Relaxed>(count)
        } else {
            self.run_with::<Plain>(count)
        }
    }

    #[inline(always)]
    fn run_with<A: Access>(&mut self, count: usize) -> u64 {
        match self.pattern {
            Pattern::RandRw if self.n.is_power_of_two() => self.rand_rw::<A, true>(count),
            Pattern::RandRw => self.rand_rw::<A, false>(count),
            Pattern::SeqRw => self.seq_rw::<A>(count),
            Pattern::GatherAdd => self.gather_add::<A>(count),
            Pattern::Chase => self.chase::<A>(count),
        }
    }

    #[inline(never)]
    fn rand_rw<A: Access, const POW2: bool>(&mut self, count: usize) -> u64 {
        let p = self.a;
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
                let v = A::load(p.add(j));
                A::store(p.add(j), v.wrapping_add(1));
                sum = sum.wrapping_add(v);
            }
        }
        self.x = x;
        sum
    }

    #[inline(never)]
    fn seq_rw<A: Access>(&mut self, count: usize) -> u64 {
        let (p, n) = (self.a, self.n);
        let mut sum = 0u64;
        let mut left = count;
        while left > 0 {
            let end = (self.pos + left).min(n);
            for i in self.pos..end {
                // SAFETY: i < end <= n words.
                unsafe {
                    let v = A::load(p.add(i));
                    A::store(p.add(i), v.wrapping_add(1));
                    sum = sum.wrapping_add(v);
                }
            }
            left -= end - self.pos;
            self.pos = if end == n { 0 } else { end };
        }
        sum
    }

    #[inline(never)]
    fn gather_add<A: Access>(&mut self, count: usize) -> u64 {
        let (n, a, b, ix) = (self.n, self.a, self.b, self.ix);
        let mut i = self.pos;
        for _ in 0..count {
            // SAFETY: i < n, b[] and ix[] hold n words each, and every ix[]
            // entry was reduced into 0..n by Arrays::init.
            unsafe {
                let k = A::load(ix.add(i)) as usize;
                let v = A::load(a.add(k));
                A::store(a.add(k), v.wrapping_add(A::load(b.add(i))));
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        self.pos = i;
        // SAFETY: pos < n.
        unsafe { A::load(a.add(self.pos)) }
    }

    #[inline(never)]
    fn chase<A: Access>(&mut self, count: usize) -> u64 {
        let a = self.a;
        let mut p = self.pos;
        for _ in 0..count {
            // SAFETY: the array is a permutation of 0..n built by init.
            p = unsafe { A::load(a.add(p)) } as usize;
        }
        self.pos = p;
        p as u64
    }

    /// The words of `a[]`, for tests.
    #[cfg(test)]
    fn a_words(&self) -> Vec<u64> {
        // SAFETY: n initialised words; tests run no other thread on them.
        (0..self.n)
            .map(|i| unsafe { Relaxed::load(self.a.add(i)) })
            .collect()
    }
}

/// How a kernel reads and writes a word: plainly when the words are its
/// own, with relaxed atomics when other threads may touch the same word
/// at once (on x86-64 the same `mov`s; what changes is that the compiler
/// may no longer vectorise or merge them, and that it is not a data race).
trait Access {
    /// # Safety
    /// `p` points at a live, aligned word.
    unsafe fn load(p: *const u64) -> u64;
    /// # Safety
    /// As for `load`, and writable.
    unsafe fn store(p: *mut u64, v: u64);
}

struct Plain;
struct Relaxed;

impl Access for Plain {
    #[inline(always)]
    unsafe fn load(p: *const u64) -> u64 {
        // SAFETY: the caller's contract; the words are this kernel's alone.
        unsafe { p.read() }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u64, v: u64) {
        // SAFETY: as above.
        unsafe { p.write(v) }
    }
}

impl Access for Relaxed {
    #[inline(always)]
    unsafe fn load(p: *const u64) -> u64 {
        // SAFETY: the caller's contract; every access to shared words is
        // atomic, so this is no data race.
        unsafe { AtomicU64::from_ptr(p as *mut u64).load(Ordering::Relaxed) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u64, v: u64) {
        // SAFETY: as above.
        unsafe { AtomicU64::from_ptr(p).store(v, Ordering::Relaxed) }
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
            let before: u64 = k.a_words().iter().sum();
            k.run(5000);
            let after: u64 = k.a_words().iter().sum();
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
        let s: u64 = k.a_words().iter().sum();
        assert_eq!(s, (0..100).sum::<u64>() + 250);

        let mut g = Kernel::map(Pattern::GatherAdd, 24 * 64).unwrap();
        g.warm_up();
        let before: u64 = g.a_words().iter().sum();
        g.run(64);
        let after: u64 = g.a_words().iter().sum();
        let b: u64 = (0..64u64).map(|i| i & 0xff).sum();
        assert_eq!(after - before, b);
    }

    /// Threads on shared arrays: every access of every thread lands (the
    /// relaxed stores are racy in value, as the workload means them to be,
    /// so only a lower bound on the increments holds), and each thread
    /// starts at its own place.
    #[test]
    fn threads_share_arrays_and_start_apart() {
        let mut arrays = Arrays::map(Pattern::SeqRw, 8 * 4096, 4096).unwrap();
        arrays.init();
        let shared = Arc::new(SharedArrays::new(arrays));
        let ks: Vec<Kernel> = (0..4).map(|i| Kernel::share(&shared, i, 4)).collect();
        assert_eq!(
            ks.iter().map(|k| k.pos).collect::<Vec<_>>(),
            vec![0, 1024, 2048, 3072]
        );
        assert_eq!(ks[0].x, SEED, "thread 0 is the classic probe");
        let before: u64 = ks[0].a_words().iter().sum();
        std::thread::scope(|s| {
            for mut k in ks {
                s.spawn(move || k.run(1024));
            }
        });
        let k = Kernel::share(&shared, 0, 1);
        let after: u64 = k.a_words().iter().sum();
        // Four disjoint quarters: no two threads wrote one word.
        assert_eq!(after - before, 4096);
    }

    #[test]
    fn aligned_arrays_span_whole_huge_pages() {
        let a = Arrays::map(Pattern::RandRw, 3 << 20, 2 << 20).unwrap();
        let b = a.buffers()[0];
        assert_eq!(b.addr() % (2 << 20), 0);
        assert_eq!(b.bytes(), 4 << 20);
        let k = Kernel::own(a, 0, 1);
        assert_eq!(
            k.accesses_per_pass(),
            (3 << 20) / 8,
            "passes cover the asked bytes"
        );
    }
}
