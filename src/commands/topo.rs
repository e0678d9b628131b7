//! `numalab topo`: load a topology and print it.

use crate::cli::{TopoArgs, TopologySource};
use crate::error::usage;
use crate::idset::IdSet;
use crate::topology::sysfs::{read_topology, SysRoot};
use crate::topology::{presets, render, Topology};
use anyhow::Context;
use std::path::Path;

/// Loads the topology a command asked for: a preset, a JSON file, or the
/// machine under `sysfs_root`.
pub fn load(sysfs_root: &Path, source: &TopologySource) -> anyhow::Result<Topology> {
    if let Some(name) = &source.preset {
        return match presets::find(name) {
            Some(p) => Ok(p.topology()),
            None => Err(usage(format!(
                "unknown preset {name:?}; known presets: {}",
                presets::PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        };
    }
    if let Some(path) = &source.topology {
        let text = crate::input::read_input_text(path, "topology file", crate::input::DOC_LIMIT)?;
        return Ok(Topology::from_json(&text, &path.display().to_string())?);
    }
    let sys = SysRoot::new(sysfs_root);
    read_topology(&sys)
        .with_context(|| format!("reading the topology under {}", sysfs_root.display()))
}

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
        None => load(sysfs_root, &args.source)?,
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

/// `--backend sim`: the machine to simulate (the topology, where it came
/// from, for run.json) and its hardware profile (--profile, else the
/// preset's own, else generic).
pub fn sim_machine(
    sysfs_root: &Path,
    a: &crate::cli::BackendArgs,
) -> anyhow::Result<(Topology, String, crate::sim::Profile)> {
    let topo = load(sysfs_root, &a.source)?;
    let source = match (&a.source.preset, &a.source.topology) {
        (Some(p), _) => format!("preset {p}"),
        (_, Some(f)) => format!("file {}", f.display()),
        _ => "this machine".to_string(),
    };
    let name = a.profile.clone().unwrap_or_else(|| {
        crate::sim::profile::default_for_preset(a.source.preset.as_deref().unwrap_or(""))
            .to_string()
    });
    Ok((topo, source, crate::sim::Profile::load(&name)?))
}
