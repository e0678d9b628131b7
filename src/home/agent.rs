//! The agent: follows a set of tasks (every thread, and the children they
//! start), places each on its homenode's CPUs, and every window widens or
//! narrows them as [`super::policy`] decides. Masks are changed through a
//! [`Placer`]: the state guard on a real system (journaled, restored on
//! every exit path), a recorder in tests.

use super::observe;
use super::policy::{self, Mode, TaskState, Thresholds, Window};
use crate::idset::IdSet;
use crate::load::procstat::CpuTimes;
use crate::sys::state::Guard;
use crate::topology::sysfs::SysRoot;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

/// Changes task masks for the agent.
pub trait Placer {
    /// A thread's current mask; `None` when it is gone.
    fn get(&mut self, tid: i32) -> Option<IdSet>;
    /// Sets a thread's mask, its original journaled first.
    fn set(&mut self, tgid: i32, tid: i32, cpus: &IdSet) -> anyhow::Result<()>;
    /// Journals the original of a thread that inherited a mask numalab set.
    fn adopt(&mut self, tgid: i32, tid: i32, original: &IdSet) -> anyhow::Result<()>;
    /// Drops threads from the journal (gone, or let go).
    fn forget(&mut self, tids: &[i32]) -> anyhow::Result<()>;
}

impl Placer for Guard {
    fn get(&mut self, tid: i32) -> Option<IdSet> {
        crate::sys::get_affinity(tid).ok()
    }
    fn set(&mut self, tgid: i32, tid: i32, cpus: &IdSet) -> anyhow::Result<()> {
        self.set_task_affinity(tgid, tid, cpus)
    }
    fn adopt(&mut self, tgid: i32, tid: i32, original: &IdSet) -> anyhow::Result<()> {
        self.journal_task_affinity(tgid, tid, original)
    }
    fn forget(&mut self, tids: &[i32]) -> anyhow::Result<()> {
        self.forget_tasks(tids)
    }
}

/// One decision, as a line of the `-o` log.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Seconds since the agent started.
    pub t_s: f64,
    pub pid: i32,
    pub tid: i32,
    /// track, narrow, widen, outside, release, gone.
    pub action: &'static str,
    pub reason: String,
    /// The mask the task has after the action.
    pub cpus: String,
    /// Run delay over the last window, ms (absent before the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_delay_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home_idle_cpus: Option<f64>,
}

/// What the agent did, for its summary line and records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub tracked: u64,
    pub narrowed: u64,
    pub widened: u64,
    pub released: u64,
    pub outside: u64,
    pub windows: u64,
    /// The most threads followed at once.
    pub peak_tracked: u64,
}

struct Tracked {
    tgid: i32,
    original: IdSet,
    /// (narrow, wide) masks; `None`: the homenode is outside its CPUs.
    masks: Option<(IdSet, IdSet)>,
    state: TaskState,
    /// Last (run, delay) reading.
    last: Option<(u64, u64)>,
}

impl Tracked {
    fn mask(&self) -> &IdSet {
        match (&self.masks, self.state.mode) {
            (Some((n, _)), Mode::Narrow) => n,
            _ => &self.original,
        }
    }
}

/// The agent for one homenode.
pub struct Agent {
    sys: SysRoot,
    home: u32,
    home_cpus: IdSet,
    /// The other nodes' CPUs (where a widened task may go), from sysfs;
    /// without NUMA sysfs, one group: every CPU outside the homenode.
    others: Vec<IdSet>,
    th: Thresholds,
    window: Duration,
    roots: BTreeSet<i32>,
    tasks: BTreeMap<i32, Tracked>,
    /// Tasks let go of (they set their own mask): never taken back.
    released: BTreeSet<i32>,
    last_tick: Option<(Instant, BTreeMap<u32, CpuTimes>)>,
    started: Instant,
    log: Option<Box<dyn Write>>,
    pub counts: Counts,
}

