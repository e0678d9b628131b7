//! The several-probe engine on cases with a known answer, and its
//! invariants.

use super::*;
use crate::sim::balance::{sibling_imbalance, Kind};
use crate::sim::groups::GroupStats;
use crate::sim::multi_lb::{self, decide, Imbalance, Stats};
use crate::sim::{load::LoadModel, Machine, Profile};
use crate::topology::presets;

const PERIOD: f64 = 20_618_000.0;

fn machine(preset: &str) -> Machine {
    Machine::new(&presets::find(preset).unwrap().topology()).unwrap()
}

fn spec(jobs: Vec<Job>, nb: bool, seed: u64) -> JobsSpec {
    JobsSpec {
        jobs,
        numa: NumaKnobs {
            enabled: nb,
            ..NumaKnobs::default()
        },
        migration_cost_ns: 500_000.0,
        scope: Default::default(),
        load_policy: Default::default(),
        buffer_bytes: 8 << 20,
        page_bytes: 4096,
        accesses_per_iteration: 1 << 19,
        iterations: 3,
        seed,
        noise_seed: seed,
    }
}

fn float_jobs(m: &Machine, n: usize) -> Vec<Job> {
    (0..n)
        .map(|_| Job {
            allowed: (0..m.len()).collect(),
            mem: MemPolicy::Float,
            forced: None,
            touch_first: false,
        })
        .collect()
}

fn run(m: &Machine, p: &Profile, load: f64, s: &JobsSpec) -> JobsResult {
    let lm = LoadModel::new(m, load, PERIOD);
    Multi::new(m, p, &lm, s).run()
}

#[test]
fn alone_each_job_runs_at_the_cost_models_speed_on_its_own_cpu() {
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    // Fewer jobs than cores, no load: each gets a CPU of its own, never
    // moves, and every pass costs what the cache model says.
    let s = spec(float_jobs(&m, 8), false, 3);
    let r = run(&m, &p, 0.0, &s);
    let per_access = p.access_ns(8 << 20, p.dram_ns(10));
    let mut cpus = std::collections::BTreeSet::new();
    for (k, j) in r.jobs.iter().enumerate() {
        // Each job's own machine noise on the model's time per access.
        let want = per_access * p.speed_factor(s.seed, k as u64) * (1u64 << 19) as f64;
        assert!(j.moves.is_empty(), "job {k} moved: {:?}", j.moves);
        assert!(
            cpus.insert(j.start_cpu),
            "two jobs share CPU {}",
            j.start_cpu
        );
        assert_eq!(j.iterations_ns.len(), 3);
        for &it in &j.iterations_ns {
            // Local memory; an SMT sibling's job may slow it (smt_share).
            assert!(
                it as f64 >= want * (1.0 - 1e-9) - 2.0 && it as f64 <= want / p.cpu.smt_share + 2.0,
                "job {k}: {it} vs {want}"
            );
        }
    }
}

#[test]
fn twice_as_many_jobs_as_cpus_share_them_and_time_adds_up() {
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let n = 2 * m.len();
    let s = spec(float_jobs(&m, n), false, 11);
    let r = run(&m, &p, 0.0, &s);
    let busy: u64 = r.jobs.iter().flat_map(|j| j.run_ns.iter()).sum();
    // Every CPU is busy until the first job ends, never more than busy.
    let first_end = r.jobs.iter().map(|j| j.end_ns).min().unwrap();
    assert!(busy <= r.wall_ns * m.len() as u64 + n as u64);
    assert!(
        busy >= first_end * m.len() as u64 * 99 / 100,
        "{busy} vs {first_end}"
    );
    // Sharing halves the speed: the wall is about two jobs' work.
    let alone: u64 = r
        .jobs
        .iter()
        .map(|j| j.run_ns.iter().sum::<u64>())
        .min()
        .unwrap();
    assert!(
        r.wall_ns as f64 > 1.8 * alone as f64,
        "wall {} vs one job's CPU time {alone}",
        r.wall_ns
    );
}

