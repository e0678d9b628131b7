//! `numalab sched`: check everything, load the node-affine scheduler, home
//! the command (or the pids), wait for the command, Ctrl-C or --duration,
//! unload, and print the scheduler's account (JSON with -o).
//!
//! Why the state lock: the scheduler decides where every task of the
//! machine runs, so a `numalab run` or `jobs` measuring beside it would
//! measure it without knowing; one state-changing numalab at a time. No
//! journal: the kernel unloads the scheduler itself when numalab dies
//! (sched::loader), so there is nothing for `numalab restore` to put back;
//! restore says what sched_ext's state is.

use crate::cli::SchedArgs;
use crate::error::usage;
use crate::home::launch;
use crate::sched::{self, account, loader::Scheduler, NodePolicy, Options};
use crate::sys::numa::Policy;
use crate::sys::signals::Stop;
use crate::sys::state::{self, StateLock};
use crate::topology::sysfs::SysRoot;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

/// How the scheduler's time ended.
enum Ended {
    Exited(crate::sys::Reaped),
    Stopped,
    Deadline,
    AllGone,
    /// sched_ext stopped the scheduler itself (an error, the watchdog).
    Kernel,
}

pub fn run(sysfs_root: &Path, a: &SchedArgs) -> anyhow::Result<()> {
    // Every check before anything changes.
    let has_target = !a.command.is_empty() || !a.pid.is_empty();
    if !a.command.is_empty() && !a.pid.is_empty() {
        return Err(usage("give a command after `--` or --pid, not both"));
    }
    if a.home.is_some() != has_target {
        return Err(usage(if has_target {
            "say where the command or pids live: --home N|auto"
        } else {
            "--home homes a command (`-- CMD...`) or --pid; the whole machine is homed by --policy"
        }));
    }
    if a.bind && !a.pid.is_empty() {
        return Err(usage(
            "--bind with --pid: the memory policy of a running task cannot be changed from outside",
        ));
    }
    let opts = Options {
        node_policy: NodePolicy::parse(a.policy.trim())
            .map_err(|e| usage(format!("--policy {e}")))?,
        mechanisms: sched::mechanisms_without(&a.off).map_err(|e| usage(format!("--off {e}")))?,
        steal_delay_ms: a.steal_delay,
        steal_delay_busy_ms: a.steal_delay_busy,
        slice_ms: a.slice,
        scan_ms: a.scan,
    };
    opts.check().map_err(usage)?;
    if let Some(o) = &a.output {
        crate::paths::check_output_file(o, "-o", &[])?;
    }
    let sys = SysRoot::new(sysfs_root);
    for p in &a.pid {
        crate::home::check_attachable(&sys, *p)?;
    }
    let topo = crate::cli::MachineSource::host(sysfs_root).load()?;
    let home = match a.home.as_deref().map(str::trim) {
        None => None,
        Some("auto") => {
            let (n, _) = crate::home::auto_node(&sys, &topo, Duration::from_millis(250))?;
            eprintln!("sched: --home auto chose node {n}");
            Some(n)
        }
        Some(s) => {
            let n: u32 = s
                .parse()
                .map_err(|_| usage(format!("--home {s:?}: give a node id or `auto`")))?;
            match topo.node(n) {
                Some(node) if !node.cpus.is_empty() => Some(n),
                Some(_) => {
                    return Err(usage(format!(
                        "--home {n}: node {n} has no CPUs; a homenode must have some"
                    )))
                }
                None => {
                    return Err(usage(format!(
                        "--home {n}: no node {n} (nodes: {})",
                        topo.node_ids()
                    )))
                }
            }
        }
    };
    let cfg = sched::preflight(&sys, &topo, &opts).map_err(usage)?;

    let lock = StateLock::acquire(&state::state_dir()?, "numalab sched")?;
    lock.refuse_if_unfinished()?;
    let stop = Stop::on_signals()?;
    let mem = home.filter(|_| !a.command.is_empty()).map(|n| {
        if a.bind {
            Policy::Bind([n].into_iter().collect())
        } else {
            Policy::Preferred(n)
        }
    });

    let mut s = Scheduler::load(&cfg, opts.node_policy == NodePolicy::Exec)?;
    eprintln!(
        "sched: numalab's scheduler runs the machine ({} nodes, {} CPUs; policy {}, mechanisms {})",
        topo.nodes.len(),
        topo.cpus.iter().filter(|c| c.online).count(),
        a.policy.trim(),
        sched::mechanism_names(cfg.mechanisms).join(",")
    );
    let started = Instant::now();
    let mut child = None;
    if let Some(n) = home {
        for p in &a.pid {
            s.set_home(*p as u32, Some(n))?;
        }
        if !a.command.is_empty() {
            let exe = std::env::current_exe()?;
            let (pid, gate) = launch::start(&exe, &a.command, mem.as_ref())?;
            s.set_home(pid, Some(n))?;
            gate.open()?;
            child = Some(pid);
        }
        eprintln!("sched: homenode {n}");
    }
    let deadline = a.duration.map(Duration::from_secs_f64);
    // Progress on a terminal only: elapsed (of --duration, with the ETA),
    // and what the scheduler has done so far, read from its maps each second.
    let bar = std::io::stderr().is_terminal().then(|| {
        let (b, tpl) = match deadline {
            Some(d) => (
                indicatif::ProgressBar::new(d.as_secs().max(1)),
                "sched: {elapsed} of {len} s, ETA {eta} | {msg}",
            ),
            None => (
                indicatif::ProgressBar::new_spinner(),
                "sched: {elapsed} | {msg}",
            ),
        };
        b.set_style(indicatif::ProgressStyle::with_template(tpl).expect("a valid template"));
        b
    });
    let mut last_status = Instant::now();
    let ended = loop {
        if let Some(b) = &bar {
            if last_status.elapsed() >= Duration::from_secs(1) {
                last_status = Instant::now();
                b.set_position(started.elapsed().as_secs());
                if let Ok(acct) = s.account() {
                    b.set_message(acct.summary());
                }
            }
        }
        if let Some(pid) = child {
            if let Some(r) = crate::sys::try_reap(pid as i32)? {
                break Ended::Exited(r);
            }
        } else if !a.pid.is_empty() && a.pid.iter().all(|p| !sys.exists(&format!("proc/{p}"))) {
            break Ended::AllGone;
        }
        if stop.is_set() {
            break Ended::Stopped;
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break Ended::Deadline;
        }
        if s.exit_info()?.is_some() {
            break Ended::Kernel;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    s.detach();
    let elapsed = started.elapsed().as_secs_f64();
    let acct = s.account()?;
    let exit = s.exit_info()?;
    drop(s);
    drop(lock);

    print_account(&acct, elapsed);
    if let Some(x) = &exit {
        eprintln!(
            "sched: sched_ext says: {}{}",
            x.reason,
            if x.message.is_empty() {
                String::new()
            } else {
                format!(" ({})", x.message)
            }
        );
    }
    if let Some(o) = &a.output {
        let doc = serde_json::json!({
            "schema": account::SCHEMA,
            "elapsed_s": elapsed,
            "options": opts,
            "home": home,
            "command": a.command.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>(),
            "pids": a.pid,
            "account": acct,
            "exit": exit,
        });
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        state::write_atomic(o, text.as_bytes())?;
        eprintln!("sched: account written to {}", o.display());
    }
    match ended {
        Ended::Exited(r) => {
            let code = r.shell_code();
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Ended::Deadline | Ended::AllGone => Ok(()),
        Ended::Stopped => Err(anyhow::Error::new(stop.interrupted())
            .context("scheduler unloaded; the machine is back on the kernel's own")),
        Ended::Kernel => Err(anyhow::anyhow!(
            "sched_ext stopped numalab's scheduler before the end: {}",
            exit.map(|x| x.reason).unwrap_or_default()
        )),
    }
}

fn print_account(acct: &account::Account, elapsed: f64) {
    eprintln!("sched: unloaded after {elapsed:.1} s; per node (tasks homed there):");
    eprint!("{}", acct.node_table().text());
    if !acct.tasks.is_empty() {
        let (ran, kept) = acct.tasks_on_one_node(95.0);
        eprintln!(
            "sched: {} homed threads; {kept} of the {ran} that ran spent >= 95% of it on one node",
            acct.tasks.len()
        );
        eprint!("{}", acct.task_table(20).text());
    }
    if !acct.steals_by_distance.is_empty() {
        eprintln!("sched: steals by distance: {}", acct.steals_text());
    }
    if acct.tasks_untracked > 0 {
        eprintln!(
            "sched: {} homed threads had no room in the task account (node totals count them)",
            acct.tasks_untracked
        );
    }
}
