//! The command line: clap derive definitions; the doc comments are the help.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

mod resolve;
mod run_args;
mod sched_args;
pub use crate::run::record::{BackendKind, PnidVia};
pub use resolve::MachineSource;
pub use run_args::{BackendArgs, RunArgs};
pub use sched_args::SchedArgs;

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

    /// Run the NUMA-sensitive probe once under a chosen placement and report
    /// its time, where its pages really are, and how it moved between CPUs.
    Probe(ProbeArgs),

    /// Put a constant CPU-only load on every CPU (or a list), one pinned
    /// worker per CPU, until Ctrl-C, SIGTERM or --duration.
    Load(LoadArgs),

    /// Run the experiment matrix of the Preferred Node Affinity RFC (PNID x
    /// NB x Mem x CPU, many samples per row, under background load) and
    /// print its table. Records go to --out as JSON lines.
    Run(Box<RunArgs>),

    /// Rebuild a run's reports from its records alone.
    Report(ReportArgs),

    /// Compare runs row by row: BASE against each OTHER (kernel before and
    /// after a patch, PNID vs NB, one knob value vs another). Rows are
    /// matched by their parameters (nodes as A/B of each run), with the
    /// change, Welch's p, Hedges' g and Holm-Bonferroni significance.
    /// Reads the records only; writes nothing.
    Compare(CompareArgs),

    /// Draw runs as SVG pictures (plotters): per run the RFC table as a
    /// picture (samples and box plots per row); for traced runs migrations
    /// per sample by level and time vs cross-node moves; per `numalab jobs
    /// -o` record the residency heatmap; for two or more runs the compare
    /// view. Reads the records only; writes the SVG files into OUTDIR.
    Plot(PlotArgs),

    /// Trace tasks with the kernel's scheduler events: every migration
    /// classified by topology level and cause (load balance, wake-up, NUMA
    /// balancing), and the time spent on each node and LLC.
    ///
    /// `numalab trace -- COMMAND...` traces a command (and its children);
    /// `--pid LIST` traces running tasks until they exit, --duration or
    /// Ctrl-C; `--from FILE` analyses a saved `trace-cmd report` or
    /// `perf script` text. Uses a private tracefs instance, so the global
    /// tracing state is never touched.
    Trace(TraceArgs),

    /// Run N copies of the probe at once (the node-affine scheduler
    /// document's multi-job test) and print, per job, the % of its time on
    /// each node, the max, the node it ran most on vs the one it started on,
    /// and its user time; then the average user time.
    ///
    /// Probe placement options go after `--`, e.g.
    /// `numalab jobs 8 -- --membind 0`.
    Jobs(JobsArgs),

    /// A preferred node without a patched kernel: run a command (or follow
    /// running tasks) with a homenode. Memory is preferred there (the
    /// started command only); CPUs are soft affinity: every thread may run
    /// on the homenode's CPUs while it has room, is widened to its own CPUs
    /// when it waits too long there while a CPU elsewhere idles, and is
    /// brought back when the node has
    /// room again. Original masks are restored at the end (and by `numalab
    /// restore` after a kill). See docs/home.md.
    ///
    /// `numalab home --node 1 -- CMD...`, `numalab home --node auto --pid 1234`.
    Home(HomeArgs),

    /// The node-affine scheduler as a sched_ext BPF scheduler (Linux 6.12+
    /// with CONFIG_SCHED_CLASS_EXT, root): every task may have a homenode;
    /// the scheduler places it on an idle CPU there, queues it there, calls
    /// it back when it ran away, and lets other nodes take it only after a
    /// wait that grows with the NUMA distance. Loaded for the whole machine
    /// until Ctrl-C or --duration, or for the life of one command with that
    /// command's homenode; unloaded on every exit (the kernel unloads it if
    /// numalab is killed). Prints its account; -o writes it as JSON. See
    /// docs/sched.md.
    ///
    /// `numalab sched --home 1 -- CMD...`, `numalab sched --policy exec --duration 60`.
    Sched(SchedArgs),

    /// The simulator's own tools. `numalab sim fit RUN_DIR... -o my.toml`:
    /// a hardware profile fitted from runs on your machine (its pinned
    /// rows: local, and remote at each distance you ran), with each row's
    /// residual; `numalab run --backend sim --profile my.toml --like
    /// RUN_DIR` then predicts the rest of the matrix. See docs/sim.md, "Fitting a profile to your machine".
    #[command(subcommand)]
    Sim(SimCommand),

    /// Internal: a threaded probe's timeline sampler, its own process (see
    /// `probe::timeline`); its spec as JSON.
    #[command(name = "__timeline", hide = true)]
    Timeline { spec_json: String },

    /// Internal: wait for numalab's tracer, then exec COMMAND.
    #[command(name = "__gate", hide = true)]
    Gate {
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },

    /// Put back system state (numa_balancing, debugfs knobs, tracing
    /// instances, mounts) left changed by a run or tracer that was killed
    /// (SIGKILL, power loss).
    Restore,

    /// Print a man page (roff) or a shell's completion script, generated
    /// from these very definitions, so they never drift from the binary:
    /// `numalab generate man > numalab.1`, `numalab generate man run >
    /// numalab-run.1`, `numalab generate bash >
    /// /etc/bash_completion.d/numalab`.
    Generate {
        #[arg(value_enum)]
        what: Generate,
        /// With `man`: the subcommand's page, numalab-SUBCOMMAND(1).
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Option<String>,
    },
}

