//! `numalab jobs`: check the arguments, run the jobs (or read a saved
//! record), print the table.

use crate::cli::JobsArgs;
use crate::error::usage;
use crate::jobs::{self, JobsRecord, JobsSpec};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard, StateLock};
use crate::table::{Format, Render};
use std::io::IsTerminal;
use std::path::Path;

fn print(rec: &JobsRecord, format: Format) -> anyhow::Result<()> {
    print!("{}", rec.render(format)?);
    Ok(())
}

/// The one node memory is bound to, if it is.
fn bound_node(mem: &crate::probe::MemPlacement) -> Option<u32> {
    match mem {
        crate::probe::MemPlacement::Bind(n) => Some(*n),
        _ => None,
    }
}

pub fn run(sysfs_root: &Path, a: &JobsArgs) -> anyhow::Result<()> {
    if let Some(path) = &a.from {
        print(&jobs::read_record(path)?, a.format)?;
        return Ok(());
    }
    // N (1..=1024) and --load (0..=100) are checked by clap at the edge.
    let n = a.n.unwrap_or(1);
    if let Some(out) = &a.out {
        crate::paths::check_output_file(out, "--out", &a.sim.inputs())?; // before the work, not after
    }
    let sim = a.sim.backend == crate::cli::BackendKind::Sim;
    let random_phases = a.load_phases == crate::load::LoadPhases::Random;
    if !sim && (a.sim.names_a_machine() || (a.seed.is_some() && !random_phases)) {
        return Err(usage(
            "--preset, --topology, --profile and --seed choose the simulated machine: add --backend sim",
        ));
    }
    crate::load::check_period_ms("--load-period-ms", a.load_period_ms)?;
    let (topo, source, profile) = if sim {
        let (t, s, p) = a.sim.sim_machine(sysfs_root)?;
        (t, s.label(), Some(p))
    } else {
        let t = crate::cli::MachineSource::host(sysfs_root).load()?;
        (t, String::new(), None)
    };
    let pa = a.probe()?;
    let spec = pa.spec(&topo)?;
    let home = match a.home.as_deref().map(str::trim) {
        None => None,
        Some(h) => {
            if spec.mem != crate::probe::MemPlacement::Float
                || spec.cpu != crate::probe::CpuPlacement::Float
            {
                return Err(usage(
                    "--home places each job's memory and CPUs on its homenode: leave the probe's memory and CPU placement options out",
                ));
            }
            let node = match h {
                "auto" => None,
                n => {
                    let n = n
                        .parse::<u32>()
                        .map_err(|_| usage(format!("--home {n:?}: give a node id or `auto`")))?;
                    crate::home::home_cpus(&topo, "--home", n)?;
                    Some(n)
                }
            };
            Some(jobs::HomeSpec {
                node,
                cpu: a.home_cpu,
            })
        }
    };
    if profile.is_some() {
        // The simulated kernel has the PNID patch built in: this kernel's
        // interface is not the question (the simulator checks the node).
        crate::probe::validate(
            &crate::probe::ProbeSpec {
                pnid: None,
                ..spec.clone()
            },
            &topo,
        )?;
    } else {
        crate::probe::validate(&spec, &topo)?;
    }
    if let Some(profile) = profile {
        if spec.pnid_prctl.is_some() {
            return Err(usage(
                "--pnid-prctl names a host kernel's prctl; the simulated kernel has the PNID patch built in",
            ));
        }
        jobs::simulated::check(home.as_ref())?;
        eprintln!(
            "jobs: simulating {n} jobs on {} ({source}) with profile {}",
            topo.cpu_model.as_deref().unwrap_or("a machine"),
            profile.name
        );
        let rec = jobs::simulated::run(&jobs::simulated::SimJobs {
            topo: &topo,
            source,
            profile,
            n,
            probe: spec,
            load: a.load,
            home,
            seed: a.seed.unwrap_or(1),
            nb: a.nb.unwrap_or(1),
            load_policy: a.load_policy,
            load_period_ms: a.load_period_ms,
            load_phases: a.load_phases,
        })?;
        if let Some(out) = &a.out {
            state::write_atomic(out, rec.json()?.as_bytes())?;
        }
        print(&rec, a.format)?;
        return Ok(());
    }
    // Every job is a process: its buffer plus the process itself.
    let per_job = spec
        .size
        .bytes()
        .saturating_add(crate::probe::memory::PER_PROCESS);
    let what = format!("jobs: {n} x (--size {} + 8 MiB per process)", a.size);
    let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
    crate::probe::memory::check(&sys, &topo, &what, per_job.saturating_mul(n as u64), None)?;
    let total = spec.size.bytes().saturating_mul(n as u64);
    let what = format!("jobs: {n} x --size {}", a.size);
    if let Some(node) = bound_node(&spec.mem) {
        crate::probe::memory::check_node(&sys, &topo, &what, total, node)?;
    }

    let no_tracing = |e: anyhow::Error| {
        usage(format!(
            "{e:#}; or run with --no-trace (self-observed residency)"
        ))
    };
    if !a.no_trace {
        crate::trace::tracefs::Tracefs::preflight().map_err(no_tracing)?;
    }
    if home.as_ref().is_some_and(|h| h.cpu == jobs::HomeCpu::Sched) {
        crate::sched::preflight(&sys, &topo, &Default::default())
            .map_err(|e| usage(format!("--home-cpu sched: {e}")))?;
    }
    if a.nb.is_some() && !state::writable(state::NUMA_BALANCING) {
        return Err(usage(format!(
            "--nb: {} is not writable here (setting it needs root and a kernel with NUMA \
             balancing); leave --nb out to run under the machine's setting",
            state::NUMA_BALANCING
        )));
    }
    let lock = StateLock::acquire(&state::state_dir()?, "numalab jobs")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let mut guard = Guard::new(lock, Path::new(""));
    let tracefs = if a.no_trace {
        None
    } else {
        Some(crate::trace::tracefs::Tracefs::locate(&mut guard).map_err(no_tracing)?)
    };
    let jspec = JobsSpec {
        n,
        probe: spec,
        load: a.load,
        tracefs,
        buffer_kb: a.buffer_kb,
        home,
        nb: a.nb,
        load_policy: a.load_policy,
        load_period_ms: a.load_period_ms,
        load_phases: a.load_phases,
        seed: a.seed.unwrap_or(1),
    };
    // Progress on a terminal only: jobs finished of N, elapsed (indicatif).
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(n as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("jobs: {pos}/{len} finished | {elapsed}")
                .expect("a valid template"),
        );
        b
    });
    let rec = jobs::run(&topo, &jspec, &mut guard, &stop, |done, _, _| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    });
    if let Some(b) = bar {
        b.finish();
    }
    guard.restore()?;
    let rec = rec.map_err(|e| {
        if e.is::<crate::sys::signals::Interrupted>() {
            e.context("every job killed, tracing state restored")
        } else {
            e
        }
    })?;
    if let Some(out) = &a.out {
        state::write_atomic(out, rec.json()?.as_bytes())?;
    }
    print(&rec, a.format)?;
    Ok(())
}
