//! The probe as several threads (`probe --threads N --sharing ...`): the
//! workloads NUMA balancing groups, swaps and pseudo-interleaves.
//!
//! The calling thread maps every array (under the memory policy and THP
//! advice), first-touches the shared one (as a program that sets up its
//! data, then starts its workers: autonumabench's NUMA01), and starts N
//! workers. Each worker first-touches its own array, says it is ready,
//! waits to be let go, runs the classic probe's timed loop (with its own
//! self-observation), reads its own NUMA state and ends. Meanwhile a
//! process of its own samples the [`timeline`](super::timeline), and the
//! calling thread only waits for it.
//!
//! Why pipes and not a `Barrier` or a channel: NUMA balancing puts two
//! threads in one `numa_group` when one takes a hinting fault on a
//! writable page the other touched last, whatever the page holds, a lock
//! word as well as data. Private threads must share no written page, or
//! the contrast `--sharing private` exists to show is gone; so the
//! rendezvous (ready, go, a byte per pass for progress, done) goes
//! through the kernel, and nothing the workers write in their loops is
//! memory another thread touches. What they share before (the thread
//! start-up) and after (the join) is outside the timed loops.
//!
//! With `--processes` the workers are processes ([`procs`]) and the
//! shared array is shared memory; everything else is the same.
//!
//! [`record`] makes the workload's record from the threads' reports.

mod procs;
mod record;
mod sampler;

use super::events;
use super::kernels::{Arrays, Kernel, SharedArrays};
use super::record::ProbeRecord;
use super::run::{self as classic, LoopKit, LoopOut};
use super::timeline::{pages_in, pages_of, ArrayRef, SamplerSpec};
use super::{pnid, ProbeSpec, Threads, Validated};
use crate::analysis::{parse_proc_sched_numa, NumaSched};
use crate::sys;
use crate::topology::Topology;
use anyhow::{anyhow, Context};
use sampler::start_sampler;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Instant;

/// The huge page size private arrays are aligned to (x86-64 PMD).
const HUGE: usize = 2 << 20;

/// One worker's start: its kernels and pipe ends.
struct Worker {
    index: usize,
    own: Option<Kernel>,
    shared: Option<Kernel>,
    /// Accesses a pass makes on the shared array and on its own.
    per_pass: (usize, usize),
    spec: ProbeSpec,
    pnid: Option<(pnid::Interface, i32)>,
    ready: Ready,
    go: File,
    events: File,
}

/// What a worker brings back (a worker process sends it as JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct Out {
    index: usize,
    tid: i32,
    /// Accesses in one of its passes.
    per_pass: u64,
    warm_up_ns: u64,
    own_pages: BTreeMap<u32, u64>,
    lp: LoopOut,
    numa: NumaSched,
    pnid_read_back: Option<i32>,
    /// Kept so the arrays stay mapped until every sample is taken.
    #[serde(skip)]
    _kernels: (Option<Kernel>, Option<Kernel>),
}

/// Tells the caller the worker is ready (its index and tid), or, dropped
/// before that (an error, a panic), that it never will be.
struct Ready {
    index: u32,
    w: Option<File>,
}

impl Ready {
    fn send(&mut self, tid: i32) {
        if let Some(mut w) = self.w.take() {
            let mut m = [0u8; 8];
            m[..4].copy_from_slice(&self.index.to_le_bytes());
            m[4..].copy_from_slice(&tid.to_le_bytes());
            // 8 bytes, under PIPE_BUF: one atomic write.
            let _ = w.write_all(&m);
        }
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        self.send(-1);
    }
}

