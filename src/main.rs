//! `numalab`: parse the command line, run the command, turn errors into one
//! message and an exit code (see `numalab::error`).

use clap::Parser;
use numalab::{cli::Cli, commands, error, sys};
use std::process::ExitCode;

fn main() -> ExitCode {
    sys::default_sigpipe();
    let cli = Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", error::message(&err));
            ExitCode::from(error::exit_code(&err))
        }
    }
}
