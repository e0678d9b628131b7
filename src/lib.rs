//! numalab: measure, explain and predict NUMA placement on Linux.
//!
//! When a task's memory sits on one NUMA node, how well do the scheduler,
//! the load balancer and automatic NUMA balancing keep the task near it
//! under background load, and what do pinning, floating, NUMA balancing and
//! a preferred node do to its run time? The library holds the logic; the
//! `numalab` binary is glue (`commands`), and `error` turns every error into
//! one message and an exit code.
//!
//! The spine: an experiment spec ([`run::spec`]) -> a backend (the host, the
//! simulator in [`sim`], or a test's mock; [`experiment::backend`]) ->
//! records ([`run::record`], JSON lines) -> statistics ([`stats`]) ->
//! reports ([`report`]), comparisons ([`compare`]) and pictures ([`plot`]).
//! The multi-job test (`numalab jobs`) takes the same path: its spec and
//! record are [`run::jobs`], the same backends run it
//! ([`experiment::backend::Backend::jobs`]), [`report::jobs`] renders it.
//! Around it: the machine model ([`topology`]), the probe ([`probe`]), the
//! background load ([`load`]), scheduler tracing ([`trace`]), and the
//! preferred-node mechanisms for kernels without
//! the PNID patch: the homenode agent ([`home`]) and the sched_ext
//! scheduler ([`sched`]).
//!
//! Modules are layered (tests/layering.rs; ARCHITECTURE.md has the table,
//! the path of one run, and where to add a backend, a knob, a pattern or a
//! row dimension).

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
pub mod load;
pub mod paths;
pub mod plot;
pub mod probe;
pub mod report;
pub mod rng;
pub mod run;
pub mod sched;
pub mod sim;
pub mod stats;
pub mod sys;
pub mod table;
pub mod topology;
pub mod trace;
pub mod units;
