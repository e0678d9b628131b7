//! The probe's result: one versioned serde record (schema [`SCHEMA`]),
//! printed by `numalab probe --json` and embedded in every experiment sample.

use super::timeline::Timeline;
use super::{pnid, ProbeSpec};
use crate::analysis::{Migration, MigrationCounts, NumaSched, Residency};
use crate::idset::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "numalab.probe/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub schema: String,
    pub numalab_version: String,
    pub spec: ProbeSpec,
    pub host: Host,
    pub pid: i32,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u128,
    pub timing: Timing,
    pub thp: ThpReport,
    pub pnid: Option<PnidReport>,
    pub placement: Placement,
    /// Self-observed CPU changes during the timed loop.
    pub migrations: MigrationCounts,
    /// Self-observed CPU changes over the probe's whole observed life
    /// (placement, warm-up and timed loop).
    pub migrations_whole: MigrationCounts,
    /// Time per node and LLC during the timed loop.
    pub residency: Residency,
    pub observation: ObservationReport,
    /// The kernel's NUMA-balancing statistics around the run; `None` when
    /// /proc gave none (and in records written before the field existed).
    #[serde(default)]
    pub numa: Option<NumaReport>,
    /// How the timed loop's wall time split between running and waiting
    /// for a CPU; `None` when the kernel does not say (no
    /// CONFIG_SCHED_INFO) and in records written before the field existed.
    #[serde(default)]
    pub cpu_time: Option<CpuTime>,
    /// A threaded probe's threads, one report each (empty for the classic
    /// probe). The fields above are then the workload's: its time from the
    /// threads' release to the last one's end, migrations and residency
    /// over every thread, pages of every array; `observation` and
    /// `numa.sched` are thread 0's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadReport>,
    /// A threaded probe's timeline of NUMA state and pages per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

/// Reads a `numalab probe --json` record from `path` (exit 2 naming what
/// is wrong when it is not one).
pub fn read_record(path: &std::path::Path) -> anyhow::Result<ProbeRecord> {
    crate::paths::read_json_record(path, "probe record", SCHEMA, |r: &ProbeRecord| {
        r.schema.as_str()
    })
}

/// The `schema` of a JSON record, if it has one: which reader a file needs.
pub fn schema_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Schema {
        schema: String,
    }
    serde_json::from_str::<Schema>(text.trim())
        .ok()
        .map(|s| s.schema)
}

/// One thread of a threaded probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub index: u32,
    pub tid: i32,
    /// Its timed passes; `total_ns` is its whole loop.
    pub iterations_ns: Vec<u64>,
    pub total_ns: u64,
    pub ns_per_access: f64,
    /// Nanoseconds from the threads' release to its loop's start and end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Its own array's first touch (0 without one).
    pub warm_up_ns: u64,
    /// Node id -> pages of its own array after its first touch (empty
    /// without one).
    pub own_pages_per_node: BTreeMap<u32, u64>,
    /// CPU changes in its timed loop, classified against its memory's
    /// node (the node asked for, else the one holding most of its own
    /// array, else of the shared one).
    pub migrations: MigrationCounts,
    pub residency: Residency,
    pub seen_cpus: IdSet,
    pub observation: ObservationReport,
    /// The NUMA part of its /proc/thread-self/sched right after its loop:
    /// its group, preferred node, faults per node private and shared.
    pub numa: NumaSched,
    pub cpu_time: Option<CpuTime>,
}

/// The timed loop's time on and off a CPU. On a host, the deltas of
/// /proc/thread-self/schedstat (`sum_exec_runtime`, `run_delay`, `pcount`:
/// `proc_pid_schedstat()` in fs/proc/base.c) read just before the loop's
/// first pass and just after its last. Time the probe neither ran nor
/// waited runnable (it never sleeps in the loop) is what is left of the
/// wall time: interrupts and steal not charged to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTime {
    /// `"schedstat"` (the kernel's accounting of this thread) or `"sim"`.
    pub source: String,
    /// Time on a CPU.
    pub run_ns: u64,
    /// Time runnable but waiting behind another task (`run_delay`).
    pub wait_ns: u64,
    /// Times the probe was put on a CPU (`pcount`); `None` from the sim.
    pub timeslices: Option<u64>,
}

