//! Kernel scheduler tracing: which CPUs a task ran on, every migration with
//! its cause, and what NUMA balancing did, from the kernel's own events.
//!
//! Sources: a live private tracefs instance ([`tracefs`], [`live`]) whose
//! binary pages ([`ringbuf`]) are decoded through the event format files
//! ([`format`], [`decode`]), or a saved text trace ([`text`]). Both give
//! [`event::Event`]s, which [`analyze`] turns into per-task explanations.

pub mod analyze;
pub mod decode;
pub mod event;
pub mod format;
pub mod live;
pub mod record;
pub mod ringbuf;
pub mod summary;
pub mod text;
pub mod tracefs;
