//! `numalab trace`: trace a command or running tasks (or read a saved
//! trace), analyse, print.

use crate::cli::TraceArgs;
use crate::error::usage;
use crate::experiment::state::{self, Guard};
use crate::topology::Topology;
use crate::trace::analyze::{analyze, Window};
use crate::trace::live::{Captured, LiveSpec, Tracer, DEFAULT_BUFFER_KB};
use crate::trace::record::{TraceRecord, SCHEMA};
use crate::trace::tracefs::Tracefs;
use anyhow::Context;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A pid list: `123`, `123,456`, `100-110` (pids go beyond CPU-list
/// sizes, so this is not an [`crate::idset::IdSet`]).
fn parse_pids(list: &str) -> anyhow::Result<BTreeSet<u32>> {
    let bad = |why: &str| usage(format!("--pid {list:?}: {why}"));
    let mut out = BTreeSet::new();
    for tok in list.split(',').map(str::trim) {
        let num = |t: &str| {
            t.parse::<u32>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad(&format!("{t:?} is not a pid")))
        };
        match tok.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a >= 4096 {
                    return Err(bad(&format!("range {tok:?} is reversed or too long")));
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(num(tok)?);
            }
        }
    }
    Ok(out)
}

pub fn run(sysfs_root: &Path, a: &TraceArgs) -> anyhow::Result<()> {
    let has_cmd = !a.command.is_empty();
    if has_cmd && (a.from.is_some() || a.pid.is_some()) {
        return Err(usage(
            "trace either a command (`-- COMMAND...`), running tasks (--pid) or a file \
             (--from), not several",
        ));
    }
    if a.from.is_none() && !has_cmd && a.pid.is_none() {
        return Err(usage(
            "say what to trace: `-- COMMAND...`, `--pid LIST` or `--from FILE`",
        ));
    }
    if a.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) {
        return Err(usage("--duration must be a positive number of seconds"));
    }
    if a.buffer_kb == Some(0) {
        return Err(usage("--buffer-kb must be at least 1"));
    }
    if let Some(out) = &a.output {
        crate::paths::check_output_file(out, "-o")?; // before the work, not after
    }
    let topo = super::topo::load(sysfs_root, &a.topology)?;
    if let Some(n) = a.mem_node {
        if topo.node(n).is_none() {
            return Err(usage(format!(
                "--mem-node {n}: node {n} does not exist (nodes: {})",
                topo.node_ids()
            )));
        }
    }
    let rec = match &a.from {
        Some(path) => from_file(&topo, path, a)?,
        None => live(&topo, a)?,
    };
    if let Some(out) = &a.output {
        let mut text = serde_json::to_string(&rec.0)?;
        text.push('\n');
        crate::experiment::record::write_atomic(out, text.as_bytes())?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&rec.0)?);
    } else {
        print!("{}", crate::trace::summary::summary(&rec.0));
    }
    match rec.1 {
        Some(status) if !status.success() => Err(anyhow::anyhow!(
            "the traced command failed ({status}); its trace is above"
        )),
        _ => Ok(()),
    }
}

/// Analyses captured events into a record.
pub fn record(
    topo: &Topology,
    cap: &Captured,
    source: &str,
    what: String,
    follow: bool,
    mem_node: Option<u32>,
    mut notes: Vec<String>,
) -> TraceRecord {
    let mem = |pid: u32| {
        mem_node.or_else(|| {
            cap.pages
                .get(&pid)
                .and_then(crate::analysis::pages::majority_node)
        })
    };
    let tasks = analyze(topo, &cap.events, &cap.pids, follow, cap.window, &mem);
    if cap.lost_events > 0 || cap.missed_pages > 0 {
        notes.push(format!(
            "the kernel dropped {} events ({} buffer pages flagged): counts are lower bounds",
            cap.lost_events, cap.missed_pages
        ));
    }
    if !cap.missing_events.is_empty() {
        notes.push(format!(
            "this kernel lacks {}: {}",
            cap.missing_events.join(", "),
            "NUMA balancing's moves cannot be told apart from the load balancer's"
        ));
    }
    TraceRecord {
        schema: SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        source: source.into(),
        what,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        topology_digest: topo.digest(),
        window: cap.window,
        events: cap.events.len() as u64,
        lost_events: cap.lost_events,
        missing_events: cap.missing_events.clone(),
        notes,
        pages: cap.pages.clone(),
        tasks,
    }
}

