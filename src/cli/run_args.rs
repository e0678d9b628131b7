//! `numalab run`'s arguments, and the backend choice `run` and `jobs` share.

use super::{percent, positive_pct, TopologySource};
use crate::run::record::{BackendKind, PnidVia};
use clap::Args;
use std::path::PathBuf;

/// `NAME=VALUE` of a knob, checked like a spec file's.
fn knob_arg(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: give NAME=VALUE"))?;
    let one = std::collections::BTreeMap::from([(k.trim().to_string(), v.trim().to_string())]);
    crate::run::knobs::check(&one).map_err(|e| e.to_string())?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// A PNID block selector: `-1` (none), `A`, `B`, or a node number.
fn pnid_token(s: &str) -> Result<String, String> {
    let t = s.trim();
    let ok = matches!(t, "-1" | "A" | "a" | "B" | "b") || t.parse::<u32>().is_ok();
    if ok {
        Ok(t.to_string())
    } else {
        Err(format!("{s:?} is not -1, A, B or a node number"))
    }
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Experiment spec (TOML); command-line options override it.
    #[arg(long, value_name = "FILE.toml")]
    pub spec: Option<PathBuf>,

    /// Run the experiment of an earlier run: the spec in DIR/run.json
    /// (rows, probe, load, seed), with this command line's options over
    /// it. `run --backend sim --profile my.toml --like DIR` is the
    /// simulator's prediction of DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "spec")]
    pub like: Option<PathBuf>,

    /// Continue the interrupted run in DIR (its spec and order are reused:
    /// any option that would change them is refused, not ignored).
    #[arg(long, value_name = "DIR",
          conflicts_with_all = ["spec", "like", "out", "backend", "preset", "topology", "profile",
              "nodes", "samples", "precision", "min_samples", "max_samples", "quick", "load",
              "migration_cost_ns", "nb", "pnid", "mem", "cpu", "pattern", "size", "counts",
              "bind_scope", "first_touch", "load_policy", "load_period_ms", "load_phases", "seed", "trace",
              "knob", "threads", "sharing", "timeline_ms", "processes",
              "shm_numa_balancing"])]
    pub resume: Option<PathBuf>,

    /// Where records and reports go (default runs/run-YYYYmmdd-HHMMSS).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Nodes A and B (default: the first two nodes with CPUs).
    #[arg(long, value_name = "A,B")]
    pub nodes: Option<String>,

    /// Samples per row (default 64, as the RFC).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "precision")]
    pub samples: Option<u32>,

    /// Adaptive sampling: a row stops once the half-width of its mean's
    /// 95% confidence interval is within P percent of the mean (at least
    /// --min-samples, at most --max-samples a row). Rounds stay
    /// interleaved in a seeded order.
    #[arg(long, value_name = "P", value_parser = positive_pct, allow_hyphen_values = true)]
    pub precision: Option<f64>,

    /// With --precision: the fewest samples a row takes (at least 2).
    #[arg(long, value_name = "N", requires = "precision",
          value_parser = clap::value_parser!(u32).range(2..))]
    pub min_samples: Option<u32>,

    /// With --precision: the most samples a row takes.
    #[arg(long, value_name = "N", requires = "precision",
          value_parser = clap::value_parser!(u32).range(2..))]
    pub max_samples: Option<u32>,

    /// About a minute on a small machine: 4 samples, 128 MiB, 4 passes.
    #[arg(long)]
    pub quick: bool,

    /// Background load percent on every CPU (default 60).
    #[arg(long, value_parser = percent)]
    pub load: Option<f64>,

    /// sched migration_cost_ns values, each a separate block of rows.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub migration_cost_ns: Option<Vec<u64>>,

    /// Keep only blocks with these numa_balancing values (e.g. `1`).
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u8).range(0..=1))]
    pub nb: Option<Vec<u8>>,

    /// Keep only blocks with these PNIDs (`-1`, `A`, `B`).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_parser = pnid_token
    )]
    pub pnid: Option<Vec<String>>,

    /// Mem values: A, B, F (float), I (interleave A,B) or node numbers.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub mem: Option<Vec<String>>,

    /// CPU values: A, B, F or node numbers.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cpu: Option<Vec<String>>,

    /// Probe access pattern.
    #[arg(long, value_enum)]
    pub pattern: Option<crate::probe::Pattern>,

    /// Probe buffer size.
    #[arg(long)]
    pub size: Option<crate::units::Size>,

    /// Probe outer iterations.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub counts: Option<u32>,

    /// Run the probe as this many threads (see `probe --threads`); --size
    /// is then the whole workload's memory. The simulator refuses it: it
    /// models no NUMA balancing group, swap or pseudo-interleaving.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(2..=crate::probe::MAX_THREADS as i64))]
    pub threads: Option<u32>,

    /// With --threads: what they share (`shared`, `private`, `mix:P`; see
    /// `probe --sharing`).
    #[arg(long, value_name = "shared|private|mix:P", requires = "threads")]
    pub sharing: Option<crate::probe::Sharing>,

    /// With --threads: milliseconds between timeline samples (0: none).
    #[arg(long, value_name = "MS", requires = "threads")]
    pub timeline_ms: Option<u32>,

    /// With --threads: the workers are processes on one shared memory
    /// segment (see `probe --processes`).
    #[arg(long, requires = "threads")]
    pub processes: bool,

    /// With --processes: the shared memory under MPOL_F_NUMA_BALANCING (see
    /// `probe --shm-numa-balancing`).
    #[arg(long, requires = "processes")]
    pub shm_numa_balancing: bool,

    /// What a Mem row's memory policy covers: `buffer` (mbind, the default)
    /// or `process` (set_mempolicy, as `numactl --membind`): see `probe
    /// --help`.
    #[arg(long, value_enum)]
    pub bind_scope: Option<crate::sys::numa::PolicyScope>,

    /// When each sample's probe first touches its buffer: `placed` (the
    /// default: after its CPU binding, so a Mem F row's pages are on the
    /// node its CPU is bound to) or `start` (before the binding, where exec
    /// put it: the RFC's order); see `probe --help` and
    /// docs/rfc-procedure.md.
    #[arg(long, value_enum)]
    pub first_touch: Option<crate::probe::FirstTouch>,

    /// The background load workers' memory policy: `default` (NUMA
    /// balancing sees them and each comes to prefer its own node) or
    /// `local` (MPOL_LOCAL: no worker ever prefers a node); see `load
    /// --help`.
    #[arg(long, value_enum)]
    pub load_policy: Option<crate::load::LoadPolicy>,

    /// The background load's duty-cycle period in ms (default: `numalab
    /// load`'s 20.618); see `load --help`.
    #[arg(long, value_name = "MS")]
    pub load_period_ms: Option<f64>,

    /// When each load worker's busy part starts: `staggered` (worker k, in
    /// CPU order, k/n of a period late; the default), `random` (seeded by
    /// --seed, as independently started load programs) or `spread` (round
    /// the nodes, LLCs and cores, so every node carries the same load at
    /// every instant). With a floating probe the phases decide which CPUs
    /// take it over and whether nodes take turns being busy, so they shape
    /// the mix of moves (docs/sim-validation.md, "The load's shape").
    #[arg(long, value_enum)]
    pub load_phases: Option<crate::load::LoadPhases>,

    /// Seed of the sample-order shuffle.
    #[arg(long)]
    pub seed: Option<u64>,

    /// Trace every sample with the kernel's scheduler events (as `numalab
    /// trace` does): records carry each sample's migrations by level and
    /// cause and its time per node; the report adds the per-row breakdown
    /// and how migrations correlate with time. Where the kernel has
    /// schedstats, kernel.sched_schedstats is turned on for the run
    /// (restored after) and records carry the load balancer's counters per
    /// domain level too (`balance`: pulls by kind, hot pulls, pushes).
    #[arg(long)]
    pub trace: bool,

    /// A knob every block's rows run under, NAME=VALUE (repeatable):
    /// `kernel.numa_balancing_*`/`kernel.sched_*` sysctls or debugfs files
    /// under `sched/`, e.g. `sched/numa_balancing/scan_delay_ms=4294967295`.
    /// Per-block knobs go in the spec file (`knobs` of a block).
    #[arg(long, value_name = "NAME=VALUE", value_parser = knob_arg)]
    pub knob: Vec<(String, String)>,

    /// PR_PREFERRED_NID option and layout for PNID rows (see `probe --help`).
    #[arg(long, value_name = "NUMBER[:LAYOUT]", conflicts_with = "pnid_via")]
    pub pnid_prctl: Option<String>,

    /// How PNID rows set the preferred node: `prctl` (the kernel patch,
    /// where the kernel has it), `agent` (the user-space homenode agent of
    /// `numalab home`, CPU soft affinity to the PNID node, on any kernel) or
    /// `sched` (numalab's sched_ext scheduler, loaded for each PNID row's
    /// sample with the probe homed on the PNID node; Linux 6.12+ with
    /// sched_ext; other rows run under the kernel's own scheduler).
    /// Recorded in run.json (`pnid_via`); --resume keeps the run's.
    #[arg(long, value_enum, conflicts_with = "resume")]
    pub pnid_via: Option<PnidVia>,

    #[command(flatten)]
    pub sim: BackendArgs,
}