/// What `numalab generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// The man page, numalab(1), with every subcommand (roff, for `man -l`).
    Man,
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

/// Writes what `numalab generate` asks for to `out`: clap_mangen's man
/// page of numalab or of one subcommand (`numalab-run(1)`, as git names
/// its pages), or clap_complete's script for the shell. An unknown
/// subcommand is a usage error naming the known ones.
pub fn generate(
    what: Generate,
    subcommand: Option<&str>,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let mut cmd = Cli::command();
    let shell =
        match (what, subcommand) {
            (Generate::Man, None) => {
                clap_mangen::Man::new(cmd).render(out)?;
                return Ok(());
            }
            (Generate::Man, Some(name)) => {
                let visible = || cmd.get_subcommands().filter(|s| !s.is_hide_set());
                let Some(sub) = visible().find(|s| s.get_name() == name) else {
                    let known: Vec<&str> = visible().map(|s| s.get_name()).collect();
                    return Err(crate::error::usage(format!(
                        "generate man {name:?}: no such subcommand (known: {})",
                        known.join(", ")
                    )));
                };
                let page = format!("numalab-{name}");
                let sub = sub
                    .clone()
                    .name(page.clone())
                    .display_name(page)
                    .bin_name(format!("numalab {name}"));
                clap_mangen::Man::new(sub).render(out)?;
                return Ok(());
            }
            (_, Some(_)) => return Err(crate::error::usage(
                "generate: a SUBCOMMAND goes with `man` only; completions cover every subcommand",
            )),
            (Generate::Bash, None) => Shell::Bash,
            (Generate::Zsh, None) => Shell::Zsh,
            (Generate::Fish, None) => Shell::Fish,
            (Generate::Elvish, None) => Shell::Elvish,
            (Generate::Powershell, None) => Shell::PowerShell,
        };
    clap_complete::generate(shell, &mut cmd, "numalab", out);
    Ok(())
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Trace these running tasks (thread ids, list syntax) instead of a
    /// command; with --from, analyse only these.
    #[arg(long, value_name = "LIST")]
    pub pid: Option<String>,

    /// Analyse a saved text trace of the sched events (`trace-cmd report`,
    /// `perf script` or tracefs `trace` output) instead of tracing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["duration", "no_follow", "buffer_kb"])]
    pub from: Option<PathBuf>,

    /// The node holding the tasks' memory, for to/from-memory counts and
    /// time on the memory's node (default: the node with more than half of
    /// a task's pages in its numa_maps; unknown for --from).
    #[arg(long, value_name = "N")]
    pub mem_node: Option<u32>,

    /// Stop tracing after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Do not follow children the traced tasks fork.
    #[arg(long)]
    pub no_follow: bool,

    /// Trace buffer per CPU, in kB.
    #[arg(long, value_name = "KB", value_parser = clap::value_parser!(u32).range(1..))]
    pub buffer_kb: Option<u32>,

    /// Print the record as JSON (schema numalab.trace/1) instead of the
    /// summary.
    #[arg(long)]
    pub json: bool,

    /// Also write the JSON record to this file.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// The machine the trace is from, for --from files from other machines.
    #[command(flatten)]
    pub topology: TopologySource,

    /// The command to trace, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// How many probes to run at once (may exceed the CPUs: the document
    /// ran 24 on 16).
    #[arg(required_unless_present = "from", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub n: Option<u32>,

    /// Access pattern of every probe (default: the document's a[ix[i]] += b[i]).
    #[arg(long, value_enum, default_value = "gather-add")]
    pub pattern: crate::probe::Pattern,

    /// Buffer size of every probe.
    #[arg(long, default_value = "32M")]
    pub size: crate::units::Size,

    /// Outer iterations of every probe.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub counts: u32,

    /// Background load percent on every CPU while the jobs run (0: none).
    #[arg(long, default_value_t = 0.0, value_parser = percent)]
    pub load: f64,

    /// Do not trace: time per node comes from each probe's own sampling.
    #[arg(long)]
    pub no_trace: bool,

    /// Trace buffer per CPU, in kB.
    #[arg(long, value_name = "KB", default_value_t = crate::trace::live::DEFAULT_BUFFER_KB,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub buffer_kb: u32,

    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::table::Format,

    /// Also write the JSON record here.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Render a saved record (from --out) instead of running. Only
    /// --format goes with it: an option that would change the jobs is
    /// refused, not ignored.
    #[arg(long, value_name = "FILE",
          conflicts_with_all = ["n", "out", "pattern", "size", "counts", "load", "no_trace",
              "buffer_kb", "home", "home_cpu", "nb", "load_policy", "load_period_ms",
              "load_phases", "seed", "backend", "preset", "topology", "profile", "probe_args"])]
    pub from: Option<PathBuf>,

    /// Give every job a homenode: a node, or `auto` (per job, the node with
    /// the most spare CPU left, as the node-affine scheduler's node_policy).
    /// Its memory is preferred there; its CPUs follow --home-cpu.
    #[arg(long, value_name = "auto|N")]
    pub home: Option<String>,

    /// With --home: `agent` (soft affinity, `numalab home`), `pin` (hard
    /// pinning to the homenode), `float` (memory only) or `sched`
    /// (numalab's sched_ext scheduler, `numalab sched`, Linux 6.12+).
    #[arg(long, value_enum, default_value = "agent", requires = "home")]
    pub home_cpu: crate::run::jobs::HomeCpu,

    /// NUMA balancing while the jobs run, 0 or 1: kernel.numa_balancing is
    /// set for the jobs and put back after (journaled, as `run` does); with
    /// --backend sim, the simulated kernel's (default 1). Default: as the
    /// machine has it.
    #[arg(long, value_name = "0|1", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub nb: Option<u8>,

    /// The background load workers' memory policy (`load --help`): `local`
    /// (MPOL_LOCAL) hides them from NUMA balancing, so none prefers a node.
    #[arg(long, value_enum, default_value_t = crate::load::LoadPolicy::Default)]
    pub load_policy: crate::load::LoadPolicy,

    /// The background load's duty-cycle period in ms (`load --help`).
    #[arg(long, value_name = "MS", default_value_t = crate::load::DEFAULT_PERIOD_MS)]
    pub load_period_ms: f64,

    /// When each load worker's busy part starts: `staggered` (in CPU
    /// order), `random` (drawn with --seed) or `spread` (round the nodes,
    /// LLCs and cores: every node equally loaded at every instant); see
    /// `run --help`.
    #[arg(long, value_enum, default_value_t = crate::load::LoadPhases::Staggered)]
    pub load_phases: crate::load::LoadPhases,

    /// Seed of the simulation (--backend sim) and of `--load-phases
    /// random` (default 1).
    #[arg(long)]
    pub seed: Option<u64>,

    #[command(flatten)]
    pub sim: BackendArgs,

    /// More `numalab probe` options for every job (placement), after `--`.
    #[arg(last = true, value_name = "PROBE-ARGS")]
    pub probe_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HomeArgs {
    /// The homenode: a node id, or `auto` (the node with the most spare CPU
    /// over a short sample, then the most free memory).
    #[arg(long, value_name = "N|auto")]
    pub node: String,

    /// Narrow to these CPUs of the homenode instead of all of them (one
    /// LLC, say; also how the mechanism is seen on a one-node machine).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Follow these running processes (and their threads and children)
    /// instead of starting a command. Their memory policy cannot be changed
    /// from outside: see --migrate.
    #[arg(long, value_name = "PID", num_args = 1.., value_delimiter = ',',
          value_parser = clap::value_parser!(i32).range(1..))]
    pub pid: Vec<i32>,

    /// Bind the command's memory to the homenode (MPOL_BIND) instead of
    /// preferring it (MPOL_PREFERRED).
    #[arg(long)]
    pub bind: bool,

    /// With --pid: move the tasks' existing pages to the homenode once at
    /// attach (migrate_pages); their future allocations follow their own
    /// policy.
    #[arg(long, requires = "pid")]
    pub migrate: bool,

    /// Stop after this many seconds (masks restored, tasks keep running).
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Measurement window, ms.
    #[arg(long, value_name = "MS", default_value_t = crate::home::DEFAULT_WINDOW_MS,
          value_parser = clap::value_parser!(u64).range(20..=60000))]
    pub window_ms: u64,

    /// Widen a thread that waited for a CPU at least this % of a window ...
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = percent)]
    pub widen_delay: f64,

    /// ... while a CPU of its own outside the homenode idled at least this
    /// % of the window more than the thread ran (waiting alone is not
    /// enough: under an even load it waits as much anywhere) ...
    #[arg(long, value_name = "PCT", default_value_t = 20.0, value_parser = percent)]
    pub widen_gain: f64,

    /// ... for this many windows in a row.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub widen_windows: u32,

    /// Narrow a widened thread back when the homenode had room for it this
    /// many windows in a row ...
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub narrow_windows: u32,

    /// ... keeping this many idle CPUs in reserve ...
    #[arg(long, value_name = "CPUS", default_value_t = 0.25, value_parser = non_negative)]
    pub narrow_margin: f64,

    /// ... and not before it has been wide this many windows (doubled, up
    /// to 64, when it is widened again soon after coming back).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub min_wide: u32,

    /// Log every decision here as JSON lines (time, task, action, reason,
    /// run delay).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// The command to run, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
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