impl CpuTime {
    /// Waiting as a share of running plus waiting, in %.
    pub fn wait_pct(&self) -> Option<f64> {
        let all = self.run_ns + self.wait_ns;
        (all > 0).then(|| self.wait_ns as f64 * 100.0 / all as f64)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub num_cpus: usize,
    pub topology_digest: String,
    pub hostname: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub accesses_per_iteration: u64,
    /// Each outer iteration's time.
    pub iterations_ns: Vec<u64>,
    /// The whole timed loop.
    pub total_ns: u64,
    pub ns_per_access: f64,
    pub warm_up_ns: u64,
    /// Depends on every access, so the work cannot be optimised away.
    pub checksum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThpReport {
    /// "system", "on" or "off": the advice given.
    pub advice: String,
    /// /sys/kernel/mm/transparent_hugepage/enabled, e.g. "always [madvise] never".
    pub system_enabled: Option<String>,
    /// AnonHugePages of this process after warm-up (from smaps_rollup), kB.
    pub anon_huge_kb: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PnidReport {
    pub requested: i32,
    pub interface: pnid::Interface,
    /// What GET returned after SET.
    pub read_back: Option<i32>,
}

/// Where the pages and the CPU really were, against the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub page_size: u64,
    /// Node id -> resident pages after warm-up.
    pub pages_per_node: BTreeMap<u32, u64>,
    /// Pages with no node (never touched, or swapped).
    pub pages_unplaced: u64,
    /// The node holding most pages, when it holds more than half.
    pub mem_node: Option<u32>,
    /// CPUs the probe was allowed on.
    pub allowed_cpus: IdSet,
    /// CPUs it was seen on.
    pub seen_cpus: IdSet,
    /// False when memory or CPU placement does not match the request.
    pub matches_request: bool,
    /// What did not match, for the loud warning.
    pub mismatches: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationReport {
    pub enabled: bool,
    pub check_every_accesses: u32,
    /// CLOCK_MONOTONIC at the observer's start, so `changes` line up with
    /// kernel traces taken with trace_clock `mono`.
    pub start_mono_ns: u64,
    /// Migrations the kernel counted over the observed life
    /// (`se.nr_migrations` delta): exact, where `migrations_whole` is sampled.
    pub kernel_migrations: Option<u64>,
    /// Nanoseconds from observer start to its finish.
    pub end_ns: u64,
    pub start_cpu: u32,
    pub end_cpu: u32,
    /// Nanoseconds from observer start to the timed loop's start and end.
    pub loop_start_ns: u64,
    pub loop_end_ns: u64,
    /// Every CPU change seen (times relative to observer start).
    pub changes: Vec<Migration>,
}

impl ObservationReport {
    /// What `spec`'s observer saw, its timed loop from `loop_start_ns` to
    /// `loop_end_ns` (from the observer's start).
    pub fn new(
        spec: &ProbeSpec,
        o: &super::observe::Observation,
        loop_start_ns: u64,
        loop_end_ns: u64,
    ) -> ObservationReport {
        ObservationReport {
            enabled: spec.observe_every > 0,
            check_every_accesses: spec.observe_every,
            start_mono_ns: o.start_mono_ns,
            kernel_migrations: o.kernel_migrations,
            end_ns: o.end_ns,
            start_cpu: o.start_cpu,
            end_cpu: o.end_cpu,
            loop_start_ns,
            loop_end_ns,
            changes: o.changes.clone(),
        }
    }
}

/// The kernel's NUMA-balancing view of the run (see
/// [`crate::analysis::numastat`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaReport {
    /// The NUMA part of /proc/thread-self/sched just before the probe
    /// returned: the task's own counters, cumulative over its life.
    #[serde(default)]
    pub sched: NumaSched,
    /// Change in the system-wide NUMA counters of /proc/vmstat from just
    /// before placement to just before the probe returned (every task
    /// counts, not only the probe).
    #[serde(default)]
    pub vmstat_delta: BTreeMap<String, u64>,
    /// Why a source was not read, when it exists but failed (a missing
    /// file is not noted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record printed by `numalab probe --json` before `numa` existed.
    const BEFORE_NUMA: &str = include_str!("../../tests/fixtures/probe-record-before-numa.json");

    #[test]
    fn records_without_numa_still_read() {
        let r: ProbeRecord = serde_json::from_str(BEFORE_NUMA).unwrap();
        assert_eq!(r.schema, SCHEMA);
        assert_eq!(r.numa, None);
        let again: ProbeRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(again, r);
    }

    #[test]
    fn numa_round_trips() {
        let mut r: ProbeRecord = serde_json::from_str(BEFORE_NUMA).unwrap();
        let mut numa = NumaReport::default();
        numa.sched.numa_preferred_nid = Some(-1);
        numa.vmstat_delta.insert("numa_hint_faults".into(), 3);
        r.numa = Some(numa);
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("notes"), "empty notes are left out");
        let back: ProbeRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        // A partial `numa` object reads too.
        let v = json.replace(
            &serde_json::to_string(r.numa.as_ref().unwrap()).unwrap(),
            r#"{"vmstat_delta":{"numa_hint_faults":3}}"#,
        );
        let back: ProbeRecord = serde_json::from_str(&v).unwrap();
        assert!(back.numa.unwrap().sched.is_empty());
    }
}
