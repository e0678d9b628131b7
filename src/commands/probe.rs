//! `numalab probe`: validate, run, print.

use crate::cli::ProbeArgs;
use crate::error::usage;
use crate::probe::{self, summary, MemPlacement};
use std::path::Path;

pub fn run(sysfs_root: &Path, args: &ProbeArgs) -> anyhow::Result<()> {
    let topo = crate::cli::MachineSource::host(sysfs_root).load()?;
    let spec = args.spec(&topo)?;
    if !topo.numa_available && spec.mem != MemPlacement::Float {
        return Err(usage(
            "this kernel has no NUMA support: memory policies cannot be set",
        ));
    }
    let validated = probe::validate(&spec, &topo)?;
    let bound = match spec.mem {
        MemPlacement::Bind(n) => Some(n),
        _ => None,
    };
    let what = "probe --size";
    let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
    probe::memory::check(&sys, &topo, what, spec.size.bytes(), bound)?;
    let quiet = args.json;
    let of = match spec.min_time_ns {
        None => format!("/{}", spec.counts),
        Some(ns) => format!(" (at least {}, and {} s)", spec.counts, ns as f64 / 1e9),
    };
    let record = match spec.threads {
        None => probe::run::run(&validated, &topo, |i, ns| {
            if !quiet {
                eprintln!("  iteration {}{of}: {:.3} s", i + 1, ns as f64 / 1e9);
            }
        })?,
        Some(t) => probe::threads::run(&validated, &topo, t, !quiet)?,
    };
    if args.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        print!("{}", summary::summary(&record, &topo));
    }
    Ok(())
}
