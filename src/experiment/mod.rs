//! The experiment (`numalab run`): the RFC's PNID x NB x Mem x CPU matrix,
//! many samples per row, interleaved, each a fresh probe under background
//! load, with system knobs set per row and always restored.
//!
//! spec (`crate::run::spec`) -> plan (`crate::run::plan`, or [`adaptive`]
//! for `--precision`) -> backend ([`backend`]: the host, or the simulator
//! in [`simulated`]) -> records (`crate::run::record`) -> reports
//! (`crate::report`, told each step through `crate::run::observer`).

pub mod adaptive;
pub mod backend;
pub mod runner;
pub mod simulated;
