//! Turning CPU timelines into explanations: every migration classified by
//! topology level, and the share of run time spent on each node and LLC.
//! Pure functions over plain inputs, shared by the probe's self-observation
//! and (later) the kernel tracer, so both count the same way.

pub mod migrations;
pub mod pages;

pub use migrations::{classify, residency, Migration, MigrationCounts, Residency, Segment};
