//! Kernel scheduler tracing: which CPUs a task ran on, every migration with
//! its cause, and what NUMA balancing did, from the kernel's own events.

pub mod event;
pub mod text;
