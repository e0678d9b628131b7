//! `numalab run`: spec -> backend (host or sim) -> records -> reports.

use crate::cli::{BackendKind, RunArgs};
use crate::error::usage;
use crate::experiment::backend::Backend;
use crate::experiment::host::Host;
use crate::experiment::runner;
use crate::experiment::simulated::Sim;
use crate::report;
use crate::run::record;
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard, StateLock};
use crate::table::Format;
use crate::trace::live::DEFAULT_BUFFER_KB;
use crate::trace::tracefs::Tracefs;
use std::path::{Path, PathBuf};

fn default_out() -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("runs/run-{t}"))
}

pub fn run(sysfs_root: &Path, a: &RunArgs) -> anyhow::Result<()> {
    let resumed = match &a.resume {
        Some(dir) => Some(record::read_meta(dir)?),
        None => None,
    };
    let sim = match &resumed {
        Some(m) => m.backend == BackendKind::Sim,
        None => a.sim.backend == BackendKind::Sim,
    };
    if sim {
        return run_sim(sysfs_root, a, resumed);
    }
    if a.sim.names_a_machine() {
        return Err(usage(
            "--preset, --topology and --profile choose the simulated machine: add --backend sim",
        ));
    }
    let topo = crate::cli::MachineSource::host(sysfs_root).load()?;
    let mut via_agent = a.pnid_via == Some(crate::cli::PnidVia::Agent);
    let mut via_sched = a.pnid_via == Some(crate::cli::PnidVia::Sched);
    let (dir, spec) = match (&a.resume, resumed) {
        (Some(dir), Some(meta)) => {
            via_agent = meta.pnid_via == crate::cli::PnidVia::Agent;
            via_sched = meta.pnid_via == crate::cli::PnidVia::Sched;
            // A bad record line is an error before anything changes.
            record::read_samples(dir, &meta)?.require_clean()?;
            crate::paths::check_output_dir(dir, "--resume", &[])?;
            (dir.clone(), meta.spec)
        }
        _ => {
            let spec = a.spec()?;
            spec.rows(&topo)?; // every spec error before anything changes
            let dir = a.out.clone().unwrap_or_else(default_out);
            record::check_new_run_dir(&dir)?; // no other run's files, writable
            (dir, spec)
        }
    };
    spec.check_memory(&crate::topology::sysfs::SysRoot::new(sysfs_root), &topo)?;
    // Before any change: the scheduler must be able to load here.
    let sched_cfg = via_sched
        .then(|| {
            let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
            crate::sched::preflight(&sys, &topo, &Default::default())
                .map_err(|e| usage(format!("--pnid-via sched: {e}")))
        })
        .transpose()?;
    if spec.trace {
        // Before any change: tracing must be possible (root, tracefs).
        Tracefs::preflight()?;
    }
    // One state-changing numalab at a time, locked before the initial
    // values are read; a killed run's journal must be restored first.
    let lock = StateLock::acquire(&state::state_dir()?, "numalab run")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let load = spec.load_spec(&topo, topo.usable_cpus());
    let mut backend = Host::new(&topo, load, a.pnid_prctl.clone())?;
    if via_agent {
        backend.pnid_via_agent();
    }
    if let Some(cfg) = sched_cfg {
        backend.pnid_via_sched(cfg);
    }
    let mut guard = Guard::new(lock, &dir);
    if spec.trace {
        backend.enable_trace(Tracefs::locate(&mut guard)?, DEFAULT_BUFFER_KB);
        // The load balancer's counters explain the trace's moves (how:
        // which kind of balancing, pulled although hot, pushed); a kernel
        // without them still traces.
        let sys = crate::topology::sysfs::SysRoot::new(sysfs_root);
        if let Err(why) = backend.enable_schedstat(&mut guard, sys) {
            eprintln!("run: {why}; samples carry no `balance`");
        }
    }
    let debugfs_mounted =
        Path::new(state::MIGRATION_COST).exists() || Path::new(state::DEBUGFS_SCHED).exists();
    if !spec.migration_cost_ns.is_empty() && !debugfs_mounted {
        // Not fatal: without debugfs the migration_cost rows are skipped
        // with the reason.
        if let Err(e) = guard.mount("debugfs") {
            eprintln!("run: {e:#}");
        }
    }
    if a.resume.is_none() {
        // The guard puts everything back on the way out if a value fails.
        crate::experiment::backend::try_knob_values(&spec.rows(&topo)?, &mut guard)?;
        announce(&runner::create(&backend, &topo, spec, &dir)?, &dir);
    }
    execute(&mut backend, &topo, &dir, guard, &stop)
}

