//! Self-observation: the probe notes its own CPU between chunks of accesses
//! and records every change with its time. The check is one `sched_getcpu()`
//! (glibc reads the CPU from the rseq area) and a compare; the clock is read
//! only when the CPU changed. A move and a move back within one chunk are
//! invisible to sampling, so the observer also reads the kernel's own count
//! of the task's migrations (`se.nr_migrations` in /proc/self/sched, bumped
//! in set_task_cpu() next to the sched_migrate_task tracepoint) at start
//! and finish: the total is exact, the sampled moves classify most of it,
//! and `numalab trace` classifies every one.

use crate::analysis::{Migration, Segment};
use crate::sys;
use std::time::Instant;

pub struct Observer {
    enabled: bool,
    start: Instant,
    start_mono_ns: u64,
    start_nr_migrations: Option<u64>,
    sched: sys::ProcFile,
    start_cpu: u32,
    last_cpu: u32,
    changes: Vec<Migration>,
}

/// What the observer saw, in nanoseconds since it started.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Observation {
    /// CLOCK_MONOTONIC at the observer's start (tracefs clock `mono`).
    pub start_mono_ns: u64,
    /// Migrations the kernel counted for this task between start and
    /// finish (`se.nr_migrations`); `None` without CONFIG_SCHED_DEBUG.
    pub kernel_migrations: Option<u64>,
    pub start_cpu: u32,
    pub end_cpu: u32,
    pub end_ns: u64,
    pub changes: Vec<Migration>,
    /// The thread's /proc/thread-self/sched at finish (its NUMA state
    /// then); `None` without the file.
    pub final_sched: Option<String>,
}

impl Observer {
    pub fn new(enabled: bool) -> Observer {
        // Clock first, counter second; at finish the reverse: every counted
        // migration then falls inside [start_mono_ns, start_mono_ns + end_ns].
        let start_mono_ns = sys::mono_ns();
        let start = Instant::now();
        // Opened now, read at start and finish without allocating.
        let mut sched = sys::thread_sched_file();
        let start_nr_migrations = sched.read().and_then(sys::nr_migrations_in);
        let cpu = sys::current_cpu();
        Observer {
            enabled,
            start_mono_ns,
            start_nr_migrations,
            sched,
            start,
            start_cpu: cpu,
            last_cpu: cpu,
            // Room up front: growing calls the allocator (see run::timed_loop).
            changes: Vec::with_capacity(1 << 14),
        }
    }

    /// Nanoseconds since the observer started.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    #[inline(always)]
    pub fn check(&mut self) {
        if !self.enabled {
            return;
        }
        let cpu = sys::current_cpu();
        if cpu != self.last_cpu {
            self.record(cpu);
        }
    }

    #[cold]
    #[inline(never)]
    fn record(&mut self, cpu: u32) {
        self.changes.push(Migration {
            t_ns: self.now_ns(),
            from: self.last_cpu,
            to: cpu,
        });
        self.last_cpu = cpu;
    }

    pub fn finish(mut self) -> Observation {
        self.check();
        // Read without allocating (the thread's state at its loop's end,
        // not after a call into the allocator: see run::timed_loop).
        let text = self.sched.read();
        let end_nr = text.and_then(sys::nr_migrations_in);
        let end_ns = self.start.elapsed().as_nanos() as u64;
        let final_sched = text.map(str::to_string);
        Observation {
            start_mono_ns: self.start_mono_ns,
            kernel_migrations: match (self.start_nr_migrations, end_nr) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            start_cpu: self.start_cpu,
            end_cpu: self.last_cpu,
            end_ns,
            changes: self.changes,
            final_sched,
        }
    }
}

impl Observation {
    /// Every CPU the observer saw: the first, and each one moved to.
    pub fn seen_cpus(&self) -> crate::idset::IdSet {
        std::iter::once(self.start_cpu)
            .chain(self.changes.iter().map(|m| m.to))
            .collect()
    }

    /// The changes within `[from_ns, to_ns)`.
    pub fn changes_between(&self, from_ns: u64, to_ns: u64) -> Vec<Migration> {
        self.changes
            .iter()
            .filter(|m| m.t_ns >= from_ns && m.t_ns < to_ns)
            .copied()
            .collect()
    }

    /// Time on each CPU within `[from_ns, to_ns)`, as segments in order.
    pub fn segments_between(&self, from_ns: u64, to_ns: u64) -> Vec<Segment> {
        let mut segs = Vec::new();
        let mut cpu = self.start_cpu;
        let mut t = 0u64;
        for m in self.changes.iter().chain(std::iter::once(&Migration {
            t_ns: self.end_ns.max(to_ns),
            from: u32::MAX,
            to: u32::MAX,
        })) {
            let (lo, hi) = (t.max(from_ns), m.t_ns.min(to_ns));
            if hi > lo {
                segs.push(Segment { cpu, ns: hi - lo });
            }
            t = m.t_ns;
            cpu = m.to;
        }
        segs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_window_exactly() {
        let o = Observation {
            start_mono_ns: 0,
            kernel_migrations: None,
            start_cpu: 1,
            end_cpu: 3,
            end_ns: 100,
            final_sched: None,
            changes: vec![
                Migration {
                    t_ns: 10,
                    from: 1,
                    to: 2,
                },
                Migration {
                    t_ns: 50,
                    from: 2,
                    to: 3,
                },
            ],
        };
        let s = o.segments_between(5, 80);
        let v: Vec<(u32, u64)> = s.iter().map(|s| (s.cpu, s.ns)).collect();
        assert_eq!(v, vec![(1, 5), (2, 40), (3, 30)]);
        assert_eq!(o.changes_between(0, 50).len(), 1);
    }
}
