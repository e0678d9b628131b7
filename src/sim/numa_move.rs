//! Where task_numa_migrate() may put a task on its preferred node, after
//! kernel/sched/fair.c 6.12: update_numa_stats() and numa_classify() for
//! the two nodes, task_numa_find_cpu()'s `maymove`, load_too_imbalanced(),
//! adjust_numa_imbalance(), and task_numa_compare() for an idle CPU and for
//! a running task to swap with. Shared by both engines.
//!
//! Why it matters: NUMA balancing does not move a task to an idle CPU of
//! its preferred node just because one is idle. With spare capacity there,
//! the move must not leave the destination with more running tasks than
//! the source keeps (beyond adjust_numa_imbalance()'s allowance for lightly
//! loaded nodes), or the load balancer would only undo it; with a busy
//! destination the capacity-scaled load imbalance must not grow. Otherwise
//! only a swap can help, and a pinned load worker is never a swap
//! candidate, so on a loaded machine the task sticks (sched_stick_numa)
//! and tries again at a hinting fault after numa_migrate_retry.
//!
//! Loads are in units of one always-runnable nice-0 task (1024 in the
//! kernel), capacities in CPUs (SCHED_CAPACITY_SCALE; no RT, IRQ or
//! thermal pressure): the long-run PELT sums of
//! [`super::groups::pelt_sums`]. Left out, each exact for what the engines
//! simulate unless said: task groups (task_h_load() is the task's own
//! load), the `numa_migrate_on` flag of a runqueue taking a NUMA move (one
//! migration happens at a time, at once), delayed-dequeue entities in the
//! queued count (the engines count what runs or waits: an approximation
//! for 6.12, whose sleeping workers with negative lag stay queued up to a
//! slice), and score_nearby_nodes() in task_weight() (exact where every
//! remote node is one hop away, NUMA_DIRECT; an approximation on machines
//! with more distance levels).

/// SMALLIMP: a swap must gain at least this much task weight.
const SMALLIMP: i64 = 30;
/// NUMA_IMBALANCE_MIN: the imbalance a lightly loaded node may keep.
const NUMA_IMBALANCE_MIN: i64 = 2;

/// One node as update_numa_stats() sums it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeStats {
    /// CPUs of the node (its compute capacity, one per CPU).
    pub weight: usize,
    /// CFS tasks queued on its CPUs (running or waiting).
    pub nr_running: usize,
    /// Sum of cpu_load().
    pub load: f64,
    /// Sum of cpu_util_cfs().
    pub util: f64,
    /// Sum of cpu_runnable().
    pub runnable: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

impl NodeStats {
    /// A node of `weight` CPUs with `nr_running` tasks queued now, its
    /// load workers busy `duty` of the time, and `probes` always-runnable
    /// tasks on `probe_cpus` of its CPUs, summed as long-run PELT averages
    /// ([`super::groups::pelt_sums`]; load = runnable for nice-0 tasks).
    pub fn long_run(
        weight: usize,
        nr_running: usize,
        duty: f64,
        probe_cpus: usize,
        probes: usize,
    ) -> NodeStats {
        let (util, runnable) = super::groups::pelt_sums(weight, duty, probe_cpus, probes);
        NodeStats {
            weight,
            nr_running,
            load: runnable,
            util,
            runnable,
        }
    }

    /// numa_classify() with task_numa_migrate()'s imbalance_pct.
    pub fn classify(&self, pct: u32) -> NodeType {
        let (cap, pct) = (self.weight as f64, pct as f64);
        if self.nr_running > self.weight
            && (cap * 100.0 < self.util * pct || cap * pct < self.runnable * 100.0)
        {
            return NodeType::Overloaded;
        }
        if self.nr_running < self.weight
            || (cap * 100.0 > self.util * pct && cap * pct > self.runnable * 100.0)
        {
            return NodeType::HasSpare;
        }
        NodeType::FullyBusy
    }
}

