//! The simulator as a backend (`run --backend sim`): each sample of a row is
//! one [`crate::sim`] sample, turned into the same probe record and trace a
//! host sample has, so reports, compare and plots work on it unchanged.
//!
//! The simulated kernel is 6.12 with our PNID patch: every knob it models
//! (numa_balancing, migration_cost_ns, the NUMA scan knobs) can be set, and
//! a row naming another knob is skipped with that reason. Nothing on the
//! host changes. Samples are simulated ahead in batches on every core, each
//! from its own seed (the run's seed, the row, the sample index), so a
//! result depends neither on order nor on threads, and a resumed run gets
//! the samples a whole run would have had.

pub mod fit;
pub mod jobs;

use super::backend::{row_knobs, Backend, Capabilities, Sampled};
use crate::analysis::balance::{Moves, SampleBalance, Spans};
use crate::analysis::{self, Migration, Segment};
use crate::load::LoadSpec;
use crate::probe::record::{
    CpuTime, Host, NumaReport, ObservationReport, Placement, PnidReport, ProbeRecord, ThpReport,
    Timing,
};
use crate::probe::{pnid, ProbeSpec, ThpMode};
use crate::run::jobs::{JobsRecord, JobsSpec};
use crate::run::spec::{ExperimentSpec, Row, RowCpu, RowMem};
use crate::sim::numa::{MemPolicy, NumaKnobs};
use crate::sim::{Cause, Machine, Profile, SampleResult, SampleSpec, Simulator, MODEL_VERSION};
use crate::sys::signals::Stop;
use crate::sys::state::{self, Guard};
use crate::topology::Topology;
use crate::trace::analyze::{BalanceKinds, Causes, NumaActivity, TaskTrace};
use crate::trace::record::SampleTrace;
use std::collections::{BTreeMap, VecDeque};

/// Knob paths the simulator models, with the simulated kernel's defaults.
const SCAN: &str = "/sys/kernel/debug/sched/numa_balancing";

fn defaults() -> BTreeMap<String, String> {
    let k = NumaKnobs::default();
    BTreeMap::from([
        (state::NUMA_BALANCING.to_string(), "1".to_string()),
        (
            state::MIGRATION_COST.to_string(),
            MIGRATION_COST_NS.to_string(),
        ),
        (format!("{SCAN}/scan_delay_ms"), k.scan_delay_ms.to_string()),
        (
            format!("{SCAN}/scan_period_min_ms"),
            k.scan_period_min_ms.to_string(),
        ),
        (
            format!("{SCAN}/scan_period_max_ms"),
            k.scan_period_max_ms.to_string(),
        ),
        (format!("{SCAN}/scan_size_mb"), k.scan_size_mb.to_string()),
    ])
}

/// sysctl_sched_migration_cost's default, ns.
const MIGRATION_COST_NS: u64 = 500_000;

use crate::sim::kernel_label;

pub struct Sim {
    sim: Simulator,
    /// The machine's domain spans per level, for the `balance` records.
    level_spans: Vec<Spans>,
    source: String,
    topo: Topology,
    threads: usize,
    /// Planned (row, sample) pairs not yet handed out, in run order.
    todo: VecDeque<(usize, u32)>,
    ready: BTreeMap<(usize, u32), Sampled>,
    rows: Vec<Row>,
    handed: BTreeMap<usize, u32>,
    /// The background load every sample or batch of jobs runs beside.
    load: LoadSpec,
}

