//! `numalab probe`: validate, run, print.

use crate::cli::ProbeArgs;
use crate::error::usage;
use crate::idset::IdSet;
use crate::probe::{self, summary, CpuPlacement, MemPlacement, ProbeSpec};
use crate::topology::Topology;
use std::path::Path;

/// The spec a command line asks for (lists are checked against `topo`).
pub fn spec_from_args(a: &ProbeArgs, topo: &Topology) -> anyhow::Result<ProbeSpec> {
    let mem = if let Some(n) = a.membind {
        MemPlacement::Bind(n)
    } else if let Some(n) = a.preferred {
        MemPlacement::Preferred(n)
    } else if let Some(list) = &a.interleave {
        MemPlacement::Interleave(IdSet::parse_in(list, &topo.node_ids(), "node")?)
    } else {
        MemPlacement::Float
    };
    Ok(ProbeSpec {
        pattern: a.pattern,
        size_bytes: a.size,
        counts: a.counts,
        cpu: a
            .cpunodebind
            .map_or(CpuPlacement::Float, CpuPlacement::Node),
        mem,
        pnid: a.pnid,
        pnid_prctl: a.pnid_prctl.clone(),
        thp: a.thp,
        observe_every: a.observe_every,
    })
}

pub fn run(sysfs_root: &Path, args: &ProbeArgs) -> anyhow::Result<()> {
    let topo = super::topo::load(sysfs_root, &Default::default())?;
    if !topo.numa_available
        && (args.membind.is_some() || args.interleave.is_some() || args.preferred.is_some())
    {
        return Err(usage(
            "this kernel has no NUMA support: memory policies cannot be set",
        ));
    }
    let spec = spec_from_args(args, &topo)?;
    let validated = probe::validate(&spec, &topo)?;
    let bound = match spec.mem {
        MemPlacement::Bind(n) => Some(n),
        _ => None,
    };
    let what = "probe --size";
    let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
    probe::memory::check(&sys, &topo, what, spec.size_bytes, bound)?;
    let quiet = args.json;
    let counts = spec.counts;
    let record = probe::run::run(&validated, &topo, |i, ns| {
        if !quiet {
            eprintln!("  iteration {}/{}: {:.3} s", i + 1, counts, ns as f64 / 1e9);
        }
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        print!("{}", summary::summary(&record, &topo));
    }
    Ok(())
}