#[derive(Debug, Args, Clone)]
#[command(group(clap::ArgGroup::new("mempolicy").args(["membind", "preferred", "interleave"])))]
pub struct ProbeArgs {
    /// Access pattern.
    #[arg(long, value_enum, default_value = "rand-rw")]
    pub pattern: crate::probe::Pattern,

    /// Buffer size (K, M, G suffixes); gather-add splits it between a, b and ix.
    #[arg(long, default_value = "256M")]
    pub size: crate::units::Size,

    /// Outer iterations, each one timed pass of the inner loop.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub counts: u32,

    /// Keep running passes after --counts until this many seconds have
    /// passed since the first one began: for watching the kernel act on a
    /// running task (forcing it, tracing it), where what matters is how
    /// long it runs, not how much work it does. Experiments compare run
    /// times, so `run` and `jobs` keep a fixed pass count.
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_negative_numbers = true)]
    pub min_time: Option<f64>,

    /// Hard affinity to this node's CPUs (default: float).
    #[arg(long, value_name = "NODE")]
    pub cpunodebind: Option<u32>,

    /// Memory policy MPOL_BIND to this node (default: float, first touch).
    #[arg(long, value_name = "NODE")]
    pub membind: Option<u32>,

    /// Memory policy MPOL_PREFERRED for this node (not the scheduler's --pnid).
    #[arg(long, value_name = "NODE")]
    pub preferred: Option<u32>,

    /// Memory policy MPOL_INTERLEAVE over these nodes.
    #[arg(long, value_name = "LIST")]
    pub interleave: Option<String>,

    /// The scheduler's preferred NUMA node for this task ("Preferred Node
    /// Affinity", PR_PREFERRED_NID, an out-of-tree patch); -1 clears. Used only
    /// when the kernel shows the patch, or with --pnid-prctl.
    #[arg(long, value_name = "NODE", allow_hyphen_values = true)]
    pub pnid: Option<i32>,

    /// The PR_PREFERRED_NID option number and argument layout of your
    /// patched kernel: NUMBER[:poc|v2025] (101 = 2023 POC, 78 = the 2025 series' v1, 79 = its v3).
    #[arg(long, value_name = "NUMBER[:LAYOUT]", requires = "pnid")]
    pub pnid_prctl: Option<String>,

    /// Transparent huge pages for the buffer: madvise on, off, or leave to the system.
    #[arg(long, value_enum, default_value = "system")]
    pub thp: crate::probe::ThpMode,

    /// Check the probe's own CPU every N accesses (0: off).
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub observe_every: u32,

    /// What the memory policy covers: `buffer` (mbind on the buffer) or
    /// `process` (set_mempolicy for the whole probe, as `numactl --membind`
    /// does). NUMA balancing scans no memory under an explicit policy, so
    /// with `process` it sees none of the probe's pages at all.
    #[arg(long, value_enum, default_value = "buffer")]
    pub bind_scope: crate::sys::numa::PolicyScope,

    /// When the buffer is first touched: `placed` (after the CPU binding,
    /// so Mem F's pages are on the node the probe is bound to) or `start`
    /// (before it, where exec put the probe, then the binding: the RFC's
    /// own order). See docs/rfc-procedure.md.
    #[arg(long, value_enum, default_value = "placed")]
    pub first_touch: crate::probe::FirstTouch,

    /// Run the access kernel in this many threads at once (NUMA
    /// balancing's task grouping, swaps and pseudo-interleaving act on
    /// threads that share memory); --size is then the whole workload's
    /// memory, split as --sharing says.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=crate::probe::MAX_THREADS as i64))]
    pub threads: u32,

    /// What the threads' accesses go over: `shared` (one array, every
    /// thread all of it; the default), `private` (each thread its own
    /// part, first touched by it, sharing no written page), or `mix:P`
    /// (P% of the memory and of each thread's accesses shared).
    #[arg(long, value_name = "shared|private|mix:P", requires = "threads")]
    pub sharing: Option<crate::probe::Sharing>,

    /// With --threads: milliseconds between samples of every thread's NUMA
    /// state and every array's pages per node (0: none).
    #[arg(long, default_value_t = crate::probe::Threads::DEFAULT_TIMELINE_MS, value_name = "MS",
          requires = "threads")]
    pub timeline_ms: u32,

    /// With --threads: the workers are processes, not threads, and the
    /// shared array is shared memory (MAP_SHARED, mapped before they are
    /// forked), as a database's backends share its buffer pool. NUMA
    /// balancing groups processes only on shared faults, and scans shared
    /// memory only under a policy that asks for it (--shm-numa-balancing).
    #[arg(long, requires = "threads")]
    pub processes: bool,

    /// With --processes: bind the shared memory over the nodes it may use
    /// with MPOL_F_NUMA_BALANCING (Linux 5.12; with --membind N, to N), the
    /// one way NUMA balancing scans and moves shared memory; without it the
    /// shared pages stay where they were first touched.
    #[arg(long, requires = "processes")]
    pub shm_numa_balancing: bool,

    /// The whole spec as JSON: how `run` and `jobs` hand a child probe its
    /// spec (`ProbeSpec::child_argv`), not a user option.
    #[arg(long, hide = true, value_name = "JSON",
          conflicts_with_all = ["pattern", "size", "counts", "min_time", "cpunodebind",
              "membind", "preferred", "interleave", "pnid", "pnid_prctl", "thp",
              "observe_every", "bind_scope", "threads", "sharing", "timeline_ms",
              "processes", "shm_numa_balancing", "first_touch"])]
    pub spec_json: Option<String>,

    /// Print one JSON record (schema numalab.probe/1) instead of the summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct LoadArgs {
    /// Percent of each CPU to keep busy (0-100).
    #[arg(long, default_value_t = 60.0, value_parser = percent)]
    pub percent: f64,

    /// CPUs to load (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Duty-cycle period in milliseconds. The default is deliberately
    /// incommensurate with kernel tick rates (HZ 100/250/300/1000), so tick
    /// sampling sees the true average instead of a phase-locked alias.
    #[arg(long, default_value_t = crate::load::DEFAULT_PERIOD_MS, value_name = "MS")]
    pub period_ms: f64,

    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// The workers' memory policy. `default`: NUMA balancing scans their
    /// stacks and each comes to prefer its own node; `local`: MPOL_LOCAL
    /// (numactl --localalloc), invisible to NUMA balancing, so no worker
    /// prefers a node (see docs/sim.md, "What the load looks like to NUMA
    /// balancing").
    #[arg(long, value_enum, default_value_t = crate::load::LoadPolicy::Default)]
    pub policy: crate::load::LoadPolicy,

    /// When each worker's busy part starts: `staggered` (worker k, in CPU
    /// order, k/n of a period late), `random` (offsets drawn with --seed,
    /// as load programs started independently) or `spread` (consecutive
    /// phases round the nodes, then LLCs, cores and threads, so every
    /// node, LLC and core carries the same load at every instant; with
    /// `staggered`, nodes numbered as blocks take turns being busy).
    #[arg(long, value_enum, default_value_t = crate::load::LoadPhases::Staggered)]
    pub phases: crate::load::LoadPhases,

    /// Seed of `--phases random`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// A percentage, 0 to 100.
