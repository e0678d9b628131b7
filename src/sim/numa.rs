//! The probe's pages and automatic NUMA balancing, after kernel/sched/fair.c
//! (task_numa_work, task_numa_fault, task_numa_placement,
//! update_task_scan_period, numa_migrate_preferred) and mm/ (do_numa_page,
//! should_numa_migrate_memory), with our PNID patch's forced node.
//!
//! The address space is the probe's other memory (stack, heap: default
//! policy, always scanned) then its buffer. task_numa_work skips VMAs whose
//! policy is not migrate-on-fault, so a buffer bound with mbind or
//! interleaved is never scanned: its accesses are invisible to NUMA
//! balancing (the RFC's observation). Each scan marks up to scan_size of
//! scanned pages; the probe touches every marked page within milliseconds
//! (a random walk over the buffer), so the faults are taken at the scan,
//! from the node the probe is on. A misplaced page migrates when the
//! previous fault on it came from the same node, or none did (the
//! two-stage filter on last_cpupid). A pass over the whole address space
//! bumps numa_scan_seq; the next fault then runs task_numa_placement:
//! faults decay by half, the preferred node is the one holding most
//! faulted memory (the forced node wins when set), and the scan period
//! adapts as update_task_scan_period does.

use crate::load::LoadPolicy;
use crate::sys::numa::PolicyScope;

/// What the sample asks of NUMA balancing.
#[derive(Debug, Clone, PartialEq)]
pub struct NumaKnobs {
    pub enabled: bool,
    pub scan_delay_ms: f64,
    pub scan_period_min_ms: f64,
    pub scan_period_max_ms: f64,
    pub scan_size_mb: f64,
}

impl NumaKnobs {
    /// Whether the load's workers prefer their own node by `t` (ns), for
    /// both engines: with NUMA balancing on, a worker (a thread of the load
    /// process, pinned, touching only its own stack) has local faults only,
    /// so its first placement (after the scan delay and one scan period)
    /// makes its node its preferred one, and it counts in
    /// nr_preferred_running. Under MPOL_LOCAL it takes no hinting faults
    /// and never prefers a node.
    pub fn workers_prefer_own_node(&self, load: LoadPolicy, t: f64) -> bool {
        self.enabled
            && load == LoadPolicy::Default
            && t >= (self.scan_delay_ms + self.scan_period_min_ms) * 1e6
    }
}

impl Default for NumaKnobs {
    fn default() -> Self {
        // The kernel's defaults (kernel/sched/fair.c sysctl_numa_balancing_*).
        NumaKnobs {
            enabled: false,
            scan_delay_ms: 1000.0,
            scan_period_min_ms: 1000.0,
            scan_period_max_ms: 60000.0,
            scan_size_mb: 256.0,
        }
    }
}

/// Where the buffer's pages may live.
#[derive(Debug, Clone, PartialEq)]
pub enum MemPolicy {
    /// Default policy: first touch, migratable, scanned.
    Float,
    /// mbind MPOL_BIND to one node (node index).
    Bind(usize),
    /// mbind MPOL_INTERLEAVE over nodes (indices).
    Interleave(Vec<usize>),
}

impl MemPolicy {
    /// The node (index) buffer page `k` lands on at first touch, the task
    /// running on node `node_now`.
    pub fn first_touch(&self, k: usize, node_now: usize) -> usize {
        match self {
            MemPolicy::Float => node_now,
            MemPolicy::Bind(n) => *n,
            MemPolicy::Interleave(ns) => ns[k % ns.len().max(1)],
        }
    }
}

const UNSET: u8 = u8::MAX;

#[derive(Debug, Clone)]
pub struct Numa {
    pub knobs: NumaKnobs,
    /// Node index of each page: the other memory first, then the buffer.
    page_node: Vec<u8>,
    last_nid: Vec<u8>,
    pub other_pages: usize,
    /// Buffer pages per node index, kept with `page_node`.
    counts: Vec<u64>,
    /// Base (4 KiB) pages per page (512 with THP).
    pub base_per_page: u64,
    buffer_scanned: bool,
    /// Whether the other pages (stack, heap) are scanned: not under a
    /// process-wide explicit policy.
    other_scanned: bool,
    pub forced: Option<usize>,
    pub preferred: Option<usize>,
    faults_mem: Vec<u64>,
    faults_buf: Vec<u64>,
    /// remote, local, failed (numa_faults_locality).
    locality: [u64; 3],
    pub has_faults: bool,
    pub total_faults: u64,
    pub pages_migrated: u64,
    pub scan_seq: u64,
    task_seq: u64,
    scan_offset: usize,
    pub scan_period_ms: f64,
    pub next_scan_ns: f64,
    /// The first time numa_migrate_preferred() may run again: the start of
    /// the jiffy after `numa_migrate_retry` (time_after(jiffies, retry)).
    pub migrate_retry_ns: f64,
    /// The kernel's jiffy, ns (1e9 / HZ).
    jiffy_ns: f64,
}