impl Agent {
    pub fn new(
        sys: SysRoot,
        home: u32,
        home_cpus: IdSet,
        th: Thresholds,
        window: Duration,
        log: Option<Box<dyn Write>>,
    ) -> Agent {
        let others = crate::topology::sysfs::node_cpulists(&sys)
            .unwrap_or_default()
            .into_iter()
            .map(|(_, cpus)| cpus.difference(&home_cpus))
            .filter(|c| !c.is_empty())
            .collect();
        Agent {
            sys,
            home,
            home_cpus,
            others,
            th,
            window,
            roots: BTreeSet::new(),
            tasks: BTreeMap::new(),
            released: BTreeSet::new(),
            last_tick: None,
            started: Instant::now(),
            log,
            counts: Counts::default(),
        }
    }

    pub fn home(&self) -> u32 {
        self.home
    }

    /// Threads followed now.
    pub fn tracked(&self) -> usize {
        self.tasks.len()
    }

    /// Whether any followed task (or root process) still exists.
    pub fn alive(&self) -> bool {
        !self.tasks.is_empty()
            || self
                .roots
                .iter()
                .any(|p| !observe::threads(&self.sys, *p).is_empty())
    }

    fn emit(&mut self, e: Event) {
        if let Some(w) = &mut self.log {
            if let Ok(line) = serde_json::to_string(&e) {
                // A log that cannot be written must not stop the placement.
                let _ = writeln!(w, "{line}").and_then(|()| w.flush());
            }
        }
    }

    fn event(&self, pid: i32, tid: i32, action: &'static str, reason: &str, cpus: &IdSet) -> Event {
        Event {
            t_s: self.started.elapsed().as_secs_f64(),
            pid,
            tid,
            action,
            reason: reason.into(),
            cpus: cpus.to_string(),
            run_delay_ms: None,
            home_idle_cpus: None,
        }
    }

    /// Follows process `pid` (and everything it starts from now on), and
    /// places its threads on the homenode at once.
    pub fn attach(&mut self, placer: &mut dyn Placer, pid: i32) -> anyhow::Result<()> {
        self.roots.insert(pid);
        self.scan(placer)
    }

