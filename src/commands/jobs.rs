//! `numalab jobs`: read a saved record, or resolve the jobs, make the
//! backend (this machine or the simulator, as `run` does), have it run
//! them, print the table.

use crate::cli::{BackendKind, JobsArgs, MachineSource};
use crate::error::usage;
use crate::experiment::backend::Backend;
use crate::experiment::host::Host;
use crate::experiment::simulated::Sim;
use crate::run::jobs::{self, HomeCpu, JobsRecord, JobsSpec};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard, StateLock};
use crate::table::{Format, Render};
use crate::topology::sysfs::SysRoot;
use crate::topology::Topology;
use crate::trace::tracefs::Tracefs;
use std::io::IsTerminal;
use std::path::Path;

fn print(rec: &JobsRecord, format: Format) -> anyhow::Result<()> {
    print!("{}", rec.render(format)?);
    Ok(())
}

pub fn run(sysfs_root: &Path, a: &JobsArgs) -> anyhow::Result<()> {
    if let Some(path) = &a.from {
        return print(&jobs::read_record(path)?, a.format);
    }
    if let Some(out) = &a.out {
        crate::paths::check_output_file(out, "--out", &a.sim.inputs())?; // before the work, not after
    }
    let sim = a.sim.backend == BackendKind::Sim;
    let random_phases = a.load_phases == crate::load::LoadPhases::Random;
    if !sim && (a.sim.names_a_machine() || (a.seed.is_some() && !random_phases)) {
        return Err(usage(
            "--preset, --topology, --profile and --seed choose the simulated machine: add --backend sim",
        ));
    }
    crate::load::check_period_ms("--load-period-ms", a.load_period_ms)?;
    let rec = if sim {
        let (topo, source, profile) = a.sim.sim_machine(sysfs_root)?;
        let spec = a.spec(&topo, true)?;
        eprintln!(
            "jobs: simulating {} jobs on {} ({}) with profile {}",
            spec.n,
            topo.cpu_model.as_deref().unwrap_or("a machine"),
            source.label(),
            profile.name
        );
        let load = spec.load_spec(&topo, topo.online_cpus());
        let mut backend = Sim::new(&topo, &source.label(), profile, &load)?;
        // Nothing on this machine changes: no lock, no journal, and no
        // signal handler: the simulation does not poll for one, so Ctrl-C
        // ends it at once, as it always did.
        execute(
            &mut backend,
            &spec,
            Guard::inert(Path::new("")),
            &Stop::new(),
        )?
    } else {
        let topo = MachineSource::host(sysfs_root).load()?;
        let spec = a.spec(&topo, false)?;
        let sys = SysRoot::new(sysfs_root);
        check_host(&sys, &topo, &spec, a)?;
        // One state-changing numalab at a time; a killed run's journal
        // must be restored first.
        let lock = StateLock::acquire(&state::state_dir()?, "numalab jobs")?;
        lock.refuse_if_unfinished()?;
        // Signals are heeded before the first change, so every change is
        // put back.
        let stop = Stop::on_signals()?;
        let mut guard = Guard::new(lock, Path::new(""));
        let load = spec.load_spec(&topo, topo.usable_cpus());
        let mut backend = Host::new(&topo, load, None)?;
        if !a.no_trace {
            let tfs = Tracefs::locate(&mut guard).map_err(no_tracing)?;
            backend.enable_trace(tfs, a.buffer_kb);
        }
        execute(&mut backend, &spec, guard, &stop)?
    };
    if let Some(out) = &a.out {
        state::write_atomic(out, rec.json()?.as_bytes())?;
    }
    print(&rec, a.format)
}

/// A tracing failure, with the way around it.
fn no_tracing(e: anyhow::Error) -> anyhow::Error {
    usage(format!(
        "{e:#}; or run with --no-trace (self-observed residency)"
    ))
}

/// What the jobs need from this machine, before anything changes: the
/// memory for every job, tracefs (unless `--no-trace`), a loadable
/// scheduler (`--home-cpu sched`), a writable kernel.numa_balancing
/// (`--nb`).
fn check_host(sys: &SysRoot, topo: &Topology, spec: &JobsSpec, a: &JobsArgs) -> anyhow::Result<()> {
    let n = spec.n;
    // Every job is a process: its buffer plus the process itself.
    let per_job = spec
        .probe
        .size
        .bytes()
        .saturating_add(crate::probe::memory::PER_PROCESS);
    let what = format!("jobs: {n} x (--size {} + 8 MiB per process)", a.size);
    crate::probe::memory::check(sys, topo, &what, per_job.saturating_mul(n as u64), None)?;
    if let crate::probe::MemPlacement::Bind(node) = spec.probe.mem {
        let total = spec.probe.size.bytes().saturating_mul(n as u64);
        let what = format!("jobs: {n} x --size {}", a.size);
        crate::probe::memory::check_node(sys, topo, &what, total, node)?;
    }
    if !a.no_trace {
        Tracefs::preflight().map_err(no_tracing)?;
    }
    if spec.home.as_ref().is_some_and(|h| h.cpu == HomeCpu::Sched) {
        crate::sched::preflight(sys, topo, &Default::default())
            .map_err(|e| usage(format!("--home-cpu sched: {e}")))?;
    }
    if spec.nb.is_some() && !state::writable(state::NUMA_BALANCING) {
        return Err(usage(format!(
            "--nb: {} is not writable here (setting it needs root and a kernel with NUMA \
             balancing); leave --nb out to run under the machine's setting",
            state::NUMA_BALANCING
        )));
    }
    Ok(())
}

/// Has `backend` run the jobs, with the host's progress on a terminal
/// (jobs finished of N, elapsed: indicatif), and puts the system back (the
/// guard) on every way out.
fn execute(
    backend: &mut dyn Backend,
    spec: &JobsSpec,
    mut guard: Guard,
    stop: &Stop,
) -> anyhow::Result<JobsRecord> {
    // The host's jobs end one by one; a simulation ends all at once.
    let shown = backend.kind() == BackendKind::Host && std::io::stderr().is_terminal();
    let bar = shown.then(|| {
        let b = indicatif::ProgressBar::new(spec.n as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("jobs: {pos}/{len} finished | {elapsed}")
                .expect("a valid template"),
        );
        b
    });
    let rec = backend.jobs(spec, stop, &mut guard, &mut |done, _, _| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    });
    if let Some(b) = bar {
        b.finish();
    }
    guard.restore()?;
    rec.map_err(|e| {
        if e.is::<crate::sys::signals::Interrupted>() {
            e.context("every job killed, tracing state restored")
        } else {
            e
        }
    })
}
