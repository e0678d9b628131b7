//! The simulator: the RFC's experiment on a machine you do not have.
//!
//! [`machine`] turns a topology into sched domains, [`load`] is the pinned
//! background load in closed form, [`multi`] is the engine: any number of
//! probes among the workers as a discrete-event simulation (a `run` sample
//! is one probe, through [`one`]; `jobs` runs N), with [`multi_lb`] and
//! [`balance`] (the load balancer's decisions), [`numa`] (pages and
//! automatic NUMA balancing), [`numa_move`] (task_numa_migrate()'s choice
//! of CPU) and [`cold`] (what a move costs in cache refills); [`profile`]
//! holds the hardware numbers, each with its source. Deterministic: a
//! sample's result depends only on the machine, the profile, the sample's
//! spec and its seed, never on the order or the thread it runs on.
//! docs/sim.md describes the model and what it leaves out.

pub mod balance;
pub mod cold;
pub mod fit;
pub mod groups;
pub mod load;
pub mod machine;
pub mod multi;
pub mod multi_gate;
pub mod multi_lb;
mod multi_numa;
pub mod numa;
pub mod numa_move;
pub mod one;
pub mod profile;
pub mod rng;
pub mod sample;

pub use machine::Machine;
pub use profile::{Profile, MODEL_VERSION};
pub use sample::{Cause, Move, SampleResult, SampleSpec};

/// A simulation's moves as the analysis layer counts them (CPU ids).
pub fn migrations(m: &Machine, moves: &[Move]) -> Vec<crate::analysis::Migration> {
    moves
        .iter()
        .map(|mv| crate::analysis::Migration {
            t_ns: mv.t_ns,
            from: m.ids[mv.from],
            to: m.ids[mv.to],
        })
        .collect()
}

/// The node (index) holding more than half of the pages, if one does.
pub fn majority_node(pages_per_node: &[u64]) -> Option<usize> {
    let total: u64 = pages_per_node.iter().sum();
    pages_per_node.iter().position(|&p| p * 2 > total)
}

/// Time per access and mean DRAM latency from each node (index) for a
/// buffer of `ws` bytes whose pages are spread as `per_node` says, the
/// time scaled by the sample's `factor` ([`Profile::speed_factor`]).
pub fn access_by_node(
    p: &Profile,
    m: &Machine,
    per_node: &[u64],
    ws: u64,
    factor: f64,
    dram_ns: &mut [f64],
    access_ns: &mut [f64],
) {
    let total: u64 = per_node.iter().sum();
    for n in 0..per_node.len() {
        let dram = if total == 0 {
            p.dram_ns(10)
        } else {
            (0..per_node.len())
                .map(|k| per_node[k] as f64 * p.dram_ns(m.dist[n][k]))
                .sum::<f64>()
                / total as f64
        };
        dram_ns[n] = dram;
        access_ns[n] = p.access_ns(ws, dram) * factor;
    }
}

/// The simulated kernel, as run.json and the jobs record name it.
pub fn kernel_label(profile: &Profile) -> String {
    format!(
        "sim model {MODEL_VERSION}: Linux 6.12 + PNID patch{}{}, profile {}",
        if profile.kernel.ni_random {
            ""
        } else {
            " without NI_RANDOM"
        },
        if profile.kernel.group_imbalance {
            ", group imbalance flag"
        } else {
            ""
        },
        profile.name
    )
}

/// A machine and a profile, ready to simulate samples under one load.
pub struct Simulator {
    pub machine: Machine,
    pub profile: Profile,
    pub load: load::LoadModel,
}

impl Simulator {
    /// `phases` drawn with `seed` ([`crate::load::LoadPhases::offsets_ns`]).
    pub fn new(
        machine: Machine,
        profile: Profile,
        load_percent: f64,
        period_ns: f64,
        phases: crate::load::LoadPhases,
        seed: u64,
    ) -> Simulator {
        let load = load::LoadModel::shaped(&machine, load_percent, period_ns, phases, seed)
            .reshaped(profile.emulator.reshape(machine.len()));
        Simulator {
            machine,
            profile,
            load,
        }
    }

    /// One sample.
    pub fn sample(&self, spec: &SampleSpec) -> SampleResult {
        one::sample(&self.machine, &self.profile, &self.load, spec)
    }

    /// Many samples on `threads` threads; results in input order.
    pub fn samples(&self, specs: &[SampleSpec], threads: usize) -> Vec<SampleResult> {
        let threads = threads.clamp(1, specs.len().max(1));
        if threads == 1 {
            return specs.iter().map(|s| self.sample(s)).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut out: Vec<Option<SampleResult>> = vec![None; specs.len()];
        let slots: Vec<std::sync::Mutex<&mut Option<SampleResult>>> =
            out.iter_mut().map(std::sync::Mutex::new).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= specs.len() {
                        break;
                    }
                    let r = self.sample(&specs[i]);
                    **slots[i].lock().expect("slot") = Some(r);
                });
            }
        });
        drop(slots);
        out.into_iter()
            .map(|r| r.expect("every sample ran"))
            .collect()
    }
}