#[test]
fn pinned_jobs_never_leave_their_cpus_under_load_and_numa_balancing() {
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let node1 = m.node_cpus[1].clone();
    let jobs = (0..12)
        .map(|_| Job {
            allowed: node1.clone(),
            mem: MemPolicy::Bind(0),
            forced: None,
            touch_first: false,
        })
        .collect();
    let s = spec(jobs, true, 5);
    let r = run(&m, &p, 60.0, &s);
    for (k, j) in r.jobs.iter().enumerate() {
        for mv in j.moves.iter().filter(|mv| mv.cause != Cause::Affinity) {
            assert!(node1.contains(&mv.to), "job {k} moved off node 1: {mv:?}");
        }
        for (c, &ns) in j.run_ns.iter().enumerate() {
            if ns > 0 && !node1.contains(&c) {
                // Only before the probe set its affinity (exec placement).
                assert_eq!(c, j.start_cpu, "job {k} ran on CPU {c}");
            }
        }
    }
}

#[test]
fn a_seed_decides_the_result() {
    let m = machine("epyc-7551-8n");
    let p = Profile::load("epyc-7551").unwrap();
    let s = spec(float_jobs(&m, 16), true, 9);
    let a = run(&m, &p, 50.0, &s);
    let b = run(&m, &p, 50.0, &s);
    let key = |r: &JobsResult| -> Vec<(u64, usize, Vec<u64>)> {
        r.jobs
            .iter()
            .map(|j| (j.end_ns, j.moves.len(), j.run_ns.clone()))
            .collect()
    };
    assert_eq!(key(&a), key(&b));
    assert_eq!(a.events, b.events);
    let c = run(&m, &p, 50.0, &spec(float_jobs(&m, 16), true, 10));
    assert_ne!(key(&a), key(&c), "another seed, another run");
}

#[test]
fn jobs_starting_together_spread_over_the_nodes() {
    // sched_balance_exec() puts each on the node with the most idle CPUs.
    let m = machine("epyc-7551-8n");
    let p = Profile::load("epyc-7551").unwrap();
    let s = spec(float_jobs(&m, 8), false, 1);
    let r = run(&m, &p, 0.0, &s);
    let nodes: std::collections::BTreeSet<usize> =
        r.jobs.iter().map(|j| m.node[j.start_cpu]).collect();
    assert_eq!(nodes.len(), 8, "one job per node");
}

fn st(weight: usize, nr: usize, idle: usize, load: f64) -> Stats {
    Stats {
        g: GroupStats {
            weight,
            cores: weight,
            nr_running: nr,
            idle_cpus: idle,
        },
        load,
    }
}

#[test]
fn an_overloaded_node_gives_tasks_to_an_idle_one_by_spare_capacity() {
    let m = machine("xeon-8167m-2n");
    // The NUMA domain of CPU 0: two node groups of 52 CPUs.
    let d = *m.cpu_domains[0].last().unwrap();
    let dom = &m.domains[d];
    assert!(dom.is_numa());
    let local = st(52, 10, 42, 10.0);
    let busiest = st(52, 60, 0, 60.0);
    assert_eq!(
        decide(&local, &busiest, 35.0 / 52.0, dom, Kind::Idle),
        Some(Imbalance::Util(42.0))
    );
    // Not overloaded: prefer_sibling (from the node's child domains)
    // forces the balance by tasks per core, halved, for an idle CPU; a busy
    // one leaves it to an idle one (sibling_imbalance() is 0 for it, and a
    // group that is not overloaded is out_balanced for a busy puller).
    assert!(dom.prefer_sibling);
    let busiest = st(52, 40, 12, 40.0);
    assert_eq!(
        decide(&local, &busiest, 0.5, dom, Kind::Idle),
        Some(Imbalance::Tasks(15.0))
    );
    assert_eq!(decide(&local, &busiest, 0.5, dom, Kind::Busy), None);
    assert_eq!(sibling_imbalance(&busiest.g, &local.g, false), 0);
    // One task apart: a busy CPU leaves it, an idle one too (one more idle
    // CPU is not worth a move).
    let busiest = st(52, 11, 41, 11.0);
    assert_eq!(decide(&local, &busiest, 0.2, dom, Kind::Busy), None);
    assert_eq!(decide(&local, &busiest, 0.2, dom, Kind::Idle), None);
}

