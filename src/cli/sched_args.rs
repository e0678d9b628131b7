//! `numalab sched`'s arguments.

use clap::Args;
use std::path::PathBuf;

fn positive_ms(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number of milliseconds (0 or more)")),
    }
}

#[derive(Debug, Args, Clone)]
pub struct SchedArgs {
    /// The homenode of the command (or of --pid): a node id, or `auto` (the
    /// node with the most spare CPU over a short sample, then the most free
    /// memory). Without a command or --pid it is refused: the whole machine
    /// runs under the scheduler, homed by --policy.
    #[arg(long, value_name = "N|auto")]
    pub home: Option<String>,

    /// Home these running processes (their threads and the children they
    /// fork from now on) instead of starting a command.
    #[arg(long, value_name = "PID", num_args = 1.., value_delimiter = ',',
          value_parser = clap::value_parser!(i32).range(2..))]
    pub pid: Vec<i32>,

    /// When tasks without an explicit homenode get one (the node-affine
    /// document's node_policy): `none` (only what --home homes), `exec`
    /// (0: at exec, forks inherit), `fork-mm` (1: at a fork with a new mm),
    /// `fork` (2: at every fork). The node is the one with the most spare CPU.
    #[arg(long, value_name = "POLICY", default_value = "none")]
    pub policy: String,

    /// Switch mechanisms off to measure them alone: place (an idle CPU of
    /// the homenode first), queue (else wait in the homenode's queue),
    /// reattract (call a runaway home when a home CPU is idle), steal-delay
    /// (other nodes take a homed task only after a distance delay).
    #[arg(long, value_name = "MECH", value_delimiter = ',')]
    pub off: Vec<String>,

    /// The steal delay at SLIT distance 10 on an idle machine, ms; distance
    /// d waits d/10 times as long (the document: 2/3/4 ms at distances
    /// 10/15/20 under low load).
    #[arg(long, value_name = "MS", default_value_t = 2.0, value_parser = positive_ms)]
    pub steal_delay: f64,

    /// The steal delay at distance 10 when the machine is busy (as many
    /// runnable tasks as CPUs), ms; between idle and busy the delay grows
    /// with the load (the document: 132/199/265 ms at average load).
    #[arg(long, value_name = "MS", default_value_t = 132.0, value_parser = positive_ms)]
    pub steal_delay_busy: f64,

    /// The time slice, ms.
    #[arg(long, value_name = "MS", default_value_t = 5.0, value_parser = positive_ms)]
    pub slice: f64,

    /// Period of the scan that wakes idle thieves and calls runaways home,
    /// ms (default: half the shortest steal delay, at least 0.5).
    #[arg(long, value_name = "MS", value_parser = positive_ms)]
    pub scan: Option<f64>,

    /// Bind the command's memory to the homenode (MPOL_BIND) instead of
    /// preferring it (MPOL_PREFERRED).
    #[arg(long)]
    pub bind: bool,

    /// Unload after this many seconds (without a command: how long to run;
    /// default until Ctrl-C).
    #[arg(long, value_name = "SECS", value_parser = super::positive_secs)]
    pub duration: Option<f64>,

    /// Write the account as JSON here (schema numalab-sched/1,
    /// docs/sched-schema.md).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// The command to run, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}
