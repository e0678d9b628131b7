//! `numalab plot DIR... [-o OUTDIR]`: read every input, draw every figure
//! in memory, then write them (nothing is written when any input is bad),
//! and print the paths written.

use crate::cli::PlotArgs;
use crate::plot;

pub fn run(a: &PlotArgs) -> anyhow::Result<()> {
    let inputs = a
        .inputs
        .iter()
        .map(|p| plot::load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    plot::check_outdir(&a.out, &inputs)?;
    for i in &inputs {
        if let plot::Input::Run(r) = i {
            for n in &r.notes {
                eprintln!("warning: {n}");
            }
        }
    }
    let figures = plot::figures(inputs)?;
    for p in plot::write(&a.out, &figures)? {
        println!("{}", p.display());
    }
    Ok(())
}
