//! What a move costs the probe in cache hits, and when it pays it.
//!
//! A move leaves caches cold: the L2 on a move to another core, the LLC
//! too on a move to another LLC. The probe then misses where it would have
//! hit until it has refilled them, and it pays for those misses as it makes
//! them, not at the move. So a probe moved again before its caches were
//! warm pays only for the misses it made, and can never owe more than the
//! accesses it did (until model 7 the run engine charged the whole
//! refill at every move, and a probe moved between LLCs faster than it
//! refilled them owed more time than it ran and never finished).
//!
//! The count, for a random walk over a buffer of W lines and a cache of C
//! lines (h = C/W of the buffer, at most 1): after x·W accesses into a cold
//! cache it holds W(1 - e^-x) lines, until it is full at x* = -ln(1 - h).
//! The hits lost by then are W ∫ (h - content/W) dx = W·G(h, x) with
//!
//!   G(h, x) = (h - 1)x + 1 - e^-x           for x < x*,
//!   G(h, x*) = h + (1 - h) ln(1 - h)        from there on (W when h = 1),
//!
//! about C·h/2 for a buffer much bigger than the cache. Each lost L2 hit
//! costs the LLC's latency over the L2's, each lost LLC hit DRAM's over the
//! LLC's (a line that misses both pays both steps), scaled by the share of
//! a miss the loop exposes (`memory.exposed`), as [`Profile::access_ns`]
//! scales it.

use super::profile::LINE;
use super::Profile;
use crate::topology::Relation;

/// The two caches a move can leave cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    L2,
    Llc,
}

impl Level {
    fn index(self) -> usize {
        self as usize
    }
}

/// Which caches a move at `rel` leaves cold: (L2, LLC). SMT siblings share
/// both.
pub fn cools(rel: Relation) -> (bool, bool) {
    match rel {
        Relation::SameCpu | Relation::SameCore | Relation::Unknown => (false, false),
        Relation::SameLlc => (true, false),
        Relation::SameNode | Relation::CrossNode => (true, true),
    }
}

/// G(h, x) above: the hits lost, per line of the buffer, after x buffers'
/// worth of accesses into a cold cache holding a share h of it.
fn lost_share(h: f64, x: f64) -> f64 {
    if h <= 0.0 || x <= 0.0 {
        return 0.0;
    }
    // -expm1(-x) = 1 - e^-x without cancellation at small x.
    let filled = -(-x).exp_m1();
    if h >= 1.0 {
        return filled;
    }
    let full_at = -(-h).ln_1p();
    if x >= full_at {
        h + (1.0 - h) * (-h).ln_1p()
    } else {
        filled - (1.0 - h) * x
    }
}

impl Profile {
    /// The buffer's lines and the share of it `level` holds when warm.
    fn level_share(&self, level: Level, ws: u64) -> (f64, f64) {
        let (h2, hl) = self.hits(ws);
        let w = (ws as f64 / LINE).max(1.0);
        match level {
            Level::L2 => (w, h2),
            Level::Llc => (w, hl),
        }
    }

    /// What one lost hit in `level` costs, ns.
    fn lost_hit_ns(&self, level: Level, dram: f64) -> f64 {
        let step = match level {
            Level::L2 => self.caches.llc_ns - self.caches.l2_ns,
            Level::Llc => dram - self.caches.llc_ns,
        };
        self.memory.exposed * step.max(0.0)
    }

    /// The misses a cold `level` has cost a probe over a buffer of `ws`
    /// bytes (DRAM at `dram` ns) after `lines` accesses, ns.
    pub fn refill_so_far_ns(&self, level: Level, ws: u64, dram: f64, lines: f64) -> f64 {
        let (w, h) = self.level_share(level, ws);
        self.lost_hit_ns(level, dram) * w * lost_share(h, lines / w)
    }

    /// The accesses after which a cold `level` is as warm as it gets (its
    /// cost no longer grows by a billionth).
    fn warm_after(&self, level: Level, ws: u64) -> f64 {
        let (w, h) = self.level_share(level, ws);
        if h >= 1.0 {
            w * 21.0 // e^-21 < 1e-9
        } else {
            w * -(-h).ln_1p()
        }
    }

