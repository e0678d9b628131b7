//! `numalab run`: spec -> host backend -> records -> reports.

use crate::cli::RunArgs;
use crate::error::usage;
use crate::experiment::backend::{Backend, Host};
use crate::experiment::spec::{ExperimentSpec, PnidRef};
use crate::experiment::{record, runner};
use crate::report::{self, Format};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard, StateLock};
use crate::trace::tracefs::Tracefs;
use std::path::{Path, PathBuf};

/// The spec the command line asks for: file or default, then overrides.
pub fn build_spec(a: &RunArgs) -> anyhow::Result<ExperimentSpec> {
    let mut spec = match &a.spec {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage(format!("cannot read spec {}: {e}", p.display())))?;
            ExperimentSpec::from_toml(&text, &p.display().to_string())?
        }
        None => ExperimentSpec::default(),
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
        let names = |b: &crate::experiment::spec::Block, p: &str| match (&b.pnid, p.trim()) {
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
    if a.trace {
        spec.trace = true;
    }
    for (k, v) in &a.knob {
        for b in spec.blocks.iter_mut() {
            b.knobs.insert(k.clone(), v.clone());
        }
    }
    if let Some(v) = a.seed {
        spec.seed = v;
    }
    spec.check()?;
    Ok(spec)
}

fn default_out() -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("runs/run-{t}"))
}

pub fn run(sysfs_root: &Path, a: &RunArgs) -> anyhow::Result<()> {
    let topo = super::topo::load(sysfs_root, &Default::default())?;
    let mut via_agent = a.pnid_via == Some(crate::cli::PnidVia::Agent);
    let (dir, spec) = match &a.resume {
        Some(dir) => {
            let meta = record::read_meta(dir)?;
            via_agent = meta.pnid_via == "agent";
            // A bad record line is an error before anything changes.
            record::read_samples(dir, &meta)?.require_clean()?;
            crate::paths::check_output_dir(dir, "--resume")?;
            (dir.clone(), meta.spec)
        }
        None => {
            let spec = build_spec(a)?;
            spec.rows(&topo)?; // every spec error before anything changes
            let dir = a.out.clone().unwrap_or_else(default_out);
            record::check_new_run_dir(&dir)?; // no other run's files, writable
            (dir, spec)
        }
    };
    spec.check_memory(&crate::topology::sysfs::SysRoot::new(sysfs_root), &topo)?;
    if spec.trace {
        // Before any change: tracing must be possible (root, tracefs).
        Tracefs::preflight()?;
    }
    // One state-changing numalab at a time, locked before the initial
    // values are read; a killed run's journal must be restored first.
    let lock = StateLock::acquire(&state::state_dir(), "numalab run")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let mut backend = Host::new(&topo, spec.load, a.pnid_prctl.clone())?;
    if via_agent {
        backend.pnid_via_agent(&topo);
    }
    let mut guard = Guard::new(lock, &dir);
    if spec.trace {
        backend.enable_trace(Tracefs::locate(&mut guard)?, &topo);
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
        let meta = runner::create(&backend, &topo, spec, &dir)?;
        let skipped = meta.rows.iter().filter(|r| r.skip.is_some()).count();
        eprintln!(
            "run: {} rows ({} skipped), {} samples planned, records in {}",
            meta.rows.len(),
            skipped,
            meta.planned_samples,
            dir.display()
        );
    }
    let out = runner::execute(
        &mut backend as &mut dyn Backend,
        &topo,
        &dir,
        &mut guard,
        &stop,
        &mut report::observer::ExportObserver::for_terminal(&dir),
    )?;
    drop(guard);
    let meta = record::read_meta(&dir)?;
    let found = record::read_samples(&dir, &meta)?;
    let text = report::render_noted(&meta, &found.records, &found.notes(), Format::Text);
    print!("{text}");
    if out.probe_wall_ns > 0 {
        println!(
            "\norchestration: run wall {:.1} s / probe processes {:.1} s = {:.3} (timed loops {:.1} s: {:.3})",
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
