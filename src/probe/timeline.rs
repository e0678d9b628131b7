//! The threaded probe's timeline: every thread's NUMA state and every
//! array's pages per node, sampled while the threads run, and what it
//! shows: when a thread's `numa_group` formed, and when an array's pages
//! settled (NUMA balancing's pseudo-interleaving converging).
//!
//! A thread's state is the NUMA part of /proc/PID/task/TID/sched (its
//! group id, preferred node, current node, decayed faults per node,
//! private and shared); an array's pages come from a move_pages(2) query,
//! which neither touches nor moves a page. The sampler is a process of its
//! own ([`sampler_main`]), so it cannot join the workers' group nor make
//! them join each other through its own allocations.

use crate::analysis::{parse_proc_sched_numa, parse_vmstat_numa, vmstat_delta, NumaSched};
use crate::sys::numa;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Milliseconds between samples, as asked.
    pub every_ms: u32,
    /// What each entry of a point's `pages` counts: `shared`, or `thread
    /// I` for thread I's own array.
    pub arrays: Vec<String>,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Nanoseconds since the threads were let go.
    pub t_ns: u64,
    /// One per thread, in thread order; empty once the thread has ended
    /// its loop (what it does after, its exit, is not the workload), or on
    /// a kernel without NUMA balancing's fields.
    pub threads: Vec<NumaSched>,
    /// One per array, in `arrays` order: node -> resident pages.
    pub pages: Vec<BTreeMap<u32, u64>>,
    /// One per array: pages move_pages placed on no node at that moment
    /// (on kernels before 6.5 a page NUMA balancing has just protected
    /// for a hinting fault, until its next access; a page in the middle of
    /// a migration; a page not touched yet).
    #[serde(default)]
    pub unplaced: Vec<u64>,
    /// /proc/vmstat's NUMA counters since the threads were let go (every
    /// task's, not only the probe's).
    pub vmstat: BTreeMap<String, u64>,
}

/// One array to read the pages of: its name, the processes whose address
/// spaces map it (at the same addresses), and its (address, bytes) ranges.
///
/// Why several: a page of shared memory is in every sharer's page tables
/// only until it moves; NUMA balancing's migration unmaps it everywhere,
/// and a process maps it again only when it touches it. A query in one
/// address space would read every page it has not touched since as on no
/// node, so each page is read in each sharer's until one maps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayRef {
    pub name: String,
    pub pids: Vec<i32>,
    pub ranges: Vec<(usize, usize)>,
}

impl ArrayRef {
    pub fn new(name: &str, pid: i32, ranges: Vec<(usize, usize)>) -> ArrayRef {
        ArrayRef {
            name: name.into(),
            pids: vec![pid],
            ranges,
        }
    }
}

/// What the timeline process samples: the probe's workers (threads of the
/// probe, or with --processes processes of their own) and arrays, how
/// often; and what it reports as it goes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SamplerSpec {
    /// Each worker's thread id (a worker process's pid).
    pub tids: Vec<i32>,
    pub arrays: Vec<ArrayRef>,
    /// Milliseconds between samples; 0: no timeline, only the events.
    pub every_ms: u32,
    /// Print a progress line a second to stderr: the passes the whole run
    /// makes and its `--min-time`.
    pub progress: Option<(u64, Option<u64>)>,
}