/// What one scan did, for the engine to charge and act on.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ScanOutcome {
    /// Hinting faults taken (in base pages) and pages migrated.
    pub faults: u64,
    pub migrated: u64,
    /// numa_migrate_preferred() ran and wants the task on this node.
    pub migrate_to: Option<usize>,
}

impl Numa {
    pub fn new(
        knobs: NumaKnobs,
        nodes: usize,
        buffer_pages: usize,
        other_pages: usize,
        base_per_page: u64,
        policy: &MemPolicy,
        forced: Option<usize>,
    ) -> Numa {
        let total = other_pages + buffer_pages;
        let page_node = vec![UNSET; total];
        let rss_mb = (total as u64 * base_per_page * 4096) as f64 / (1 << 20) as f64;
        let mut n = Numa {
            page_node,
            last_nid: vec![UNSET; total],
            other_pages,
            counts: vec![0; nodes],
            base_per_page,
            buffer_scanned: matches!(policy, MemPolicy::Float),
            other_scanned: true,
            forced,
            preferred: forced,
            faults_mem: vec![0; nodes],
            faults_buf: vec![0; nodes],
            locality: [0; 3],
            has_faults: false,
            total_faults: 0,
            pages_migrated: 0,
            scan_seq: 0,
            task_seq: 0,
            scan_offset: 0,
            scan_period_ms: 0.0,
            next_scan_ns: knobs.scan_delay_ms * 1e6,
            migrate_retry_ns: 0.0,
            jiffy_ns: 4e6,
            knobs,
        };
        n.scan_period_ms = n.scan_min_ms(rss_mb);
        n
    }

    /// The memory policy's scope: set process-wide (set_mempolicy, as
    /// `numactl --membind` sets it), an explicit policy covers every VMA
    /// without one of its own, so task_numa_work() scans none of the
    /// task's pages, not just the buffer.
    pub fn with_scope(mut self, scope: PolicyScope) -> Numa {
        if scope == PolicyScope::Process && !self.buffer_scanned {
            self.other_scanned = false;
        }
        self
    }

    /// The kernel's HZ, for numa_migrate_preferred()'s retry in jiffies
    /// (250 unless set).
    pub fn with_hz(mut self, hz: u32) -> Numa {
        self.jiffy_ns = 1e9 / f64::from(hz.max(1));
        self
    }

    fn windows(&self, rss_mb: f64) -> f64 {
        (rss_mb / self.knobs.scan_size_mb.max(1.0)).ceil().max(1.0)
    }

    /// task_scan_min(): the period floor for this task's size.
    fn scan_min_ms(&self, rss_mb: f64) -> f64 {
        let size = self.knobs.scan_size_mb.max(1.0);
        let windows = if size < 2560.0 {
            (2560.0 / size).floor()
        } else {
            1.0
        };
        let floor = 1000.0 / windows;
        floor.max(self.knobs.scan_period_min_ms / self.windows(rss_mb))
    }

    fn scan_max_ms(&self, rss_mb: f64) -> f64 {
        (self.knobs.scan_period_max_ms / self.windows(rss_mb)).max(self.scan_min_ms(rss_mb))
    }

    fn rss_mb(&self) -> f64 {
        (self.page_node.len() as u64 * self.base_per_page * 4096) as f64 / (1 << 20) as f64
    }

    /// Buffer pages by node index.
    pub fn buffer_pages_per_node(&self) -> &[u64] {
        &self.counts
    }

    /// Puts page `page` (an address-space index) on node `node`.
    pub fn place(&mut self, page: usize, node: usize) {
        let old = self.page_node[page];
        if page >= self.other_pages {
            if old != UNSET {
                self.counts[old as usize] -= 1;
            }
            self.counts[node] += 1;
        }
        self.page_node[page] = node as u8;
    }