#[test]
fn overloaded_groups_even_out_their_load() {
    let m = machine("xeon-8167m-2n");
    let d = *m.cpu_domains[0].last().unwrap();
    let dom = &m.domains[d];
    assert_eq!(dom.imbalance_pct, 117);
    // 72 vs 60 tasks on 52 CPUs is past imbalance_pct (120% > 117%): move
    // half the difference.
    let (local, busiest) = (st(52, 60, 0, 60.0), st(52, 72, 0, 72.0));
    let avg = 132.0 / 104.0;
    match decide(&local, &busiest, avg, dom, Kind::Busy) {
        Some(Imbalance::Load(v)) => assert!((v - 6.0).abs() < 1e-9, "{v}"),
        other => panic!("{other:?}"),
    }
    // 70 vs 60 is within it (116.7%): balanced.
    let (local, busiest) = (st(52, 60, 0, 60.0), st(52, 70, 0, 70.0));
    assert_eq!(
        decide(&local, &busiest, 130.0 / 104.0, dom, Kind::Busy),
        None
    );
}

#[test]
fn a_cpu_busy_when_its_domain_came_due_balances_at_the_idle_interval_once_idle() {
    // The bug: the next balance time was fixed when the CPU was busy
    // (busy_factor x 16 the interval), so a CPU that went idle waited that
    // long; rebalance_domains() measures the interval for the CPU's state
    // at each tick from the last balance.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(Vec::new(), false, 1);
    let mut e = Multi::new(&m, &p, &lm, &s);
    let mc = 1; // the LLC level of a CPU of this machine (SMT, MC, NUMA)
    e.t = 1e9;
    e.set_rq(0, true, 0);
    e.rqs[0].curr = Some(Ent::Worker);
    crate::sim::multi_lb::periodic(&mut e, &mut Vec::new());
    assert_eq!(e.last_balance[0][mc], 1e9);
    // That attempt found balance, so the interval doubled
    // (sched_balance_rq()'s out_balanced: up to max_interval).
    assert!(e.relaxed[0][mc]);
    e.set_rq(0, false, 0);
    e.rqs[0].curr = None;
    let iv = m.domains[m.cpu_domains[0][mc]].interval_ns as f64;
    e.t = 1e9 + iv + 4e6;
    crate::sim::multi_lb::periodic(&mut e, &mut Vec::new());
    assert_eq!(
        e.last_balance[0][mc], 1e9,
        "not due before twice the interval"
    );
    e.t = 1e9 + 2.0 * iv + 4e6;
    crate::sim::multi_lb::periodic(&mut e, &mut Vec::new());
    assert_eq!(e.last_balance[0][mc], e.t, "due at the idle interval");
}

#[test]
fn the_crowded_count_is_the_cpus_running_two_tasks_and_keeps_the_root_domain_overloaded() {
    // Newly-idle balancing runs only while the root domain is overloaded,
    // and the flag is reset from the crowded count at each root-level
    // balance, so the count must follow every runqueue change: checked
    // every 100 events through runs with sharing, moves, NUMA balancing and
    // exits. While a CPU is crowded the flag cannot be down.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 60.0, PERIOD);
    for seed in 1..4 {
        let s = spec(float_jobs(&m, 150), true, seed);
        let mut e = Multi::new(&m, &p, &lm, &s);
        e.begin();
        let mut checks = 0;
        while e.advance(100) {
            let crowded = e.rqs.iter().filter(|rq| rq.nr_running() >= 2).count();
            assert_eq!(e.crowded, crowded, "seed {seed} at {}", e.t);
            assert!(e.overloaded || crowded == 0, "seed {seed} at {}", e.t);
            checks += 1;
        }
        assert!(checks > 10);
        let r = e.result();
        assert!(r.jobs.iter().all(|j| j.iterations_ns.len() == 3));
        let on_cpu: u64 = r.jobs.iter().flat_map(|j| j.run_ns.iter()).sum();
        assert!(on_cpu <= r.wall_ns * m.len() as u64 + 150, "time adds up");
    }
}

