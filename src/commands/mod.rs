//! Command orchestration: each subcommand's glue between the library and
//! the terminal, in the order of the work: resolve the arguments
//! (`crate::cli::resolve`), check before any change, lock and journal what
//! changes, run, print. No logic of its own lives here. Errors carry
//! context (`anyhow`); `crate::error` maps them to exit codes.

pub mod compare;
pub mod home;
pub mod jobs;
pub mod load;
pub mod plot;
pub mod probe;
pub mod report;
pub mod restore;
pub mod run;
pub mod sched;
pub mod sim;
pub mod topo;
pub mod trace;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Topo(args) => topo::run(&cli.sysfs_root, &args),
        Command::Probe(args) => probe::run(&cli.sysfs_root, &args),
        Command::Load(args) => load::run(&cli.sysfs_root, &args),
        Command::Run(args) => run::run(&cli.sysfs_root, &args),
        Command::Report(args) => report::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Plot(args) => plot::run(&args),
        Command::Trace(args) => trace::run(&cli.sysfs_root, &args),
        Command::Jobs(args) => jobs::run(&cli.sysfs_root, &args),
        Command::Home(args) => home::run(&cli.sysfs_root, &args),
        Command::Sched(args) => sched::run(&cli.sysfs_root, &args),
        Command::Sim(cmd) => sim::run(&cli.sysfs_root, &cmd),
        Command::Restore => restore::run(&cli.sysfs_root),
        Command::Generate { what, subcommand } => {
            crate::cli::generate(what, subcommand.as_deref(), &mut std::io::stdout().lock())
        }
        Command::Timeline { spec_json } => crate::probe::timeline::sampler_main(&spec_json),
        Command::Gate { command } => {
            let e = crate::sys::wait_at_gate_and_exec(&command);
            Err(crate::error::usage(format!(
                "cannot run {:?}: {e}",
                command
                    .first()
                    .map(|c| c.to_string_lossy())
                    .unwrap_or_default()
            )))
        }
    }
}
