//! One executor for the child processes numalab starts and watches: the
//! probes of `run`, the jobs of `jobs`, the command of `trace`.
//!
//! Every child starts held at a gate (`numalab __gate -- COMMAND`, see
//! [`crate::sys::spawn_gated`]), so a tracer can watch its pid before it runs
//! an instruction, and all children of a batch start at the same instant.
//! Their output goes to anonymous memory files (memfd) that vanish with
//! numalab, so a killed run leaves nothing in /tmp. They die with numalab
//! (PR_SET_PDEATHSIG). The executor polls: it reaps children with wait4
//! (exit status and CPU times), reads the tracer when due, and on a stop
//! signal or a deadline asks the children to end (SIGTERM), insists
//! (SIGKILL) after a grace period, and always reaps them. The tracer's
//! instance is removed on every path.

use crate::sys::signals::Stop;
use crate::sys::state::Guard;
use crate::sys::Reaped;
use crate::trace::live::{Captured, LiveSpec, Tracer};
use crate::trace::tracefs::Tracefs;
use anyhow::Context;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Seek};
use std::path::Path;
use std::time::{Duration, Instant};

/// How to watch a batch.
pub struct Options<'a> {
    /// How often to check the children (1 ms keeps a sample's wall time
    /// honest; 50 ms is enough for long jobs).
    pub poll: Duration,
    /// Trace the children (and `watch_pids`) through this tracefs.
    pub trace: Option<(&'a Tracefs, LiveSpec)>,
    /// How often to read the trace buffers.
    pub trace_poll: Duration,
    /// Running tasks to trace besides the children (`trace --pid`); with
    /// no children the batch ends when all of them have exited.
    pub watch_pids: BTreeSet<u32>,
    /// End the batch after this long.
    pub deadline: Option<Duration>,
    /// How long children get between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Children share numalab's stdin, stdout and stderr (a traced
    /// command talks to the user) instead of writing to memory files.
    pub inherit_stdio: bool,
    /// Homenode agents (`run --pnid-via agent`, `jobs --home`), each with
    /// the children (launch order) it follows: they are placed before their
    /// gate opens, the agents tick at every poll, and every mask is put
    /// back when the batch ends (journaled in the guard).
    pub agents: Vec<(&'a mut crate::home::Agent, Vec<usize>)>,
    /// Homenodes through numalab's sched_ext scheduler (`run --pnid-via
    /// sched`): (scheduler, node, the children it homes), set before their
    /// gate opens, so they run their first instruction homed.
    pub sched_homes: Vec<(&'a crate::sched::loader::Scheduler, u32, Vec<usize>)>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            poll: Duration::from_millis(50),
            trace: None,
            trace_poll: Duration::from_millis(100),
            watch_pids: BTreeSet::new(),
            deadline: None,
            grace: Duration::from_secs(1),
            inherit_stdio: false,
            agents: Vec::new(),
            sched_homes: Vec::new(),
        }
    }
}

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every child exited (or every watched task, without children).
    Exited,
    /// A stop signal arrived; the children were ended.
    Stopped,
    /// The deadline passed; the children were ended.
    Deadline,
}