#[test]
fn a_probe_left_behind_its_pinned_worker_flags_the_group_above_until_a_balanced_attempt() {
    // sched_balance_rq(): an attempt that meets a task it may not move
    // (LBF_SOME_PINNED) and leaves imbalance sets the imbalance flag of its
    // parent domain's local group; group_classify() calls that group
    // imbalanced, update_sd_pick_busiest() ranks it above an SMT core of
    // two busy workers, and an attempt that ends balanced clears it.
    // (The profile's kernel.group_imbalance turns it on.)
    let m = machine("xeon-8167m-2n");
    let mut p = Profile::load("xeon-8167m").unwrap();
    assert!(!p.kernel.group_imbalance, "off by default");
    p.kernel.group_imbalance = true;
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(float_jobs(&m, 1), false, 1);
    let mut e = Multi::new(&m, &p, &lm, &s);
    let busy = |e: &mut Multi, c: usize| {
        e.set_rq(c, true, 0);
        e.join(c, Ent::Worker);
    };
    // CPU 0 runs the probe with its worker queued; x is its SMT sibling
    // (idle); y (CPU 2) is idle in another core of node 0, and core 3, met
    // before the probe's from y, has both workers busy.
    let (x, y) = (m.siblings[0][0], 2);
    assert_eq!(m.siblings[3].len(), 1);
    e.t = 1e9;
    e.start(0, 0);
    busy(&mut e, 0);
    busy(&mut e, 3);
    busy(&mut e, m.siblings[3][0]);
    let (smt, mc) = (0, 1);
    let core = m.domains[m.cpu_domains[x][smt]].span;
    let node = m.domains[m.cpu_domains[y][mc]].span;
    assert_eq!(m.span(core), &[0, x][..]);
    // Unflagged, y's busiest group is core 3: nothing there to take, no
    // CPU with two tasks, no flag.
    assert!(!multi_lb::try_balance(&mut e, y, mc, Kind::NewlyIdle));
    assert!(!e.group_imbalance[core] && !e.group_imbalance[node]);
    // x finds the probe running: it stays, the worker is pinned, the core
    // is flagged.
    assert!(!multi_lb::try_balance(&mut e, x, smt, Kind::NewlyIdle));
    assert!(e.group_imbalance[core], "flagged by the SMT attempt");
    // Now the flagged core is y's busiest: still running, the probe stays
    // and y flags its node.
    assert!(!multi_lb::try_balance(&mut e, y, mc, Kind::NewlyIdle));
    assert!(e.group_imbalance[node], "flagged by the MC attempt");
    // The worker's turn: the probe waits, cold (ran 1 ms ago), and y takes
    // it from the flagged core.
    e.leave(0, Ent::Task(0));
    e.join(0, Ent::Task(0));
    e.tasks[0].last_ran = e.t - 1e6;
    assert!(multi_lb::try_balance(&mut e, y, mc, Kind::NewlyIdle));
    assert_eq!(e.tasks[0].cpu, y);
    // x's next attempt finds one task on CPU 0: balanced, the flag goes.
    assert!(!multi_lb::try_balance(&mut e, x, smt, Kind::NewlyIdle));
    assert!(!e.group_imbalance[core], "cleared by a balanced attempt");
    let flags = e.group_imbalance.iter().filter(|&&f| f).count();
    assert_eq!(flags, 1, "the node's flag is left");
}

#[test]
fn a_probe_just_preempted_is_not_cache_hot_for_its_smt_sibling() {
    // task_hot(): "SMT siblings share cache" (SD_SHARE_CPUCAPACITY) comes
    // before the migration_cost_ns test, so the sibling takes a probe that
    // stopped running this instant; another core of the LLC may not. The
    // sim used to call it hot at every level.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(float_jobs(&m, 1), false, 1);
    let (smt, mc) = (0, 1);
    let (x, y) = (m.siblings[0][0], 2);
    let mut e = Multi::new(&m, &p, &lm, &s);
    e.t = 1e9;
    e.start(0, 0);
    e.set_rq(0, true, 0);
    e.join(0, Ent::Worker);
    // The worker's turn: the probe waits, having run until now.
    e.leave(0, Ent::Task(0));
    e.join(0, Ent::Task(0));
    e.tasks[0].last_ran = e.t;
    assert!(
        !multi_lb::try_balance(&mut e, y, mc, Kind::NewlyIdle),
        "hot for another core"
    );
    assert_eq!(e.tasks[0].cpu, 0);
    assert!(
        multi_lb::try_balance(&mut e, x, smt, Kind::NewlyIdle),
        "not hot for the sibling"
    );
    assert_eq!(e.tasks[0].cpu, x);
}

