//! The NUMA-sensitive probe: a buffer under a chosen memory policy, an outer
//! loop of timed passes of an access kernel, on CPUs under a chosen
//! affinity, observing its own CPU as it goes.
//!
//! [`ProbeSpec`] is what to do; [`validate`] checks it against the topology
//! and the process's cpuset before any work (bad input is a
//! [`UsageError`](crate::error::UsageError)); [`run`](run::run) does it and
//! returns a [`ProbeRecord`](record::ProbeRecord).

pub mod events;
pub mod kernels;
pub mod memory;
pub mod observe;
pub mod pnid;
pub mod record;
pub mod run;
pub mod summary;
pub mod summary_threads;
pub mod threads;
pub mod timeline;

pub use kernels::Pattern;

use crate::error::usage;
use crate::idset::IdSet;
use crate::sys::numa::PolicyScope;
use crate::topology::Topology;
use crate::units::fmt_size;
use serde::{Deserialize, Serialize};

/// Where the probe's CPU may be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "node", rename_all = "lowercase")]
pub enum CpuPlacement {
    /// Any CPU the cpuset allows: the scheduler decides.
    Float,
    /// Hard affinity to one node's CPUs (numactl --cpunodebind).
    Node(u32),
}

/// Where the probe's memory may be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "nodes", rename_all = "lowercase")]
pub enum MemPlacement {
    /// No policy: first touch decides.
    Float,
    /// numactl --membind N
    Bind(u32),
    /// numactl --preferred N (the memory policy, not the scheduler's PNID)
    Preferred(u32),
    /// numactl --interleave LIST
    Interleave(IdSet),
}

/// Transparent huge pages for the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ThpMode {
    /// No advice: the system setting decides.
    System,
    /// madvise(MADV_HUGEPAGE)
    On,
    /// madvise(MADV_NOHUGEPAGE)
    Off,
}

impl ThpMode {
    /// The spelling `--thp` takes and records carry.
    pub fn name(self) -> &'static str {
        match self {
            ThpMode::System => "system",
            ThpMode::On => "on",
            ThpMode::Off => "off",
        }
    }
}

/// When the probe first touches its buffer: after its CPU binding (where
/// it will run), or at its start, before the binding (wherever exec put
/// it), as the Preferred Node Affinity RFC's probe did (docs/rfc-procedure.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FirstTouch {
    /// CPU bound, then the memory policy, then the first touch: Mem F's
    /// pages land on the node the row pins the CPU to.
    #[default]
    Placed,
    /// The memory policy, the first touch, then the CPU binding: Mem F's
    /// pages land where the probe started.
    Start,
}

impl FirstTouch {
    pub fn is_placed(&self) -> bool {
        *self == FirstTouch::Placed
    }
    /// The spelling `--first-touch` takes and records carry.
    pub fn name(self) -> &'static str {
        match self {
            FirstTouch::Placed => "placed",
            FirstTouch::Start => "start",
        }
    }
}

/// What a threaded probe's accesses go over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Sharing {
    /// One array, first touched by the thread that starts the workers,
    /// every thread accessing all of it (autonumabench's NUMA01).
    Shared,
    /// Each thread an array of its own, first touched by it, in mappings
    /// of their own aligned to huge pages (NUMA01_THREADLOCAL, NUMA02):
    /// the threads share no written memory at all.
    Private,
    /// This percentage of the memory and of every thread's accesses on
    /// one shared array, the rest on the thread's own.
    Mix(u8),
}

impl std::fmt::Display for Sharing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sharing::Shared => f.write_str("shared"),
            Sharing::Private => f.write_str("private"),
            Sharing::Mix(p) => write!(f, "mix:{p}"),
        }
    }
}

impl std::str::FromStr for Sharing {
    type Err = String;
    fn from_str(s: &str) -> Result<Sharing, String> {
        match s {
            "shared" => Ok(Sharing::Shared),
            "private" => Ok(Sharing::Private),
            _ => match s.strip_prefix("mix:").map(|p| p.parse::<u8>()) {
                Some(Ok(p)) if (1..=99).contains(&p) => Ok(Sharing::Mix(p)),
                _ => Err(format!(
                    "{s:?}: expected shared, private or mix:P with P the shared percent, 1-99"
                )),
            },
        }
    }
}

