//! From a trace's events to an explanation per task: every migration
//! classified by topology level ([`crate::analysis::classify`]) and by
//! cause, what NUMA balancing did, and the time on each node and LLC.
//!
//! Causes of a sched_migrate_task for a task:
//! - `numa_balancing`: it completes a sched_move_numa or sched_swap_numa for
//!   the same task and CPUs within [`NUMA_MATCH_NS`] (task_numa_migrate()
//!   traces its decision, then the stopper moves the task);
//! - `wakeup`: the task was asleep (its last sched_switch out was not
//!   runnable, or it has just been forked): try_to_wake_up() chose a CPU;
//! - `load_balance`: the task was runnable or running: the periodic, idle or
//!   active load balancer (or an affinity change) moved it;
//! - `unknown`: no sched_switch of the task seen yet to tell.
//!
//! Which balancing made a `load_balance` move ([`BalanceKinds`]) shows in
//! where the kernel recorded the event and in what the destination CPU
//! switched from to run the task:
//! - `pushed`: recorded on the source CPU, i.e. by its stopper thread, which
//!   preempted the running task: the active balancer
//!   (active_load_balance_cpu_stop), and also the two other stopper moves
//!   of a CFS task that the trace cannot tell from it: exec balancing
//!   (sched_exec() at execve, once at the start of a traced command) and
//!   an affinity change of the running task (migration_cpu_stop);
//! - otherwise the destination (or, for nohz idle balancing, another idle
//!   CPU on its behalf) pulled it. Where the trace follows every CPU in and
//!   out of idle (numalab's own traces record every switch from or to the
//!   idle task, whoever else it involves), a destination idle at the pull
//!   makes it `idle` (periodic or nohz balancing of an idle CPU), whatever
//!   the CPU ran before the task: a task woken there in the meantime may
//!   run first, and under an emulator, whose vCPUs take turns, it often
//!   does. Otherwise the task's next switch-in there says how: from the
//!   idle task, `idle`; from a task that went to sleep within
//!   [`NEWIDLE_SWITCH_NS`] of the move, `newly_idle` (the pull ran inside
//!   that task's schedule()); from a task still runnable, or one that slept
//!   later, `busy` (the CPU's tick pulled it while it ran something);
//! - `unknown`: moved again, or the window closed, before it ran there.
//!
//! Known misreadings: an affinity change of a task that waits, not runs,
//! is moved by the caller (move_queued_task()) and reads as a pull; under
//! 6.12's DELAY_DEQUEUE the balancer may move a task that has gone to
//! sleep but is still queued, which reads as a wake-up.
//!
//! Residency comes from sched_switch: a task runs on a CPU from the switch
//! that makes it `next` to the switch that makes it `prev`. A task already
//! on a CPU when the window opens counts from the window's start; one still
//! on a CPU when it closes counts to its end.

use super::event::{Event, Kind};
use crate::analysis::{classify, residency, Migration, MigrationCounts, Residency, Segment};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How long after NUMA balancing's decision its migration may follow.
pub const NUMA_MATCH_NS: u64 = 50_000_000;

/// The longest gap between a pull and the switch to the pulled task that
/// still counts as one schedule() (newly-idle balancing): tens of
/// microseconds on hardware, more in an emulated guest. A busy CPU's pull
/// whose running task happens to sleep this soon after it is counted as
/// newly idle: with `numalab load`'s 12 ms busy periods, at most about 1 in
/// 12 of the busy pulls that do not preempt the running task at once.
pub const NEWIDLE_SWITCH_NS: u64 = 1_000_000;

/// A task's load-balancing moves by the kind of balancing that made them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceKinds {
    pub busy: u64,
    pub idle: u64,
    pub newly_idle: u64,
    /// Moved by the stopper of its CPU (active balancing; exec balancing
    /// and affinity changes of the running task look the same).
    pub pushed: u64,
    pub unknown: u64,
}

impl BalanceKinds {
    fn add(&mut self, k: Option<LbKind>) {
        match k {
            Some(LbKind::Busy) => self.busy += 1,
            Some(LbKind::Idle) => self.idle += 1,
            Some(LbKind::NewlyIdle) => self.newly_idle += 1,
            Some(LbKind::Pushed) => self.pushed += 1,
            None => self.unknown += 1,
        }
    }
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.newly_idle + self.pushed + self.unknown
    }
}

