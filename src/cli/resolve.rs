//! Resolving the command line, once: typed clap arguments (the low-level
//! form, `cli`) become what the library runs (the high-level form): an
//! [`ExperimentSpec`] (`run`), a [`JobsSpec`] (`jobs`), a [`ProbeSpec`]
//! (`probe`, and every job of `jobs`), a [`MachineSource`] and the simulator's profile (`--backend
//! sim`, `topo`). Every check of an option against another, and against the
//! machine, is here or in the type it builds, so a command's glue only asks
//! for the result (ripgrep's low-args -> high-args).

use super::{BackendArgs, JobsArgs, ProbeArgs, RunArgs, TopologySource};
use crate::error::usage;
use crate::idset::IdSet;
use crate::probe::{CpuPlacement, MemPlacement, ProbeSpec, Sharing, Threads};
use crate::run::jobs::{HomeCpu, HomeSpec, JobsSpec};
use crate::run::spec::{ExperimentSpec, PnidRef, Precision};
use crate::topology::sysfs::{read_topology, SysRoot};
use crate::topology::{presets, Topology};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where a command's machine comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineSource {
    /// This machine: sysfs and procfs under `root` (`/`, or a fixture tree
    /// captured with `topo --capture`, `--sysfs-root`).
    Host { root: PathBuf },
    /// A built-in machine (`--preset`, `topo --list-presets`).
    Preset(String),
    /// A topology saved with `topo --json` (`--topology`).
    File(PathBuf),
}

impl MachineSource {
    /// This machine, read under `root`.
    pub fn host(root: &Path) -> MachineSource {
        MachineSource::Host {
            root: root.to_path_buf(),
        }
    }

