//! Starting the command under its homenode's memory policy, and watching
//! it (or attached tasks) while the agent places them.

use super::Agent;
use crate::sys::numa::{Policy, PreparedPolicy};
use crate::sys::signals::Stop;
use crate::sys::state::Guard;
use crate::sys::{Gate, Reaped};
use anyhow::Context;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// Starts `command` through numalab's gate `exe`, with `mem` as its memory
/// policy (set between fork and exec of the trampoline; kept across the
/// exec of the command). It waits at the gate until [`Gate::open`], so the
/// agent places it before it runs an instruction of its own. The command
/// does not die with numalab.
pub fn start(
    exe: &std::path::Path,
    command: &[OsString],
    mem: Option<&Policy>,
) -> anyhow::Result<(u32, Gate)> {
    let policy = mem.map(PreparedPolicy::new).transpose()?;
    let (child, gate) = crate::sys::spawn_gated_opts(exe, command, false, move |c| {
        use std::os::unix::process::CommandExt;
        if let Some(p) = policy {
            // SAFETY: runs between fork and exec; it makes one system call
            // with a mask built before the fork (no allocation).
            unsafe { c.pre_exec(move || p.apply()) };
        }
    })
    .with_context(|| {
        format!(
            "starting {:?}",
            command
                .first()
                .map(|a| a.to_string_lossy())
                .unwrap_or_default()
        )
    })?;
    Ok((child.id(), gate))
}

/// How watching ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The command exited.
    Exited(Reaped),
    /// Every attached task is gone.
    AllGone,
    /// A stop signal.
    Stopped,
    /// --duration passed.
    Deadline,
}

/// What watching cost.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    pub ended: Ended,
    pub elapsed: Duration,
    /// This process's CPU time while watching.
    pub cpu_ns: u64,
}

/// Runs the agent until the command (`child`) exits, or without one until
/// every attached task is gone, a stop signal, or `deadline`.
pub fn watch(
    agent: &mut Agent,
    guard: &mut Guard,
    stop: &Stop,
    child: Option<u32>,
    deadline: Option<Duration>,
    poll: Duration,
) -> anyhow::Result<Watched> {
    let started = Instant::now();
    let cpu0 = crate::sys::self_cpu_ns();
    let ended = loop {
        if let Some(pid) = child {
            if let Some(r) = crate::sys::try_reap(pid as i32).context("waiting for the command")? {
                break Ended::Exited(r);
            }
        } else if !agent.alive() {
            break Ended::AllGone;
        }
        if stop.is_set() {
            break Ended::Stopped;
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break Ended::Deadline;
        }
        agent.tick(guard)?;
        std::thread::sleep(poll);
    };
    Ok(Watched {
        ended,
        elapsed: started.elapsed(),
        cpu_ns: crate::sys::self_cpu_ns().saturating_sub(cpu0),
    })
}
