//! The host backend: each sample of a row is a fresh `numalab probe`
//! process under the row's placement, beside the background load on every
//! CPU, with the row's knobs set through the state guard; a batch of jobs
//! ([`jobs`]) is N such probes at once. Traced runs give each sample the
//! kernel's trace of the probe and the load balancer's counters.

pub mod jobs;

use super::backend::{
    changed_knobs, probe_spec, read_knobs, row_knobs, Backend, Capabilities, Sampled,
};
use crate::analysis::balance::SampleBalance;
use crate::analysis::schedstat;
use crate::load::{Load, LoadSpec};
use crate::probe::record::ProbeRecord;
use crate::probe::ProbeSpec;
use crate::run::jobs::{JobsRecord, JobsSpec};
use crate::run::record::{BackendKind, PnidVia};
use crate::run::spec::{ExperimentSpec, Row};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard};
use crate::topology::sysfs::SysRoot;
use crate::topology::Topology;
use crate::trace::live::LiveSpec;
use crate::trace::record::SampleTrace;
use crate::trace::tracefs::Tracefs;
use anyhow::Context;
use std::collections::BTreeMap;
use std::time::Duration;

/// The real machine.
pub struct Host {
    exe: std::path::PathBuf,
    load_spec: LoadSpec,
    pnid_prctl: Option<String>,
    /// The machine, as the run read it.
    topo: Topology,
    trace: Option<(Tracefs, LiveSpec)>,
    /// `--pnid-via agent`: each PNID row's probe runs under a homenode
    /// agent on the row's PNID node (these CPUs).
    pnid_agent: Option<BTreeMap<u32, crate::idset::IdSet>>,
    /// `--pnid-via sched`: each PNID row's sample runs under numalab's
    /// scheduler, loaded with this configuration, the probe homed on the
    /// row's PNID node.
    pnid_sched: Option<crate::sched::Config>,
    /// Traced runs: /proc/schedstat is read around each sample, with
    /// kernel.sched_schedstats on ([`Host::enable_schedstat`]).
    schedstat: Option<SysRoot>,
}

/// Makes `sys`'s /proc/schedstat count: checks it is a version numalab
/// reads and turns kernel.sched_schedstats on, journaled in `guard` (so
/// restored, after a SIGKILL by `numalab restore`). Err says why not (a
/// kernel without CONFIG_SCHEDSTATS, an unknown schedstat version, a
/// refused write); the checks come before any change.
pub fn enable_schedstat(guard: &mut Guard, sys: &SysRoot) -> Result<(), String> {
    let why = |e: &dyn std::fmt::Display| format!("no load-balancing counters: {e}");
    let text = sys.read("proc/schedstat").map_err(|e| why(&e))?;
    schedstat::parse(&text).map_err(|e| why(&e))?;
    // Looked for where the guard writes.
    if guard.read(state::SCHEDSTATS).is_err() {
        return Err(why(&format!(
            "{} is missing (a kernel without CONFIG_SCHEDSTATS)",
            state::SCHEDSTATS
        )));
    }
    guard
        .set(state::SCHEDSTATS, "1")
        .map_err(|e| why(&format!("{e:#}")))
}

impl Host {
    /// The host backend on `topo` (this machine, as read), every sample or
    /// batch of jobs beside the background load `load` (started for each
    /// and stopped after it), PNID set through the probe's prctl with the
    /// layout `pnid_prctl` (None: detected).
    pub fn new(
        topo: &Topology,
        load: LoadSpec,
        pnid_prctl: Option<String>,
    ) -> anyhow::Result<Host> {
        Ok(Host {
            exe: std::env::current_exe().context("finding the numalab executable")?,
            load_spec: load,
            pnid_prctl,
            topo: topo.clone(),
            trace: None,
            pnid_agent: None,
            pnid_sched: None,
            schedstat: None,
        })
    }

    /// Reads the load balancer's counters around each sample
    /// ([`enable_schedstat`]); Err says why there will be none, and the
    /// run goes on without them.
    pub fn enable_schedstat(&mut self, guard: &mut Guard, sys: SysRoot) -> Result<(), String> {
        enable_schedstat(guard, &sys)?;
        self.schedstat = Some(sys);
        Ok(())
    }

    /// /proc/schedstat now, if this run reads it.
    fn schedstat_now(&self) -> Option<schedstat::Schedstat> {
        let sys = self.schedstat.as_ref()?;
        schedstat::parse(&sys.read("proc/schedstat").ok()?).ok()
    }

    /// Traces every sample or batch of jobs through `tfs` (`run --trace`;
    /// `jobs` unless `--no-trace`), with `buffer_kb` of ring buffer per CPU.
    pub fn enable_trace(&mut self, tfs: Tracefs, buffer_kb: u32) {
        let topo = &self.topo;
        let spec = LiveSpec {
            buffer_kb,
            follow_forks: false,
            pages_every: None,
            cpus: topo.online_cpus().iter().collect(),
        };
        self.trace = Some((tfs, spec));
    }