/// Runs the threaded probe `t` of `v`; with `show_progress`, a line a
/// second on stderr.
pub fn run(
    v: &Validated,
    topo: &Topology,
    t: Threads,
    show_progress: bool,
) -> anyhow::Result<ProbeRecord> {
    let spec = &v.spec;
    let n = t.count as usize;
    // The workers inherit this thread's affinity and process policy.
    let classic::Placed {
        start_unix_ns,
        numa_start,
        allowed_cpus,
        policy,
    } = classic::place(v, true)?;
    let prepare = |a: &Arrays| classic::prepare(spec, policy.as_ref(), &a.buffers());
    let (shared_bytes, own_bytes) = t.sharing.split(spec.size.bytes(), t.count);
    let map = |bytes: u64, align: usize| {
        Arrays::map(spec.pattern, bytes as usize, align)
            .with_context(|| format!("mapping a {bytes} byte array"))
    };

    // The shared array, first touched here.
    let mut shared_warm_ns = 0;
    let shared = if shared_bytes > 0 {
        let mut a = if t.processes {
            Arrays::map_shmem(spec.pattern, shared_bytes as usize)
                .with_context(|| format!("mapping {shared_bytes} bytes of shared memory"))?
        } else {
            map(shared_bytes, 4096)?
        };
        prepare(&a)?;
        if t.shm_numa_balancing {
            balance_shmem(v, topo, &a)?;
        }
        let t0 = Instant::now();
        a.init();
        shared_warm_ns = t0.elapsed().as_nanos() as u64;
        Some(Arc::new(SharedArrays::new(a)))
    } else {
        None
    };
    // Whose address space each array is read in: this process's, or with
    // --processes a worker's own (set once it says its pid).
    let me = sys::pid();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    if let Some(s) = &shared {
        arrays.push(ArrayRef::new("shared", me, s.ranges()));
    }
    let mut own_array = vec![None; n];

    let (ready_r, ready_w) = pipe()?;
    let (go_r, mut go_w) = pipe()?;
    let (events_r, events_w) = pipe()?;
    // Room for many passes' bytes while the timeline process is busy
    // sampling (a full pipe would stall the workers in their loops); the
    // default 64 KiB where the kernel refuses more.
    let _ = rustix::pipe::fcntl_setpipe_size(&events_w, 1 << 20);
    let mut workers = Vec::with_capacity(n);
    for (i, own_ix) in own_array.iter_mut().enumerate() {
        let own = if own_bytes > 0 {
            let a = map(own_bytes, HUGE)?;
            prepare(&a)?;
            *own_ix = Some(arrays.len());
            arrays.push(ArrayRef::new(&format!("thread {i}"), me, a.ranges()));
            Some(Kernel::own(a, i, n))
        } else {
            None
        };
        let shared_k = shared.as_ref().map(|s| Kernel::share(s, i, n));
        let per_pass = (
            shared
                .as_ref()
                .map_or(0, |s| (s.accesses_per_pass() / n).max(1)),
            own.as_ref().map_or(0, |k| k.accesses_per_pass()),
        );
        workers.push(Worker {
            index: i,
            own,
            shared: shared_k,
            per_pass,
            spec: spec.clone(),
            pnid: v.pnid.clone().zip(spec.pnid),
            ready: Ready {
                index: i as u32,
                w: Some(ready_w.try_clone().context("pipe")?),
            },
            go: go_r.try_clone().context("pipe")?,
            events: events_w.try_clone().context("pipe")?,
        });
    }
    // Only the workers hold write ends now: when every one is gone, a read
    // sees the end instead of waiting for ever.
    drop((ready_w, events_w, go_r));
    let mut handles = if t.processes {
        Running::Procs(procs::Procs::new()?)
    } else {
        Running::Threads(Vec::with_capacity(n))
    };
    for w in workers {
        if let Err(e) = handles.spawn(w) {
            // The ones started are called off and joined, not left behind
            // (a thread or process limit, e.g. cgroup pids.max).
            drop(go_w);
            let started = handles.len();
            let _ = handles.join();
            return Err(e.context(format!("starting probe worker {} of {n}", started + 1)));
        }
    }
    if let Running::Procs(p) = &mut handles {
        p.all_started();
    }

    // Every worker ready (or gone), then the go.
    let mut tids = vec![0i32; n];
    let mut failed = false;
    let mut ready_r = ready_r;
    for _ in 0..n {
        let mut m = [0u8; 8];
        if ready_r.read_exact(&mut m).is_err() {
            failed = true;
            break;
        }
        let i = u32::from_le_bytes(m[..4].try_into().unwrap()) as usize;
        let tid = i32::from_le_bytes(m[4..].try_into().unwrap());
        if tid < 0 || i >= n {
            failed = true;
            break;
        }
        tids[i] = tid;
        if t.processes {
            // A worker's own array is in its address space; the shared
            // memory in every worker's too.
            if let Some(a) = own_array[i] {
                arrays[a].pids = vec![tid];
            }
            if shared.is_some() {
                arrays[0].pids.push(tid);
            }
        }
    }
    let (pages_per_node, pages_unplaced) = if failed {
        (BTreeMap::new(), 0)
    } else {
        placement_pages(&arrays)
    };
    // The timeline process, started before the go so it sees the start.
    let sampler = if failed {
        None
    } else {
        let spec = SamplerSpec {
            tids: tids.clone(),
            arrays: arrays.clone(),
            every_ms: t.timeline_ms,
            progress: show_progress.then_some((n as u64 * spec.counts as u64, spec.min_time_ns)),
        };
        match start_sampler(&spec, events_r) {
            Ok(s) => Some(s),
            Err(e) => {
                drop(go_w); // the workers end without starting
                return Err(match handles.join() {
                    Ok(_) => e,
                    Err(j) => anyhow!("{e:#}; and a worker failed: {j:#}"),
                });
            }
        }
    };
    let go_mono_ns = sys::mono_ns();
    if sampler.is_some() {
        // One byte each (from the stack: no allocation once workers run);
        // a worker that reads none (the writer dropped) ends.
        let zeros = [0u8; 512];
        let mut left = n;
        while left > 0 {
            let k = left.min(zeros.len());
            if go_w.write_all(&zeros[..k]).is_err() {
                break;
            }
            left -= k;
        }
    }
    drop(go_w);
    // Nothing runs in this process now but the workers: this thread waits
    // for the timeline process, which ends when every worker has.
    let timeline = match sampler {
        Some(s) => s.finish(go_mono_ns),
        None => Ok(None),
    };
    let outs = handles.join()?;
    let timeline = timeline?;
    if failed || outs.len() != n {
        return Err(anyhow!("a probe thread ended before it was ready"));
    }
    let mut outs = outs;
    outs.sort_by_key(|o| o.index);
    let numa = numa_start.finish().map(|mut r| {
        // The process's counters; the sched part is thread 0's.
        r.sched = outs[0].numa.clone();
        r
    });
    Ok(record::record(
        v,
        topo,
        record::Parts {
            start_unix_ns,
            go_mono_ns,
            shared_warm_ns,
            allowed_cpus,
            pages_per_node,
            pages_unplaced,
            numa,
            timeline,
        },
        outs,
    ))
}

