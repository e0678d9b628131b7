//! Executing a validated probe spec in this process.

use super::kernels::Kernel;
use super::observe::{Observation, Observer};
use super::record::{
    CpuTime, Host, NumaReport, ObservationReport, Placement, PnidReport, ProbeRecord, ThpReport,
    Timing, SCHEMA,
};
use super::{CpuPlacement, MemPlacement, ProbeSpec, ThpMode, Validated};
use crate::analysis::schedstat::{parse_task_schedstat, TaskSchedstat};
use crate::analysis::{
    classify, parse_proc_sched_numa, parse_vmstat_numa, residency, vmstat_delta,
};
use crate::idset::IdSet;
use crate::sys::{self, buffer::Thp, numa, numa::PolicyScope, Buffer};
use crate::topology::Topology;
use anyhow::Context;
use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Runs the probe; `progress` is called after each iteration with its index.
pub fn run(
    v: &Validated,
    topo: &Topology,
    mut progress: impl FnMut(u32, u64),
) -> anyhow::Result<ProbeRecord> {
    let spec = &v.spec;
    // `--first-touch start`: the buffer is touched where the probe runs
    // now, and bound after (the RFC's order); otherwise bound first.
    let touch_first = !spec.first_touch.is_placed();
    let Placed {
        start_unix_ns,
        numa_start,
        mut allowed_cpus,
        policy,
    } = place(v, !touch_first)?;
    let pnid = match (&v.pnid, spec.pnid) {
        (Some(iface), Some(nid)) => {
            iface.set(0, nid).with_context(|| {
                format!(
                    "setting the preferred node with prctl({}, SET, ...) ({})",
                    iface.option, iface.evidence
                )
            })?;
            Some(PnidReport {
                requested: nid,
                interface: iface.clone(),
                read_back: iface.get(0).ok(),
            })
        }
        _ => None,
    };

    let mut kernel = Kernel::map(spec.pattern, spec.size.bytes() as usize)
        .with_context(|| format!("mapping a {} byte buffer", spec.size.bytes()))?;
    prepare(spec, policy.as_ref(), &kernel.buffers())?;

    let kit = LoopKit::new(spec);
    let warm = Instant::now();
    kernel.warm_up();
    let warm_up_ns = warm.elapsed().as_nanos() as u64;
    if touch_first {
        allowed_cpus = bind_cpus(v)?;
    }
    let (pages_per_node, pages_unplaced) = read_back(&kernel.buffers())?;
    let thp = thp_report(spec.thp);

    let per_pass = kernel.accesses_per_pass();
    let LoopOut {
        iterations_ns,
        total_ns,
        loop_start_ns,
        loop_end_ns,
        checksum,
        cpu_time,
        observation,
    } = timed_loop(spec, per_pass, kit, |n| kernel.run(n), &mut progress);

    // Placement against the request.
    let mem_node = majority(&pages_per_node);
    let seen_cpus = observation.seen_cpus();
    let mismatches = mismatches(spec, topo, &pages_per_node, pages_unplaced, &seen_cpus);

    let ref_node = spec.requested_mem_node().or(mem_node);
    let in_loop = observation.changes_between(loop_start_ns, loop_end_ns + 1);
    let migrations = classify(topo, ref_node, &in_loop);
    let migrations_whole = classify(topo, ref_node, &observation.changes);
    let residency = residency(
        topo,
        ref_node,
        &observation.segments_between(loop_start_ns, loop_end_ns),
    );

    let accesses = per_pass as u64 * iterations_ns.len() as u64;
    let numa = numa_start.finish();
    Ok(ProbeRecord {
        schema: SCHEMA.to_string(),
        numalab_version: env!("CARGO_PKG_VERSION").to_string(),
        spec: spec.clone(),
        host: host(topo),
        pid: sys::pid(),
        start_unix_ns,
        timing: Timing {
            accesses_per_iteration: per_pass as u64,
            iterations_ns,
            total_ns,
            ns_per_access: total_ns as f64 / accesses.max(1) as f64,
            warm_up_ns,
            checksum,
        },
        thp,
        pnid,
        placement: Placement {
            page_size: numa::page_size() as u64,
            matches_request: mismatches.is_empty(),
            pages_per_node,
            pages_unplaced,
            mem_node,
            allowed_cpus,
            seen_cpus,
            mismatches,
        },
        migrations,
        migrations_whole,
        residency,
        observation: ObservationReport::new(spec, &observation, loop_start_ns, loop_end_ns),
        numa,
        cpu_time,
        threads: Vec::new(),
        timeline: None,
    })
}