    /// Every (tgid, tid, creator thread for a new process) under the roots.
    fn discover(&self) -> Vec<(i32, i32, Option<i32>)> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let mut queue: Vec<(i32, Option<i32>)> = self.roots.iter().map(|p| (*p, None)).collect();
        while let Some((pid, creator)) = queue.pop() {
            if !seen.insert(pid) {
                continue;
            }
            for tid in observe::threads(&self.sys, pid) {
                out.push((pid, tid, creator));
                for c in observe::children(&self.sys, pid, tid).unwrap_or_default() {
                    queue.push((c, Some(tid)));
                }
            }
        }
        out
    }

    /// Takes up new threads and children, drops the gone ones.
    fn scan(&mut self, placer: &mut dyn Placer) -> anyhow::Result<()> {
        let found = self.discover();
        let present: BTreeSet<i32> = found.iter().map(|f| f.1).collect();
        let gone: Vec<i32> = self
            .tasks
            .keys()
            .filter(|t| !present.contains(t))
            .copied()
            .collect();
        if !gone.is_empty() {
            placer.forget(&gone)?;
            for t in &gone {
                self.tasks.remove(t);
            }
        }
        self.released.retain(|t| present.contains(t));
        for (tgid, tid, creator) in found {
            if self.tasks.contains_key(&tid) || self.released.contains(&tid) {
                continue;
            }
            self.take_up(placer, tgid, tid, creator)?;
        }
        self.counts.peak_tracked = self.counts.peak_tracked.max(self.tasks.len() as u64);
        Ok(())
    }

    fn take_up(
        &mut self,
        placer: &mut dyn Placer,
        tgid: i32,
        tid: i32,
        creator: Option<i32>,
    ) -> anyhow::Result<()> {
        let Some(cur) = placer.get(tid) else {
            return Ok(()); // gone already
        };
        // Who it took its mask from: the thread that started it (a new
        // process), else its process's leader or any followed thread of it.
        let parent = creator
            .and_then(|c| self.tasks.get(&c))
            .or_else(|| self.tasks.get(&tgid))
            .or_else(|| self.tasks.values().find(|t| t.tgid == tgid));
        let inherited = parent.filter(|p| *p.mask() == cur);
        let (original, mode, in_mode) = match inherited {
            // It has a mask numalab set on its creator: its own is the
            // creator's original, and it starts in the creator's mode.
            Some(p) => (p.original.clone(), p.state.mode, p.state.in_mode),
            // A task of its own: what it may use now is its own mask
            // (Cpus_allowed_list: the user's cpuset, its own choices).
            None => (
                observe::cpus_allowed(&self.sys, tgid, tid).unwrap_or(cur.clone()),
                Mode::Narrow,
                0,
            ),
        };
        self.counts.tracked += 1;
        let masks = policy::masks(&original, &self.home_cpus);
        let Some((narrow, _)) = masks.clone() else {
            self.counts.outside += 1;
            let why = format!(
                "its CPUs {original} leave out node {}'s {}: left alone",
                self.home, self.home_cpus
            );
            let e = self.event(tgid, tid, "outside", &why, &cur);
            self.emit(e);
            let state = TaskState {
                mode: Mode::Wide,
                ..TaskState::narrow(&self.th)
            };
            self.tasks.insert(
                tid,
                Tracked {
                    tgid,
                    original,
                    masks,
                    state,
                    last: None,
                },
            );
            return Ok(());
        };
        let state = TaskState {
            mode,
            in_mode,
            ..TaskState::narrow(&self.th)
        };
        let want = if mode == Mode::Narrow {
            &narrow
        } else {
            &original
        };
        // A task may exit between the reading above and the change (a
        // short-lived child): then there is nothing to take up.
        let gone = |placer: &mut dyn Placer, r: anyhow::Result<()>| match r {
            Ok(()) => Ok(false),
            Err(_) if placer.get(tid).is_none() => Ok(true),
            Err(e) => Err(e),
        };
        let action = if inherited.is_some() && cur == *want {
            if cur != original {
                let r = placer.adopt(tgid, tid, &original);
                if gone(placer, r)? {
                    return Ok(());
                }
            }
            "track"
        } else {
            let r = placer.set(tgid, tid, want);
            if gone(placer, r)? {
                return Ok(());
            }
            if mode == Mode::Narrow {
                self.counts.narrowed += 1;
                "narrow"
            } else {
                "track"
            }
        };
        let reason = if inherited.is_some() {
            "new task, creator's placement"
        } else {
            "placed on the homenode"
        };
        let e = self.event(tgid, tid, action, reason, want);
        self.emit(e);
        self.tasks.insert(
            tid,
            Tracked {
                tgid,
                original,
                masks,
                state,
                last: None,
            },
        );
        Ok(())
    }

    /// One window, when one has passed since the last: follows new tasks,
    /// measures, and applies the policy's changes. Returns whether it ran.
    pub fn tick(&mut self, placer: &mut dyn Placer) -> anyhow::Result<bool> {
        let now = Instant::now();
        if let Some((t, _)) = &self.last_tick {
            if now.duration_since(*t) < self.window {
                return Ok(false);
            }
        }
        self.window_step(placer, now)?;
        Ok(true)
    }

    /// The window's work (also called by tests with their own clock).
    pub fn window_step(&mut self, placer: &mut dyn Placer, now: Instant) -> anyhow::Result<()> {
        self.scan(placer)?;
        let stat = observe::cpu_times(&self.sys)?;
        let prev = self.last_tick.replace((now, stat.clone()));
        let Some((t0, stat0)) = prev else {
            // First window: only baselines.
            for (tid, t) in self.tasks.iter_mut() {
                t.last = observe::schedstat(&self.sys, t.tgid, *tid);
            }
            return Ok(());
        };
        self.counts.windows += 1;
        let win_ns = now.duration_since(t0).as_nanos().max(1) as f64;
        let shares = observe::idle_shares(&stat0, &stat);
        // The homenode's busy and idle CPUs' worth, from the same shares.
        let (home_busy, home_n) = observe::busy_cpus(&shares, &self.home_cpus);
        let home_idle = home_n - home_busy;
        // Per distinct own mask, its CPUs outside the homenode: the idlest
        // one's idle share, their busy shares summed, how many.
        let mut away: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        // Measure; let go of tasks that set their own mask.
        let mut input = Vec::new();
        let mut released = Vec::new();
        for (tid, t) in self.tasks.iter_mut() {
            let cur = observe::schedstat(&self.sys, t.tgid, *tid);
            let prev = std::mem::replace(&mut t.last, cur);
            if t.masks.is_none() {
                continue;
            }
            match placer.get(*tid) {
                Some(m) if m != *t.mask() => {
                    released.push((*tid, t.tgid, m));
                    continue;
                }
                None => continue,
                _ => {}
            }
            if let (Some((r0, d0)), Some((r1, d1))) = (prev, cur) {
                // Where a wide task is (one more read, wide tasks only).
                let on_home = t.state.mode == Mode::Wide
                    && observe::last_cpu(&self.sys, t.tgid, *tid)
                        .is_some_and(|c| self.home_cpus.contains(c));
                let (away_idle, away_busy, away_cpus) =
                    *away.entry(t.original.to_string()).or_insert_with(|| {
                        let outside = t.original.difference(&self.home_cpus);
                        let groups: Vec<IdSet> = if self.others.is_empty() {
                            vec![outside.clone()]
                        } else {
                            self.others
                                .iter()
                                .map(|g| g.intersection(&outside))
                                .collect()
                        };
                        let (busy, n) = observe::least_busy(&shares, &groups);
                        (observe::idlest(&shares, &outside), busy, n)
                    });
                let w = Window {
                    delay: (d1.saturating_sub(d0) as f64 / win_ns).clamp(0.0, 1.0),
                    run: (r1.saturating_sub(r0) as f64 / win_ns).clamp(0.0, 1.0),
                    on_home,
                    away_idle,
                    // Filled in below, once every task's waiting is known.
                    home_demand: 0.0,
                    home_cpus: 0.0,
                    away_busy,
                    away_cpus,
                };
                input.push((*tid, t.state, w));
            }
        }
        if !released.is_empty() {
            let tids: Vec<i32> = released.iter().map(|r| r.0).collect();
            placer.forget(&tids)?;
            for (tid, tgid, m) in released {
                self.tasks.remove(&tid);
                self.released.insert(tid);
                self.counts.released += 1;
                let e = self.event(
                    tgid,
                    tid,
                    "release",
                    "the task set its own CPUs: let go",
                    &m,
                );
                self.emit(e);
            }
        }
        // The homenode's demand: its CPUs' busy time and what the tasks
        // held to it waited.
        let waiting: f64 = input
            .iter()
            .filter(|(_, s, _)| s.mode == Mode::Narrow)
            .map(|(_, _, w)| w.delay)
            .sum();
        for (_, _, w) in input.iter_mut() {
            w.home_demand = home_busy + waiting;
            w.home_cpus = home_n;
        }
        let states: Vec<(TaskState, Window)> = input.iter().map(|(_, s, w)| (*s, *w)).collect();
        let out = policy::step(&self.th, home_idle, &states);
        for ((tid, _, w), (state, change)) in input.iter().zip(out) {
            let Some(t) = self.tasks.get_mut(tid) else {
                continue;
            };
            t.state = state;
            let Some(c) = change else { continue };
            let (tgid, mask) = (t.tgid, t.mask().clone());
            match placer.set(tgid, *tid, &mask) {
                Ok(()) => {}
                // Gone between the reading and the change: dropped at the
                // next scan.
                Err(_) if placer.get(*tid).is_none() => continue,
                Err(e) => return Err(e),
            }
            let action = match c.to {
                Mode::Wide => {
                    self.counts.widened += 1;
                    "widen"
                }
                Mode::Narrow => {
                    self.counts.narrowed += 1;
                    "narrow"
                }
            };
            let mut e = self.event(tgid, *tid, action, c.reason.as_str(), &mask);
            e.run_delay_ms = Some(w.delay * win_ns / 1e6);
            e.home_idle_cpus = Some(home_idle);
            self.emit(e);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
