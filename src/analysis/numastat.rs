//! The kernel's NUMA-balancing statistics, parsed from procfs text.
//!
//! Two sources, both plain text, parsed here without touching the system
//! (the probe does the reading, fail-soft):
//!
//! **/proc/PID/sched** (and /proc/PID/task/TID/sched, /proc/thread-self/sched)
//! is written by `proc_sched_show_task()` in kernel/sched/debug.c
//! (CONFIG_SCHED_DEBUG). Its last part, `sched_show_numa()`, exists only with
//! CONFIG_NUMA_BALANCING and prints, per task:
//!
//! ```text
//! mm->numa_scan_seq                            :                    0
//! numa_pages_migrated                          :                    0
//! numa_preferred_nid                           :                   -1
//! total_numa_faults                            :                    0
//! current_node=0, numa_group_id=0
//! numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0
//! ```
//!
//! The `name : value` lines are `SEQ_printf(m, "%-45s:%21Ld\n", ...)`: the
//! name padded to 45 columns, a colon, the value right-aligned in 21.
//! - `mm->numa_scan_seq`: how many times the NUMA scanner has finished a pass
//!   over the address space (`mm->numa_scan_seq`); printed only when the task
//!   has an mm (not for kernel threads).
//! - `numa_pages_migrated`: pages NUMA balancing migrated on this task's
//!   hinting faults, over the task's life (`p->numa_pages_migrated`).
//! - `numa_preferred_nid`: the node the scheduler prefers to run the task on
//!   (`p->numa_preferred_nid`), -1 (NUMA_NO_NODE) for none.
//! - `total_numa_faults`: the task's memory faults summed over nodes; the
//!   per-node counts are halved each time `task_numa_placement()` sees a
//!   new scan pass (kernel/sched/fair.c), so this is a recent weighted
//!   count, not a total since birth.
//! - `current_node=N, numa_group_id=M`: the node of the CPU it is on
//!   (`task_node()`) and the id of the group of tasks sharing memory with it
//!   (`task_numa_group_id()`, 0 for none).
//! - one `numa_faults node=N task_private=A task_shared=B group_private=C
//!   group_shared=D` line per online node, from `show_numa_stats()` in
//!   kernel/sched/fair.c through `print_numa_stats()` in debug.c: the decayed
//!   hinting faults on memory of node N, split into private (last touched by
//!   this task) and shared, for the task and for its numa group.
//!
//! `numa_preferred_nid_force` is not upstream: an out-of-tree patch that lets
//! user space force the preferred node prints it in the same `name : value`
//! format; it is kept when present.
//!
//! **/proc/vmstat** is written by `vmstat_start()`/`vmstat_show()` in
//! mm/vmstat.c from `vmstat_text[]`, one `name value` line each. The NUMA
//! ones: the allocation counters `numa_hit`, `numa_miss`, `numa_foreign`,
//! `numa_interleave`, `numa_local`, `numa_other` (CONFIG_NUMA); the balancing
//! events `numa_pte_updates`, `numa_huge_pte_updates`, `numa_hint_faults`,
//! `numa_hint_faults_local`, `numa_pages_migrated` (CONFIG_NUMA_BALANCING);
//! and, from page migration (CONFIG_MIGRATION), `pgmigrate_success`,
//! `pgmigrate_fail`, `thp_migration_success`, `thp_migration_fail`. These are
//! system-wide counters: a delta over a probe run includes every other task.
//!
//! Every field is optional: kernels without CONFIG_NUMA_BALANCING print none
//! of them, and a line that does not parse is skipped, not fatal.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The NUMA part of one task's /proc/PID/sched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaSched {
    /// `mm->numa_scan_seq`: completed NUMA scan passes over the mm.
    #[serde(default)]
    pub numa_scan_seq: Option<i64>,
    /// Pages migrated on this task's hinting faults, over its life.
    #[serde(default)]
    pub numa_pages_migrated: Option<u64>,
    /// The scheduler's preferred node, -1 for none.
    #[serde(default)]
    pub numa_preferred_nid: Option<i32>,
    /// A forced preferred node (out-of-tree patch), -1 for none.
    #[serde(default)]
    pub numa_preferred_nid_force: Option<i32>,
    /// Decayed memory faults summed over nodes.
    #[serde(default)]
    pub total_numa_faults: Option<u64>,
    /// Node of the CPU the task was on when the file was read.
    #[serde(default)]
    pub current_node: Option<i32>,
    /// The task's numa group, 0 for none.
    #[serde(default)]
    pub numa_group_id: Option<i32>,
    /// Node id -> decayed hinting faults on that node's memory; empty when
    /// the kernel prints no `numa_faults` lines.
    #[serde(default)]
    pub faults: BTreeMap<u32, NodeFaults>,
}

