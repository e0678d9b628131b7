//! What a run is: its spec ([`spec`]: the matrix of rows and how to sample
//! them), the knobs a row sets ([`knobs`]), the order samples run in
//! ([`plan`]), its records on disk ([`record`]: run.json and
//! samples.jsonl, versioned, documented in docs/run-schema.md), why a row
//! stopped sampling ([`stop`]) and the events a run reports
//! ([`observer`]); and `numalab jobs`' spec and record ([`jobs`]).
//!
//! This is the data model every reader shares: the runner
//! (`crate::experiment`) writes it; `report`, `compare` and `plot` read it
//! and never import the runner.

pub mod fit;
pub mod jobs;
pub mod knobs;
pub mod observer;
pub mod plan;
pub mod record;
pub mod spec;
pub mod stop;