/// The kind of balancing behind one load-balancing move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbKind {
    Busy,
    Idle,
    NewlyIdle,
    Pushed,
}

/// Migrations by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Causes {
    pub numa_balancing: u64,
    pub wakeup: u64,
    pub load_balance: u64,
    pub unknown: u64,
}

impl Causes {
    fn add(&mut self, c: Cause) {
        match c {
            Cause::NumaBalancing => self.numa_balancing += 1,
            Cause::Wakeup => self.wakeup += 1,
            Cause::LoadBalance => self.load_balance += 1,
            Cause::Unknown => self.unknown += 1,
        }
    }
    pub fn total(&self) -> u64 {
        self.numa_balancing + self.wakeup + self.load_balance + self.unknown
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    NumaBalancing,
    Wakeup,
    LoadBalance,
    Unknown,
}

/// What NUMA balancing decided about the task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaActivity {
    /// sched_move_numa: moves to a CPU of the preferred node.
    pub move_numa: u64,
    /// sched_swap_numa: swaps with a task there.
    pub swap_numa: u64,
    /// sched_stick_numa: it wanted to and could not.
    pub stick_numa: u64,
}

/// One migration with its cause (times relative to the window start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracedMove {
    pub t_ns: u64,
    pub from: u32,
    pub to: u32,
    pub cause: Cause,
}

/// Everything the trace says about one task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskTrace {
    pub pid: u32,
    /// The traced task that forked this one, when followed from a fork.
    pub parent: Option<u32>,
    pub mem_node: Option<u32>,
    /// sched_migrate_task events for the task (including any whose source
    /// and destination CPU are the same, which are not moves).
    pub migrate_events: u64,
    pub migrations: MigrationCounts,
    /// Real moves by cause, and the cross-node ones by cause.
    pub causes: Causes,
    pub cross_node_causes: Causes,
    pub numa: NumaActivity,
    /// Its `load_balance` moves by kind of balancing, all and cross-node
    /// ones (absent from records written before they were counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balancing: Option<BalanceKinds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_node_balancing: Option<BalanceKinds>,
    pub residency: Residency,
    /// The CPU it was first seen on.
    pub first_cpu: Option<u32>,
    pub exited: bool,
    /// Its moves over time, in tenths of its life in the window
    /// ([`crate::analysis::over_time`]); absent from records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_time: Option<crate::analysis::OverTime>,
    pub moves: Vec<TracedMove>,
}

/// The time span to account, in trace-clock nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    /// From the first to the last event.
    pub fn of(events: &[Event]) -> Window {
        Window {
            start_ns: events.first().map_or(0, |e| e.ts_ns),
            end_ns: events.last().map_or(0, |e| e.ts_ns),
        }
    }
}

#[derive(Default)]
struct State {
    parent: Option<u32>,
    /// Some(cpu, since) while on a CPU.
    running: Option<(u32, u64)>,
    /// None until the first switch (or fork) shows it.
    asleep: Option<bool>,
    seen_switch: bool,
    /// The CPU it was first seen on, and when (the window's start if it
    /// was running then); when it exited. Its life, for
    /// [`crate::analysis::over_time`].
    first: Option<(u32, u64)>,
    exit_ns: Option<u64>,
    segments: Vec<Segment>,
    migrate_events: u64,
    moves: Vec<(Migration, Cause, Option<LbKind>)>,
    /// A pull not yet told apart: (index in `moves`, when, destination,
    /// whether the destination was idle then, where the trace knows).
    pending_pull: Option<(usize, u64, u32, Option<bool>)>,
    pending_numa: Vec<(u64, i32, i32)>,
    numa: NumaActivity,
}

