//! Stopping at a safe point on SIGINT, SIGTERM and SIGHUP.
//!
//! A long command (run, trace, jobs, load) must never die in the middle of a
//! change to system state: the signal only sets a flag, the command notices
//! it at its next poll, puts everything back and exits with the shell's
//! convention, 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM,
//! 129 for a closed terminal or dropped ssh session).

pub use crate::error::Interrupted;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The signals that ask numalab to stop and restore.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Which stop signal arrived, if any (shared with the signal handlers).
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicUsize>);

impl Stop {
    /// A flag nothing sets but [`Stop::raise`] (tests, library use).
    pub fn new() -> Stop {
        Stop::default()
    }

    /// A flag that SIGINT, SIGTERM and SIGHUP set. Once installed, these
    /// signals no longer terminate the process: the caller must poll.
    pub fn on_signals() -> anyhow::Result<Stop> {
        let stop = Stop::new();
        for sig in STOP_SIGNALS {
            signal_hook::flag::register_usize(sig, stop.0.clone(), sig as usize)?;
        }
        Ok(stop)
    }

    /// The stop signal received, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// Whether a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.signal().is_some()
    }

    /// Asks for a stop as if `sig` had arrived.
    pub fn raise(&self, sig: i32) {
        self.0.store(sig as usize, Ordering::Relaxed);
    }

    /// The error a command returns after it stopped for this flag.
    pub fn interrupted(&self) -> Interrupted {
        Interrupted {
            signal: self.signal(),
        }
    }
}

pub use crate::error::signal_name as name;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        let s = Stop::new();
        assert!(!s.is_set());
        assert_eq!(s.interrupted().exit_code(), 130);
        s.raise(libc::SIGTERM);
        assert_eq!(s.signal(), Some(libc::SIGTERM));
        assert_eq!(s.interrupted().exit_code(), 143);
        s.raise(libc::SIGHUP);
        assert_eq!(s.interrupted().exit_code(), 129);
        assert_eq!(s.interrupted().to_string(), "interrupted by SIGHUP");
    }
}