    fn scannable(&self, page: usize) -> bool {
        if page < self.other_pages {
            self.other_scanned
        } else {
            self.buffer_scanned
        }
    }

    /// task_numa_work() at time `t` with the task on node `cpu_node`, and
    /// the faults that follow; `may_move` says whether the retry timer lets
    /// numa_migrate_preferred() run.
    pub fn scan(&mut self, t: f64, cpu_node: usize) -> ScanOutcome {
        let mut out = ScanOutcome::default();
        let total = self.page_node.len();
        let budget = ((self.knobs.scan_size_mb * (1 << 20) as f64)
            / (self.base_per_page as f64 * 4096.0))
            .ceil()
            .max(1.0) as usize;
        let mut marked = 0usize;
        let mut p = self.scan_offset;
        while marked < budget {
            if p >= total {
                // reset_ptenuma_scan(): a new pass over the address space.
                self.scan_seq += 1;
                p = 0;
                if !(0..total).any(|q| self.scannable(q)) {
                    break;
                }
                if marked > 0 {
                    break;
                }
            }
            if !self.scannable(p) {
                // Unscanned VMAs are skipped whole.
                p = if p < self.other_pages {
                    self.other_pages
                } else {
                    total
                };
                continue;
            }
            self.fault(p, cpu_node, &mut out);
            marked += 1;
            p += 1;
        }
        self.scan_offset = p;
        if out.faults > 0 && t >= self.migrate_retry_ns {
            self.placement();
            out.migrate_to = self.migrate_preferred(t, cpu_node);
        }
        self.next_scan_ns = t + self.scan_period_ms * 1e6;
        out
    }

    /// update_scan_period(), called by migrate_task_rq_fair() for every
    /// move of the task from node `src` to node `dst`: a task with fault
    /// statistics that leaves its preferred node (or moves at all before
    /// its first placement, or while it prefers none) scans again from
    /// task_scan_start() (task_scan_min() for a task in no group). The
    /// next scan keeps its time: mm->numa_next_scan was set from the old
    /// period.
    pub fn moved(&mut self, src: usize, dst: usize) {
        if !self.knobs.enabled || !self.has_faults || src == dst {
            return;
        }
        if self.task_seq > 0
            && (Some(dst) == self.preferred || self.preferred.is_some_and(|p| p != src))
        {
            return;
        }
        self.scan_period_ms = self.scan_min_ms(self.rss_mb());
    }

    /// One hinting fault on `page` from `cpu_node` (do_numa_page +
    /// task_numa_fault).
    fn fault(&mut self, page: usize, cpu_node: usize, out: &mut ScanOutcome) {
        let node = self.page_node[page];
        if node == UNSET {
            return; // never touched: no PTE to mark
        }
        let node = node as usize;
        let local = node == cpu_node;
        let last = self.last_nid[page];
        self.last_nid[page] = cpu_node as u8;
        let mut mem_node = node;
        // should_numa_migrate_memory(): every fault here is private (the
        // probe is the only task touching its pages). Early in the task's
        // life (no preferred node yet, or the task's scan sequence at most
        // 4) a private fault migrates at once; later only the second of two
        // faults in a row from the same node does (the two-stage filter).
        let early = self.preferred.is_none() || self.task_seq <= 4;
        if !local && (early || last == UNSET || last as usize == cpu_node) {
            self.place(page, cpu_node);
            mem_node = cpu_node;
            self.pages_migrated += self.base_per_page;
            out.migrated += self.base_per_page;
        }
        let pages = self.base_per_page;
        self.has_faults = true;
        self.total_faults += pages;
        self.faults_buf[mem_node] += pages;
        self.locality[local as usize] += pages;
        out.faults += pages;
    }

    /// task_numa_placement(), once per scan sequence.
    fn placement(&mut self) {
        if self.task_seq == self.scan_seq {
            return;
        }
        self.task_seq = self.scan_seq;
        let mut best: Option<(usize, u64)> = None;
        for n in 0..self.faults_mem.len() {
            self.faults_mem[n] = self.faults_mem[n] - self.faults_mem[n] / 2 + self.faults_buf[n];
            let f = self.faults_mem[n];
            if f > best.map_or(0, |b| b.1) {
                best = Some((n, f));
            }
        }
        let private: u64 = self.faults_buf.iter().sum();
        self.faults_buf.iter_mut().for_each(|f| *f = 0);
        if let Some((n, _)) = best {
            // Our PNID patch: a forced node wins over the fault statistics.
            self.preferred = Some(self.forced.unwrap_or(n));
        }
        self.update_scan_period(0, private);
    }

