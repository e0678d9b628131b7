//! The threaded probe's workers as processes (`--processes`): K processes
//! on one shared memory segment, as a database's backends work on its
//! buffer pool.
//!
//! Each worker is forked (not exec'd) after every array is mapped: the
//! shared array is shmem (MAP_SHARED), so the children share its pages;
//! each child's own array is the parent's untouched private mapping, so
//! its pages are the child's alone. A child runs the same [`super::work`]
//! as a worker thread, sends its report back as JSON through a pipe of its
//! own, and stays (its mappings with it) until the probe has taken its
//! last timeline sample and closes the exit pipe.
//!
//! Why fork and not `numalab __worker`: the arrays, the shared one built
//! and first-touched by the parent, would have to be mapped again by each
//! child at the same layout; a forked child has them already, and the
//! probe process has no other thread to make fork unsafe.

use super::{pipe, Out, Worker};
use anyhow::{anyhow, Context};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};

/// The worker processes started, and the pipe whose closing lets them go.
pub(super) struct Procs {
    children: Vec<(i32, File)>,
    exit_r: Option<File>,
    exit_w: File,
}

/// What a child sends back: its report, `None` when called off before the
/// go, or its error's message.
type Wire<T> = Result<Option<T>, String>;

impl Procs {
    pub(super) fn new() -> anyhow::Result<Procs> {
        let (exit_r, exit_w) = pipe()?;
        Ok(Procs {
            children: Vec::new(),
            exit_r: Some(exit_r),
            exit_w,
        })
    }

    /// How many are started.
    pub(super) fn len(&self) -> usize {
        self.children.len()
    }

    /// Forks worker `w`.
    pub(super) fn spawn(&mut self, mut w: Worker) -> anyhow::Result<()> {
        let (result_r, result_w) = pipe()?;
        let exit_r = self
            .exit_r
            .as_ref()
            .expect("no spawn after join")
            .try_clone()
            .context("pipe")?;
        let ready_fd = w.ready.w.as_ref().map(|f| f.as_raw_fd());
        let keep: Vec<RawFd> = [0, 1, 2, w.go.as_raw_fd(), w.events.as_raw_fd()]
            .into_iter()
            .chain(ready_fd)
            .chain([result_w.as_raw_fd(), exit_r.as_raw_fd()])
            .collect();
        let parent = rustix::process::getpid();
        // SAFETY: the probe process runs no other thread here (its workers
        // are these processes; the timeline process is started later), so
        // no lock is held by a thread the child would lack. The child runs
        // only `child`, which never returns into the parent's code.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => Err(anyhow!(
                "forking probe process {}: {}",
                w.index,
                std::io::Error::last_os_error()
            )),
            0 => child(w, result_w, exit_r, &keep, parent),
            pid => {
                // The child has its own copies: the parent's are closed (the
                // ready end without the "never ready" its drop would send)
                // and its copy of the worker's own array unmapped.
                drop(w.ready.w.take());
                drop((w, result_w, exit_r));
                self.children.push((pid, result_r));
                Ok(())
            }
        }
    }

    /// Every child forked: the parent's own read end of the exit pipe goes,
    /// so closing the write end reaches every child.
    pub(super) fn all_started(&mut self) {
        self.exit_r = None;
    }

    /// The children's reports (in start order), or the first error; every
    /// child is let go and reaped whatever happens.
    pub(super) fn join(self) -> anyhow::Result<Vec<Out>> {
        let Procs {
            children, exit_w, ..
        } = self;
        let mut outs = Vec::with_capacity(children.len());
        let mut first_err = None;
        let mut pids = Vec::with_capacity(children.len());
        for (i, (pid, mut r)) in children.into_iter().enumerate() {
            pids.push(pid);
            let mut text = String::new();
            let got = r
                .read_to_string(&mut text)
                .map_err(|e| anyhow!("reading probe process {i}'s report: {e}"))
                .and_then(|_| {
                    serde_json::from_str::<Wire<Out>>(&text).map_err(|_| {
                        anyhow!("probe process {i} (pid {pid}) ended without its report")
                    })
                });
            match got {
                Ok(Ok(Some(o))) => outs.push(o),
                Ok(Ok(None)) => {}
                Ok(Err(msg)) => {
                    first_err.get_or_insert(anyhow!(msg));
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        // The last sample is taken: the children may unmap and go.
        drop(exit_w);
        for (i, pid) in pids.into_iter().enumerate() {
            let mut status = 0;
            let waited = loop {
                // SAFETY: `pid` is a child of this process not yet reaped;
                // `status` outlives the call.
                let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
                if rc != -1 {
                    break Ok(());
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    break Err(e);
                }
            };
            if let Err(e) = waited {
                first_err.get_or_insert(anyhow!("waiting for probe process {i} (pid {pid}): {e}"));
            } else if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                first_err.get_or_insert(anyhow!(
                    "probe process {i} (pid {pid}) failed (wait status {status:#x})"
                ));
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(outs),
        }
    }
}

/// The child: closes what is not its own, runs the worker, sends its
/// report, waits to be let go, exits without running the parent's exit
/// handlers or destructors.
fn child(
    w: Worker,
    result_w: File,
    exit_r: File,
    keep: &[RawFd],
    parent: rustix::process::Pid,
) -> ! {
    // The probe's end is ours: no worker is left behind by a killed probe.
    let orphan =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .is_err()
            || rustix::process::getppid() != Some(parent);
    if orphan {
        // SAFETY: ends this process at once; nothing of it is shared state.
        unsafe { libc::_exit(1) };
    }
    close_all_but(keep);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let r = super::work(w);
        let wire: Wire<&Out> = match &r {
            Ok(o) => Ok(o.as_ref()),
            Err(e) => Err(format!("{e:#}")),
        };
        let sent = serde_json::to_writer(&result_w, &wire).is_ok();
        drop(result_w);
        // Its arrays stay mapped until the probe's last sample: `r` holds
        // them until here.
        wait_for_eof(&exit_r);
        drop(r);
        sent
    }));
    let code = match result {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(_) => 101,
    };
    // SAFETY: ends the child without unwinding into the parent's frames or
    // running its atexit handlers (which would flush the parent's buffered
    // output a second time).
    unsafe { libc::_exit(code) }
}

/// Blocks until every writer of `f` has closed it.
fn wait_for_eof(f: &File) {
    let mut b = [0u8; 16];
    loop {
        match rustix::io::read(f, &mut b) {
            Ok(0) => return,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// Closes every descriptor of this (child) process but `keep`: the parent's
/// pipe ends it inherited (the go's and the exit pipe's write ends, other
/// workers' ends) would otherwise keep those pipes open for ever.
fn close_all_but(keep: &[RawFd]) {
    let fds: Vec<RawFd> = match std::fs::read_dir("/proc/self/fd") {
        Ok(d) => d
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        // No listing (no /proc, or no descriptor left to open it with):
        // every number up to the descriptor limit, so no inherited pipe
        // end survives to keep a pipe open.
        Err(_) => {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
                .current
                .unwrap_or(1 << 20)
                .min(1 << 20) as RawFd;
            (0..limit).collect()
        }
    };
    for fd in fds {
        if !keep.contains(&fd) {
            // SAFETY: the values owning these descriptors are the parent's,
            // in frames this child never returns to: nothing here closes
            // them a second time. (The directory's own descriptor is
            // already closed; that close fails harmlessly.)
            unsafe { libc::close(fd) };
        }
    }
}
