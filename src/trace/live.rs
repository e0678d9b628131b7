//! Tracing live tasks: a private instance filtered to their pids, read
//! while they run, followed into their children, with their memory's
//! placement sampled from numa_maps.

use super::analyze::Window;
use super::event::{Event, Kind};
use super::tracefs::{Instance, Tracefs};
use crate::sys::state::Guard;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Knobs of a live trace.
#[derive(Debug, Clone)]
pub struct LiveSpec {
    /// Ring buffer per CPU, kB.
    pub buffer_kb: u32,
    /// Trace children the traced tasks fork.
    pub follow_forks: bool,
    /// How often to read the tasks' numa_maps (None: never).
    pub pages_every: Option<Duration>,
    /// CPUs whose buffers to read (the online ones).
    pub cpus: Vec<u32>,
}

pub const DEFAULT_BUFFER_KB: u32 = 1024;

/// What a live trace caught.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub events: Vec<Event>,
    pub window: Window,
    /// Events the kernel dropped because the buffer was full.
    pub lost_events: u64,
    pub missed_pages: u64,
    /// Optional events this kernel lacks.
    pub missing_events: Vec<String>,
    /// Every traced pid: the initial ones and followed children.
    pub pids: BTreeSet<u32>,
    /// Last numa_maps reading per pid: bytes per node.
    pub pages: BTreeMap<u32, BTreeMap<u32, u64>>,
}

/// A running trace.
pub struct Tracer {
    inst: Instance,
    pids: BTreeSet<u32>,
    spec: LiveSpec,
    events: Vec<Event>,
    start_ns: u64,
    seen: usize,
    pages: BTreeMap<u32, BTreeMap<u32, u64>>,
    last_pages: Option<Instant>,
}

impl Tracer {
    /// Creates the instance (journaled in `guard` first), filters it to
    /// `pids` and starts recording.
    pub fn start(
        tfs: &Tracefs,
        guard: &mut Guard,
        pids: BTreeSet<u32>,
        spec: LiveSpec,
    ) -> anyhow::Result<Tracer> {
        let name = format!("numalab-{}", crate::sys::pid());
        guard.tracefs_instance(&tfs.root.join("instances").join(&name))?;
        let inst = Instance::create(tfs, &name, spec.buffer_kb, &spec.cpus)?;
        inst.set_filters(&pids)?;
        let start_ns = crate::sys::mono_ns();
        inst.start()?;
        let mut t = Tracer {
            inst,
            pids,
            spec,
            events: Vec::new(),
            start_ns,
            seen: 0,
            pages: BTreeMap::new(),
            last_pages: None,
        };
        t.sample_pages();
        Ok(t)
    }

    /// The traced pids so far.
    pub fn pids(&self) -> &BTreeSet<u32> {
        &self.pids
    }

    /// Reads what the kernel recorded so far; follows new children and
    /// samples numa_maps when due. Call every few tens of milliseconds.
    pub fn poll(&mut self) -> anyhow::Result<()> {
        self.inst.read_available(&mut self.events)?;
        if self.spec.follow_forks {
            let mut grew = false;
            for e in &self.events[self.seen..] {
                if let Kind::Fork {
                    parent_pid,
                    child_pid,
                } = e.kind
                {
                    if self.pids.contains(&parent_pid) && self.pids.insert(child_pid) {
                        grew = true;
                    }
                }
            }
            if grew {
                self.inst.set_filters(&self.pids)?;
            }
        }
        self.seen = self.events.len();
        if let Some(every) = self.spec.pages_every {
            if self.last_pages.is_none_or(|t| t.elapsed() >= every) {
                self.sample_pages();
            }
        }
        Ok(())
    }

    fn sample_pages(&mut self) {
        if self.spec.pages_every.is_none() {
            return;
        }
        self.last_pages = Some(Instant::now());
        for &pid in &self.pids {
            if let Ok(t) = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")) {
                let b = crate::analysis::pages::bytes_per_node(&t);
                if !b.is_empty() {
                    self.pages.insert(pid, b);
                }
            }
        }
    }

    /// Stops recording, reads the rest, removes the instance and drops it
    /// from `guard`'s journal (the one [`Tracer::start`] wrote it to).
    pub fn finish(mut self, guard: &mut Guard) -> anyhow::Result<Captured> {
        self.inst.stop()?;
        let end_ns = crate::sys::mono_ns();
        self.poll()?;
        let lost_events = self.inst.lost_events();
        let missed_pages = self.inst.missed_pages;
        let missing_events = self.inst.missing.clone();
        self.inst.remove()?;
        guard.tracefs_instance_removed(&self.inst.dir)?;
        let mut events = std::mem::take(&mut self.events);
        super::event::sort(&mut events);
        Ok(Captured {
            events,
            window: Window {
                start_ns: self.start_ns,
                end_ns,
            },
            lost_events,
            missed_pages,
            missing_events,
            pids: self.pids.clone(),
            pages: std::mem::take(&mut self.pages),
        })
    }
}
