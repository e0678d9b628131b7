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