fn live(
    topo: &Topology,
    a: &TraceArgs,
) -> anyhow::Result<(TraceRecord, Option<std::process::ExitStatus>)> {
    let stop = super::stop_on_signals()?;
    let journal = state::trace_journal_path();
    let mut guard = Guard::new(journal, Path::new(""));
    let tfs = Tracefs::locate(&mut guard)?;
    let spec = LiveSpec {
        buffer_kb: a.buffer_kb.unwrap_or(DEFAULT_BUFFER_KB),
        follow_forks: !a.no_follow,
        pages_every: Some(Duration::from_secs(1)),
        cpus: topo.online_cpus().iter().collect(),
    };
    let (mut child, what, pids) = if a.command.is_empty() {
        let pids = parse_pids(a.pid.as_deref().unwrap_or_default())?;
        for p in &pids {
            if !Path::new(&format!("/proc/{p}")).exists() {
                return Err(usage(format!("--pid: no task {p} is running")));
            }
        }
        (
            None,
            format!("pid {}", a.pid.as_deref().unwrap_or_default()),
            pids,
        )
    } else {
        if !runnable(&a.command[0]) {
            return Err(usage(format!(
                "cannot run {:?}: no such executable (in $PATH)",
                a.command[0]
            )));
        }
        let exe = std::env::current_exe().context("finding the numalab executable")?;
        let argv: Vec<std::ffi::OsString> = a.command.iter().map(Into::into).collect();
        let (child, gate) = crate::sys::spawn_gated(&exe, &argv, |_| {})
            .map_err(|e| usage(format!("cannot run {:?}: {e}", a.command[0])))?;
        let pid = child.id();
        (
            Some((child, gate)),
            a.command.join(" "),
            BTreeSet::from([pid]),
        )
    };
    let mut tracer = match Tracer::start(&tfs, &mut guard, pids, spec) {
        Ok(t) => t,
        Err(e) => {
            if let Some((mut c, _gate)) = child {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Err(e);
        }
    };
    let mut running = None;
    if let Some((c, gate)) = child.take() {
        gate.open().context("releasing the traced command")?;
        running = Some(c);
    }
    let started = Instant::now();
    let deadline = a.duration.map(Duration::from_secs_f64);
    let mut status = None;
    let mut notes = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        tracer.poll()?;
        if let Some(c) = &mut running {
            if let Some(st) = c.try_wait()? {
                status = Some(st);
                break;
            }
        } else if tracer
            .pids()
            .iter()
            .all(|p| !Path::new(&format!("/proc/{p}")).exists())
        {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            notes.push("stopped by a signal before the traced tasks ended".to_string());
            break;
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            notes.push(format!(
                "stopped after --duration {} s",
                a.duration.unwrap_or(0.0)
            ));
            break;
        }
    }
    if let Some(mut c) = running {
        if status.is_none() {
            // Ask first (SIGTERM), then insist (SIGKILL).
            let _ = crate::sys::signal(c.id() as i32, libc::SIGTERM);
            for _ in 0..40 {
                if let Ok(Some(st)) = c.try_wait() {
                    status = Some(st);
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            if status.is_none() {
                let _ = c.kill();
                status = c.wait().ok();
            }
        }
    }
    let cap = tracer.finish(&mut guard)?;
    guard.restore()?;
    let rec = record(topo, &cap, "live", what, !a.no_follow, a.mem_node, notes);
    Ok((rec, status))
}

/// Whether `prog` names an executable file, directly or through $PATH.
fn runnable(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ok = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return ok(Path::new(prog));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| ok(&d.join(prog))))
}

fn from_file(
    topo: &Topology,
    path: &Path,
    a: &TraceArgs,
) -> anyhow::Result<(TraceRecord, Option<std::process::ExitStatus>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--from {}: {e}", path.display())))?;
    let parsed = crate::trace::text::parse(&text, &path.display().to_string())
        .map_err(|e| usage(e.to_string()))?;
    let events = parsed.events;
    let pids = match &a.pid {
        Some(list) => parse_pids(list)?,
        None => events
            .iter()
            .filter_map(|e| match e.kind {
                crate::trace::event::Kind::Migrate { pid, .. } => Some(pid),
                _ => None,
            })
            .collect(),
    };
    if pids.is_empty() {
        return Err(usage(format!(
            "{}: no sched_migrate_task events, so no task to analyse (name tasks with --pid)",
            path.display()
        )));
    }
    let mut notes = Vec::new();
    if let Some(bad) = events
        .iter()
        .flat_map(|e| match e.kind {
            crate::trace::event::Kind::Migrate {
                orig_cpu, dest_cpu, ..
            } => vec![orig_cpu, dest_cpu],
            _ => vec![e.cpu],
        })
        .find(|c| topo.cpu(*c).is_none())
    {
        notes.push(format!(
            "CPU {bad} is not in this topology ({}): pass the trace's machine with \
             --preset or --topology",
            topo.online_cpus()
        ));
    }
    let cap = Captured {
        window: Window::of(&events),
        events,
        pids,
        ..Captured::default()
    };
    let rec = record(
        topo,
        &cap,
        "file",
        path.display().to_string(),
        a.pid.is_some(),
        a.mem_node,
        notes,
    );
    Ok((rec, None))
}