    /// update_task_scan_period(), as 6.12 writes it (a private task always
    /// has ps_ratio 10, so its period grows while it has local faults).
    fn update_scan_period(&mut self, shared: u64, private: u64) {
        let [remote, local, failed] = self.locality;
        self.locality = [0; 3];
        let rss = self.rss_mb();
        let (lo, hi) = (self.scan_min_ms(rss), self.scan_max_ms(rss));
        if local + shared == 0 || failed > 0 {
            self.scan_period_ms = (self.scan_period_ms * 2.0).min(hi);
            return;
        }
        let slot = (self.scan_period_ms / 10.0).ceil();
        let lr = (local * 10 / (local + remote).max(1)) as i64;
        let ps = (private * 10 / (private + shared).max(1)) as i64;
        let diff = if ps >= 7 {
            (ps - 7).max(1) as f64 * slot
        } else if lr >= 7 {
            (lr - 7).max(1) as f64 * slot
        } else {
            -((7 - lr.max(ps)) as f64) * slot
        };
        self.scan_period_ms = (self.scan_period_ms + diff).clamp(lo, hi);
    }

    /// numa_migrate_preferred(): the node to move to, if not there.
    fn migrate_preferred(&mut self, t: f64, cpu_node: usize) -> Option<usize> {
        let p = self.preferred?;
        // Stock kernels need fault statistics; the patch lets a forced
        // node act without them.
        if !self.has_faults && self.forced.is_none() {
            return None;
        }
        // interval = min(HZ, msecs_to_jiffies(numa_scan_period) / 16)
        // jiffies; retry = jiffies + interval, and time_after() lets the
        // next call come from the jiffy after it.
        let hz = 1e9 / self.jiffy_ns;
        let period_j = (self.scan_period_ms.round() * hz / 1000.0).ceil();
        let interval_j = (period_j / 16.0).floor().min(hz);
        let now_j = (t / self.jiffy_ns).floor();
        self.migrate_retry_ns = (now_j + interval_j + 1.0) * self.jiffy_ns;
        (cpu_node != p).then_some(p)
    }

    /// Fault weight of a node (task_weight without the distance scaling).
    pub fn faults_on(&self, node: usize) -> u64 {
        self.faults_mem.get(node).copied().unwrap_or(0)
            + self.faults_buf.get(node).copied().unwrap_or(0)
    }

    /// task_weight() without the distance scaling: the share of the
    /// task's faults on `node`, in thousandths (0 without faults).
    pub fn weight(&self, node: usize) -> i64 {
        let total: u64 = (0..self.faults_mem.len()).map(|n| self.faults_on(n)).sum();
        if total == 0 {
            return 0;
        }
        (1000 * self.faults_on(node) / total) as i64
    }

    /// Faults per node index, decayed as the kernel keeps them.
    pub fn faults(&self) -> &[u64] {
        &self.faults_mem
    }