impl From<Sharing> for String {
    fn from(s: Sharing) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for Sharing {
    type Error = String;
    fn try_from(s: String) -> Result<Sharing, String> {
        s.parse()
    }
}

impl Sharing {
    /// The shared array's bytes and each thread's own, for `bytes` in all
    /// over `threads` threads: the workload's memory is the same whatever
    /// the sharing, so times compare.
    pub fn split(self, bytes: u64, threads: u32) -> (u64, u64) {
        let n = threads.max(1) as u64;
        match self {
            Sharing::Shared => (bytes, 0),
            Sharing::Private => (0, bytes / n),
            Sharing::Mix(p) => {
                let shared = bytes * p as u64 / 100;
                (shared, (bytes - shared) / n)
            }
        }
    }
}

/// The probe as several threads (`--threads`); absent, the classic probe:
/// one thread, one array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threads {
    /// Worker threads, at least 2.
    pub count: u32,
    pub sharing: Sharing,
    /// Milliseconds between the timeline's samples of every thread's NUMA
    /// state and every array's pages; 0: no timeline.
    #[serde(default = "Threads::default_timeline_ms")]
    pub timeline_ms: u32,
    /// The workers are processes, forked after the shared array is mapped
    /// as shared memory (a database's backends on its buffer pool), not
    /// threads of one process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub processes: bool,
    /// With `processes`: the shared memory bound over the nodes it may use
    /// with MPOL_F_NUMA_BALANCING, without which NUMA balancing never
    /// scans shared memory (see [`crate::sys::numa::mbind_numa_balancing`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shm_numa_balancing: bool,
}

impl Threads {
    /// `--timeline-ms`'s default: five samples a second.
    pub const DEFAULT_TIMELINE_MS: u32 = 200;
    fn default_timeline_ms() -> u32 {
        Threads::DEFAULT_TIMELINE_MS
    }
}

/// Most threads a probe may start.
pub const MAX_THREADS: u32 = 4096;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSpec {
    pub pattern: Pattern,
    /// The buffer's bytes (`size_bytes` in records, a number).
    #[serde(rename = "size_bytes", with = "crate::units::as_bytes")]
    pub size: crate::units::Size,
    pub counts: u32,
    /// Passes go on after `counts` until this long after the first began
    /// (`probe --min-time`); absent: exactly `counts` passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_time_ns: Option<u64>,
    pub cpu: CpuPlacement,
    pub mem: MemPlacement,
    /// The scheduler's preferred node (PR_PREFERRED_NID); -1 clears.
    pub pnid: Option<i32>,
    /// Explicit `NUMBER[:LAYOUT]` for the PNID prctl.
    pub pnid_prctl: Option<String>,
    pub thp: ThpMode,
    /// Accesses between self-observation checks; 0 turns it off.
    pub observe_every: u32,
    /// What `mem`'s policy covers (absent in records from before it).
    #[serde(default, skip_serializing_if = "PolicyScope::is_buffer")]
    pub bind_scope: PolicyScope,
    /// Several threads and what they share; absent: the classic probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Threads>,
    /// When the buffer is first touched (absent: `placed`).
    #[serde(default, skip_serializing_if = "FirstTouch::is_placed")]
    pub first_touch: FirstTouch,
}

impl ProbeSpec {
    /// The command line of a child `numalab probe` that runs this spec and
    /// prints its record as JSON (after the executable), for `run`'s
    /// samples and `jobs`' jobs: the spec whole, as JSON (`--spec-json`,
    /// hidden), so the child reads exactly the parent's spec and parses no
    /// options a second time.
    pub fn child_argv(&self) -> Vec<String> {
        vec![
            "probe".into(),
            "--json".into(),
            "--spec-json".into(),
            serde_json::to_string(self).expect("a ProbeSpec is plain data"),
        ]
    }