/// Where the pages and CPUs were against what `spec` asked: one line per
/// mismatch, for the loud warning.
pub(super) fn mismatches(
    spec: &ProbeSpec,
    topo: &Topology,
    pages_per_node: &BTreeMap<u32, u64>,
    pages_unplaced: u64,
    seen_cpus: &IdSet,
) -> Vec<String> {
    let total_pages: u64 = pages_per_node.values().sum();
    let mut mismatches = Vec::new();
    let on = |n: u32| pages_per_node.get(&n).copied().unwrap_or(0);
    match &spec.mem {
        MemPlacement::Float => {}
        MemPlacement::Bind(n) | MemPlacement::Preferred(n) => {
            if on(*n) != total_pages || pages_unplaced > 0 {
                mismatches.push(format!(
                    "memory: {} of {} pages on node {n} ({} unplaced), requested all",
                    on(*n),
                    total_pages + pages_unplaced,
                    pages_unplaced
                ));
            }
        }
        MemPlacement::Interleave(ns) => {
            let fair = total_pages / ns.len().max(1) as u64;
            let outside: u64 = pages_per_node
                .iter()
                .filter(|(n, _)| !ns.contains(**n))
                .map(|(_, p)| p)
                .sum();
            let thin: Vec<u32> = ns.iter().filter(|&n| on(n) * 2 < fair).collect();
            if outside > 0 || !thin.is_empty() {
                mismatches.push(format!(
                    "memory: interleave over {ns} left {outside} pages outside it and \
                 nodes {:?} under half their share",
                    thin
                ));
            }
        }
    }
    if let CpuPlacement::Node(n) = &spec.cpu {
        let off: IdSet = seen_cpus
            .iter()
            .filter(|&c| topo.node_of_cpu(c) != Some(*n))
            .collect();
        if !off.is_empty() {
            mismatches.push(format!("cpu: ran on CPUs {off} outside node {n}"));
        }
    }
    mismatches
}

/// The node holding more than half of `pages`, if one does.
pub(super) fn majority(pages: &BTreeMap<u32, u64>) -> Option<u32> {
    let total: u64 = pages.values().sum();
    pages.iter().find(|(_, &p)| p * 2 > total).map(|(&n, _)| n)
}

/// What placing the probe's task gave: its start, the NUMA counters then,
/// the CPUs it may use, and the memory policy its buffers get.
pub(super) struct Placed {
    pub start_unix_ns: u128,
    pub numa_start: NumaStart,
    pub allowed_cpus: IdSet,
    pub policy: Option<numa::Policy>,
}

/// Places the calling thread as `v` asks (threads it starts inherit its
/// affinity and process memory policy): binds its CPUs (unless not
/// `bind_now`: then the caller does it with [`bind_cpus`] after the first
/// touch), and for the `process` scope sets the memory policy of the
/// whole probe.
pub(super) fn place(v: &Validated, bind_now: bool) -> anyhow::Result<Placed> {
    let spec = &v.spec;
    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Before any placement, so the delta covers binding, warm-up and loop.
    let numa_start = NumaStart::read();
    let allowed_cpus = if bind_now {
        bind_cpus(v)?
    } else {
        sys::get_affinity(0).context("reading CPU affinity")?
    };
    let policy = match &spec.mem {
        MemPlacement::Float => None,
        MemPlacement::Bind(n) => Some(numa::Policy::Bind([*n].into_iter().collect())),
        MemPlacement::Preferred(n) => Some(numa::Policy::Preferred(*n)),
        MemPlacement::Interleave(ns) => Some(numa::Policy::Interleave(ns.clone())),
    };
    // The whole process: every allocation from here on, and for NUMA
    // balancing every VMA without a policy of its own (as numactl sets it
    // before exec; what this process touched before now stays where it is).
    if let (Some(p), PolicyScope::Process) = (&policy, spec.bind_scope) {
        numa::set_mempolicy(p).with_context(|| format!("set_mempolicy {p:?}"))?;
    }
    Ok(Placed {
        start_unix_ns,
        numa_start,
        allowed_cpus,
        policy,
    })
}

/// Binds the calling thread to `v`'s CPUs, if it names any; the CPUs it
/// may use after.
pub(super) fn bind_cpus(v: &Validated) -> anyhow::Result<IdSet> {
    if let Some(cpus) = &v.bind_cpus {
        sys::set_affinity(0, cpus).with_context(|| format!("binding to CPUs {cpus}"))?;
    }
    sys::get_affinity(0).context("reading CPU affinity")
}

/// THP advice and, for the `buffer` scope, the memory policy, on buffers
/// mapped and not yet touched.
pub(super) fn prepare(
    spec: &ProbeSpec,
    policy: Option<&numa::Policy>,
    buffers: &[&Buffer],
) -> anyhow::Result<()> {
    for b in buffers {
        match spec.thp {
            ThpMode::System => {}
            ThpMode::On => b.advise_thp(Thp::On).context("madvise(MADV_HUGEPAGE)")?,
            ThpMode::Off => b.advise_thp(Thp::Off).context("madvise(MADV_NOHUGEPAGE)")?,
        }
        if let (Some(p), PolicyScope::Buffer) = (policy, spec.bind_scope) {
            numa::mbind(b.addr(), b.bytes(), p).with_context(|| format!("mbind {p:?}"))?;
        }
    }
    Ok(())
}

