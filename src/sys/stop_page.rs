//! A stop flag threads can sleep on: one word on an anonymous page of its
//! own, set with a futex(2) wake and slept on with a futex wait.
//!
//! Why not `Arc<AtomicBool>` and `park_timeout`: both keep their state on
//! the process heap, and NUMA balancing scans the heap with the policy of
//! whichever thread of the process runs `task_numa_work()`. A `numalab load`
//! worker under `--policy local` must take no hinting faults at all (its
//! MPOL_LOCAL is not migrate-on-fault), but a worker that polls a heap word
//! faults whenever a default-policy thread (the load's or the run's main
//! thread) has scanned that page. On a page of its own the flag can carry
//! its own memory policy (`mbind` before the first touch), which decides
//! for NUMA balancing whoever scans. std has no futex; rustix's safe
//! `futex::{wait, wake}` make the two calls.

use super::buffer::Buffer;
use super::numa::{self, Policy};
use rustix::thread::futex;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// The page; the flag is [`StopPage::flag`]. Unmapped on drop (by its
/// [`Buffer`]), so holders share it through an `Arc` that each worker keeps
/// until it returns.
pub struct StopPage {
    /// One page, reached only through [`StopPage::flag`]: never as a slice,
    /// so no plain read races with the atomic stores.
    page: Buffer,
}

// SAFETY: the page is only reached through the AtomicU32 at its start,
// which is Sync; the Buffer is private and owns the mapping for as long as
// the value lives.
unsafe impl Sync for StopPage {}

impl StopPage {
    /// Maps the page, applies `policy` to it if given, then touches it
    /// (the flag starts clear).
    pub fn map(policy: Option<&Policy>) -> io::Result<StopPage> {
        let page = Buffer::map(numa::page_size())?;
        if let Some(policy) = policy {
            numa::mbind(page.addr(), page.bytes(), policy)?;
        }
        let page = StopPage { page };
        page.flag().0.store(0, Ordering::Relaxed);
        Ok(page)
    }

    /// The flag itself: a reference into the page, to keep on the stack so
    /// reading it touches the page and nothing else.
    pub fn flag(&self) -> StopFlag<'_> {
        // SAFETY: the mapping is page aligned (aligned enough for an
        // AtomicU32), readable and writable, zero-filled (a valid, clear
        // AtomicU32) and lives as long as `self`; nothing reaches its first
        // word but through this atomic (see `page`).
        StopFlag(unsafe { &*(self.page.addr() as *const AtomicU32) })
    }
}

/// The stop flag of a [`StopPage`].
#[derive(Clone, Copy)]
pub struct StopFlag<'a>(&'a AtomicU32);

impl StopFlag<'_> {
    pub fn is_set(self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// Sets the flag and wakes every thread sleeping on it.
    pub fn set(self) {
        self.0.store(1, Ordering::Release);
        // Wakes every sleeper (i32::MAX is the kernel's "all").
        let _ = futex::wake(self.0, futex::Flags::PRIVATE, i32::MAX as u32);
    }

    /// Sleeps until `t`, or less if the flag is or gets set.
    pub fn sleep_until(self, t: Instant) {
        while !self.is_set() {
            let d = match t.checked_duration_since(Instant::now()) {
                Some(d) if !d.is_zero() => d,
                _ => return,
            };
            let ts = futex::Timespec {
                tv_sec: d.as_secs() as futex::Secs,
                tv_nsec: d.subsec_nanos() as futex::Nsecs,
            };
            // FUTEX_WAIT sleeps only while the word is still 0 (a set racing
            // with it returns EAGAIN) and wakes on FUTEX_WAKE, a signal or
            // the timeout, all of which the loop re-checks.
            let _ = futex::wait(self.0, futex::Flags::PRIVATE, 0, Some(&ts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn set_wakes_a_sleeper_long_before_its_deadline() {
        let page = Arc::new(StopPage::map(None).unwrap());
        let p = page.clone();
        let t0 = Instant::now();
        let sleeper = std::thread::spawn(move || {
            p.flag()
                .sleep_until(Instant::now() + Duration::from_secs(60));
            p.flag().is_set()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!page.flag().is_set());
        page.flag().set();
        assert!(sleeper.join().unwrap(), "woke with the flag clear");
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_clear_flag_sleeps_to_the_deadline() {
        let page = StopPage::map(Some(&Policy::Local)).unwrap();
        let t0 = Instant::now();
        page.flag().sleep_until(t0 + Duration::from_millis(30));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert!(!page.flag().is_set());
    }
}
