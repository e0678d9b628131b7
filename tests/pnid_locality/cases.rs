//! The cases of tests/pnid_patch_locality.rs: one call of the patched
//! `migrate_degrades_locality()` each, with the value 6.12 needs and why.
//!
//! What the values mean is 6.12's `can_migrate_task()`:
//!
//! ```c
//! tsk_cache_hot = migrate_degrades_locality(p, env);
//! if (tsk_cache_hot == -1)
//!         tsk_cache_hot = task_hot(p, env);
//! if (tsk_cache_hot <= 0 || env->sd->nr_balance_failed > env->sd->cache_nice_tries)
//!         ... migrate
//! ```
//!
//! 1 = degrades locality (keep the task unless balancing keeps failing),
//! 0 = improves it (migrate, task_hot() is never asked), -1 = no opinion
//! (task_hot() decides). On the mock machine CPU c is on node c / 2; the
//! base move is CPU 0 (node 0) to CPU 2 (node 1).

use super::{Input, BASE, CPU_IDLE, CPU_NEWLY_IDLE};

pub struct Case {
    pub name: &'static str,
    pub why: &'static str,
    pub input: Input,
    pub want: i32,
}

/// The case a literal port of the post-6.14 series gets wrong.
pub const NO_FAULTS: &str = "no faults, not forced";
/// The case that needs the series' second -1 (two zero weights).
pub const FORCED_ELSEWHERE: &str = "forced to node 2 without faults, moving node 0 -> 1";

/// Task weights with node 0 (the source) ahead of node 1 (the destination).
const SRC_AHEAD: [i32; 4] = [600, 300, 100, 0];
/// Task weights with node 1 (the destination) ahead.
const DST_AHEAD: [i32; 4] = [300, 600, 100, 0];

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "NUMA balancing off",
            why: "the first check: no NUMA balancing, no locality opinion",
            input: Input {
                numa_balancing: false,
                force: 1,
                pref: 1,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: "not an SD_NUMA domain",
            why: "balancing inside a node is not a NUMA question, forced or not",
            input: Input {
                sd_numa: false,
                force: 1,
                pref: 1,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: NO_FAULTS,
            why: "THE case: nearly every task; 0 here would skip task_hot() for all of them \
                  (docs/preferred-node.md, the convention)",
            input: BASE,
            want: -1,
        },
        Case {
            name: "no faults, not forced, stale preferred node = destination",
            why: "without faults or a forced node 6.12 has no opinion whatever \
                  numa_preferred_nid says",
            input: Input { pref: 1, ..BASE },
            want: -1,
        },
        Case {
            name: "forced to node 0 without faults, moving within node 0",
            why: "same node: not a NUMA move",
            input: Input {
                force: 0,
                pref: 0,
                dst_cpu: 1,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: "forced to the source node without faults, source rq has others",
            why: "moving off the preferred node degrades locality while the source rq \
                  runs tasks that do not prefer it (nr_running > nr_preferred_running)",
            input: Input {
                force: 0,
                pref: 0,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "forced to the source node without faults, all of source rq prefers it",
            why: "6.12: nr_running == nr_preferred_running, so no opinion (one of them \
                  has to go)",
            input: Input {
                force: 0,
                pref: 0,
                nr_running: 2,
                nr_preferred: 2,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: "forced to the destination node without faults",
            why: "moving onto the preferred node improves locality: migrate",
            input: Input {
                force: 1,
                pref: 1,
                ..BASE
            },
            want: 0,
        },
        Case {
            name: "forced to the destination node without faults, CPU_IDLE",
            why: "the preferred-node checks come before 6.12's idle check",
            input: Input {
                force: 1,
                pref: 1,
                idle: CPU_IDLE,
                ..BASE
            },
            want: 0,
        },
        Case {
            name: "forced to the source node without faults, CPU_IDLE",
            why: "the preferred-node checks come before 6.12's idle check",
            input: Input {
                force: 0,
                pref: 0,
                idle: CPU_IDLE,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: FORCED_ELSEWHERE,
            why: "no weights to compare (both 0, and 0 < 0 would read as 0, \"improves\"): \
                  no opinion",
            input: Input {
                force: 2,
                pref: 2,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: "forced to node 2 with faults, moving node 0 -> 1, source ahead",
            why: "with faults a forced task is weighed as 6.12 weighs any task: \
                  dst_weight < src_weight degrades",
            input: Input {
                force: 2,
                pref: 2,
                faults: true,
                task_w: SRC_AHEAD,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "faults, no preferred node, source ahead",
            why: "6.12: return dst_weight < src_weight; true = 1, degrades",
            input: Input {
                faults: true,
                task_w: SRC_AHEAD,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "faults, no preferred node, destination ahead",
            why: "6.12: dst_weight < src_weight is false = 0, improves",
            input: Input {
                faults: true,
                task_w: DST_AHEAD,
                ..BASE
            },
            want: 0,
        },
        Case {
            name: "faults, equal weights",
            why: "6.12: dst_weight < src_weight is false = 0 (equal weights count as \
                  improving)",
            input: Input {
                faults: true,
                task_w: [400, 400, 200, 0],
                ..BASE
            },
            want: 0,
        },
        Case {
            name: "faults, source ahead, CPU_IDLE",
            why: "6.12: leaving a core idle is often worse than degrading locality, -1",
            input: Input {
                faults: true,
                task_w: SRC_AHEAD,
                idle: CPU_IDLE,
                ..BASE
            },
            want: -1,
        },
        Case {
            name: "faults, source ahead, CPU_NEWLY_IDLE",
            why: "only CPU_IDLE short-cuts the weights in 6.12",
            input: Input {
                faults: true,
                task_w: SRC_AHEAD,
                idle: CPU_NEWLY_IDLE,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "faults in a numa_group: group weights decide",
            why: "6.12 compares group_weight() when the task has a numa_group (here the \
                  task's own weights would say 0)",
            input: Input {
                faults: true,
                group: true,
                task_w: DST_AHEAD,
                group_w: SRC_AHEAD,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "faults, computed preferred node = source",
            why: "6.12 unchanged: migrating away from the preferred node is bad",
            input: Input {
                faults: true,
                pref: 0,
                task_w: DST_AHEAD,
                ..BASE
            },
            want: 1,
        },
        Case {
            name: "faults, computed preferred node = destination",
            why: "6.12 unchanged: encourage migration to the preferred node",
            input: Input {
                faults: true,
                pref: 1,
                task_w: SRC_AHEAD,
                ..BASE
            },
            want: 0,
        },
    ]
}
