//! A backend for runner tests that touches nothing but a scratch tree: every
//! sample is a copy of one real tiny probe record (taken on this machine),
//! the row's NB goes into the scratch tree's kernel.numa_balancing through
//! the guard (so journaling and restore are exercised), and the stop flag
//! trips after `stop_after` samples as a signal would.

use numalab::experiment::backend::{Backend, Capabilities, Sampled};
use numalab::probe::record::ProbeRecord;
use numalab::probe::{self, CpuPlacement, MemPlacement, Pattern, ProbeSpec, ThpMode};
use numalab::run::spec::{ExperimentSpec, Row};
use numalab::sys::signals::Stop;
use numalab::sys::state::{self, Guard, StateLock};
use std::path::{Path, PathBuf};

pub struct Mock {
    pub calls: usize,
    pub stop_after: usize,
    pub template: ProbeRecord,
    /// The call at which a sample reports a knob changed under it.
    pub knob_change_at: Option<usize>,
    /// A sample's timed loop in ns from (row, call); default
    /// [`Mock::steady`].
    pub time_ns: fn(&Row, usize) -> u64,
}

impl Mock {
    pub fn new(stop_after: usize) -> Mock {
        Mock {
            calls: 0,
            stop_after,
            template: template(),
            knob_change_at: None,
            time_ns: Mock::steady,
        }
    }

    /// 1 s + 10 ms per row id + 1 ns per call: distinct, nearly constant.
    pub fn steady(row: &Row, call: usize) -> u64 {
        1_000_000_000 + row.id as u64 * 10_000_000 + call as u64
    }
}

impl Backend for Mock {
    fn kind(&self) -> numalab::run::record::BackendKind {
        numalab::run::record::BackendKind::Mock
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            numa_balancing: Some(0),
            can_set_numa_balancing: true,
            migration_cost_ns: None,
            can_set_migration_cost: false,
            pnid: Err("mock has no PNID".into()),
        }
    }
    fn prepare(&mut self, row: &Row, guard: &mut Guard) -> anyhow::Result<()> {
        guard.set(state::NUMA_BALANCING, &row.nb.to_string())
    }
    fn sample(
        &mut self,
        row: &Row,
        _: &ExperimentSpec,
        stop: &Stop,
        guard: &mut Guard,
    ) -> anyhow::Result<Sampled> {
        self.calls += 1;
        if self.calls >= self.stop_after {
            stop.raise(libc::SIGINT);
        }
        let mut r = self.template.clone();
        r.timing.total_ns = (self.time_ns)(row, self.calls);
        Ok(Sampled {
            wall_ns: r.timing.total_ns + 1000,
            probe: r,
            trace: None,
            numa_balancing: guard
                .read(state::NUMA_BALANCING)
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            knobs: Default::default(),
            knobs_changed: if self.knob_change_at == Some(self.calls) {
                vec![state::NUMA_BALANCING.to_string()]
            } else {
                Vec::new()
            },
            balance: None,
            sched: None,
        })
    }
    fn jobs(
        &mut self,
        _: &numalab::run::jobs::JobsSpec,
        _: &Stop,
        _: &mut Guard,
        _: &mut dyn FnMut(u32, u32, f64),
    ) -> anyhow::Result<numalab::run::jobs::JobsRecord> {
        anyhow::bail!("the mock backend makes run's samples only; jobs are tested on the host and the simulator")
    }
}

/// A real probe on this machine, the shape of every mock record.
pub fn template() -> ProbeRecord {
    let spec = ProbeSpec {
        pattern: Pattern::RandRw,
        size: numalab::units::Size(4096),
        counts: 1,
        min_time_ns: None,
        cpu: CpuPlacement::Float,
        mem: MemPlacement::Float,
        pnid: None,
        pnid_prctl: None,
        thp: ThpMode::System,
        observe_every: 64,
        bind_scope: Default::default(),
        threads: None,
        first_touch: Default::default(),
    };
    let here =
        numalab::topology::sysfs::read_topology(&numalab::topology::sysfs::SysRoot::new("/"))
            .unwrap();
    let v = probe::validate(&spec, &here).unwrap();
    probe::run::run(&v, &here, |_, _| {}).unwrap()
}

/// A scratch system tree under `dir` with kernel.numa_balancing = 0; returns
/// its root and the knob's real path.
pub fn scratch_root(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("root");
    let knob = root.join(state::NUMA_BALANCING.trim_start_matches('/'));
    std::fs::create_dir_all(knob.parent().unwrap()).unwrap();
    std::fs::write(&knob, "0\n").unwrap();
    (root, knob)
}

/// A guard over the scratch tree `root`, locking `state_dir`.
pub fn guard(state_dir: &Path, run_dir: &Path, root: &Path) -> Guard {
    Guard::with_root(
        StateLock::acquire(state_dir, "test").unwrap(),
        run_dir,
        root,
    )
}
