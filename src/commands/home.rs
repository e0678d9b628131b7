//! `numalab home`: check the arguments, choose the homenode, take the
//! state lock, start the command (or attach), run the agent, put every
//! mask back, and say what was done.
//!
//! Why the state lock: the masks are journaled in the one journal of the
//! state directory, which the lock guards, and an agent changing tasks'
//! CPUs under a `numalab run` or `jobs` would distort what they measure.
//! The cost: one agent at a time, and no other state-changing numalab
//! while it runs (docs/home.md).

use crate::cli::HomeArgs;
use crate::error::usage;
use crate::home::launch::{self, Ended};
use crate::home::{self, Agent, Thresholds};
use crate::sys::numa::Policy;
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard, StateLock};
use crate::topology::sysfs::SysRoot;
use std::path::Path;
use std::time::Duration;

pub fn run(sysfs_root: &Path, a: &HomeArgs) -> anyhow::Result<()> {
    // Every check before anything changes.
    let attach = !a.pid.is_empty();
    if attach != a.command.is_empty() {
        return Err(usage(
            "say what to home: `-- COMMAND...` or `--pid PID...` (one of them)",
        ));
    }
    if attach && a.bind {
        return Err(usage(
            "--bind with --pid: the memory policy of a running task cannot be changed from \
             outside (set_mempolicy acts on the caller only); use --migrate to move its pages",
        ));
    }
    if let Some(o) = &a.output {
        crate::paths::check_output_file(o, "-o", &[])?;
    }
    let th = Thresholds {
        widen_delay: a.widen_delay / 100.0,
        widen_gain: a.widen_gain / 100.0,
        widen_windows: a.widen_windows,
        narrow_windows: a.narrow_windows,
        narrow_margin: a.narrow_margin,
        min_wide: a.min_wide,
        ..Thresholds::default()
    };
    th.check().map_err(usage)?;
    let sys = SysRoot::new(sysfs_root);
    let topo = crate::cli::MachineSource::host(sysfs_root).load()?;
    for p in &a.pid {
        home::check_attachable(&sys, *p)?;
    }
    let node = match a.node.trim() {
        "auto" => {
            let (n, rooms) = home::auto_node(&sys, &topo, Duration::from_millis(250))?;
            for r in rooms {
                eprintln!(
                    "home: node {}: {:.2} idle CPUs, {} MiB free",
                    r.node,
                    r.idle_cpus,
                    r.free_bytes >> 20
                );
            }
            eprintln!("home: --node auto chose node {n}");
            n
        }
        s => s
            .parse::<u32>()
            .map_err(|_| usage(format!("--node {s:?}: give a node id or `auto`")))?,
    };
    let mut cpus = home::home_cpus(&topo, "--node", node)?;
    if let Some(list) = &a.cpus {
        let want = crate::idset::IdSet::parse_in(list, &cpus, "CPU of the node")
            .map_err(|e| usage(format!("--cpus {list}: {e}")))?;
        if want.is_empty() {
            return Err(usage(format!("--cpus {list:?}: no CPU")));
        }
        cpus = want;
    }
    if !topo.allowed.mems.contains(node) {
        return Err(usage(format!(
            "--node {node}: this process may not use the node's memory (allowed {})",
            topo.allowed.mems
        )));
    }
    let policy = (!attach).then(|| {
        if a.bind {
            Policy::Bind([node].into_iter().collect())
        } else {
            Policy::Preferred(node)
        }
    });
    let log: Option<Box<dyn std::io::Write>> = match &a.output {
        Some(o) => {
            Some(Box::new(std::fs::File::create(o).map_err(|e| {
                anyhow::anyhow!("creating {}: {e}", o.display())
            })?))
        }
        None => None,
    };

    let lock = StateLock::acquire(&state::state_dir()?, "numalab home")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let mut guard = Guard::new(lock, Path::new(""));
    let window = Duration::from_millis(a.window_ms);
    let mut agent = Agent::new(
        SysRoot::new(sysfs_root),
        node,
        cpus.clone(),
        th,
        window,
        log,
    );
    let mut child = None;
    if attach {
        eprintln!(
            "home: node {node} (CPUs {cpus}) for pid {}; their memory policy stays theirs \
             (it cannot be changed from outside){}",
            a.pid
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if a.migrate {
                "; moving their pages there"
            } else {
                ""
            }
        );
        for p in &a.pid {
            if a.migrate {
                let all = topo.node_ids();
                let to = [node].into_iter().collect();
                match crate::sys::numa::migrate_pages(*p, &all.difference(&to), &to) {
                    Ok(left) => eprintln!("home: pid {p}: pages moved ({left} could not be)"),
                    Err(e) => eprintln!("home: pid {p}: migrate_pages: {e}"),
                }
            }
            agent.attach(&mut guard, *p)?;
        }
        // A pid whose descendants are much of the system is taken at its
        // word; the count says what that word was.
        eprintln!(
            "home: took up {} tasks (the threads of pid {} and of their descendants)",
            agent.tracked(),
            a.pid
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
    } else {
        let exe = std::env::current_exe()?;
        let (pid, gate) = launch::start(&exe, &a.command, policy.as_ref())?;
        agent.attach(&mut guard, pid as i32)?;
        gate.open()?;
        child = Some(pid);
    }
    let poll = Duration::from_millis(20).min(window / 4);
    let watched = launch::watch(
        &mut agent,
        &mut guard,
        &stop,
        child,
        a.duration.map(Duration::from_secs_f64),
        poll,
    );
    // Masks back before anything else (the guard also does it on drop).
    let restored = guard.restore_tasks();
    let watched = watched?;
    let restored = restored?;
    guard.restore()?;
    drop(guard);
    let c = agent.counts;
    let secs = watched.elapsed.as_secs_f64().max(1e-9);
    let share = watched.cpu_ns as f64 / 1e9 / secs * 100.0;
    eprintln!(
        "home: node {node}: {} threads followed (at most {} at once), {} narrowed, {} widened, \
         {} let go, {} outside the node; agent CPU {:.1} ms in {:.1} s = {:.3}% of one CPU \
         ({:.4}% per thread)",
        c.tracked,
        c.peak_tracked,
        c.narrowed,
        c.widened,
        c.released,
        c.outside,
        watched.cpu_ns as f64 / 1e6,
        secs,
        share,
        share / c.peak_tracked.max(1) as f64
    );
    let still = restored.iter().filter(|m| m.contains("CPUs")).count();
    if still > 0 {
        eprintln!("home: {still} threads still running got their own CPUs back");
    }
    match watched.ended {
        Ended::Exited(r) => {
            let code = r.shell_code();
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Ended::AllGone | Ended::Deadline => Ok(()),
        Ended::Stopped => Err(anyhow::Error::new(stop.interrupted())
            .context("masks restored; the tasks keep running")),
    }
}