    /// The spec as `numalab probe` options, as a user would type them to
    /// run it alone: shown in `jobs`' table header and record.
    pub fn options(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--pattern".into(),
            self.pattern.name().into(),
            "--size".into(),
            self.size.to_string(),
            "--counts".into(),
            self.counts.to_string(),
            "--thp".into(),
            self.thp.name().into(),
            "--observe-every".into(),
            self.observe_every.to_string(),
        ];
        match &self.mem {
            MemPlacement::Float => {}
            MemPlacement::Bind(n) => a.extend(["--membind".into(), n.to_string()]),
            MemPlacement::Preferred(n) => a.extend(["--preferred".into(), n.to_string()]),
            MemPlacement::Interleave(s) => a.extend(["--interleave".into(), s.to_string()]),
        }
        if let CpuPlacement::Node(n) = self.cpu {
            a.extend(["--cpunodebind".into(), n.to_string()]);
        }
        if let Some(ns) = self.min_time_ns {
            a.extend(["--min-time".into(), format!("{}", ns as f64 / 1e9)]);
        }
        if !self.bind_scope.is_buffer() {
            a.extend(["--bind-scope".into(), self.bind_scope.name().into()]);
        }
        if !self.first_touch.is_placed() {
            a.extend(["--first-touch".into(), self.first_touch.name().into()]);
        }
        if let Some(t) = &self.threads {
            a.extend([
                "--threads".into(),
                t.count.to_string(),
                "--sharing".into(),
                t.sharing.to_string(),
                "--timeline-ms".into(),
                t.timeline_ms.to_string(),
            ]);
            if t.processes {
                a.push("--processes".into());
            }
            if t.shm_numa_balancing {
                a.push("--shm-numa-balancing".into());
            }
        }
        if let Some(p) = self.pnid {
            a.extend(["--pnid".into(), p.to_string()]);
            if let Some(x) = &self.pnid_prctl {
                a.extend(["--pnid-prctl".into(), x.clone()]);
            }
        }
        a
    }

    /// The memory node the task "should" be near: the bound or preferred
    /// node; `None` for float and interleave.
    pub fn requested_mem_node(&self) -> Option<u32> {
        match &self.mem {
            MemPlacement::Bind(n) | MemPlacement::Preferred(n) => Some(*n),
            _ => None,
        }
    }
}

/// Why `--shm-numa-balancing` refuses a preferred or interleaved memory
/// placement (the probe's, a `run` row's, a `jobs --home` job's).
pub const SHM_POLICY_CONFLICT: &str =
    "--shm-numa-balancing binds the shared memory (MPOL_BIND, the one policy \
     MPOL_F_NUMA_BALANCING goes with on every kernel): it cannot go with a preferred or \
     interleaved memory placement (--preferred, --interleave, a run's Mem I, jobs --home); \
     with --membind N (a run's Mem A or B) it binds to N";

/// Checks a threaded probe of `bytes` in all: 2 to [`MAX_THREADS`]
/// threads, and at least a page in the shared array and in each thread's.
pub fn check_threads(t: &Threads, bytes: u64) -> anyhow::Result<()> {
    if !(2..=MAX_THREADS).contains(&t.count) {
        return Err(usage(format!(
            "--threads {}: between 2 and {MAX_THREADS} (1 is the probe without --threads)",
            t.count
        )));
    }
    if t.shm_numa_balancing && !t.processes {
        return Err(usage(
            "--shm-numa-balancing needs --processes: threads share private memory, which NUMA \
             balancing scans anyway",
        ));
    }
    if t.shm_numa_balancing && t.sharing == Sharing::Private {
        return Err(usage(
            "--shm-numa-balancing with --sharing private: there is no shared memory to bind",
        ));
    }
    let (shared, own) = t.sharing.split(bytes, t.count);
    if (shared > 0 && shared < 4096) || (own > 0 && own < 4096) || (shared == 0 && own == 0) {
        return Err(usage(format!(
            "--size {} over --threads {} with --sharing {} leaves {} shared and {} per \
             thread: each part must be at least one page (4 KiB)",
            fmt_size(bytes),
            t.count,
            t.sharing,
            fmt_size(shared),
            fmt_size(own)
        )));
    }
    Ok(())
}

