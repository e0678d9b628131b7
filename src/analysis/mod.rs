//! Turning CPU timelines into explanations: every migration classified by
//! topology level, and the share of run time spent on each node and LLC.
//! Pure functions over plain inputs, shared by the probe's self-observation
//! and the kernel tracer, so both count the same way. Also the kernel's own
//! NUMA-balancing statistics ([`numastat`]), the load balancer's counters
//! per sched domain ([`schedstat`], and per level as samples record them,
//! [`balance`]) and where a process's pages are ([`pages`]), parsed from
//! procfs text.

pub mod balance;
pub mod migrations;
pub mod numastat;
pub mod over_time;
pub mod pages;
pub mod schedstat;

pub use migrations::{classify, residency, Migration, MigrationCounts, Residency, Segment};
pub use numastat::{parse_proc_sched_numa, parse_vmstat_numa, vmstat_delta, NodeFaults, NumaSched};
pub use over_time::{over_time, OverTime};