    /// PNID rows through the user-space agent instead of the prctl
    /// (`run --pnid-via agent`).
    pub fn pnid_via_agent(&mut self) {
        let topo = &self.topo;
        let homes = topo
            .node_ids()
            .iter()
            .filter_map(|n| {
                crate::home::home_cpus(topo, "--pnid", n)
                    .ok()
                    .map(|c| (n, c))
            })
            .collect();
        self.pnid_agent = Some(homes);
    }

    /// PNID rows through numalab's sched_ext scheduler (`run --pnid-via
    /// sched`); the caller has checked that it can load here.
    pub fn pnid_via_sched(&mut self, cfg: crate::sched::Config) {
        self.pnid_sched = Some(cfg);
    }

    /// The probe a sample of `row` runs.
    fn probe_spec(&self, row: &Row, spec: &ExperimentSpec) -> ProbeSpec {
        let mut ps = probe_spec(row, spec);
        // Through the agent or the scheduler, the probe itself sets no PNID.
        if self.pnid_agent.is_some() || self.pnid_sched.is_some() {
            ps.pnid = None;
        } else if ps.pnid.is_some() {
            ps.pnid_prctl = self.pnid_prctl.clone();
        }
        ps
    }
}

impl Host {
    /// The homenode agent a sample of `row` runs under, if any.
    fn agent_for(&self, row: &Row) -> anyhow::Result<Option<crate::home::Agent>> {
        let (Some(homes), true) = (&self.pnid_agent, row.pnid >= 0) else {
            return Ok(None);
        };
        let node = row.pnid as u32;
        let cpus = homes.get(&node).cloned().ok_or_else(|| {
            crate::error::usage(format!("PNID {node}: the node has no CPUs for the agent"))
        })?;
        Ok(Some(crate::home::Agent::new(
            crate::topology::sysfs::SysRoot::new("/"),
            node,
            cpus,
            crate::home::Thresholds::default(),
            Duration::from_millis(crate::home::EXPERIMENT_WINDOW_MS),
            None,
        )))
    }
}

impl Backend for Host {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn pnid_via(&self) -> PnidVia {
        if self.pnid_agent.is_some() {
            PnidVia::Agent
        } else if self.pnid_sched.is_some() {
            PnidVia::Sched
        } else {
            PnidVia::Prctl
        }
    }

    fn capabilities(&self) -> Capabilities {
        let read_num = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        Capabilities {
            numa_balancing: read_num(state::NUMA_BALANCING).map(|v| v.min(1) as u8),
            can_set_numa_balancing: state::writable(state::NUMA_BALANCING),
            migration_cost_ns: read_num(state::MIGRATION_COST),
            can_set_migration_cost: state::writable(state::MIGRATION_COST),
            pnid: match &self.pnid_prctl {
                _ if self.pnid_agent.is_some() => Ok(
                    "user-space homenode agent (numalab home): soft CPU affinity to the PNID node"
                        .into(),
                ),
                _ if self.pnid_sched.is_some() => Ok(
                    "numalab's sched_ext scheduler (numalab sched): the probe homed on the PNID node"
                        .into(),
                ),
                Some(p) => crate::probe::pnid::parse_explicit(p)
                    .map(|i| i.evidence)
                    .map_err(|e| e.to_string()),
                None => crate::probe::pnid::detect(std::path::Path::new("/proc"))
                    .map(|i| i.evidence)
                    .map_err(|_| {
                        "the kernel shows no PR_PREFERRED_NID patch (see `numalab probe --help`, \
                         --pnid-prctl)"
                            .to_string()
                    }),
            },
        }
    }

    fn prepare(&mut self, row: &Row, guard: &mut Guard) -> anyhow::Result<()> {
        let knobs = row_knobs(row)?;
        let mut keep: std::collections::BTreeSet<String> = knobs.keys().cloned().collect();
        if self.schedstat.is_some() {
            keep.insert(state::SCHEDSTATS.into());
        }
        guard.reset_except(&keep)?;
        for (path, value) in &knobs {
            guard.set(path, value)?;
        }
        Ok(())
    }