/// Where results come from (`run` and `jobs`): this machine, or the
/// simulator on a machine named by --preset/--topology.
#[derive(Debug, Args, Clone)]
pub struct BackendArgs {
    /// Where results come from: `host` runs the probes on this machine
    /// under real load; `sim` simulates them (scheduler, load balancer, NUMA
    /// balancing, the PNID patch) on this machine's topology or on
    /// --preset/--topology, in seconds, without root and changing nothing.
    /// Same records and reports; see docs/sim.md.
    #[arg(long, value_enum, default_value = "host")]
    pub backend: BackendKind,

    /// --backend sim: the machine to simulate (default: this one).
    #[command(flatten)]
    pub source: TopologySource,

    /// --backend sim: the hardware profile, a built-in (xeon-8167m,
    /// epyc-7551, lab-tcg, generic) or a TOML file (docs/sim.md, "Hardware profiles"); default:
    /// the preset's own, else generic.
    #[arg(long, value_name = "NAME|FILE.toml")]
    pub profile: Option<String>,
}

impl BackendArgs {
    /// Whether a simulated machine was named without `--backend sim`.
    pub fn names_a_machine(&self) -> bool {
        self.source.preset.is_some() || self.source.topology.is_some() || self.profile.is_some()
    }

    /// The files these options read, by option (an output must not be one).
    pub fn inputs(&self) -> Vec<crate::paths::Input<'_>> {
        let mut v = Vec::new();
        if let Some(t) = &self.source.topology {
            v.push(("--topology", t.as_path()));
        }
        if let Some(p) = &self.profile {
            v.push(("--profile", std::path::Path::new(p.as_str())));
        }
        v
    }
}