/// task_numa_migrate()'s imbalance_pct: halfway from 100 to that of the
/// lowest NUMA domain of the task's CPU.
pub fn migrate_pct(sd_numa_pct: u32) -> u32 {
    100 + sd_numa_pct.saturating_sub(100) / 2
}

/// adjust_numa_imbalance(): a destination running at most `imb_numa_nr`
/// tasks may keep an imbalance of up to NUMA_IMBALANCE_MIN.
pub fn adjust_numa_imbalance(imbalance: i64, dst_running: i64, imb_numa_nr: u32) -> i64 {
    if dst_running > imb_numa_nr as i64 {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        0
    } else {
        imbalance
    }
}

/// load_too_imbalanced(): whether moving load to make the nodes'
/// loads `src_load` and `dst_load` leaves them more unbalanced (scaled by
/// each other's capacity) than they are.
pub fn load_too_imbalanced(src_load: f64, dst_load: f64, src: &NodeStats, dst: &NodeStats) -> bool {
    let (sc, dc) = (src.weight as f64, dst.weight as f64);
    let imb = (dst_load * sc - src_load * dc).abs();
    let old = (dst.load * sc - src.load * dc).abs();
    imb > old
}

/// task_numa_find_cpu()'s `maymove`: whether the task (load `task_load`,
/// counted in `src`) may move to an idle CPU of `dst` rather than only
/// swap with a task there.
pub fn may_move(
    src: &NodeStats,
    dst: &NodeStats,
    task_load: f64,
    imb_numa_nr: u32,
    pct: u32,
) -> bool {
    if dst.classify(pct) == NodeType::HasSpare {
        // "Would movement cause an imbalance?"
        let src_running = src.nr_running as i64 - 1;
        let dst_running = dst.nr_running as i64 + 1;
        let imbalance = (dst_running - src_running).max(0);
        adjust_numa_imbalance(imbalance, dst_running, imb_numa_nr) == 0
    } else {
        !load_too_imbalanced(src.load - task_load, dst.load + task_load, src, dst)
    }
}

/// update_numa_stats()'s idle CPU of a node (`cpus` in the kernel's
/// order): the first idle CPU whose whole core is idle, else the first
/// idle CPU. `idle(c)`: nothing queued on `c` and the task may run there.
pub fn idle_cpu(
    cpus: &[usize],
    idle: impl Fn(usize) -> bool,
    core_idle: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut first = None;
    for &c in cpus {
        if !idle(c) {
            continue;
        }
        // numa_idle_core(): has_idle_cores is set whenever a CPU enters
        // idle on an idle core, and nothing here clears it (the pinned
        // workers never search for an idle CPU on wake-up).
        if core_idle(c) {
            return Some(c);
        }
        first.get_or_insert(c);
    }
    first
}

/// What task_numa_compare() knows of a running task `cur` on the
/// destination that could swap with ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwapCandidate {
    /// cur's task_weight() on our node and on its own (0-1000).
    pub weight_src: i64,
    pub weight_dst: i64,
    /// cur's preferred node is ours (`src`) / its own (`dst`).
    pub prefers_src: bool,
    pub prefers_dst: bool,
}

/// task_numa_compare()'s improvement from swapping with `cur`, for tasks
/// without a numa_group (each job is a process of its own); None where the
/// kernel skips the candidate before weighing it: spare capacity at the
/// destination ("swapping does not address the load imbalance and helps
/// one task at the cost of punishing another").
pub fn swap_imp(task_imp: i64, cur: &SwapCandidate, dst_type: NodeType) -> Option<i64> {
    if dst_type == NodeType::HasSpare {
        return None;
    }
    let mut imp = task_imp + cur.weight_src - cur.weight_dst;
    if cur.prefers_dst {
        imp -= imp / 16;
    }
    if cur.prefers_src {
        imp += imp / 8;
    }
    Some(imp)
}

/// Whether a weighed swap is worth it against the best so far
/// (SMALLIMP, and half of it above the best).
pub fn swap_worth(imp: i64, best_imp: i64) -> bool {
    imp >= SMALLIMP && imp > best_imp + SMALLIMP / 2
}

