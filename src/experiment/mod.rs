//! The experiment (`numalab run`): the RFC's PNID x NB x Mem x CPU matrix,
//! many samples per row, interleaved, each a fresh probe under background
//! load, with system knobs set per row and always restored.
//!
//! spec ([`spec`]) -> plan ([`plan`]) -> backend ([`backend`]: the host,
//! or the simulator in [`simulated`]) -> records
//! ([`record`]) -> reports (`crate::report`).

pub mod adaptive;
pub mod backend;
pub mod knobs;
pub mod plan;
pub mod record;
pub mod runner;
pub mod simulated;
pub mod spec;