    /// A move's whole cost in lost hits, ns: what the caches it leaves
    /// cold cost until they are warm again, when the probe stays that long.
    pub fn refill_ns(&self, rel: Relation, ws: u64, dram: f64) -> f64 {
        let (l2, llc) = cools(rel);
        let whole = |level| self.refill_so_far_ns(level, ws, dram, f64::INFINITY);
        let mut ns = 0.0;
        if l2 {
            ns += whole(Level::L2);
        }
        if llc {
            ns += whole(Level::Llc);
        }
        ns
    }
}

/// A cold level: the lines the probe had touched when a move left it cold,
/// and what its misses have been charged since, ns.
#[derive(Debug, Clone, Copy)]
struct Stay {
    at: f64,
    charged_ns: f64,
}

/// One probe's caches: how many lines it has touched, which levels a move
/// left cold and when, and the time it owes (refills, faults) but has not
/// run yet, which touches no lines.
#[derive(Debug, Clone, Default)]
pub struct ColdCaches {
    touched: f64,
    debt: f64,
    cold: [Option<Stay>; 2],
}

/// Cache lines a unit of the probe's work touches: a page of `page_bytes`
/// (4 KiB at least) in the warm-up, one line per access in the loop.
pub fn lines_per_unit(warm_up: bool, page_bytes: u64) -> f64 {
    if warm_up {
        page_bytes.max(4096) as f64 / LINE
    } else {
        1.0
    }
}

impl ColdCaches {
    /// `work` units done, `lines` touched per unit
    /// ([`lines_per_unit`]): what is owed is run first, the rest touches
    /// lines.
    pub fn advance(&mut self, work: f64, lines: f64) {
        let paid = work.clamp(0.0, self.debt);
        self.debt -= paid;
        self.touched += (work - paid).max(0.0) * lines;
    }

    /// `units` of work owed (charged to the probe's work as well).
    pub fn owe(&mut self, units: f64) {
        self.debt += units.max(0.0);
    }

    /// A move at `rel`: the levels it leaves cold start refilling now.
    pub fn cool(&mut self, rel: Relation) {
        let (l2, llc) = cools(rel);
        for (level, cold) in [(Level::L2, l2), (Level::Llc, llc)] {
            if cold {
                self.cold[level.index()] = Some(Stay {
                    at: self.touched,
                    charged_ns: 0.0,
                });
            }
        }
    }

    /// The misses the cold levels have cost since last asked, ns; a level
    /// warm again is forgotten.
    pub fn accrue(&mut self, p: &Profile, ws: u64, dram: f64) -> f64 {
        let mut add = 0.0;
        for level in [Level::L2, Level::Llc] {
            let Some(stay) = &mut self.cold[level.index()] else {
                continue;
            };
            let lines = self.touched - stay.at;
            let owed = p.refill_so_far_ns(level, ws, dram, lines);
            add += (owed - stay.charged_ns).max(0.0);
            stay.charged_ns = stay.charged_ns.max(owed);
            if lines >= p.warm_after(level, ws) {
                self.cold[level.index()] = None;
            }
        }
        add
    }

