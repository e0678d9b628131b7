//! One place that turns errors into messages and exit codes.
//!
//! Exit codes: 0 success, 1 a run that failed, 2 bad usage or an environment
//! that cannot do what was asked (bad list, unknown node, unreadable sysfs,
//! missing kernel feature, an input file that is unreadable, not a regular
//! file or too large). Library errors that mean "the input is wrong"
//! are recognised anywhere in an error's context chain.

use crate::idset::ListError;
use crate::input::InputError;
use crate::topology::sysfs::SysfsError;
use crate::topology::TopologyError;

/// Exit code for a failed run.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for bad usage or an unusable environment.
pub const EXIT_USAGE: u8 = 2;

/// Work abandoned because a signal asked numalab to stop (after putting
/// everything back). The exit code is 128 + the signal, as shells report a
/// process the signal killed (130 for Ctrl-C, 143 for SIGTERM, 129 for
/// SIGHUP). Here, not in `sys::signals`, so this module imports nothing of
/// the layers above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted{}", signal.map(|s| format!(" by {}", signal_name(s))).unwrap_or_default())]
pub struct Interrupted {
    pub signal: Option<i32>,
}

impl Interrupted {
    /// 128 + the signal number; 130 (as for SIGINT) when none is known.
    pub fn exit_code(&self) -> u8 {
        (128 + self.signal.unwrap_or(libc::SIGINT)).clamp(0, 255) as u8
    }
}

/// The conventional name of a stop signal.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

/// Bad input or an environment that cannot do what was asked: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Shorthand: an `anyhow` error that exits 2.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The exit code an error deserves: 128 + the signal for work a signal
/// stopped (130 for Ctrl-C), 2 for bad input or environment, else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(i) = err.chain().find_map(|c| c.downcast_ref::<Interrupted>()) {
        return i.exit_code();
    }
    let is_usage = err.chain().any(|c| {
        c.is::<UsageError>()
            || c.is::<ListError>()
            || c.is::<InputError>()
            || c.is::<TopologyError>()
            || c.is::<SysfsError>()
    });
    if is_usage {
        EXIT_USAGE
    } else {
        EXIT_FAILED
    }
}

/// The message printed for an error: the outermost context, then each cause.
pub fn message(err: &anyhow::Error) -> String {
    let mut msg = format!("error: {err}");
    for cause in err.chain().skip(1) {
        msg.push_str(&format!("\n  caused by: {cause}"));
    }
    msg
}