/// `numalab __timeline SPEC`: the timeline of a threaded probe, sampled
/// from a process of its own, so that nothing the sampling does (reading
/// files, allocating) happens in the probe's address space while its
/// threads run: NUMA balancing groups the tasks of one process that touch
/// the same written page, and a sampling thread touches the allocator's
/// and the C library's. Reads the workers' events on stdin until every
/// worker has ended its loop (or the pipe closes), sampling every
/// `every_ms`; then prints the timeline as JSON (`null` without one) on
/// stdout, timestamps CLOCK_MONOTONIC (the probe makes them relative).
pub fn sampler_main(spec_json: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let spec: SamplerSpec = serde_json::from_str(spec_json)
        .map_err(|e| crate::error::usage(format!("__timeline: not a sampler spec: {e}")))?;
    // The probe's end is ours: a timeline nobody reads is not left running.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    let mut events = super::events::Events::new(spec.tids.len());
    let every = std::time::Duration::from_millis(spec.every_ms.max(1) as u64);
    let mut sampler = (spec.every_ms > 0).then(|| Sampler::new(&spec));
    let start = Instant::now();
    let mut next_sample = start;
    let mut next_line = start + std::time::Duration::from_secs(1);
    // The raw fd, unbuffered: bytes held in a reader's buffer are bytes
    // poll(2) cannot see.
    let stdin = std::io::stdin();
    let input = stdin.as_fd();
    let mut buf = [0u8; 4096];
    while !events.all_done() {
        let now = Instant::now();
        if let Some(s) = sampler.as_mut() {
            if now >= next_sample {
                s.sample(&events.ended);
                next_sample += every;
            }
        }
        if let Some((of, min_time)) = spec.progress {
            if now >= next_line {
                eprintln!("{}", events.progress_line(start.elapsed(), of, min_time));
                next_line += std::time::Duration::from_secs(1);
            }
        }
        let until = if sampler.is_some() {
            next_sample.min(next_line)
        } else {
            next_line
        };
        let wait = until.saturating_duration_since(Instant::now());
        let ts = rustix::time::Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: wait.subsec_nanos() as i64,
        };
        let mut fds = [rustix::event::PollFd::new(
            &input,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(e) => anyhow::bail!("poll on the probe threads' pipe: {e}"),
        }
        let k = match rustix::io::read(input, &mut buf) {
            Ok(k) => k,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => anyhow::bail!("reading the probe threads' pipe: {e}"),
        };
        if k == 0 {
            break; // every worker gone
        }
        events.feed(&buf[..k])?;
    }
    // The arrays' pages at the end (the threads' own states are in their
    // reports).
    if let Some(s) = sampler.as_mut() {
        s.sample(&events.ended);
    }
    let out = sampler.map(Sampler::finish);
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, &out)?;
    stdout.flush()?;
    Ok(())
}

/// What the sampler reads, and what it has read.
struct Sampler {
    every_ms: u32,
    tids: Vec<i32>,
    arrays: Vec<ArrayRef>,
    vmstat0: BTreeMap<String, u64>,
    points: Vec<Point>,
}

fn vmstat() -> BTreeMap<String, u64> {
    std::fs::read_to_string("/proc/vmstat")
        .map(|t| parse_vmstat_numa(&t))
        .unwrap_or_default()
}

impl Sampler {
    fn new(spec: &SamplerSpec) -> Sampler {
        Sampler {
            every_ms: spec.every_ms,
            tids: spec.tids.clone(),
            arrays: spec.arrays.clone(),
            vmstat0: vmstat(),
            points: Vec::new(),
        }
    }

    /// Takes one sample, stamped CLOCK_MONOTONIC. Reading every page's node
    /// takes a while (milliseconds per GiB; far longer under emulation), so
    /// the counters and the threads' states are read first, at `t_ns`, and
    /// the pages after. `ended[i]`: thread i has ended its loop (its state
    /// is left empty).
    fn sample(&mut self, ended: &[bool]) {
        let t_ns = crate::sys::mono_ns();
        let vmstat = vmstat_delta(&self.vmstat0, &vmstat());
        let threads = self
            .tids
            .iter()
            .enumerate()
            .map(|(i, tid)| {
                if ended.get(i).copied().unwrap_or(false) {
                    return NumaSched::default();
                }
                // /proc/TID reaches any thread, a worker thread of the
                // probe's or a worker process.
                std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/sched"))
                    .map(|t| parse_proc_sched_numa(&t))
                    .unwrap_or_default()
            })
            .collect();
        let (pages, unplaced) = self
            .arrays
            .iter()
            .map(|a| pages_in(&a.pids, &a.ranges))
            .unzip();
        self.points.push(Point {
            t_ns,
            threads,
            pages,
            unplaced,
            vmstat,
        });
    }

    fn finish(self) -> Timeline {
        Timeline {
            every_ms: self.every_ms,
            arrays: self.arrays.into_iter().map(|a| a.name).collect(),
            points: self.points,
        }
    }
}

/// Pages per node of process `pid`'s `ranges` (0: this process; a
/// move_pages query), and pages on none.
pub(super) fn pages_of(pid: i32, ranges: &[(usize, usize)]) -> (BTreeMap<u32, u64>, u64) {
    pages_in(&[pid], ranges)
}