#[test]
fn task_hot_follows_the_kernels_order() {
    use crate::sim::balance::task_hot;
    use crate::sim::machine::LevelKind;
    assert!(!task_hot(LevelKind::Smt, 0.0, 500_000.0));
    assert!(!task_hot(LevelKind::Smt, 0.0, -1.0), "SMT comes before -1");
    assert!(task_hot(LevelKind::Mc, 499_999.0, 500_000.0));
    assert!(!task_hot(LevelKind::Mc, 500_000.0, 500_000.0));
    assert!(task_hot(LevelKind::Numa(21), 1e12, -1.0));
    assert!(!task_hot(LevelKind::Pkg, 0.0, 0.0));
}

/// A domain of `kind` for decide(), its other fields as sd_init() sets them.
fn domain(
    kind: crate::sim::machine::LevelKind,
    prefer_sibling: bool,
    imb_numa_nr: u32,
) -> crate::sim::machine::Domain {
    crate::sim::machine::Domain {
        kind,
        span: 0,
        groups: Vec::new(),
        weight: 0,
        imbalance_pct: 117,
        cache_nice_tries: 1,
        prefer_sibling,
        imb_numa_nr,
        interval_ns: 1_000_000,
    }
}

fn g(weight: usize, cores: usize, nr: usize, idle: usize) -> Stats {
    Stats {
        g: GroupStats {
            weight,
            cores,
            nr_running: nr,
            idle_cpus: idle,
        },
        load: nr as f64,
    }
}

#[test]
fn idle_cpus_pull_only_what_calculate_imbalance_gives() {
    use crate::sim::machine::LevelKind;
    let pulls = |l: Stats, b: Stats, dom: &crate::sim::machine::Domain| {
        decide(&l, &b, 0.5, dom, Kind::Idle).is_some()
    };
    // SMT level: groups are single CPUs; the probe's CPU has two tasks.
    let smt = domain(LevelKind::Smt, false, 0);
    assert!(pulls(g(1, 1, 0, 1), g(1, 1, 2, 0), &smt));
    assert!(!pulls(g(1, 1, 0, 1), g(1, 1, 1, 0), &smt), "one task stays");
    // MC level of an SMT machine: a core pulls only when idle as a whole.
    let mc = domain(LevelKind::Mc, true, 0);
    assert!(pulls(g(2, 1, 0, 2), g(2, 1, 2, 1), &mc));
    assert!(!pulls(g(2, 1, 1, 1), g(2, 1, 2, 1), &mc));
    // Two nodes of 52 CPUs, prefer_sibling from the LLC child: two more
    // runnable tasks move one; a lightly loaded destination keeps a small
    // imbalance (adjust_numa_imbalance).
    let numa = domain(LevelKind::Numa(21), true, 2);
    assert!(!pulls(g(52, 26, 30, 22), g(52, 26, 31, 21), &numa));
    assert!(pulls(g(52, 26, 29, 23), g(52, 26, 31, 21), &numa));
    assert!(!pulls(g(52, 26, 0, 52), g(52, 26, 2, 51), &numa));
    // An upper NUMA level (no prefer_sibling) evens idle CPUs.
    let upper = domain(LevelKind::Numa(32), false, 4);
    assert!(!pulls(g(64, 32, 38, 26), g(64, 32, 39, 25), &upper));
    assert!(pulls(g(64, 32, 35, 29), g(64, 32, 39, 25), &upper));
}