/// `run --backend sim`: the same spec, records and reports, on a simulated
/// machine; nothing on this one changes, so no lock and no journal.
fn run_sim(sysfs_root: &Path, a: &RunArgs, resumed: Option<record::RunMeta>) -> anyhow::Result<()> {
    let (dir, spec, topo, source, profile) = match (&a.resume, resumed) {
        (Some(dir), Some(meta)) => {
            let sm = meta.sim.clone().ok_or_else(|| {
                usage(format!(
                    "{}: a sim run without its `sim` metadata",
                    dir.display()
                ))
            })?;
            if sm.model_version != crate::sim::MODEL_VERSION {
                return Err(usage(format!(
                    "{} was simulated by model {}; this numalab has model {}: start a new run",
                    dir.display(),
                    sm.model_version,
                    crate::sim::MODEL_VERSION
                )));
            }
            let topo = crate::topology::Topology::from_json(&sm.topology.to_string(), "run.json")?;
            record::read_samples(dir, &meta)?.require_clean()?;
            crate::paths::check_output_dir(dir, "--resume", &[])?;
            (dir.clone(), meta.spec, topo, sm.topology_source, sm.profile)
        }
        _ => {
            let (topo, source, profile) = a.sim.sim_machine(sysfs_root)?;
            let source = source.label();
            if a.pnid_via == Some(crate::cli::PnidVia::Agent) {
                return Err(usage("--pnid-via agent runs a user-space agent on this machine; the simulated kernel has the PNID patch built in"));
            }
            if a.pnid_via == Some(crate::cli::PnidVia::Sched) {
                return Err(usage("--pnid-via sched loads a scheduler into this machine's kernel; the simulated kernel has the PNID patch built in"));
            }
            if a.pnid_prctl.is_some() {
                return Err(usage("--pnid-prctl names a host kernel's prctl; the simulated kernel has the PNID patch built in"));
            }
            let spec = a.spec()?;
            spec.rows(&topo)?;
            crate::experiment::simulated::check_probe(spec.probe.threads)?;
            let dir = a.out.clone().unwrap_or_else(default_out);
            record::check_new_run_dir(&dir)?;
            (dir, spec, topo, source, profile)
        }
    };
    let stop = Stop::on_signals()?;
    let load = spec.load_spec(&topo, topo.online_cpus());
    let mut backend = Sim::new(&topo, &source, profile, &load)?;
    let guard = Guard::inert(&dir);
    if a.resume.is_none() {
        eprintln!(
            "run: simulating {} ({}) with profile {}",
            topo.cpu_model.as_deref().unwrap_or("a machine"),
            source,
            backend.profile().name
        );
        announce(&runner::create(&backend, &topo, spec, &dir)?, &dir);
    }
    execute(&mut backend, &topo, &dir, guard, &stop)
}

/// Runs the planned samples with the terminal's observer, puts the system
/// back (the guard), and prints the report.
fn execute(
    backend: &mut dyn Backend,
    topo: &crate::topology::Topology,
    dir: &Path,
    mut guard: Guard,
    stop: &Stop,
) -> anyhow::Result<()> {
    let out = runner::execute(
        backend,
        topo,
        dir,
        &mut guard,
        stop,
        &mut report::observer::ExportObserver::for_terminal(dir),
    )?;
    drop(guard);
    finish(dir, out)
}

fn announce(meta: &record::RunMeta, dir: &Path) {
    let skipped = meta.rows.iter().filter(|r| r.skip.is_some()).count();
    eprintln!(
        "run: {} rows ({} skipped), {} samples planned, records in {}",
        meta.rows.len(),
        skipped,
        meta.planned_samples,
        dir.display()
    );
}

/// The report of a finished (or stopped) run, and how to go on.
fn finish(dir: &Path, out: runner::Outcome) -> anyhow::Result<()> {
    let meta = record::read_meta(dir)?;
    let found = record::read_samples(dir, &meta)?;
    let text = report::render_noted(&meta, &found.records, &found.notes(), Format::Text);
    print!("{text}");
    if out.probe_wall_ns > 0 {
        let what = if meta.backend == BackendKind::Sim {
            "simulated probes"
        } else {
            "probe processes"
        };
        println!(
            "\norchestration: run wall {:.1} s / {what} {:.1} s = {:.3} (timed loops {:.1} s: {:.3})",
            out.run_wall_ns as f64 / 1e9,
            out.probe_wall_ns as f64 / 1e9,
            out.run_wall_ns as f64 / out.probe_wall_ns as f64,
            out.probe_loop_ns as f64 / 1e9,
            out.run_wall_ns as f64 / out.probe_loop_ns.max(1) as f64
        );
    }
    println!("records: {}", dir.display());
    if let Some(i) = out.interrupted {
        return Err(anyhow::Error::new(i).context(format!(
            "stopped after {} of {} samples; system state restored; continue with \
             `numalab run --resume {}`",
            out.done,
            out.planned,
            dir.display()
        )));
    }
    Ok(())
}