/// This machine as records name it.
pub(super) fn host(topo: &Topology) -> Host {
    Host {
        kernel: topo.kernel.clone(),
        cpu_model: topo.cpu_model.clone(),
        num_cpus: topo.online_cpus().len(),
        topology_digest: topo.digest(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string()),
    }
}

/// What a timed loop needs, made before it: the observer, the thread's
/// schedstat file and room for every pass's time. Between a threaded
/// probe's go and its threads' last reading of their own state nothing may
/// call the allocator: malloc and free read the allocator's globals (the C
/// library's `tcache_key`, `global_max_fast`, `perturb_byte`...), one page
/// every thread touches, and NUMA balancing groups tasks on any page they
/// both touch (docs/numa-groups.md has the trace that found this).
pub(super) struct LoopKit {
    obs: Observer,
    schedstat: sys::ProcFile,
    iterations_ns: Vec<u64>,
}

impl LoopKit {
    /// For `spec`, on the calling thread (its /proc/thread-self files).
    pub(super) fn new(spec: &ProbeSpec) -> LoopKit {
        // Room for every pass: under --min-time the count is not known,
        // room for 65536 passes (512 KiB), past which it grows.
        let room = match spec.min_time_ns {
            None => spec.counts as usize,
            Some(_) => (spec.counts as usize).max(1 << 16),
        };
        LoopKit {
            obs: Observer::new(spec.observe_every > 0),
            schedstat: sys::ProcFile::open("/proc/thread-self/schedstat", 256),
            iterations_ns: Vec::with_capacity(room),
        }
    }
}

/// One thread's timed loop and what it saw of itself (serialisable: a
/// worker process sends its own to the probe).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct LoopOut {
    pub iterations_ns: Vec<u64>,
    pub total_ns: u64,
    /// Nanoseconds from the observer's start to the loop's start and end.
    pub loop_start_ns: u64,
    pub loop_end_ns: u64,
    pub checksum: u64,
    pub cpu_time: Option<CpuTime>,
    pub observation: Observation,
}

/// Runs `spec`'s timed passes of `per_pass` accesses on this thread,
/// `work(n)` doing n accesses, checking the CPU between chunks of
/// `observe_every`; `progress` hears of every pass. No allocation from the
/// start to the observer's last reading (see [`LoopKit`]).
pub(super) fn timed_loop(
    spec: &ProbeSpec,
    per_pass: usize,
    kit: LoopKit,
    mut work: impl FnMut(usize) -> u64,
    mut progress: impl FnMut(u32, u64),
) -> LoopOut {
    let LoopKit {
        mut obs,
        mut schedstat,
        mut iterations_ns,
    } = kit;
    let chunk = if spec.observe_every == 0 {
        per_pass
    } else {
        spec.observe_every as usize
    };
    let mut checksum = 0u64;
    obs.check();
    let sched_start = schedstat.read().and_then(parse_task_schedstat);
    let loop_start_ns = obs.now_ns();
    let loop_start = Instant::now();
    let min_time = std::time::Duration::from_nanos(spec.min_time_ns.unwrap_or(0));
    let mut i = 0;
    while i < spec.counts || loop_start.elapsed() < min_time {
        let t0 = Instant::now();
        let mut left = per_pass;
        while left > 0 {
            let n = left.min(chunk);
            checksum = checksum.wrapping_add(work(n));
            left -= n;
            obs.check();
        }
        let ns = t0.elapsed().as_nanos() as u64;
        iterations_ns.push(ns);
        progress(i, ns);
        i += 1;
    }
    let total_ns = loop_start.elapsed().as_nanos() as u64;
    let sched_end = schedstat.read().and_then(parse_task_schedstat);
    let observation = obs.finish();
    LoopOut {
        iterations_ns,
        total_ns,
        loop_start_ns,
        loop_end_ns: loop_start_ns + total_ns,
        checksum: std::hint::black_box(checksum),
        cpu_time: match (sched_start, sched_end) {
            (Some(a), Some(b)) => cpu_time(a, b),
            _ => None,
        },
        observation,
    }
}