    /// Loads the topology: an unknown preset, an unreadable or inconsistent
    /// file, or an unreadable sysfs are usage errors naming what is wrong.
    pub fn load(&self) -> anyhow::Result<Topology> {
        match self {
            MachineSource::Preset(name) => match presets::find(name) {
                Some(p) => Ok(p.topology()),
                None => Err(usage(format!(
                    "unknown preset {name:?}; known presets: {}",
                    presets::PRESETS
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            },
            MachineSource::File(path) => {
                let text =
                    crate::input::read_input_text(path, "topology file", crate::input::DOC_LIMIT)?;
                Ok(Topology::from_json(&text, &path.display().to_string())?)
            }
            MachineSource::Host { root } => read_topology(&SysRoot::new(root))
                .with_context(|| format!("reading the topology under {}", root.display())),
        }
    }

    /// How records name it (a simulated run's `topology_source`).
    pub fn label(&self) -> String {
        match self {
            MachineSource::Host { .. } => "this machine".to_string(),
            MachineSource::Preset(p) => format!("preset {p}"),
            MachineSource::File(f) => format!("file {}", f.display()),
        }
    }
}

impl TopologySource {
    /// The machine these options name: a preset, a file, or this one
    /// under `sysfs_root`.
    pub fn machine(&self, sysfs_root: &Path) -> MachineSource {
        match (&self.preset, &self.topology) {
            (Some(p), _) => MachineSource::Preset(p.clone()),
            (_, Some(f)) => MachineSource::File(f.clone()),
            _ => MachineSource::host(sysfs_root),
        }
    }
}

impl BackendArgs {
    /// `--backend sim`: the machine to simulate, where it came from, and
    /// its hardware profile (--profile, else the preset's own, else
    /// generic).
    pub fn sim_machine(
        &self,
        sysfs_root: &Path,
    ) -> anyhow::Result<(Topology, MachineSource, crate::sim::Profile)> {
        let source = self.source.machine(sysfs_root);
        let topo = source.load()?;
        let name = self.profile.clone().unwrap_or_else(|| {
            let preset = match &source {
                MachineSource::Preset(p) => p.as_str(),
                _ => "",
            };
            crate::sim::profile::default_for_preset(preset).to_string()
        });
        Ok((topo, source, crate::sim::Profile::load(&name)?))
    }
}

impl ProbeArgs {
    /// The probe the command line asks for (lists checked against
    /// `topo`): from the options, or, in a child of `run` or `jobs`, the
    /// parent's spec whole (`--spec-json`).
    pub fn spec(&self, topo: &Topology) -> anyhow::Result<ProbeSpec> {
        if let Some(json) = &self.spec_json {
            return serde_json::from_str::<ProbeSpec>(json)
                .map_err(|e| usage(format!("--spec-json: not a probe spec: {e}")));
        }
        let a = self;
        if a.threads == 1 && a.sharing.is_some() {
            return Err(usage(
                "--sharing needs --threads 2 or more: one thread shares with no one",
            ));
        }
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
            first_touch: a.first_touch,
            threads: (a.threads > 1).then_some(Threads {
                count: a.threads,
                sharing: a.sharing.unwrap_or(Sharing::Shared),
                timeline_ms: a.timeline_ms,
                processes: a.processes,
                shm_numa_balancing: a.shm_numa_balancing,
            }),
        })
    }
}

impl RunArgs {
    /// The experiment the command line asks for: the spec file or the
    /// default spec, then every override, checked as a whole.
    pub fn spec(&self) -> anyhow::Result<ExperimentSpec> {
        let a = self;
        let mut spec = match &a.spec {
            Some(p) => {
                let text = crate::input::read_input_text(p, "spec", crate::input::DOC_LIMIT)?;
                ExperimentSpec::from_toml(&text, &p.display().to_string())?
            }
            None => match &a.like {
                // An earlier run's spec, whole (its rows, probe, load and
                // seed): e.g. the simulator's prediction of a host run.
                Some(dir) => crate::run::record::read_meta(dir)?.spec,
                None => ExperimentSpec::default(),
            },
        };
        if a.quick {
            spec.samples = 4;
            spec.probe.size = crate::units::Size(128 << 20);
            spec.probe.counts = 4;
        }
        if let Some(n) = &a.nodes {
            let ids = crate::idset::IdSet::parse(n)?;
            let v: Vec<u32> = n
                .split(',')
                .map(|t| t.trim().parse::<u32>())
                .collect::<Result<_, _>>()
                .map_err(|_| usage(format!("--nodes {n:?}: give two node numbers A,B")))?;
            if v.len() != 2 || ids.len() != 2 {
                return Err(usage(format!(
                    "--nodes {n:?}: give two different nodes A,B"
                )));
            }
            spec.nodes = v;
        }
        if let Some(v) = a.samples {
            spec.samples = v;
        }
        if let Some(v) = a.load {
            spec.load = v;
        }
        if let Some(v) = &a.migration_cost_ns {
            spec.migration_cost_ns = v.clone();
        }
        // Each value names blocks of the spec; one that names none is an error
        // that says which (an empty matrix would say less).
        if let Some(nbs) = &a.nb {
            if let Some(v) = nbs
                .iter()
                .find(|v| !spec.blocks.iter().any(|b| b.nb == **v))
            {
                return Err(usage(format!("--nb {v}: no block of the spec has NB {v}")));
            }
            spec.blocks.retain(|b| nbs.contains(&b.nb));
        }
        if let Some(ps) = &a.pnid {
            let names = |b: &crate::run::spec::Block, p: &str| match (&b.pnid, p.trim()) {
                (PnidRef::Num(n), t) => t.parse::<i32>().ok() == Some(*n),
                (PnidRef::Role(r), t) => r.eq_ignore_ascii_case(t),
            };
            if let Some(p) = ps.iter().find(|p| !spec.blocks.iter().any(|b| names(b, p))) {
                return Err(usage(format!(
                    "--pnid {p}: no block of the spec (after --nb) has PNID {p}"
                )));
            }
            spec.blocks.retain(|b| ps.iter().any(|p| names(b, p)));
        }
        if let Some(v) = &a.mem {
            spec.mem = v.clone();
        }
        if let Some(v) = &a.cpu {
            spec.cpu = v.clone();
        }
        if let Some(v) = a.pattern {
            spec.probe.pattern = v;
        }
        if let Some(v) = a.size {
            spec.probe.size = v;
        }
        if let Some(v) = a.counts {
            spec.probe.counts = v;
        }
        if let Some(v) = a.first_touch {
            spec.probe.first_touch = v;
        }
        if let Some(v) = a.bind_scope {
            spec.probe.bind_scope = v;
        }
        if let Some(count) = a.threads {
            let t = spec.probe.threads;
            spec.probe.threads = Some(Threads {
                count,
                sharing: a
                    .sharing
                    .or(t.map(|t| t.sharing))
                    .unwrap_or(Sharing::Shared),
                timeline_ms: a
                    .timeline_ms
                    .or(t.map(|t| t.timeline_ms))
                    .unwrap_or(Threads::DEFAULT_TIMELINE_MS),
                processes: a.processes || t.is_some_and(|t| t.processes),
                shm_numa_balancing: a.shm_numa_balancing || t.is_some_and(|t| t.shm_numa_balancing),
            });
        }
        if let Some(v) = a.load_policy {
            spec.load_policy = v;
        }
        if let Some(v) = a.load_period_ms {
            spec.load_period_ms = v;
        }
        if let Some(v) = a.load_phases {
            spec.load_phases = v;
        }
        if a.trace {
            spec.trace = true;
        }
        for (i, (k, _)) in a.knob.iter().enumerate() {
            if a.knob[..i].iter().any(|(seen, _)| seen == k) {
                return Err(usage(format!(
                    "--knob {k}: named twice; give each knob once"
                )));
            }
        }
        for (k, v) in &a.knob {
            for b in spec.blocks.iter_mut() {
                b.knobs.insert(k.clone(), v.clone());
            }
        }
        if let Some(v) = a.seed {
            spec.seed = v;
        }
        if let Some(pct) = a.precision {
            let p = Precision {
                pct,
                min_samples: a.min_samples.unwrap_or(Precision::DEFAULT_MIN),
                max_samples: a.max_samples.unwrap_or(Precision::DEFAULT_MAX),
            };
            p.check()?; // min <= max, exit 2 before anything is planned
            spec.samples = p.max_samples;
            spec.precision = Some(p);
        }
        spec.check()?;
        Ok(spec)
    }
}

/// The probe options of every job: jobs' own --pattern, --size and
/// --counts, and the placement options after `--`, parsed once as `numalab
/// probe`'s arguments (typed, never written back into a command line).
impl JobsArgs {
    /// Every job's probe options (see the function's doc above).
    pub fn probe(&self) -> anyhow::Result<ProbeArgs> {
        let a = self;
        use clap::{CommandFactory, FromArgMatches};
        /// `numalab probe`'s arguments alone, to parse what follows `--`.
        #[derive(clap::Parser)]
        #[command(name = "probe options for the jobs", no_binary_name = true)]
        struct Trailing {
            #[command(flatten)]
            probe: ProbeArgs,
        }
        let bad = |e: clap::Error| {
            let msg = e.to_string();
            let msg = msg.trim().trim_start_matches("error: ");
            usage(format!("probe options for the jobs: {msg}"))
        };
        let m = Trailing::command()
            .try_get_matches_from(&a.probe_args)
            .map_err(bad)?;
        // Jobs' own options, or none: given again after `--`, one would be
        // silently dropped.
        for (id, opt) in [
            ("pattern", "--pattern"),
            ("size", "--size"),
            ("counts", "--counts"),
            ("json", "--json"),
            ("spec_json", "--spec-json"),
        ] {
            if m.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                return Err(usage(match opt {
                    "--json" => "--json is not a job option; use --format json".to_string(),
                    _ => format!("{opt} after `--`: give it as a jobs option, before `--`"),
                }));
            }
        }
        let mut pa = Trailing::from_arg_matches(&m).map_err(bad)?.probe;
        pa.pattern = a.pattern;
        pa.size = a.size;
        pa.counts = a.counts;
        Ok(pa)
    }

