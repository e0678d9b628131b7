//! numalab: measure, explain and predict NUMA placement on Linux.
//!
//! The library holds the logic; the `numalab` binary is glue. The spine:
//! experiment spec -> backend (host or simulator) -> records (JSON lines) ->
//! statistics -> reports. This release has the machine model ([`topology`])
//! and the list syntax shared by every command ([`idset`]).

pub mod analysis;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod error;
pub mod exec;
pub mod experiment;
pub mod home;
pub mod idset;
pub mod input;
pub mod jobs;
pub mod load;
pub mod paths;
pub mod plot;
pub mod probe;
pub mod report;
pub mod rng;
pub mod sched;
pub mod sim;
pub mod stats;
pub mod sys;
pub mod table;
pub mod topology;
pub mod trace;
pub mod units;
