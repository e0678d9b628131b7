//! The scheduler events numalab traces, as plain data.
//!
//! Whatever the source (the kernel's binary ring buffer decoded through the
//! event format files, or a saved `trace-cmd report` / `perf script` text),
//! a trace becomes a time-ordered list of [`Event`]s. Analysis
//! ([`super::analyze`]) only ever sees this model.

use serde::{Deserialize, Serialize};

/// Event names, as tracefs spells them (system `sched`).
pub const MIGRATE: &str = "sched_migrate_task";
pub const SWITCH: &str = "sched_switch";
pub const MOVE_NUMA: &str = "sched_move_numa";
pub const SWAP_NUMA: &str = "sched_swap_numa";
pub const STICK_NUMA: &str = "sched_stick_numa";
pub const FORK: &str = "sched_process_fork";
pub const EXIT: &str = "sched_process_exit";

/// One traced event: when (ns, in the trace clock), on which CPU it was
/// recorded, and what it says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub ts_ns: u64,
    pub cpu: u32,
    pub kind: Kind,
}

/// What an event says. Pids are kernel task ids (thread ids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Kind {
    /// sched_migrate_task: `pid` moved from `orig_cpu` to `dest_cpu`.
    Migrate {
        pid: u32,
        orig_cpu: u32,
        dest_cpu: u32,
    },
    /// sched_switch on `cpu`: `prev_pid` leaves, `next_pid` starts.
    /// `prev_runnable` is true when the previous task was preempted or
    /// yielded (state R/R+), false when it went to sleep, blocked or died.
    Switch {
        prev_pid: u32,
        prev_runnable: bool,
        next_pid: u32,
    },
    /// sched_move_numa: NUMA balancing moves `pid` to a CPU on its
    /// preferred node (the migration itself follows as a Migrate).
    MoveNuma {
        pid: u32,
        src_cpu: i32,
        src_nid: i32,
        dst_cpu: i32,
        dst_nid: i32,
    },
    /// sched_swap_numa: NUMA balancing swaps two tasks' CPUs.
    SwapNuma {
        src_pid: u32,
        src_cpu: i32,
        src_nid: i32,
        dst_pid: u32,
        dst_cpu: i32,
        dst_nid: i32,
    },
    /// sched_stick_numa: NUMA balancing wanted to move `pid` and could not
    /// (no CPU found, or the move failed); `dst_cpu` is -1 when none.
    StickNuma {
        pid: u32,
        src_cpu: i32,
        src_nid: i32,
        dst_cpu: i32,
        dst_nid: i32,
    },
    /// sched_process_fork: `parent_pid` made `child_pid`.
    Fork { parent_pid: u32, child_pid: u32 },
    /// sched_process_exit: `pid` exits.
    Exit { pid: u32 },
}

impl Kind {
    /// The tracefs event name of this kind.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Migrate { .. } => MIGRATE,
            Kind::Switch { .. } => SWITCH,
            Kind::MoveNuma { .. } => MOVE_NUMA,
            Kind::SwapNuma { .. } => SWAP_NUMA,
            Kind::StickNuma { .. } => STICK_NUMA,
            Kind::Fork { .. } => FORK,
            Kind::Exit { .. } => EXIT,
        }
    }
}

/// sched_switch's raw `prev_state`: the task was runnable (R or R+) when no
/// sleeping/stopped/dead bit is set. Since Linux 4.14 the low 8 bits are the
/// TASK_REPORT states and preemption adds TASK_REPORT_MAX (0x100 and up);
/// before that TASK_RUNNING was 0 as well and preemption set a high bit.
pub fn prev_state_runnable(raw: i64) -> bool {
    raw & 0xff == 0
}

/// The same from the letters trace output prints (`R`, `R+`, `S`, `D|W`...).
pub fn prev_state_letters_runnable(s: &str) -> bool {
    let s = s.trim();
    s == "R" || s == "R+"
}

/// Sorts events by time; events with the same time keep the order they had
/// (per-CPU buffers are merged, and a CPU's own events are already ordered).
pub fn sort(events: &mut [Event]) {
    events.sort_by_key(|e| e.ts_ns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runnable_from_raw_and_letters() {
        assert!(prev_state_runnable(0));
        assert!(prev_state_runnable(0x100)); // R+ (preempted), 4.14+
        assert!(prev_state_runnable(0x400)); // R+ with a wider TASK_REPORT_MAX
        assert!(!prev_state_runnable(1)); // S
        assert!(!prev_state_runnable(2)); // D
        assert!(!prev_state_runnable(0x80)); // I
        assert!(prev_state_letters_runnable("R+"));
        assert!(prev_state_letters_runnable("R"));
        assert!(!prev_state_letters_runnable("S"));
        assert!(!prev_state_letters_runnable("D|K"));
    }

    #[test]
    fn json_is_tagged_by_event_name() {
        let e = Event {
            ts_ns: 5,
            cpu: 1,
            kind: Kind::Migrate {
                pid: 7,
                orig_cpu: 0,
                dest_cpu: 2,
            },
        };
        let j = serde_json::to_string(&e).unwrap();
        assert!(j.contains(r#""event":"migrate""#), "{j}");
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), e);
    }
}