/// Pages per node of `ranges` mapped alike by processes `pids`: each page
/// on the node the first of them that maps it reads (see [`ArrayRef`]),
/// and pages none maps.
pub(super) fn pages_in(pids: &[i32], ranges: &[(usize, usize)]) -> (BTreeMap<u32, u64>, u64) {
    let mut per_node = BTreeMap::new();
    let mut unplaced = 0;
    for &(addr, len) in ranges {
        let mut status: Vec<i32> = Vec::new();
        for &pid in pids {
            let Ok(s) = numa::page_nodes_of(pid, addr, len) else {
                continue;
            };
            if status.is_empty() {
                status = s;
            } else {
                for (have, got) in status.iter_mut().zip(s) {
                    if *have < 0 {
                        *have = got;
                    }
                }
            }
            if status.iter().all(|s| *s >= 0) {
                break;
            }
        }
        for s in status {
            if s >= 0 {
                *per_node.entry(s as u32).or_insert(0u64) += 1;
            } else {
                unplaced += 1;
            }
        }
    }
    (per_node, unplaced)
}

/// Array `array`'s pages per node at the last point where at least 90% of
/// them were on a node: a reading taken while NUMA balancing's hinting
/// protection covers the array (kernels before 6.5 read a protected page,
/// a whole huge page at once, as on no node) is not where the
/// pages are.
pub fn last_placed(t: &Timeline, array: usize) -> Option<&BTreeMap<u32, u64>> {
    t.points
        .iter()
        .rev()
        .find(|p| placed(p, array))
        .and_then(|p| p.pages.get(array))
}

/// Array `array`'s pages per node at the first point where at least 90%
/// of them were on a node (see [`last_placed`]).
pub fn first_placed(t: &Timeline, array: usize) -> Option<&BTreeMap<u32, u64>> {
    t.points
        .iter()
        .find(|p| placed(p, array))
        .and_then(|p| p.pages.get(array))
}

/// At least 90% of array `array`'s pages were on a node at point `p`: a
/// reading that says where the pages are.
pub fn placed(p: &Point, array: usize) -> bool {
    let Some(pages) = p.pages.get(array) else {
        return false;
    };
    let on: u64 = pages.values().sum();
    let off = p.unplaced.get(array).copied().unwrap_or(0);
    on > 0 && off * 10 <= on + off
}

/// Pages that changed node between two readings of one array: the pages
/// each node gained, summed (a lower bound on the pages migrated between
/// them: a page that left and came back in between is not seen).
pub fn moved(before: &BTreeMap<u32, u64>, after: &BTreeMap<u32, u64>) -> u64 {
    after
        .iter()
        .map(|(n, &p)| p.saturating_sub(before.get(n).copied().unwrap_or(0)))
        .sum()
}

/// When array `array`'s pages settled: the time of the first point after
/// which no interval moved more than `per_s` (a fraction of the array's
/// pages per second), for at least [`QUIET_INTERVALS`] intervals to the
/// end. `None` when the array was still moving then, or the timeline is
/// too short to say.
pub fn settled_ns(t: &Timeline, array: usize, per_s: f64) -> Option<u64> {
    // Readings taken under hinting protection (before 6.5) or mid-migration
    // say nothing of where the pages are.
    let pts: Vec<&Point> = t.points.iter().filter(|p| placed(p, array)).collect();
    if pts.len() <= QUIET_INTERVALS {
        return None;
    }
    let mut settled = Some(pts[0].t_ns);
    for w in pts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (pa, pb) = (a.pages.get(array)?, b.pages.get(array)?);
        let total = pb.values().sum::<u64>().max(1) as f64;
        let dt = (b.t_ns.saturating_sub(a.t_ns)).max(1) as f64 / 1e9;
        if moved(pa, pb) as f64 / total / dt > per_s {
            settled = None;
        } else if settled.is_none() {
            settled = Some(a.t_ns);
        }
    }
    let quiet = settled.map_or(0, |s| pts.iter().filter(|p| p.t_ns > s).count());
    settled.filter(|_| quiet >= QUIET_INTERVALS)
}

/// Intervals a quiet tail must span for [`settled_ns`] to call an array
/// settled: one quiet interval at the end is not a trend.
pub const QUIET_INTERVALS: usize = 3;

/// The rate [`settled_ns`] calls settled: 1% of an array's pages a second.
pub const SETTLED_PER_S: f64 = 0.01;