/// The workers started: threads of this process, or processes.
enum Running {
    Threads(Vec<std::thread::JoinHandle<anyhow::Result<Option<Out>>>>),
    Procs(procs::Procs),
}

impl Running {
    fn spawn(&mut self, w: Worker) -> anyhow::Result<()> {
        match self {
            Running::Threads(handles) => {
                let h = std::thread::Builder::new()
                    .name(format!("probe-{}", w.index))
                    .spawn(move || work(w))?;
                handles.push(h);
                Ok(())
            }
            Running::Procs(p) => p.spawn(w),
        }
    }

    fn len(&self) -> usize {
        match self {
            Running::Threads(h) => h.len(),
            Running::Procs(p) => p.len(),
        }
    }

    /// Their reports, or the first error (a worker called off because
    /// another failed is no error of its own).
    fn join(self) -> anyhow::Result<Vec<Out>> {
        match self {
            Running::Threads(h) => join(h),
            Running::Procs(p) => p.join(),
        }
    }
}

/// Binds the shared memory `a` with MPOL_F_NUMA_BALANCING over the nodes
/// the probe's memory may use: its --membind node, else every node this
/// process's cpuset allows memory on.
fn balance_shmem(v: &Validated, topo: &Topology, a: &Arrays) -> anyhow::Result<()> {
    let nodes: crate::idset::IdSet = match v.spec.mem {
        super::MemPlacement::Bind(n) => [n].into_iter().collect(),
        _ => topo.allowed.mems.clone(),
    };
    for b in a.buffers() {
        sys::numa::mbind_numa_balancing(b.addr(), b.bytes(), &nodes).with_context(|| {
            format!(
                "mbind(MPOL_BIND|MPOL_F_NUMA_BALANCING, nodes {nodes}) on the shared memory \
                 (--shm-numa-balancing needs Linux 5.12 or later)"
            )
        })?;
    }
    Ok(())
}

/// A pipe, both ends close-on-exec, as files (std's pipe() is newer than
/// this crate's minimum Rust).
fn pipe() -> anyhow::Result<(File, File)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).context("pipe")?;
    Ok((File::from(r), File::from(w)))
}