/// One `numa_faults node=N ...` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFaults {
    #[serde(default)]
    pub task_private: Option<u64>,
    #[serde(default)]
    pub task_shared: Option<u64>,
    #[serde(default)]
    pub group_private: Option<u64>,
    #[serde(default)]
    pub group_shared: Option<u64>,
}

impl NodeFaults {
    /// The task's faults on this node (private + shared), if either parsed.
    pub fn task_total(&self) -> Option<u64> {
        match (self.task_private, self.task_shared) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    }
}

impl NumaSched {
    /// True when no NUMA field was found (no CONFIG_NUMA_BALANCING, or no
    /// scheduler debug file at all).
    pub fn is_empty(&self) -> bool {
        *self == NumaSched::default()
    }

    /// The task's faults summed over nodes, (private, shared); `None` when
    /// the kernel printed no `numa_faults` lines.
    pub fn fault_totals(&self) -> Option<(u64, u64)> {
        if self.faults.is_empty() {
            return None;
        }
        Some(self.faults.values().fold((0, 0), |(p, s), f| {
            (
                p + f.task_private.unwrap_or(0),
                s + f.task_shared.unwrap_or(0),
            )
        }))
    }

    /// The task's faults on memory of the node it is currently on.
    pub fn faults_on_current_node(&self) -> Option<u64> {
        let node = u32::try_from(self.current_node?).ok()?;
        self.faults.get(&node)?.task_total()
    }
}

/// Parses the NUMA fields of a /proc/PID/sched text; absent or malformed
/// fields are `None`.
pub fn parse_proc_sched_numa(text: &str) -> NumaSched {
    let mut s = NumaSched::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("numa_faults ") {
            if let Some((node, f)) = parse_faults_line(rest) {
                s.faults.insert(node, f);
            }
            continue;
        }
        if line.starts_with("current_node=") {
            for (k, v) in key_values(line) {
                match k {
                    "current_node" => s.current_node = v.parse().ok(),
                    "numa_group_id" => s.numa_group_id = v.parse().ok(),
                    _ => {}
                }
            }
            continue;
        }
        let Some((key, value)) = crate::sys::sched_pair(line) else {
            continue;
        };
        match key {
            "mm->numa_scan_seq" => s.numa_scan_seq = value.parse().ok(),
            "numa_pages_migrated" => s.numa_pages_migrated = value.parse().ok(),
            "numa_preferred_nid" => s.numa_preferred_nid = value.parse().ok(),
            "numa_preferred_nid_force" => s.numa_preferred_nid_force = value.parse().ok(),
            "total_numa_faults" => s.total_numa_faults = value.parse().ok(),
            _ => {}
        }
    }
    s
}

/// `key=value` pairs of a line, separated by spaces and/or commas.
fn key_values(line: &str) -> impl Iterator<Item = (&str, &str)> {
    line.split([' ', ',']).filter_map(|tok| tok.split_once('='))
}

/// `node=N task_private=A task_shared=B group_private=C group_shared=D`.
fn parse_faults_line(rest: &str) -> Option<(u32, NodeFaults)> {
    let mut node = None;
    let mut f = NodeFaults::default();
    for (k, v) in key_values(rest) {
        let n = v.parse().ok();
        match k {
            "node" => node = v.parse().ok(),
            "task_private" => f.task_private = n,
            "task_shared" => f.task_shared = n,
            "group_private" => f.group_private = n,
            "group_shared" => f.group_shared = n,
            _ => {}
        }
    }
    Some((node?, f))
}

