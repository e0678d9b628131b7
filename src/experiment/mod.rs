//! The experiment (`numalab run`): the RFC's PNID x NB x Mem x CPU matrix,
//! many samples per row, interleaved, each a fresh probe under background
//! load, with system knobs set per row and always restored.
//!
//! spec (`crate::run::spec`) -> plan (`crate::run::plan`, or [`adaptive`]
//! for `--precision`) -> backend ([`backend`]: the seam; [`host`], this
//! machine, or [`simulated`], the simulator) -> records
//! (`crate::run::record`) -> reports (`crate::report`, told each step
//! through `crate::run::observer`). `numalab jobs` goes through the same
//! backends ([`backend::Backend::jobs`]) to a `crate::run::jobs` record.

pub mod adaptive;
pub mod backend;
pub mod host;
pub mod runner;
pub mod simulated;