    /// The warm-up's end: its first touches hit nothing whatever the
    /// caches held, so what they would have cost is not owed; the lines
    /// they touched count towards warming the caches for the loop.
    pub fn forgive(&mut self, p: &Profile, ws: u64, dram: f64) {
        self.accrue(p, ws, dram);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xeon() -> Profile {
        Profile::load("xeon-8167m").unwrap()
    }

    #[test]
    fn the_lost_share_is_continuous_and_saturates_where_the_cache_is_full() {
        for h in [0.01, 0.3, 0.55, 0.9, 0.999] {
            let full_at = -(1.0f64 - h).ln();
            let below = lost_share(h, full_at * (1.0 - 1e-9));
            let whole = lost_share(h, full_at);
            assert!((below - whole).abs() < 1e-8, "h {h}: {below} {whole}");
            assert_eq!(lost_share(h, full_at * 3.0), whole);
            // Never more than the hits the cache would have given: h per
            // access, and never more than the cache's lines.
            for x in [1e-6, 0.01, 0.1, full_at / 2.0] {
                assert!(lost_share(h, x) <= h * x + 1e-12, "h {h} x {x}");
            }
            assert!(whole <= h + 1e-12);
        }
        // A buffer much bigger than the cache: about C·h/2 lines lost.
        let h = 1e-3;
        assert!((lost_share(h, 1.0) / (h * h / 2.0) - 1.0).abs() < 1e-3);
        // A buffer the cache holds whole: each line once.
        assert!((lost_share(1.0, 40.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_whole_refill_grows_with_level_and_shrinks_for_huge_buffers() {
        let p = xeon();
        let ws = 256 << 20;
        let d = p.dram_ns(10);
        let core = p.refill_ns(Relation::SameCore, ws, d);
        let llc = p.refill_ns(Relation::SameLlc, ws, d);
        let node = p.refill_ns(Relation::SameNode, ws, d);
        assert_eq!(core, 0.0);
        assert!(llc > 0.0 && node > llc);
        assert!(p.refill_ns(Relation::SameNode, 16 << 30, d) < node);
        // A buffer the LLC holds loses each of its own lines once, not the
        // LLC's: 4 MiB of lines, not 35.75 MiB.
        let small = 4 << 20;
        let lines = small as f64 / 64.0;
        let h2 = p.caches.l2_bytes as f64 / small as f64;
        let l2_lost = h2 + (1.0 - h2) * (1.0 - h2).ln();
        let want = p.memory.exposed
            * lines
            * ((p.caches.llc_ns - p.caches.l2_ns) * l2_lost + (d - p.caches.llc_ns));
        let got = p.refill_ns(Relation::CrossNode, small, d);
        assert!((got / want - 1.0).abs() < 0.02, "{got} vs {want}");
    }

    /// The runaway of model 6: a probe moved between LLCs faster than it
    /// refills them pays only for the misses it made, never more than
    /// every access missing to DRAM.
    #[test]
    fn moves_faster_than_the_refill_cost_only_the_misses_made() {
        let p = xeon();
        let (ws, d) = (32 << 20, p.dram_ns(10));
        let mut c = ColdCaches::default();
        let (mut charged, per_stay) = (0.0, 1000.0);
        for _ in 0..1000 {
            c.cool(Relation::CrossNode);
            c.advance(per_stay, 1.0);
            charged += c.accrue(&p, ws, d);
        }
        let worst = 1000.0 * per_stay * p.memory.exposed * (d - p.caches.l2_ns);
        assert!(charged > 0.0 && charged <= worst, "{charged} > {worst}");
        assert!(charged < 1000.0 * p.refill_ns(Relation::CrossNode, ws, d) / 100.0);
    }

    /// Paid as it goes, a stay long enough pays the whole refill, once.
    #[test]
    fn a_long_stay_pays_the_whole_refill_once_and_debt_touches_nothing() {
        let p = xeon();
        let (ws, d) = (66 << 20, p.dram_ns(21));
        let mut c = ColdCaches::default();
        c.cool(Relation::CrossNode);
        let mut charged = 0.0;
        for _ in 0..400 {
            c.advance(10_000.0, 1.0);
            charged += c.accrue(&p, ws, d);
        }
        let whole = p.refill_ns(Relation::CrossNode, ws, d);
        assert!((charged / whole - 1.0).abs() < 1e-9, "{charged} vs {whole}");
        assert_eq!(c.accrue(&p, ws, d), 0.0);
        // Owed work runs before any line is touched.
        c.cool(Relation::SameLlc);
        c.owe(500.0);
        c.advance(400.0, 1.0);
        assert_eq!(c.accrue(&p, ws, d), 0.0);
        c.advance(200.0, 1.0);
        assert!(c.accrue(&p, ws, d) > 0.0);
        // A move within the core leaves nothing cold.
        let mut s = ColdCaches::default();
        s.cool(Relation::SameCore);
        s.advance(1e6, 1.0);
        assert_eq!(s.accrue(&p, ws, d), 0.0);
    }
}