impl Sim {
    /// The simulator on the machine `topo` (`source` says where it came
    /// from, for the records) with `profile`, every sample or batch of jobs
    /// beside the background load `load`.
    pub fn new(
        topo: &Topology,
        source: &str,
        profile: Profile,
        load: &LoadSpec,
    ) -> anyhow::Result<Sim> {
        let machine = Machine::new(topo)?;
        let period = load.period_ms * 1e6;
        let (phases, seed) = (load.phases, load.seed);
        Ok(Sim {
            level_spans: machine.level_spans(),
            sim: Simulator::new(machine, profile, load.percent, period, phases, seed),
            load: load.clone(),
            source: source.to_string(),
            topo: topo.clone(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            todo: VecDeque::new(),
            ready: BTreeMap::new(),
            rows: Vec::new(),
            handed: BTreeMap::new(),
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.sim.profile
    }

    fn node_index(&self, id: u32) -> anyhow::Result<usize> {
        self.sim
            .machine
            .node_ids
            .iter()
            .position(|&n| n == id)
            .ok_or_else(|| anyhow::anyhow!("node {id} has no CPUs in the simulated machine"))
    }

    fn sample_spec(
        &self,
        row: &Row,
        spec: &ExperimentSpec,
        index: u32,
    ) -> anyhow::Result<SampleSpec> {
        let m = &self.sim.machine;
        let allowed: Vec<usize> = match row.cpu {
            RowCpu::Node(n) => m.node_cpus[self.node_index(n)?].clone(),
            RowCpu::Float => (0..m.len()).collect(),
        };
        let mem = match &row.mem {
            RowMem::Node(n) => MemPolicy::Bind(self.node_index(*n)?),
            RowMem::Interleave(s) => MemPolicy::Interleave(
                s.iter()
                    .map(|n| self.node_index(n))
                    .collect::<Result<_, _>>()?,
            ),
            RowMem::Float => MemPolicy::Float,
        };
        let knobs = row_knobs(row)?;
        let dflt = NumaKnobs::default();
        let num = |name: &str, dflt: f64| {
            knobs
                .get(&format!("{SCAN}/{name}"))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(dflt)
        };
        let p = &spec.probe;
        let per_iter = p.pattern.accesses_per_pass(p.size.bytes());
        Ok(SampleSpec {
            allowed,
            mem,
            forced: if row.pnid >= 0 {
                Some(self.node_index(row.pnid as u32)?)
            } else {
                None
            },
            numa: NumaKnobs {
                enabled: row.nb > 0,
                scan_delay_ms: num("scan_delay_ms", dflt.scan_delay_ms),
                scan_period_min_ms: num("scan_period_min_ms", dflt.scan_period_min_ms),
                scan_period_max_ms: num("scan_period_max_ms", dflt.scan_period_max_ms),
                scan_size_mb: num("scan_size_mb", dflt.scan_size_mb),
            },
            migration_cost_ns: row.migration_cost_ns.unwrap_or(MIGRATION_COST_NS) as f64,
            load_percent: spec.load,
            period_ns: spec.load_period_ms * 1e6,
            buffer_bytes: p.size.bytes(),
            page_bytes: if p.thp == ThpMode::On { 2 << 20 } else { 4096 },
            accesses_per_iteration: per_iter,
            iterations: p.counts,
            seed: seed_of(spec.seed, row.id, index),
            noise_seed: seed_of(spec.seed, usize::MAX, index),
            scope: p.bind_scope,
            load_policy: spec.load_policy,
            touch_first: !p.first_touch.is_placed(),
        })
    }

    /// Simulates the next batch of planned samples, `first` among them.
    fn fill(
        &mut self,
        rows: &[Row],
        spec: &ExperimentSpec,
        first: (usize, u32),
    ) -> anyhow::Result<()> {
        let mut batch = vec![first];
        // Big enough that the workers rarely wait for the records of a batch.
        let want = self.threads * 16;
        batch.extend(
            self.todo
                .iter()
                .copied()
                .filter(|p| *p != first && !self.ready.contains_key(p))
                .take(want - 1),
        );
        let specs: Vec<SampleSpec> = batch
            .iter()
            .map(|&(r, i)| self.sample_spec(&rows[r], spec, i))
            .collect::<anyhow::Result<_>>()?;
        let results = self.sim.samples(&specs, self.threads);
        for (((r, i), res), ss) in batch.into_iter().zip(results).zip(&specs) {
            let rec = self.records(&rows[r], spec, ss, &res)?;
            self.ready.insert((r, i), rec);
        }
        Ok(())
    }

    fn records(
        &self,
        row: &Row,
        spec: &ExperimentSpec,
        ss: &SampleSpec,
        res: &SampleResult,
    ) -> anyhow::Result<Sampled> {
        if let Some(why) = &res.runaway {
            anyhow::bail!(
                "the simulator ran away on row {} ({why}): a model bug on this machine, \
                 not a result; the samples before it are kept",
                row.params()
            );
        }
        let m = &self.sim.machine;
        let id = |c: usize| m.ids[c];
        let node_id = |n: usize| m.node_ids[n];
        let probe_spec = ProbeSpec {
            // Nothing self-observed: the simulator knows every move.
            observe_every: 0,
            ..super::backend::probe_spec(row, spec)
        };
        let pages: BTreeMap<u32, u64> = res
            .pages_after_warm_up
            .iter()
            .enumerate()
            .filter(|(_, &p)| p > 0)
            .map(|(n, &p)| (node_id(n), p))
            .collect();
        let mem_node = crate::sim::majority_node(&res.pages_after_warm_up).map(node_id);
        let all: Vec<Migration> = crate::sim::migrations(m, &res.moves);
        let in_loop: Vec<Migration> = all
            .iter()
            .copied()
            .filter(|mv| mv.t_ns >= res.loop_start_ns)
            .collect();
        // Running time per CPU as segments, `first` first: residency's start
        // node is its first segment's.
        let segments = |ns: &[u64], first: Option<usize>| -> Vec<Segment> {
            let mut v: Vec<Segment> = ns
                .iter()
                .enumerate()
                .filter(|(_, &v)| v > 0)
                .map(|(c, &v)| Segment { cpu: id(c), ns: v })
                .collect();
            if let Some(pos) = v.iter().position(|s| Some(s.cpu) == first.map(id)) {
                let s = v.remove(pos);
                v.insert(0, s);
            }
            v
        };
        let start_first = segments(&res.run_ns_loop, res.loop_start_cpu);
        let residency = analysis::residency(&self.topo, mem_node, &start_first);
        let total_ns: u64 = res.iterations_ns.iter().sum();
        // The loop's time on a CPU (a shared CPU counts half: the engine
        // splits it evenly); the rest of its wall time the probe waited.
        let loop_run_ns: u64 = res.run_ns_loop.iter().sum();
        let accesses = ss.accesses_per_iteration * ss.iterations as u64;
        let seen: crate::idset::IdSet = res
            .run_ns
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0)
            .map(|(c, _)| id(c))
            .collect();
        let mut faults = BTreeMap::new();
        for (n, &f) in res.numa_faults.iter().enumerate() {
            if f > 0 {
                faults.insert(
                    node_id(n),
                    crate::analysis::numastat::NodeFaults {
                        task_private: Some(f),
                        ..Default::default()
                    },
                );
            }
        }
        let sched = crate::analysis::NumaSched {
            numa_scan_seq: Some(res.numa_scan_seq as i64),
            numa_pages_migrated: Some(res.numa_pages_migrated),
            numa_preferred_nid: Some(res.preferred.map_or(-1, |n| node_id(n) as i32)),
            numa_preferred_nid_force: Some(ss.forced.map_or(-1, |n| node_id(n) as i32)),
            total_numa_faults: Some(res.total_numa_faults),
            current_node: Some(node_id(m.node[res.end_cpu]) as i32),
            numa_group_id: Some(0),
            faults,
        };
        let probe = ProbeRecord {
            schema: crate::probe::record::SCHEMA.into(),
            numalab_version: env!("CARGO_PKG_VERSION").into(),
            spec: probe_spec,
            host: Host {
                kernel: Some(kernel_label(&self.sim.profile)),
                cpu_model: self.topo.cpu_model.clone(),
                num_cpus: m.len(),
                topology_digest: self.topo.digest(),
                hostname: None,
            },
            pid: 0,
            start_unix_ns: 0,
            timing: Timing {
                accesses_per_iteration: ss.accesses_per_iteration,
                iterations_ns: res.iterations_ns.clone(),
                total_ns,
                ns_per_access: total_ns as f64 / accesses.max(1) as f64,
                warm_up_ns: res.warm_up_ns,
                checksum: ss.seed,
            },
            thp: ThpReport {
                advice: spec.probe.thp.name().into(),
                system_enabled: None,
                anon_huge_kb: None,
            },
            pnid: (row.pnid >= 0).then(|| PnidReport {
                requested: row.pnid,
                interface: pnid::Interface {
                    option: 101,
                    layout: pnid::Layout::Poc,
                    evidence: "simulated kernel with the PNID patch".into(),
                },
                read_back: Some(row.pnid),
            }),
            placement: Placement {
                page_size: ss.page_bytes,
                pages_per_node: pages,
                pages_unplaced: 0,
                mem_node,
                allowed_cpus: ss.allowed.iter().map(|&c| id(c)).collect(),
                seen_cpus: seen,
                matches_request: true,
                mismatches: Vec::new(),
            },
            migrations: analysis::classify(&self.topo, mem_node, &in_loop),
            migrations_whole: analysis::classify(&self.topo, mem_node, &all),
            residency: residency.clone(),
            observation: ObservationReport {
                enabled: false,
                check_every_accesses: 0,
                start_mono_ns: 0,
                kernel_migrations: Some(all.len() as u64),
                end_ns: res.wall_ns,
                start_cpu: id(res.start_cpu),
                end_cpu: id(res.end_cpu),
                loop_start_ns: res.loop_start_ns,
                loop_end_ns: res.wall_ns,
                changes: Vec::new(),
            },
            numa: Some(NumaReport {
                sched,
                vmstat_delta: BTreeMap::from([
                    ("numa_hint_faults".to_string(), res.total_numa_faults),
                    ("numa_pages_migrated".to_string(), res.numa_pages_migrated),
                ]),
                notes: Vec::new(),
            }),
            cpu_time: Some(CpuTime {
                source: "sim".into(),
                run_ns: loop_run_ns,
                wait_ns: total_ns.saturating_sub(loop_run_ns),
                timeslices: None,
            }),
            threads: Vec::new(),
            timeline: None,
        };
        let balance = spec
            .trace
            .then(|| SampleBalance::from_sim(&res.balance, &self.level_spans));
        let trace = balance.as_ref().map(|bal| {
            let mut causes = Causes::default();
            let mut cross = Causes::default();
            // The trace's kinds of balancing are the counters' (each of the
            // probe's balancing moves is counted once, at one level); an
            // affinity move is the stopper's, as a host trace shows it.
            let mut kinds = sim_kinds(bal.moves(|_| true));
            let mut cross_kinds = sim_kinds(bal.cross_node());
            for mv in &res.moves {
                let c = match mv.cause {
                    Cause::NumaBalancing => &mut causes.numa_balancing,
                    Cause::LoadBalance | Cause::Affinity => &mut causes.load_balance,
                };
                *c += 1;
                let crossing = m.node[mv.from] != m.node[mv.to];
                if crossing {
                    match mv.cause {
                        Cause::NumaBalancing => cross.numa_balancing += 1,
                        _ => cross.load_balance += 1,
                    }
                }
                if mv.cause == Cause::Affinity {
                    kinds.pushed += 1;
                    cross_kinds.pushed += crossing as u64;
                }
            }
            let whole = segments(&res.run_ns, Some(res.start_cpu));
            SampleTrace {
                task: TaskTrace {
                    pid: 0,
                    parent: None,
                    mem_node,
                    migrate_events: all.len() as u64,
                    migrations: analysis::classify(&self.topo, mem_node, &all),
                    causes,
                    cross_node_causes: cross,
                    numa: NumaActivity {
                        move_numa: res.move_numa,
                        swap_numa: 0,
                        stick_numa: res.stick_numa,
                    },
                    balancing: Some(kinds),
                    cross_node_balancing: Some(cross_kinds),
                    residency: analysis::residency(&self.topo, mem_node, &whole),
                    first_cpu: Some(id(res.start_cpu)),
                    exited: true,
                    over_time: analysis::over_time(
                        &self.topo,
                        mem_node,
                        Some(id(res.start_cpu)),
                        res.wall_ns,
                        &all.iter()
                            .zip(&res.moves)
                            .map(|(a, mv)| (*a, mv.cause == Cause::NumaBalancing))
                            .collect::<Vec<_>>(),
                    ),
                    moves: Vec::new(),
                },
                events: res.events,
                lost_events: 0,
                missing_events: Vec::new(),
            }
        });
        let mut knobs = defaults();
        for (k, v) in row_knobs(row)? {
            knobs.insert(k, v);
        }
        Ok(Sampled {
            probe,
            wall_ns: res.wall_ns,
            trace,
            numa_balancing: Some(row.nb),
            knobs,
            knobs_changed: Vec::new(),
            balance,
            sched: None,
        })
    }
}

/// Balancing moves the simulator counted, as a trace counts them by kind.
fn sim_kinds(moves: Option<Moves>) -> BalanceKinds {
    let m = moves.unwrap_or_default();
    BalanceKinds {
        busy: m.gained.busy,
        idle: m.gained.idle,
        newly_idle: m.gained.newly_idle,
        pushed: m.active_pushed,
        unknown: 0,
    }
}

/// Refuses a probe the simulator does not model: a threaded one, whose
/// point is NUMA balancing's task grouping, task swaps and
/// pseudo-interleaving, none of which the model has (docs/sim.md, "What is not modelled").
pub fn check_probe(threads: Option<crate::probe::Threads>) -> anyhow::Result<()> {
    match threads {
        None => Ok(()),
        Some(t) => Err(crate::error::usage(format!(
            "--threads {} (sharing {}): the simulator does not model NUMA balancing's task \
             grouping (numa_group), task swaps or pseudo-interleaving, which a threaded probe \
             is for; run it on a host or in a lab guest",
            t.count, t.sharing
        ))),
    }
}

/// A sample's seed from the run's seed, its row and its index. Each part
/// goes into its own round of SplitMix64's bijective mix, added (times an
/// odd constant) to the previous round's output, so two samples share a
/// seed only if two mixed 64-bit values differ by a small multiple of that
/// constant. (Until model 6 the three were XORed into one word, and the
/// run's seed and the index landed on the same low bits: the samples of
/// `--seed 2` were those of `--seed 1`, reordered.)
pub fn seed_of(run_seed: u64, row: usize, index: u32) -> u64 {
    let round = |h: u64, part: u64, k: u64| {
        crate::rng::SplitMix64::new(h.wrapping_add(part.wrapping_mul(k))).next_u64()
    };
    let h = round(run_seed, 0, 0);
    let h = round(h, row as u64, 0xD6E8_FEB8_6659_FD93);
    round(h, index as u64, 0xA076_1D64_78BD_642F)
}

impl Backend for Sim {
    fn kind(&self) -> crate::run::record::BackendKind {
        crate::run::record::BackendKind::Sim
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            numa_balancing: Some(1),
            can_set_numa_balancing: true,
            migration_cost_ns: Some(MIGRATION_COST_NS),
            can_set_migration_cost: true,
            pnid: Ok("simulated kernel with the PNID patch".into()),
        }
    }

    fn describe(&self, meta: &mut crate::run::record::RunMeta) {
        meta.kernel = Some(kernel_label(&self.sim.profile));
        meta.sim = Some(crate::run::record::SimMeta {
            model_version: MODEL_VERSION,
            topology_source: self.source.clone(),
            topology: serde_json::from_str(&self.topo.to_json()).unwrap_or(serde_json::Value::Null),
            profile: self.sim.profile.clone(),
        });
    }

    fn read_knob(&self, path: &str) -> Option<String> {
        defaults().get(path).cloned()
    }

    fn knob_writable(&self, path: &str) -> bool {
        defaults().contains_key(path)
    }

    fn plan(&mut self, rows: &[Row], todo: &[(usize, u32)]) {
        self.rows = rows.to_vec();
        self.todo = todo.iter().copied().collect();
    }

    fn prepare(&mut self, _row: &Row, _guard: &mut Guard) -> anyhow::Result<()> {
        Ok(())
    }

    fn sample(
        &mut self,
        row: &Row,
        spec: &ExperimentSpec,
        stop: &Stop,
        _guard: &mut Guard,
    ) -> anyhow::Result<Sampled> {
        if stop.is_set() {
            return Err(stop.interrupted().into());
        }
        if self.rows.len() <= row.id || self.rows[row.id].id != row.id {
            // Asked without a plan: this row is all it knows.
            self.rows.resize(row.id + 1, row.clone());
            self.rows[row.id] = row.clone();
        }
        // The runner asks in the planned order; a pair off the plan (never
        // expected) gets the next index of its row.
        let key = match self.todo.front() {
            Some(&(r, i)) if r == row.id => {
                self.todo.pop_front();
                (r, i)
            }
            _ => (row.id, *self.handed.get(&row.id).unwrap_or(&0)),
        };
        self.handed.insert(row.id, key.1 + 1);
        if !self.ready.contains_key(&key) {
            let rows = std::mem::take(&mut self.rows);
            let r = self.fill(&rows, spec, key);
            self.rows = rows;
            r?;
        }
        Ok(self.ready.remove(&key).expect("filled"))
    }

    fn jobs(
        &mut self,
        spec: &JobsSpec,
        _stop: &Stop,
        _guard: &mut Guard,
        progress: &mut dyn FnMut(u32, u32, f64),
    ) -> anyhow::Result<JobsRecord> {
        // One simulation: no partial progress to show, nothing on this
        // machine changes (no guard), and no stop to poll (the command
        // leaves the signals' default, which ends the process).
        // The backend's own machine: building one costs as much as
        // simulating a thousand jobs (perf, bench/sim.sh).
        let rec = jobs::run(
            &self.sim.machine,
            &self.topo,
            &self.source,
            &self.sim.profile,
            &self.load,
            spec,
        )?;
        progress(spec.n, spec.n, rec.elapsed_s);
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::seed_of;

    /// Regression: the run's seed and the sample's index were XORed into
    /// the same bits, so `--seed 2`'s samples were `--seed 1`'s reordered
    /// (sample k of one was sample k^3 of the other).
    #[test]
    fn another_run_seed_is_not_the_same_samples_reordered() {
        let mut seen = std::collections::HashSet::new();
        for run in 0..64u64 {
            for row in (0..36).chain([usize::MAX]) {
                for index in 0..64u32 {
                    assert!(
                        seen.insert(seed_of(run, row, index)),
                        "seed {run}, row {row}, sample {index} repeats another's seed"
                    );
                }
            }
        }
    }
}
