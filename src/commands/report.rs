//! `numalab report DIR`: every report from the records alone.

use crate::cli::ReportArgs;
use crate::experiment::record;
use crate::report;

pub fn run(a: &ReportArgs) -> anyhow::Result<()> {
    let meta = record::read_meta(&a.dir)?;
    let samples = record::read_samples(&a.dir)?;
    print!("{}", report::render(&meta, &samples, a.format));
    Ok(())
}
