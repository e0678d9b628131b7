//! `numalab compare BASE OTHER...`: reads each run's records (never writes:
//! no export, no cut of a torn line), compares them
//! ([`crate::compare::compare`]) and prints the result. Warnings about the
//! records and about what differs between the runs go to stderr as well as
//! into the output.

use crate::cli::CompareArgs;
use crate::compare;

pub fn run(a: &CompareArgs) -> anyhow::Result<()> {
    if a.runs.len() < 2 {
        return Err(crate::error::usage(format!(
            "compare needs BASE and at least one OTHER run directory (got {}{})",
            a.runs.len(),
            a.runs
                .first()
                .map(|d| format!(": {}", d.display()))
                .unwrap_or_default()
        )));
    }
    let runs = a
        .runs
        .iter()
        .map(|d| compare::load(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let c = compare::compare(&runs)?;
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    print!("{}", crate::table::Render::render(&c, a.format)?);
    Ok(())
}