/// Joins the workers: their reports, or the first error (a worker called
/// off because another failed is no error of its own).
fn join(
    handles: Vec<std::thread::JoinHandle<anyhow::Result<Option<Out>>>>,
) -> anyhow::Result<Vec<Out>> {
    let mut outs = Vec::with_capacity(handles.len());
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(Some(o))) => outs.push(o),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow!("a probe thread panicked"));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(outs),
    }
}

/// Pages per node of every array after the first touches, and pages on
/// none.
fn placement_pages(arrays: &[ArrayRef]) -> (BTreeMap<u32, u64>, u64) {
    let mut per_node = BTreeMap::new();
    let mut unplaced = 0;
    for a in arrays {
        let (p, u) = pages_in(&a.pids, &a.ranges);
        for (node, k) in p {
            *per_node.entry(node).or_insert(0) += k;
        }
        unplaced += u;
    }
    (per_node, unplaced)
}

/// One worker, on its own thread; `None` when called off before the go
/// (another worker failed).
fn work(mut w: Worker) -> anyhow::Result<Option<Out>> {
    // A pipe's reader gone (the timeline process, the caller on an error)
    // is an EPIPE here, ignored, not the death of the whole probe.
    crate::sys::block_sigpipe_in_this_thread().context("blocking SIGPIPE")?;
    // Written with the raw syscall (rustix), not the C library's wrapper:
    // nothing between the go and the last reading may read its globals.
    let events = w.events;
    let index = w.index;
    let tid = rustix::thread::gettid().as_raw_pid();
    let pnid_read_back = match &w.pnid {
        Some((iface, nid)) => {
            iface.set(0, *nid).with_context(|| {
                format!(
                    "thread {index}: setting the preferred node with prctl({}, SET, ...)",
                    iface.option
                )
            })?;
            iface.get(0).ok()
        }
        None => None,
    };
    let t0 = Instant::now();
    if let Some(k) = w.own.as_mut() {
        k.warm_up();
    }
    let warm_up_ns = t0.elapsed().as_nanos() as u64;
    let own_pages = match &w.own {
        Some(k) => pages_of(0, &k.ranges()).0,
        None => BTreeMap::new(),
    };
    // Everything the loop needs, made before the go: a call into the
    // allocator once the threads run is a page they all touch.
    let kit = LoopKit::new(&w.spec);
    w.ready.send(tid);
    let mut b = [0u8; 1];
    if w.go.read(&mut b).context("waiting for the go")? == 0 {
        return Ok(None);
    }
    let (s_pp, o_pp) = w.per_pass;
    let per_pass = s_pp + o_pp;
    // Each chunk's accesses split between the arrays in the pass's
    // proportion (carrying the remainder), so every pass makes exactly
    // `s_pp` shared and `o_pp` own accesses.
    let (mut done, mut on_shared) = (0usize, 0usize);
    let (shared, own) = (&mut w.shared, &mut w.own);
    let lp = classic::timed_loop(
        &w.spec,
        per_pass,
        kit,
        |c| {
            done += c;
            let target = (done as u128 * s_pp as u128 / per_pass as u128) as usize;
            let s = target - on_shared;
            on_shared = target;
            if done == per_pass {
                (done, on_shared) = (0, 0);
            }
            let mut sum = 0u64;
            if let (Some(k), true) = (shared.as_mut(), s > 0) {
                sum = sum.wrapping_add(k.run(s));
            }
            if let (Some(k), true) = (own.as_mut(), c > s) {
                sum = sum.wrapping_add(k.run(c - s));
            }
            sum
        },
        |_, _| {
            let _ = rustix::io::write(&events, &[events::PASS]);
        },
    );
    // Its state as the loop ended, read by the observer without a call
    // into the allocator in between.
    let numa = lp
        .observation
        .final_sched
        .as_deref()
        .map(parse_proc_sched_numa)
        .unwrap_or_default();
    let _ = rustix::io::write(&events, &events::done(index));
    Ok(Some(Out {
        index,
        tid,
        per_pass: per_pass as u64,
        warm_up_ns,
        own_pages,
        lp,
        numa,
        pnid_read_back,
        _kernels: (w.shared, w.own),
    }))
}
