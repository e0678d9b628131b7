//! When to widen a task's CPUs and when to narrow them back: a pure
//! function of what one window showed, so it is tested without a machine.
//!
//! Every window (default 500 ms) the agent measures, per task, the share of
//! the window it spent waiting for a CPU (run delay, schedstat field 2) and
//! running (field 1), and for the homenode the idle CPU capacity (sum over
//! its CPUs of their idle share, from /proc/stat).
//!
//! - A **narrow** task (allowed CPUs = homenode's ∩ its own) that waited at
//!   least `widen_delay` of the window, while a CPU of its own mask outside
//!   the homenode was idle at least `widen_gain` more of the window than
//!   the task got to run, for `widen_windows` windows in a row, is
//!   **widened** to its own mask (work-conserving: a CPU elsewhere idles
//!   while it waits). Waiting alone is not enough: under an even load (the
//!   RFC's 60 % on every CPU) a task waits as much on any CPU, and moving it
//!   would only take it from its memory. Nor is a CPU idle in the window
//!   enough: the move must also even the load out over the window
//!   ([`Window::evens_out`], the test numalab's scheduler makes on its load
//!   averages): the homenode's demand per CPU without the task (its CPUs'
//!   busy time plus the followed tasks' waiting there) must stay at least
//!   the busy time per CPU, with the task, of the least busy other node
//!   it may run on. Under a
//!   duty-cycled load on every CPU a homenode with the task is over its
//!   CPUs part of the time while CPUs elsewhere idle in their load's
//!   pauses; moving it would only trade the one overload for the other.
//! - A **wide** task is **narrowed** back (re-attraction) once it has been
//!   wide for `min_wide` windows and the homenode had room for it for
//!   `narrow_windows` windows in a row. Room: idle capacity, minus
//!   `narrow_margin` CPUs, minus the demand of wide tasks already counted
//!   this window (longest away first), covers the task's demand (its running
//!   plus waiting share). So several tasks do not all rush back into room
//!   for one. A wide task that was last seen on a homenode CPU and did not
//!   wait already has its room (its demand is in the node's busy time).
//! - Hysteresis against thrash: a task widened again within
//!   `thrash_windows` of being narrowed doubles its `min_wide` (up to
//!   `max_wide`); one that stayed narrow longer starts again from the base.

use serde::Serialize;

/// The thresholds, all options of `numalab home` (defaults in
/// [`Thresholds::default`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Widen when the task waited at least this share of a window (0..1).
    pub widen_delay: f64,
    /// ... while a CPU outside the homenode idled this much more of the
    /// window than the task ran ...
    pub widen_gain: f64,
    /// ... for this many windows in a row.
    pub widen_windows: u32,
    /// Idle CPUs the homenode keeps in reserve before a task comes back.
    pub narrow_margin: f64,
    /// The homenode had room for this many windows in a row.
    pub narrow_windows: u32,
    /// A widened task stays wide at least this many windows.
    pub min_wide: u32,
    /// The longest `min_wide` grows to under thrash.
    pub max_wide: u32,
    /// Widened again within this many windows of being narrowed: thrash.
    pub thrash_windows: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            widen_delay: 0.10,
            widen_gain: 0.20,
            widen_windows: 2,
            narrow_margin: 0.25,
            narrow_windows: 3,
            min_wide: 4,
            max_wide: 64,
            thrash_windows: 10,
        }
    }
}

impl Thresholds {
    /// Checks the values (the CLI's bounds, for library callers too).
    pub fn check(&self) -> Result<(), String> {
        if !(self.widen_delay > 0.0 && self.widen_delay <= 1.0) {
            return Err(format!("widen delay {} is not in (0, 1]", self.widen_delay));
        }
        if !(self.widen_gain >= 0.0 && self.widen_gain <= 1.0) {
            return Err(format!("widen gain {} is not in [0, 1]", self.widen_gain));
        }
        if !(self.narrow_margin >= 0.0 && self.narrow_margin.is_finite()) {
            return Err(format!("narrow margin {} is not >= 0", self.narrow_margin));
        }
        if self.widen_windows == 0 || self.narrow_windows == 0 || self.min_wide == 0 {
            return Err("window counts must be at least 1".into());
        }
        if self.max_wide < self.min_wide {
            return Err(format!(
                "max wide {} is below min wide {}",
                self.max_wide, self.min_wide
            ));
        }
        Ok(())
    }
}

/// Where a task may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Homenode's CPUs ∩ the task's own mask.
    Narrow,
    /// The task's own mask.
    Wide,
}

/// Why a task changed mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// It waited too long for a CPU on its homenode.
    RunDelay,
    /// Its homenode has room for it again.
    HomeHasRoom,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::RunDelay => "run-delay",
            Reason::HomeHasRoom => "home-has-room",
        }
    }
}

/// A task's policy state, carried from window to window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState {
    pub mode: Mode,
    /// Windows in a row with run delay over the threshold (narrow tasks).
    pub over: u32,
    /// Windows in a row the homenode had room (wide tasks).
    pub room: u32,
    /// Windows since the last change.
    pub in_mode: u32,
    /// The current least stay wide (grows under thrash).
    pub min_wide: u32,
    /// The last narrowing was a re-attraction (not the first placement):
    /// a widening soon after it is thrash.
    pub returned: bool,
}

