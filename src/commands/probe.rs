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
        size: a.size,
        counts: a.counts,
        min_time_ns: a.min_time.map(|s| (s * 1e9) as u64),
        cpu: a
            .cpunodebind
            .map_or(CpuPlacement::Float, CpuPlacement::Node),
        mem,
        pnid: a.pnid,
        pnid_prctl: a.pnid_prctl.clone(),
        thp: a.thp,
        observe_every: a.observe_every,
        bind_scope: a.bind_scope,
    })
}

pub fn run(sysfs_root: &Path, args: &ProbeArgs) -> anyhow::Result<()> {
    let topo = super::topo::load(sysfs_root, &Default::default())?;
    let spec = match &args.spec_json {
        // A child of `run` or `jobs`: the parent's spec, whole.
        Some(json) => serde_json::from_str::<ProbeSpec>(json)
            .map_err(|e| usage(format!("--spec-json: not a probe spec: {e}")))?,
        None => spec_from_args(args, &topo)?,
    };
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
    let record = probe::run::run(&validated, &topo, |i, ns| {
        if !quiet {
            eprintln!("  iteration {}{of}: {:.3} s", i + 1, ns as f64 / 1e9);
        }
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        print!("{}", summary::summary(&record, &topo));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::probe::kernels::Pattern;
    use crate::probe::ThpMode;
    use crate::sys::numa::PolicyScope;
    use clap::Parser;

    /// A child probe (run's samples, jobs' jobs) gets its spec whole
    /// (`child_argv`), and the options `jobs` shows for a spec (`options`)
    /// are what a user would type: both must read back as the same spec,
    /// or a sample would run something else than its row asks for, and a
    /// user copying a header something else than the jobs ran.
    #[test]
    fn child_argv_and_options_read_back_as_the_same_spec() {
        let topo = crate::topology::presets::find("ia64-4n")
            .unwrap()
            .topology();
        let base = ProbeSpec {
            pattern: Pattern::Chase,
            size: crate::units::Size(3 << 20),
            counts: 7,
            min_time_ns: None,
            cpu: CpuPlacement::Float,
            mem: MemPlacement::Float,
            pnid: None,
            pnid_prctl: None,
            thp: ThpMode::Off,
            observe_every: 0,
            bind_scope: PolicyScope::Buffer,
        };
        let specs = [
            base.clone(),
            ProbeSpec {
                pattern: Pattern::GatherAdd,
                size: crate::units::Size(4096 + 4096),
                cpu: CpuPlacement::Node(3),
                mem: MemPlacement::Bind(2),
                thp: ThpMode::On,
                observe_every: 4096,
                ..base.clone()
            },
            ProbeSpec {
                mem: MemPlacement::Preferred(1),
                pnid: Some(1),
                pnid_prctl: Some("77:v2025".into()),
                min_time_ns: Some(2_250_000_000),
                bind_scope: PolicyScope::Process,
                ..base.clone()
            },
            ProbeSpec {
                pattern: Pattern::SeqRw,
                size: crate::units::Size(1 << 30),
                mem: MemPlacement::Interleave(IdSet::parse("0,2-3").unwrap()),
                thp: ThpMode::System,
                ..base
            },
        ];
        let parse = |argv: &[String]| {
            let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let Command::Probe(a) = cli.command else {
                panic!("{argv:?} is not a probe command line")
            };
            a
        };
        for spec in specs {
            let mut argv = vec!["numalab".to_string()];
            argv.extend(spec.child_argv());
            let a = parse(&argv);
            assert!(a.json, "{argv:?}: a child prints its record as JSON");
            let json = a.spec_json.as_deref().expect("the spec, whole");
            assert_eq!(serde_json::from_str::<ProbeSpec>(json).unwrap(), spec);
            let mut argv = vec!["numalab".to_string(), "probe".to_string()];
            argv.extend(spec.options());
            assert_eq!(
                spec_from_args(&parse(&argv), &topo).unwrap(),
                spec,
                "{argv:?}"
            );
        }
    }
}