/// The loop's share of the two readings. A kernel that keeps no
/// sched_info (the counters stand still although the loop ran) says
/// nothing: `None`, rather than a probe that never ran.
fn cpu_time(a: TaskSchedstat, b: TaskSchedstat) -> Option<CpuTime> {
    (b.run_ns > a.run_ns).then(|| CpuTime {
        source: "schedstat".into(),
        run_ns: b.run_ns - a.run_ns,
        wait_ns: b.wait_ns.saturating_sub(a.wait_ns),
        timeslices: Some(b.timeslices.saturating_sub(a.timeslices)),
    })
}

/// Pages per node of `buffers` (move_pages query), and pages on none.
pub(super) fn read_back(buffers: &[&Buffer]) -> anyhow::Result<(BTreeMap<u32, u64>, u64)> {
    let mut per_node = BTreeMap::new();
    let mut unplaced = 0;
    for b in buffers {
        let status = numa::page_nodes(b.addr(), b.bytes()).context("move_pages query")?;
        for s in status {
            if s >= 0 {
                *per_node.entry(s as u32).or_insert(0u64) += 1;
            } else {
                unplaced += 1;
            }
        }
    }
    Ok((per_node, unplaced))
}

pub(super) fn thp_report(mode: ThpMode) -> ThpReport {
    let anon_huge_kb = std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("AnonHugePages:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        });
    ThpReport {
        advice: mode.name().to_string(),
        system_enabled: std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .ok()
            .map(|s| s.trim().to_string()),
        anon_huge_kb,
    }
}

/// A procfs file's text, fail-soft: `None` when it does not exist (no
/// procfs, or a kernel without the feature); other failures are noted.
pub(super) fn read_proc(path: &str, notes: &mut Vec<String>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            notes.push(format!("reading {path}: {e}"));
            None
        }
    }
}

/// /proc/vmstat's NUMA counters at the start of the run.
pub(super) struct NumaStart {
    vmstat: Option<BTreeMap<String, u64>>,
    notes: Vec<String>,
}

impl NumaStart {
    pub(super) fn read() -> NumaStart {
        let mut notes = Vec::new();
        let vmstat = read_proc("/proc/vmstat", &mut notes).map(|t| parse_vmstat_numa(&t));
        NumaStart { vmstat, notes }
    }

    /// Reads /proc/vmstat again and this thread's sched file; `None` when
    /// neither gave any NUMA statistic.
    pub(super) fn finish(self) -> Option<NumaReport> {
        let mut notes = self.notes;
        let after = read_proc("/proc/vmstat", &mut notes).map(|t| parse_vmstat_numa(&t));
        let vmstat_delta = match (&self.vmstat, &after) {
            (Some(b), Some(a)) => vmstat_delta(b, a),
            _ => BTreeMap::new(),
        };
        let sched = read_proc("/proc/thread-self/sched", &mut notes)
            .or_else(|| read_proc("/proc/self/sched", &mut notes))
            .map(|t| parse_proc_sched_numa(&t))
            .unwrap_or_default();
        if sched.is_empty() && vmstat_delta.is_empty() {
            return None;
        }
        Some(NumaReport {
            sched,
            vmstat_delta,
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's schedstat, as the timed loop reads it.
    fn read_schedstat() -> Option<TaskSchedstat> {
        sys::ProcFile::open("/proc/thread-self/schedstat", 256)
            .read()
            .and_then(parse_task_schedstat)
    }

    #[test]
    fn two_readings_give_the_loops_share() {
        let a = parse_task_schedstat("1000 200 3\n").unwrap();
        let b = parse_task_schedstat("5000 1200 10\n").unwrap();
        let c = cpu_time(a, b).unwrap();
        assert_eq!((c.run_ns, c.wait_ns, c.timeslices), (4000, 1000, Some(7)));
        assert_eq!(c.wait_pct(), Some(20.0));
        // Counters that stood still: the kernel keeps none.
        assert_eq!(cpu_time(a, a), None);
    }

    /// The counters of the running thread grow as it spins, and never by
    /// more than the time that passed (the kernel folds a running task's
    /// time in at ticks and switches, so each reading may lag by a tick).
    #[test]
    fn this_threads_schedstat_counts_time_it_ran() {
        let Some(a) = read_schedstat() else {
            eprintln!("SKIP: no /proc/thread-self/schedstat (kernel without CONFIG_SCHED_INFO)");
            return;
        };
        let t = Instant::now();
        let mut x = 0u64;
        let c = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let b = read_schedstat().expect("the file was there a moment ago");
            if let Some(c) = cpu_time(a, b).filter(|c| c.run_ns >= 20_000_000) {
                break c;
            }
            assert!(
                t.elapsed().as_secs() < 10,
                "10 s of spinning and the kernel counted {b:?} since {a:?}"
            );
        };
        let slack = 50_000_000; // a few ticks at HZ=100
        assert!(
            c.run_ns + c.wait_ns <= t.elapsed().as_nanos() as u64 + slack,
            "{c:?} in {:?}",
            t.elapsed()
        );
    }
}
