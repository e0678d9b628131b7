//! `numalab trace`: trace a command or running tasks (or read a saved
//! trace), analyse, print.

use crate::cli::TraceArgs;
use crate::error::usage;
use crate::exec::{self, Ended};
use crate::sys::signals::{Interrupted, Stop};
use crate::sys::state::{self, Guard, StateLock};
use crate::sys::Reaped;
use crate::topology::Topology;
use crate::trace::analyze::{analyze, Window};
use crate::trace::live::{Captured, LiveSpec, DEFAULT_BUFFER_KB};
use crate::trace::record::{TraceRecord, SCHEMA};
use crate::trace::tracefs::Tracefs;
use anyhow::Context;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// What a trace produced, and how the traced work ended.
struct Traced {
    rec: TraceRecord,
    /// The traced command's exit (wait4), when there was one.
    status: Option<Reaped>,
    /// Set when a stop signal ended the trace.
    interrupted: Option<Interrupted>,
}

/// A pid list: `123`, `123,456`, `100-110` (pids go beyond CPU-list
/// sizes, so this is not an [`crate::idset::IdSet`]).
fn parse_pids(list: &str) -> anyhow::Result<BTreeSet<u32>> {
    let bad = |why: &str| usage(format!("--pid {list:?}: {why}"));
    let mut out = BTreeSet::new();
    for tok in list.split(',').map(str::trim) {
        // `-1` would split as a range with no start; say what it is.
        if tok.starts_with('-') {
            return Err(bad(&format!(
                "{tok:?} is not a pid: pids are positive numbers"
            )));
        }
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
        let from: Vec<_> = a.from.iter().map(|f| ("--from", f.as_path())).collect();
        crate::paths::check_output_file(out, "-o", &from)?; // before the work, not after
    }
    let topo = a.topology.machine(sysfs_root).load()?;
    if let Some(n) = a.mem_node {
        if topo.node(n).is_none() {
            return Err(usage(format!(
                "--mem-node {n}: node {n} does not exist (nodes: {})",
                topo.node_ids()
            )));
        }
    }
    let t = match &a.from {
        Some(path) => from_file(&topo, path, a)?,
        None => live(&topo, a)?,
    };
    if let Some(out) = &a.output {
        let mut text = serde_json::to_string(&t.rec)?;
        text.push('\n');
        state::write_atomic(out, text.as_bytes())?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&t.rec)?);
    } else {
        print!("{}", crate::trace::summary::summary(&t.rec));
    }
    if let Some(i) = t.interrupted {
        return Err(anyhow::Error::new(i)
            .context("stopped by a signal; the trace so far is above, tracing state restored"));
    }
    match t.status {
        Some(st) if !st.success() => Err(anyhow::anyhow!(
            "the traced command failed ({}); its trace is above",
            st.describe()
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

fn live(topo: &Topology, a: &TraceArgs) -> anyhow::Result<Traced> {
    // Everything that can be checked is checked before anything is written.
    let (commands, watch_pids, what) = if a.command.is_empty() {
        let pids = parse_pids(a.pid.as_deref().unwrap_or_default())?;
        for p in &pids {
            if !Path::new(&format!("/proc/{p}")).exists() {
                return Err(usage(format!("--pid: no task {p} is running")));
            }
        }
        let what = format!("pid {}", a.pid.as_deref().unwrap_or_default());
        (Vec::new(), pids, what)
    } else {
        if !runnable(&a.command[0]) {
            return Err(usage(format!(
                "cannot run {:?}: no such executable (in $PATH)",
                a.command[0]
            )));
        }
        let argv: Vec<std::ffi::OsString> = a.command.iter().map(Into::into).collect();
        (vec![argv], BTreeSet::new(), a.command.join(" "))
    };
    Tracefs::preflight()?;
    let exe = std::env::current_exe().context("finding the numalab executable")?;
    let lock = StateLock::acquire(&state::state_dir()?, "numalab trace")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let mut guard = Guard::new(lock, Path::new(""));
    let tfs = Tracefs::locate(&mut guard)?;
    let spec = LiveSpec {
        buffer_kb: a.buffer_kb.unwrap_or(DEFAULT_BUFFER_KB),
        follow_forks: !a.no_follow,
        pages_every: Some(Duration::from_secs(1)),
        cpus: topo.online_cpus().iter().collect(),
    };
    let opts = exec::Options {
        trace: Some((&tfs, spec)),
        trace_poll: Duration::from_millis(50),
        watch_pids,
        deadline: a.duration.map(Duration::from_secs_f64),
        inherit_stdio: true,
        ..Default::default()
    };
    let batch = exec::run(&exe, &commands, opts, &mut guard, &stop, |_, _, _| {})?;
    guard.restore()?;
    let mut notes = Vec::new();
    match batch.ended {
        Ended::Exited => {}
        Ended::Stopped => notes.push(format!(
            "stopped by {} before the traced tasks ended",
            stop.signal()
                .map(crate::sys::signals::name)
                .unwrap_or_default()
        )),
        Ended::Deadline => notes.push(format!(
            "stopped after --duration {} s",
            a.duration.unwrap_or(0.0)
        )),
    }
    let cap = batch.captured.context("the trace's capture")?;
    let rec = record(topo, &cap, "live", what, !a.no_follow, a.mem_node, notes);
    Ok(Traced {
        rec,
        status: batch.children.first().map(|c| c.reaped),
        interrupted: (batch.ended == Ended::Stopped).then(|| stop.interrupted()),
    })
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

fn from_file(topo: &Topology, path: &Path, a: &TraceArgs) -> anyhow::Result<Traced> {
    // Invalid UTF-8 (comms are raw bytes) is replaced, not an error.
    let bytes = crate::input::read_input(path, "--from", crate::input::STREAM_LIMIT)?;
    let text = String::from_utf8_lossy(&bytes);
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
    Ok(Traced {
        rec,
        status: None,
        interrupted: None,
    })
}