    /// Whether the load balancer's migrate_degrades_locality() has an
    /// opinion (NB on and fault statistics, or the patch's forced node).
    pub fn has_opinion(&self) -> bool {
        self.knobs.enabled && (self.has_faults || self.forced.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> NumaKnobs {
        NumaKnobs {
            enabled: true,
            ..NumaKnobs::default()
        }
    }

    #[test]
    fn bound_buffer_is_never_scanned_and_other_memory_is() {
        let mut n = Numa::new(knobs(), 2, 1000, 8, 1, &MemPolicy::Bind(0), None);
        (0..1008).for_each(|p| n.place(p, 0));
        let o = n.scan(1e9, 1);
        assert_eq!(o.faults, 8, "only the other memory faults");
        assert_eq!(n.buffer_pages_per_node(), &[1000, 0]);
        // First fault of a page with no history migrates it (last_cpupid unset).
        assert_eq!(o.migrated, 8);
    }

    #[test]
    fn early_in_the_tasks_life_a_private_fault_migrates_at_once() {
        // Regression: model 4 applied the two-stage filter from the first
        // scan; should_numa_migrate_memory() skips it while the task has no
        // preferred node or its scan sequence is at most 4.
        let mut n = Numa::new(knobs(), 2, 100, 0, 1, &MemPolicy::Float, None);
        (0..100).for_each(|p| n.place(p, 0));
        n.last_nid.iter_mut().for_each(|p| *p = 0);
        let o = n.scan(1e9, 1);
        assert_eq!(o.migrated, 100, "last fault from node 0, migrated anyway");
        assert_eq!(n.buffer_pages_per_node(), &[0, 100]);
        assert_eq!(n.preferred, Some(1));
    }

    #[test]
    fn later_floating_pages_follow_the_task_after_two_faults() {
        let mut n = Numa::new(knobs(), 2, 100, 0, 1, &MemPolicy::Float, None);
        (0..100).for_each(|p| n.place(p, 0));
        // Six passes from node 0: a preferred node and scan sequence 6.
        let mut t = 1e9;
        for _ in 0..6 {
            assert_eq!(n.scan(t, 0).migrated, 0);
            t += 1e9;
        }
        assert_eq!((n.preferred, n.task_seq), (Some(0), 6));
        let o = n.scan(t, 1);
        assert_eq!(o.migrated, 0, "first fault from node 1 only records it");
        let o = n.scan(t + 1e9, 1);
        assert_eq!(o.migrated, 100);
        assert_eq!(n.buffer_pages_per_node(), &[0, 100]);
    }

    #[test]
    fn forced_node_wins_and_moves_without_faults() {
        let mut n = Numa::new(knobs(), 2, 10, 2, 1, &MemPolicy::Bind(0), Some(1));
        assert_eq!(n.preferred, Some(1));
        (0..12).for_each(|p| n.place(p, 0));
        let o = n.scan(1e9, 0);
        assert_eq!(
            n.preferred,
            Some(1),
            "faults on node 0 do not override the forced node"
        );
        assert_eq!(o.migrate_to, Some(1));
    }

    /// A private task on `nodes` nodes whose 65,536 pages are all on node
    /// 0, after four scans from node 0 two seconds apart; and its scan
    /// period before them.
    fn settled_on_node_0(nodes: usize) -> (Numa, f64) {
        let mut n = Numa::new(knobs(), nodes, 65536, 0, 1, &MemPolicy::Float, None);
        (0..65536).for_each(|p| n.place(p, 0));
        let p0 = n.scan_period_ms;
        let mut t = 1e9;
        for _ in 0..4 {
            n.scan(t, 0);
            t += 2e9;
        }
        (n, p0)
    }

    #[test]
    fn scan_period_grows_for_a_private_task_with_local_faults() {
        let (n, p0) = settled_on_node_0(2);
        assert!(n.scan_period_ms > p0, "{} > {p0}", n.scan_period_ms);
    }

    #[test]
    fn leaving_the_preferred_node_resets_the_scan_period_and_nothing_else_does() {
        // Regression: model 11 had no update_scan_period(), so a task the
        // load balancer kept taking off its preferred node went on scanning
        // at the long period its local faults had grown.
        let (mut n, p0) = settled_on_node_0(3);
        let grown = n.scan_period_ms;
        assert!(grown > p0 && n.preferred == Some(0) && n.task_seq > 0);
        n.moved(1, 2);
        n.moved(2, 0);
        n.moved(0, 0);
        assert_eq!(n.scan_period_ms, grown, "not from its preferred node");
        n.moved(0, 1);
        assert_eq!(
            n.scan_period_ms, p0,
            "off its preferred node: task_scan_start()"
        );
        let mut off = Numa::new(NumaKnobs::default(), 2, 100, 0, 1, &MemPolicy::Float, None);
        off.scan_period_ms = 5000.0;
        off.has_faults = true;
        off.moved(0, 1);
        assert_eq!(off.scan_period_ms, 5000.0, "NUMA balancing off");
    }

    #[test]
    fn numa_migrate_preferred_retries_from_the_jiffy_after_its_interval() {
        // 100 ms at HZ 250: 25 jiffies / 16 = 1; time_after() lets the next
        // call come two jiffies on.
        let mut n = Numa::new(knobs(), 2, 10, 2, 1, &MemPolicy::Bind(0), Some(1)).with_hz(250);
        n.scan_period_ms = 100.0;
        assert_eq!(n.migrate_preferred(41e6, 0), Some(1));
        assert_eq!(n.migrate_retry_ns, 48e6);
        n.scan_period_ms = 1000.0;
        n.migrate_preferred(41e6, 0);
        assert_eq!(
            n.migrate_retry_ns,
            40e6 + 16.0 * 4e6,
            "250 / 16 = 15 jiffies, then one"
        );
    }
}