    fn sample(
        &mut self,
        row: &Row,
        spec: &ExperimentSpec,
        stop: &Stop,
        guard: &mut Guard,
    ) -> anyhow::Result<Sampled> {
        let mut knob_paths = vec![
            state::NUMA_BALANCING.to_string(),
            state::MIGRATION_COST.into(),
        ];
        knob_paths.extend(row_knobs(row)?.into_keys());
        let knob_paths: Vec<&str> = knob_paths.iter().map(String::as_str).collect();
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let knobs = read_knobs(&knob_paths, read);
        // The scheduler first, so the load starts under it as the probe does.
        let sched = match (&self.pnid_sched, row.pnid >= 0) {
            (Some(cfg), true) => Some(
                crate::sched::loader::Scheduler::load(cfg, false)
                    .context("loading numalab's scheduler for a PNID row")?,
            ),
            _ => None,
        };
        let load = if self.load_spec.percent > 0.0 {
            Some(Load::start(&self.load_spec).context("starting the background load")?)
        } else {
            None
        };
        let mut argv: Vec<std::ffi::OsString> = vec![self.exe.clone().into()];
        argv.extend(
            self.probe_spec(row, spec)
                .child_argv()
                .iter()
                .map(Into::into),
        );
        let mut agent = self.agent_for(row)?;
        let opts = crate::exec::Options {
            // 1 ms: the probe's wall time is part of what the run reports.
            poll: Duration::from_millis(1),
            trace: self.trace.as_ref().map(|(tfs, live)| (tfs, live.clone())),
            agents: agent.iter_mut().map(|a| (a, vec![0])).collect(),
            sched_homes: sched
                .iter()
                .map(|s| (s, row.pnid as u32, vec![0]))
                .collect(),
            ..Default::default()
        };
        let before = self.schedstat_now();
        let batch = crate::exec::run(&self.exe, &[argv], opts, guard, stop, |_, _, _| {})
            .context("running the probe")?;
        // Read at once: the probe has exited, the load still runs (its
        // workers are pinned, so what moved since `before` is the probe,
        // and the odd kernel thread).
        let balance = match (before, self.schedstat_now()) {
            (Some(b), Some(a)) => match schedstat::delta(&b, &a) {
                Ok(d) => {
                    let node_of = |c| self.topo.node_of_cpu(c);
                    Some(SampleBalance::from_schedstat(&schedstat::by_level(
                        &d, node_of,
                    )))
                }
                Err(e) => {
                    eprintln!(
                        "run: row [{:02}]: this sample has no `balance`: {e}",
                        row.id
                    );
                    None
                }
            },
            _ => None,
        };
        drop(load);
        let mut sched_account = None;
        if let Some(mut s) = sched {
            s.detach_checked()
                .with_context(|| format!("row [{:02}]'s sample", row.id))?;
            let pid = batch.children.first().map(|c| c.pid);
            match s.account() {
                Ok(a) => sched_account = pid.and_then(|pid| a.of_process(pid)),
                Err(e) => eprintln!(
                    "run: row [{:02}]: this sample has no scheduler account: {e:#}",
                    row.id
                ),
            }
        }
        let knobs_changed = changed_knobs(&knobs, &read_knobs(&knob_paths, read));
        if batch.ended != crate::exec::Ended::Exited {
            return Err(stop.interrupted().into());
        }
        let probe = batch
            .children
            .into_iter()
            .next()
            .expect("one probe per sample");
        if !probe.reaped.success() {
            anyhow::bail!(
                "probe for row [{:02}] failed ({}): {}",
                row.id,
                probe.reaped.describe(),
                probe.stderr_text()
            );
        }
        let rec: ProbeRecord =
            serde_json::from_slice(&probe.stdout).context("parsing the probe's record")?;
        let trace = batch
            .captured
            .map(|c| SampleTrace::from_capture(&self.topo, &c, &rec));
        Ok(Sampled {
            probe: rec,
            wall_ns: probe.wall_ns,
            trace,
            numa_balancing: knobs
                .get(state::NUMA_BALANCING)
                .and_then(|v| v.parse().ok()),
            knobs,
            knobs_changed,
            balance,
            sched: sched_account,
        })
    }

    fn jobs(
        &mut self,
        spec: &JobsSpec,
        stop: &Stop,
        guard: &mut Guard,
        progress: &mut dyn FnMut(u32, u32, f64),
    ) -> anyhow::Result<JobsRecord> {
        jobs::run(self, spec, guard, stop, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::state::StateLock;
    use std::path::Path;

    #[test]
    fn schedstats_are_turned_on_journaled_and_restored_or_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let knob = root.join("proc/sys/kernel/sched_schedstats");
        std::fs::create_dir_all(knob.parent().unwrap()).unwrap();
        let lock = || StateLock::acquire(&tmp.path().join("state"), "test").unwrap();
        let sys = SysRoot::new(&root);
        // No /proc/schedstat (a kernel without CONFIG_SCHEDSTATS).
        let mut g = Guard::with_root(lock(), Path::new("runs/x"), &root);
        let e = enable_schedstat(&mut g, &sys).unwrap_err();
        assert!(e.contains("schedstat"), "{e}");
        drop(g);
        let stat = root.join("proc/schedstat");
        std::fs::write(
            &stat,
            include_str!("../../../tests/fixtures/proc/schedstat-v16-6.12-2node.txt"),
        )
        .unwrap();
        // The counters, but no sysctl to turn them on.
        let mut g = Guard::with_root(lock(), Path::new("runs/x"), &root);
        let e = enable_schedstat(&mut g, &sys).unwrap_err();
        assert!(e.contains("sched_schedstats is missing"), "{e}");
        drop(g);
        // Both: on for the run, back off when the guard restores.
        std::fs::write(&knob, "0\n").unwrap();
        let mut g = Guard::with_root(lock(), Path::new("runs/x"), &root);
        enable_schedstat(&mut g, &sys).unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1");
        drop(g);
        assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
        // A version numalab does not read is refused, nothing changed.
        std::fs::write(&stat, "version 17\ntimestamp 1\n").unwrap();
        let mut g = Guard::with_root(lock(), Path::new("runs/x"), &root);
        let e = enable_schedstat(&mut g, &sys).unwrap_err();
        assert!(e.contains("version 17"), "{e}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
    }
}