    /// What to run on `topo`: every job's probe, checked against the
    /// machine, and the jobs' homenodes (`--home`). `simulated`: the
    /// machine is the simulator's, whose kernel has the PNID patch built
    /// in, so this kernel's PNID interface is not asked about, and a
    /// `--pnid-prctl` (a host kernel's interface) is refused.
    pub fn spec(&self, topo: &Topology, simulated: bool) -> anyhow::Result<JobsSpec> {
        let a = self;
        let probe = a.probe()?.spec(topo)?;
        let home = match a.home.as_deref().map(str::trim) {
            None => None,
            Some(h) => {
                if probe.mem != MemPlacement::Float || probe.cpu != CpuPlacement::Float {
                    return Err(usage(
                        "--home places each job's memory and CPUs on its homenode: leave the \
                         probe's memory and CPU placement options out",
                    ));
                }
                let node = match h {
                    "auto" => None,
                    n => {
                        let n = n.parse::<u32>().map_err(|_| {
                            usage(format!("--home {n:?}: give a node id or `auto`"))
                        })?;
                        crate::home::home_cpus(topo, "--home", n)?;
                        Some(n)
                    }
                };
                Some(HomeSpec {
                    node,
                    cpu: a.home_cpu,
                })
            }
        };
        // Pinning and memory alone are set once at each job's launch and
        // inherited by every thread and process it starts (numactl's manual
        // pinning, per instance); the agent and the scheduler follow the
        // job's one probe task.
        if let (Some(_), Some(t)) = (&home, probe.threads) {
            if t.shm_numa_balancing {
                return Err(usage(format!(
                    "--home: every job's memory is preferred on its homenode; {}",
                    crate::probe::SHM_POLICY_CONFLICT
                )));
            }
        }
        if let (Some(h), Some(_)) = (&home, probe.threads) {
            if matches!(h.cpu, HomeCpu::Agent | HomeCpu::Sched) {
                return Err(usage(format!(
                    "--home-cpu {} with a threaded probe (--threads after `--`): it follows one \
                     task per job; --home-cpu pin (each job's CPUs and memory on its node, as \
                     numactl) or float work with threads",
                    h.cpu.name()
                )));
            }
        }
        if simulated {
            crate::experiment::simulated::check_probe(probe.threads)?;
            crate::experiment::simulated::jobs::check(home.as_ref())?;
            if probe.pnid_prctl.is_some() {
                return Err(usage(
                    "--pnid-prctl names a host kernel's prctl; the simulated kernel has the PNID \
                     patch built in",
                ));
            }
            // The simulator checks the node; this kernel's interface is
            // not the question.
            crate::probe::validate(
                &ProbeSpec {
                    pnid: None,
                    ..probe.clone()
                },
                topo,
            )?;
        } else {
            crate::probe::validate(&probe, topo)?;
        }
        Ok(JobsSpec {
            // N (1..=1024) and --load (0..=100) are checked by clap.
            n: a.n.unwrap_or(1),
            probe,
            load: a.load,
            home,
            nb: a.nb,
            load_policy: a.load_policy,
            load_period_ms: a.load_period_ms,
            load_phases: a.load_phases,
            seed: a.seed.unwrap_or(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::idset::IdSet;
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
            threads: None,
            first_touch: crate::probe::FirstTouch::Placed,
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
                first_touch: crate::probe::FirstTouch::Start,
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
            assert_eq!(parse(&argv).spec(&topo).unwrap(), spec, "{argv:?}");
        }
    }
}
