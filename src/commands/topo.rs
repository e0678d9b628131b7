//! `numalab topo`: load a topology and print it.

use crate::cli::TopoArgs;
use crate::idset::IdSet;
use crate::topology::sysfs::{read_topology, SysRoot};
use crate::topology::{presets, render};
use anyhow::Context;
use std::path::Path;

pub fn run(sysfs_root: &Path, args: &TopoArgs) -> anyhow::Result<()> {
    if args.list_presets {
        for p in presets::PRESETS {
            println!("{:<16} {}", p.name, p.description);
        }
        return Ok(());
    }
    let topo = match &args.capture {
        Some(dir) => {
            // before reading; never into the tree it reads
            crate::paths::check_output_dir(dir, "--capture", &[("--sysfs-root", sysfs_root)])?;
            let sys = SysRoot::recording(sysfs_root);
            let topo = read_topology(&sys)
                .with_context(|| format!("reading the topology under {}", sysfs_root.display()))?;
            let n = sys
                .capture(dir)
                .with_context(|| format!("writing the fixture tree to {}", dir.display()))?;
            eprintln!("captured {n} files under {}", dir.display());
            topo
        }
        None => args.source.machine(sysfs_root).load()?,
    };
    let nodes = match &args.nodes {
        Some(list) => IdSet::parse_in(list, &topo.node_ids(), "node")?,
        None => topo.node_ids(),
    };
    let cpus = match &args.cpus {
        Some(list) => {
            let known: IdSet = topo.cpus.iter().map(|c| c.id).collect();
            Some(IdSet::parse_in(list, &known, "CPU")?)
        }
        None => None,
    };
    if args.json {
        println!("{}", topo.to_json());
        return Ok(());
    }
    print!("{}", render::numactl_hardware(&topo));
    println!();
    print!("{}", render::structure(&topo, &nodes));
    if let Some(cpus) = cpus {
        println!();
        print!("{}", render::cpu_table(&topo, &cpus));
    }
    Ok(())
}