/// Thread `thread`'s last NUMA group id in the timeline (0: none), and the
/// time from which it held that id to the end; `None` when no point has
/// the thread's group id.
pub fn group_since(t: &Timeline, thread: usize) -> Option<(i32, u64)> {
    let ids: Vec<(u64, i32)> = t
        .points
        .iter()
        .filter_map(|p| Some((p.t_ns, p.threads.get(thread)?.numa_group_id?)))
        .collect();
    let &(_, last) = ids.last()?;
    let since = ids
        .iter()
        .rev()
        .take_while(|(_, g)| *g == last)
        .last()
        .map(|(t, _)| *t)?;
    Some((last, since))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: u64, pages: &[(u32, u64)], group: Option<i32>) -> Point {
        Point {
            t_ns: t_ms * 1_000_000,
            threads: vec![NumaSched {
                numa_group_id: group,
                ..NumaSched::default()
            }],
            pages: vec![pages.iter().copied().collect()],
            unplaced: vec![0],
            vmstat: BTreeMap::new(),
        }
    }

    fn timeline(points: Vec<Point>) -> Timeline {
        Timeline {
            every_ms: 100,
            arrays: vec!["shared".into()],
            points,
        }
    }

    #[test]
    fn moved_counts_the_pages_nodes_gained() {
        let a = [(0, 100), (1, 0)].into_iter().collect();
        let b = [(0, 60), (1, 40)].into_iter().collect();
        assert_eq!(moved(&a, &b), 40);
        assert_eq!(moved(&b, &a), 40);
        assert_eq!(moved(&a, &a), 0);
    }

    /// 1000 pages spreading from node 0 to two nodes, then still: settled
    /// when the last big move ended, not before; a late move unsettles.
    #[test]
    fn settled_is_the_start_of_the_quiet_tail() {
        let t = timeline(vec![
            point(0, &[(0, 1000)], None),
            point(100, &[(0, 800), (1, 200)], None),
            point(200, &[(0, 520), (1, 480)], None),
            point(300, &[(0, 500), (1, 500)], None),
            point(400, &[(0, 500), (1, 500)], None),
            point(500, &[(0, 500), (1, 500)], None),
            point(600, &[(0, 500), (1, 500)], None),
        ]);
        // 20 pages in 0.1 s is 20%/s: still moving until 300 ms.
        assert_eq!(settled_ns(&t, 0, SETTLED_PER_S), Some(300_000_000));
        // A looser threshold (25%/s) calls it settled from 200 ms.
        assert_eq!(settled_ns(&t, 0, 0.25), Some(200_000_000));
        // Quiet for only the last two intervals: not settled yet.
        let mut short = t.clone();
        short.points.remove(4);
        short.points.remove(4);
        short.points.push(point(700, &[(0, 500), (1, 500)], None));
        assert_eq!(settled_ns(&short, 0, SETTLED_PER_S), None);
        let mut late = t.clone();
        late.points.push(point(700, &[(0, 400), (1, 600)], None));
        assert_eq!(settled_ns(&late, 0, SETTLED_PER_S), None);
        // A reading with most pages on no node (hinting-protected, or
        // mid-migration) is skipped,
        // not counted as every page moving twice.
        let mut blip = t.clone();
        blip.points[5].pages[0] = BTreeMap::new();
        blip.points[5].unplaced[0] = 1000;
        blip.points.push(point(700, &[(0, 500), (1, 500)], None));
        assert_eq!(settled_ns(&blip, 0, SETTLED_PER_S), Some(300_000_000));
        assert_eq!(settled_ns(&timeline(vec![]), 0, SETTLED_PER_S), None);
        assert_eq!(settled_ns(&t, 1, SETTLED_PER_S), None, "no such array");
    }

    #[test]
    fn last_placed_skips_readings_mid_migration() {
        let mut t = timeline(vec![
            point(0, &[(0, 100)], None),
            point(100, &[(1, 100)], None),
            point(200, &[(1, 20)], None),
        ]);
        t.points[2].unplaced = vec![80];
        let want: BTreeMap<u32, u64> = [(1, 100)].into_iter().collect();
        assert_eq!(last_placed(&t, 0), Some(&want));
        t.points[2].unplaced = vec![2];
        assert_eq!(last_placed(&t, 0).unwrap()[&1], 20);
        assert_eq!(last_placed(&t, 1), None);
    }

    #[test]
    fn group_since_is_when_the_last_id_began() {
        let t = timeline(vec![
            point(0, &[], Some(0)),
            point(100, &[], Some(51)),
            point(200, &[], Some(47)),
            point(300, &[], Some(47)),
            point(400, &[], None),
        ]);
        assert_eq!(group_since(&t, 0), Some((47, 200_000_000)));
        assert_eq!(group_since(&t, 1), None);
        let none = timeline(vec![point(0, &[], Some(0)), point(100, &[], Some(0))]);
        assert_eq!(group_since(&none, 0), Some((0, 0)));
    }
}