fn percent(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// A positive, finite percentage (a precision target).
fn positive_pct(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive percentage")),
    }
}

/// A finite number >= 0.
fn non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number >= 0")),
    }
}

/// A positive, finite number of seconds.
/// The longest duration any option takes: a year. Bounded at parse time
/// because a time far beyond it overflows the clock arithmetic (`--duration
/// 1e20` panicked in `load`, in `trace` after mounting tracefs, and in
/// `home` after starting the command).
pub const MAX_SECS: f64 = 365.0 * 24.0 * 3600.0;

pub(crate) fn positive_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > MAX_SECS && v.is_finite() => Err(format!(
            "{s:?} seconds is more than a year ({MAX_SECS} s), the longest numalab takes"
        )),
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// A run directory (run.json + samples.jsonl).
    pub dir: PathBuf,

    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::table::Format,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run directories: BASE first, then one or more OTHER runs.
    #[arg(value_name = "DIR")]
    pub runs: Vec<PathBuf>,

    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::table::Format,
}

/// `numalab sim ...`
#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// Fit a hardware profile to recorded runs: from every row with the
    /// CPU bound to a node, the time per access on a CPU against where the
    /// memory was (SLIT distance), fit the loop's own time (`cpu_ns`), the
    /// DRAM latency at each distance measured (local too, from runs of two
    /// buffer sizes or more) and the machine's sample-to-sample spread;
    /// everything else comes from --base. Prints each parameter with its
    /// error and each row's residual; writes the profile. Reads the runs
    /// only.
    Fit(FitArgs),
}

