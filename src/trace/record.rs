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
    /// after warm-up, and the window is what the probe measured, from its
    /// warm-up's start to its timed loop's end ([`measured_window`]).
    pub fn from_capture(
        topo: &crate::topology::Topology,
        cap: &super::live::Captured,
        probe: &crate::probe::record::ProbeRecord,
    ) -> SampleTrace {
        let mem = probe.placement.mem_node;
        let window = measured_window(cap.window, &probe.observation);
        let mut tasks =
            super::analyze::analyze(topo, &cap.events, &cap.pids, false, window, &|_| mem);
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

/// The part of a capture's window in which the probe did what it measures:
/// from its observer's start, just before its warm-up, to its timed loop's
/// end, both on the trace's clock (`mono`): the span its own timings and
/// migration counts cover, and the one a simulated probe lives (it starts
/// at its warm-up). Its start-up before that (a static binary's exec, its
/// reading of sysfs and /proc) and its exit are left out: milliseconds on
/// hardware, seconds under the lab's emulator, where a probe moved by the
/// balancer while it started up had those moves counted as the sample's
/// (docs/sim-validation.md, "The probe's start-up"). A record without the
/// observer's start (0) keeps the whole window.
pub fn measured_window(whole: Window, o: &crate::probe::record::ObservationReport) -> Window {
    if o.start_mono_ns == 0 || whole.end_ns < whole.start_ns {
        return whole;
    }
    let start = o.start_mono_ns.clamp(whole.start_ns, whole.end_ns);
    let end = (o.start_mono_ns + o.loop_end_ns).clamp(start, whole.end_ns);
    Window {
        start_ns: start,
        end_ns: end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::record::ObservationReport;

    fn observed(start_mono_ns: u64, loop_end_ns: u64) -> ObservationReport {
        ObservationReport {
            enabled: true,
            check_every_accesses: 4096,
            start_mono_ns,
            kernel_migrations: None,
            end_ns: loop_end_ns,
            start_cpu: 0,
            end_cpu: 0,
            loop_start_ns: loop_end_ns / 2,
            loop_end_ns,
            changes: Vec::new(),
        }
    }

    /// The lab's per-sample counts covered the probe's start-up (seconds
    /// under the emulator) as well as what it measured.
    #[test]
    fn a_sample_trace_covers_the_warm_up_and_the_loop_not_the_start_up() {
        let whole = Window {
            start_ns: 1_000,
            end_ns: 30_000,
        };
        let w = measured_window(whole, &observed(5_000, 20_000));
        assert_eq!((w.start_ns, w.end_ns), (5_000, 25_000));
        // Clipped to the capture.
        let w = measured_window(whole, &observed(500, 40_000));
        assert_eq!((w.start_ns, w.end_ns), (1_000, 30_000));
        // Without the observer's start: the whole window.
        assert_eq!(measured_window(whole, &observed(0, 20_000)), whole);
    }
}