/// /proc/vmstat counters kept besides every `numa_*` one.
pub const VMSTAT_MIGRATION_KEYS: &[&str] = &[
    "pgmigrate_success",
    "pgmigrate_fail",
    "thp_migration_success",
    "thp_migration_fail",
];

/// True for the /proc/vmstat counters [`parse_vmstat_numa`] keeps.
pub fn is_numa_vmstat_key(name: &str) -> bool {
    name.starts_with("numa_") || VMSTAT_MIGRATION_KEYS.contains(&name)
}

/// Every `numa_*` counter of a /proc/vmstat text, and the page-migration
/// counters in [`VMSTAT_MIGRATION_KEYS`]; lines that do not parse are
/// skipped.
pub fn parse_vmstat_numa(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let (name, value) = (it.next()?, it.next()?);
            if it.next().is_some() || !is_numa_vmstat_key(name) {
                return None;
            }
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `after - before` for every counter present in both, saturating at 0 (a
/// counter that went down, e.g. after a reset, gives 0).
pub fn vmstat_delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, a)| Some((k.clone(), a.saturating_sub(*before.get(k)?))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat /proc/self/sched` on the development machine (kernel 6.18, one
    /// node, CONFIG_NUMA_BALANCING).
    const REAL_SCHED: &str = include_str!("../../tests/fixtures/proc/sched-6.18-1node.txt");
    /// `cat /proc/vmstat` on the same machine.
    const REAL_VMSTAT: &str = include_str!("../../tests/fixtures/proc/vmstat-6.18-1node.txt");

    /// A two-node task in a numa group after NUMA balancing moved it, in the
    /// kernel's exact format (`%-45s:%21Ld`, `%-45s:%14Ld.%06ld`).
    const TWO_NODES: &str = "\
probe (4242, #threads: 2)
-------------------------------------------------------------------
se.exec_start                                :       9127383.272909
se.vruntime                                  :           105.088146
se.sum_exec_runtime                          :          2911.004512
se.nr_migrations                             :                   37
nr_switches                                  :                  812
policy                                       :                    0
prio                                         :                  120
clock-delta                                  :                   70
mm->numa_scan_seq                            :                   12
numa_pages_migrated                          :                 4096
numa_preferred_nid                           :                    1
total_numa_faults                            :                 5121
current_node=1, numa_group_id=4242
numa_faults node=0 task_private=310 task_shared=2 group_private=655 group_shared=3
numa_faults node=1 task_private=4790 task_shared=19 group_private=9001 group_shared=40
";

    /// Four nodes, the out-of-tree forced preferred node, no numa group.
    const FOUR_NODES_FORCED: &str = "\
probe (977, #threads: 1)
-------------------------------------------------------------------
se.nr_migrations                             :                    3
clock-delta                                  :                   41
mm->numa_scan_seq                            :                    3
numa_pages_migrated                          :                    0
numa_preferred_nid                           :                    2
numa_preferred_nid_force                     :                    2
total_numa_faults                            :                  128
current_node=2, numa_group_id=0
numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0
numa_faults node=1 task_private=0 task_shared=0 group_private=0 group_shared=0
numa_faults node=2 task_private=120 task_shared=8 group_private=0 group_shared=0
numa_faults node=3 task_private=0 task_shared=0 group_private=0 group_shared=0
";

    /// The `name : value` lines of the hand-written texts must be exactly
    /// what `%-45s:%21Ld` prints.
    #[test]
    fn hand_written_lines_match_the_kernel_format() {
        for text in [TWO_NODES, FOUR_NODES_FORCED, REAL_SCHED] {
            for line in text.lines().skip(2) {
                let Some((k, v)) = line.split_once(':') else {
                    assert!(
                        line.starts_with("current_node=") || line.starts_with("numa_faults node="),
                        "{line:?}"
                    );
                    continue;
                };
                let v = v.trim();
                let expect = if let Some((s, ns)) = v.split_once('.') {
                    format!("{:<45}:{:>14}.{ns:0>6}", k.trim_end(), s)
                } else {
                    format!("{:<45}:{:>21}", k.trim_end(), v)
                };
                assert_eq!(line, expect);
            }
        }
        assert_eq!(TWO_NODES.lines().nth(1), REAL_SCHED.lines().nth(1));
    }

    #[test]
    fn real_one_node_sched() {
        let s = parse_proc_sched_numa(REAL_SCHED);
        assert_eq!(s.numa_scan_seq, Some(0));
        assert_eq!(s.numa_pages_migrated, Some(0));
        assert_eq!(s.numa_preferred_nid, Some(-1));
        assert_eq!(s.numa_preferred_nid_force, None);
        assert_eq!(s.total_numa_faults, Some(0));
        assert_eq!(s.current_node, Some(0));
        assert_eq!(s.numa_group_id, Some(0));
        assert_eq!(s.faults.len(), 1);
        assert_eq!(
            s.faults[&0],
            NodeFaults {
                task_private: Some(0),
                task_shared: Some(0),
                group_private: Some(0),
                group_shared: Some(0),
            }
        );
        assert_eq!(s.faults_on_current_node(), Some(0));
        assert!(!s.is_empty());
    }

    #[test]
    fn two_nodes_with_a_group() {
        let s = parse_proc_sched_numa(TWO_NODES);
        assert_eq!(s.numa_scan_seq, Some(12));
        assert_eq!(s.numa_pages_migrated, Some(4096));
        assert_eq!(s.numa_preferred_nid, Some(1));
        assert_eq!(s.total_numa_faults, Some(5121));
        assert_eq!((s.current_node, s.numa_group_id), (Some(1), Some(4242)));
        assert_eq!(s.faults.keys().copied().collect::<Vec<_>>(), [0, 1]);
        let n0 = &s.faults[&0];
        assert_eq!(
            (
                n0.task_private,
                n0.task_shared,
                n0.group_private,
                n0.group_shared
            ),
            (Some(310), Some(2), Some(655), Some(3))
        );
        assert_eq!(s.faults[&1].group_shared, Some(40));
        // Faults on memory of the node it runs on: 4790 + 19.
        assert_eq!(s.faults_on_current_node(), Some(4809));
        assert_eq!(
            s.faults
                .values()
                .filter_map(|f| f.task_total())
                .sum::<u64>(),
            5121
        );
        // Summed over nodes, private and shared: 310 + 4790, 2 + 19.
        assert_eq!(s.fault_totals(), Some((5100, 21)));
        assert_eq!(NumaSched::default().fault_totals(), None);
    }

    #[test]
    fn four_nodes_and_the_forced_nid() {
        let s = parse_proc_sched_numa(FOUR_NODES_FORCED);
        assert_eq!(s.numa_preferred_nid, Some(2));
        assert_eq!(s.numa_preferred_nid_force, Some(2));
        assert_eq!(s.numa_group_id, Some(0));
        assert_eq!(s.faults.len(), 4);
        assert_eq!(s.faults[&2].task_total(), Some(128));
        assert_eq!(s.faults_on_current_node(), Some(128));
    }

    #[test]
    fn without_numa_balancing_or_mm() {
        // CONFIG_NUMA_BALANCING off: the file ends at clock-delta.
        let cut: String = REAL_SCHED
            .lines()
            .take_while(|l| !l.starts_with("mm->"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(cut.contains("clock-delta"));
        let s = parse_proc_sched_numa(&cut);
        assert!(s.is_empty());
        assert_eq!(s.faults_on_current_node(), None);
        assert!(parse_proc_sched_numa("").is_empty());

        // A kernel thread: no mm, so no numa_scan_seq line.
        let no_mm: String = TWO_NODES
            .lines()
            .filter(|l| !l.starts_with("mm->"))
            .map(|l| format!("{l}\n"))
            .collect();
        let s = parse_proc_sched_numa(&no_mm);
        assert_eq!(s.numa_scan_seq, None);
        assert_eq!(s.numa_preferred_nid, Some(1));
    }

    #[test]
    fn malformed_lines_are_skipped_not_fatal() {
        let text = "\
numa_pages_migrated                          :                  abc
numa_preferred_nid                           :                    0
total_numa_faults
current_node=x, numa_group_id=7
numa_faults node=? task_private=1 task_shared=1 group_private=1 group_shared=1
numa_faults node=1 task_private=5 task_shared=oops
";
        let s = parse_proc_sched_numa(text);
        assert_eq!(s.numa_pages_migrated, None);
        assert_eq!(s.numa_preferred_nid, Some(0));
        assert_eq!(s.total_numa_faults, None);
        assert_eq!((s.current_node, s.numa_group_id), (None, Some(7)));
        assert_eq!(s.faults.len(), 1);
        assert_eq!(s.faults[&1].task_private, Some(5));
        assert_eq!(s.faults[&1].task_shared, None);
        assert_eq!(s.faults[&1].task_total(), Some(5));
        assert_eq!(s.faults_on_current_node(), None);
    }

    #[test]
    fn real_vmstat() {
        let v = parse_vmstat_numa(REAL_VMSTAT);
        for k in [
            "numa_hit",
            "numa_miss",
            "numa_foreign",
            "numa_interleave",
            "numa_local",
            "numa_other",
            "numa_pte_updates",
            "numa_huge_pte_updates",
            "numa_hint_faults",
            "numa_hint_faults_local",
            "numa_pages_migrated",
            "pgmigrate_success",
            "pgmigrate_fail",
            "thp_migration_success",
            "thp_migration_fail",
        ] {
            assert!(v.contains_key(k), "{k} missing from {v:?}");
        }
        assert!(v.keys().all(|k| is_numa_vmstat_key(k)));
        // Nothing unrelated: not nr_*, not thp_migration_split.
        assert!(!v.contains_key("nr_free_pages"));
        assert!(!v.contains_key("thp_migration_split"));
        let expect = REAL_VMSTAT
            .lines()
            .filter(|l| l.starts_with("numa_hit "))
            .find_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
        assert_eq!(v.get("numa_hit").copied(), expect);
    }

    #[test]
    fn vmstat_with_odd_lines() {
        let v = parse_vmstat_numa(
            "nr_free_pages 12\nnuma_hit 10\nnuma_miss\nnuma_local x\nnuma_other 1 2\n\
             pgmigrate_success 3\npgmigrate_fail_nomem 9\n",
        );
        let want: BTreeMap<String, u64> = [
            ("numa_hit".to_string(), 10),
            ("pgmigrate_success".into(), 3),
        ]
        .into_iter()
        .collect();
        assert_eq!(v, want);
        assert!(parse_vmstat_numa("").is_empty());
    }

    #[test]
    fn delta_saturates_and_keeps_common_keys() {
        let before = parse_vmstat_numa("numa_hit 100\nnuma_hint_faults 7\nnuma_miss 5\n");
        let after = parse_vmstat_numa(
            "numa_hit 150\nnuma_hint_faults 7\nnuma_miss 2\nnuma_pages_migrated 9\n",
        );
        let d = vmstat_delta(&before, &after);
        let want: BTreeMap<String, u64> = [
            ("numa_hint_faults".to_string(), 0),
            ("numa_hit".into(), 50),
            ("numa_miss".into(), 0),
        ]
        .into_iter()
        .collect();
        assert_eq!(d, want);
        let real = parse_vmstat_numa(REAL_VMSTAT);
        assert!(vmstat_delta(&real, &real).values().all(|&v| v == 0));
        assert!(vmstat_delta(&BTreeMap::new(), &real).is_empty());
    }

    #[test]
    fn serde_round_trip_and_old_shapes() {
        let s = parse_proc_sched_numa(TWO_NODES);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<NumaSched>(&json).unwrap(), s);
        // Fields missing from a record read as absent.
        let partial: NumaSched =
            serde_json::from_str(r#"{"numa_preferred_nid": 0, "faults": {"0": {}}}"#).unwrap();
        assert_eq!(partial.numa_preferred_nid, Some(0));
        assert_eq!(partial.faults[&0].task_total(), None);
        assert!(serde_json::from_str::<NumaSched>("{}").unwrap().is_empty());
    }
}