#[derive(Debug, Args)]
pub struct FitArgs {
    /// Run directories (`numalab run --out`), host or simulated.
    #[arg(value_name = "DIR", required = true)]
    pub runs: Vec<PathBuf>,

    /// Where the fitted profile goes (TOML; replaced atomically).
    #[arg(short = 'o', long = "out", value_name = "FILE.toml", required = true)]
    pub out: PathBuf,

    /// The profile whose other values the fitted one keeps (caches,
    /// `exposed`, SMT, kernel costs): a built-in or a file.
    #[arg(long, value_name = "NAME|FILE", default_value = "generic")]
    pub base: String,

    /// The fitted profile's name (default: the output file's stem).
    #[arg(long)]
    pub name: Option<String>,

    /// The machine host runs were recorded on, when it is not this one
    /// (`numalab topo --json` there).
    #[arg(long, value_name = "FILE.json")]
    pub topology: Option<PathBuf>,

    /// Where the L2 and LLC sizes come from: `auto` (this machine's sysfs
    /// when the runs were recorded here, else --base) or `base`. An
    /// emulator's sysfs (our TCG lab) reports caches it does not model:
    /// use `base` there.
    #[arg(long, value_enum, default_value = "auto")]
    pub caches: FitCaches,

    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::table::Format,
}

/// `sim fit --caches`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FitCaches {
    Auto,
    Base,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Run directories, and `numalab jobs -o` record files.
    #[arg(value_name = "DIR", required = true)]
    pub inputs: Vec<PathBuf>,

    /// Where the SVG files go (created when missing; never inside a run
    /// directory). Files of the same name are replaced.
    #[arg(short = 'o', long = "out", value_name = "OUTDIR", default_value = crate::plot::DEFAULT_OUTDIR)]
    pub out: PathBuf,
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn a_year_is_the_longest_duration_taken() {
        assert_eq!(positive_secs("31536000"), Ok(MAX_SECS));
        assert!(positive_secs("31536001")
            .unwrap_err()
            .contains("more than a year"));
        assert!(positive_secs("inf")
            .unwrap_err()
            .contains("not a positive number"));
        assert!(positive_secs("0").is_err());
    }
}