/// The engine's counts (per span, and the idle bits) against the
/// runqueues they are kept from, recounted.
fn check_counts(e: &Multi) {
    for g in 0..e.m.span_count() {
        let cpus = e.m.span(g);
        let n = e.span_count[g];
        let nr: usize = cpus.iter().map(|&c| e.rqs[c].nr_running()).sum();
        let idle = cpus.iter().filter(|&&c| e.rqs[c].nr_running() == 0).count();
        let probes: usize = cpus.iter().map(|&c| e.rqs[c].probes).sum();
        let probe_cpus = cpus.iter().filter(|&&c| e.rqs[c].probes > 0).count();
        assert_eq!(
            (n.nr_running, n.idle_cpus, n.probes, n.probe_cpus),
            (nr, idle, probes, probe_cpus),
            "span {g} at {}",
            e.t
        );
        for smt in [false, true] {
            let want =
                crate::sim::balance::group_balancer(e.m, g, smt, |c| e.rqs[c].nr_running() == 0);
            assert_eq!(e.idle.balancer(e.m, g, smt), want, "span {g} smt {smt}");
        }
    }
    // The tick passes over a CPU by its due time alone: it must be the
    // least due time of its domains, as set_due() computes it.
    let mut f = Multi::new(e.m, e.p, &e.load, e.spec);
    f.last_balance.clone_from(&e.last_balance);
    f.relaxed.clone_from(&e.relaxed);
    for c in 0..e.m.len() {
        multi_lb::set_due(&mut f, c);
        if e.last_balance[c].iter().any(|t| t.is_finite()) {
            assert_eq!(e.due_at[c], f.due_at[c], "CPU {c} at {}", e.t);
        }
    }
}

#[test]
fn span_counts_and_idle_bits_follow_the_runqueues() {
    // They are kept incrementally (a balance attempt reads them instead of
    // walking its groups' CPUs); recounted from the runqueues after every
    // event, they must agree, and should_we_balance()'s CPU from the bits
    // must be the one the walk finds.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 60.0, PERIOD);
    let s = spec(float_jobs(&m, 12), true, 2);
    let mut e = Multi::new(&m, &p, &lm, &s);
    e.begin();
    check_counts(&e);
    let mut steps = 0;
    let mut moves = 0;
    while e.advance(1) {
        steps += 1;
        let now: usize = e.tasks.iter().map(|t| t.res.moves.len()).sum();
        if now != moves || steps % 7 == 0 {
            check_counts(&e);
        }
        moves = now;
    }
    check_counts(&e);
    assert!(steps > 500 && moves > 20, "{steps} events, {moves} moves");
}

#[test]
fn a_waker_waits_for_the_first_tick_past_the_running_tasks_deadline() {
    // 6.12's EEVDF with equal weights and no lag: the running entity keeps
    // the CPU until update_curr() at a tick finds its deadline (its pick
    // plus the base slice) passed; one that arrives after the deadline has
    // passed (renewed on the spot, unprotected, tied) runs at once.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(float_jobs(&m, 1), false, 1);
    let mut e = Multi::new(&m, &p, &lm, &s);
    let (tick, b) = (e.tick_ns, e.slice_ns);
    assert!(b < tick, "HZ=250: the base slice (3 ms) is under a tick");
    e.rqs[0].picked_at = 10.5 * tick;
    // Before the deadline: to the first tick after it.
    e.t = 10.5 * tick + 0.25 * b;
    let first = ((10.5 * tick + b) / tick).ceil() * tick;
    assert_eq!(e.eevdf_switch(0), first);
    // Between the deadline and that tick: at once.
    e.t = 10.5 * tick + b + 1.0;
    assert!(e.t < first);
    assert_eq!(e.eevdf_switch(0), e.t);
    // Later, renewed at every tick (a slice under a tick): before the
    // renewed deadline, to the next tick; past it, at once.
    e.t = first + 5.0 * tick + 0.5 * b;
    assert_eq!(e.eevdf_switch(0), first + 6.0 * tick);
    e.t = first + 5.0 * tick + b + 1.0;
    assert_eq!(e.eevdf_switch(0), e.t);
}

