//! The trace record (schema [`SCHEMA`]): what `numalab trace --json`
//! prints, and what `run --trace` and `jobs` keep per task.

use super::analyze::{TaskTrace, Window};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "numalab.trace/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    pub schema: String,
    pub numalab_version: String,
    /// "live" or "file".
    pub source: String,
    /// The traced command, or the file read.
    pub what: String,
    pub kernel: Option<String>,
    pub topology_digest: String,
    pub window: Window,
    pub events: u64,
    pub lost_events: u64,
    /// Optional events this kernel lacks (their information is missing).
    pub missing_events: Vec<String>,
    /// Warnings worth showing with the numbers.
    pub notes: Vec<String>,
    /// Per task: bytes of memory per node, last seen in numa_maps.
    pub pages: BTreeMap<u32, BTreeMap<u32, u64>>,
    pub tasks: Vec<TaskTrace>,
}

/// What a sample of `run --trace` keeps: one task's analysis without the
/// per-move list, and the trace's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleTrace {
    pub task: TaskTrace,
    pub events: u64,
    pub lost_events: u64,
    pub missing_events: Vec<String>,
}

impl SampleTrace {
    /// Analyses a probe's capture: its memory node is where its pages were
    /// after warm-up, and the window is the probe's whole life.
    pub fn from_capture(
        topo: &crate::topology::Topology,
        cap: &super::live::Captured,
        probe: &crate::probe::record::ProbeRecord,
    ) -> SampleTrace {
        let mem = probe.placement.mem_node;
        let mut tasks =
            super::analyze::analyze(topo, &cap.events, &cap.pids, false, cap.window, &|_| mem);
        let mut task = tasks.pop().unwrap_or_default();
        task.moves.clear();
        SampleTrace {
            task,
            events: cap.events.len() as u64,
            lost_events: cap.lost_events,
            missing_events: cap.missing_events.clone(),
        }
    }
}