impl TaskState {
    /// A task just placed on its homenode.
    pub fn narrow(th: &Thresholds) -> TaskState {
        TaskState {
            mode: Mode::Narrow,
            over: 0,
            room: 0,
            in_mode: 0,
            min_wide: th.min_wide,
            returned: false,
        }
    }
}

/// What one window showed of a task, as shares of the window (0..1 each;
/// a task's own threads cannot run or wait more than the window).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Time waiting on a runqueue / window.
    pub delay: f64,
    /// Time running / window.
    pub run: f64,
    /// A wide task last seen on a homenode CPU: bringing it back takes no
    /// room it does not already use.
    pub on_home: bool,
    /// The idlest CPU of the task's own mask outside the homenode: its
    /// idle share of the window (0 when there is none).
    pub away_idle: f64,
    /// The homenode's demand over the window, in CPUs: its CPUs' busy
    /// shares plus the run delay of the followed tasks narrowed to it.
    pub home_demand: f64,
    pub home_cpus: f64,
    /// Of the other nodes, the least busy per CPU within the task's own
    /// mask: its CPUs' busy shares summed, and how many they are.
    pub away_busy: f64,
    pub away_cpus: f64,
}

impl Window {
    /// Whether moving this task off its homenode evens the load out over
    /// the window: the homenode's demand per CPU without it stays at least
    /// that of the CPUs it would go to, with it.
    pub fn evens_out(&self) -> bool {
        if self.home_cpus <= 0.0 || self.away_cpus <= 0.0 {
            return false;
        }
        let d = (self.run + self.delay).clamp(0.0, 1.0);
        (self.home_demand - d) / self.home_cpus >= (self.away_busy + d) / self.away_cpus
    }
}

/// A change for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub to: Mode,
    pub reason: Reason,
}

/// One window's step for every task: the new states and the changes.
/// `home_idle` is the homenode's idle CPU capacity over the window.
pub fn step(
    th: &Thresholds,
    home_idle: f64,
    tasks: &[(TaskState, Window)],
) -> Vec<(TaskState, Option<Change>)> {
    let mut out: Vec<(TaskState, Option<Change>)> = tasks.iter().map(|(s, _)| (*s, None)).collect();
    // Narrow tasks: widen on sustained run delay.
    for (i, (s, w)) in tasks.iter().enumerate() {
        if s.mode != Mode::Narrow {
            continue;
        }
        let mut n = *s;
        n.in_mode = n.in_mode.saturating_add(1);
        n.over =
            if w.delay >= th.widen_delay && w.away_idle >= w.run + th.widen_gain && w.evens_out() {
                n.over + 1
            } else {
                0
            };
        if n.over >= th.widen_windows {
            let thrash = n.returned && n.in_mode <= th.thrash_windows;
            n.min_wide = if thrash {
                n.min_wide.saturating_mul(2).min(th.max_wide)
            } else {
                th.min_wide
            };
            n = TaskState {
                mode: Mode::Wide,
                over: 0,
                room: 0,
                in_mode: 0,
                ..n
            };
            out[i] = (
                n,
                Some(Change {
                    to: Mode::Wide,
                    reason: Reason::RunDelay,
                }),
            );
        } else {
            out[i] = (n, None);
        }
    }
    // Wide tasks, longest away first, share the homenode's room.
    let mut wide: Vec<usize> = (0..tasks.len())
        .filter(|&i| tasks[i].0.mode == Mode::Wide)
        .collect();
    wide.sort_by_key(|&i| (std::cmp::Reverse(tasks[i].0.in_mode), i));
    let mut budget = if home_idle.is_finite() {
        home_idle - th.narrow_margin
    } else {
        0.0
    };
    for i in wide {
        let (s, w) = tasks[i];
        let mut n = s;
        n.in_mode = n.in_mode.saturating_add(1);
        let need = (w.run + w.delay).clamp(0.0, 1.0);
        if w.on_home && w.delay < th.widen_delay {
            // Already running at home without waiting: its demand is in
            // the node's busy time, not in its room.
            n.room += 1;
        } else if budget >= need && budget > 0.0 {
            budget -= need;
            n.room += 1;
        } else {
            n.room = 0;
        }
        if n.room >= th.narrow_windows && n.in_mode >= n.min_wide {
            n = TaskState {
                mode: Mode::Narrow,
                over: 0,
                room: 0,
                in_mode: 0,
                returned: true,
                ..n
            };
            out[i] = (
                n,
                Some(Change {
                    to: Mode::Narrow,
                    reason: Reason::HomeHasRoom,
                }),
            );
        } else {
            out[i] = (n, None);
        }
    }
    out
}

/// The masks of a task: (narrow, wide) = (homenode ∩ own, own). `None`
/// when its own mask leaves out the whole homenode: such a task is never
/// narrowed (its cpuset is respected).
pub fn masks(
    own: &crate::idset::IdSet,
    home: &crate::idset::IdSet,
) -> Option<(crate::idset::IdSet, crate::idset::IdSet)> {
    let narrow = own.intersection(home);
    (!narrow.is_empty()).then(|| (narrow, own.clone()))
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