/// The running task of a destination CPU, as task_numa_compare() sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curr {
    /// Nothing runs there.
    Idle,
    /// A task that may not run on the source CPU (a pinned worker).
    Fixed,
    /// Task `id`, which could swap with ours.
    Task(usize, SwapCandidate),
}

/// What task_numa_migrate() reads of the machine, for the task that
/// migrates (each engine provides it).
pub trait NumaView {
    fn nodes(&self) -> usize;
    /// The node's CPUs in the kernel's order.
    fn node_cpus(&self, node: usize) -> &[usize];
    /// update_numa_stats() of `node`, the task counted where it runs.
    fn node_stats(&self, node: usize) -> NodeStats;
    /// The task may run on `cpu`.
    fn allowed(&self, cpu: usize) -> bool;
    /// Nothing is queued on `cpu`.
    fn idle(&self, cpu: usize) -> bool;
    /// Every CPU of `cpu`'s core is idle.
    fn core_idle(&self, cpu: usize) -> bool;
    /// `cpu`'s running task, weighed for a swap from `src` to `dst`.
    fn curr(&self, cpu: usize, src: usize, dst: usize) -> Curr;
    /// The task's task_weight() on `node`.
    fn weight(&self, node: usize) -> i64;
}

/// task_numa_migrate()'s outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Move(usize),
    /// Swap with task `.1` running on CPU `.0`.
    Swap(usize, usize),
    /// sched_stick_numa: no better CPU than the current one.
    Stick,
}

#[derive(Default)]
struct Best {
    cpu: Option<usize>,
    /// The swap partner and whether it prefers the source node.
    task: Option<(usize, bool)>,
    imp: i64,
}

/// task_numa_migrate() of the task on CPU `cpu` of `m` toward node `pref`,
/// with the lowest NUMA domain of that CPU (per_cpu(sd_numa)); None where
/// the CPU has no NUMA domain (cpusets cut the machine), where the kernel
/// gives up without a stick.
pub fn migrate(
    v: &impl NumaView,
    m: &super::machine::Machine,
    cpu: usize,
    pref: usize,
) -> Option<Choice> {
    let sd = m.cpu_domains[cpu]
        .iter()
        .map(|&d| &m.domains[d])
        .find(|d| d.is_numa())?;
    let pct = migrate_pct(sd.imbalance_pct);
    Some(task_numa_migrate(v, m.node[cpu], pref, sd.imb_numa_nr, pct))
}

/// task_numa_migrate() of a task on node `src` whose preferred node is
/// `pref`, with the lowest NUMA domain's `imb_numa_nr` and
/// task_numa_migrate()'s `pct` ([`migrate_pct`]). Failing on the preferred
/// node it tries every other node in order, as the kernel does for a task
/// without a numa_group (whose group improvement is 0, never negative): a
/// second-choice node with spare capacity and an idle CPU takes it even
/// with none of its memory there, and the last such node met wins.
pub fn task_numa_migrate(
    v: &impl NumaView,
    src: usize,
    pref: usize,
    imb_numa_nr: u32,
    pct: u32,
) -> Choice {
    let mut best = Best::default();
    let src_stats = v.node_stats(src);
    let taskweight = v.weight(src);
    let ctx = Ctx {
        src,
        src_stats,
        imb_numa_nr,
        pct,
    };
    find_cpu(v, &ctx, &mut best, pref, v.weight(pref) - taskweight);
    if best.cpu.is_none() {
        for nid in 0..v.nodes() {
            if nid != src && nid != pref {
                find_cpu(v, &ctx, &mut best, nid, v.weight(nid) - taskweight);
            }
        }
    }
    match (best.cpu, best.task) {
        (None, _) => Choice::Stick,
        (Some(c), None) => Choice::Move(c),
        (Some(c), Some((j, _))) => Choice::Swap(c, j),
    }
}

struct Ctx {
    src: usize,
    src_stats: NodeStats,
    imb_numa_nr: u32,
    pct: u32,
}