/// A spec checked against the machine: the CPU set to bind to (if any) and
/// the PNID interface (if asked for).
#[derive(Debug, Clone)]
pub struct Validated {
    pub spec: ProbeSpec,
    pub bind_cpus: Option<IdSet>,
    pub pnid: Option<pnid::Interface>,
}

/// Checks `spec` before any work: every error here exits 2 and nothing has
/// been changed yet.
pub fn validate(spec: &ProbeSpec, topo: &Topology) -> anyhow::Result<Validated> {
    if spec.counts == 0 {
        return Err(usage("--counts must be at least 1"));
    }
    if spec.size.bytes() < 4096 {
        return Err(usage(format!(
            "--size {} is too small: at least one page (4 KiB)",
            spec.size.bytes()
        )));
    }
    let node = |id: u32, what: &str| -> anyhow::Result<&crate::topology::Node> {
        topo.node(id).ok_or_else(|| {
            usage(format!(
                "{what} {id}: node {id} does not exist here (nodes {})",
                topo.node_ids()
            ))
        })
    };
    let mem_node = |id: u32, what: &str| -> anyhow::Result<()> {
        let n = node(id, what)?;
        if n.mem_total_bytes == Some(0) {
            return Err(usage(format!("{what} {id}: node {id} has no memory")));
        }
        if !topo.allowed.mems.contains(id) {
            return Err(usage(format!(
                "{what} {id}: this process's cpuset allows memory only on nodes {}",
                topo.allowed.mems
            )));
        }
        Ok(())
    };
    let bind_cpus = match &spec.cpu {
        CpuPlacement::Float => None,
        CpuPlacement::Node(id) => {
            let n = node(*id, "--cpunodebind")?;
            if n.cpus.is_empty() {
                return Err(usage(format!("--cpunodebind {id}: node {id} has no CPUs")));
            }
            let usable = n.cpus.intersection(&topo.allowed.cpus);
            if usable.is_empty() {
                return Err(usage(format!(
                    "--cpunodebind {id}: node {id}'s CPUs {} are outside this process's \
                     allowed CPUs {}",
                    n.cpus, topo.allowed.cpus
                )));
            }
            Some(usable)
        }
    };
    match &spec.mem {
        MemPlacement::Float => {}
        MemPlacement::Bind(id) => {
            mem_node(*id, "--membind")?;
            if let Some(free) = node(*id, "--membind")?.mem_free_bytes {
                if spec.size.bytes() > free {
                    return Err(usage(format!(
                        "--membind {id}: the buffer ({}) is larger than node {id}'s free \
                         memory ({})",
                        fmt_size(spec.size.bytes()),
                        fmt_size(free)
                    )));
                }
            }
        }
        MemPlacement::Preferred(id) => mem_node(*id, "--preferred")?,
        MemPlacement::Interleave(ids) => {
            if ids.is_empty() {
                return Err(usage("--interleave: empty node list"));
            }
            for id in ids.iter() {
                mem_node(id, "--interleave")?;
            }
        }
    }
    if let Some(t) = &spec.threads {
        if !spec.first_touch.is_placed() {
            return Err(usage(
                "--first-touch start is the classic probe's (one buffer, one task): a \
                 threaded probe's workers touch their memory after their placement",
            ));
        }
        check_threads(t, spec.size.bytes())?;
        if t.shm_numa_balancing
            && matches!(
                spec.mem,
                MemPlacement::Preferred(_) | MemPlacement::Interleave(_)
            )
        {
            return Err(usage(SHM_POLICY_CONFLICT));
        }
    }
    let pnid = match spec.pnid {
        None => None,
        Some(nid) => {
            if nid != -1 && (nid < 0 || topo.node(nid as u32).is_none()) {
                return Err(usage(format!(
                    "--pnid {nid}: node {nid} does not exist here (nodes {}, or -1 to clear)",
                    topo.node_ids()
                )));
            }
            Some(match &spec.pnid_prctl {
                Some(explicit) => pnid::parse_explicit(explicit)?,
                None => pnid::detect(std::path::Path::new("/proc"))?,
            })
        }
    };
    Ok(Validated {
        spec: spec.clone(),
        bind_cpus,
        pnid,
    })
}