#[test]
fn a_cpu_turned_away_at_a_level_balances_no_level_above_it_that_tick() {
    // sched_balance_domains(): should_we_balance() turning a CPU away (it
    // is not the first idle CPU of its group) clears continue_balancing,
    // and the CPU tries no higher domain in that pass: its NUMA domain is
    // left as it was, while the group's first idle CPU goes on up.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("xeon-8167m").unwrap();
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(Vec::new(), false, 1);
    let mut e = Multi::new(&m, &p, &lm, &s);
    let (mc, numa) = (1, 2); // SMT, MC, NUMA on this machine
                             // One idle core, its two threads; every other CPU busy.
    let first = 5;
    let second = *m.siblings[first].iter().find(|&&c| c != first).unwrap();
    assert!(second > first);
    for c in (0..m.len()).filter(|&c| c != first && c != second) {
        e.set_rq(c, true, 0);
        e.rqs[c].curr = Some(Ent::Worker);
    }
    e.t = 1e9;
    multi_lb::periodic(&mut e, &mut Vec::new());
    // Both balanced their SMT domain (its local group is the CPU alone).
    assert_eq!(
        (e.last_balance[first][0], e.last_balance[second][0]),
        (1e9, 1e9)
    );
    // The core's first idle CPU balances for it at MC, and then at NUMA.
    assert_eq!(e.last_balance[first][mc], 1e9);
    assert_eq!(e.last_balance[first][numa], 1e9);
    // The second was turned away at MC: its NUMA domain is untouched.
    assert_eq!(e.last_balance[second][mc], 1e9);
    assert_eq!(e.last_balance[second][numa], f64::NEG_INFINITY);
    // A busy core's second thread is turned away at MC (its core has no
    // idle CPU, so the core's first CPU balances for it), and goes no
    // higher; the first goes on to NUMA, where the idle core turns it away.
    let llc = m.span(m.domains[m.cpu_domains[first][mc]].span);
    let busy = *llc
        .iter()
        .find(|&&c| c != first && c != second && m.siblings[c].iter().any(|&s| s < c))
        .unwrap();
    let core_first = *m.siblings[busy].iter().min().unwrap();
    assert_eq!(e.last_balance[busy][numa], f64::NEG_INFINITY);
    assert_eq!(e.last_balance[core_first][numa], 1e9);
}

#[test]
fn newly_idle_balancing_counts_its_calls_only_while_the_root_domain_is_overloaded() {
    // 6.12's sched_balance_newidle() returns before its loop unless the
    // root domain is overloaded (a runqueue has had two tasks since the
    // root domain's last balance looked), and only the loop counts
    // NI_RANDOM's calls: one per domain visited, die missed or balanced.
    let m = machine("xeon-8167m-2n");
    let p = Profile::load("lab-tcg").unwrap();
    assert!(p.kernel.ni_random);
    let lm = LoadModel::new(&m, 0.0, PERIOD);
    let s = spec(Vec::new(), false, 1);
    let mut e = Multi::new(&m, &p, &lm, &s);
    let levels = m.cpu_domains[0].len();
    let calls = |e: &Multi| {
        (0..levels)
            .map(|l| e.newidle[0][l].calls())
            .collect::<Vec<_>>()
    };
    let start = calls(&e);
    multi_lb::newidle(&mut e, 0);
    assert_eq!(calls(&e), start, "not overloaded: no call counted");
    // A second task on CPU 5 (nothing there the balancer may take).
    e.set_rq(5, true, 1);
    assert!(e.overloaded && e.crowded == 1);
    multi_lb::newidle(&mut e, 0);
    let once: Vec<u32> = start.iter().map(|c| c + 1).collect();
    assert_eq!(calls(&e), once, "every domain visited, nothing pulled");
    // The flag outlives the crowding until a root-level balance looks.
    e.set_rq(5, true, -1);
    assert!(e.overloaded && e.crowded == 0);
    multi_lb::newidle(&mut e, 0);
    let twice: Vec<u32> = start.iter().map(|c| c + 2).collect();
    assert_eq!(calls(&e), twice);
    let top = levels - 1;
    let first = m.span(m.cpu_group[0][top])[0];
    multi_lb::try_balance(&mut e, first, top, Kind::Idle);
    assert!(!e.overloaded, "cleared by the root domain's balance");
    multi_lb::newidle(&mut e, 0);
    assert_eq!(calls(&e), twice);
}