/// Analyses `events` (sorted by time) for `pids`; with `follow_forks`,
/// tasks forked by traced tasks are traced too. `mem_node(pid)` gives the
/// node holding a task's memory, when known.
pub fn analyze(
    topo: &Topology,
    events: &[Event],
    pids: &BTreeSet<u32>,
    follow_forks: bool,
    window: Window,
    mem_node: &dyn Fn(u32) -> Option<u32>,
) -> Vec<TaskTrace> {
    let mut st: BTreeMap<u32, State> = pids.iter().map(|&p| (p, State::default())).collect();
    let inside = |t: u64| t >= window.start_ns && t <= window.end_ns;
    // Whether the trace follows CPUs in and out of idle: it has such a
    // switch of untraced tasks (a trace filtered to the traced pids alone
    // would leave every CPU's state stale between their own switches).
    let follows_idle = events.iter().any(|e| match e.kind {
        Kind::Switch {
            prev_pid, next_pid, ..
        } => {
            (prev_pid == 0 || next_pid == 0)
                && !pids.contains(&prev_pid)
                && !pids.contains(&next_pid)
        }
        _ => false,
    });
    // Each CPU's state as the last switch on it left it: idle or not.
    let mut cpu_idle: BTreeMap<u32, bool> = BTreeMap::new();
    for e in events.iter().filter(|e| inside(e.ts_ns)) {
        match e.kind {
            Kind::Switch {
                prev_pid,
                prev_runnable,
                next_pid,
            } => {
                cpu_idle.insert(e.cpu, next_pid == 0);
                if let Some(s) = st.get_mut(&prev_pid) {
                    let since = match s.running.take() {
                        Some((_, t)) => Some(t),
                        // Running since before the window opened.
                        None if !s.seen_switch => Some(window.start_ns),
                        None => None,
                    };
                    if let Some(t) = since {
                        s.segments.push(Segment {
                            cpu: e.cpu,
                            ns: e.ts_ns - t,
                        });
                    }
                    s.first.get_or_insert((e.cpu, since.unwrap_or(e.ts_ns)));
                    s.asleep = Some(!prev_runnable);
                    s.seen_switch = true;
                }
                if let Some(s) = st.get_mut(&next_pid) {
                    if let Some((i, t, dest, idle_then)) = s.pending_pull.take() {
                        s.moves[i].2 = (dest == e.cpu).then(|| {
                            if prev_pid == 0 || idle_then == Some(true) {
                                LbKind::Idle
                            } else if !prev_runnable && e.ts_ns - t <= NEWIDLE_SWITCH_NS {
                                LbKind::NewlyIdle
                            } else {
                                LbKind::Busy
                            }
                        });
                    }
                    s.running = Some((e.cpu, e.ts_ns));
                    s.first.get_or_insert((e.cpu, e.ts_ns));
                    s.asleep = Some(false);
                    s.seen_switch = true;
                }
            }
            Kind::Migrate {
                pid,
                orig_cpu,
                dest_cpu,
            } => {
                let Some(s) = st.get_mut(&pid) else { continue };
                s.migrate_events += 1;
                s.first.get_or_insert((orig_cpu, e.ts_ns));
                if orig_cpu == dest_cpu {
                    continue;
                }
                s.pending_numa.retain(|p| e.ts_ns - p.0 <= NUMA_MATCH_NS);
                let numa = s
                    .pending_numa
                    .iter()
                    .position(|p| p.1 == orig_cpu as i32 && p.2 == dest_cpu as i32);
                let cause = if let Some(i) = numa {
                    s.pending_numa.remove(i);
                    Cause::NumaBalancing
                } else {
                    match s.asleep {
                        Some(true) => Cause::Wakeup,
                        Some(false) => Cause::LoadBalance,
                        None => Cause::Unknown,
                    }
                };
                // A pull still waiting for its switch-in was moved on first.
                s.pending_pull = None;
                let kind =
                    (cause == Cause::LoadBalance && e.cpu == orig_cpu).then_some(LbKind::Pushed);
                if cause == Cause::LoadBalance && kind.is_none() {
                    let idle_then = follows_idle
                        .then(|| cpu_idle.get(&dest_cpu).copied())
                        .flatten();
                    s.pending_pull = Some((s.moves.len(), e.ts_ns, dest_cpu, idle_then));
                }
                s.moves.push((
                    Migration {
                        t_ns: e.ts_ns - window.start_ns,
                        from: orig_cpu,
                        to: dest_cpu,
                    },
                    cause,
                    kind,
                ));
            }
            Kind::MoveNuma {
                pid,
                src_cpu,
                dst_cpu,
                ..
            } => {
                if let Some(s) = st.get_mut(&pid) {
                    s.numa.move_numa += 1;
                    s.pending_numa.push((e.ts_ns, src_cpu, dst_cpu));
                }
            }
            Kind::SwapNuma {
                src_pid,
                src_cpu,
                dst_pid,
                dst_cpu,
                ..
            } => {
                if let Some(s) = st.get_mut(&src_pid) {
                    s.numa.swap_numa += 1;
                    s.pending_numa.push((e.ts_ns, src_cpu, dst_cpu));
                }
                if let Some(s) = st.get_mut(&dst_pid) {
                    s.numa.swap_numa += 1;
                    s.pending_numa.push((e.ts_ns, dst_cpu, src_cpu));
                }
            }
            Kind::StickNuma { pid, .. } => {
                if let Some(s) = st.get_mut(&pid) {
                    s.numa.stick_numa += 1;
                }
            }
            Kind::Fork {
                parent_pid,
                child_pid,
            } => {
                if follow_forks && st.contains_key(&parent_pid) && !st.contains_key(&child_pid) {
                    st.insert(
                        child_pid,
                        State {
                            parent: Some(parent_pid),
                            asleep: Some(true),
                            seen_switch: true,
                            ..State::default()
                        },
                    );
                }
            }
            Kind::Exit { pid } => {
                if let Some(s) = st.get_mut(&pid) {
                    s.exit_ns = Some(e.ts_ns);
                }
            }
        }
    }
    st.into_iter()
        .map(|(pid, mut s)| {
            if let Some((cpu, t)) = s.running.take() {
                s.segments.push(Segment {
                    cpu,
                    ns: window.end_ns.saturating_sub(t),
                });
            }
            let mem = mem_node(pid);
            let plain: Vec<Migration> = s.moves.iter().map(|m| m.0).collect();
            let mut causes = Causes::default();
            let mut cross = Causes::default();
            let (mut kinds, mut cross_kinds) = (BalanceKinds::default(), BalanceKinds::default());
            for (m, c, k) in &s.moves {
                let crossing = topo.relation(m.from, m.to) == crate::topology::Relation::CrossNode;
                causes.add(*c);
                if crossing {
                    cross.add(*c);
                }
                if *c == Cause::LoadBalance {
                    kinds.add(*k);
                    if crossing {
                        cross_kinds.add(*k);
                    }
                }
            }
            TaskTrace {
                pid,
                parent: s.parent,
                mem_node: mem,
                migrate_events: s.migrate_events,
                migrations: classify(topo, mem, &plain),
                causes,
                cross_node_causes: cross,
                numa: s.numa,
                balancing: Some(kinds),
                cross_node_balancing: Some(cross_kinds),
                residency: residency(topo, mem, &s.segments),
                first_cpu: s.first.map(|f| f.0),
                exited: s.exit_ns.is_some(),
                over_time: life_over_time(topo, mem, &s, window),
                moves: s
                    .moves
                    .iter()
                    .map(|(m, c, _)| TracedMove {
                        t_ns: m.t_ns,
                        from: m.from,
                        to: m.to,
                        cause: *c,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// A task's moves over its own life in the window (from its first sight
/// to its exit, or the window's end), as a simulated task's are over its
/// whole run.
fn life_over_time(
    topo: &Topology,
    mem: Option<u32>,
    s: &State,
    window: Window,
) -> Option<crate::analysis::OverTime> {
    let (first_cpu, first) = s.first?;
    let first = first.max(window.start_ns);
    let end = s.exit_ns.unwrap_or(window.end_ns).max(first);
    let moves: Vec<(Migration, bool)> = s
        .moves
        .iter()
        .map(|(m, c, _)| {
            let t = (window.start_ns + m.t_ns).saturating_sub(first);
            (Migration { t_ns: t, ..*m }, *c == Cause::NumaBalancing)
        })
        .collect();
    crate::analysis::over_time(topo, mem, Some(first_cpu), end - first, &moves)
}

#[cfg(test)]
#[path = "analyze_tests.rs"]
mod tests;
