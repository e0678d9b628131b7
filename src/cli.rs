//! The command line: clap derive definitions; the doc comments are the help.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Measure, explain and predict NUMA placement on Linux.
///
/// numalab shows the machine's NUMA topology, runs a NUMA-sensitive probe
/// under controlled placement and background load, and reports how the
/// scheduler, the load balancer and automatic NUMA balancing treat it.
#[derive(Debug, Parser)]
#[command(name = "numalab", version, propagate_version = true)]
pub struct Cli {
    /// Read sysfs and procfs under this directory instead of `/`
    /// (a fixture tree captured with `numalab topo --capture`).
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    pub sysfs_root: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the NUMA topology: first exactly what `numactl --hardware`
    /// prints, then per node its LLCs, cores and SMT threads.
    Topo(TopoArgs),
}

/// Where a topology comes from: the machine (default), a preset, or a file.
#[derive(Debug, Args, Clone, Default)]
pub struct TopologySource {
    /// Use a built-in machine instead of reading this one
    /// (`numalab topo --list-presets` lists them).
    #[arg(long, value_name = "NAME", conflicts_with = "topology")]
    pub preset: Option<String>,

    /// Use a topology saved with `numalab topo --json` instead of reading
    /// this machine.
    #[arg(long, value_name = "FILE.json")]
    pub topology: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopoArgs {
    #[command(flatten)]
    pub source: TopologySource,

    /// Print the whole model as JSON (schema `numalab.topology/1`,
    /// documented in docs/topology-schema.md).
    #[arg(long)]
    pub json: bool,

    /// Show only these nodes in the structure block (e.g. `0,2`, `1-3`, `all`).
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,

    /// Add a table of these CPUs: node, package, core, LLC and SMT siblings
    /// of each (e.g. `0-3,8`, `all`).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// List the built-in presets and exit.
    #[arg(long)]
    pub list_presets: bool,

    /// Also copy every sysfs/procfs file read into DIR, as a fixture tree
    /// that `--sysfs-root DIR` reads back.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["preset", "topology"])]
    pub capture: Option<PathBuf>,
}
