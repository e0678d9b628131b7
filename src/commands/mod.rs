//! Command orchestration: each subcommand's glue between the library and
//! the terminal. Errors carry context (`anyhow`); `crate::error` maps them
//! to exit codes.

pub mod load;
pub mod probe;
pub mod report;
pub mod restore;
pub mod run;
pub mod topo;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Topo(args) => topo::run(&cli.sysfs_root, &args),
        Command::Probe(args) => probe::run(&cli.sysfs_root, &args),
        Command::Load(args) => load::run(&cli.sysfs_root, &args),
        Command::Run(args) => run::run(&cli.sysfs_root, &args),
        Command::Report(args) => report::run(&args),
        Command::Restore => restore::run(),
    }
}
