//! How the one-probe engine moves its probe and what a move costs: the
//! move itself (traced, the caches it leaves cold, enqueued behind a busy
//! CPU's worker), the binding of `--first-touch start` at the loop's
//! start, and the time the probe owes (refills as it makes the misses,
//! faults). A child module of [`super`], so it shares the engine's
//! private state.

use super::{Cause, Engine, IdleStarts, Move, Phase};

impl Engine<'_> {
    /// Time the probe owes (cache refill, faults), as work at today's speed.
    pub(in crate::sim) fn charge_ns(&mut self, ns: f64) {
        let per = match self.phase {
            Phase::WarmUp => 1000.0 / self.p.kernel.touch_pages_per_us,
            Phase::Loop(_) => self.access_ns[self.m.node[self.cur]],
            Phase::Done => return,
        };
        self.work_left += ns / per;
        self.cold.owe(ns / per);
    }

    /// Charges the misses the cold caches have cost since last charged
    /// (in the loop; the warm-up's first touches hit nothing anyway).
    /// Returns the work added.
    pub(super) fn pay_cold(&mut self) -> f64 {
        if !matches!(self.phase, Phase::Loop(_)) {
            return 0.0;
        }
        let dram = self.dram_ns[self.m.node[self.cur]];
        let ns = self.cold.accrue(self.p, self.spec.buffer_bytes, dram);
        let before = self.work_left;
        self.charge_ns(ns);
        self.work_left - before
    }

    /// Moves the probe to CPU `to` at the current time.
    pub fn move_to(&mut self, to: usize, cause: Cause) {
        let from = self.cur;
        if from == to {
            return;
        }
        // The misses made where it was are owed at that node's speed;
        // from here on it refills what the move left cold.
        self.pay_cold();
        self.res.moves.push(Move {
            t_ns: self.t as u64,
            from,
            to,
            cause,
        });
        self.cur = to;
        if cause == Cause::NumaBalancing {
            self.res.move_numa += 1;
        }
        self.cold.cool(self.m.relation(from, to));
        self.imb.moved(self.m, to);
        let busy = self.busy(to, self.t);
        // Enqueued behind the running worker.
        self.set_share(busy.then_some((self.t, 0.0)));
        self.migrated_waiting = busy;
    }

    /// __set_cpus_allowed_ptr off the current CPU: to any of `a`, idle
    /// ones first.
    pub(super) fn bind_move(&mut self, a: &[usize]) {
        let t = self.t;
        let idle_ok: Vec<usize> = a.iter().copied().filter(|&c| !self.busy(c, t)).collect();
        let to = if idle_ok.is_empty() {
            a[self.rng.below(a.len())]
        } else {
            idle_ok[self.rng.below(idle_ok.len())]
        };
        self.move_to(to, Cause::Affinity);
    }

    /// `--first-touch start`: the buffer touched, the probe binds to its
    /// CPUs (moving off the one it is on if it must), at the loop's start.
    pub(super) fn bind_after_touch(&mut self) {
        let a = self.spec.allowed.clone();
        self.allowed = vec![false; self.m.len()];
        a.iter().for_each(|&c| self.allowed[c] = true);
        self.idle_starts = IdleStarts::new(self.load, &a);
        self.next_idle_memo = None;
        if !self.allowed[self.cur] {
            self.bind_move(&a);
        }
        self.res.loop_start_cpu = Some(self.cur);
    }
}