/// One child, after the batch.
#[derive(Debug)]
pub struct Finished {
    pub pid: u32,
    /// Exit status and CPU times (wait4).
    pub reaped: Reaped,
    /// From the gate's opening to the moment it was reaped.
    pub wall_ns: u64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    /// The child's stderr as text, trimmed (for error messages).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// What a batch produced.
#[derive(Debug)]
pub struct Batch {
    pub ended: Ended,
    /// In launch order.
    pub children: Vec<Finished>,
    /// The trace, when one was asked for.
    pub captured: Option<Captured>,
    /// From the gates' opening to the end.
    pub elapsed: Duration,
}

struct Child {
    pid: u32,
    out: std::fs::File,
    err: std::fs::File,
    reaped: Option<(Reaped, u64)>,
}

/// Runs `commands` (each a program and its arguments) through numalab's
/// gate `exe`, all released at once, and watches them as `opts` says.
/// `tick(done, total, elapsed)` is called after every poll. State the
/// tracer changes is journaled in `guard`.
pub fn run(
    exe: &Path,
    commands: &[Vec<OsString>],
    opts: Options,
    guard: &mut Guard,
    stop: &Stop,
    mut tick: impl FnMut(usize, usize, Duration),
) -> anyhow::Result<Batch> {
    let mut children = Vec::with_capacity(commands.len());
    let mut gates = Vec::with_capacity(commands.len());
    for (i, argv) in commands.iter().enumerate() {
        let started = spawn(exe, argv, i, opts.inherit_stdio);
        match started {
            Ok((c, g)) => {
                children.push(c);
                gates.push(g);
            }
            Err(e) => {
                // Unopened gates make the started children exit (127).
                drop(gates);
                reap_all(&mut children, Instant::now());
                return Err(e);
            }
        }
    }
    let mut pids: BTreeSet<u32> = children.iter().map(|c| c.pid).collect();
    pids.extend(&opts.watch_pids);
    let mut tracer = match &opts.trace {
        Some((tfs, live)) => match Tracer::start(tfs, guard, pids, live.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                drop(gates);
                reap_all(&mut children, Instant::now());
                return Err(e);
            }
        },
        None => None,
    };
    let mut opts = opts;
    if let Err(e) = place(&mut opts.agents, &children, guard)
        .and_then(|()| home_in_sched(&opts.sched_homes, &children))
    {
        drop(gates);
        reap_all(&mut children, Instant::now());
        if let Some(t) = tracer.take() {
            let _ = t.finish(guard);
        }
        let _ = guard.restore_tasks();
        return Err(e);
    }
    let started = Instant::now();
    for g in gates {
        g.open().context("releasing a child from its gate")?;
    }
    let watch_only = children.is_empty();
    let mut last_trace = Instant::now();
    let ended = loop {
        poll_reap(&mut children, started);
        let done = children.iter().filter(|c| c.reaped.is_some()).count();
        tick(done, children.len(), started.elapsed());
        if watch_only {
            let gone = tracer.as_ref().is_none_or(|t| {
                t.pids()
                    .iter()
                    .all(|p| !Path::new(&format!("/proc/{p}")).exists())
            });
            if gone {
                break Ended::Exited;
            }
        } else if done == children.len() {
            break Ended::Exited;
        }
        if stop.is_set() {
            break Ended::Stopped;
        }
        if opts.deadline.is_some_and(|d| started.elapsed() >= d) {
            break Ended::Deadline;
        }
        for (agent, _) in opts.agents.iter_mut() {
            if let Err(e) = agent.tick(guard) {
                end_children(&mut children, started, opts.grace);
                if let Some(t) = tracer.take() {
                    let _ = t.finish(guard);
                }
                let _ = guard.restore_tasks();
                return Err(e.context("homenode agent"));
            }
        }
        if last_trace.elapsed() >= opts.trace_poll {
            if let Some(Err(e)) = tracer.as_mut().map(Tracer::poll) {
                end_children(&mut children, started, opts.grace);
                if let Some(t) = tracer.take() {
                    let _ = t.finish(guard);
                }
                return Err(e);
            }
            last_trace = Instant::now();
        }
        std::thread::sleep(opts.poll);
    };
    let elapsed = started.elapsed();
    if ended != Ended::Exited {
        end_children(&mut children, started, opts.grace);
    }
    if !opts.agents.is_empty() {
        // The batch's tasks are gone or ended; anything left gets its mask back.
        guard.restore_tasks()?;
    }
    let captured = tracer.map(|t| t.finish(guard)).transpose()?;
    let children = children
        .into_iter()
        .map(|c| {
            let (reaped, wall_ns) = c.reaped.expect("every child is reaped by now");
            Ok(Finished {
                pid: c.pid,
                reaped,
                wall_ns,
                stdout: read_all(c.out)
                    .with_context(|| format!("reading child {}'s output", c.pid))?,
                stderr: read_all(c.err)
                    .with_context(|| format!("reading child {}'s errors", c.pid))?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Batch {
        ended,
        children,
        captured,
        elapsed,
    })
}

/// Places each agent's children on its homenode before they run.
fn place(
    agents: &mut [(&mut crate::home::Agent, Vec<usize>)],
    children: &[Child],
    guard: &mut Guard,
) -> anyhow::Result<()> {
    for (agent, idx) in agents.iter_mut() {
        for &i in idx.iter() {
            let c = children
                .get(i)
                .with_context(|| format!("homenode agent: no child {i} in the batch"))?;
            agent.attach(guard, c.pid as i32)?;
        }
    }
    Ok(())
}

/// Homes children through the scheduler before they run.
fn home_in_sched(
    homes: &[(&crate::sched::loader::Scheduler, u32, Vec<usize>)],
    children: &[Child],
) -> anyhow::Result<()> {
    for (sched, node, idx) in homes {
        for &i in idx {
            let c = children
                .get(i)
                .with_context(|| format!("sched homenode: no child {i} in the batch"))?;
            sched.set_home(c.pid, Some(*node))?;
        }
    }
    Ok(())
}

fn spawn(
    exe: &Path,
    argv: &[OsString],
    i: usize,
    inherit: bool,
) -> anyhow::Result<(Child, crate::sys::Gate)> {
    let out = crate::sys::memfd(&format!("numalab-child{i}-out")).context("creating a memfd")?;
    let err = crate::sys::memfd(&format!("numalab-child{i}-err")).context("creating a memfd")?;
    let (o, e) = (out.try_clone()?, err.try_clone()?);
    let (child, gate) = crate::sys::spawn_gated(exe, argv, |c| {
        if !inherit {
            c.stdin(std::process::Stdio::null()).stdout(o).stderr(e);
        }
    })
    .with_context(|| {
        format!(
            "starting {:?}",
            argv.first()
                .map(|a| a.to_string_lossy())
                .unwrap_or_default()
        )
    })?;
    Ok((
        Child {
            pid: child.id(),
            out,
            err,
            reaped: None,
        },
        gate,
    ))
}

fn read_all(mut f: std::fs::File) -> std::io::Result<Vec<u8>> {
    f.rewind()?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}

/// Asks every unreaped child to end (SIGTERM), insists after `grace`
/// (SIGKILL), and reaps them all.
fn end_children(children: &mut [Child], started: Instant, grace: Duration) {
    for c in children.iter().filter(|c| c.reaped.is_none()) {
        let _ = crate::sys::signal(c.pid as i32, libc::SIGTERM);
    }
    let asked = Instant::now();
    while children.iter().any(|c| c.reaped.is_none()) && asked.elapsed() < grace {
        poll_reap(children, started);
        std::thread::sleep(Duration::from_millis(5));
    }
    for c in children.iter().filter(|c| c.reaped.is_none()) {
        let _ = crate::sys::signal(c.pid as i32, libc::SIGKILL);
    }
    reap_all(children, started);
}

fn poll_reap(children: &mut [Child], started: Instant) {
    for c in children.iter_mut().filter(|c| c.reaped.is_none()) {
        match crate::sys::try_reap(c.pid as i32) {
            Ok(None) => {}
            Ok(Some(r)) => c.reaped = Some((r, started.elapsed().as_nanos() as u64)),
            // ECHILD: nothing left to wait for. Counted as killed, so a
            // vanished child never looks like a success nor hangs the loop.
            Err(_) => {
                c.reaped = Some((
                    Reaped {
                        status: libc::SIGKILL,
                        user_ns: 0,
                        sys_ns: 0,
                    },
                    started.elapsed().as_nanos() as u64,
                ))
            }
        }
    }
}

/// Reaps every child, waiting as long as it takes (they have been told to
/// end, or were never released from the gate).
fn reap_all(children: &mut [Child], started: Instant) {
    while children.iter().any(|c| c.reaped.is_none()) {
        poll_reap(children, started);
        if children.iter().any(|c| c.reaped.is_none()) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