/// task_numa_find_cpu() on node `dst`.
fn find_cpu(v: &impl NumaView, ctx: &Ctx, best: &mut Best, dst: usize, taskimp: i64) {
    let stats = v.node_stats(dst);
    let ty = stats.classify(ctx.pct);
    let cpus = v.node_cpus(dst);
    let idle = idle_cpu(cpus, |c| v.allowed(c) && v.idle(c), |c| v.core_idle(c));
    // task_h_load() of an always-runnable nice-0 task with no task group
    // above it (no autogroup, no cpu controller): one task's load.
    let maymove = may_move(&ctx.src_stats, &stats, 1.0, ctx.imb_numa_nr, ctx.pct);
    if let (NodeType::HasSpare, true, Some(c)) = (ty, maymove, idle) {
        // "Use idle CPU if there is no imbalance", whatever it gains.
        *best = Best {
            cpu: Some(c),
            task: None,
            imp: 0,
        };
        return;
    }
    for &c in cpus {
        if v.allowed(c) && compare(v, ctx, best, c, dst, ty, idle, taskimp, maymove) {
            break;
        }
    }
}

/// task_numa_compare() of destination CPU `c`; true stops the search.
#[allow(clippy::too_many_arguments)]
fn compare(
    v: &impl NumaView,
    ctx: &Ctx,
    best: &mut Best,
    c: usize,
    dst: usize,
    ty: NodeType,
    idle: Option<usize>,
    moveimp: i64,
    maymove: bool,
) -> bool {
    // A move to an idle CPU: the node's cached idle CPU, else this one,
    // unless this one is busy now and the best so far is idle.
    let to_idle = |best: &mut Best, imp: i64| {
        let mut cpu = idle.unwrap_or(c);
        if let Some(b) = best.cpu.filter(|&b| !v.idle(cpu) && v.idle(b)) {
            cpu = b;
        }
        *best = Best {
            cpu: Some(cpu),
            task: None,
            imp,
        };
        maymove && best.cpu.is_some_and(|b| v.idle(b))
    };
    let (j, cand) = match v.curr(c, ctx.src, dst) {
        Curr::Idle if maymove && moveimp >= best.imp => return to_idle(best, moveimp),
        Curr::Idle | Curr::Fixed => return false,
        Curr::Task(j, cand) => (j, cand),
    };
    if best.task.is_some_and(|(_, p)| p) && !cand.prefers_src {
        return false;
    }
    let Some(imp) = swap_imp(moveimp, &cand, ty) else {
        return false;
    };
    if maymove && moveimp > imp && moveimp > best.imp {
        return to_idle(best, moveimp);
    }
    let preferred_swap = best.task.is_some_and(|(_, p)| !p) && cand.prefers_src;
    if !preferred_swap && !swap_worth(imp, best.imp) {
        return false;
    }
    // Two always-runnable nice-0 tasks: their task_h_load() differ by a
    // few units of 1024 at most, taken as 0, which skips the load check
    // (the kernel's, with a difference of one unit, could refuse a swap
    // between exactly balanced nodes).
    *best = Best {
        cpu: Some(c),
        task: Some((j, cand.prefers_src)),
        imp,
    };
    !maymove && cand.prefers_src
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node of `w` CPUs with `busy` 60% workers running now and
    /// `probes` always-runnable tasks, as the engines sum it.
    fn node(w: usize, busy: usize, probes: usize) -> NodeStats {
        NodeStats::long_run(w, busy + probes, 0.6, probes, probes)
    }

    #[test]
    fn the_xeon_pct_is_halfway_to_the_numa_domains() {
        // sd_init(): 117 for every level but SMT; task_numa_migrate()
        // halves the excess.
        assert_eq!(migrate_pct(117), 108);
    }

    #[test]
    fn a_loaded_node_with_spare_capacity_takes_the_task_only_when_it_runs_fewer() {
        // Xeon nodes of 52 CPUs, imb_numa_nr 2: the probe and 31 running
        // workers on its node. As many running on the preferred node: the
        // move would leave 32 there against 31 here, an imbalance the load
        // balancer would undo; stick.
        let src = node(52, 31, 1);
        assert_eq!(src.classify(108), NodeType::HasSpare);
        assert!(!may_move(&src, &node(52, 31, 0), 1.0, 2, 108));
        // One fewer there: 31 against 31.
        assert!(may_move(&src, &node(52, 30, 0), 1.0, 2, 108));
    }

    #[test]
    fn a_lightly_loaded_destination_keeps_a_small_imbalance() {
        // A 2-node guest (2 CPUs a node, imb_numa_nr 2): one busy worker
        // at the destination, none at the source. The move makes it 2
        // against 0, within NUMA_IMBALANCE_MIN while the destination runs
        // at most imb_numa_nr.
        assert!(may_move(&node(2, 0, 1), &node(2, 1, 0), 1.0, 2, 108));
        // The same imbalance of 2 is refused where the destination would
        // run more than imb_numa_nr tasks: 4 there against 2 here.
        assert!(!may_move(&node(52, 2, 1), &node(52, 3, 0), 1.0, 2, 108));
        assert_eq!(adjust_numa_imbalance(3, 2, 2), 3);
    }

    #[test]
    fn a_busy_destination_takes_the_task_only_if_the_load_evens_out() {
        // Two full nodes of 4 CPUs at 100%: 4 workers each (loads 4), the
        // task on the source. Moving it turns 5:4 into 4:5, no worse.
        let full = |tasks: usize| NodeStats {
            weight: 4,
            nr_running: tasks,
            load: tasks as f64,
            util: 4.0,
            runnable: tasks as f64,
        };
        assert_eq!(full(5).classify(108), NodeType::Overloaded);
        assert_eq!(full(4).classify(108), NodeType::FullyBusy);
        assert!(may_move(&full(5), &full(4), 1.0, 2, 108));
        // 5:5 would become 4:6: worse.
        assert!(!load_too_imbalanced(4.0, 5.0, &full(5), &full(4)));
        assert!(load_too_imbalanced(4.0, 6.0, &full(5), &full(5)));
        assert!(!may_move(&full(5), &full(5), 1.0, 2, 108));
    }

    #[test]
    fn the_idle_cpu_is_the_first_on_an_idle_core() {
        // CPUs 0-3 as two cores, (0,2) and (1,3).
        let pick = |busy: &[usize]| {
            let idle = |c: usize| !busy.contains(&c);
            idle_cpu(&[0, 1, 2, 3], idle, |c| idle(c) && idle(c ^ 2))
        };
        // 2 busy: CPU 0 is idle but its sibling is not; 1's core is idle.
        assert_eq!(pick(&[2]), Some(1));
        // 0 and 3 busy: no idle core; the first idle CPU.
        assert_eq!(pick(&[0, 3]), Some(1));
        assert_eq!(pick(&[0, 1]), Some(2));
        assert_eq!(pick(&[0, 1, 2, 3]), None);
    }

    #[test]
    fn a_swap_needs_a_busy_destination_and_a_real_gain() {
        let cur = SwapCandidate {
            weight_src: 800,
            weight_dst: 200,
            prefers_src: true,
            prefers_dst: false,
        };
        assert_eq!(swap_imp(600, &cur, NodeType::HasSpare), None);
        // 600 + 800 - 200 = 1200, +1/8 for a task moving to its own node.
        assert_eq!(swap_imp(600, &cur, NodeType::FullyBusy), Some(1350));
        assert!(swap_worth(1350, 0));
        assert!(!swap_worth(29, 0));
        assert!(!swap_worth(40, 30));
    }

    /// A machine of `nodes` x `per` CPUs (one thread a core) for
    /// task_numa_migrate(): `busy` CPUs run a pinned worker, `tasks` run
    /// another job ((cpu, its weight here, there; prefers here)), the
    /// migrating task runs on CPU 0 with `weights` per node.
    struct Fake {
        per: usize,
        cpus: Vec<Vec<usize>>,
        busy: Vec<usize>,
        tasks: Vec<(usize, i64, i64, bool)>,
        weights: Vec<i64>,
    }

    impl Fake {
        fn new(nodes: usize, per: usize, busy: Vec<usize>, weights: Vec<i64>) -> Fake {
            let cpus = (0..nodes)
                .map(|n| (n * per..(n + 1) * per).collect())
                .collect();
            Fake {
                per,
                cpus,
                busy,
                tasks: vec![],
                weights,
            }
        }
    }

    impl NumaView for Fake {
        fn nodes(&self) -> usize {
            self.cpus.len()
        }
        fn node_cpus(&self, node: usize) -> &[usize] {
            &self.cpus[node]
        }
        fn node_stats(&self, node: usize) -> NodeStats {
            let n = self.cpus[node]
                .iter()
                .filter(|&&c| c == 0 || !self.idle(c))
                .count();
            NodeStats {
                weight: self.per,
                nr_running: n,
                load: n as f64,
                util: n as f64,
                runnable: n as f64,
            }
        }
        fn allowed(&self, _: usize) -> bool {
            true
        }
        fn idle(&self, c: usize) -> bool {
            c != 0 && !self.busy.contains(&c) && !self.tasks.iter().any(|t| t.0 == c)
        }
        fn core_idle(&self, c: usize) -> bool {
            self.idle(c)
        }
        fn curr(&self, c: usize, _: usize, _: usize) -> Curr {
            match self.tasks.iter().position(|t| t.0 == c) {
                Some(k) => {
                    let (_, w_src, w_dst, prefers_src) = self.tasks[k];
                    Curr::Task(
                        k,
                        SwapCandidate {
                            weight_src: w_src,
                            weight_dst: w_dst,
                            prefers_src,
                            prefers_dst: !prefers_src,
                        },
                    )
                }
                None if self.idle(c) => Curr::Idle,
                None => Curr::Fixed,
            }
        }
        fn weight(&self, node: usize) -> i64 {
            self.weights[node]
        }
    }

    #[test]
    fn refused_by_its_preferred_node_the_task_takes_a_second_choice_with_room() {
        // Three nodes of 4 CPUs; the task alone on node 0 with all its
        // faults on node 1, where three workers run: 4 there against 0
        // here would be an imbalance. Node 2 is idle: the kernel moves the
        // task there, to a node holding none of its memory.
        let v = Fake::new(3, 4, vec![4, 5, 6], vec![0, 1000, 0]);
        assert_eq!(task_numa_migrate(&v, 0, 1, 1, 108), Choice::Move(8));
        // With node 2 as busy as node 1 it sticks.
        let v = Fake::new(3, 4, vec![4, 5, 6, 8, 9, 10], vec![0, 1000, 0]);
        assert_eq!(task_numa_migrate(&v, 0, 1, 1, 108), Choice::Stick);
        // Room on the preferred node: it goes there, to the idle CPU.
        let v = Fake::new(3, 4, vec![], vec![0, 1000, 0]);
        assert_eq!(task_numa_migrate(&v, 0, 1, 1, 108), Choice::Move(4));
    }

    #[test]
    fn on_full_nodes_the_task_swaps_with_one_that_prefers_its_node() {
        // Two full nodes of 2 CPUs: the task and a worker on node 0; on
        // node 1 a worker (CPU 2) and a job (CPU 3) whose faults are all on
        // node 0. Moving alone would unbalance the loads (1:3); swapping
        // gains both.
        let mut v = Fake::new(2, 2, vec![1, 2], vec![100, 900]);
        v.tasks = vec![(3, 1000, 0, true)];
        assert_eq!(v.node_stats(1).classify(108), NodeType::FullyBusy);
        assert_eq!(task_numa_migrate(&v, 0, 1, 2, 108), Choice::Swap(3, 0));
        // A partner with nothing to gain from the swap: 800 - 0 + (0 -
        // 1000) is below SMALLIMP.
        v.tasks = vec![(3, 0, 1000, false)];
        assert_eq!(task_numa_migrate(&v, 0, 1, 2, 108), Choice::Stick);
    }
}
